"""Parameter-server mode's job kinds (spmd/ops/distributed.py's ops name them, OpDef.job_kind):
a pserver program serves (PServerJob), a trainer program runs on one place and, when an
executor closes, this process's trainer session ends (TrainerJob)."""
from __future__ import annotations

from ..core.places import array_module
from ..executor.job import OnePlaceJob


class PServerJob:
    """`exe.run(pserver_program)`: serve until every trainer is done (pserver.py's
    ListenAndServ), then leave the updated persistables in the scope."""

    state_sharding = None
    started = True

    def __init__(self, program, place, scope=None):
        from ..executor.plan_cache import PlanCache

        program = getattr(program, "program", program)  # a CompiledProgram: its program
        self.program, self.place, self.places = program, place, [place]
        self.plans = PlanCache()  # serving compiles no plan of the global block

    def start(self, scope, sharded_state=None) -> None:
        """Nothing before serving: the pserver reads the scope the startup program filled."""

    def step(self, scope, feed, fetch_names, return_numpy=True, return_merged=True) -> list:
        from .pserver import ListenAndServ

        names = list(feed) if isinstance(feed, dict) else [n for f in feed for n in f]
        serve = ListenAndServ(self.program, names, fetch_names, self.place)
        return serve.run(scope, feed, array_module(self.place), self.place).values

    def close(self) -> None:
        """Nothing held between runs."""


class TrainerJob(OnePlaceJob):
    """A trainer's program (its send / recv / barrier ops talk to the pservers through the
    process's trainer session, trainer.py): a one-place job."""

    @staticmethod
    def end_process(executor) -> None:
        """Any Executor.close(): tell every pserver this process talked to that this trainer
        is done and close the connections (fluid's Executor.close; fleet.stop_worker closes
        an executor of its own), and drop the Geo-SGD snapshot."""
        from . import geo_trainer, trainer

        trainer.session().close()
        geo_trainer.reset_on_close()
