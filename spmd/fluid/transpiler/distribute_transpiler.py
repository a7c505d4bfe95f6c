"""fluid.transpiler.distribute_transpiler: DistributeTranspiler and its config (spmd/ps), the
modes, ServerRuntimeConfig, and fluid's block helpers (VarBlock, slice_variable,
same_or_split_var) with fluid's string form of a block, "name:index:size".

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     w = fluid.layers.create_parameter([1000, 20], "float32", name="w")
>>> slice_variable([w], slice_count=3, min_block_size=8192)    # as fluid 1.8.5 cuts it
['w:0:10000', 'w:1:10000']
>>> slice_variable([w], slice_count=3, min_block_size=64)
['w:0:6680', 'w:1:6680', 'w:2:6640']
"""
from __future__ import annotations

import os

import numpy as np

from ...core.program import default_main_program
from ...ps import slicing
from ...ps.transpiler import DistributeTranspiler as _Transpiler
from ...ps.transpiler import DistributeTranspilerConfig

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "DistributedMode",
           "ServerRuntimeConfig", "VarBlock", "log", "same_or_split_var", "slice_variable"]

PRINT_LOG = False


class DistributedMode:
    """fluid's codes of the parameter-server modes."""

    SYNC = 0
    ASYNC = 1
    HALF_ASYNC = 2
    GEO = 3


def log(*args) -> None:
    """Print `args` when the module's PRINT_LOG is set (fluid's transpiler debug output)."""
    if PRINT_LOG:
        print(args)


class VarBlock:
    """Block `offset` of variable `varname`, `size` elements: str() gives "name:offset:size"."""

    def __init__(self, varname: str, offset: int, size: int):
        self.varname, self.offset, self.size = varname, offset, size

    def __str__(self):
        return f"{self.varname}:{self.offset}:{self.size}"


def same_or_split_var(p_name: str, var_name: str) -> bool:
    """Whether `p_name` is `var_name` or one of its blocks ("<var_name>.block<i>")."""
    return p_name == var_name or p_name.startswith(var_name + ".block")


def slice_variable(var_list, slice_count: int, min_block_size: int) -> list[str]:
    """fluid's cut of each variable into at most `slice_count` row-aligned blocks of at least
    `min_block_size` elements, as "name:index:size" strings (the transpiler's own cut)."""
    blocks = slicing.slice_variable([(v.name, v.shape) for v in var_list], slice_count,
                                    min_block_size)
    return [str(VarBlock(b.name, b.index, b.size)) for b in blocks]


class DistributeTranspiler(_Transpiler):
    """spmd's DistributeTranspiler (spmd/ps/transpiler.py) marking the programs as fluid's
    does: in pserver mode the trained program gets `_is_distributed`, `_endpoints` (the
    pservers), `_ps_endpoint`, `_is_chief` (trainer 0) and `_distributed_lookup_table`, and
    the pserver programs `_is_distributed`; in nccl2 mode `_trainers_endpoints`.

    >>> # t = fluid.DistributeTranspiler(); t.transpile(0, pservers=eps, trainers=2)
    >>> # fluid.default_main_program()._is_distributed       # True
    """

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1,
                  sync_mode=True, startup_program=None, current_endpoint="127.0.0.1:6174",
                  workers=None):
        program = program or default_main_program()
        super().transpile(trainer_id, program, pservers, trainers, sync_mode, startup_program,
                          current_endpoint, workers)
        if self.config.mode == "nccl2":
            endpoints = workers if workers is not None else trainers
            program._trainers_endpoints = [e for e in str(endpoints).split(",") if e]
            return
        # (the transpile has already turned a distributed table's lookups into its prefetch)
        tables = [op.input("W")[0] for op in program.global_block().ops
                  if op.type == "distributed_lookup_table"
                  or (op.type in ("lookup_table", "lookup_table_v2")
                      and op.attrs.get("is_distributed"))]
        program._is_distributed = True
        program._endpoints = [e for e in pservers.split(",") if e]
        program._ps_endpoint = current_endpoint
        program._is_chief = trainer_id == 0
        program._distributed_lookup_table = tables[0] if tables else None
        self.has_distributed_lookup_table = bool(tables)
        program._parameters_on_pservers = self._overview(program)

    def _overview(self, program):
        """fluid's VarsDistributed of the parameters: each block of each parameter, on its
        pserver."""
        from .details.vars_distributed import VarsDistributed, VarStruct

        overview = VarsDistributed()
        for name, blocks in sorted(self.param_blocks().items()):
            param = program.global_block().var(name)
            row = int(np.prod(param.shape[1:])) if len(param.shape) > 1 else 1
            for index, (block, start, end, endpoint) in enumerate(blocks):
                piece = VarStruct(block, (end - start, *param.shape[1:]), param.dtype,
                                  param.type, param.lod_level, param.persistable)
                overview.add_distributed_var(param, piece, is_slice=len(blocks) > 1,
                                             block_id=index, offset=start * row,
                                             vtype="Param", endpoint=endpoint)
        return overview

    def get_trainer_program(self, wait_port=True):
        trainer = super().get_trainer_program(wait_port)
        if trainer is not self._program:
            trainer._copy_dist_param_info_from(self._program)
        return trainer

    def get_pserver_program(self, endpoint):
        return self._mark_pserver(super().get_pserver_program(endpoint), endpoint)

    def get_pserver_programs(self, endpoint):
        main, startup = super().get_pserver_programs(endpoint)
        return self._mark_pserver(main, endpoint), startup

    def _mark_pserver(self, program, endpoint):
        program._copy_dist_param_info_from(self._program)
        program._ps_endpoint = endpoint
        return program


class ServerRuntimeConfig:
    """The pserver's RPC thread counts, from FLAGS_rpc_{send,get,prefetch}_thread_num (12)."""

    def __init__(self):
        self._rpc_send_thread_num = int(os.getenv("FLAGS_rpc_send_thread_num", "12"))
        self._rpc_get_thread_num = int(os.getenv("FLAGS_rpc_get_thread_num", "12"))
        self._rpc_prefetch_thread_num = int(os.getenv("FLAGS_rpc_prefetch_thread_num", "12"))
