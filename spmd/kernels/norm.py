"""Kernels: norm ops."""
from __future__ import annotations
