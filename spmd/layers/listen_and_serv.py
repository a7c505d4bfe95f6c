"""fluid 1.8's hand-built parameter-server layers (fluid.layers.io.ListenAndServ, Send, Recv):
a pserver program written with the program-building API instead of the transpiler, served by
spmd's pserver runtime (spmd/ps/pserver.py) as a transpiled one is.

ListenAndServ's `with serv.do():` block is the optimize block; on leaving it, the
`listen_and_serv` op is appended to the enclosing block, serving `inputs` on `endpoint`
("ip:0" picks a free port; the pserver then writes it to /tmp/paddle.<pid>.port, as fluid's
does) for `fan_in` trainers, in sync mode. On the trainer, Send appends `send` (and, with
`sync`, `send_barrier`), Recv appends `recv` (and `fetch_barrier`).

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main):
...     serv = ListenAndServ("127.0.0.1:0", ["X"], optimizer_mode=False)
...     with serv.do():
...         x = fluid.layers.data("X", [4], "float32", append_batch_size=False)
...         y = fluid.layers.scale(x, scale=10.0)
>>> [op.type for op in main.global_block().ops], [op.type for op in main.block(1).ops]
(['listen_and_serv'], ['scale'])
"""
from __future__ import annotations

from ..core.variable import Variable
from ..errors import ArgumentTypeError, InvalidArgumentError
from .helper import LayerHelper
from .sub_block import BlockGuard

__all__ = ["BlockGuardServ", "ListenAndServ", "Recv", "Send"]

SYNC = 0  # fluid's DistributedMode.SYNC: the layer builds sync-mode servers only, as fluid's


class BlockGuardServ(BlockGuard):
    """`with server.do():` ops go into the optimize block; the listen_and_serv op is
    appended when it is left."""

    def __init__(self, server):
        if not isinstance(server, ListenAndServ):
            raise ArgumentTypeError(
                f"BlockGuardServ takes a ListenAndServ, got {type(server).__name__}")
        super().__init__(server.helper.main_program, complete=server.complete_op)
        self.server = server


class ListenAndServ:
    """A pserver serving `inputs` (variable names or Variables) on `endpoint` to `fan_in`
    trainers, running the block built under `do()` when every trainer's values for a step
    arrived. `optimizer_mode`: the block holds optimizer ops (get_params_and_grads reads their
    Param / Grad); False: it is any computation of the received values."""

    def __init__(self, endpoint, inputs, fan_in=1, optimizer_mode=True):
        if not isinstance(endpoint, str) or ":" not in endpoint:
            raise InvalidArgumentError(
                f"ListenAndServ: endpoint must be 'ip:port' (port 0 picks a free one), got "
                f"{endpoint!r}")
        if not isinstance(fan_in, int) or fan_in < 1:
            raise InvalidArgumentError(
                f"ListenAndServ: fan_in (the number of trainers) must be a positive integer, "
                f"got {fan_in!r}")
        self.helper = LayerHelper("listen_and_serv")
        self.inputs = list(inputs)
        self.outputs = []
        self.endpoint = endpoint
        self.fan_in = fan_in
        self.optimizer_mode = optimizer_mode

    def do(self):
        return BlockGuardServ(self)

    def parent_block(self):
        prog = self.helper.main_program
        parent_idx = prog.current_block().parent_idx
        if parent_idx < 0:
            raise InvalidArgumentError(
                "ListenAndServ.parent_block() is called inside `with serv.do():`")
        return prog.block(parent_idx)

    def get_params_and_grads(self):
        """(params, grads) of the optimize block being built: each optimizer op's Param and
        Grad names (optimizer_mode), else every input of its ops (as Variables), twice."""
        block = self.helper.main_program.current_block()
        parent = self.parent_block()
        params, grads = [], []
        for op in block.ops:
            if self.optimizer_mode:
                if "Grad" in op.inputs and "Param" in op.inputs:
                    params.append(op.input("Param")[0])
                    grads.append(op.input("Grad")[0])
            else:
                for name in op.input_arg_names:
                    params.append(parent.var(name))
                    grads.append(parent.var(name))
        return params, grads

    def complete_op(self, body=None):
        from .. import ps  # noqa: F401 - registers the runner that serves a listen_and_serv

        body = body if body is not None else self.helper.main_program.current_block()
        parent = self.helper.main_program.block(body.parent_idx)
        names = [v.name if isinstance(v, Variable) else v for v in self.inputs]
        parent.append_op(
            type="listen_and_serv", inputs={"X": names}, outputs={},
            attrs={"endpoint": self.endpoint, "Fanin": self.fan_in,
                   "optimize_blocks": [body],  # one block, as fluid's layer builds
                   "distributed_mode": SYNC, "grad_to_block_id": [""]})


def _endpoints(endpoints, where: str) -> tuple[list, list]:
    if not isinstance(endpoints, str) or not endpoints:
        raise InvalidArgumentError(
            f"{where}: endpoints must be 'ip:port[,ip:port...]', got {endpoints!r}")
    epmap = endpoints.split(",")
    return epmap, list(dict.fromkeys(epmap))  # each pserver once, in order


def _var_list(value, what: str, where: str, one_allowed: bool = True) -> list:
    """`value` as a list of Variables: None is none, one Variable (where `one_allowed`) a
    list of one; anything else but a list is refused."""
    if value is None and one_allowed:
        return []
    if isinstance(value, Variable) and one_allowed:
        return [value]
    if not isinstance(value, list):
        raise ArgumentTypeError(f"{where}: {what} must be a list of Variables, got "
                                f"{type(value).__name__}")
    return value


def Send(endpoints, send_vars, dummy_output=None, sync=True):  # noqa: N802 - fluid's name
    """Send `send_vars` to the pservers `endpoints` ("ip:port,...", one per variable, in
    order); with `sync`, then wait until every pserver ran its block (send_barrier)."""
    send_vars = _var_list(send_vars, "send_vars", "Send", one_allowed=False)
    dummy_output = _var_list(dummy_output, "dummy_output", "Send")
    epmap, eps = _endpoints(endpoints, "Send")
    helper = LayerHelper("Send")
    helper.append_op(type="send", inputs={"X": send_vars}, outputs={"Out": dummy_output},
                     attrs={"epmap": epmap}, compat_attrs={"endpoints": eps})
    if sync:
        helper.append_op(type="send_barrier", inputs={"X": dummy_output}, outputs={"Out": []},
                         attrs={"endpoints": eps})


def Recv(endpoints, get_vars, dummy_input=None, sync=True):  # noqa: N802 - fluid's name
    """Receive `get_vars` (a list of Variables, named as the pservers hold them) from the
    pservers `endpoints`; with `sync`, then a fetch_barrier. Returns `get_vars`."""
    get_vars = _var_list(get_vars, "get_vars", "Recv", one_allowed=False)
    dummy_input = _var_list(dummy_input, "dummy_input", "Recv")
    epmap, eps = _endpoints(endpoints, "Recv")
    helper = LayerHelper("Recv")
    helper.append_op(type="recv", inputs={"X": dummy_input}, outputs={"Out": get_vars},
                     attrs={"epmap": epmap}, compat_attrs={"endpoints": eps})
    if sync:
        helper.append_op(type="fetch_barrier", outputs={"Out": get_vars},
                         attrs={"endpoints": eps})
    return get_vars
