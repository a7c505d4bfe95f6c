"""fluid 1.8's answers for the misc surface (tests/unit/test_strategies.py, test_profiler.py,
test_host_ops.py, test_fluid_misc.py): BuildStrategy / ExecutionStrategy defaults, the
profiler report's header and columns, py_func forward and backward on a fixed program, and
paddle.compat's results. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_misc.py
"""
import os
import sys

import numpy as np
import paddle
import paddle.compat as cpt
import paddle.fluid as fluid
import paddle.fluid.profiler as profiler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.oracle_io import save  # noqa: E402

BUILD_FIELDS = [
    "reduce_strategy", "gradient_scale_strategy", "debug_graphviz_path",
    "enable_sequential_execution", "fuse_elewise_add_act_ops", "fuse_bn_act_ops",
    "fuse_relu_depthwise_conv", "fuse_broadcast_ops", "fuse_all_optimizer_ops",
    "fuse_all_reduce_ops", "enable_inplace", "memory_optimize", "enable_auto_fusion",
    "sync_batch_norm", "num_trainers", "trainer_id", "trainers_endpoints",
    "use_hierarchical_allreduce", "hierarchical_allreduce_inter_nranks",
    "enable_backward_optimizer_op_deps", "cache_runtime_context", "remove_unnecessary_lock",
    "mkldnn_enabled_op_types", "is_distribution", "async_mode", "nccl_comm_num",
]
EXEC_FIELDS = [
    "num_threads", "use_cuda", "allow_op_delay", "num_iteration_per_drop_scope",
    "num_iteration_per_run", "use_thread_barrier", "use_experimental_executor", "_dry_run",
]


def plain(value):
    kind = type(value).__name__
    if kind in ("ReduceStrategy", "GradientScaleStrategy"):  # pybind enums: name -> value
        return {"AllReduce": 0, "Reduce": 1, "CoeffNumDevice": 0, "One": 1,
                "Customized": 2}[str(value).split(".")[-1]]
    if isinstance(value, set):
        return sorted(value)
    return value


def strategy_defaults():
    bs, es = fluid.BuildStrategy(), fluid.ExecutionStrategy()
    return {"BuildStrategy": {n: plain(getattr(bs, n)) for n in BUILD_FIELDS},
            "ExecutionStrategy": {n: plain(getattr(es, n)) for n in EXEC_FIELDS}}


def small_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        y = fluid.layers.fc(x, 3)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def captured(fn):
    """What fn writes to file descriptor 1 (fluid's C++ code prints there)."""
    read, write = os.pipe()
    saved = os.dup(1)
    sys.stdout.flush()
    os.dup2(write, 1)
    try:
        fn()
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(write)
    return os.read(read, 1 << 20).decode()


def profiler_report():
    """The report's header lines and the event table's column titles (the numbers vary);
    fluid writes the table from C++, so it is read back from the process's stdout."""
    main, startup, loss = small_program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)

    def work():
        with profiler.profiler("CPU", "calls", "/tmp/make_misc_profile"):
            for _ in range(2):
                exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[loss])

    text = captured(work)
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    title = [ln for ln in lines if "Profiling Report" in ln][0]
    columns = [ln for ln in lines if ln.startswith("Event")][0].split()
    events = sorted({ln.split()[0].split("::")[1] for ln in lines if ln.startswith("thread")})
    calls = {ln.split()[0].split("::")[1]: int(ln.split()[1]) for ln in lines
             if ln.startswith("thread")}
    sorted_by = [ln for ln in lines if ln.startswith("Sorted by")][0]
    return {"title": title.strip(), "columns": columns, "events": events, "calls": calls,
            "sorted_by_calls": sorted_by}


def tanh_fwd(x):
    return np.tanh(np.array(x))


def tanh_bwd(x, y, dy):
    return np.array(dy) * (1 - np.square(np.array(y)))


def py_func_case():
    main, startup = fluid.Program(), fluid.Program()
    xv = np.linspace(-1, 1, 6).reshape(2, 3).astype("float32")
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[2, 3], dtype="float32")
        x.stop_gradient = False
        out = main.global_block().create_var(name="py_out", dtype="float32", shape=[2, 3])
        fluid.layers.py_func(tanh_fwd, x, out, backward_func=tanh_bwd)
        loss = fluid.layers.reduce_sum(fluid.layers.scale(out, 3.0))
        grads = fluid.backward.gradients([loss], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    y, gx = exe.run(main, feed={"x": xv}, fetch_list=[out, grads[0]])
    return {"x": xv, "out": y, "x_grad": gx}


def print_case():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="px", shape=[2, 2], dtype="float32")
        fluid.layers.Print(x, message="hello", summarize=3)
    exe = fluid.Executor(fluid.CPUPlace())
    text = captured(lambda: exe.run(
        main, feed={"px": np.arange(4).reshape(2, 2).astype("float32")}))
    # the first field is a timestamp that changes every run
    return {"lines": [text.splitlines()[0].split("\t", 1)[1]] + text.splitlines()[1:]}


def compat_case():
    return {
        "to_text": cpt.to_text([b"a", "b"]),
        "to_bytes": [b.decode("latin-1") for b in cpt.to_bytes(["x", b"y"])],
        "round": [cpt.round(x) for x in (0.5, 1.5, -0.5, 2.675)],
        "round_d": cpt.round(2.675, 2),
        "floor_division": [cpt.floor_division(7, 2), cpt.floor_division(-7, 2)],
        "exc": cpt.get_exception_message(ValueError("bad value")),
    }


def main():
    cases = {
        "strategy_defaults": strategy_defaults(),
        "profiler": profiler_report(),
        "py_func": py_func_case(),
        "print": print_case(),
        "compat": compat_case(),
    }
    save("misc", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
