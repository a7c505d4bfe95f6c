"""fluid.layers.StaticRNN: a step block run once per time step over sequences of a fixed length
(dim 0 of every step input), carrying memories from step to step; the `recurrent` op.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [4, -1, 3], "float32")   # [time, batch, features]
...     rnn = fluid.layers.StaticRNN()
...     with rnn.step():
...         word = rnn.step_input(x)
...         prev = rnn.memory(shape=[-1, 5], batch_ref=word)
...         hidden = fluid.layers.fc([word, prev], size=5, act="tanh")
...         rnn.update_memory(prev, hidden)
...         rnn.step_output(hidden)
...     out = rnn()   # [4, batch, 5]
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.unique_name import generate
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper
from .sub_block import BlockGuard, ControlFlowTypeError, _check_var, block_io

__all__ = ["StaticRNN"]


@dataclass
class _Memory:
    init: Variable
    pre_mem: Variable
    mem: Variable | None = None


class StaticRNN:
    """See the module doc; fluid 1.8's methods: step, memory, step_input, step_output, output,
    update_memory, and calling the object for the outputs."""

    BEFORE_RNN_BLOCK, IN_RNN_BLOCK, AFTER_RNN_BLOCK = 0, 1, 2

    def __init__(self, name=None):
        if name is not None and not isinstance(name, str):
            raise ControlFlowTypeError("fluid.layers.StaticRNN: name must be a str or None")
        self.helper = LayerHelper("static_rnn", name=name)
        self.memories: dict[str, _Memory] = {}
        self.inputs: list = []  # (outer sequence, step variable)
        self.outputs: list = []  # (per-step variable, outer [seq_len, ...] variable)
        self.status = StaticRNN.BEFORE_RNN_BLOCK
        self.seq_len = None

    def step(self) -> BlockGuard:
        """`with rnn.step():` the ops of one time step."""
        if self.status != StaticRNN.BEFORE_RNN_BLOCK:
            raise InvalidArgumentError("StaticRNN.step() can be entered once")
        rnn = self

        class Guard(BlockGuard):
            def __enter__(self):
                rnn.status = StaticRNN.IN_RNN_BLOCK
                return super().__enter__()

        return Guard(self.helper.main_program, self._complete_op)

    def _assert_in_rnn_block_(self, method: str):
        if self.status != StaticRNN.IN_RNN_BLOCK:
            raise InvalidArgumentError(f"StaticRNN.{method} must be called inside rnn.step()")

    def _parent_block(self):
        return self.helper.main_program.current_block().parent_block

    def memory(self, init=None, shape=None, batch_ref=None, init_value=0.0,
               init_batch_dim_idx=0, ref_batch_dim_idx=1):
        """A memory: the previous step's value of what update_memory gives it, starting from
        `init`, or from `init_value` in `shape` with the batch dim taken from `batch_ref`."""
        self._assert_in_rnn_block_("memory")
        if init is None:
            if shape is None or batch_ref is None:
                raise InvalidArgumentError(
                    "StaticRNN.memory: give init, or both shape and batch_ref")
            _check_var(batch_ref, "batch_ref", "StaticRNN.memory")
            parent = self._parent_block()
            boot = parent.create_var(name=generate(f"{self.helper.name}@memory_boot"),
                                     shape=shape, dtype=batch_ref.dtype)
            # a step variable stands for its whole sequence here (fluid gives both one name),
            # so ref_batch_dim_idx counts the sequence's dims: 1 is the batch of [T, batch, ..]
            parent.append_op("fill_constant_batch_size_like",
                             {"Input": [self._outer_of(batch_ref)]}, {"Out": [boot]},
                             {"value": float(init_value), "shape": list(boot.shape),
                              "dtype": boot.dtype, "input_dim_idx": ref_batch_dim_idx,
                              "output_dim_idx": init_batch_dim_idx})
            return self.memory(init=boot)
        _check_var(init, "init", "StaticRNN.memory")
        pre_mem = self.helper.create_variable(generate(f"{self.helper.name}@mem"),
                                              dtype=init.dtype, shape=init.shape)
        self.memories[pre_mem.name] = _Memory(init, pre_mem)
        return pre_mem

    def _outer_of(self, var):
        for outer, step in self.inputs:
            if step.name == var.name:
                return outer
        return var

    def step_input(self, x):
        """One time step of sequence `x` ([seq_len, ...]): x[t] at step t."""
        self._assert_in_rnn_block_("step_input")
        _check_var(x, "x", "StaticRNN.step_input")
        if self.seq_len is None:
            self.seq_len = x.shape[0]
        elif x.shape[0] != -1 and self.seq_len != x.shape[0]:
            raise InvalidArgumentError(
                f"StaticRNN.step_input: every input must have the same length, got "
                f"{x.shape[0]} after {self.seq_len}")
        step = self.helper.create_variable(generate(f"{x.name}@step"), dtype=x.dtype,
                                           shape=list(x.shape[1:]))
        self.inputs.append((x, step))
        return step

    def step_output(self, o):
        """Collect `o` at every step into an output of shape [seq_len, ...]."""
        self._assert_in_rnn_block_("step_output")
        _check_var(o, "o", "StaticRNN.step_output")
        parent = self._parent_block()
        # read back after each step: declared outside the step block, which frees its own
        per_step = parent.create_var(name=generate(f"{self.helper.name}.step_out"),
                                     dtype=o.dtype, shape=o.shape)
        self.helper.append_op("rnn_memory_helper", {"X": [o]}, {"Out": [per_step]},
                              {"dtype": o.dtype})
        out = parent.create_var(name=generate(f"{self.helper.name}.out"), dtype=o.dtype,
                                shape=[self.seq_len if self.seq_len is not None else -1,
                                       *o.shape])
        self.outputs.append((per_step, out))

    def output(self, *outputs):
        """step_output for each of `outputs`."""
        for o in outputs:
            self.step_output(o)

    def update_memory(self, mem, var):
        """The memory `mem` takes `var`'s value for the next step."""
        _check_var(mem, "mem", "StaticRNN.update_memory")
        _check_var(var, "var", "StaticRNN.update_memory")
        if mem.name not in self.memories:
            raise InvalidArgumentError(
                f"StaticRNN.update_memory: '{mem.name}' is not a memory of this StaticRNN "
                f"(make it with rnn.memory)")
        self.memories[mem.name].mem = var

    def __call__(self, *args, **kwargs):
        if self.status != StaticRNN.AFTER_RNN_BLOCK:
            raise InvalidArgumentError("StaticRNN outputs exist only after the rnn.step() block")
        outs = [out for _, out in self.outputs]
        if not outs:
            raise InvalidArgumentError("StaticRNN has no output: call rnn.step_output(...)")
        return outs[0] if len(outs) == 1 else outs

    def _complete_op(self, body):
        self.status = StaticRNN.AFTER_RNN_BLOCK
        parent = body.parent_block
        states = []
        for m in self.memories.values():
            if m.mem is None:
                raise InvalidArgumentError(
                    f"StaticRNN: memory '{m.pre_mem.name}' (from {m.init.name}) is never "
                    f"updated; call rnn.update_memory(mem, new_value) in the step")
            new = parent.create_var(name=generate(f"{self.helper.name}.state"),
                                    dtype=m.mem.dtype, shape=m.mem.shape)
            body.append_op("rnn_memory_helper", {"X": [m.mem]}, {"Out": [new]},
                           {"dtype": m.mem.dtype})
            states.append(new.name)
        local = {step.name for _, step in self.inputs} | set(self.memories)
        reads, _ = block_io(body)
        params = [n for n in reads if n not in local and n not in body.vars]
        stray = [n for n in reads if n in body.vars and n not in local]
        if stray:
            raise InvalidArgumentError(
                f"StaticRNN: the step reads {stray}, made inside it, before any op writes them")
        parent.append_op(
            "recurrent",
            {"inputs": [x for x, _ in self.inputs],
             "initial_states": [m.init for m in self.memories.values()],
             "parameters": params},
            {"outputs": [out for _, out in self.outputs]},
            {"sub_block": body.idx, "has_states": bool(self.memories),
             "ex_states": list(self.memories), "states": states, "param_names": params,
             "step_input_names": [s.name for _, s in self.inputs],
             "step_output_names": [p.name for p, _ in self.outputs], "reverse": False,
             "is_train": True})
