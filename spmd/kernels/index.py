"""Kernels: index ops."""
from __future__ import annotations
