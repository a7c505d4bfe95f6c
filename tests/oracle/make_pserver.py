"""fluid 1.8.5's own parameter-server run of tests/unit/ps_scripts/ps_role.py: 2 pservers and
2 trainers on localhost, sync mode, the "mixed" model (a sparse embedding and an fc weight
both cut across the pservers) from seeded_init(1): SGD for 3 steps; for 4 steps SGD with an
exponential decay, Adam with one, and, with the embedding's is_sparse=False, Adam with and
without one (the "/dense-embedding" cases: this file runs ps_role.py's main with
fluid.layers.embedding patched; the table's gradient is then dense, so fluid updates it with
its dense Adam). Stored: each trainer's loss per step, fluid's one-process run of the same
case (PADDLE_TRAINING_ROLE=LOCAL, the whole batch, from the same parameters) as
losses_local, and the dense parameters the trainers hold at the end (equal on both; received
from the pservers after the last step; fc_0.w_0 as its row sums and a sample of rows across
both blocks), plus the sums of the initial parameters (the test checks its numpy draws the
same ones).

Why the dense-embedding Adam runs: fluid 1.8.5's sparse (SelectedRows) Adam bias-corrects
with beta powers already advanced by the step (see tests/unit/test_ps_runtime.py,
FLUID_EQUAL), in its pserver run and in one process alike; spmd's sparse Adam gives fluid's
dense result instead (tests/unit/test_sparse_oracle.py), so spmd's Adam cases are compared
with these.

fluid 1.8.5's pservers do not return from exe.run(pserver_program) after the trainers'
exe.close() here, so they are killed once both trainers ended; the embedding rows are
checked through the losses of the later steps (they are prefetched from the pservers).

Run with the oracle's Python from outside the checkout (see README.md):
    cd /tmp && /tmp/pd18/bin/python /path/to/spmd/tests/oracle/make_pserver.py

`--geo-programs` writes only data/geo_transpiler.json: fluid 1.8.5's GeoSgdTranspiler programs
(Geo-SGD, k=5) of the "mixed" model for 2 pservers and 2 trainers, as trainer 0, through
`geo_programs` (tests/unit/test_ps_transpiler_oracle.py runs the same on spmd).
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
         "adam-decay": ["--opt", "adam", "--decay", "--steps", "4"],
         "sgd-decay": ["--opt", "sgd", "--decay", "--steps", "4"],
         "adam/dense-embedding": ["--opt", "adam", "--steps", "4"],
         "adam-decay/dense-embedding": ["--opt", "adam", "--decay", "--steps", "4"]}
DENSE = "/dense-embedding"  # cases run with the embedding's is_sparse=False
ROLE_FLAG = "--ps-role-dense-embedding"  # this file run as ps_role.py with that patch
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


def role_command(name):
    """How a role of case `name` is started: ps_role.py, or this file patching it."""
    if name.endswith(DENSE):
        return [sys.executable, os.path.abspath(__file__), ROLE_FLAG]
    return [sys.executable, SCRIPT]


def dense_embedding_role(argv):
    """ps_role.py's main(argv) with every fluid.layers.embedding built with is_sparse=False."""
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import ps_role

    embedding = ps_role.fluid.layers.embedding

    def dense(*args, **kwargs):
        kwargs["is_sparse"] = False
        return embedding(*args, **kwargs)

    ps_role.fluid.layers.embedding = dense
    return ps_role.main(argv)


def run_local(tmp, name, args):
    """fluid's one process of case `name` (the whole batch) from seeded_init(SEED)."""
    from ps_role import seeded_init

    init = os.path.join(tmp, "init.npz")
    np.savez(init, **seeded_init(SEED))
    out = os.path.join(tmp, "local.npz")
    subprocess.run(role_command(name) + ["--out", out, "--init", init] + args, check=True,
                   timeout=300, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, PS_ROLE_FLUID="paddle", PADDLE_TRAINING_ROLE="LOCAL"))
    return np.load(out)["losses"]


def run_case(tmp, name, args):
    return run_roles(tmp, role_command(name), args)


def no_extra_env(role, endpoint):
    return {}


def run_roles(tmp, command, args, extra_env=no_extra_env):
    """2 pservers (from seeded_init(SEED)) and 2 trainers of `command` in fluid, sync mode;
    each role's environment also gets extra_env(role, its endpoint or None). Returns each
    trainer's losses and sample() of the parameters the trainers end with (equal on both)."""
    endpoints = [f"127.0.0.1:{p}" for p in _ports(2)]
    base = dict(os.environ, PS_ROLE_FLUID="paddle", PADDLE_TRAINERS_NUM="2",
                PADDLE_PSERVERS_IP_PORT_LIST=",".join(endpoints))
    procs = []
    for i, ep in enumerate(endpoints):
        env = dict(base, PADDLE_TRAINING_ROLE="PSERVER", PADDLE_CURRENT_ENDPOINT=ep,
                   **extra_env("PSERVER", ep))
        procs.append(subprocess.Popen(
            command + ["--out", os.path.join(tmp, f"ps{i}.npz"),
                       "--init-seed", str(SEED)] + args, env=env, stderr=subprocess.DEVNULL))
    trainers = []
    for i in range(2):
        env = dict(base, PADDLE_TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(i),
                   **extra_env("TRAINER", None))
        trainers.append(subprocess.Popen(
            command + ["--out", os.path.join(tmp, f"t{i}.npz")] + args,
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


GEO_PSERVERS = "127.0.0.1:6170,127.0.0.1:6171"


def _geo_names(names):
    return ["@CONTROL" if n.startswith("__control_var") else n for n in names]


def _geo_op(op, slots):
    return [op.type] + [_geo_names(op.input(s) if s in op.input_names else op.output(s))
                        for s in slots]


def geo_programs(fluid, transpiler_class):
    """Geo-SGD programs of the mixed model (trainer 0 of 2, 2 pservers, k=5) described the
    same way for fluid and spmd: op types and slots, listen_and_serv's attributes, the
    pservers' variables (shape and type) and startup ops."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        x = fluid.data("x", [None, 100], "float32")
        y = fluid.data("y", [None, 1], "float32")
        emb = fluid.layers.embedding(ids, size=[2048, 16], is_sparse=True)
        h = fluid.layers.fc(fluid.layers.concat([x, emb], axis=1), 200, act="tanh")
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(0.05).minimize(loss)
    config = fluid.DistributeTranspilerConfig()
    config.sync_mode, config.runtime_split_send_recv = False, True
    config.geo_sgd_mode, config.geo_sgd_need_push_nums = True, 5
    t = transpiler_class(config)
    t.transpile(0, program=main, pservers=GEO_PSERVERS, trainers=2, startup_program=startup)
    trainer = t.get_trainer_program(wait_port=False)
    startup = getattr(t, "trainer_startup_program", startup)
    send = trainer.global_block().ops[-1]
    out = {"trainer_types": [op.type for op in trainer.global_block().ops],
           "trainer_send": _geo_op(send, ["X", "Out"]) + [list(send.attr("send_varnames"))],
           "startup": [_geo_op(op, ["Out"]) for op in startup.global_block().ops
                       if op.type in ("recv", "fetch_barrier", "concat", "send")],
           "pservers": {}}
    for ep in GEO_PSERVERS.split(","):
        prog, start = t.get_pserver_programs(ep)
        serve = [op for op in prog.global_block().ops if op.type == "listen_and_serv"][0]
        out["pservers"][ep] = {
            "X": list(serve.input("X")),
            "attrs": {k: serve.attr(k) for k in ("distributed_mode", "grad_to_block_id",
                                                 "sparse_grad_to_param", "Fanin")},
            "blocks": [[_geo_op(op, ["X", "Out"]) for op in prog.block(i).ops]
                       for i in range(1, prog.num_blocks)],
            "vars": {n: [list(v.shape), str(v.type).split(".")[-1]]
                     for n, v in prog.global_block().vars.items()},
            "startup": [_geo_op(op, ["Out"]) for op in start.global_block().ops]}
    return out


def write_geo_programs():
    sys.path.insert(0, os.path.join(HERE, ".."))
    import paddle
    import paddle.fluid as fluid
    from oracle_io import save
    from paddle.fluid.transpiler.geo_sgd_transpiler import GeoSgdTranspiler

    save("geo_transpiler", {"mixed": geo_programs(fluid, GeoSgdTranspiler)},
         meta={"fluid": paddle.__version__})


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
            cases[name] = run_case(tmp, name, args)
            cases[name]["losses_local"] = run_local(tmp, name, args)
            cases[name]["args"] = args
    init_sums = {k: float(v.astype("float64").sum()) for k, v in seeded_init(SEED).items()}
    save("pserver", cases, meta={"fluid": paddle.__version__, "seed": SEED,
                                 "init_sums": init_sums, "sample_rows": SAMPLE_ROWS})


if __name__ == "__main__":
    if "--geo-programs" in sys.argv:
        sys.exit(write_geo_programs())
    if ROLE_FLAG in sys.argv:
        sys.exit(dense_embedding_role([a for a in sys.argv[1:] if a != ROLE_FLAG]))
    main()
