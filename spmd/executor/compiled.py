"""CompiledProgram: a Program prepared for running by an Executor, per fluid's API."""
from __future__ import annotations

from ..core.program import Program
from ..errors import InvalidArgumentError
from .strategy import BuildStrategy


class CompiledProgram:
    """Wraps a Program for `Executor.run` (fluid.CompiledProgram).

    >>> import spmd.fluid as fluid
    >>> compiled = fluid.CompiledProgram(fluid.Program())
    """

    def __init__(self, program_or_graph, build_strategy: BuildStrategy | None = None):
        if not isinstance(program_or_graph, Program):
            raise InvalidArgumentError(
                f"CompiledProgram expects a Program, got {type(program_or_graph).__name__}"
            )
        if build_strategy is not None and not isinstance(build_strategy, BuildStrategy):
            raise InvalidArgumentError(
                f"build_strategy must be a BuildStrategy, got {type(build_strategy).__name__}"
            )
        self._program = program_or_graph
        self._build_strategy = build_strategy or BuildStrategy()

    @property
    def program(self) -> Program:
        return self._program

    def _run_compiled(self, executor, feed, fetch_names, scope, return_numpy, return_merged):
        if not isinstance(feed, dict):
            raise InvalidArgumentError(
                f"feed must be a dict name -> array, got {type(feed).__name__}"
            )
        return executor._run_program(self._program, feed, fetch_names, scope, return_numpy)
