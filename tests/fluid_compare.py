"""Assertions shared by the tests that replay a tests/oracle/make_<area>.py case in spmd and
compare it with what fluid 1.8.5 stored: arrays (shape, dtype, values) and refusals."""
from __future__ import annotations

import numpy as np


def assert_array_like_fluid(got, want, what: str, tol: float = 2e-5) -> None:
    """One array: the same shape and dtype as fluid's, values within `tol`."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != fluid's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != fluid's {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def assert_outputs_like_fluid(name: str, got: dict, want: dict, tol: float = 2e-5) -> None:
    """A case's outputs and gradients ("outs", "grads"), one by one."""
    assert len(got["outs"]) == len(want["outs"]) and len(got["grads"]) == len(want["grads"])
    for kind in ("outs", "grads"):
        for i, (g, w) in enumerate(zip(got[kind], want[kind])):
            assert_array_like_fluid(g, w, f"{name} {kind}[{i}]", tol)


def assert_refuses_like_fluid(name: str, got: str, want: str, differs: dict | None = None):
    """`got` / `want`: "ok", or the stage ("build", "run") where spmd / fluid raised. A name in
    `differs` maps to (spmd's documented answer, why it differs from fluid)."""
    if differs and name in differs:
        assert got == differs[name][0], f"{name}: spmd gave {got!r} (fluid {want!r})"
    elif want == "ok":
        assert got == "ok", f"{name}: fluid runs it, spmd raised at {got}"
    else:
        assert got in ("build", "run"), f"{name}: fluid raises at {want}, spmd runs it"
