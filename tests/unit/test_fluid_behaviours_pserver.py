"""Parameter-server mode as fluid 1.8.5 (issue 22), each job of 2 pservers and 2 trainers
(tests/unit/ps_scripts/behaviours_role.py) against the same model in one process fed the
whole batch: the pservers' parameters and the trainers' mean loss are the one process's.

- w2v (Paddle's dist_word2vec.py): a table shared by four is_sparse lookups is a
  remote-prefetch table, as fluid makes it (its summed gradient is SelectedRows); its lookups
  used to read the trainer's fake_init zeros at step 0, 1.5e-4 from the local loss;
- lr_attr: ParamAttr(learning_rate=...)'s scaled rate is computed on the pserver with the
  update (it was a KeyError on '<param>_learning_rate_0' there);
- seqpool: sequence_pool after the trainer's prefetched lookup (is_sparse or is_distributed)
  gets the ids' LoD (it said its input "carries no LoD").
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from ps_jobs import JOB_TIMEOUT_S, SCRIPTS, assemble, run_job

STEPS = 3


def _local(tmp, model: str) -> dict:
    out = tmp / "local.npz"
    subprocess.run([sys.executable, str(SCRIPTS / "behaviours_role.py"), "--model", model,
                    "--steps", str(STEPS), "--out", str(out)], check=True,
                   timeout=JOB_TIMEOUT_S, env=dict(os.environ, PADDLE_TRAINING_ROLE="LOCAL"))
    return dict(np.load(out))


@pytest.mark.parametrize("model", ["w2v", "lr_attr", "seqpool", "seqpool_distributed"])
def test_sync_job_equals_one_process(tmp_path, model):
    args = ["--model", model, "--steps", str(STEPS)]
    out = run_job(tmp_path, args, script="behaviours_role.py", init_values=False)
    local = _local(tmp_path, model)
    served = assemble(out["ps0"], out["ps1"])
    params = [n for n in local if n != "losses" and n in served]
    assert params, f"no parameter of {sorted(local)} is on the pservers ({sorted(served)})"
    for name in params:
        np.testing.assert_allclose(served[name], local[name], rtol=0, atol=1e-7,
                                   err_msg=f"pservers' {name} vs one process")
    moved = [n for n in params if np.abs(local[n] - local[n].mean()).max() > 0
             or np.abs(local[n] - 0.1).max() > 1e-6]
    assert moved, "nothing trained"
    mean_loss = (out["t0"]["losses"] + out["t1"]["losses"]) / 2
    np.testing.assert_allclose(mean_loss, local["losses"], rtol=1e-6)
