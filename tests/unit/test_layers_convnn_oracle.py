"""conv / pool / resize / fc / embedding / dropout / matmul / mul / random / linalg builders
against fluid 1.8.5 (tests/oracle/make_convnn.py): forward outputs, gradients, static shapes
and dtypes (random: shapes and dtypes only), and which bad arguments are rejected."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_outputs_like_fluid, assert_refuses_like_fluid
from oracle.make_convnn import CASES, ERRORS, FEEDS, RANDOM
from oracle.make_manip import run_case, run_error
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("convnn")


# where fluid 1.8 is plainly wrong; each is checked for spmd's answer below
DIFFERS = {
    "adaptive_index": "fluid declares the max-pool index outputs float32; they hold int32 "
                      "(fetched as int32 there too); spmd declares int32",
    "deformable_conv_default_step": "at im2col_step's default (64) fluid's CPU kernel gives "
                                    "zeros for a batch below 64; spmd ignores im2col_step",
    "pool_empty_window": "a ceil_mode window wholly past the input: fluid's exclusive average "
                         "is 0 / 0 = nan there, spmd's is 0 (as with exclusive=False); the "
                         "max is the lowest float32 in both",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    got, want = run_case(fluid, name, CASES, FEEDS), ORACLE["cases"][name]
    if name == "deformable_conv_default_step":
        assert not want["outs"][0].any() and got["outs"][0].any()
        return
    if name == "pool_empty_window":
        nan = np.isnan(want["outs"][0])
        assert nan.any() and (got["outs"][0][nan] == 0).all()
        assert np.isnan(want["outs"][1]).any() and not np.isnan(got["outs"][1]).any()
        want = {**want, "outs": [np.where(np.isnan(w), 0, w) for w in want["outs"]]}
    if name == "adaptive_index":
        assert want["dtypes"] == ["float32"] * 4 and got["dtypes"][1::2] == ["int32"] * 2
        want = {**want, "dtypes": got["dtypes"]}
    assert got["shapes"] == want["shapes"], f"{name}: static shapes"
    assert got["dtypes"] == want["dtypes"], f"{name}: static dtypes"
    assert_outputs_like_fluid(name, got, want)


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_shapes_and_dtypes(name):
    got, want = run_case(fluid, name, RANDOM, FEEDS), ORACLE["random"][name]
    assert [list(o.shape) for o in got["outs"]] == want["out_shapes"]
    if name == "random":
        # fluid 1.8 ignores uniform_random's dtype (always float32) and forgets a static
        # int in a shape list holding a Variable; spmd keeps both
        assert want["dtypes"][1] == "float32" and got["dtypes"][1] == "float64"
        assert got["outs"][1].dtype == np.float64
        assert want["shapes"][4] == [-1, -1] and got["shapes"][4] == [-1, 2]
        want = {**want, "dtypes": got["dtypes"], "shapes": got["shapes"]}
    assert got["shapes"] == want["shapes"] and got["dtypes"] == want["dtypes"]
    for o in got["outs"]:
        assert np.isfinite(o).all()


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_rejects_what_fluid_rejects(name):
    want, got = ORACLE["errors"][name], run_error(fluid, name, ERRORS, FEEDS)
    assert_refuses_like_fluid(name, got, want)


def test_deformable_conv_ignores_im2col_step():
    def build(step):
        return lambda F, d: [F.layers.deformable_conv(
            d["dimg"], d["off"], d["msk"], 3, 3, padding=[0, 1], bias_attr=False,
            im2col_step=step)]
    cases = {s: (["dimg", "off", "msk"], build(s), False) for s in (None, 1)}
    default, one = (run_case(fluid, s, cases, FEEDS)["outs"][0] for s in (None, 1))
    np.testing.assert_array_equal(default, one)


def test_embedding_padding_idx_outside_vocab_pads_nothing():
    """fluid 1.8 takes padding_idx >= vocab (no id can equal it); spmd does the same."""
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        ids = fluid.data("ids", [3, 1], "int64")
        emb = fluid.layers.embedding(ids, [4, 2], padding_idx=4,
                                     param_attr=fluid.ParamAttr(
                                         initializer=fluid.initializer.Constant(1.0)))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    (out,) = exe.run(prog, feed={"ids": np.array([[0], [3], [1]], "int64")}, fetch_list=[emb])
    np.testing.assert_array_equal(out, np.ones((3, 2), "float32"))
