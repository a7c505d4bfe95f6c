"""A plan's run with every op timed, while fluid.profiler profiles (spmd/profiler.py): the same
loop over copies of the steps whose kernels are wrapped in a timer, so the unprofiled loop
pays nothing for the profiler but the one check in Plan.run.
"""
from __future__ import annotations

from .. import profiler as _profiler
from .steps import Step


def run_profiled(plan, rec, scope, feed, xp, checked):
    """`plan.run` with every op timed, recorded in `rec`: events 'feed', one per op type,
    'wait_collectives', 'fetch', and the whole run."""
    now, thread = _profiler.now_ns, rec.thread_index()
    start = now()
    env = plan._tagged_inputs(scope, feed, xp, checked)
    rec.record("feed", start, now(), thread)
    wait = (_timer(plan.comm.wait_all, "wait_collectives", rec, thread)
            if plan.has_collectives else None)
    if plan._ssa is not None and xp.__name__ == "numpy":  # each op on its thread's track
        plan._execute_ssa(_timed(plan.steps, rec, None), env, xp, wait)
    else:
        plan._execute(_timed(plan.steps, rec, thread), env, xp, wait)
    t0 = now()
    fetched = plan._commit(scope, env)
    end = now()
    rec.record("fetch", t0, end, thread)
    rec.record(plan._run_event, start, end, thread)
    return fetched


def _timer(fn, name: str, rec, thread):
    """`fn` recording an event `name` around each call, on `thread` (None: the calling
    thread's)."""
    now = _profiler.now_ns

    def timed(*args):
        t0 = now()
        result = fn(*args)
        rec.record(name, t0, now(), thread)
        return result
    return timed


def _timed(steps, rec, thread) -> list:
    """`steps` with each kernel wrapped to record an event named after its op type."""
    return [Step(_timer(s.fn, s.where[1].type, rec, thread), s.ins, s.outs, s.attrs, s.want,
                 s.frees, s.where, s.ctx, s.shrinks) for s in steps]
