"""Operator: one typed op in a Block, with validated attributes and a role."""
from __future__ import annotations

from .fluid_compat import OperatorCompat
from .op_role import OpRole
from .op_schema import OpSchema, install_op_schema  # noqa: F401 - spmd.ops installs it from here


class Operator(OperatorCompat):
    """An op of `type` reading `inputs` and writing `outputs` (slot -> list of var names).

    Build ops with `Block.append_op`, which validates slots and attributes against the op's
    definition (spmd/ops) and infers output shapes. The methods below are fluid's.
    """

    def __init__(self, block, type: str, inputs: dict, outputs: dict, attrs: dict,
                 role: OpRole = OpRole.FORWARD, owner: int | None = None):
        self.block = block
        self.type = type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.role = role
        # Data parallelism in Reduce mode: the one rank that runs this op (a parameter's update
        # and its optimizer state live on its owner only); None means every rank runs it.
        self.owner = owner

    def input(self, slot: str) -> list[str]:
        return list(self.inputs.get(slot, []))

    def output(self, slot: str) -> list[str]:
        return list(self.outputs.get(slot, []))

    @property
    def input_names(self) -> list[str]:
        return list(self.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.outputs)

    @property
    def input_arg_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names]

    @property
    def output_arg_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names]

    def attr(self, name: str):
        """The attribute's value; a block attribute (sub_block) is the block's desc and a
        blocks attribute a list of them, as fluid's `op.attr` (`.id` is the index)."""
        try:
            value = self.attrs[name]
        except KeyError:
            from ..errors import NotFoundError

            raise NotFoundError(
                f"op '{self.type}' has no attribute '{name}'; it has {sorted(self.attrs)}"
            ) from None
        kind = self._block_attr_kinds().get(name)
        if kind == "block":
            return self.block.program.block(value).desc
        if kind == "blocks":
            return [self.block.program.block(i).desc for i in value]
        return value

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    def all_attrs(self) -> dict:
        """Every attribute; block attributes as Blocks (lists of Blocks), as fluid's."""
        out = dict(self.attrs)
        program = self.block.program
        for name, kind in self._block_attr_kinds().items():
            if name in out:
                out[name] = (program.block(out[name]) if kind == "block"
                             else [program.block(i) for i in out[name]])
        return out

    def _block_attr_kinds(self) -> dict:
        return OpSchema.block_attrs(self.type)

    def _block_attr_id(self, name: str) -> int:
        """The index of the block a block attribute names (fluid's `_block_attr_id`)."""
        return int(self.attrs[name])

    def _blocks_attr_ids(self, name: str) -> list[int]:
        return [int(i) for i in self.attrs[name]]

    def _set_attr(self, name: str, value):
        self.attrs = OpSchema.validate_attrs(self.type, dict(self.attrs, **{name: value}))
        self.block.program._bump()

    set_attr = _set_attr

    @property
    def idx(self) -> int:
        return self.block.ops.index(self)

    def to_dict(self) -> dict:
        d = {"type": self.type, "inputs": self.inputs, "outputs": self.outputs,
             "attrs": self.attrs, "role": self.role.value}
        if self.owner is not None:
            d["owner"] = self.owner
        return d

    def __repr__(self):
        def slots(d):
            return ", ".join(f"{k}={v if len(v) != 1 else v[0]}" for k, v in d.items() if v)

        attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(self.attrs.items())
                          if not k.startswith("op_"))
        role = "" if self.role is OpRole.FORWARD else f"  # {self.role.value}"
        if self.owner is not None:
            role += f" @rank {self.owner}"
        return f"{{{slots(self.outputs)}}} = {self.type}({slots(self.inputs)}" + (
            f"; {attrs}" if attrs else "") + f"){role}"

    __str__ = __repr__
