"""fluid 1.8.5's fleet checkpoints (fluid.incubate.fleet.collective): the directory layout of
save_check_point, what clean_redundant_check_points keeps, load_check_point's answers,
TrainStatus, LocalFS (paddle.distributed.fs_wrapper) and all_reduce_worker in collective mode;
and a run resumed from a checkpoint against the uninterrupted one (Adam, CPU).

Run with the oracle's Python from outside the checkout (see README.md):
    cd /tmp && /tmp/pd18/bin/python /path/to/spmd/tests/oracle/make_fleet_checkpoint.py
"""
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import paddle
import paddle.fluid as fluid
from paddle.distributed.fs_wrapper import LocalFS
from paddle.fluid.incubate.fleet.base import role_maker
from paddle.fluid.incubate.fleet.collective import TrainStatus, fleet

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

EPOCHS, SAVED_AFTER = 4, 1  # epochs 0..3; the checkpoint after epoch 1


def build():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.layers.fc(x, 4, act="tanh",
                            param_attr=fluid.initializer.Constant(0.3))
        y = fluid.layers.fc(h, 2, param_attr=fluid.initializer.Constant(-0.2))
        loss = fluid.layers.mean(fluid.layers.square(y - 1.0))
        fluid.optimizer.Adam(0.05).minimize(loss)
    return main, start, loss


def tree(root):
    out = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        out[name] = sorted(os.listdir(path)) if os.path.isdir(path) else "file"
    return out


def outcome(fn):
    try:
        value = fn()
        return {"result": "ok", "value": None if value is None else value._epoch_no}
    except Exception as e:  # noqa: BLE001 - the type is the fact recorded
        return {"result": type(e).__name__}


def main():
    cases = {}
    work = tempfile.mkdtemp()
    exe = fluid.Executor(fluid.CPUPlace())
    feed = np.linspace(-1, 1, 15).reshape(5, 3).astype("float32")
    prog, start, loss = build()

    with fluid.scope_guard(fluid.Scope()):  # the uninterrupted run, saving after every epoch
        exe.run(start)
        root = os.path.join(work, "all")
        losses = []
        for epoch in range(EPOCHS):
            losses.append(exe.run(prog, feed={"x": feed}, fetch_list=[loss])[0])
            fleet.save_check_point(exe, root, TrainStatus(epoch), main_program=prog)
        cases["layout_all"] = tree(root)
        with open(os.path.join(root, "__paddle_fleet_checkpoint__.2", "fleet_train_status")) as f:
            cases["status_file"] = json.load(f)
        cases["uninterrupted_losses"] = losses
        fleet.clean_redundant_check_points(root, checkpoint_num=2)
        cases["after_clean_2"] = sorted(os.listdir(root))
        root = os.path.join(work, "last")
        for epoch in range(3):
            fleet.save_check_point(exe, root, TrainStatus(epoch), main_program=prog,
                                   remain_all_checkpoint=False)
        cases["layout_remain_last"] = sorted(os.listdir(root))

    with fluid.scope_guard(fluid.Scope()):  # resumed from the checkpoint after SAVED_AFTER
        exe.run(start)
        root = os.path.join(work, "resume")
        for _ in range(SAVED_AFTER + 1):
            exe.run(prog, feed={"x": feed}, fetch_list=[loss])
        fleet.save_check_point(exe, root, TrainStatus(SAVED_AFTER), main_program=prog)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        status = fleet.load_check_point(exe, root, 0, main_program=prog)
        cases["resumed_status"] = status._epoch_no
        cases["resumed_losses"] = [exe.run(prog, feed={"x": feed}, fetch_list=[loss])[0]
                                   for _ in range(status.next(), EPOCHS)]

        empty = os.path.join(work, "empty")
        cases["load_missing_path"] = outcome(
            lambda: fleet.load_check_point(exe, empty, 0, main_program=prog))
        cases["load_missing_strict"] = outcome(lambda: fleet.load_check_point(
            exe, empty, 0, main_program=prog, ignore_empty=False))
        os.makedirs(os.path.join(work, "junk", "__paddle_fleet_checkpoint__.7.tmp"))
        os.makedirs(os.path.join(work, "junk", "__paddle_fleet_checkpoint__.x"))
        cases["load_only_leftovers"] = outcome(
            lambda: fleet.load_check_point(exe, os.path.join(work, "junk"), 0,
                                           main_program=prog))

    s = TrainStatus(3)
    cases["train_status"] = {"default_next": TrainStatus().next(), "next": s.next(),
                             "eq": s == TrainStatus(3), "ne": s != TrainStatus(2)}
    fs = LocalFS()
    cases["localfs"] = {"list_dirs_missing": fs.list_dirs(os.path.join(work, "nope")),
                        "need_upload_download": fs.need_upload_download(),
                        "ls_dir": fs.ls_dir(os.path.join(work, "junk"))}

    os.environ.setdefault("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:6170")
    os.environ.setdefault("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:6170")
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    out = np.zeros(2)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fleet.all_reduce_worker(np.array([1.0, 2.0]), out)
    cases["all_reduce_worker_collective"] = {"output": out, "printed": printed.getvalue()}
    shutil.rmtree(work)
    save("fleet_checkpoint", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
