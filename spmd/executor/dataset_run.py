"""Executor.train_from_dataset / infer_from_dataset: a program run over every batch of a
fluid Dataset (spmd.datafeed), as fluid 1.8's MultiTrainer runs its Hogwild threads.

Each of the `thread` readers batches its share of the data; the runs take the threads' batches
in turn (thread 0's first, thread 1's first, ...) on the one scope, so the parameters are shared
as in Hogwild, in an order that repeats. A CompiledProgram with several places in the process
takes one batch per place per run; compiled data parallel across MPI ranks, every rank runs
while all still have batches (agreed each step), so the collectives always meet. A transpiled
parameter-server trainer program runs as it does under Executor.run (its send/recv ops talk to
the pservers). Every `print_period` batches of thread 0 the fetched variables are printed in
fluid's format (`fetch_info`, the name, then the tensor's LoD, dims, layout, dtype and data).
infer_from_dataset runs the program the same way: fluid 1.8's Hogwild worker runs every op of
the program given (a training program still updates), so give it a test program.
"""
from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from ..core.program import default_main_program
from ..errors import InvalidArgumentError, PreconditionError

_DTYPE_NAMES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int",
                "float16": "float16", "bool": "bool", "uint8": "unsigned char",
                "int8": "signed char", "int16": "short"}


def tensor_text(info: str, name: str, array, lod) -> str:
    """One fetched variable as fluid's PrintVar writes it (platform/lodtensor_printer.cc)."""
    array = np.asarray(array)
    levels = ", ".join("{" + ", ".join(str(int(o)) for o in level) + "}" for level in lod or [])
    if array.dtype.kind == "f":
        data = " ".join(format(v, "g") for v in array.ravel().tolist())
    else:
        data = " ".join(str(v) for v in array.ravel().tolist())
    dims = ", ".join(str(d) for d in array.shape)
    dtype = _DTYPE_NAMES.get(array.dtype.name, array.dtype.name)
    return (f"{info}\t{name}\t\tlod: {{{levels}}}\n\tdim: {dims}\n\tlayout: NCHW\n"
            f"\tdtype: {dtype}\n\tdata: [{data}]\n\t")


def _threads(dataset, thread: int) -> int:
    threads = thread if thread and thread > 0 else dataset.thread_num
    if not threads or threads <= 0:
        raise PreconditionError(
            "You should set thread num first, either in Dataset (dataset.set_thread(n)) or in "
            "Executor.train_from_dataset(thread=n)")
    fit = getattr(dataset, "effective_threads", None)  # a QueueDataset: no more than files
    return fit(threads) if fit is not None else threads


def _in_turn(streams):
    """(thread, feed) of the threads' batches taken in turn until all are exhausted."""
    live = list(enumerate(streams))
    while live:
        still = []
        for t, stream in live:
            item = next(stream, None)
            if item is not None:
                yield t, item[1]
                still.append((t, stream))
        live = still


def _fetch_names(fetch_list) -> list[str]:
    names = []
    for item in fetch_list:
        name = item if isinstance(item, str) else getattr(item, "name", None)
        if not isinstance(name, str):
            raise InvalidArgumentError(
                f"train_from_dataset: fetch_list items must be Variables or names, got "
                f"{type(item).__name__}")
        names.append(name)
    return names


class _Agreement:
    """Whether every rank still has a batch: compiled data parallel across MPI ranks only."""

    def __init__(self, program, executor, scope):
        from .compiled import compiled_of as _compiled

        compiled = _compiled(program)
        self.needed, self.tag = False, ""
        if compiled is not None:  # never asked otherwise: a pserver job has no MPI world
            from ..comm.topology import detect

            self.tag = detect().tag()
            self.needed = (detect().size > 1
                           and compiled.distribution is not None)

    def all_have(self, mine: bool) -> bool:
        if not self.needed:
            return mine
        from ..comm.factory import world_communicator

        flag = np.array([1 if mine else 0], np.int64)
        world_communicator().allreduce(flag, "min")
        return bool(flag[0])


def run_from_dataset(executor, program=None, dataset=None, scope=None, thread=0,
                     is_infer=False, debug=False, fetch_list=None, fetch_info=None,
                     print_period=100, fetch_handler=None):
    """Executor.train_from_dataset / infer_from_dataset (see the module docstring)."""
    if dataset is None:
        raise PreconditionError(
            "train_from_dataset: dataset is need and should be initialized (give dataset=, "
            "made by fluid.DatasetFactory().create_dataset(...))")
    program = default_main_program() if program is None else program
    fetch_list = list(fetch_list or [])
    fetch_info = list(fetch_info or [])
    if len(fetch_list) != len(fetch_info):
        raise InvalidArgumentError(
            f"train_from_dataset: fetch_list has {len(fetch_list)} item(s), fetch_info "
            f"{len(fetch_info)}; give one print label per fetched variable")
    if isinstance(print_period, bool) or not isinstance(print_period, int) or print_period <= 0:
        raise InvalidArgumentError(
            f"train_from_dataset: print_period must be a positive int, got {print_period!r}")
    from .compiled import places_in_process as _places_in_process

    names = _fetch_names(fetch_list)
    places = _places_in_process(program, executor.place)
    agreement = _Agreement(program, executor, scope)
    batches = _in_turn(dataset.thread_batches(_threads(dataset, thread)))
    handler = _HandlerClock(fetch_handler)
    stats = _Stats()
    profiling = _start_profile(debug)
    try:
        while True:
            group = [b for _, b in zip(range(places), batches)]
            if not agreement.all_have(len(group) == places):
                stats.left_over(len(group))
                break
            feed = group[0][1] if places == 1 else [f for _, f in group]
            fetched = executor.run(program, feed=feed, fetch_list=names, scope=scope,
                                   return_numpy=False)
            stats.step(group)
            if any(t == 0 for t, _ in group):
                stats.thread0 += 1
                if names and stats.thread0 % print_period == 0:
                    for info, name, value in zip(fetch_info, names, fetched):
                        print(tensor_text(info, name, *_printable(value)))
                    sys.stdout.flush()
            handler.maybe_call(scope)
    finally:
        _stop_profile(profiling, stats)
    stats.warn_left_over(agreement.tag)
    return None


def _printable(value):
    """(array, LoD) of a fetched value; of several places' values place 0's, as fluid prints
    thread 0's."""
    if isinstance(value, list):
        value = value[0] if value else np.zeros(0)
    lod = value.lod() if hasattr(value, "lod") else None
    return np.asarray(value), lod


class _Stats:
    def __init__(self):
        self.runs = self.thread0 = self.instances = self.dropped = 0
        self.start = time.perf_counter()

    def step(self, group):
        self.runs += 1
        self.instances += sum(_instances(f) for _, f in group)

    def left_over(self, count: int):
        self.dropped = count

    def warn_left_over(self, tag: str):
        if self.dropped:
            prefix = f"{tag} " if tag else ""
            warnings.warn(
                f"{prefix}train_from_dataset: the last {self.dropped} batch(es) were not run: a "
                f"data-parallel run takes one batch per place and every rank must run each "
                f"step; give the places (and ranks) equal shares (fleet.split_files, "
                f"global_shuffle) to use every record", stacklevel=3)


def _instances(feed: dict) -> int:
    value = next(iter(feed.values()), None)
    if value is None:
        return 0
    lod = value.lod() if hasattr(value, "lod") else None
    return len(lod[0]) - 1 if lod else int(np.asarray(value).shape[0])


def _start_profile(debug: bool):
    if not debug:
        return False
    from .. import profiler

    if profiler.active() is not None:
        return False  # the user's own profiler is running: it reports
    profiler.start_profiler("CPU")
    return True


def _stop_profile(profiling: bool, stats: _Stats):
    if not profiling:
        return
    import os
    import tempfile

    from .. import profiler

    profiler.stop_profiler("total", os.path.join(tempfile.gettempdir(),
                                                 "spmd_train_from_dataset_profile"))
    seconds = time.perf_counter() - stats.start
    print(f"train_from_dataset: {stats.runs} run(s), {stats.instances} instance(s) in "
          f"{seconds:.3f} s, {stats.instances / max(seconds, 1e-9):.1f} instances/s",
          flush=True)


class FetchHandler:
    """fluid.executor.FetchHandler: give train_from_dataset(fetch_handler=...) a subclass;
    every `period_secs` its handler(res_dict) gets {key: the value of var_dict[key]} (numpy,
    or None while the variable holds nothing).

    >>> handler = FetchHandler(var_dict={"bias": "fc_0.b_0"}, period_secs=10)
    >>> handler.handler({"bias": np.array([0.5])})  # doctest: +NORMALIZE_WHITESPACE
    bias[0]: 0.5
    """

    def __init__(self, var_dict=None, period_secs=60):
        if var_dict is None:
            raise InvalidArgumentError(
                "FetchHandler needs var_dict: {key: a Variable (or its name)} to fetch")
        self.var_dict = var_dict
        self.period_secs = period_secs

    def handler(self, res_dict):
        """Print the first element of each fetched value (fluid's default)."""
        for key, value in res_dict.items():
            if isinstance(value, np.ndarray):
                sys.stdout.write(f"{key}[0]: {value[0]} ")
        sys.stdout.write("\n")


class _HandlerClock:
    """fluid's FetchHandler: every period_secs its handler gets {key: the variable's value}
    read from the scope (None while the variable holds nothing)."""

    def __init__(self, handler):
        self.handler = handler
        self.last = time.monotonic()

    def maybe_call(self, scope):
        if self.handler is None:
            return
        period = getattr(self.handler, "period_secs", 60)
        if time.monotonic() - self.last < period:
            return
        self.last = time.monotonic()
        from ..core.scope import global_scope, host_array

        scope = global_scope() if scope is None else scope
        values = {}
        for key, var in self.handler.var_dict.items():
            name = getattr(var, "name", var)
            value = scope.find_var(name) if isinstance(name, str) else None
            values[key] = None if value is None else np.array(host_array(_tensor(value)))
        self.handler.handler(values)


def _tensor(found):
    get = getattr(found, "get_tensor", None)
    return np.asarray(get()) if get is not None else found
