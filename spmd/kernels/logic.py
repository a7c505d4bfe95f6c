"""Kernels: logic ops."""
from __future__ import annotations
