"""ParallelExecutor: fluid's older front end to data parallelism, a thin wrapper over
CompiledProgram.with_data_parallel and Executor."""
from __future__ import annotations

from ..core.places import CPUPlace, CUDAPlace
from ..core.program import default_main_program
from ..core.scope import global_scope
from ..passes.strategy import BuildStrategy
from .compiled import CompiledProgram
from .executor import Executor


class ParallelExecutor:
    """fluid.ParallelExecutor(use_cuda, loss_name, main_program, share_vars_from,
    exec_strategy, build_strategy, num_trainers, trainer_id, scope).

    >>> # pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name)
    >>> # loss_value, = pe.run(fetch_list=[loss.name], feed={"x": x, "y": y})
    """

    def __init__(self, use_cuda, loss_name=None, main_program=None, share_vars_from=None,
                 exec_strategy=None, build_strategy=None, num_trainers=1, trainer_id=0,
                 scope=None):
        build_strategy = build_strategy or BuildStrategy()
        build_strategy.num_trainers = num_trainers
        build_strategy.trainer_id = trainer_id
        self._place = _gpu_place() if use_cuda else CPUPlace()
        self._compiled = CompiledProgram(main_program or default_main_program()).with_data_parallel(
            loss_name=loss_name, build_strategy=build_strategy, exec_strategy=exec_strategy,
            share_vars_from=share_vars_from._compiled if share_vars_from is not None else None)
        self._executor = Executor(self._place)
        self._scope = scope if scope is not None else global_scope()

    def run(self, fetch_list, feed=None, feed_dict=None, return_numpy=True):
        """Run one step on every place; `feed` (or fluid's older `feed_dict`) is split over them."""
        return self._executor.run(self._compiled, feed=feed if feed is not None else feed_dict,
                                  fetch_list=fetch_list, scope=self._scope,
                                  return_numpy=return_numpy)

    @property
    def device_count(self) -> int:
        job = self._compiled.job
        return len(job.places) if job is not None else len(
            self._compiled.places_for(self._place))

    def drop_local_exe_scopes(self):
        """Drop the per-place working state of the steps now (fluid drops its local execution
        scopes; ExecutionStrategy.num_iteration_per_drop_scope): the compiled step plans, with
        the buffers they keep between steps. The next run makes them again. Parameters and
        other persistable values stay."""
        self._executor.plan_cache.clear()

    def _need_create_local_exe_scopes(self) -> bool:
        """Whether the next run has to make the per-place working state again: before the
        first run and after drop_local_exe_scopes (fluid's check that dropping works)."""
        return len(self._executor.plan_cache) == 0


def _gpu_place():
    import cupy

    from ..comm.topology import detect, select_gpu

    return CUDAPlace(select_gpu(detect(), cupy.cuda.runtime.getDeviceCount()))
