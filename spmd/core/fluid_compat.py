"""fluid 1.8's methods and attributes of Program, Block, Variable and Operator beyond the IR
itself, which real programs call (the model zoo, PaddleRec, ERNIE, Paddle's own tests): the
distributed flags the transpiler sets (`_is_distributed`, `_endpoints`, ...), the guards
optimizers use, pruning, renaming, `to_string`. Mixed into the IR classes, so the IR modules
stay about the IR.

>>> from spmd.core import Program
>>> p = Program()
>>> p._is_distributed, p._endpoints, p.current_block_idx
(False, [], 0)
"""
from __future__ import annotations

import contextlib

from ..errors import ArgumentTypeError
from .op_desc import append_bound_op, block_var, materialize_pending
from .op_role import OpRole
from .op_schema import OpSchema
from .pruning import prune_with_input

__all__ = ["BlockCompat", "OperatorCompat", "ProgramCompat", "VariableCompat"]


class ProgramDescView:
    """What fluid programs call on `program.desc` (fluid's C++ ProgramDesc), answered from
    spmd's IR: serialize_to_string (spmd's serialized program, which
    Program.parse_from_string reads), num_blocks, block(i), flush."""

    def __init__(self, program):
        self._program = program

    def serialize_to_string(self) -> bytes:
        return self._program.serialize_to_string()

    def num_blocks(self) -> int:
        return self._program.num_blocks

    def block(self, idx: int):
        return BlockDescView(self._program.block(idx))

    def flush(self) -> None:
        """fluid writes its Python edits into the C++ descriptor; spmd has only the IR."""


class BlockDescView:
    """`block.desc`: id, parent, op_size, op(i), var(name), has_var, all var names."""

    def __init__(self, block):
        self._block = block

    @property
    def id(self) -> int:
        return self._block.idx

    @property
    def parent(self) -> int:
        return self._block.parent_idx

    def op_size(self) -> int:
        return len(self._block.ops)

    def op(self, i: int):
        return OpDescView(self._block.ops[i])

    def has_var(self, name: str) -> bool:
        return name in self._block.vars

    def var(self, name):
        """The VarDesc of `name` (str or bytes), made if missing, as fluid's BlockDesc.Var."""
        return block_var(self._block, name)

    def find_var(self, name):
        return block_var(self._block, name, create=False)

    def append_op(self):
        """An empty OpDesc that becomes an op of this block once filled (spmd/core/op_desc.py)."""
        return append_bound_op(self._block)

    def all_vars(self) -> list:
        return [v.desc for v in self._block.vars.values()]


class OpDescView:
    """`op.desc`: type, input / output (by slot), their names, attr, has_attr, attr_names,
    set_attr."""

    def __init__(self, op):
        self._op = op

    def type(self) -> str:
        return self._op.type

    def input(self, slot: str) -> list[str]:
        return self._op.input(slot)

    def output(self, slot: str) -> list[str]:
        return self._op.output(slot)

    def input_names(self) -> list[str]:
        return self._op.input_names

    def output_names(self) -> list[str]:
        return self._op.output_names

    def input_arg_names(self) -> list[str]:
        return self._op.input_arg_names

    def output_arg_names(self) -> list[str]:
        return self._op.output_arg_names

    def attr(self, name: str):
        return self._op.attr(name)

    def has_attr(self, name: str) -> bool:
        return self._op.has_attr(name)

    def attr_names(self) -> list[str]:
        return self._op.attr_names

    def set_attr(self, name: str, value) -> None:
        self._op._set_attr(name, value)

    set_block_attr = set_attr
    set_blocks_attr = set_attr

    def _block_attr_id(self, name: str) -> int:
        return self._op._block_attr_id(name)

    def _rename_input(self, old: str, new: str) -> None:
        """Read `new` where the op read `old` (what IrGraph.update_input_link does)."""
        self._op._rename_input(old, new)

    def _rename_output(self, old: str, new: str) -> None:
        self._op._rename_output(old, new)

    def infer_var_type(self, block_desc=None) -> None:
        """spmd's shape inference sets the outputs' dtypes and kinds with their shapes."""
        self.infer_shape(block_desc)

    def infer_shape(self, block_desc=None) -> None:
        """Infer the op's output shapes again from its inputs' (fluid's OpDesc.InferShape),
        as `append_op` did when it built the op."""
        op = self._op
        OpSchema.build(op.block, op.type, op.inputs, op.outputs, dict(op.attrs), op.role,
                       op.idx)

# the distributed attributes fluid's Program has (framework.py), with their defaults
_DIST_ATTRS = {"_is_distributed": False, "_is_chief": False, "_endpoints": list,
               "_ps_endpoint": None, "_trainers_endpoints": list,
               "_distributed_lookup_table": None, "_fleet_opt": None,
               "_parameters_on_pservers": None}


def _check_program(other, where: str) -> None:
    if not hasattr(other, "global_block") or not hasattr(other, "blocks"):
        raise ArgumentTypeError(f"Program.{where}: expects a Program, got "
                                f"{type(other).__name__}")


class ProgramCompat:
    """Program's fluid extras."""

    def _init_fluid_attrs(self) -> None:
        for name, default in _DIST_ATTRS.items():
            setattr(self, name, default() if callable(default) else default)

    @property
    def desc(self) -> ProgramDescView:
        """fluid's ProgramDesc handle, as far as programs use it (serialize_to_string, ...)."""
        return ProgramDescView(self)

    @property
    def current_block_idx(self) -> int:
        return self._current_block_idx

    @property
    def _seed(self) -> int:
        return self.random_seed

    @_seed.setter
    def _seed(self, value: int) -> None:
        self.random_seed = value

    def global_seed(self, seed: int = 0) -> None:
        """Seed this program's random ops (fluid's global program seed)."""
        self.random_seed = seed

    def _copy_dist_param_info_from(self, other) -> None:
        """Take `other`'s distributed attributes (a clone's, a transpiled program's)."""
        _check_program(other, "_copy_dist_param_info_from")
        for name in _DIST_ATTRS:
            setattr(self, name, getattr(other, name))

    def _copy_param_info_from(self, other) -> None:
        """Take the parameter attributes (trainable, regularizer, optimize_attr, ...) of the
        same-named parameters of `other`'s global block."""
        _check_program(other, "_copy_param_info_from")
        mine = self.global_block().vars
        for param in other.global_block().all_parameters():
            target = mine.get(param.name)
            if target is None:
                continue
            for attr in ("trainable", "optimize_attr", "regularizer", "gradient_clip_attr",
                         "do_model_average", "is_distributed", "initializer"):
                if hasattr(param, attr):
                    setattr(target, attr, getattr(param, attr))

    def _sync_with_cpp(self) -> None:
        """fluid syncs its Python IR with the C++ descriptors; spmd's IR is the Python one,
        but for the ops filled in through `block.desc.append_op()`: appended here."""
        materialize_pending(self)

    @contextlib.contextmanager
    def _optimized_guard(self, param_and_grads):
        """Ops appended inside are optimizer ops (OpRole.OPTIMIZE), as fluid's guard does."""
        with self.role_guard(OpRole.OPTIMIZE):
            yield

    @contextlib.contextmanager
    def _lr_schedule_guard(self, is_with_opt: bool = False):
        """Ops appended inside compute the learning rate (run once per step, forward role in
        spmd, as they read no gradient)."""
        with self.role_guard(OpRole.FORWARD):
            yield

    def _prune_with_input(self, feeded_var_names, targets):
        """A copy keeping only the ops that compute `targets` (Variables, names or Operators)
        from `feeded_var_names`, and the variables those ops name (spmd/core/pruning.py)."""
        return prune_with_input(self, feeded_var_names, targets)

    def _prune(self, targets):
        """A copy keeping only the ops that compute `targets` (Variables, names or ops)."""
        return self._prune_with_input([], targets)

    def _inference_optimize(self, prune_read_op: bool = True):
        """fluid's copy for inference: every op kept (backward and optimizer ones too, unlike
        clone(for_test=True)), `is_test` set on every op having it, and with prune_read_op
        the ops up to the first `read` (a py_reader's) dropped with the READER variables."""
        new = self.clone()
        block = new.global_block()
        if prune_read_op:
            reads = [i for i, op in enumerate(block.ops) if op.type == "read"]
            if reads:
                block.ops = block.ops[reads[0] + 1:]
            block.vars = {n: v for n, v in block.vars.items()
                          if v.type != "READER"}
        for b in new.blocks:
            for op in b.ops:
                if "is_test" in op.attrs:
                    op.attrs["is_test"] = True
        new._is_test = True
        new._bump()
        return new


class BlockCompat:
    """Block's fluid extras."""

    forward_block_idx = -1  # set on a backward sub-block: the forward block it mirrors
    backward_block_idx = -1

    @property
    def desc(self) -> BlockDescView:
        return BlockDescView(self)

    @property
    def removed_vars(self) -> dict:
        return self.__dict__.setdefault("_removed_vars", {})

    def _remove_var(self, name: str, sync: bool = True) -> None:
        var = self.vars.pop(name, None)
        if var is not None:
            self.removed_vars[name] = var
            self.program._bump()

    def _rename_var(self, name: str, new_name: str):
        """Rename variable `name` to `new_name` here and in every op of the block."""
        var = self.vars.pop(name)
        var.name = new_name
        self.vars[new_name] = var
        for op in self.ops:
            op._rename_input(name, new_name)
            op._rename_output(name, new_name)
        self.program._bump()
        return var

    def _clone_variable(self, var, force_persistable: bool = True):
        """A variable of the same name, shape and dtype as `var` (of another program) here."""
        return self.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                               lod_level=var.lod_level, type=var.type,
                               persistable=True if force_persistable else var.persistable)

    def _sync_with_cpp(self) -> None:
        """See Program._sync_with_cpp."""

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        """The block's listing; with_details lists each variable with its details (fluid's
        stop_gradient, a parameter's trainable and optimize_attr, ...) as fluid 1.8 does."""
        if not with_details:
            return repr(self)
        lines = [f"block {self.idx} {{"]
        lines += [f"  var {v.to_string(throw_on_error, True)}" for v in self.vars.values()]
        lines += [f"  {i:3d}: {op}" for i, op in enumerate(self.ops)]
        return "\n".join(lines + ["}"])


class VariableCompat:
    """Variable's fluid extras (astype and the arithmetic come from spmd.layers)."""

    belong_to_optimizer = False  # fluid marks optimizer accumulators so

    @property
    def op(self):
        """The last op of the variable's block that writes it (None for a feed or parameter)."""
        return next((op for op in reversed(self.block.ops)
                     if self.name in op.output_arg_names), None)

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        text = repr(self)
        if with_details:
            text += (f" stop_gradient={self.stop_gradient} persistable={self.persistable} "
                     f"lod_level={self.lod_level}")
            # a parameter's extras, the ones fluid's Parameter.to_string adds
            for attr in ("trainable", "optimize_attr", "regularizer", "do_model_average"):
                if hasattr(self, attr):
                    text += f" {attr}={getattr(self, attr)}"
        return text


class OperatorCompat:
    """Operator's fluid extras."""

    # fluid's ops that run without a kernel (control flow, communication, readers)
    OP_WITHOUT_KERNEL_SET = frozenset({
        "feed", "fetch", "recurrent", "go", "rnn_memory_helper_grad", "conditional_block",
        "while", "send", "recv", "listen_and_serv", "fl_listen_and_serv", "ncclInit", "select",
        "checkpoint_notify", "gen_nccl_id", "c_gen_nccl_id", "c_comm_init", "c_sync_calc_stream",
        "c_sync_comm_stream", "queue_generator", "dequeue", "enqueue"})

    @property
    def attr_names(self) -> list[str]:
        return sorted(self.attrs)

    def _is_optimize_op(self) -> bool:
        """An optimizer's op (fluid's OpRole.Optimize bit of op_role)."""
        return self.role is OpRole.OPTIMIZE

    @property
    def desc(self) -> OpDescView:
        return OpDescView(self)

    def _rename_input(self, old: str, new: str) -> None:
        self.inputs = {s: [new if n == old else n for n in ns] for s, ns in self.inputs.items()}
        self.block.program._bump()

    def _rename_output(self, old: str, new: str) -> None:
        self.outputs = {s: [new if n == old else n for n in ns]
                        for s, ns in self.outputs.items()}
        self.block.program._bump()

    def _update_desc_attr(self, name: str, value) -> None:
        self._set_attr(name, value)

    def _block_attr(self, name: str):
        """The Block an attribute such as sub_block names."""
        return self.block.program.block(self._block_attr_id(name))

    def _blocks_attr(self, name: str) -> list:
        return [self.block.program.block(i) for i in self._blocks_attr_ids(name)]

    def to_string(self, throw_on_error: bool = False) -> str:
        return repr(self)
