"""Parameter-server jobs on localhost for the tests: 2 pservers and 2 trainers, each role a
process of a script in ps_scripts/ (ps_role.py: the seed's DistributeTranspiler example;
fleet_role.py: fluid 1.8's fleet), every process under a timeout and all killed at the end.
Each role gets fluid's variables in both spellings (PADDLE_TRAINING_ROLE and TRAINING_ROLE,
PADDLE_CURRENT_ENDPOINT and POD_IP with PADDLE_PORT), as paddle-launch writes them."""
from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import numpy as np

SCRIPTS = pathlib.Path(__file__).resolve().parent / "ps_scripts"
JOB_TIMEOUT_S = 60
PARAMS = ("embedding_0.w_0", "fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tail(path: pathlib.Path) -> str:
    return path.read_text()[-3000:] if path.exists() else "(no log)"


def role_env(role: str, index: int, endpoints: list[str]) -> dict:
    """fluid's variables of pserver / trainer `index`, both spellings."""
    if role == "PSERVER":
        ip, port = endpoints[index].rsplit(":", 1)
        return {"PADDLE_TRAINING_ROLE": role, "TRAINING_ROLE": role,
                "PADDLE_CURRENT_ENDPOINT": endpoints[index], "POD_IP": ip, "PADDLE_PORT": port}
    return {"PADDLE_TRAINING_ROLE": role, "TRAINING_ROLE": role,
            "PADDLE_TRAINER_ID": str(index)}


def run_job(tmp: pathlib.Path, args: list[str], pservers: int = 2, trainers: int = 2,
            script: str = "ps_role.py", init_values: bool = True) -> dict:
    """Start the pservers and trainers of `script`; wait for all (killing all on a failure
    or after JOB_TIMEOUT_S); return {role: its .npz}, with the pservers' values after their
    startup as "psI.init" when `init_values`."""
    endpoints = [f"127.0.0.1:{p}" for p in free_ports(pservers)]
    base = dict(os.environ, PADDLE_PSERVERS_IP_PORT_LIST=",".join(endpoints),
                PADDLE_TRAINERS_NUM=str(trainers), SPMD_PS_RPC_DEADLINE="30",
                SPMD_PS_IDLE_TIMEOUT="45", PYTHONUNBUFFERED="1")
    roles = [(f"ps{i}", role_env("PSERVER", i, endpoints)) for i in range(pservers)]
    roles += [(f"t{i}", role_env("TRAINER", i, endpoints)) for i in range(trainers)]
    procs = {}
    try:
        for name, env in roles:
            log = open(tmp / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
            procs[name] = (subprocess.Popen(
                [sys.executable, str(SCRIPTS / script), "--out", str(tmp / f"{name}.npz"),
                 *args], env=dict(base, **env), stdout=log, stderr=subprocess.STDOUT), log)
        end = time.monotonic() + JOB_TIMEOUT_S
        while time.monotonic() < end and any(p.poll() is None for p, _ in procs.values()):
            failed = [n for n, (p, _) in procs.items() if p.poll() not in (None, 0)]
            if failed:
                break
            time.sleep(0.1)
    finally:
        for p, log in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(10)
            log.close()
    bad = {n: p.returncode for n, (p, _) in procs.items() if p.returncode != 0}
    assert not bad, "roles failed (exit codes; -9: killed after the failure or the timeout) " \
        f"{bad}\n" + "\n".join(f"--- {n}\n{_tail(tmp / f'{n}.log')}" for n in procs)
    out = {n: dict(np.load(tmp / f"{n}.npz")) for n in procs}
    if init_values:
        for i in range(pservers):
            out[f"ps{i}.init"] = dict(np.load(tmp / f"ps{i}.npz.init.npz"))
    return out


def assemble(*parts: dict) -> dict:
    """Whole variables from the pservers' blocks (name.blockN joined in order)."""
    blocks: dict = {}
    for values in parts:
        for name, value in values.items():
            m = re.match(r"^(.*)\.block(\d+)$", name)
            base, index = (m.group(1), int(m.group(2))) if m else (name, -1)
            blocks.setdefault(base, {})[index] = value
    return {n: d[-1] if -1 in d else np.concatenate([d[i] for i in sorted(d)])
            for n, d in blocks.items()}


def run_local(tmp: pathlib.Path, init: dict, args: list[str], params=PARAMS) -> dict:
    """ps_role.py in one process (PADDLE_TRAINING_ROLE=LOCAL) from the parameters `init`
    (those named in `params`), fed the whole batch of every step."""
    np.savez(tmp / "init.npz", **{n: init[n] for n in params})
    subprocess.run([sys.executable, str(SCRIPTS / "ps_role.py"), "--out",
                    str(tmp / "local.npz"), "--init", str(tmp / "init.npz"), *args],
                   check=True, timeout=JOB_TIMEOUT_S,
                   env=dict(os.environ, PADDLE_TRAINING_ROLE="LOCAL"))
    return dict(np.load(tmp / "local.npz"))


def check_equals_one_process(tmp: pathlib.Path, out: dict, args: list[str]) -> dict:
    """The sync job `out` (2 pservers, 2 trainers) against ps_role.py in one process from the
    pservers' initial values, fed the whole batch: the pservers' final parameters, the dense
    ones the trainers hold, and the trainers' mean loss. Returns the pservers' final ones."""
    init = assemble(out["ps0.init"], out["ps1.init"])
    local = run_local(tmp, init, args)
    final = assemble(out["ps0"], out["ps1"])
    for name in PARAMS:
        assert np.abs(local[name] - init[name]).max() > 1e-3, f"{name} did not train"
        np.testing.assert_allclose(final[name], local[name], rtol=1e-4, atol=2e-5,
                                   err_msg=f"pservers' {name} vs one process")
        if name != "embedding_0.w_0":  # the trainers hold the dense parameters they received
            for t in ("t0", "t1"):
                np.testing.assert_array_equal(out[t][name], final[name])
    # each trainer's loss is that of its half: their mean is the one process's loss
    np.testing.assert_allclose((out["t0"]["losses"] + out["t1"]["losses"]) / 2,
                               local["losses"], rtol=1e-5)
    return final


def check_against_fluid(out: dict, fluid_run: dict, meta: dict, what: str) -> None:
    """The job `out` against fluid 1.8.5's stored run of the same script (tests/oracle's
    make_pserver.py, make_fleet_pserver.py): the same initial parameters drawn, each
    trainer's losses, and the dense parameters the trainers end with (fc_0.w_0 through its
    row sums and the sample rows stored)."""
    init = assemble(out["ps0.init"], out["ps1.init"])
    for name, total in meta["init_sums"].items():  # numpy drew fluid's parameters
        np.testing.assert_allclose(init[name].astype("float64").sum(), total, rtol=1e-6)
    for t in ("t0", "t1"):
        np.testing.assert_allclose(out[t]["losses"], fluid_run[f"losses_{t}"], rtol=1e-5,
                                   err_msg=f"trainer {t}'s losses vs {what}")
    w = out["t0"]["fc_0.w_0"]
    mine = {"fc_0.w_0.rows": w[meta["sample_rows"]], "fc_0.w_0.row_sums": w.sum(1),
            **{n: out["t0"][n] for n in ("fc_0.b_0", "fc_1.w_0", "fc_1.b_0")}}
    for name, value in mine.items():
        np.testing.assert_allclose(value, fluid_run[name], rtol=1e-4, atol=2e-5,
                                   err_msg=f"{name} vs {what}")
