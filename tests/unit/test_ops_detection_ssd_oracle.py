"""The SSD-family detection layers against stored outputs of real fluid (PaddlePaddle 1.8.5,
tests/oracle/make_detection_ssd.py): the same programs on the same inputs and parameters,
every output's values, dtype and LoD; and fluid.metrics.DetectionMAP's current and
accumulated mAP over three batches with a reset before the last."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_detection_ssd import CASES, run_case, run_metric
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("detection_ssd")


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    got = run_case(fluid, name)
    want = ORACLE[name]
    assert len(got) == len(want), f"{name}: {len(got)} outputs, fluid has {len(want)}"
    for i, ((value, lod), w) in enumerate(zip(got, want)):
        if w["value"].size == 0:  # fluid fetches an empty result as a bare float64 [0]
            assert value.size == 0 and lod == w["lod"], f"{name}[{i}]: {value.shape} {lod}"
            continue
        assert value.shape == w["value"].shape, \
            f"{name}[{i}]: shape {value.shape} != fluid's {w['value'].shape}"
        assert value.dtype == w["value"].dtype, \
            f"{name}[{i}]: dtype {value.dtype} != fluid's {w['value'].dtype}"
        assert lod == w["lod"], f"{name}[{i}]: LoD {lod} != fluid's {w['lod']}"
        np.testing.assert_allclose(value, w["value"], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}[{i}]")


def test_every_case_is_stored():
    assert sorted(CASES) == sorted(k for k in ORACLE if k in CASES)


def test_detection_map_metric_accumulates_as_fluid():
    got = run_metric(fluid)
    want = ORACLE["detection_map_metric"]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[1][1] != got[1][0], "the accumulated mAP should differ from the batch's"
