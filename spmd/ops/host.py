"""Op definitions: host ops that run Python: `py_func` (a user function, arrays in and
arrays out, with an optional backward function) and `print` (fluid.layers.Print).

The Python callables live in a process-wide table; ops refer to them by index, so a cloned
or data-parallel copy of a program calls the same functions.
"""
from __future__ import annotations

from .registry import GRAD_SUFFIX, define_op

_CALLABLES: list = []


def register_callable(func) -> int:
    """Keep `func` for py_func ops; returns its id (the op's attribute)."""
    _CALLABLES.append(func)
    return len(_CALLABLES) - 1


def get_callable(index: int):
    return _CALLABLES[index]


def _py_func_grad(op, g):
    """py_func_grad runs backward_func(inputs not skipped, outputs not skipped, output
    gradients) and writes the gradients of the inputs that need one."""
    if op.attr("backward_callable_id") < 0:
        return []
    xs, outs = op.input("X"), op.output("Out")
    wanted = [(i, g.in_grad(n)) for i, n in enumerate(xs)]
    wanted = [(i, name) for i, name in wanted if name is not None]
    if not wanted or not any(g.out_grad(n) for n in outs):
        return []
    douts = [g.out_grad_or_zeros(n) for n in outs]
    skip = set(op.attr("backward_skip_vars"))
    attrs = dict(op.attrs)
    attrs.update(x_keep=[i for i, n in enumerate(xs) if n not in skip],
                 out_keep=[i for i, n in enumerate(outs) if n not in skip],
                 grad_index=[i for i, _ in wanted])
    return [("py_func_grad", {"X": xs, "Out": outs, "Out" + GRAD_SUFFIX: douts},
             {"X" + GRAD_SUFFIX: [name for _, name in wanted]}, attrs)]


_PY_FUNC_ATTRS = {"forward_callable_id": ("int", -1), "backward_callable_id": ("int", -1),
                  "backward_skip_vars": ("strs", []),
                  # the output variables' dtypes, set by the layer: results are cast to them
                  "out_dtypes": ("strs", [])}


@define_op("py_func", inputs=["X*"], outputs=["Out*"], grad=_py_func_grad,
           attrs=_PY_FUNC_ATTRS, side_effects=True)
def _py_func(ctx):
    ctx.check(ctx.attr("forward_callable_id") >= 0, "forward_callable_id is not set")
    # outputs keep the shapes and dtypes they were declared with (the function decides)


@define_op("py_func_grad", inputs=["X*", "Out*", "Out@GRAD*"], outputs=["X@GRAD*"],
           grad=None, attrs={**_PY_FUNC_ATTRS, "x_keep": ("ints", []), "out_keep": ("ints", []),
                             "grad_index": ("ints", [])}, side_effects=True)
def _py_func_grad_infer(ctx):
    xs = ctx.inputs("X")
    for k, i in enumerate(ctx.attr("grad_index")):
        ctx.set_output("X@GRAD", xs[i].shape, xs[i].dtype, index=k)


def _print_grad(op, g):
    if op.attr("print_phase") not in ("BACKWARD", "BOTH"):
        return []
    dx, dout = g.in_grad(op.input("In")[0]), g.out_grad(op.output("Out")[0])
    if dx is None or dout is None:
        return []
    attrs = dict(op.attrs, is_forward=False)
    return [("print", {"In": [dout]}, {"Out": [dx]}, attrs)]


@define_op("print", inputs=["In"], outputs=["Out?"], grad=_print_grad, lod_inputs=("In",),
           attrs={"first_n": ("int", -1), "message": ("str", ""), "summarize": ("int", 20),
                  "print_tensor_name": ("bool", True), "print_tensor_type": ("bool", True),
                  "print_tensor_shape": ("bool", True), "print_tensor_lod": ("bool", True),
                  "print_phase": ("str", "BOTH"), "is_forward": ("bool", True),
                  "print_id": ("int", -1), "tensor_name": ("str", "")})
def _print(ctx):
    ctx.check(ctx.attr("print_phase") in ("FORWARD", "BACKWARD", "BOTH"),
              f"print_phase must be 'forward', 'backward' or 'both', got "
              f"{ctx.attr('print_phase')!r}")
    ctx.set_output_like("Out", "In")
