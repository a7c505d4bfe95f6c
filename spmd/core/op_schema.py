"""OpSchema: how core builds and validates ops through their definitions (spmd/ops) without
importing them, as core sits below ops: spmd.ops installs its functions here when imported.

Its own module, below operator.py and the modules operator.py builds on (fluid_compat.py,
op_desc.py), which all ask it.
"""
from __future__ import annotations

__all__ = ["OpSchema", "install_op_schema"]


class OpSchema:
    """How core reaches the op definitions without importing them (core <- ops): spmd.ops
    installs `build(block, type, inputs, outputs, attrs, role, position) -> Operator` and
    `validate_attrs(type, attrs) -> dict` here when it is imported."""

    build = None
    validate_attrs = None
    # `block_attrs(type) -> {name: "block" | "blocks"}`: the attributes that name sub-blocks
    block_attrs = staticmethod(lambda type: {})


def install_op_schema(build, validate_attrs, block_attrs=None):
    OpSchema.build = staticmethod(build)
    OpSchema.validate_attrs = staticmethod(validate_attrs)
    if block_attrs is not None:
        OpSchema.block_attrs = staticmethod(block_attrs)
