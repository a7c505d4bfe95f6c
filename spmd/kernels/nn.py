"""Kernels: neural-network ops (softmax and losses, conv, pool, normalization, dropout, top_k,
accuracy)."""
from __future__ import annotations
