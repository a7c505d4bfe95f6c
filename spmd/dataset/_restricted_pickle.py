"""Loading pickled data files without running code from them.

A pickle can name any importable callable and call it while it loads; a data file from a cache
folder on a shared cluster is not trusted that far. CIFAR's batches (and the files
`common.split` writes) are pickles of plain containers, str/bytes, numbers and numpy arrays,
so the loader here allows exactly the globals those need (numpy's array, dtype and scalar
reconstructors, `_codecs.encode` that Python 3 uses for bytes in protocol 2, set/frozenset)
and refuses every other one with an error naming it.

>>> import io, pickle
>>> restricted_load(io.BytesIO(pickle.dumps({"a": [1, 2.5, b"x"]})), "memory")
{'a': [1, 2.5, b'x']}
"""
from __future__ import annotations

import codecs
import importlib
import pickle

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["restricted_load"]


def _numpy_attr(name: str, modules: tuple[str, ...]):
    # numpy 2 moved numpy.core to numpy._core; files name whichever numpy wrote them
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"numpy has no {name} in {modules}")


def _allowed() -> dict:
    multiarray = ("numpy._core.multiarray", "numpy.core.multiarray")
    numeric = ("numpy._core.numeric", "numpy.core.numeric")
    reconstruct = _numpy_attr("_reconstruct", multiarray)
    scalar = _numpy_attr("scalar", multiarray)
    frombuffer = _numpy_attr("_frombuffer", numeric)
    table = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
             ("_codecs", "encode"): codecs.encode}
    for module in multiarray:
        table[(module, "_reconstruct")] = reconstruct
        table[(module, "scalar")] = scalar
    for module in numeric:
        table[(module, "_frombuffer")] = frombuffer
    for module in ("builtins", "__builtin__"):  # Python 3 and Python 2 spell it differently
        table[(module, "set")] = set
        table[(module, "frozenset")] = frozenset
        table[(module, "complex")] = complex
    return table


class _PlainUnpickler(pickle.Unpickler):
    def __init__(self, file, source: str, encoding: str):
        super().__init__(file, encoding=encoding)
        self._source = source
        self._table = _allowed()

    def find_class(self, module, name):
        found = self._table.get((module, name))
        if found is None:
            raise InvalidArgumentError(
                f"refusing to unpickle {module}.{name} from {self._source}: spmd loads only "
                "pickles of plain containers (dict, list, tuple, set), str/bytes, numbers and "
                "numpy arrays, because a pickle may run any code it names. If this file is "
                "not the expected data set file, replace it with the original; if you trust "
                "it, load it yourself and pass the samples through a reader function")
        return found


def restricted_load(file, source: str, encoding: str = "bytes"):
    """Unpickle one object from the binary file object `file`, allowing only plain data.

    `source` names the file in error messages. `encoding` is pickle's: "bytes" (the default,
    as Paddle reads Python 2 pickles) keeps Python 2 `str` objects as bytes.

    >>> import io, pickle
    >>> import numpy as np
    >>> restricted_load(io.BytesIO(pickle.dumps(np.arange(3))), "memory")
    array([0, 1, 2])
    """
    try:
        return _PlainUnpickler(file, source, encoding).load()
    except InvalidArgumentError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise InvalidArgumentError(
            f"cannot read the pickle {source}: {exc}. The file is damaged or not in the "
            "expected format; replace it with the original file") from exc
