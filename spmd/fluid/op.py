"""fluid.op: `Operator(type, **slots_and_attrs)`, one op made outside a program and run on a
scope (`op.run(scope, place)`), as Paddle's tests drive single ops: keyword arguments that
name an input or output slot of the op (spmd/ops) give its variables' names, the others its
attributes. The op runs spmd's kernel on the scope's values and writes its outputs there.

>>> import numpy as np
>>> import spmd.fluid as fluid
>>> scope = fluid.Scope()
>>> scope.var("x").get_tensor().set(np.array([1.0, -2.0], "float32"), fluid.CPUPlace())
>>> relu = Operator("relu", X="x", Out="y")
>>> relu.run(scope, fluid.CPUPlace())
>>> np.array(scope.find_var("y").get_tensor())
array([1., 0.], dtype=float32)

fluid's op-proto machinery (OpDescCreationMethod, OpInfo, get_all_op_protos,
create_op_creation_method) describes C++ op protos, which spmd does not have
(docs/fluid_coverage.md).
"""
from __future__ import annotations

from ..core.places import array_module
from ..errors import InvalidArgumentError
from ._pending import missing_names

__all__ = ["Operator", "OperatorFactory", "is_str"]


# fluid's ops carry their role as attributes (Paddle's testsuite.create_op sets op_role);
# spmd keeps it as a field of an op in a program, and an op run alone has none
_ROLE_ATTRS = frozenset({"op_role", "op_role_var"})


def is_str(s) -> bool:
    return isinstance(s, str)


def _names(value, where: str) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) for n in names):
        raise InvalidArgumentError(f"{where}: expected variable names, got {value!r}")
    return names


class _SingleOp:
    """One op bound to variable names: run(scope, place) computes its outputs there."""

    def __init__(self, type: str, inputs: dict, outputs: dict, attrs: dict):  # noqa: A002
        from ..ops.registry import get_op_def

        self._type, self._inputs, self._outputs = type, inputs, outputs
        self._def = get_op_def(type)
        self._attrs = self._def.validate_attrs(attrs, f"fluid.op.Operator('{type}')")

    def type(self) -> str:
        return self._type

    def input(self, slot: str) -> list[str]:
        return list(self._inputs.get(slot, []))

    def output(self, slot: str) -> list[str]:
        return list(self._outputs.get(slot, []))

    def inputs(self) -> dict:
        return {k: list(v) for k, v in self._inputs.items()}

    def outputs(self) -> dict:
        return {k: list(v) for k, v in self._outputs.items()}

    def input_vars(self) -> list[str]:
        return [n for ns in self._inputs.values() for n in ns]

    def output_vars(self) -> list[str]:
        return [n for ns in self._outputs.values() for n in ns]

    def attr(self, name: str):
        return self._attrs[name]

    def run(self, scope, place) -> None:
        """Run the op's kernel on `scope`'s values (on `place`) and store its outputs."""
        import numpy as np

        from ..kernels.registry import run_kernel

        xp = array_module(place)
        ins = {}
        for slot, names in self._inputs.items():
            values = []
            for n in names:
                found = scope.find_var(n)
                if found is None or not found.is_initialized():
                    raise InvalidArgumentError(
                        f"fluid.op.Operator('{self._type}').run: input {slot}={n!r} has no "
                        f"value in the scope; set it first (scope.var(name).get_tensor().set)")
                values.append(xp.asarray(np.array(found.get_tensor())))
            ins[slot] = values if self._def.input_slots[slot].duplicable else values[0]
        lods = self._input_lods(scope)
        ins.update(lods)
        res = run_kernel(self._type, xp, ins, dict(self._attrs), set(self._outputs))
        for slot, names in self._outputs.items():
            values = res[slot] if self._def.output_slots[slot].duplicable else [res[slot]]
            for i, (n, value) in enumerate(zip(names, values)):
                scope.var(n).get_tensor().set(value, place)
                scope.set_lod(n, self._output_lod(scope, slot, i, value, res))

    def _input_lods(self, scope) -> dict:
        """The LoD the kernel reads (`ins["X@LOD"]`), from the scope, as a plan binds it."""
        out = {}
        for slot in self._def.lod_inputs:
            names = self._inputs.get(slot)
            if names:
                lods = [scope.lod(n) for n in names]
                out[slot + "@LOD"] = lods if self._def.input_slots[slot].duplicable else lods[0]
        return out

    def _output_lod(self, scope, slot: str, i: int, value, res: dict):
        """The LoD of output `slot`[i]: what the kernel wrote, else its share_lod input's
        when the row counts agree (spmd/executor/lod_binding.py), else none."""
        if slot in self._def.lod_outputs:
            lod = res.get(slot + "@LOD")
            return lod[i] if isinstance(lod, list) and self._def.output_slots[slot].duplicable \
                else lod
        for in_slot, out_slot in self._def.share_lod:
            names = self._inputs.get(in_slot)
            if out_slot != slot or not names:
                continue
            lod = scope.lod(names[0])
            shape = getattr(value, "shape", ())
            if lod is not None and len(shape) and int(lod[-1][-1]) == int(shape[0]):
                return lod
        return None


class OperatorFactory:
    """`Operator(type, **kwargs)`: slots by name, the rest attributes."""

    def __call__(self, type: str, **kwargs) -> _SingleOp:  # noqa: A002
        from ..ops.registry import get_op_def

        opdef = get_op_def(type)
        where = f"fluid.op.Operator('{type}')"
        inputs, outputs, attrs = {}, {}, {}
        for key, value in kwargs.items():
            if key in opdef.input_slots:
                inputs[key] = _names(value, f"{where} input {key}")
            elif key in opdef.output_slots:
                outputs[key] = _names(value, f"{where} output {key}")
            elif key not in _ROLE_ATTRS:
                attrs[key] = value
        missing = [s.name for s in opdef.inputs if not s.optional and s.name not in inputs]
        if missing:
            raise InvalidArgumentError(f"{where}: input slot(s) {missing} not given; the op "
                                       f"takes {sorted(opdef.input_slots)}")
        return _SingleOp(type, inputs, outputs, attrs)

    @staticmethod
    def types() -> list[str]:
        """The op types spmd defines."""
        from ..ops.registry import OP_DEFS

        return sorted(OP_DEFS.keys())

    @staticmethod
    def get_op_info(type: str):  # noqa: A002 - fluid's name
        """The op's proto (spmd/ops/proto.py): its slots and attributes."""
        from ..ops.proto import OpProtoHolder

        return OpProtoHolder.instance().get_op_proto(type)

    def get_op_inputs(self, type: str) -> list[tuple[str, bool]]:  # noqa: A002
        """[(input slot, duplicable)] of op `type`, as fluid's."""
        return [(v.name, v.duplicable) for v in self.get_op_info(type).inputs]

    def get_op_outputs(self, type: str) -> list[tuple[str, bool]]:  # noqa: A002
        """[(output slot, duplicable)] of op `type`."""
        return [(v.name, v.duplicable) for v in self.get_op_info(type).outputs]

    def get_op_input_names(self, type: str) -> list[str]:  # noqa: A002
        return [name for name, _ in self.get_op_inputs(type)]

    def get_op_output_names(self, type: str) -> list[str]:  # noqa: A002
        return [name for name, _ in self.get_op_outputs(type)]

    def get_op_attr_names(self, type: str) -> list[str]:  # noqa: A002
        """The op's attribute names, the generated ones (op_role, ...) included."""
        return [a.name for a in self.get_op_info(type).attrs]


Operator = OperatorFactory()

missing_names(globals(), ["OpDescCreationMethod", "OpInfo", "create_op_creation_method",
                          "get_all_op_protos"])
