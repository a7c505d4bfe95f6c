"""fluid 1.8.5's own parameter-server run of tests/unit/ps_scripts/ps_role.py: 2 pservers and
2 trainers on localhost, sync mode, the "mixed" model (a sparse embedding and an fc weight
both cut across the pservers) from seeded_init(1), SGD for 3 steps and Adam with an
exponential decay for 4. Stored: each trainer's loss per step and the dense parameters the
trainers hold at the end (equal on both; received from the pservers after the last step;
fc_0.w_0 as its row sums and a sample of rows across both blocks), plus the sums of the
initial parameters (the test checks its numpy draws the same ones).

fluid 1.8.5's pservers do not return from exe.run(pserver_program) after the trainers'
exe.close() here, so they are killed once both trainers ended; the embedding rows are
checked through the losses of the later steps (they are prefetched from the pservers).

Run with the oracle's Python from outside the checkout (see README.md):
    cd /tmp && /tmp/pd18/bin/python /path/to/spmd/tests/oracle/make_pserver.py
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "unit", "ps_scripts", "ps_role.py")
CASES = {"sgd": ["--opt", "sgd", "--steps", "3"],
         "adam-decay": ["--opt", "adam", "--decay", "--steps", "4"]}
SEED = 1
SAMPLE_ROWS = [0, 1, 2, 56, 57, 58, 59, 114, 115]  # block0 is rows 0..57, block1 58..115


def sample(params):
    """What is stored of the trainers' dense parameters."""
    w = params["fc_0.w_0"]
    return {"fc_0.w_0.rows": w[SAMPLE_ROWS], "fc_0.w_0.row_sums": w.sum(axis=1),
            "fc_0.b_0": params["fc_0.b_0"], "fc_1.w_0": params["fc_1.w_0"],
            "fc_1.b_0": params["fc_1.b_0"]}


def _ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_case(tmp, args):
    endpoints = [f"127.0.0.1:{p}" for p in _ports(2)]
    base = dict(os.environ, PS_ROLE_FLUID="paddle", PADDLE_TRAINERS_NUM="2",
                PADDLE_PSERVERS_IP_PORT_LIST=",".join(endpoints))
    procs = []
    for i, ep in enumerate(endpoints):
        env = dict(base, PADDLE_TRAINING_ROLE="PSERVER", PADDLE_CURRENT_ENDPOINT=ep)
        procs.append(subprocess.Popen(
            [sys.executable, SCRIPT, "--out", os.path.join(tmp, f"ps{i}.npz"),
             "--init-seed", str(SEED)] + args, env=env, stderr=subprocess.DEVNULL))
    trainers = []
    for i in range(2):
        env = dict(base, PADDLE_TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(i))
        trainers.append(subprocess.Popen(
            [sys.executable, SCRIPT, "--out", os.path.join(tmp, f"t{i}.npz")] + args,
            env=env, stderr=subprocess.DEVNULL))
    try:
        end = time.time() + 300
        for p in trainers:
            p.wait(max(1, end - time.time()))
            assert p.returncode == 0, "a fluid trainer failed"
    finally:
        for p in procs + trainers:
            if p.poll() is None:
                p.kill()
            p.wait()
    t0, t1 = (dict(np.load(os.path.join(tmp, f"t{i}.npz"))) for i in range(2))
    for k in t0:  # sync: both trainers hold the same parameters
        assert np.array_equal(t0[k], t1[k]) or k == "losses", k
    out = {"losses_t0": t0["losses"], "losses_t1": t1["losses"]}
    out.update(sample(t0))
    return out


def main():
    sys.path.insert(0, os.path.join(HERE, ".."))
    sys.path.insert(0, os.path.dirname(SCRIPT))
    os.environ["PS_ROLE_FLUID"] = "paddle"
    import paddle
    from oracle_io import save
    from ps_role import seeded_init

    cases = {}
    for name, args in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            cases[name] = run_case(tmp, args)
            cases[name]["args"] = args
    init_sums = {k: float(v.astype("float64").sum()) for k, v in seeded_init(SEED).items()}
    save("pserver", cases, meta={"fluid": paddle.__version__, "seed": SEED,
                                 "init_sums": init_sums, "sample_rows": SAMPLE_ROWS})


if __name__ == "__main__":
    main()
