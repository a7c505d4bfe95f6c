"""fluid.layers linear algebra: addmm, bmm, dot, cross, dist, t, kron, trace, cos_sim,
l2_normalize (matmul and mul are in math_ops.py).

>>> # sim = fluid.layers.cos_sim(a, b); y = fluid.layers.l2_normalize(x, axis=1)
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable

__all__ = ["addmm", "bmm", "cos_sim", "cross", "dist", "dot", "kron", "l2_normalize", "t",
           "trace"]

_FLOATS = {"float32", "float64"}
_NUMERIC = {"float16", "float32", "float64", "int32", "int64"}


def _binary(op_type: str, inputs: dict, attrs=None, name=None, dtype=None, out=None):
    helper = LayerHelper(op_type, name=name)
    first = next(iter(inputs.values()))
    if out is None:
        out = helper.create_variable_for_type_inference(dtype or first.dtype)
    else:
        check_variable(out, "out", op_type)
    helper.append_op(op_type, {k: [v] for k, v in inputs.items()}, {"Out": [out]}, attrs or {})
    return out


def addmm(input, x, y, alpha=1.0, beta=1.0, name=None):  # noqa: A002 - fluid's names
    """beta * input + alpha * (x @ y); input broadcasts to x @ y's shape.

    >>> # out = fluid.layers.addmm(bias, a, b, alpha=2.0)
    """
    for arg, v in (("input", input), ("x", x), ("y", y)):
        check_variable(v, arg, "addmm", _FLOATS)
    return _binary("addmm", {"Input": input, "X": x, "Y": y},
                   {"Alpha": float(alpha), "Beta": float(beta)}, name, x.dtype)


def bmm(x, y, name=None):
    """Batched matrix product: [B, M, K] @ [B, K, N] -> [B, M, N].

    >>> # out = fluid.layers.bmm(a, b)
    """
    check_variable(x, "x", "bmm")
    check_variable(y, "y", "bmm")
    return _binary("bmm", {"X": x, "Y": y}, name=name)


def dot(x, y, name=None):
    """Inner product over the last dim: [N] -> [1], [B, N] -> [B, 1]. With `name`, the output
    variable is called that.

    >>> # out = fluid.layers.dot(a, b)
    """
    check_variable(x, "x", "dot", _NUMERIC)
    check_variable(y, "y", "dot", _NUMERIC)
    helper = LayerHelper("dot", name=name)
    out = (helper.create_variable_for_type_inference(x.dtype) if name is None
           else helper.create_variable(name, x.dtype, persistable=False))
    helper.append_op("dot", {"X": [x], "Y": [y]}, {"Out": [out]})
    return out


def cross(input, other, dim=None):  # noqa: A002 - fluid's names
    """Cross product of 3-vectors along `dim` (None: the first axis of size 3).

    >>> # out = fluid.layers.cross(a, b, dim=1)
    """
    check_variable(input, "input", "cross")
    check_variable(other, "other", "cross")
    # fluid sets the attribute only for a truthy dim, so dim=0 also means "the first of size 3"
    return _binary("cross", {"X": input, "Y": other}, {"dim": dim} if dim else {})


def dist(x, y, p=2):
    """The p-norm of x - y (broadcast) as shape [1]; p may be 0, inf or -inf.

    >>> # d = fluid.layers.dist(a, b, p=1)
    """
    check_variable(x, "x", "dist", _FLOATS)
    check_variable(y, "y", "dist", _FLOATS)
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise InvalidArgumentError(f"dist: p must be a number, got {p!r}")
    return _binary("dist", {"X": x, "Y": y}, {"p": float(p)})


def t(input, name=None):  # noqa: A002 - fluid's name
    """The transpose of a matrix; a vector comes back as itself.

    >>> # xt = fluid.layers.t(x)
    """
    check_variable(input, "input", "t", _NUMERIC)
    if input.ndim > 2:
        raise InvalidArgumentError(
            f"t: input {input.name} has rank {input.ndim}; t takes a vector or a matrix "
            f"(rank <= 2): use fluid.layers.transpose for higher ranks")
    if input.ndim < 2:
        return input
    helper = LayerHelper("t", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    xshape = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("transpose2", {"X": [input]}, {"Out": [out], "XShape": [xshape]},
                     {"axis": [1, 0]})
    return out


def kron(x, y, out=None, name=None):
    """Kronecker product (the lower-rank operand gets leading dims of 1).

    >>> # k = fluid.layers.kron(a, b)
    """
    check_variable(x, "x", "kron", _NUMERIC)
    check_variable(y, "y", "kron", _NUMERIC)
    return _binary("kron", {"X": x, "Y": y}, name=name, out=out)


def trace(input, offset=0, dim1=0, dim2=1, out=None, name=None):  # noqa: A002
    """Sum of the diagonal (shifted by `offset`) of the matrices on axes dim1, dim2.

    >>> # tr = fluid.layers.trace(x, offset=1)
    """
    check_variable(input, "input", "trace", _NUMERIC)
    rank = input.ndim
    if rank < 2:
        raise InvalidArgumentError(f"trace: input must have rank >= 2, got {list(input.shape)}")
    for arg, d in (("dim1", dim1), ("dim2", dim2)):
        if not -rank <= d < rank:
            raise InvalidArgumentError(
                f"trace: {arg}={d} is out of range [{-rank}, {rank - 1}] for input "
                f"{list(input.shape)}")
    if dim1 % rank == dim2 % rank:
        raise InvalidArgumentError(f"trace: dim1={dim1} and dim2={dim2} are the same axis")
    return _binary("trace", {"Input": input},
                   {"offset": offset, "dim1": dim1, "dim2": dim2}, name=name, out=out)


def cos_sim(X, Y):  # noqa: N803 - fluid's argument names
    """Cosine similarity of the rows of X [N, ...] and Y [N or 1, ...], shape [N, 1].

    >>> # sim = fluid.layers.cos_sim(query, doc)
    """
    check_variable(X, "X", "cos_sim", {"float32", "float64"})
    check_variable(Y, "Y", "cos_sim", {"float32", "float64"})
    helper = LayerHelper("cos_sim")
    out, xn, yn = (helper.create_variable_for_type_inference(X.dtype) for _ in range(3))
    helper.append_op("cos_sim", {"X": [X], "Y": [Y]},
                     {"Out": [out], "XNorm": [xn], "YNorm": [yn]})
    return out


def l2_normalize(x, axis, epsilon=1e-12, name=None):
    """x / sqrt(sum(x^2 along axis) + epsilon); a vector is normalized along axis 0.

    >>> # y = fluid.layers.l2_normalize(x, axis=1)
    """
    check_variable(x, "x", "l2_normalize", _FLOATS)
    if x.ndim == 1:
        axis = 0
    helper = LayerHelper("l2_normalize", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    norm = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("norm", {"X": [x]}, {"Out": [out], "Norm": [norm]},
                     {"axis": 1 if axis is None else axis, "epsilon": epsilon})
    return out
