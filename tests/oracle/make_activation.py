"""Outputs of fluid 1.8's activation layers at non-default attributes, values and gradients
(d sum(out) / dx, so each gradient entry is f'(x)), on a grid of inputs that includes every
kink of the op, for tests/unit/test_activation_fluid.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_activation.py

CASES is shared with the test: name -> (layer, keyword arguments, dtype, extra points). The
input of a case is GRID plus its extra points (the kinks of that op at those attributes), as
one row; extra points None means the op's domain instead (DOMAIN).
"""
import os
import sys

import numpy as np

GRID = [-45.0, -25.0, -20.5, -8.0, -6.0, -5.0, -3.5, -2.5, -1.0, -0.7, -0.3, 0.0, 0.3, 0.7,
        1.0, 2.5, 3.5, 5.0, 7.0, 20.5, 25.0, 45.0]

CASES = {
    "relu": ("relu", {}, "float32", []),
    "leaky_relu": ("leaky_relu", {"alpha": 0.3}, "float32", []),
    "leaky_relu_neg_alpha": ("leaky_relu", {"alpha": -0.5}, "float32", []),
    "leaky_relu_big_alpha": ("leaky_relu", {"alpha": 2.0}, "float32", []),
    "sigmoid": ("sigmoid", {}, "float64", []),
    "tanh": ("tanh", {}, "float64", []),
    "gelu": ("gelu", {}, "float64", []),
    "gelu_tanh": ("gelu", {"approximate": True}, "float64", []),
    "softplus": ("softplus", {}, "float64", []),
    "softsign": ("softsign", {}, "float64", []),
    "logsigmoid": ("logsigmoid", {}, "float64", []),
    "tanh_shrink": ("tanh_shrink", {}, "float64", []),
    "softshrink": ("softshrink", {"alpha": 0.3}, "float32", [-0.3, 0.3]),
    "hard_shrink": ("hard_shrink", {"threshold": 0.3}, "float32", [-0.3, 0.3]),
    "thresholded_relu": ("thresholded_relu", {"threshold": 0.3}, "float32", [0.3]),
    "brelu": ("brelu", {"t_min": -1.0, "t_max": 2.5}, "float32", []),
    "elu": ("elu", {"alpha": 0.3}, "float64", []),
    "selu": ("selu", {"scale": 1.5, "alpha": 0.7}, "float64", []),
    "relu6": ("relu6", {"threshold": 2.5}, "float32", []),
    "stanh": ("stanh", {"scale_a": 0.3, "scale_b": 2.0}, "float64", []),
    "hard_sigmoid": ("hard_sigmoid", {"slope": 0.4, "offset": 0.3}, "float32",
                     [-0.75, 1.75]),
    "swish": ("swish", {"beta": 2.0}, "float64", []),
    "hard_swish": ("hard_swish", {"threshold": 4.0, "scale": 5.0, "offset": 2.0}, "float32",
                   [-2.0, 2.0]),
    "hard_swish_default": ("hard_swish", {}, "float32", [-3.0, 3.0]),
    "soft_relu": ("soft_relu", {"threshold": 3.0}, "float32", [-3.0, 2.9, 3.0]),
    "soft_relu_default": ("soft_relu", {}, "float64", [-40.0, 40.0]),
    "mish": ("mish", {"threshold": 3.0}, "float32", [-3.0, 3.0]),
    "mish_default": ("mish", {}, "float64", [-20.0, 20.0]),
    "clip": ("clip", {"min": -1.0, "max": 2.5}, "float32", []),
    "abs": ("abs", {}, "float64", []),
    "atan": ("atan", {}, "float64", []),
    "cos": ("cos", {}, "float64", []),
    "sin": ("sin", {}, "float64", []),
    "erf": ("erf", {}, "float64", []),
    "exp": ("exp", {}, "float64", []),
    "square": ("square", {}, "float64", []),
    "ceil": ("ceil", {}, "float32", [-2.5, 1.5]),
    "floor": ("floor", {}, "float32", [-2.5, 1.5]),
    "round": ("round", {}, "float32", [-2.5, -1.5, -0.5, 0.5, 1.5]),
    "sign": ("sign", {}, "float32", []),
    "acos": ("acos", {}, "float64", None),
    "asin": ("asin", {}, "float64", None),
    "log": ("log", {}, "float64", None),
    "sqrt": ("sqrt", {}, "float64", None),
    "rsqrt": ("rsqrt", {}, "float64", None),
    "reciprocal": ("reciprocal", {}, "float64", None),
    "log1p": ("log1p", {}, "float64", None),
    "cumsum_exclusive_reverse": ("cumsum", {"axis": 1, "exclusive": True, "reverse": True},
                                 "float64", []),
    "log_softmax": ("log_softmax", {"axis": 1}, "float64", []),
    "prelu_all": ("prelu", {"mode": "all"}, "float32", []),
    "prelu_element": ("prelu", {"mode": "element"}, "float32", []),
}
# every layer with attributes at its defaults too (the kinks are in GRID: 0.5, 1, 6, 24 below)
for _layer in ("softshrink", "hard_shrink", "thresholded_relu", "brelu", "elu", "selu",
               "relu6", "stanh", "hard_sigmoid", "swish", "leaky_relu", "cumsum"):
    CASES[_layer + "_default"] = (_layer, {}, "float32", [-0.5, 0.5, 6.0, 24.0])
# inputs inside a domain: |x| < 1 for acos / asin, x > 0 for the logs and roots
UNIT = [-0.95, -0.7, -0.3, 0.0, 0.2, 0.5, 0.9]
POSITIVE = [0.05, 0.3, 0.7, 1.0, 2.5, 7.0, 45.0]
DOMAIN = {"acos": UNIT, "asin": UNIT, "log": POSITIVE, "sqrt": POSITIVE, "rsqrt": POSITIVE,
          "reciprocal": [-7.0, -0.3] + POSITIVE, "log1p": [-0.9, -0.3] + POSITIVE}


def case_input(name):
    """The one-row input of CASES[name], in its dtype."""
    _, _, dtype, extra = CASES[name]
    points = DOMAIN[name] if extra is None else GRID + list(extra)
    return np.array([sorted(points)], dtype=dtype)


def run_case(fluid, name):
    """[out, d sum(out) / dx] of CASES[name] in `fluid` (real fluid or spmd.fluid)."""
    layer, kwargs, dtype, _ = CASES[name]
    x_val = case_input(name)
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(prog, startup):
        x = fluid.data("x", list(x_val.shape), dtype)
        x.stop_gradient = False
        out = getattr(fluid.layers, layer)(x, **kwargs)
        grad = fluid.gradients([fluid.layers.reduce_sum(out)], [x])[0]
    with fluid.scope_guard(fluid.core.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        return [np.array(a) for a in exe.run(prog, feed={"x": x_val}, fetch_list=[out, grad])]


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    save("activation", {name: run_case(fluid, name) for name in sorted(CASES)},
         meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
