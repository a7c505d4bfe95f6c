"""fluid.install_check.run_check(): train a tiny program on one place, then data-parallel on
two CPU places of this process, and say that spmd works, as fluid's check does.

>>> from spmd.fluid import install_check
>>> install_check.run_check()  # doctest: +ELLIPSIS
Running Verify Fluid Program ...
...
"""
from __future__ import annotations

import numpy as np

__all__ = ["run_check"]


def _train(places: int) -> float:
    from .. import fluid

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("inp", [None, 2], "float32")
        hidden = fluid.layers.fc(x, 3)
        loss = fluid.layers.mean(fluid.layers.square(hidden))
        fluid.optimizer.SGD(0.01).minimize(loss)
    program = main
    if places > 1:
        program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, places=[fluid.CPUPlace()] * places)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    batch = np.ones((2 * places, 2), "float32")
    (value,) = exe.run(program, feed={"inp": batch}, fetch_list=[loss], scope=scope)
    return float(np.mean(value))


def run_check() -> None:
    """Print whether spmd trains a program on one place and on two places (data parallel);
    an error names the failing step."""
    from ..core import is_compiled_with_cuda

    print("Running Verify Fluid Program ... ")
    _train(1)
    print("Your Paddle Fluid works well on SINGLE GPU or CPU." if is_compiled_with_cuda()
          else "Your Paddle Fluid works well on SINGLE CPU (spmd, fluid 1.8 API).")
    _train(2)
    print("Your Paddle Fluid works well on MUTIPLE GPU or CPU (spmd: data parallel over two "
          "CPU places; across processes it runs under mpirun or paddle-launch).")
    print("Your Paddle Fluid is installed successfully! Let's start deep Learning with Paddle "
          "Fluid now (spmd runs fluid 1.8 static programs data-parallel over MPI).")
