"""fluid.nets: simple_img_conv_pool, img_conv_group, sequence_conv_pool, glu,
scaled_dot_product_attention.

>>> # import spmd.fluid as fluid
>>> # out = fluid.nets.glu(x, dim=1)
"""
from __future__ import annotations

from ..layers.nets import (
    glu,
    img_conv_group,
    scaled_dot_product_attention,
    sequence_conv_pool,
    simple_img_conv_pool,
)

__all__ = ["glu", "img_conv_group", "scaled_dot_product_attention", "sequence_conv_pool",
           "simple_img_conv_pool"]
