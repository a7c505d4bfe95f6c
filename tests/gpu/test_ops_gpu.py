"""Every op-harness case of tests/unit, run on cupy: forward against the numpy reference,
gradients against finite differences, on CUDAPlace(0)."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
from op_harness import check_op

UNIT = pathlib.Path(__file__).resolve().parents[1] / "unit"


def _all_cases():
    cases = []
    for path in sorted(UNIT.glob("test_ops_*.py")):
        module = _load(path)
        for case in getattr(module, "CASES", []):
            cases.append(pytest.param(case, id=f"{path.stem[9:]}-{case}"))
    return cases


def _load(path):
    spec = importlib.util.spec_from_file_location(f"gpu_cases_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", _all_cases())
def test_op_on_gpu(case):
    from spmd.core import CUDAPlace

    check_op(case, place=CUDAPlace(0))

