"""Kernels: vision ops."""
from __future__ import annotations
