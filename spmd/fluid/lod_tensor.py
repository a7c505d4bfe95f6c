"""fluid.lod_tensor: create_lod_tensor and create_random_int_lodtensor (spmd/core/lod.py)."""
from ..core.lod import create_lod_tensor, create_random_int_lodtensor

__all__ = ["create_lod_tensor", "create_random_int_lodtensor"]
