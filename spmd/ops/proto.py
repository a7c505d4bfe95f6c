"""fluid's op protos, generated from spmd's own op definitions (spmd/ops): `OpProtoHolder`
(`fluid.framework.OpProtoHolder.instance().get_op_proto("relu")`) gives, per op type, what
fluid's C++ `OpProto` tells Python: its input and output slots (`.name`, `.duplicable`,
`.dispensable`, `.intermediate`) and its attributes (`.name`, `.type`, `.generated`).
Paddle's op test harness (op_test.py, testsuite.py) builds its programs from these.

>>> proto = OpProtoHolder.instance().get_op_proto("elementwise_add")
>>> [v.name for v in proto.inputs], [v.name for v in proto.outputs]
(['X', 'Y'], ['Out'])
>>> [a.name for a in proto.attrs if not a.generated]
['axis', 'use_mkldnn']
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["AttrType", "OpProto", "OpProtoHolder", "ProtoAttr", "ProtoVar"]


class AttrType(enum.IntEnum):
    """framework.proto's AttrType, the numbers fluid gives them."""

    INT = 0
    FLOAT = 1
    STRING = 2
    INTS = 3
    FLOATS = 4
    STRINGS = 5
    BOOLEAN = 6
    BOOLEANS = 7
    BLOCK = 8
    LONG = 9
    BLOCKS = 10
    LONGS = 11


# spmd's attribute kinds (spmd/ops/registry.py) -> fluid's; a dtype attribute is an int in
# fluid (a VarType number)
_KIND_TO_TYPE = {"int": AttrType.INT, "float": AttrType.FLOAT, "str": AttrType.STRING,
                 "ints": AttrType.INTS, "floats": AttrType.FLOATS, "strs": AttrType.STRINGS,
                 "bool": AttrType.BOOLEAN, "dtype": AttrType.INT, "block": AttrType.BLOCK,
                 "blocks": AttrType.BLOCKS}

# the attributes fluid's OpProtoAndCheckerMaker adds to every op ("generated" in its proto);
# OpProtoHolder.generated_op_attr_names() lists them, as fluid's does
GENERATED_ATTRS = (("op_role", AttrType.INT), ("op_role_var", AttrType.STRINGS),
                   ("op_namescope", AttrType.STRING), ("op_callstack", AttrType.STRINGS),
                   ("op_device", AttrType.STRING))


@dataclass(frozen=True)
class ProtoVar:
    """One input or output slot of an op proto."""

    name: str
    duplicable: bool = False
    dispensable: bool = False
    intermediate: bool = False
    comment: str = ""


@dataclass(frozen=True)
class ProtoAttr:
    """One attribute of an op proto; `type` is None for an attribute spmd takes of any kind."""

    name: str
    type: AttrType | None
    generated: bool = False
    comment: str = ""


@dataclass(frozen=True)
class OpProto:
    """What fluid's OpProto says of one op type."""

    type: str
    inputs: tuple[ProtoVar, ...]
    outputs: tuple[ProtoVar, ...]
    attrs: tuple[ProtoAttr, ...]
    comment: str = ""

    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]

    def output_names(self) -> list[str]:
        return [v.name for v in self.outputs]

    def attr_names(self) -> list[str]:
        return [a.name for a in self.attrs]


def _attr_type(spec) -> AttrType | None:
    if spec.kind in _KIND_TO_TYPE:
        return _KIND_TO_TYPE[spec.kind]
    # an "any" attribute: the kind its default has, where it has one
    default = spec.default
    if isinstance(default, bool):
        return AttrType.BOOLEAN
    if isinstance(default, int):
        return AttrType.INT
    if isinstance(default, float):
        return AttrType.FLOAT
    if isinstance(default, str):
        return AttrType.STRING
    return None


def proto_of(opdef) -> OpProto:
    """The OpProto of one spmd OpDef.

    An optional slot is fluid's "dispensable". An output whose gradient is never needed
    (`nondiff_outputs`: masks, saved statistics, XShape) is what fluid marks intermediate:
    a result the op keeps for its gradient, which a caller need not bind."""
    doc = (opdef.infer.__doc__ or "").strip() if opdef.infer is not None else ""
    inputs = tuple(ProtoVar(s.name, s.duplicable, s.optional) for s in opdef.inputs)
    outputs = tuple(ProtoVar(s.name, s.duplicable, s.optional,
                             s.name in opdef.nondiff_outputs) for s in opdef.outputs)
    attrs = [ProtoAttr(name, _attr_type(spec)) for name, spec in opdef.attrs.items()]
    own = set(opdef.attrs)
    attrs += [ProtoAttr(name, kind, generated=True) for name, kind in GENERATED_ATTRS
              if name not in own]
    return OpProto(opdef.type, inputs, outputs, tuple(attrs), doc)


class OpProtoHolder:
    """fluid.framework.OpProtoHolder: the protos of every op spmd defines, made on first ask.

    >>> holder = OpProtoHolder.instance()
    >>> holder.get_op_proto("mean").outputs[0].name
    'Out'
    >>> holder.has_op_proto("no_such_op")
    False
    """

    _instance: OpProtoHolder | None = None

    @classmethod
    def instance(cls) -> OpProtoHolder:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        self._protos: dict[str, OpProto] = {}

    def has_op_proto(self, type: str) -> bool:  # noqa: A002 - fluid's name
        from .registry import OP_DEFS

        return type in self._protos or type in OP_DEFS.index() or OP_DEFS.registered(type)

    def get_op_proto(self, type: str) -> OpProto:  # noqa: A002 - fluid's name
        """The proto of op `type`; ValueError (as fluid) for an op spmd does not define."""
        if type not in self._protos:
            if not self.has_op_proto(type):
                raise ValueError(f'Operator "{type}" has not been registered. (spmd defines '
                                 f"no op of that name: fluid.op.Operator.types() lists them)")
            from .registry import get_op_def

            self._protos[type] = proto_of(get_op_def(type))
        return self._protos[type]

    @property
    def op_proto_map(self) -> dict[str, OpProto]:
        """Every op's proto by type (this loads every op module)."""
        from .registry import OP_DEFS

        return {t: self.get_op_proto(t) for t in sorted(OP_DEFS.keys())}

    def update_op_proto(self) -> list[OpProto]:
        """The protos of ops defined since the last call (fluid: custom ops loaded later)."""
        from .registry import OP_DEFS

        new = [t for t in sorted(OP_DEFS.keys()) if t not in self._protos]
        return [self.get_op_proto(t) for t in new]

    @staticmethod
    def generated_op_attr_names() -> set[str]:
        """The attributes every op carries (op_role, op_namescope, ...)."""
        return {name for name, _ in GENERATED_ATTRS}
