"""The fused ops of the fusion passes (spmd/ops/fused.py) through the op harness: forward against
numpy references in float64 and float32, gradients against central finite differences; and
each fused kernel against the unfused kernels it replaces, bitwise (what the passes claim),
including the fused updates' member-by-member fallbacks."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand, rand_away_from

from spmd.core.selected_rows import SelectedRows
from spmd.errors import InvalidArgumentError
from spmd.kernels.context import KernelContext
from spmd.kernels.registry import run_kernel
from spmd.ops import get_op_def


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTS = {"relu": lambda x, s: np.maximum(x, 0), "sigmoid": lambda x, s: _sigmoid(x),
        "tanh": lambda x, s: np.tanh(x), "scale": lambda x, s: x * s}


def _aligned(x, y, axis):
    if axis == -1 or x.ndim == y.ndim:
        return y
    return y.reshape((1,) * axis + y.shape + (1,) * (x.ndim - axis - y.ndim))


def elemwise_act_ref(X, Y, functor_list, axis=-1, scale=0.0, save_intermediate_out=False):
    if functor_list[1] == "elementwise_add":  # act(X + Y)
        inner = X + _aligned(X, Y, axis)
        out = ACTS[functor_list[0]](inner, scale)
    else:  # X + act(Y)
        inner = ACTS[functor_list[1]](Y, scale)
        out = X + _aligned(X, inner, axis)
    return {"Out": out, "IntermediateOut": inner} if save_intermediate_out else {"Out": out}


def _elemwise_cases():
    cases = []
    for act in ACTS:
        scale = 1.7 if act == "scale" else 0.0
        for outside in (True, False):
            functors = [act, "elementwise_add"] if outside else ["elementwise_add", act]
            for keep in (False, True):
                # away from relu's kink: X + Y (Y small) or Y itself
                x = rand_away_from(4, 5, gap=0.2) if outside else rand(4, 5)
                y = rand(5, low=-0.05, high=0.05) if outside else rand_away_from(5, gap=0.2)
                attrs = {"functor_list": functors, "axis": 1, "scale": scale,
                         "save_intermediate_out": keep}
                cases.append(OpCase("fused_elemwise_activation", {"X": x, "Y": y},
                                    elemwise_act_ref, attrs=attrs,
                                    name=f"{'/'.join(functors)}{'+inter' if keep else ''}"))
    cases.append(OpCase("fused_elemwise_activation",
                        {"X": rand_away_from(2, 3, 2, gap=0.2), "Y": rand(3, low=-0.05,
                                                                          high=0.05)},
                        elemwise_act_ref, attrs={"functor_list": ["relu", "elementwise_add"],
                                                 "axis": 1}, name="relu_add_4d_axis1"))
    cases.append(OpCase("fused_elemwise_activation",
                        {"X": rand(3, 4), "Y": rand_away_from(3, 4, gap=0.2)},
                        elemwise_act_ref, attrs={"functor_list": ["elementwise_add", "tanh"]},
                        name="add_tanh_same_shape"))
    return cases


def bn_relu_ref(X, Scale, Bias, Mean, Variance, momentum=0.9, epsilon=1e-5,
                data_layout="NCHW", act_type="relu"):
    x = X if data_layout == "NCHW" else np.moveaxis(X, -1, 1)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = [1] * x.ndim
    shape[1] = -1
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    y = np.maximum(y * Scale.reshape(shape) + Bias.reshape(shape), 0)
    return {"Y": y if data_layout == "NCHW" else np.moveaxis(y, 1, -1),
            "MeanOut": Mean * momentum + mean * (1 - momentum),
            "VarianceOut": Variance * momentum + var * (1 - momentum),
            "SavedMean": mean, "SavedVariance": 1 / np.sqrt(var + epsilon)}


def _bn_inputs(x, c):
    return {"X": x, "Scale": rand(c, low=0.5), "Bias": rand(c, low=-0.2, high=0.2),
            "Mean": rand(c), "Variance": rand(c, low=0.5)}


BN_CASES = [
    OpCase("fused_batch_norm_act", _bn_inputs(rand(3, 2, 2, 3), 2), bn_relu_ref,
           name="bn_relu_nchw"),
    OpCase("fused_batch_norm_act", _bn_inputs(rand(5, 3), 3), bn_relu_ref,
           attrs={"momentum": 0.8, "epsilon": 1e-4}, name="bn_relu_2d"),
    OpCase("fused_batch_norm_act", _bn_inputs(rand(2, 2, 3, 3), 3), bn_relu_ref,
           attrs={"data_layout": "NHWC"}, name="bn_relu_nhwc"),
]


@pytest.mark.parametrize("case", _elemwise_cases() + BN_CASES, ids=str)
def test_fused_op_forward_and_gradient(case):
    check_op(case)


# -- the fused updates -------------------------------------------------------------------------

LR = np.array([0.05])
SHAPES = [(3, 4), (5,), (2, 1, 2)]


def _members(low=-1.0, high=1.0):
    return [rand(*s, low=low, high=high) for s in SHAPES]


def _update_case(kind: str, **attrs):
    n = len(SHAPES)
    ins = {"Param": _members(), "Grad": _members(), "LearningRate": LR}
    if kind == "momentum":
        ins["Velocity"] = _members()
    if kind == "adam":
        ins.update(Moment1=_members(), Moment2=_members(0.0, 0.5),
                   Beta1Pow=[np.array([0.9 ** 3])] * n, Beta2Pow=[np.array([0.999 ** 3])] * n)
    return OpCase(f"fused_{kind}", ins, _fused_ref(kind), attrs=attrs, name=f"fused_{kind}")


def _fused_ref(kind):
    def one(i, **ins):
        p, g, lr = ins["Param"][i], ins["Grad"][i], ins["LearningRate"][0]
        if kind == "sgd":
            return {"ParamOut": p - lr * g}
        if kind == "momentum":
            mu = ins["mu"]
            v = mu * ins["Velocity"][i] + g
            step = (g + mu * v) * lr if ins.get("use_nesterov") else lr * v
            return {"ParamOut": p - step, "VelocityOut": v}
        b1, b2, eps = ins.get("beta1", 0.9), ins.get("beta2", 0.999), ins.get("epsilon", 1e-8)
        b1p, b2p = ins["Beta1Pow"][i], ins["Beta2Pow"][i]
        lr_t = lr * np.sqrt(1 - b2p[0]) / (1 - b1p[0])
        m1 = b1 * ins["Moment1"][i] + (1 - b1) * g
        m2 = b2 * ins["Moment2"][i] + (1 - b2) * g * g
        return {"ParamOut": p - lr_t * m1 / (np.sqrt(m2) + eps), "Moment1Out": m1,
                "Moment2Out": m2, "Beta1PowOut": b1p * b1, "Beta2PowOut": b2p * b2}

    def ref(**ins):
        res: dict = {}
        for i in range(len(ins["Param"])):
            for slot, value in one(i, **ins).items():
                res.setdefault(slot, []).append(value)
        return res

    return ref


UPDATE_CASES = [_update_case("sgd"), _update_case("momentum", mu=0.9),
                _update_case("momentum", mu=0.8, use_nesterov=True),
                _update_case("adam"), _update_case("adam", beta1=0.8, epsilon=1e-6)]


@pytest.mark.parametrize("case", UPDATE_CASES, ids=str)
def test_fused_update_forward(case):
    """No gradient (update ops have none): float64 and float32 against the reference."""
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=case.fp32_rtol, atol=case.fp32_atol)


def _attrs(op_type, **given):
    return get_op_def(op_type).validate_attrs(given, op_type)


def _unfused(kind, ins, attrs):
    """The members updated one by one by the plain update kernel."""
    res: dict = {}
    shared = ("LearningRate", "Beta1Tensor", "Beta2Tensor")
    for i in range(len(ins["Param"])):
        one = {s: v if s in shared else v[i] for s, v in ins.items()}
        out = run_kernel(kind, np, one, attrs, frozenset(get_op_def(kind).output_slots))
        for slot, value in out.items():
            res.setdefault(slot, []).append(value)
    return res


def _assert_bitwise(got: dict, want: dict):
    assert set(got) == set(want)
    for slot in want:
        for g, w in zip(got[slot], want[slot], strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, slot
            np.testing.assert_array_equal(g, w, err_msg=slot)


def _float32(ins):
    return {s: [a.astype("float32") for a in v] if isinstance(v, list) else v.astype("float32")
            for s, v in ins.items()}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", UPDATE_CASES, ids=str)
def test_fused_update_is_bitwise_the_unfused_updates_over_steps(case, dtype):
    """Three steps through one KernelContext (the second and third read the first's outputs,
    views of its flat arrays, back without copying): bitwise the plain kernel's, member by
    member, every step."""
    kind = case.op.removeprefix("fused_")
    ins = dict(case.inputs) if dtype == "float64" else _float32(case.inputs)
    ctx = KernelContext()
    fused_attrs, plain_attrs = _attrs(case.op, **case.attrs), _attrs(kind, **case.attrs)
    fused_ins, plain_ins = dict(ins), dict(ins)
    want_slots = frozenset(get_op_def(case.op).output_slots)
    for _ in range(3):
        got = run_kernel(case.op, np, fused_ins, fused_attrs, want_slots, ctx)
        want = _unfused(kind, plain_ins, plain_attrs)
        _assert_bitwise(got, want)
        for out, values in got.items():
            fused_ins[out[:-len("Out")]] = values
        for out, values in want.items():
            plain_ins[out[:-len("Out")]] = values
        fused_ins["Grad"] = [g * 0.5 for g in fused_ins["Grad"]]
        plain_ins["Grad"] = [g * 0.5 for g in plain_ins["Grad"]]
    params = got["ParamOut"]  # one flat array under every member's parameter
    assert all(p.base is params[0].base for p in params)


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
def test_fused_update_in_runs_is_bitwise_the_unfused_updates(kind):
    """On numpy members go in runs of at most RUN_BYTES of parameters (one larger than half
    of it alone): parameters sized around those limits (runs of members that are not
    neighbours, a run filled up), three steps, bitwise the plain kernel's."""
    from spmd.kernels.optim_fused import RUN_BYTES

    limit = RUN_BYTES // 8  # float64 elements
    sizes = [limit // 2 + 1, 7, 5, limit + 10, 3, limit // 2, limit // 4, limit // 2, 9]
    rng = np.random.default_rng(5)

    def members(low=-1.0):
        return [rng.uniform(low, 1.0, n) for n in sizes]

    ins = {"Param": members(), "Grad": members(), "LearningRate": LR}
    attrs = {"mu": 0.9} if kind == "momentum" else {}
    if kind == "momentum":
        ins["Velocity"] = members()
    if kind == "adam":
        ins.update(Moment1=members(), Moment2=members(0.0),
                   Beta1Pow=[np.array([0.9 ** 2])] * len(sizes),
                   Beta2Pow=[np.array([0.999 ** 2])] * len(sizes))
    fused_op = f"fused_{kind}"
    ctx, fused_ins, plain_ins = KernelContext(), dict(ins), dict(ins)
    for _ in range(3):
        got = run_kernel(fused_op, np, fused_ins, _attrs(fused_op, **attrs),
                         frozenset(get_op_def(fused_op).output_slots), ctx)
        want = _unfused(kind, plain_ins, _attrs(kind, **attrs))
        _assert_bitwise(got, want)
        for out, values in got.items():
            fused_ins[out[:-len("Out")]] = values
        for out, values in want.items():
            plain_ins[out[:-len("Out")]] = values


def test_fused_update_reads_gradients_lying_end_to_end_in_place():
    """Gradients that are views of one buffer in member order (a fused all-reduce bucket)
    are used where they lie; any other layout is copied; the numbers are the same."""
    case = UPDATE_CASES[0]
    ins = dict(case.inputs)
    bucket = np.concatenate([g.reshape(-1) for g in ins["Grad"]])
    views, at = [], 0
    for g in ins["Grad"]:
        views.append(bucket[at:at + g.size].reshape(g.shape))
        at += g.size
    attrs = _attrs("fused_sgd")
    want = _unfused("sgd", ins, _attrs("sgd"))
    _assert_bitwise(run_kernel("fused_sgd", np, dict(ins, Grad=views), attrs, {"ParamOut"},
                               KernelContext()), want)
    reordered = dict(ins, Grad=views[::-1], Param=ins["Param"][::-1])
    got = run_kernel("fused_sgd", np, reordered, attrs, {"ParamOut"}, KernelContext())
    _assert_bitwise(got, _unfused("sgd", reordered, _attrs("sgd")))


def test_fused_adam_with_unequal_beta_powers_updates_member_by_member():
    case = UPDATE_CASES[3]
    ins = dict(case.inputs, Beta1Pow=[np.array([0.9 ** k]) for k in (1, 2, 3)])
    got = run_kernel("fused_adam", np, ins, _attrs("fused_adam"),
                     frozenset(get_op_def("fused_adam").output_slots), KernelContext())
    _assert_bitwise(got, _unfused("adam", ins, _attrs("adam")))


def test_fused_update_takes_a_sparse_gradient_member_by_member():
    case = UPDATE_CASES[0]
    table = rand(6, 3)
    rows = SelectedRows(np.array([0, 4, 4]), rand(3, 3), 6)
    ins = {"Param": [table, case.inputs["Param"][0]],
           "Grad": [rows, case.inputs["Grad"][0]], "LearningRate": LR}
    got = run_kernel("fused_sgd", np, ins, _attrs("fused_sgd"), {"ParamOut"}, KernelContext())
    _assert_bitwise(got, _unfused("sgd", ins, _attrs("sgd")))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", _elemwise_cases(), ids=str)
def test_fused_elemwise_activation_is_bitwise_the_two_kernels(case, dtype):
    x, y = (case.inputs[s].astype(dtype) for s in ("X", "Y"))
    attrs = _attrs(case.op, **case.attrs)
    act, outside = ((attrs["functor_list"][0], True) if attrs["functor_list"][1] ==
                    "elementwise_add" else (attrs["functor_list"][1], False))
    act_attrs = _attrs(act, **({"scale": attrs["scale"]} if act == "scale" else {}))
    add_attrs = _attrs("elementwise_add", axis=attrs["axis"])
    want = {"Out"} | ({"IntermediateOut"} if attrs["save_intermediate_out"] else set())
    got = run_kernel(case.op, np, {"X": x, "Y": y}, attrs, want)
    if outside:
        inner = run_kernel("elementwise_add", np, {"X": x, "Y": y}, add_attrs, {"Out"})["Out"]
        out = run_kernel(act, np, {"X": inner}, act_attrs, {"Out"})["Out"]
    else:
        inner = run_kernel(act, np, {"X": y}, act_attrs, {"Out"})["Out"]
        out = run_kernel("elementwise_add", np, {"X": x, "Y": inner}, add_attrs, {"Out"})["Out"]
    np.testing.assert_array_equal(got["Out"], out)
    dout = np.linspace(-1, 1, out.size).reshape(out.shape).astype(dtype)
    grad_ins = {"X": x, "Y": y, "Out": out, "Out@GRAD": dout}
    if attrs["save_intermediate_out"]:
        np.testing.assert_array_equal(got["IntermediateOut"], inner)
        grad_ins["IntermediateOut"] = inner
    grads = run_kernel(case.op + "_grad", np, grad_ins, attrs, {"X@GRAD", "Y@GRAD"})
    grad_kind = "scale" if act == "scale" else act + "_grad"
    grad_io = ({"X": dout} if act == "scale" else {"Out": out if outside else inner,
                                                   "Out@GRAD": dout})
    if outside:
        dinner = run_kernel(grad_kind, np, grad_io, _attrs(grad_kind, **(
            {"scale": attrs["scale"]} if act == "scale" else {})), {"X@GRAD", "Out"})
        dinner = dinner.get("X@GRAD", dinner.get("Out"))
        plain = run_kernel("elementwise_add_grad", np, {"X": x, "Y": y, "Out@GRAD": dinner},
                           add_attrs, {"X@GRAD", "Y@GRAD"})
    else:
        plain = run_kernel("elementwise_add_grad", np, {"X": x, "Y": inner, "Out@GRAD": dout},
                           add_attrs, {"X@GRAD", "Y@GRAD"})
        grad_io = ({"X": plain["Y@GRAD"]} if act == "scale" else
                   {"Out": inner, "Out@GRAD": plain["Y@GRAD"]})
        dy = run_kernel(grad_kind, np, grad_io, _attrs(grad_kind, **(
            {"scale": attrs["scale"]} if act == "scale" else {})), {"X@GRAD", "Out"})
        plain["Y@GRAD"] = dy.get("X@GRAD", dy.get("Out"))
    for slot in ("X@GRAD", "Y@GRAD"):
        np.testing.assert_array_equal(grads[slot], plain[slot], err_msg=slot)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", BN_CASES, ids=str)
def test_fused_batch_norm_act_is_bitwise_batch_norm_then_relu(case, dtype):
    ins = {s: v.astype(dtype) for s, v in case.inputs.items()}
    attrs = _attrs(case.op, **case.attrs)
    bn_attrs = _attrs("batch_norm", momentum=attrs["momentum"], epsilon=attrs["epsilon"],
                      data_layout=attrs["data_layout"])
    outs = frozenset(get_op_def("batch_norm").output_slots) - {"ReserveSpace"}
    got = run_kernel(case.op, np, ins, attrs, outs)
    bn = run_kernel("batch_norm", np, ins, bn_attrs, outs)
    y = run_kernel("relu", np, {"X": bn["Y"]}, _attrs("relu"), {"Out"})["Out"]
    _assert_bitwise({k: [v] for k, v in got.items()},
                    {**{k: [v] for k, v in bn.items()}, "Y": [y]})
    dout = np.linspace(-1, 1, y.size).reshape(y.shape).astype(dtype)
    grad_ins = {"X": ins["X"], "Scale": ins["Scale"], "Bias": ins["Bias"], "Y": y,
                "SavedMean": got["SavedMean"], "SavedVariance": got["SavedVariance"],
                "Y@GRAD": dout}
    wanted = {"X@GRAD", "Scale@GRAD", "Bias@GRAD"}
    grads = run_kernel(case.op + "_grad", np, grad_ins, attrs, wanted)
    dy = run_kernel("relu_grad", np, {"Out": y, "Out@GRAD": dout}, _attrs("relu"),
                    {"X@GRAD"})["X@GRAD"]
    plain = run_kernel("batch_norm_grad", np, dict(grad_ins, **{"Y@GRAD": dy}, Mean=ins["Mean"],
                                                   Variance=ins["Variance"]), bn_attrs, wanted)
    _assert_bitwise({k: [v] for k, v in grads.items()}, {k: [v] for k, v in plain.items()})


def test_fused_ops_refuse_what_they_do_not_compute():
    from spmd.core import Program

    block = Program().global_block()
    x = block.create_var(name="x", shape=(2, 3), dtype="float32")
    with pytest.raises(InvalidArgumentError, match="functor_list must be"):
        block.append_op("fused_elemwise_activation", {"X": x, "Y": x}, {"Out": "o"},
                        {"functor_list": ["gelu", "elementwise_add"]})
    with pytest.raises(InvalidArgumentError, match="save_intermediate_out"):
        block.append_op("fused_elemwise_activation", {"X": x, "Y": x}, {"Out": "o"},
                        {"functor_list": ["relu", "elementwise_add"],
                         "save_intermediate_out": True})
    c = block.create_var(name="c", shape=(3,), dtype="float32")
    with pytest.raises(InvalidArgumentError, match="act_type must be 'relu'"):
        block.append_op("fused_batch_norm_act", {"X": x, "Scale": c, "Bias": c, "Mean": c,
                                                 "Variance": c},
                        {"Y": "y", "MeanOut": c, "VarianceOut": c, "SavedMean": "sm",
                         "SavedVariance": "sv"}, {"act_type": "tanh"})
    lr = block.create_var(name="lr", shape=(1,), dtype="float32")
    with pytest.raises(InvalidArgumentError, match="ParamOut lists 1 variables for 2"):
        block.append_op("fused_sgd", {"Param": [x, x], "Grad": [x, x], "LearningRate": lr},
                        {"ParamOut": [x]})
