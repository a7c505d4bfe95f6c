"""KernelContext: the run-time state a kernel may need besides its inputs and attributes.

A kernel registered with `@kernel(..., context=True)` is called as
`fn(xp, ins, attrs, want, ctx)`; every other kernel as `fn(xp, ins, attrs, want)`. The plan
makes one context per op when it compiles, so nothing is ever written into an op's attributes
at run time (they are read-only mappings), and a kernel's persistent buffers live in its own
context, not in state shared with other plans of the same program.

>>> ctx = KernelContext(tag="[rank 0/2] ")
>>> ctx.out(None, "Out") is None
True
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import PreconditionError


class KernelContext:
    """What one op of one plan runs with.

    - `rng`: the numpy Generator its random draws come from (per rank for the forward pass;
      the same on every rank for updates);
    - `comm`: the communicator its collectives use (resolved on first use, so a program that
      never communicates never touches MPI);
    - `out(xp, slot)`: a preallocated array the plan wants output `slot` written into (a view
      of a fused gradient bucket), or None; during one call it may also be an array the plan
      lends for this call only (`lent`): the buffer of an input of the same variable that
      nothing else holds (Param for ParamOut), so a kernel that writes there must read each
      element of its inputs before it writes the same element (elementwise, in order);
    - `spent(slot)`: during one call, the array of input `slot` when the plan hands it to the
      kernel to write over (it dies at the op and nothing else holds it: executor/inplace.py's
      Spend, for kernels registered with `spends`), else None;
    - `bucket`: the persistent fused buffer of a bucketed collective, or None;
    - `scratch`: a dict for buffers the kernel keeps from one run to the next;
    - `place`: where the plan runs; `tag`: "[rank r/n] " in multi-process jobs, else "";
    - `run_block(block_index, env, xp)`: run a sub-block of the program on `env` (name ->
      array: what the block reads from outside it; its writes land there): control flow;
    - `op`: the Operator it runs, or None outside a plan (read-only: the variable names of
      its slots, for ops that address values by name, as parameter-server mode's send and
      recv do).
    """

    __slots__ = ("rng", "place", "outputs", "bucket", "scratch", "_comm", "_comm_source",
                 "_tag", "_run_block", "op", "lent", "spent_inputs")

    def __init__(self, rng=None, comm: Callable | object | None = None, place=None,
                 tag: Callable | str = "", run_block: Callable | None = None, op=None):
        """`comm` and `tag` may be functions giving them on first use."""
        self.rng = rng
        self.op = op
        self.place = place
        self._tag = tag
        self._run_block = run_block
        self.outputs: dict = {}  # slot -> (xp -> preallocated array)
        self.bucket = None
        self.lent: dict | None = None  # slot -> array, set by the plan for one call only
        self.spent_inputs: dict | None = None  # input slot -> array, likewise
        self.scratch: dict = {}
        self._comm = None if callable(comm) else comm
        self._comm_source = comm if callable(comm) else None

    @property
    def comm(self):
        if self._comm is None:
            if self._comm_source is None:
                raise PreconditionError(
                    "this op talks to other ranks but its plan was compiled without a "
                    "communicator; run it through an Executor or a data-parallel "
                    "CompiledProgram")
            self._comm = self._comm_source()
        return self._comm

    def run_block(self, block_index: int, env: dict, xp) -> dict:
        if self._run_block is None:
            raise PreconditionError(
                f"this op runs block {block_index} of its program, but it was called outside "
                f"a plan; run it through an Executor")
        return self._run_block(block_index, env, xp)

    @property
    def tag(self) -> str:
        if callable(self._tag):
            self._tag = self._tag()
        return self._tag

    def spent(self, slot: str):
        """The array of input `slot` this call may write over, or None (see the class doc)."""
        spent = self.spent_inputs
        return None if spent is None else spent.get(slot)

    def out(self, xp, slot: str):
        """The array output `slot` should be written into, or None (see the class doc). A
        kernel that uses it returns that very array as the output."""
        lent = self.lent
        if lent is not None and slot in lent:
            return lent[slot]
        make = self.outputs.get(slot)
        return None if make is None else make(xp)
