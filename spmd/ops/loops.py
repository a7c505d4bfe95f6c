"""Op definitions: the loops over sub-blocks: while, recurrent, rnn_memory_helper and their
gradients (kernels in spmd/kernels/loops.py; how a block's names are bound: see
spmd/ops/branches.py's docstring).
"""
from __future__ import annotations

from .registry import define_op

_NAMES = ("strs", [])


@define_op("while", inputs=["X*", "Condition"], outputs=["Out*", "StepScopes?"], grad=None,
           attrs={"sub_block": "block", "is_test": ("bool", False), "x_names": _NAMES,
                  "out_names": _NAMES, "cond_name": ("str", "")},
           lod_inputs=("X",), lod_outputs=("Out",))
def _while(ctx):
    c = ctx.input("Condition")
    ctx.check(c.dtype == "bool", f"Condition '{c.name}' must be bool, got {c.dtype}")
    ctx.check(len(ctx.inputs("X")) == len(ctx.attr("x_names")),
              "X and x_names must have the same length")
    ctx.check(ctx.num_outputs("Out") == len(ctx.attr("out_names")),
              "Out and out_names must have the same length")


@define_op("while_grad", inputs=["X*", "Out*", "Out@GRAD*", "StepScopes"], outputs=["X@GRAD*"],
           grad=None, lod_inputs=("X",),
           attrs={"sub_block": "block", "x_names": _NAMES, "out_names": _NAMES,
                  "grad_out_names": _NAMES, "seed_names": _NAMES, "result_names": _NAMES})
def _while_grad(ctx):
    ctx.set_output_like("X@GRAD", "X")


_RNN_NAMES = {"step_input_names": _NAMES, "ex_states": _NAMES, "states": _NAMES,
              "param_names": _NAMES, "step_output_names": _NAMES}


@define_op("recurrent", inputs=["inputs*", "initial_states*", "parameters*"],
           outputs=["outputs*", "step_scopes?"], grad=None,
           attrs={"sub_block": "block", "reverse": ("bool", False), "is_train": ("bool", True),
                  "has_states": ("bool", False), **_RNN_NAMES})
def _recurrent(ctx):
    xs = ctx.inputs("inputs")
    ctx.check(bool(xs), "a StaticRNN needs at least one step input (rnn.step_input(x))")
    lengths = {x.shape[0] for x in xs if x.shape and x.shape[0] >= 0}
    ctx.check(len(lengths) <= 1, f"every step input must have the same length (dim 0), got "
                                 f"{[list(x.shape) for x in xs]}")
    ctx.check(len(ctx.inputs("initial_states")) == len(ctx.attr("ex_states"))
              == len(ctx.attr("states")), "initial_states, ex_states and states must align")


@define_op("recurrent_grad",
           inputs=["inputs*", "initial_states*", "parameters*", "outputs@GRAD*", "step_scopes"],
           outputs=["inputs@GRAD*", "initial_states@GRAD*", "parameters@GRAD*"], grad=None,
           attrs={"sub_block": "block", "reverse": ("bool", False), **_RNN_NAMES,
                  "grad_output_names": _NAMES, "seed_names": _NAMES, "result_names": _NAMES})
def _recurrent_grad(ctx):
    for slot in ("inputs", "initial_states", "parameters"):
        ctx.set_output_like(slot + "@GRAD", slot)


# fluid's rnn_memory_helper_grad reads X and Out (for their shapes only: X@GRAD is zeros like X
# when Out@GRAD is absent) beside Out@GRAD, and Paddle's tests build it with all three
@define_op("rnn_memory_helper", inputs=["X"], outputs=["Out"], grad_uses=("X", "Out"),
           grad_no_need_buffer=("X", "Out"), attrs={"dtype": ("any", None)})
def _rnn_memory_helper(ctx):
    ctx.set_output_like("Out", "X")
