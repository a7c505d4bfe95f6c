"""The single-process examples of ../shared/seeds/ run with only the import line changed."""
from __future__ import annotations

import numpy as np
import pytest
from seed_examples import SEEDS, paddle_api_examples, port

import spmd
from spmd.core import Program, Scope, is_compiled_with_cuda, program_guard, scope_guard, unique_name

pytestmark = pytest.mark.skipif(not SEEDS.is_dir(), reason=f"{SEEDS} is not beside the checkout")


def run_isolated(code: str) -> dict:
    """exec the example with fresh default programs, scope and names; return its namespace."""
    namespace: dict = {"__name__": "__seed_example__"}
    with program_guard(Program(), Program()), scope_guard(Scope()), unique_name.guard():
        exec(compile(code, "<seed example>", "exec"), namespace)
        namespace["_scope"] = spmd.global_scope()
    return namespace


def test_compiled_program_example_runs_unchanged():
    """seed 002, CompiledProgram's first example: fc + mean + SGD through a CompiledProgram."""
    code = port(paddle_api_examples("002")[0], cuda=is_compiled_with_cuda())
    ns = run_isolated(code)
    (loss,) = ns["loss_data"].reshape(-1)
    # the loss was computed with the startup parameters: recompute it by hand, before SGD moved
    # them (w_new = w - lr * dL/dw, so undo the step to get the initial values)
    scope, x, lr = ns["_scope"], ns["x"], 0.01
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    b = np.array(scope.find_var("fc_0.b_0").get_tensor())
    ones = np.full((x.shape[0], 10), 1.0 / (x.shape[0] * 10), dtype="float32")
    w0, b0 = w + lr * (x.T @ ones), b + lr * ones.sum(0)
    np.testing.assert_allclose(loss, np.mean(x @ w0 + b0), rtol=1e-5)
