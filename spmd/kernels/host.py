"""Kernels: host ops. py_func calls the user's Python function on host numpy arrays (copied
back to the device for GPU places); print writes the tensor as fluid's Print does."""
from __future__ import annotations

import time

import numpy as np

from ..errors import InvalidArgumentError
from ..ops.host import get_callable
from .registry import kernel

# dtype -> the type code fluid's print op shows (C++ typeid names)
_TYPE_CODES = {"float32": "f", "float64": "d", "int32": "i", "int64": "l", "bool": "b",
               "int8": "a", "uint8": "h", "int16": "s", "float16": "N5paddle8platform7float16E"}
_printed: dict[int, int] = {}  # print op id -> times printed (first_n)


def _host(a):
    return a if isinstance(a, np.ndarray) else np.asarray(a.get() if hasattr(a, "get") else a)


def _as_list(result, count: int, what: str) -> list:
    if count == 0:
        return []
    if isinstance(result, (list, tuple)):
        values = list(result)
    else:
        values = [result]
    if len(values) != count:
        raise InvalidArgumentError(
            f"{what} returned {len(values)} value(s) but {count} output variable(s) were given")
    return values


@kernel("py_func")
def py_func(xp, ins, attrs, want):
    func = get_callable(attrs["forward_callable_id"])
    result = func(*[_host(a) for a in ins.get("X", [])])
    dtypes = attrs["out_dtypes"]
    values = _as_list(result, len(dtypes),
                      f"py_func's function {getattr(func, '__name__', func)}")
    if not values:
        return {}
    return {"Out": [xp.asarray(np.asarray(v, dtype=d)) for v, d in zip(values, dtypes)]}


@kernel("py_func_grad")
def py_func_grad(xp, ins, attrs, want):
    func = get_callable(attrs["backward_callable_id"])
    xs, outs = ins.get("X", []), ins.get("Out", [])
    args = [_host(xs[i]) for i in attrs["x_keep"]] + [_host(outs[i]) for i in attrs["out_keep"]]
    args += [_host(d) for d in ins.get("Out@GRAD", [])]
    result = func(*args)
    grads = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(grads) != len(xs):
        raise InvalidArgumentError(
            f"py_func's backward function {getattr(func, '__name__', func)} returned "
            f"{len(grads)} gradient(s) but the forward op has {len(xs)} input(s): return one "
            f"per input (None for an input without gradient)")
    out = []
    for i in attrs["grad_index"]:
        x, g = xs[i], grads[i]
        g = np.zeros(x.shape, x.dtype) if g is None else np.asarray(g, dtype=x.dtype)
        out.append(xp.asarray(g.reshape(x.shape)))
    return {"X@GRAD": out}


def _format(array, attrs, lod=None) -> str:
    host = _host(array)
    lines = []
    if attrs["print_tensor_name"]:
        lines.append(f"Tensor[{attrs['tensor_name']}]")
    if attrs["print_tensor_shape"]:
        lines.append("\tshape: [" + "".join(f"{d}," for d in host.shape) + "]")
    if attrs["print_tensor_type"]:
        lines.append(f"\tdtype: {_TYPE_CODES.get(host.dtype.name, host.dtype.name)}")
    if attrs["print_tensor_lod"] and lod is not None:  # as fluid: LoD: [[ 0,1,3, ]]
        lines.append("\tLoD: [" + "".join(
            "[ " + "".join(f"{int(o)}," for o in level) + " ]" for level in lod) + "]")
    flat = host.reshape(-1)
    n = flat.size if attrs["summarize"] < 0 else min(attrs["summarize"], flat.size)
    lines.append("\tdata: " + "".join(f"{v:g}," if host.dtype.kind == "f" else f"{v},"
                                      for v in flat[:n].tolist()))
    return "\n".join(lines)


@kernel("print", context=True)
def print_(xp, ins, attrs, want, ctx):
    x = ins["In"]
    phase = attrs["print_phase"]
    shown = phase == "BOTH" or (phase == "FORWARD") == attrs["is_forward"]
    key = attrs["print_id"]
    count = _printed.get(key, 0)
    if shown and (attrs["first_n"] < 0 or count < attrs["first_n"]):
        _printed[key] = count + 1
        rank = ctx.tag  # "[rank r/n] " in multi-process jobs
        place = "CPUPlace" if isinstance(x, np.ndarray) else "CUDAPlace"
        print(f"{rank}{int(time.time())}\t{attrs['message']}\tThe place is:{place}\n"
              f"{_format(x, attrs, ins.get('In@LOD'))}", flush=True)
    return {"Out": x} if "Out" in want else {}
