"""fluid.transpiler.details.vars_distributed: the record of which pserver holds which slice of
which variable (VarStruct, VarDistributed, VarsDistributed), as fluid 1.8's transpiler keeps
it for programs and fleet utilities that read it.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     w = fluid.layers.create_parameter([4, 2], "float32", name="w")
>>> dist = VarsDistributed()
>>> dist.add_distributed_var(w, w, vtype="Param", endpoint="127.0.0.1:6174")
>>> dist.get_distributed_var_by_slice("w").is_slice
False
"""
from __future__ import annotations

from ....core.variable import Variable

__all__ = ["VarDistributed", "VarStruct", "VarsDistributed"]


class VarStruct:
    """A variable's description: name, shape, dtype, type, lod_level, persistable."""

    def __init__(self, name, shape, dtype, type, lod_level, persistable):  # noqa: A002
        self.name, self.shape, self.dtype, self.type = name, shape, dtype, type
        self.lod_level, self.persistable = lod_level, persistable


def _struct(var):
    if isinstance(var, Variable):
        return VarStruct(var.name, var.shape, var.dtype, var.type, var.lod_level,
                         var.persistable)
    return var


def _same(a, b) -> bool:
    return (a.name, a.type, tuple(a.shape), a.dtype, a.lod_level, a.persistable) == (
        b.name, b.type, tuple(b.shape), b.dtype, b.lod_level, b.persistable)


def _describe(v) -> str:
    return f"{v.name} : fluid.{v.type}.shape{tuple(v.shape)}.astype({v.dtype})"


class VarDistributed:
    """One slice of an origin variable on one endpoint; `is_slice` is False when the slice
    is the whole variable, unless given."""

    def __init__(self, origin_var, slice_var, is_slice=None, block_id=None, offset=None,
                 vtype=None, endpoint=None):
        self.origin, self.slice = _struct(origin_var), _struct(slice_var)
        self.is_slice = not self.equal(self.origin, self.slice) if is_slice is None else is_slice
        self.block_id = 0 if block_id is None else block_id
        self.offset = 0 if offset is None else offset
        self.vtype, self.endpoint = vtype, endpoint

    @staticmethod
    def equal(var1, var2) -> bool:
        if not (isinstance(var1, VarStruct) and isinstance(var2, VarStruct)):
            raise TypeError("VarDistributed.equal compares two VarStructs")
        return _same(var1, var2)

    def __str__(self):
        return (f"var owned: {self.vtype}, origin var: ( {_describe(self.origin)} ), slice "
                f"var: ( {_describe(self.slice)}.slice({self.is_slice}).block({self.block_id})"
                f".offset({self.offset}) ), endpoint: {self.endpoint} ")


class VarsDistributed:
    """All the slices: added with add_distributed_var, looked up by slice name, by origin and
    endpoint, by vtype (optionally grouped by origin) or by endpoint."""

    def __init__(self):
        self.distributed_vars: list[VarDistributed] = []

    def add_distributed_var(self, origin_var, slice_var, is_slice=None, block_id=None,
                            offset=None, vtype=None, endpoint=None) -> None:
        self.distributed_vars.append(VarDistributed(origin_var, slice_var, is_slice, block_id,
                                                    offset, vtype, endpoint))

    def get_distributed_var_by_slice(self, var_name):
        return next((v for v in self.distributed_vars if v.slice.name == var_name), None)

    @staticmethod
    def equal(var1, var2) -> bool:
        return _same(var1, var2)

    def get_distributed_var_by_origin_and_ep(self, origin_var_name, endpoint):
        return next((v for v in self.distributed_vars
                     if v.origin.name == origin_var_name and v.endpoint == endpoint), None)

    def get_distributed_vars_by_vtypes(self, vtypes, groupby=False):
        found = [v for v in self.distributed_vars if v.vtype in vtypes]
        if not groupby:
            return found
        grouped: dict[str, list] = {}
        for v in found:
            grouped.setdefault(v.origin.name, []).append(v)
        return grouped

    def get_distributed_vars_by_ep(self, endpoint, vtype=None):
        found = [v for v in self.distributed_vars if v.endpoint == endpoint]
        return found if not vtype else [v for v in found if v.vtype == vtype]

    def overview(self) -> str:
        return "\n".join(str(v) for v in self.distributed_vars)
