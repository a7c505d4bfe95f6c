"""The data-parallel examples of ../shared/seeds/ run under mpiexec, unchanged but for the import
line: CompiledProgram.with_data_parallel (with share_vars_from and places), the
ParallelExecutor train/test pair, and the nccl2-mode transpile. Each then has trained: the
parameters moved, and are bitwise equal on every rank."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from seed_examples import (
    SEEDS,
    compiled_program_guide,
    nccl2_example,
    paddle_api_examples,
    port,
    rst_code_blocks,
)

import spmd
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.core import Program, Scope, is_compiled_with_cuda, program_guard, scope_guard, unique_name

pytestmark = [pytest.mark.mpi(min_size=1),
              pytest.mark.skipif(not SEEDS.is_dir(), reason=f"{SEEDS} is not beside the checkout")]

CUDA = is_compiled_with_cuda()

# What the guide fragments (seeds 000, 003, 004) use without defining: a small regression model,
# its train and test programs, a batch for this rank, and this rank's trainer endpoints.
PREAMBLE = """
import numpy as np
import spmd.fluid as fluid
from spmd.fluid import compiler
from spmd.comm.topology import detect

_t = detect()
use_cuda = {cuda}
dev_count = 1
memory_opt = True
x = fluid.data("x", [None, 4], "float32")
y = fluid.data("y", [None, 1], "float32")
loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
loss_var = loss
test_program = fluid.default_main_program().clone(for_test=True)
fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
train_program = fluid.default_main_program()
_rng = np.random.default_rng(_t.rank)
feed_dict = {{"x": _rng.random((8, 4), dtype="float32"), "y": _rng.random((8, 1), dtype="float32")}}
trainer_id = _t.rank
trainers = workers = ",".join(f"127.0.0.1:{{6170 + i}}" for i in range(_t.size))
curr_ep = trainers.split(",")[trainer_id]
"""


def run_isolated(code: str) -> dict:
    namespace: dict = {"__name__": "__seed_example__"}
    old_cpu_num = os.environ.get("CPU_NUM")
    try:
        with program_guard(Program(), Program()), scope_guard(Scope()), unique_name.guard():
            exec(compile(code, "<seed example>", "exec"), namespace)
            namespace["_scope"] = spmd.global_scope()
    finally:  # seed 002 sets CPU_NUM for the process
        if old_cpu_num is None:
            os.environ.pop("CPU_NUM", None)
        else:
            os.environ["CPU_NUM"] = old_cpu_num
    return namespace


def same_on_every_rank(scope, names) -> np.ndarray:
    h = hashlib.sha256()
    for n in names:
        h.update(np.array(scope.find_var(n).get_tensor()).tobytes())
    everyone = MPICommunicator().allgather(np.frombuffer(h.digest(), dtype=np.uint8).copy())
    assert (everyone == everyone[0]).all(), f"{names} differ across ranks"


def test_compiled_program_guide():
    """seed 000: Executor.run of the main program, then a CompiledProgram with_data_parallel."""
    ns = run_isolated(PREAMBLE.format(cuda=CUDA) + port(compiled_program_guide(), CUDA))
    assert np.isfinite(ns["loss"]).all() and ns["loss"].shape == (1,)
    same_on_every_rank(ns["_scope"], ["fc_0.w_0", "fc_0.b_0"])


def test_with_data_parallel_share_vars_from_places():
    """seed 002's with_data_parallel example: 2 CPU places per process, a test program sharing
    the training program's variables."""
    ns = run_isolated(port(paddle_api_examples("002")[1], CUDA))
    shared = zip(ns["compiled_test_prog"].place_scopes, ns["compiled_train_prog"].place_scopes)
    assert all(a is b for a, b in shared)  # shared, not copied
    assert ns["loss_data"].shape == (len(ns["parallel_places"]),)
    assert np.isfinite(ns["loss_data"]).all()
    same_on_every_rank(ns["_scope"], ["fc_0.w_0", "fc_0.b_0"])


def test_parallel_executor_train_test_pair():
    """seed 003: a training ParallelExecutor and a test one sharing its variables."""
    ns = run_isolated(PREAMBLE.format(cuda=CUDA) + port(rst_code_blocks("003")[0], CUDA))
    assert np.isfinite(ns["train_loss"]).all() and np.isfinite(ns["test_loss"]).all()
    # the test executor saw the parameters after the training step: its loss on the same batch
    # is what the trained parameters give
    scope = ns["_scope"]
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    b = np.array(scope.find_var("fc_0.b_0").get_tensor())
    x, y = ns["feed_dict"]["x"], ns["feed_dict"]["y"]
    np.testing.assert_allclose(ns["test_loss"], [np.mean((x @ w + b - y) ** 2)], rtol=1e-5)
    same_on_every_rank(scope, ["fc_0.w_0", "fc_0.b_0"])


def test_nccl2_transpile():
    """seed 004's nccl2 mode: transpile, then a ParallelExecutor across the trainers."""
    code = PREAMBLE.format(cuda=CUDA) + port(nccl2_example(), CUDA)
    ns = run_isolated(code + "\n_startup = fluid.default_startup_program()\n")
    startup = ns["_startup"]
    assert [op.type for op in startup.global_block().ops][-1] == "c_comm_init"
    t = detect()
    assert startup.global_block().ops[-1].attr("nranks") == t.size
    # the trainers then run the startup program (which makes the communicator) and train
    with program_guard(ns["train_program"], startup), scope_guard(ns["_scope"]):
        plain = spmd.Executor(spmd.CPUPlace())
        plain.run(startup)
        (loss,) = ns["exe"].run(fetch_list=[ns["loss"].name], feed=ns["feed_dict"])
    assert np.isfinite(loss).all()
    same_on_every_rank(ns["_scope"], ["fc_0.w_0", "fc_0.b_0"])
