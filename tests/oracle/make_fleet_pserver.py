"""fluid 1.8.5's own fleet parameter-server run of tests/unit/ps_scripts/fleet_role.py
(fluid.incubate.fleet.parameter_server.distribute_transpiler's fleet with
PaddleCloudRoleMaker): 2 pservers and 2 trainers on localhost, the "mixed" model of
ps_role.py from seeded_init(1) set on the pservers after init_server, with
StrategyFactory.create_sync_strategy() for SGD 3 steps and Adam with an exponential decay 4
steps, and a DistributeTranspilerConfig(sync_mode=True) passed as the strategy (fluid 1.6's
spelling) for SGD 3 steps. Stored as make_pserver.py stores the DistributeTranspiler run:
each trainer's loss per step and the dense parameters the trainers hold at the end (equal on
both; fc_0.w_0 as its row sums and a sample of rows across both blocks), plus the sums of
the initial parameters.

fluid 1.8.5's fleet sync (SyncStrategy, and a DistributeTranspilerConfig with sync_mode=True,
which fleet turns into a SyncStrategy) transpiles with sync_mode=False, half_async and
completely_not_async, and trainers send through a SyncCommunicator; the pservers still run the
sync loop and average the trainers' gradients: with SGD both cases equal make_pserver.py's
DistributeTranspiler run bit for bit. An LR decay does not advance, though: the transpiler
turns the `increment` of @LR_DECAY_COUNTER@ into a pserver-side `sum` of per-trainer counters
(.trainer_i, each 1 from the startup, never incremented on the trainer), so every step
runs at the schedule's value for global step 2 (the number of trainers). "sync-adam-decay"
is Adam at the constant lr 0.01 * 0.5 ** (2 / 2), not make_pserver.py's "adam-decay".

fluid 1.8.5's pservers do not return from fleet.run_server() after the trainers'
fleet.stop_worker() here, so they are killed once both trainers ended (SIGKILL: on a SIGTERM
one sometimes aborts with "malloc(): unsorted double linked list corrupted").

Run with the oracle's Python from outside the checkout (see README.md):
    cd /tmp && /tmp/pd18/bin/python /path/to/spmd/tests/oracle/make_fleet_pserver.py
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "unit", "ps_scripts", "fleet_role.py")
CASES = {"sync-sgd": ["--mode", "sync", "--opt", "sgd", "--steps", "3"],
         "sync-adam-decay": ["--mode", "sync", "--opt", "adam", "--decay", "--steps", "4"],
         "config-sync-sgd": ["--mode", "config-sync", "--opt", "sgd", "--steps", "3"]}
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
        ip, port = ep.rsplit(":", 1)
        env = dict(base, TRAINING_ROLE="PSERVER", PADDLE_TRAINING_ROLE="PSERVER",
                   PADDLE_CURRENT_ENDPOINT=ep, POD_IP=ip, PADDLE_PORT=port)
        procs.append(subprocess.Popen(
            [sys.executable, SCRIPT, "--out", os.path.join(tmp, f"ps{i}.npz"),
             "--init-seed", str(SEED)] + args, env=env, stderr=subprocess.DEVNULL))
    trainers = []
    for i in range(2):
        env = dict(base, TRAINING_ROLE="TRAINER", PADDLE_TRAINING_ROLE="TRAINER",
                   PADDLE_TRAINER_ID=str(i))
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
    save("fleet_pserver", cases, meta={"fluid": paddle.__version__, "seed": SEED,
                                       "init_sums": init_sums, "sample_rows": SAMPLE_ROWS})


if __name__ == "__main__":
    main()
