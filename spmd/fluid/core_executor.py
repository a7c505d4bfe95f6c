"""fluid.core.Executor: the executor object under fluid.Executor, which Paddle's tests drive
directly: `core.Executor(place).run(program.desc, scope, block_id, create_local_scope,
create_vars, skip_ref_cnt_vars)`.

It runs block 0 of the program on values already in the scope (no feed or fetch list: the
inputs were set with `scope.var(name).get_tensor().set(...)`, the outputs are read from the
scope after). As fluid's C++ executor with eager deletion (garbage collection) on, after a run
every variable of the block exists in the scope (`create_vars`): the persistable ones hold
their values, the variables named in `skip_ref_cnt_vars` hold theirs, and every other
non-persistable one (the inputs set before the run too) is made but holds no value (its memory
was collected). With `create_local_scope` the non-persistable ones live in a kid scope dropped
after the run (kept with `keep_kid_scopes`); with `force_disable_gc` the values the block's ops
computed stay.

>>> import numpy as np, spmd.fluid as fluid
>>> main, startup = fluid.Program(), fluid.Program()
>>> with fluid.program_guard(main, startup):
...     x = fluid.data("x", [2], "float32"); y = fluid.layers.scale(x, 3.0)
>>> scope = fluid.Scope()
>>> scope.var("x").get_tensor().set(np.ones(2, "float32"), fluid.CPUPlace())
>>> CoreExecutor(fluid.CPUPlace()).run(main.desc, scope, 0, False, True, [y.name])
>>> np.array(scope.find_var(y.name).get_tensor()).tolist(), scope.find_var("x").is_initialized()
([3.0, 3.0], False)
"""
from __future__ import annotations

from ..errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["CoreExecutor"]


def _program_of(desc):
    """The Program behind `program.desc` (or a Program itself)."""
    program = getattr(desc, "_program", desc)
    if not hasattr(program, "global_block"):
        raise ArgumentTypeError(
            f"core.Executor.run: expects a program's desc (program.desc), got "
            f"{type(desc).__name__}")
    return program


class CoreExecutor:
    """fluid.core.Executor(place): see the module docstring."""

    def __init__(self, place):
        from ..core.places import Place
        from ..executor import Executor

        if not isinstance(place, Place):
            raise ArgumentTypeError(
                f"core.Executor expects a place (fluid.core.Place() set to one, "
                f"fluid.CPUPlace(), ...), got {type(place).__name__}")
        self.place = place
        self._executor = Executor(place)

    def close(self) -> None:
        self._executor.close()

    def run(self, program_desc, scope, block_id=0, create_local_scope=True, create_vars=True,
            skip_ref_cnt_vars=(), force_disable_gc=False, keep_kid_scopes=False):
        """Run block `block_id` of the program over `scope` (see the module docstring)."""
        program = _program_of(program_desc)
        if block_id != 0:
            raise InvalidArgumentError(
                f"core.Executor.run: spmd runs a program from its global block (block 0); "
                f"block {block_id} runs as part of the op that owns it (a while, a cond)")
        block = program.global_block()
        keep = [n for n in dict.fromkeys(skip_ref_cnt_vars) if block.has_var(n)]
        written = [n for op in block.ops for n in op.output_arg_names if block.has_var(n)]
        fetch = list(dict.fromkeys(keep + (written if force_disable_gc else [])))
        run_scope = scope.new_scope() if create_local_scope else scope
        # the block's inputs are what the scope holds under its non-persistable names that no
        # op wrote first: fed so (the plan reads persistables from the scope itself)
        feed = {n: scope.find_var(n).get_tensor() for n, v in block.vars.items()
                if not v.persistable and scope.find_var(n) is not None
                and scope.find_var(n).is_initialized()}
        feed = {n: _array_with_lod(t) for n, t in feed.items() if n not in written}
        values = self._executor.run(program, feed=feed, fetch_list=fetch, scope=scope,
                                    return_numpy=False)
        for name, value in zip(fetch, values):
            run_scope.put(name, value.array if hasattr(value, "array") else value)
            if getattr(value, "lod", None) and value.lod():
                run_scope.set_lod(name, value.lod())
        collected = [n for n, v in block.vars.items() if not v.persistable and n not in fetch]
        scope.erase(collected)  # what fluid's garbage collector freed, inputs too
        if create_vars:
            for name, var in block.vars.items():
                if name in ("feed", "fetch") or var.type in ("FEED_MINIBATCH", "FETCH_LIST"):
                    continue
                (scope if var.persistable else run_scope).var(name)
        if create_local_scope and not keep_kid_scopes:
            scope.drop_kids()


def _array_with_lod(tensor):
    """A scope tensor as a feed value: its array, with its LoD as a LoDTensor."""
    from ..core.lod import LoDTensor

    array = tensor._array()
    lod = tensor.lod()
    return LoDTensor(array, lod) if lod else array
