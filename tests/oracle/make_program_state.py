"""fluid 1.8.5's load_program_state / set_program_state / get_program_parameter /
get_program_persistable_vars: names, errors, warnings, and a pretrained-weights run.

Run with the oracle's Python from outside the checkout (see README.md):
    cd /tmp && /tmp/pd18/bin/python /path/to/spmd/tests/oracle/make_program_state.py
"""
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402


def build(opt):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.layers.fc(x, 4, act="tanh")
        y = fluid.layers.fc(h, 2)
        loss = fluid.layers.mean(fluid.layers.square(y))
        optimizer = fluid.optimizer.Adam(0.1) if opt == "adam" else fluid.optimizer.SGD(0.1)
        optimizer.minimize(loss)
    return main, start, loss


def outcome(fn):
    """('ok' | error type, [warning categories], [unused keys named by the warning])."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
            result = "ok"
        except Exception as e:  # noqa: BLE001 - the type is the fact recorded
            result = type(e).__name__
    user = [w for w in caught if issubclass(w.category, UserWarning)
            and "not set" in str(w.message)]
    keys = str(user[0].message).split("There are: ")[1].split() if user else []
    return {"result": result, "unused": sorted(keys)}


def main():
    cases = {}
    exe = fluid.Executor(fluid.CPUPlace())
    work = tempfile.mkdtemp()
    for opt in ("adam", "sgd"):
        prog, start, _ = build(opt)
        cases["parameters_" + opt] = [v.name for v in fluid.io.get_program_parameter(prog)]
        cases["persistables_" + opt] = [
            v.name for v in fluid.io.get_program_persistable_vars(prog)]
        with fluid.scope_guard(fluid.Scope()):
            exe.run(start)
            fluid.save(prog, os.path.join(work, opt, "m"))
            state = fluid.io.load_program_state(os.path.join(work, opt, "m"))
            cases["saved_keys_" + opt] = {k: [v.dtype.name, list(v.shape)]
                                          for k, v in state.items()}
            fluid.io.save_persistables(exe, os.path.join(work, opt + "_dir"), prog)
            state = fluid.io.load_program_state(os.path.join(work, opt + "_dir"))
            cases["dir_keys_" + opt] = sorted(state)
            fluid.io.save_persistables(exe, os.path.join(work, opt + "_one"), prog,
                                       filename="all")
            cases["file_without_var_list_" + opt] = outcome(
                lambda o=opt: fluid.io.load_program_state(os.path.join(work, o + "_one", "all")))

    prog, start, loss = build("adam")
    w0 = np.full((3, 4), 0.5, "float32")
    checks = {
        "before_startup": (False, {}),
        "missing_and_unused": (True, {"fc_0.w_0": w0, "zzz": w0, "aaa": w0}),
        "shape": (True, {"fc_0.w_0": np.zeros((4, 3), "float32")}),
        "dtype": (True, {"fc_0.w_0": np.zeros((3, 4), "float64")}),
        "scalar_for_shape_1": (True, {"learning_rate_0": np.float32(3)}),
        "transposed_view": (True, {"fc_0.w_0": np.zeros((4, 3), "float32").T}),
    }
    for name, (startup, state) in checks.items():
        with fluid.scope_guard(fluid.Scope()):
            if startup:
                exe.run(start)
            cases["set_" + name] = outcome(lambda s=state: fluid.io.set_program_state(prog, s))
            if name == "missing_and_unused":
                cases["set_value_after"] = np.array(
                    fluid.global_scope().find_var("fc_0.w_0").get_tensor())

    # pretrained weights: every persistable set from a dict, then three Adam steps
    rng = np.random.RandomState(3)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        state = {}
        for v in fluid.io.get_program_persistable_vars(prog):
            current = np.array(fluid.global_scope().find_var(v.name).get_tensor())
            if v.name.startswith("fc_") and "pow_acc" not in v.name:  # pows stay in (0, 1)
                low = 0 if "moment2" in v.name else -1  # moment2 is a mean of squares
                state[v.name] = rng.uniform(low, 1, current.shape).astype(current.dtype)
        state["learning_rate_0"] = np.array([0.05], "float32")
        fluid.io.set_program_state(prog, state)
        feed = rng.uniform(-1, 1, (5, 3)).astype("float32")
        losses = [exe.run(prog, feed={"x": feed}, fetch_list=[loss])[0] for _ in range(3)]
        after = {k: np.array(fluid.global_scope().find_var(k).get_tensor())
                 for k in ("fc_0.w_0", "fc_1.b_0")}
    cases["pretrained"] = {"state": state, "feed": feed, "losses": losses, "after": after}
    shutil.rmtree(work)
    save("program_state", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
