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
import sys
import tempfile

from make_pserver import SAMPLE_ROWS, SEED, run_roles  # noqa: E402 - this folder: the runner

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "unit", "ps_scripts", "fleet_role.py")
CASES = {"sync-sgd": ["--mode", "sync", "--opt", "sgd", "--steps", "3"],
         "sync-adam-decay": ["--mode", "sync", "--opt", "adam", "--decay", "--steps", "4"],
         "config-sync-sgd": ["--mode", "config-sync", "--opt", "sgd", "--steps", "3"]}


def fleet_env(role, endpoint):
    """What fleet's PaddleCloudRoleMaker reads beside the variables run_roles sets."""
    if role == "PSERVER":
        ip, port = endpoint.rsplit(":", 1)
        return {"TRAINING_ROLE": role, "POD_IP": ip, "PADDLE_PORT": port}
    return {"TRAINING_ROLE": role}


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
            cases[name] = run_roles(tmp, [sys.executable, SCRIPT], args, fleet_env)
            cases[name]["args"] = args
    init_sums = {k: float(v.astype("float64").sum()) for k, v in seeded_init(SEED).items()}
    save("fleet_pserver", cases, meta={"fluid": paddle.__version__, "seed": SEED,
                                       "init_sums": init_sums, "sample_rows": SAMPLE_ROWS})


if __name__ == "__main__":
    main()
