"""fluid.executor: Executor, global_scope, scope_guard, FetchHandler (train_from_dataset's
periodic fetch callback) and _as_lodtensor."""
from __future__ import annotations

import sys

import numpy as np

from ..core import Scope, global_scope, scope_guard  # noqa: F401
from ..core.lod import LoDTensor
from ..executor import Executor  # noqa: F401

__all__ = ["Executor", "global_scope", "scope_guard"]


class FetchHandler:
    """train_from_dataset(fetch_handler=...): every `period_secs` its `handler` gets
    {key: value} of the variables in `var_dict` (subclass it and override handler).

    >>> # class Auc(FetchHandler):
    >>> #     def handler(self, res_dict): print(res_dict["auc"])
    >>> # exe.train_from_dataset(main, dataset, fetch_handler=Auc({"auc": auc}, 30))
    """

    def __init__(self, var_dict=None, period_secs=60):
        if var_dict is None:
            raise ValueError("FetchHandler needs var_dict: {name: Variable}")
        self.var_dict = var_dict
        self.period_secs = period_secs

    def handler(self, res_dict) -> None:
        """The default: print the first element of each fetched array."""
        for key, value in res_dict.items():
            if isinstance(value, np.ndarray):
                sys.stdout.write(f"{key}[0]: {value[0]} ")
        sys.stdout.write("\n")

    @staticmethod
    def help() -> None:
        print("subclass FetchHandler, override handler(self, res_dict), and pass "
              "FetchHandler(var_dict={'name': variable}, period_secs=60) to "
              "exe.train_from_dataset(fetch_handler=...)")


def as_numpy(tensor):
    """fluid.executor.as_numpy: a fetched LoDTensor (or a list / LoDTensorArray of them) as
    numpy arrays; a tensor with a LoD is refused, as fluid refuses it (its sequences would
    be lost): fetch it with return_numpy=False and keep the LoDTensor."""
    if isinstance(tensor, list):  # a LoDTensorArray is a list of LoDTensors here
        return [as_numpy(t) for t in tensor]
    if not isinstance(tensor, LoDTensor):
        if hasattr(tensor, "__array__"):  # a scope's Tensor, an array
            lod = tensor.lod() if callable(getattr(tensor, "lod", None)) else []
            if not lod:
                return np.array(tensor)
        else:
            raise TypeError(f"as_numpy: expected a LoDTensor or a list of them, got "
                            f"{type(tensor).__name__}")
    if tensor.lod():
        raise RuntimeError(
            "Some of your fetched tensors hold LoD information. They can not be completely "
            "cast to Python ndarray. Please set the parameter 'return_numpy' as 'False' to "
            "return LoDTensor itself directly.")
    return None if tensor.array is None else np.array(tensor)


def _as_lodtensor(data, place, dtype=None) -> LoDTensor:
    """A LoDTensor holding `data`, as fluid 1.8's: an array as it is (its own dtype), a
    number as a [1] tensor of `dtype` (which must then be given); a list is refused, since
    its rows may be sequences of different lengths (build a LoDTensor for them)."""
    from ..core.dtypes import convert_dtype

    if isinstance(data, list):
        raise RuntimeError(
            "_as_lodtensor: a list of rows may hold LoD information (sequences of different "
            "lengths), which a list cannot carry: convert it to a LoDTensor "
            "(fluid.create_lod_tensor) or a numpy array before feeding it")
    if np.isscalar(data):
        if dtype is None:
            raise AssertionError(
                "_as_lodtensor: dtype should be given when casting a python scalar to a "
                "tensor (the fed variable's dtype)")
        array = np.array([data]).astype(convert_dtype(dtype))
    else:
        array = np.asarray(data)
    tensor = LoDTensor()
    tensor.set(array, place)
    return tensor


def _fetch_var(name, scope=None, return_numpy=True):
    """The value of variable `name` in `scope` (the global scope by default): an array, or
    the scope's tensor with return_numpy=False. fluid's programs read parameters so."""
    if not isinstance(name, str):
        name = getattr(name, "name", name)
    scope = global_scope() if scope is None else scope
    found = scope.find_var(name)
    if found is None:
        raise KeyError(f"Cannot find {name} in scope. Perhaps you need to make the variable "
                       f"persistable by using var.persistable = True in your program.")
    tensor = found.get_tensor()
    return np.array(tensor) if return_numpy else tensor
