"""The YOLO, ROI-pooling and box ops against fluid 1.8.5's stored outputs and gradients
(tests/oracle/make_detection_roi.py): each stored case's op built on the same inputs, LoD and
attributes, and d(sum(out * W)) / d input for the stored weight W."""
from __future__ import annotations

import numpy as np
import pytest

import spmd
from spmd.autodiff import gradients
from spmd.core import CPUPlace, Program, Scope
from tests.oracle_io import load

STORED = load("detection_roi")
CASES = {k: v for k, v in STORED.items() if "op" in v and isinstance(v["outputs"], list)}
MULTI = {k: v for k, v in STORED.items() if "op" in v and isinstance(v["outputs"], dict)}


def run_stored(case):
    """{output or input@GRAD: array} of the case's op run here."""
    prog = Program()
    block = prog.global_block()
    feed, ins = {}, {}
    for slot, a in case["inputs"].items():
        lod = case.get("lod", {}).get(slot)
        v = block.create_var(name="in_" + slot, shape=a.shape, dtype=a.dtype.name, is_data=True,
                             lod_level=1 if lod else 0,
                             stop_gradient=slot not in case.get("grad", []))
        ins[slot] = v
        feed[v.name] = spmd.fluid.create_lod_tensor(a, lod, CPUPlace()) if lod else a
    outs = {s: block.create_var(name="out_" + s) for s in case["outputs"]}
    block.append_op(case["op"], ins, outs, case["attrs"])
    fetch = ["out_" + s for s in case["outputs"]]
    if case.get("grad"):
        weights = []
        for s in case["grad_of"]:
            w = case["weights"][s]
            weights.append(block.create_var(name="w_" + s, shape=w.shape, dtype=w.dtype.name,
                                            is_data=True))
            feed["w_" + s] = w
        grads = gradients([outs[s] for s in case["grad_of"]], [ins[s] for s in case["grad"]],
                          target_gradients=weights)
        fetch += [g.name for g in grads]
    got = spmd.Executor(CPUPlace()).run(prog, feed=feed, fetch_list=fetch, scope=Scope())
    names = case["outputs"] + [s + "@GRAD" for s in case.get("grad", [])]
    return dict(zip(names, got))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    case = CASES[name]
    got = run_stored(case)
    for key, want in case["expected"].items():
        if key.endswith("@LOD"):
            continue
        g = np.asarray(got[key])
        if want.size == 0:  # an output fluid's CPU kernel leaves unset (Out2InIdx)
            continue
        assert g.shape == want.shape, f"{name} {key}: shape {g.shape} != fluid's {want.shape}"
        assert g.dtype == want.dtype, f"{name} {key}: dtype {g.dtype} != fluid's {want.dtype}"
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=2e-5, err_msg=f"{name} {key}")


def run_stored_multi(case):
    """A case with list slots: {output slot: [LoDTensor, ...]}."""
    prog = Program()
    block = prog.global_block()
    feed, ins = {}, {}
    for slot, arrays in case["inputs"].items():
        lods = case.get("lod", {}).get(slot) or [None] * len(arrays)
        ins[slot] = []
        for i, (a, lod) in enumerate(zip(arrays, lods)):
            v = block.create_var(name=f"in_{slot}_{i}", shape=a.shape, dtype=a.dtype.name,
                                 is_data=True, lod_level=1 if lod else 0)
            ins[slot].append(v)
            feed[v.name] = spmd.fluid.create_lod_tensor(a, lod, CPUPlace()) if lod else a
    outs = {s: [block.create_var(name=f"out_{s}_{i}") for i in range(k)]
            for s, k in case["outputs"].items()}
    block.append_op(case["op"], ins, outs, case["attrs"])
    fetch = [v.name for s in case["outputs"] for v in outs[s]]
    got = iter(spmd.Executor(CPUPlace()).run(prog, feed=feed, fetch_list=fetch, scope=Scope(),
                                             return_numpy=False))
    return {s: [next(got) for _ in range(k)] for s, k in case["outputs"].items()}


@pytest.mark.parametrize("name", sorted(MULTI))
def test_matches_fluid_with_lod(name):
    case = MULTI[name]
    got = run_stored_multi(case)
    for slot in case["outputs"]:
        for i, (g, want) in enumerate(zip(got[slot], case["expected"][slot])):
            lod = case["expected"][slot + "@LOD"][i]
            assert (g.recursive_sequence_lengths() or None) == lod, f"{name} {slot}[{i}] LoD"
            g = np.asarray(g)
            if want.size == 0:  # fluid hands an empty level back as a bare (0,) tensor
                assert g.size == 0, f"{name} {slot}[{i}]: {g.shape}, fluid's is empty"
                continue
            assert g.shape == want.shape and g.dtype == want.dtype, \
                f"{name} {slot}[{i}]: {g.shape} {g.dtype} != fluid's {want.shape} {want.dtype}"
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-4,
                                       err_msg=f"{name} {slot}[{i}]")
