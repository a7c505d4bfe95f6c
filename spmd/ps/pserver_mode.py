"""One parameter-server transpile: the placement of every parameter and gradient block, the
trainer program rewritten in place, and the pserver programs built on request (from a copy of
the program taken before the rewrite, so any role may be asked for in any order).
"""
from __future__ import annotations

import dataclasses
import socket
import time
import warnings

import numpy as np

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .analysis import (
    LOOKUP_TYPES,
    analyze,
    distributed_tables,
    is_sparse_grad,
    remote_prefetch_tables,
    sparse_table_names,
)
from .geo import (
    GEO,
    build_geo_pserver_program,
    check_geo_options,
    place_geo,
    rewrite_geo_trainer,
)
from .pserver_program import build_pserver_program, build_pserver_startup
from .slicing import block_var_name, slice_variable
from .trainer_program import (
    control_var,
    insert_recvs,
    insert_sends,
    rename_var,
    rewrite_startup,
    strip_optimizer,
)

SYNC, ASYNC, HALF_ASYNC = 0, 1, 2  # fluid's DistributedMode
_WARNED: set = set()


def _warn_once(key: str, message: str):
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, stacklevel=4)


def _parse_endpoints(pservers) -> list[str]:
    eps = [e.strip() for e in str(pservers).split(",") if e.strip()]
    bad = [e for e in eps if e.count(":") != 1 or not e.rsplit(":", 1)[1].isdigit()]
    if not eps or bad:
        raise InvalidArgumentError(
            f"transpile: pservers must be 'ip:port,ip:port,...', got {pservers!r}"
            + (f" ({bad} not ip:port)" if bad else ""))
    return eps


class PServerTranspile:
    def __init__(self, config, trainer_id, program, startup, pservers, trainers, sync_mode,
                 current_endpoint):
        self.config, self.program, self.startup = config, program, startup
        self.endpoints = _parse_endpoints(pservers)
        if isinstance(trainers, bool) or not isinstance(trainers, int) or trainers < 1:
            raise InvalidArgumentError(
                f"transpile: in pserver mode trainers is the number of trainers (an int >= 1), "
                f"got {trainers!r}")
        if not 0 <= trainer_id < trainers:
            raise InvalidArgumentError(
                f"transpile: trainer_id={trainer_id} is not in [0, trainers={trainers})")
        self.trainer_id, self.trainer_num = int(trainer_id), int(trainers)
        self.current_endpoint = current_endpoint
        self.sync_mode = bool(sync_mode) and bool(config.sync_mode)
        self.geo = bool(config.geo_sgd_mode)
        self.distributed_mode = (GEO if self.geo else SYNC if self.sync_mode else
                                 ASYNC if config.runtime_split_send_recv else HALF_ASYNC)
        if self.geo:
            check_geo_options(self)
            self.sync_mode = False
        self._check_options()
        block = program.global_block()
        _prefetch_distributed_tables(block, distributed_tables(block))
        self.origin, self.origin_startup = program.clone(), startup.clone()
        self.origin_analysis = analyze(self.origin)
        self.analysis = analyze(program)
        if not self.geo:
            _refuse_self_updated(self.analysis)
        self.dispatcher = config.split_method(self.endpoints)
        self.remote_tables = remote_prefetch_tables(block)
        self.sparse_tables = sparse_table_names(block)
        self.height_sections: dict[str, list] = {}
        self.counter_name = self.counter_send = None
        if self.geo:
            place_geo(self, block)
            rewrite_geo_trainer(self, block)
            return
        self._place(block)
        self._rewrite_trainer(block)

    def _check_options(self):
        c = self.config
        if c.enable_dc_asgd and self.sync_mode:
            raise InvalidArgumentError(
                "DistributeTranspilerConfig.enable_dc_asgd needs async training "
                "(transpile(..., sync_mode=False)); DC-ASGD compensates delayed gradients")
        if c.runtime_split_send_recv and self.sync_mode:
            raise InvalidArgumentError(
                "DistributeTranspilerConfig.runtime_split_send_recv needs config.sync_mode = "
                "False (fluid's rule)")
        for name in ("half_async", "completely_not_async"):
            if getattr(c, name):
                raise InvalidArgumentError(
                    f"DistributeTranspilerConfig.{name}=True: that communicator mode of fluid "
                    f"(its fleet runtime) is not transpiled here; use sync_mode True or False, "
                    f"or geo_sgd_mode=True (Geo-SGD)")
        if c.print_log:
            _warn_once("print_log", "DistributeTranspilerConfig.print_log has no effect in "
                                    "spmd: print the programs (print(program)) instead")

    # -- placement --------------------------------------------------------------------------
    def _place(self, block):
        n = len(self.endpoints) if self.config.slice_var_up else 1
        ups = [u for u in self.analysis.updates if getattr(block.var(u.param), "trainable",
                                                              True)]
        shapes = [(u.param, block.var(u.param).shape) for u in ups]
        pblocks = slice_variable(shapes, n, self.config.min_block_size)
        suffix = self.trainer_id if self.sync_mode and self.trainer_num > 1 else None
        self.param_blocks, self.grad_blocks = {}, {}
        self.update_by_grad, self.sent_grad_name, self.sparse_grads = {}, {}, {}
        self.grad_of_param, self.grad_source = {}, {}
        for u in ups:
            mine = [b for b in pblocks if b.name == u.param]
            one = len(mine) == 1
            self.param_blocks[u.param] = [dataclasses.replace(
                b, name=u.param if one else block_var_name(u.param, b.index, None))
                for b in mine]
            self.grad_blocks[u.grad] = [dataclasses.replace(
                b, name=block_var_name(u.grad, None if one else b.index, suffix)) for b in mine]
            self.update_by_grad[u.grad] = u
            self.grad_of_param[u.param] = u.grad
            self.grad_source[u.grad] = u.grad
            self.sparse_grads[u.grad] = is_sparse_grad(block, u.grad)
        self.grad_order = list(self.grad_blocks.items())
        if not self.config.slice_var_up:
            np.random.RandomState(self.program.random_seed).shuffle(self.grad_order)

    # -- trainer ----------------------------------------------------------------------------
    def _rewrite_trainer(self, block):
        for grad, blocks in self.grad_blocks.items():
            self.sent_grad_name[grad] = grad
            src = block.var(grad)
            if len(blocks) == 1 and blocks[0].name != grad:
                rename_var(block, grad, blocks[0].name)
                self.sent_grad_name[grad] = blocks[0].name
            elif len(blocks) > 1:
                for b in blocks:
                    block.create_var(name=b.name, shape=b.shape, dtype=src.dtype,
                                     type=src.type)
        for param, blocks in self.param_blocks.items():
            src = block.var(param)
            for b in blocks:
                if b.name != param:
                    block.create_var(name=b.name, shape=b.shape, dtype=src.dtype)
        self.send_blocks = []
        dummies = insert_sends(self, block)
        if not self.sync_mode:
            self._send_lr_counter(block)
        self._dispatch_params()
        self._send_where_params_are(block)
        insert_recvs(self, block, dummies)
        rewrite_startup(self, self.startup, block)

    def _send_lr_counter(self, block):
        """Async: each trainer counts its steps in its own counter and sends it; the pservers
        add them up (fluid 1.8's scheme for a decay schedule without a barrier)."""
        incs = [op for op in self.analysis.lr_ops if op.type == "increment"]
        if not incs:
            return
        counter = block.var(incs[0].output("Out")[0])
        self.counter_name = counter.name
        sb = self.startup.global_block()
        for i in range(self.trainer_num):
            name = f"{counter.name}.trainer_{i}"
            for b in (block, sb):
                b.create_var(name=name, shape=counter.shape, dtype=counter.dtype,
                             persistable=counter.persistable)
            sb._prepend_op("fill_constant", {}, {"Out": [name]},
                           {"shape": list(counter.shape), "dtype": counter.dtype,
                            "value": 1.0})
        for op in sb.ops:
            if op.type == "fill_constant" and op.output("Out") == [counter.name]:
                op.set_attr("value", float(-self.trainer_num))
        out = control_var(block)
        mine = f"{counter.name}.trainer_{self.trainer_id}"
        block.append_op("send", {"X": [mine]}, {"Out": [out.name]},
                        {"epmap": self.endpoints, "sections": [],
                         "send_varnames": [mine] if self.config.runtime_split_send_recv else [],
                         "merge_add": True, "use_send_handler": False,
                         "trainer_id": self.trainer_id}, role=OpRole.COMMUNICATE)
        self.counter_send = out.name

    def _dispatch_params(self):
        """The parameter block of each sent gradient block goes where the gradient went: the
        dispatcher is reset and asked again, in the order the blocks were sent."""
        param_of_grad_block = {}
        for param, pbs in self.param_blocks.items():
            for gb, pb in zip(self.grad_blocks[self.grad_of_param[param]], pbs):
                param_of_grad_block[gb.name] = pb
        recv = [param_of_grad_block[gb.name] for gb in self.send_blocks]
        self.dispatcher.reset()
        eplist = self.dispatcher.dispatch(recv)
        self.block_endpoint = {}
        self.ep_params = {ep: [] for ep in self.endpoints}
        self.ep_grads = {ep: [] for ep in self.endpoints}
        self.grad_of_block = {}
        for pb, gb, ep in zip(recv, self.send_blocks, eplist):
            self.block_endpoint[pb.name] = ep
            self.ep_params[ep].append(pb)
            self.ep_grads[ep].append(gb)
            self.grad_of_block[pb.name] = gb

    def _send_where_params_are(self, block):
        """Each gradient block is sent to the pserver that holds (and updates) its parameter
        block. fluid 1.8 dispatches the gradients' names for the sends and the parameters'
        for the placement: the same pservers under RoundRobin, but under a name-hashing
        split_method a gradient can go where its parameter is not (fluid's pserver then never
        updates that block; the job cannot train), so spmd sends it after its parameter."""
        where = {gb.name: self.block_endpoint[pb.name]
                 for pb, gb in ((pb, self.grad_of_block[pb.name]) for pb in
                                (p for ps in self.ep_params.values() for p in ps))}
        for op in block.ops:
            if op.type != "send" or op.attrs.get("merge_add") or not op.attrs.get("epmap"):
                continue
            names = list(op.attrs.get("send_varnames") or []) or op.input("X")
            if all(n in where for n in names):
                op._set_attr("epmap", [where[n] for n in names])

    def trainer_program(self, wait_port: bool):
        if self.geo:  # Geo-SGD: the trainer keeps its optimizer
            self._stripped = True
        if not getattr(self, "_stripped", False):
            strip_optimizer(self, self.program, self.startup)
            self._stripped = True
        if wait_port:
            _wait_server_ready(self.endpoints)
        return self.program

    # -- pservers ---------------------------------------------------------------------------
    def _check_endpoint(self, endpoint):
        if endpoint not in self.endpoints:
            raise InvalidArgumentError(
                f"pserver endpoint {endpoint!r} is not one of transpile()'s pservers "
                f"{self.endpoints}")

    def pserver_program(self, endpoint):
        self._check_endpoint(endpoint)
        if self.geo:
            return build_geo_pserver_program(self, endpoint)
        return build_pserver_program(self, endpoint)

    def pserver_startup(self, endpoint, pserver_program=None):
        self._check_endpoint(endpoint)
        if pserver_program is None:
            pserver_program = self.pserver_program(endpoint)
        return build_pserver_startup(self, endpoint, pserver_program)


def _wait_server_ready(endpoints, timeout_s: float | None = None):
    """fluid's wait_server_ready: poll each endpoint until it accepts a TCP connection, for at
    most SPMD_PS_RPC_DEADLINE seconds."""
    from ..flags import flags

    deadline = time.monotonic() + (timeout_s or flags().ps_rpc_deadline_s)
    pending = list(endpoints)
    while pending:
        host, port = pending[0].rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                pending.pop(0)
                continue
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise InvalidArgumentError(
                f"get_trainer_program(wait_port=True): pserver(s) {pending} accept no "
                f"connection after {timeout_s or flags().ps_rpc_deadline_s:.0f}s; start the "
                f"pservers first, or pass wait_port=False")
        time.sleep(0.5)


def _prefetch_distributed_tables(block, tables: list[str]) -> None:
    """is_distributed=True tables live on the pservers only, as fluid's do: their lookups
    (and the lookups' gradient ops) become sparse remote-prefetch lookups, the path
    is_sparse=True tables take (distributed_lookup_table on the trainer, the rows' gradients
    sent as SelectedRows), cut into row blocks as those are. fluid 1.8's transpiler meant
    to reach them through split_ids / prefetch / merge_ids ops, but 1.8.5's transpile of an
    is_distributed table raises IndexError (tests/oracle/make_ps_slicing.py records it)."""
    if not tables:
        return
    for op in block.ops:
        reads_table = any(n in tables for n in op.input("W")) if "W" in op.inputs else False
        if reads_table and op.type in LOOKUP_TYPES + tuple(t + "_grad" for t in LOOKUP_TYPES):
            op._set_attr("is_sparse", True)
            if op.type in LOOKUP_TYPES:
                op._set_attr("remote_prefetch", True)


def _refuse_self_updated(analysis) -> None:
    """Outside Geo-SGD a pserver updates a parameter by its optimizer op on the gradients the
    trainers send; one an op updates itself on the trainer (distribute_update_vars) has none."""
    own = [u.param for u in analysis.updates if u.optimizer is None]
    if own:
        raise InvalidArgumentError(
            f"DistributeTranspiler: parameter(s) {own} are updated by their op's own backward "
            f"pass (distribute_update_vars), not by an optimizer op, so a pserver has no "
            f"update to run for them; train them with Geo-SGD (config.sync_mode = False, "
            f"config.geo_sgd_mode = True), which pushes their deltas")
