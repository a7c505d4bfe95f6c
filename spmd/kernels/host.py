"""Kernels: host ops."""
from __future__ import annotations
