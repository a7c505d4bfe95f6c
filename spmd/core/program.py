"""Block and Program, the IR containers; default programs and program_guard."""
from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json

from ..errors import InvalidArgumentError, NotFoundError
from .fluid_compat import BlockCompat, ProgramCompat
from .operator import Operator, OpRole, OpSchema
from .serialization import fill_block, unserializable
from .variable import Parameter, Variable, normalize_shape

_PROGRAM_UIDS = itertools.count()


class Block(BlockCompat):
    """An ordered list of ops and the variables they use. Block 0 is the program's global
    block; a sub-block (a control-flow body, made by Program._create_block) has a parent and
    may read its ancestors' variables."""

    def __init__(self, program: Program, idx: int = 0, parent_idx: int = -1):
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.vars: dict[str, Variable] = {}
        self.ops: list[Operator] = []

    @property
    def parent_block(self) -> Block | None:
        return None if self.parent_idx < 0 else self.program.blocks[self.parent_idx]

    def _find_var_recursive(self, name: str) -> Variable | None:
        """`name` in this block or the nearest ancestor declaring it (fluid's name), or None."""
        block = self
        while block is not None:
            if name in block.vars:
                return block.vars[name]
            block = block.parent_block
        return None

    def _var_recursive(self, name: str) -> Variable:
        var = self._find_var_recursive(name)
        if var is None:
            if self.parent_idx < 0:
                return self.var(name)  # raises, suggesting close names
            raise NotFoundError(f"variable '{name}' is in neither block {self.idx} nor any "
                                f"block enclosing it")
        return var

    # -- variables ---------------------------------------------------------------------------
    def create_var(self, name: str | None = None, **kwargs) -> Variable:
        from . import unique_name

        name = name or unique_name.generate("_generated_var")
        if name in self.vars:
            var = self.vars[name]
            before = (var.shape, var.persistable)
            if kwargs.get("shape") is not None:
                shape = normalize_shape(kwargs["shape"], name)
                if var.shape and tuple(shape) != tuple(var.shape):
                    raise InvalidArgumentError(  # fluid 1.8.5: a ValueError
                        f"variable '{name}' was created before with shape {list(var.shape)}; "
                        f"the new shape {list(shape)} does not match: give it another name")
                var.shape = shape
            if kwargs.get("persistable"):
                var.persistable = True
            if (var.shape, var.persistable) != before:
                self.program._bump()  # compiled plans depend on both: they must be rebuilt
            return var
        var = Variable(self, name, **kwargs)
        self.vars[name] = var
        self.program._bump()
        return var

    def create_parameter(self, name: str, shape, dtype="float32", **kwargs) -> Parameter:
        """A Parameter of this block. Given an `initializer`, its op is appended to this block
        unless an op of the global block writes the parameter already, as fluid 1.8.5's
        (so `startup.global_block().create_parameter(..., initializer=...)` initializes it
        there once, however often it is called)."""
        existing = self.vars.get(name)
        if isinstance(existing, Parameter):
            if tuple(existing.shape) != tuple(shape):
                raise InvalidArgumentError(
                    f"parameter '{name}' already exists with shape {list(existing.shape)}, "
                    f"cannot re-create it with shape {list(shape)}; give the layer another name"
                )
            param = existing
        else:
            param = Parameter(self, name, shape, dtype, **kwargs)
            self.vars[name] = param
            self.program._bump()
        initializer = kwargs.get("initializer")
        if initializer is not None and not any(
                name in op.output_arg_names for op in self.program.global_block().ops):
            initializer(param, self)
        return param

    def var(self, name: str) -> Variable:
        try:
            return self.vars[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(name, self.vars, n=3)
            raise NotFoundError(
                f"variable '{name}' is not in block {self.idx}"
                + (f"; did you mean {close}?" if close else "")
            ) from None

    def has_var(self, name: str) -> bool:
        return name in self.vars

    def all_parameters(self) -> list[Parameter]:
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    def iter_parameters(self):
        return iter(self.all_parameters())

    # -- ops ---------------------------------------------------------------------------------
    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, role=None) -> Operator:
        """Validate and append an op; output shapes and dtypes are inferred here."""
        return self._insert_op(len(self.ops), type, inputs, outputs, attrs, role)

    def _insert_op(self, index: int, type: str, inputs=None, outputs=None, attrs=None,
                   role=None) -> Operator:
        op = OpSchema.build(self, type, inputs or {}, outputs or {}, attrs or {},
                            role or self.program.current_role, position=index)
        self.ops.insert(index, op)
        self.program._bump()
        return op

    def _prepend_op(self, *args, **kwargs) -> Operator:
        return self._insert_op(0, *args, **kwargs)

    def _remove_op(self, index: int):
        del self.ops[index]
        self.program._bump()

    def __repr__(self):
        lines = [f"block {self.idx} {{"]
        lines += [f"  var {v._short()}" for v in self.vars.values()]
        lines += [f"  {i:3d}: {op}" for i, op in enumerate(self.ops)]
        return "\n".join(lines + ["}"])


class Program(ProgramCompat):
    """A static program: blocks of ops over variables, built by the layers, run by an Executor.

    >>> prog = Program()
    >>> with program_guard(prog):
    ...     pass
    >>> prog.num_blocks
    1
    """

    def __init__(self):
        self.blocks = [Block(self, 0)]
        self._random_seed = 0
        self.current_role = OpRole.FORWARD
        self.grad_var_map: dict[str, str] = {}  # forward var name -> its gradient's name
        # parameter name -> its optimizer's accumulator vars (moments, velocity, beta pows)
        self.optimizer_state: dict[str, list[str]] = {}
        self._version = 0  # bumped on every mutation; executors key their plan caches on it
        self._uid = next(_PROGRAM_UIDS)  # unlike id(), never reused after a program is freed
        self._is_test = False
        self._current_block_idx = 0
        # callables hook(feed: dict, scope) that Executor.run calls before each run of this
        # program (or a CompiledProgram of it): a non-iterable reader adds the next batch to
        # the feed, a learning-rate scheduler writes its value. Clones carry the same hooks.
        self.run_hooks: list = []
        self._init_fluid_attrs()  # _is_distributed, _endpoints, ... (spmd/core/fluid_compat.py)

    def _bump(self):
        self._version += 1

    @property
    def version(self) -> int:
        """Bumped by every change to the program: compiled plans of an older version are
        stale."""
        return self._version

    @property
    def is_test(self) -> bool:
        """Whether this is a clone for test (clone(for_test=True)): forward only."""
        return self._is_test

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def global_block(self) -> Block:
        return self.blocks[0]

    def current_block(self) -> Block:
        """The block layers append to: the global block, or the sub-block being built."""
        return self.blocks[self._current_block_idx]

    def _create_block(self, parent_idx: int | None = None) -> Block:
        """A new sub-block of the current block (or of `parent_idx`), made current: the ops a
        control-flow layer appends until `_rollback()` go into it (fluid's API)."""
        parent = self._current_block_idx if parent_idx is None else parent_idx
        block = Block(self, len(self.blocks), parent)
        self.blocks.append(block)
        self._current_block_idx = block.idx
        self._bump()
        return block

    def _rollback(self) -> None:
        """Make the current block's parent current again (the end of a control-flow body)."""
        self._current_block_idx = max(self.current_block().parent_idx, 0)

    @property
    def random_seed(self) -> int:
        """The seed of this program's random ops (0: the executor's generator)."""
        return self._random_seed

    @random_seed.setter
    def random_seed(self, seed) -> None:
        import numbers

        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise InvalidArgumentError(  # fluid 1.8.5: a ValueError
                f"Program.random_seed must be an int, got {seed!r} ({type(seed).__name__})")
        self._random_seed = int(seed)

    def block(self, idx) -> Block:
        """Block `idx`; also given a Block or its desc (what a block attribute holds)."""
        if not isinstance(idx, int):
            idx = idx.idx if hasattr(idx, "ops") else getattr(idx, "id", idx)
        return self.blocks[idx]

    def list_vars(self):
        return iter(self.global_block().vars.values())

    def all_parameters(self):
        return self.global_block().all_parameters()

    @contextlib.contextmanager
    def role_guard(self, role: OpRole):
        """Ops appended inside the block get `role` (optimizers use OpRole.OPTIMIZE)."""
        old, self.current_role = self.current_role, role
        try:
            yield
        finally:
            self.current_role = old


    def clone(self, for_test: bool = False) -> Program:
        """A copy sharing parameters by name. `for_test=True` keeps only forward ops and turns
        dropout and batch_norm (any op with an `is_test` attribute) into test mode."""
        new = Program.from_dict(self.to_dict())
        new.random_seed = self.random_seed
        new._is_test = self._is_test
        _copy_python_attrs(self, new)
        new._copy_dist_param_info_from(self)
        if for_test:
            for sub in new.blocks[1:]:  # a branch's own backward and updates (minimize in a
                sub.ops = [op for op in sub.ops if op.role is OpRole.FORWARD]  # cond), as fluid
            block = new.global_block()
            block.ops = [op for op in block.ops if op.role is OpRole.FORWARD]
            for op in block.ops:
                if "is_test" in op.attrs:
                    op.attrs["is_test"] = True
            # gradients and other temporaries only the dropped ops used go too; persistable
            # and data variables stay, so the clone reads the same scope and takes the feeds
            # (a sub-block's ops count: a StaticRNN's step outputs live in this block but
            # only the step block's ops name them)
            used = {n for b in new.blocks for op in b.ops
                    for n in op.input_arg_names + op.output_arg_names}
            block.vars = {n: v for n, v in block.vars.items()
                          if n in used or v.persistable or v.is_data}
            new.grad_var_map = {}
            new.optimizer_state = {}
            new._is_test = True
            new._bump()
        return new

    # -- serialization -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Version 2: one entry per block (version 1, one block's vars and ops at the top,
        still loads)."""
        blocks = [{"idx": b.idx, "parent_idx": b.parent_idx,
                   "vars": [v.to_dict() for v in b.vars.values()],
                   "ops": [op.to_dict() for op in b.ops]} for b in self.blocks]
        return {"version": 2, "random_seed": self.random_seed, "blocks": blocks,
                "grad_var_map": dict(self.grad_var_map),
                "optimizer_state": {k: list(v) for k, v in self.optimizer_state.items()}}

    @staticmethod
    def from_dict(data: dict) -> Program:
        """Rebuild a Program from `to_dict()`; ops are re-validated against their definitions."""
        prog = Program()
        prog.random_seed = data.get("random_seed", 0)
        blocks = data.get("blocks") or [{"idx": 0, "parent_idx": -1, "vars": data["vars"],
                                         "ops": data["ops"]}]
        for entry in blocks[1:]:
            prog.blocks.append(Block(prog, entry["idx"], entry["parent_idx"]))
        for entry, block in zip(blocks, prog.blocks):
            fill_block(block, entry)
        prog.grad_var_map = dict(data.get("grad_var_map", {}))
        prog.optimizer_state = {k: list(v) for k, v in data.get("optimizer_state", {}).items()}
        return prog

    def to_json(self) -> str:
        data = self.to_dict()
        try:
            return json.dumps(data, sort_keys=True)
        except TypeError:
            raise InvalidArgumentError(unserializable(data)) from None

    @staticmethod
    def from_json(text: str | bytes) -> Program:
        return Program.from_dict(json.loads(text))

    def serialize_to_string(self) -> bytes:
        return self.to_json().encode()

    @staticmethod
    def parse_from_string(binary: bytes) -> Program:
        return Program.from_json(binary)

    def fingerprint(self) -> str:
        """A stable hash of ops, attributes, var shapes and dtypes: equal on every process that
        built the same program, different when any of those differ. The random seed is left out:
        ranks may seed differently (dropout masks) and still run the same collectives."""
        d = self.to_dict()
        d.pop("random_seed", None)
        for op in (op for block in d["blocks"] for op in block["ops"]):
            op["attrs"] = {k: v for k, v in op["attrs"].items() if k not in ("op_callstack",)}
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()

    def __repr__(self):
        return "\n".join(repr(b) for b in self.blocks)

    def to_string(self, throw_on_error=True, with_details=False) -> str:
        """The listing; with_details adds each variable's details, as fluid 1.8's does."""
        if not with_details:
            return repr(self)
        return "\n".join(b.to_string(throw_on_error, True) for b in self.blocks)

    __str__ = __repr__


def _copy_python_attrs(src: Program, dst: Program):
    """Carry what JSON does not hold: parameter initializers and regularizers objects, and
    the run hooks."""
    dst.run_hooks = list(src.run_hooks)
    for name, var in src.global_block().vars.items():
        new = dst.global_block().vars.get(name)
        if isinstance(var, Parameter) and isinstance(new, Parameter):
            new.regularizer = copy.copy(var.regularizer)
            new.initializer = var.initializer
            new.gradient_clip_attr = var.gradient_clip_attr


_main_program = Program()
_startup_program = Program()


def ProgramDesc():  # noqa: N802 - fluid's class name
    """`core.ProgramDesc()`: the desc of a new, empty program (its block(0), var, append_op;
    the handles are spmd/core/op_desc.py's)."""
    return Program().desc


def default_main_program() -> Program:
    return _main_program


def default_startup_program() -> Program:
    return _startup_program


def switch_main_program(program: Program) -> Program:
    global _main_program
    old, _main_program = _main_program, program
    return old


def switch_startup_program(program: Program) -> Program:
    global _startup_program
    old, _startup_program = _startup_program, program
    return old


@contextlib.contextmanager
def program_guard(main_program: Program, startup_program: Program | None = None):
    """Layers built inside the block go to `main_program` (and their initializers to
    `startup_program`)."""
    if not isinstance(main_program, Program):
        raise InvalidArgumentError(
            f"program_guard expects main_program to be a Program, got "
            f"{type(main_program).__name__}")
    if startup_program is not None and not isinstance(startup_program, Program):
        raise InvalidArgumentError(
            f"program_guard expects startup_program to be a Program or None, got "
            f"{type(startup_program).__name__}")
    old_main = switch_main_program(main_program)
    old_startup = switch_startup_program(startup_program) if startup_program is not None else None
    try:
        yield
    finally:
        switch_main_program(old_main)
        if old_startup is not None:
            switch_startup_program(old_startup)


@contextlib.contextmanager
def tag_new_ops(attr: str, value):
    """Ops appended to the default main and startup programs inside get `attr` = `value`,
    unless an inner region already set it (fluid's name_scope and device_guard). The ops are
    found afterwards, by identity, so building code needs to know nothing of the region.

    >>> with tag_new_ops("op_device", "cpu"):
    ...     pass
    """
    programs = (default_main_program(), default_startup_program())
    before = [{id(op) for block in p.blocks for op in block.ops} for p in programs]
    try:
        yield
    finally:
        for program, seen in zip(programs, before):
            for block in program.blocks:
                for op in block.ops:
                    if id(op) not in seen and attr not in op.attrs:
                        op._set_attr(attr, value)
