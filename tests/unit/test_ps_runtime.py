"""Parameter-server mode running: 2 pservers and 2 trainers on localhost, each role a process
(tests/unit/ps_scripts/ps_role.py, the seed's example with PADDLE_* roles), every process
under a timeout and all killed at the end.

Sync mode equals one process fed the whole batch (each trainer fed its half), from the same
initial parameters (the pservers initialize their slices; the one process starts from them
assembled): a weight cut across both pservers and a sparse embedding table (cut too, its rows
prefetched by distributed_lookup_table), SGD and Adam, each with and without an exponential
decay schedule. Each also equals fluid 1.8.5's own pserver run (the trainers' losses and
parameters, tests/oracle/make_pserver.py): SGD that of the same script, Adam that of it
with the table's is_sparse=False (fluid 1.8.5's sparse Adam bias-corrects with the next
step's beta powers, see FLUID_EQUAL). Async mode learns sklearn's digits.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from oracle_io import DATA_DIR, load
from ps_jobs import (
    PARAMS,
    assemble,
    check_against_fluid,
    check_equals_one_process,
    run_job,
    run_local,
)

pytest.importorskip("grpc")
pytestmark = pytest.mark.timeout(120)



ORACLE = load("pserver")  # fluid 1.8.5's run of the same cases
with open(os.path.join(DATA_DIR, "pserver.json")) as _f:
    ORACLE_META = json.load(_f)["meta"]


# The fluid run each case's numbers equal. fluid 1.8.5's pserver run equals its own one
# process in every case (test_fluids_pserver_run_is_its_one_process), so the pserver is not
# where spmd and fluid part with Adam. fluid 1.8.5's sparse (SelectedRows) Adam bias-corrects
# the step t update with beta1**(t+1), beta2**(t+1), the powers already advanced by the step
# (Paddle's adam_op.h writes Beta1PowOut/Beta2PowOut, the same variables, before its sparse
# functor reads Beta1Pow/Beta2Pow; its dense branch reads them first): the first step moves
# each looked-up table entry by 0.744 * lr (sqrt(1 - .999**2) / (1 - .9**2) * sqrt(1000) / 10)
# instead of lr, in its pserver run and in one process alike; trainer 1's loss of step 2 then
# differs by 5e-4 relative, fc_0.w_0 by 9e-4 after 4 steps. A numpy Adam of this model with
# the advanced powers on the table alone gives fluid's one-process table to 1.2e-7 after 4
# steps (with the step's own powers, spmd's, to 1.1e-7). spmd's sparse Adam gives fluid's
# dense result instead (tests/unit/test_sparse_oracle.py), so its Adam cases are compared
# with fluid's run of the same script with the embedding's is_sparse=False (its dense Adam;
# make_pserver.py); fluid's "adam-decay" run with the sparse table is checked for that gap.
FLUID_EQUAL = {"sgd": "sgd", "sgd-decay": "sgd-decay", "adam": "adam/dense-embedding",
               "adam-decay": "adam-decay/dense-embedding"}


def test_fluids_pserver_run_is_its_one_process():
    """In fluid 1.8.5's stored runs the trainers' mean loss is its one process's loss, and its
    sparse Adam (the table's is_sparse=True) parts from its dense Adam from the step after
    the first update on, by more than the cases are compared to."""
    for name, case in ORACLE.items():
        np.testing.assert_allclose((case["losses_t0"] + case["losses_t1"]) / 2,
                                   case["losses_local"], rtol=1e-6, err_msg=name)
    sparse, dense = ORACLE["adam-decay"], ORACLE["adam-decay/dense-embedding"]
    assert sparse["losses_local"][0] == dense["losses_local"][0]
    gap = np.abs(sparse["losses_local"][1:] / dense["losses_local"][1:] - 1)
    assert gap.min() > 5e-5 and gap.max() < 1e-3, gap
    assert np.abs(sparse["fc_0.w_0.rows"] - dense["fc_0.w_0.rows"]).max() > 1e-4


@pytest.mark.parametrize("case", list(FLUID_EQUAL))
def test_sync_mode_equals_one_process_and_fluid(tmp_path, case):
    args = list(ORACLE[FLUID_EQUAL[case]]["args"])
    out = run_job(tmp_path, args + ["--init-seed", str(ORACLE_META["seed"])])
    check_against_fluid(out, ORACLE[FLUID_EQUAL[case]], ORACLE_META,
                        "fluid 1.8.5's pserver run")
    # the table and the weight are cut across both pservers
    for name in ("embedding_0.w_0", "fc_0.w_0"):
        assert f"{name}.block0" in {**out["ps0.init"], **out["ps1.init"]}
        assert any(f"{name}.block{i}" in out["ps0.init"] for i in (0, 1))
        assert any(f"{name}.block{i}" in out["ps1.init"] for i in (0, 1))
    check_equals_one_process(tmp_path, out, args)


def test_a_distributed_table_is_prefetched_and_equals_one_process(tmp_path):
    """embedding(is_distributed=True): the table lives on the pservers only (cut across
    both), the trainers prefetch its rows, and the job equals one process."""
    args = ["--model", "mixed", "--opt", "sgd", "--steps", "3", "--distributed"]
    out = run_job(tmp_path, args + ["--init-seed", "5"])
    init = assemble(out["ps0.init"], out["ps1.init"])
    local = run_local(tmp_path, init, args)
    final = assemble(out["ps0"], out["ps1"])
    for name in PARAMS:
        np.testing.assert_allclose(final[name], local[name], rtol=1e-4, atol=2e-5,
                                   err_msg=f"pservers' {name} vs one process")
    assert np.abs(local["embedding_0.w_0"] - init["embedding_0.w_0"]).max() > 1e-4


def test_async_mode_learns_digits(tmp_path):
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    out = run_job(tmp_path, ["--model", "digits", "--opt", "sgd", "--async", "--steps", "80"])
    final = assemble(out["ps0"], out["ps1"])
    digits = load_digits()
    x = digits.data / 16.0
    hidden = np.maximum(x @ final["fc_0.w_0"] + final["fc_0.b_0"], 0)
    accuracy = ((hidden @ final["fc_1.w_0"] + final["fc_1.b_0"]).argmax(1)
                == digits.target).mean()
    assert accuracy > 0.8, accuracy
    for t in ("t0", "t1"):
        losses = out[t]["losses"]
        assert losses[-10:].mean() < 0.5 * losses[:3].mean(), losses
