"""The trainer side of Geo-SGD at run time (fluid 1.8.5's GeoSgdCommunicator, in
paddle/fluid/operators/distributed/communicator.cc), driven by the geo `send` ops of
spmd/ps/geo.py:

- the startup's `send` of "param_init" takes the snapshot `old` of every parameter;
- the trainer program's `send`, at the end of every step, records the ids its is_sparse
  lookups read; at every k-th step (k = geo_sgd_need_push_nums) it pushes. For each block of
  each parameter: delta = (param - old) / trainers, old += delta, delta sent as
  `<block>.delta` (a sparse table: only the rows looked up since the last push, as
  SelectedRows); then the block is received back, param += received - old, old = received
  (for a table: the rows the pservers changed since this trainer's last receive).

fluid pushes from a background thread while training goes on; spmd pushes inside the k-th
step's `send`, so the step that pushes returns with the received parameters (the same
formulas, applied at a known point: deterministic, and testable). Steps after the last push
are not pushed (fluid's thread also only pushes whole groups of k steps).

`communicator()` is this process's communicator, with public counters:

>>> communicator().pushes
0
"""
from __future__ import annotations

import numpy as np

from ..core.lod import LoDTensor
from ..core.selected_rows import SelectedRows
from ..errors import InvalidArgumentError
from .trainer import session, to_host

__all__ = ["GeoCommunicator", "communicator"]

_CONFIGS: dict = {}  # the geo send ops' control output -> their GeoConfig


def register(control_name: str, config) -> None:
    """The transpiler names the config of the geo send whose control output is `name`."""
    _CONFIGS[control_name] = config


def _host_array(value) -> np.ndarray:
    value = to_host(value)
    return value.array if isinstance(value, LoDTensor) else np.asarray(value)


class GeoCommunicator:
    """Snapshot, touched ids and counters of this process's Geo-SGD trainer.

    - `pushes`: pushes done; `steps`: local steps since the last push;
    - `sent_rows`: {table: rows sent over all pushes} (only touched rows of a table go);
    - `keep_delta_sums` (default False): when set, `delta_sums` keeps {parameter: the sum of
      every delta this trainer sent} (whole-shaped, host arrays), for checks.
    """

    def __init__(self):
        self.keep_delta_sums = False
        self.reset()

    def reset(self) -> None:
        self.config = None
        self.old: dict = {}
        self.ids: dict = {}
        self.steps = self.pushes = 0
        self.sent_rows: dict = {}
        self.delta_sums: dict = {}

    # -- the ops -----------------------------------------------------------------------
    def param_init(self, config, names, values) -> None:
        self.config = config
        self.old = {n: _host_array(v).copy() for n, v in zip(names, values)}
        self.ids = {p.name: [] for p in config.params if p.sparse}
        self.steps = 0

    def step(self, config, xp, ids_values, names, values) -> list:
        if self.config is None or not self.old:
            raise InvalidArgumentError(
                "Geo-SGD: the trainer program ran before the startup program took the "
                "parameters' snapshot (param_init); run the transpiled startup program first")
        for table, ids in zip(config.id_tables, ids_values):
            self.ids[table].append(_host_array(ids).reshape(-1).astype(np.int64))
        self.steps += 1
        if self.steps < config.push_nums:
            return list(values)
        current = {n: _host_array(v).copy() for n, v in zip(names, values)}
        self._push(config, current)
        self.steps = 0
        return [xp.asarray(current[n]) for n in names]

    # -- one push ----------------------------------------------------------------------
    def _push(self, config, current: dict) -> None:
        sends, gets = self._deltas(config, current)
        s, step = session(), self.pushes

        def exchange(ep):
            client = s.client(ep, config.trainer_id)
            client.send_variables(sends[ep], step=step)
            return client.get_variables(gets[ep])

        received = {}
        for values in s.each(exchange, list(gets)):
            received.update(values)
        self._take(config, current, received)
        for table in self.ids:
            self.ids[table] = []
        self.pushes += 1

    def _deltas(self, config, current: dict) -> tuple[dict, dict]:
        """({endpoint: {<block>.delta: delta}}, {endpoint: [blocks]}); the snapshot advances
        by each delta (fluid's SendUpdateDenseVars / SendUpdateSparseVars)."""
        touched = {t: np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.int64)
                   for t, ids in self.ids.items()}
        scale = np.float32(1.0 / config.trainers)  # fluid multiplies by 1 / trainers
        sends: dict = {}
        gets: dict = {}
        for p in config.params:
            x, old = current[p.name], self.old[p.name]
            if x.shape != old.shape:
                raise InvalidArgumentError(
                    f"Geo-SGD: parameter '{p.name}' has shape {list(x.shape)}, its snapshot "
                    f"{list(old.shape)}")
            for b in p.blocks:
                if p.sparse:
                    ids = touched[p.name]
                    where = ids[(ids >= b.start) & (ids < b.start + b.rows)]
                    self.sent_rows[p.name] = self.sent_rows.get(p.name, 0) + int(where.size)
                else:
                    where = slice(b.start, b.start + b.rows)
                delta = (x[where] - old[where]) * scale
                old[where] += delta
                if self.keep_delta_sums:
                    self.delta_sums.setdefault(p.name, np.zeros_like(x))[where] += delta
                value = SelectedRows(where - b.start, delta, b.rows) if p.sparse else delta
                sends.setdefault(b.endpoint, {})[f"{b.name}.delta"] = value
                gets.setdefault(b.endpoint, []).append(b.name)
        return sends, gets

    def _take(self, config, current: dict, received: dict) -> None:
        """param += received - snapshot; snapshot = received (fluid's RecvUpdate*Vars); a
        table's block comes as the rows the pservers changed since this trainer's last
        receive."""
        for p in config.params:
            x, old = current[p.name], self.old[p.name]
            for b in p.blocks:
                got = received[b.name]
                if isinstance(got, SelectedRows):
                    where = np.asarray(got.rows).reshape(-1) + b.start
                    value = np.asarray(got.value)
                else:
                    where, value = slice(b.start, b.start + b.rows), _host_array(got)
                x[where] += value - old[where]
                old[where] = value


_COMMUNICATOR = GeoCommunicator()


def communicator() -> GeoCommunicator:
    """This process's Geo-SGD communicator (its counters are public)."""
    return _COMMUNICATOR


def run_geo_send(xp, ins, attrs, ctx) -> dict:
    """The geo send ops' kernel (see the module doc)."""
    control = ctx.op.output("Out")[0]
    config = _CONFIGS.get(control)
    if config is None:
        raise InvalidArgumentError(
            "a send op without epmap is a Geo-SGD send, but no Geo-SGD transpile in this "
            "process made it; transpile the program in this process (DistributeTranspiler "
            "with config.geo_sgd_mode = True) before running it")
    xs, names = list(ins["X"]), ctx.op.input("X")
    if list(attrs["send_varnames"]) == ["param_init"]:
        _COMMUNICATOR.param_init(config, names, xs)
        return {"Out": [np.zeros(0, np.float32)]}
    n_ids = len(attrs["send_varnames"])
    params = _COMMUNICATOR.step(config, xp, xs[:n_ids], names[n_ids:], xs[n_ids:])
    return {"Out": [np.zeros(0, np.float32)] + params}


def reset_on_close() -> None:
    """The trainer is done (an Executor closed, ps/jobs.py): its snapshot goes (the
    counters stay readable)."""
    _COMMUNICATOR.old, _COMMUNICATOR.ids, _COMMUNICATOR.steps = {}, {}, 0
