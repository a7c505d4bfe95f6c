"""Neural-network ops through the op harness: forward vs numpy loops, gradients vs finite
differences; plus dropout's randomness, accuracy's integer outputs, shape inference with an
unknown batch, and the user errors shape inference raises."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from op_harness import RNG, OpCase, check_grad, check_op, rand, run_forward

import spmd
from spmd.autodiff import gradients
from spmd.core import CPUPlace, Program, Scope
from spmd.errors import ExecutionError, InvalidArgumentError
from spmd.kernels.registry import run_kernel
from spmd.ops import get_op_def


def labels(*shape, classes):
    return RNG.integers(0, classes, size=shape).astype(np.int64)


# --- references: straightforward loops over the definition -----------------------------------


def softmax_ref(X, axis=-1, **_):
    x = np.moveaxis(X, axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        e = np.exp(x[idx] - x[idx].max())
        out[idx] = e / e.sum()
    return {"Out": np.moveaxis(out, -1, axis)}


def cross_entropy_ref(X, Label, soft_label=False, ignore_index=-100, **_):
    x2 = X.reshape(-1, X.shape[-1])
    y = np.zeros(x2.shape[0])
    for i in range(x2.shape[0]):
        if soft_label:
            y[i] = -(Label.reshape(x2.shape)[i] * np.log(x2[i])).sum()
        else:
            lab = Label.reshape(-1)[i]
            y[i] = 0.0 if lab == ignore_index else -np.log(x2[i, lab])
    # fluid 1.8.5's Y has the label's dims (last one 1): a label without X's class dim
    # gives a loss of the label's shape (tests/unit/test_fluid_behaviours.py)
    shape = Label.shape if Label.ndim == X.ndim - 1 else X.shape[:-1] + (1,)
    return {"Y": y.reshape(shape)}


def cross_entropy2_ref(X, Label, ignore_index=-100, **_):
    y = cross_entropy_ref(X, Label, ignore_index=ignore_index)["Y"]
    lab = Label.reshape(-1)
    match = np.array([0.0 if lab[i] == ignore_index else X.reshape(-1, X.shape[-1])[i, lab[i]]
                      for i in range(lab.size)])
    return {"Y": y, "XShape": np.zeros(X.shape + (0,)), "MatchX": match.reshape(y.shape)}


def swce_ref(Logits, Label, soft_label=False, ignore_index=-100, axis=-1, **_):
    sm = softmax_ref(Logits, axis=axis)["Out"]
    sm_last = np.moveaxis(sm, axis, -1)
    lab_last = np.moveaxis(Label, axis, -1)
    loss = np.zeros(sm_last.shape[:-1] + (1,))
    for idx in np.ndindex(sm_last.shape[:-1]):
        if soft_label:
            loss[idx] = -(lab_last[idx] * np.log(sm_last[idx])).sum()
        elif lab_last[idx][0] != ignore_index:
            loss[idx] = -np.log(sm_last[idx][lab_last[idx][0]])
    return {"Softmax": sm, "Loss": np.moveaxis(loss, -1, axis)}


def _same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def _pads4(paddings, algo, in_hw, k_hw, strides):
    if algo == "VALID":
        return [0, 0, 0, 0]
    if algo == "SAME":
        return [*_same_pads(in_hw[0], k_hw[0], strides[0]),
                *_same_pads(in_hw[1], k_hw[1], strides[1])]
    p = list(paddings)
    return [p[0], p[0], p[1], p[1]] if len(p) == 2 else p


def conv_ref(Input, Filter, strides=(1, 1), paddings=(0, 0), dilations=(1, 1), groups=1,
             padding_algorithm="EXPLICIT", **_):
    n_, c, h, w = Input.shape
    m, cg, kh, kw = Filter.shape
    sh, sw = strides
    dh, dw = dilations if padding_algorithm != "SAME" else (1, 1)
    pt, pb, pl, pr = _pads4(paddings, padding_algorithm, (h, w), (kh, kw), strides)
    x = np.pad(Input, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    out = np.zeros((n_, m, oh, ow))
    for n, o, y, xx in itertools.product(range(n_), range(m), range(oh), range(ow)):
        g = o // (m // groups)
        patch = x[n, g * cg:(g + 1) * cg, y * sh:y * sh + dh * (kh - 1) + 1:dh,
                  xx * sw:xx * sw + dw * (kw - 1) + 1:dw]
        out[n, o, y, xx] = (patch * Filter[o]).sum()
    return {"Output": out}


def pool_ref(X, pooling_type, ksize, strides=(1, 1), paddings=(0, 0), global_pooling=False,
             ceil_mode=False, exclusive=True, padding_algorithm="EXPLICIT", **_):
    n_, c_, h, w = X.shape
    if global_pooling:
        ksize, strides, pads = (h, w), (1, 1), [0, 0, 0, 0]
    else:
        pads = _pads4(paddings, padding_algorithm, (h, w), ksize, strides)
    (kh, kw), (sh, sw) = ksize, strides
    extra = (sh - 1, sw - 1) if ceil_mode else (0, 0)
    oh = (h - kh + pads[0] + pads[1] + extra[0]) // sh + 1
    ow = (w - kw + pads[2] + pads[3] + extra[1]) // sw + 1
    out = np.zeros((n_, c_, oh, ow))
    for n, c, y, xx in itertools.product(range(n_), range(c_), range(oh), range(ow)):
        h0, w0 = y * sh - pads[0], xx * sw - pads[2]
        h1, w1 = min(h0 + kh, h), min(w0 + kw, w)
        h0, w0 = max(h0, 0), max(w0, 0)
        win = X[n, c, h0:h1, w0:w1]
        if pooling_type == "max":
            out[n, c, y, xx] = win.max()
        else:
            out[n, c, y, xx] = win.sum() / (win.size if exclusive else kh * kw)
    return {"Out": out}


def batch_norm_ref(X, Scale, Bias, Mean, Variance, momentum=0.9, epsilon=1e-5,
                   data_layout="NCHW", is_test=False, use_global_stats=False, **_):
    x = X if data_layout == "NCHW" else np.moveaxis(X, -1, 1)
    y = np.empty_like(x)
    c_ = x.shape[1]
    mean, var = np.zeros(c_), np.zeros(c_)
    for c in range(c_):
        vals = x[:, c]
        if is_test or use_global_stats:
            mean[c], var[c] = Mean[c], Variance[c]
        else:
            mean[c], var[c] = vals.mean(), ((vals - vals.mean()) ** 2).mean()
        y[:, c] = (vals - mean[c]) / np.sqrt(var[c] + epsilon) * Scale[c] + Bias[c]
    glob = is_test or use_global_stats
    return {"Y": y if data_layout == "NCHW" else np.moveaxis(y, 1, -1),
            "MeanOut": Mean if glob else Mean * momentum + mean * (1 - momentum),
            "VarianceOut": Variance if glob else Variance * momentum + var * (1 - momentum),
            "SavedMean": mean, "SavedVariance": 1 / np.sqrt(var + epsilon)}


def layer_norm_ref(X, Scale=None, Bias=None, begin_norm_axis=1, epsilon=1e-5, **_):
    left = int(np.prod(X.shape[:begin_norm_axis]))
    x2 = X.reshape(left, -1)
    y = np.empty_like(x2)
    mean, var = np.zeros(left), np.zeros(left)
    for i in range(left):
        mean[i] = x2[i].mean()
        var[i] = ((x2[i] - mean[i]) ** 2).mean()
        y[i] = (x2[i] - mean[i]) / np.sqrt(var[i] + epsilon)
        y[i] = y[i] * (Scale if Scale is not None else 1) + (Bias if Bias is not None else 0)
    return {"Y": y.reshape(X.shape), "Mean": mean, "Variance": var}


def top_k_ref(X, k=1, K=None, **_):
    k = int(K[0]) if K is not None else k
    x2 = X.reshape(-1, X.shape[-1])
    out, idx = np.zeros((x2.shape[0], k)), np.zeros((x2.shape[0], k), dtype=np.int64)
    for i in range(x2.shape[0]):
        order = sorted(range(x2.shape[1]), key=lambda j: (-x2[i, j], j))[:k]
        idx[i], out[i] = order, x2[i, order]
    return {"Out": out.reshape(X.shape[:-1] + (k,)),
            "Indices": idx.reshape(X.shape[:-1] + (k,))}


def dropout_test_ref(X, dropout_prob=0.5, dropout_implementation="downgrade_in_infer", **_):
    scale = 1 - dropout_prob if dropout_implementation == "downgrade_in_infer" else 1.0
    return {"Out": X * scale, "Mask": np.ones(X.shape, dtype=np.uint8)}


# --- the cases ------------------------------------------------------------------------------

P = dict(low=0.1, high=1.0)  # probabilities for cross_entropy
LAB_IGN = np.array([[0], [3], [1], [3]], dtype=np.int64)  # two rows ignored with ignore_index=3

CASES = [
    OpCase("square_error_cost", {"X": rand(4, 3), "Y": rand(4, 3)},
           lambda X, Y: {"Out": (X - Y) ** 2}),
    OpCase("square_error_cost", {"X": rand(4, 3), "Y": rand(3)}, name="square_error_bcast",
           ref=lambda X, Y: {"Out": (X - Y) ** 2}),
    OpCase("softmax", {"X": rand(3, 5)}, softmax_ref),
    OpCase("softmax", {"X": rand(2, 3, 4)}, softmax_ref, attrs={"axis": 1}, name="softmax_ax1"),
    OpCase("cross_entropy", {"X": rand(4, 5, **P), "Label": labels(4, 1, classes=5)},
           cross_entropy_ref),
    OpCase("cross_entropy", {"X": rand(4, 5, **P), "Label": LAB_IGN}, cross_entropy_ref,
           attrs={"ignore_index": 3}, name="cross_entropy_ignore"),
    OpCase("cross_entropy", {"X": rand(2, 3, 4, **P), "Label": rand(2, 3, 4, low=0, high=1)},
           cross_entropy_ref, attrs={"soft_label": True}, name="cross_entropy_soft"),
    OpCase("cross_entropy", {"X": rand(4, 5, **P), "Label": labels(4, classes=5)},
           cross_entropy_ref, name="cross_entropy_label_rank1"),
    OpCase("cross_entropy2", {"X": rand(4, 5, **P), "Label": LAB_IGN}, cross_entropy2_ref,
           attrs={"ignore_index": 3}),
    OpCase("softmax_with_cross_entropy", {"Logits": rand(4, 5) * 3,
                                          "Label": labels(4, 1, classes=5)}, swce_ref),
    OpCase("softmax_with_cross_entropy",
           {"Logits": rand(3, 5), "Label": np.array([[4], [-100], [0]], dtype=np.int64)},
           swce_ref, name="swce_default_ignore"),
    OpCase("softmax_with_cross_entropy", {"Logits": rand(4, 5), "Label": LAB_IGN}, swce_ref,
           attrs={"ignore_index": 3}, name="swce_ignore"),
    OpCase("softmax_with_cross_entropy", {"Logits": rand(3, 4), "Label": labels(3, 1, classes=4)},
           swce_ref, attrs={"numeric_stable_mode": False}, name="swce_unstable_mode_flag"),
    OpCase("softmax_with_cross_entropy", {"Logits": rand(3, 4), "Label": rand(3, 4, low=0)},
           swce_ref, attrs={"soft_label": True}, name="swce_soft"),
    OpCase("softmax_with_cross_entropy", {"Logits": rand(2, 4, 3),
                                          "Label": labels(2, 1, 3, classes=4)},
           swce_ref, attrs={"axis": 1}, name="swce_axis1"),
    OpCase("conv2d", {"Input": rand(2, 2, 5, 5), "Filter": rand(3, 2, 3, 3)}, conv_ref),
    OpCase("conv2d", {"Input": rand(2, 2, 6, 5), "Filter": rand(4, 2, 3, 2)}, conv_ref,
           attrs={"strides": [2, 1], "paddings": [1, 0, 2, 1], "dilations": [1, 2]},
           name="conv2d_stride_pad4_dilation"),
    OpCase("conv2d", {"Input": rand(1, 4, 5, 6), "Filter": rand(4, 2, 3, 3)}, conv_ref,
           attrs={"groups": 2, "paddings": [1, 1]}, name="conv2d_groups"),
    OpCase("conv2d", {"Input": rand(1, 2, 6, 5), "Filter": rand(2, 2, 3, 3)}, conv_ref,
           attrs={"strides": [2, 2], "padding_algorithm": "SAME", "dilations": [2, 2]},
           name="conv2d_same"),
    OpCase("conv2d", {"Input": rand(1, 2, 5, 5), "Filter": rand(2, 2, 2, 2)}, conv_ref,
           attrs={"paddings": [3, 3], "padding_algorithm": "VALID"}, name="conv2d_valid"),
    OpCase("depthwise_conv2d", {"Input": rand(2, 3, 4, 4), "Filter": rand(3, 1, 3, 3)},
           conv_ref, attrs={"groups": 3, "paddings": [1, 1]}),
    OpCase("pool2d", {"X": rand(2, 2, 5, 5)}, pool_ref, name="pool_max",
           attrs={"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2],
                  "paddings": [1, 1]}),
    OpCase("pool2d", {"X": rand(2, 2, 5, 5)}, pool_ref, name="pool_avg_exclusive",
           attrs={"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2],
                  "paddings": [1, 1]}),
    OpCase("pool2d", {"X": rand(1, 2, 5, 4)}, pool_ref, name="pool_avg_inclusive_pad4",
           attrs={"pooling_type": "avg", "ksize": [2, 3], "strides": [1, 2],
                  "paddings": [1, 0, 0, 2], "exclusive": False}),
    OpCase("pool2d", {"X": rand(1, 2, 5, 5)}, pool_ref, name="pool_max_ceil",
           attrs={"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2],
                  "ceil_mode": True}),
    OpCase("pool2d", {"X": rand(1, 2, 5, 5)}, pool_ref, name="pool_avg_ceil",
           attrs={"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2],
                  "ceil_mode": True}),
    OpCase("pool2d", {"X": rand(2, 3, 4, 3)}, pool_ref, name="pool_global_avg",
           attrs={"pooling_type": "avg", "ksize": [1, 1], "global_pooling": True}),
    OpCase("pool2d", {"X": rand(2, 2, 3, 4)}, pool_ref, name="pool_global_max",
           attrs={"pooling_type": "max", "ksize": [2, 2], "global_pooling": True}),
    OpCase("pool2d", {"X": rand(2, 2, 3, 3)}, pool_ref, name="pool_max_whole_image_pad",
           attrs={"pooling_type": "max", "ksize": [3, 3], "paddings": [1, 1],
                  "strides": [3, 3]}),
    OpCase("pool2d", {"X": rand(1, 2, 5, 6)}, pool_ref, name="pool_max_same",
           attrs={"pooling_type": "max", "ksize": [3, 2], "strides": [2, 2],
                  "padding_algorithm": "SAME"}),
    OpCase("batch_norm", {"X": rand(3, 2, 2, 3), "Scale": rand(2, low=0.5), "Bias": rand(2),
                          "Mean": rand(2), "Variance": rand(2, low=0.5)}, batch_norm_ref),
    OpCase("batch_norm", {"X": rand(4, 3), "Scale": rand(3, low=0.5), "Bias": rand(3),
                          "Mean": rand(3), "Variance": rand(3, low=0.5)}, batch_norm_ref,
           attrs={"momentum": 0.8, "epsilon": 1e-4}, name="batch_norm_2d"),
    OpCase("batch_norm", {"X": rand(2, 2, 3, 3), "Scale": rand(3, low=0.5), "Bias": rand(3),
                          "Mean": rand(3), "Variance": rand(3, low=0.5)}, batch_norm_ref,
           attrs={"data_layout": "NHWC"}, name="batch_norm_nhwc"),
    OpCase("batch_norm", {"X": rand(2, 3, 2, 2), "Scale": rand(3, low=0.5), "Bias": rand(3),
                          "Mean": rand(3), "Variance": rand(3, low=0.5)}, batch_norm_ref,
           attrs={"is_test": True}, name="batch_norm_test"),
    OpCase("batch_norm", {"X": rand(2, 3, 2, 2), "Scale": rand(3, low=0.5), "Bias": rand(3),
                          "Mean": rand(3), "Variance": rand(3, low=0.5)}, batch_norm_ref,
           attrs={"use_global_stats": True}, name="batch_norm_global_stats"),
    OpCase("batch_norm", {"X": rand(3, 2, 2), "Scale": rand(2, low=0.5), "Bias": rand(2),
                          "Mean": rand(2), "Variance": rand(2, low=0.5),
                          "MomentumTensor": np.array([0.5])},
           lambda MomentumTensor, **a: batch_norm_ref(**a, momentum=0.5),
           name="batch_norm_momentum_tensor"),
    OpCase("layer_norm", {"X": rand(3, 2, 4), "Scale": rand(8, low=0.5), "Bias": rand(8)},
           layer_norm_ref),
    OpCase("layer_norm", {"X": rand(2, 3, 4)}, layer_norm_ref, name="layer_norm_axis2_noaffine",
           attrs={"begin_norm_axis": 2, "epsilon": 1e-3}),
    OpCase("dropout", {"X": rand(3, 4)}, dropout_test_ref, name="dropout_test_downgrade",
           attrs={"dropout_prob": 0.3, "is_test": True}),
    OpCase("dropout", {"X": rand(3, 4)}, dropout_test_ref, name="dropout_test_upscale",
           attrs={"dropout_prob": 0.3, "is_test": True,
                  "dropout_implementation": "upscale_in_train"}),
    OpCase("top_k", {"X": rand(3, 6)}, top_k_ref, attrs={"k": 2}),
    OpCase("top_k", {"X": rand(5)}, top_k_ref, attrs={"k": 5}, name="top_k_1d_all"),
    OpCase("top_k", {"X": rand(2, 2, 5), "K": np.array([3], dtype=np.int64)}, top_k_ref,
           name="top_k_tensor_k"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def test_top_k_ties_come_in_fluids_order():
    # fluid 1.8.5's CPU kernel gives [4, 1, 2] here (its partial sort's heap order; more
    # cases in tests/oracle/data/idioms.json, topk_ties)
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]])
    got = run_forward(OpCase("top_k", {"X": x}, None, attrs={"k": 3},
                             outputs={"Out": 1, "Indices": 1}))
    np.testing.assert_array_equal(got["Indices"][0], [[4, 1, 2]])
    assert got["Indices"][0].dtype == np.int64


def test_softmax_with_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [-5e4, 5e4, 0.0]])
    case = OpCase("softmax_with_cross_entropy",
                  {"Logits": logits, "Label": np.array([[0], [0]], dtype=np.int64)}, None,
                  outputs={"Softmax": 1, "Loss": 1})
    got = run_forward(case)
    # fluid clips the shifted logits at -64 before exp: the second loss is 64, not 1e5, and
    # no softmax entry is exactly 0 (tests/unit/test_numeric_guards.py has fluid's outputs)
    tail = np.exp(-64.0)
    np.testing.assert_allclose(got["Loss"][0], [[0.0], [64.0]], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["Softmax"][0][:, :2], [[1.0, tail], [tail, 1.0]],
                               rtol=1e-12)


def test_max_pool_ties_send_the_gradient_to_the_first_maximum():
    x = np.array([[[[1.0, 2.0, 2.0], [2.0, 0.0, 2.0], [0.0, 1.0, 1.0]]]])
    for attrs in ({"ksize": [2, 2], "strides": [1, 1]}, {"ksize": [2, 2], "global_pooling": True}):
        prog = Program()
        b = prog.global_block()
        xv = b.create_var(name="x", shape=x.shape, dtype="float64", is_data=True,
                          stop_gradient=False)
        out = b.create_var(name="out")
        b.append_op("pool2d", {"X": xv}, {"Out": out}, {"pooling_type": "max", **attrs})
        [dx] = gradients([out], [xv])
        [got] = spmd.Executor(CPUPlace()).run(prog, feed={"x": x}, fetch_list=[dx],
                                              scope=Scope())
        if attrs.get("global_pooling"):
            want = [[0, 1, 0], [0, 0, 0], [0, 0, 0]]  # the first 2 in row-major order
        else:  # windows at (0,0) (0,1) (1,0) (1,1): first maxima (0,1) (0,1) (1,0) (1,2)
            want = [[0, 2, 0], [1, 0, 1], [0, 0, 0]]
        np.testing.assert_array_equal(got[0, 0], want, err_msg=str(attrs))


def test_batch_norm_single_value_per_channel_passes_x_through():
    case = OpCase("batch_norm", {"X": rand(1, 3), "Scale": rand(3), "Bias": rand(3),
                                 "Mean": rand(3), "Variance": rand(3, low=0.5)}, None,
                  outputs={"Y": 1, "MeanOut": 1, "VarianceOut": 1, "SavedMean": 1,
                           "SavedVariance": 1})
    got = run_forward(case)
    np.testing.assert_array_equal(got["Y"][0], case.inputs["X"])  # as fluid does


def test_batch_norm_updates_moving_stats_in_place_by_name():
    """layers bind MeanOut/VarianceOut to the Mean/Variance variables: each run reads the
    scope's values and writes the updated ones back."""
    prog = Program()
    b = prog.global_block()
    x = b.create_var(name="x", shape=(-1, 2, 3, 3), dtype="float64", is_data=True)
    params = {n: b.create_var(name=n, shape=(2,), dtype="float64", persistable=True)
              for n in ("scale", "bias", "mean", "var")}
    outs = {s: b.create_var(name=s.lower()) for s in ("Y", "SavedMean", "SavedVariance")}
    b.append_op("batch_norm", {"X": x, "Scale": params["scale"], "Bias": params["bias"],
                               "Mean": params["mean"], "Variance": params["var"]},
                {"Y": outs["Y"], "MeanOut": params["mean"], "VarianceOut": params["var"],
                 "SavedMean": outs["SavedMean"], "SavedVariance": outs["SavedVariance"]},
                {"momentum": 0.5})
    scope = Scope()
    for n, v in (("scale", 1.0), ("bias", 0.0), ("mean", 0.0), ("var", 1.0)):
        scope.var(n).get_tensor().set(np.full(2, v))
    exe = spmd.Executor(CPUPlace())
    mean, var = np.zeros(2), np.ones(2)
    for _ in range(3):
        xv = rand(4, 2, 3, 3)
        exe.run(prog, feed={"x": xv}, fetch_list=[outs["Y"]], scope=scope)
        mean = 0.5 * mean + 0.5 * xv.mean(axis=(0, 2, 3))
        var = 0.5 * var + 0.5 * xv.var(axis=(0, 2, 3))
        np.testing.assert_allclose(np.array(scope.find_var("mean").get_tensor()), mean)
        np.testing.assert_allclose(np.array(scope.find_var("var").get_tensor()), var)


def test_kernels_leave_inputs_untouched():
    """Every forward kernel, and every generated grad kernel, called on the cases' inputs."""
    for case in CASES:
        opdef = get_op_def(case.op)
        ins = {s: np.asarray(v) for s, v in case.inputs.items()}
        attrs = opdef.validate_attrs(dict(case.attrs), case.op)
        attrs["_rng"] = np.random.default_rng(0)
        before = {s: v.copy() for s, v in ins.items()}
        outs = run_kernel(case.op, np, ins, attrs, frozenset(s.name for s in opdef.outputs))
        grad_type = case.op + "_grad"
        if opdef.grad == "default":
            gdef = get_op_def(grad_type)
            gins = {s: v for s, v in {**ins, **outs}.items() if s in gdef.input_slots}
            for s in opdef.outputs:
                if s.name not in opdef.nondiff_outputs:
                    gins[s.name + "@GRAD"] = np.ones_like(outs[s.name])
            want = frozenset(s.name for s in gdef.outputs)
            snapshot = {s: v.copy() for s, v in gins.items()}
            run_kernel(grad_type, np, gins, attrs, want)
            for s, v in snapshot.items():
                np.testing.assert_array_equal(gins[s], v, err_msg=f"{grad_type} changed {s}")
        for s, v in before.items():
            np.testing.assert_array_equal(ins[s], v, err_msg=f"{case} changed input {s}")


# --- dropout in training: random, so checked by its properties --------------------------------


def _dropout_program(shape, attrs, seed=0):
    prog = Program()
    prog.random_seed = seed
    block = prog.global_block()
    x = block.create_var(name="x", shape=shape, dtype="float64", is_data=True,
                         stop_gradient=False)
    out, mask = block.create_var(name="out"), block.create_var(name="mask")
    block.append_op("dropout", {"X": x}, {"Out": out, "Mask": mask}, attrs)
    return prog, x, out, mask


def _run_dropout(x_value, attrs, seed=0, runs=1):
    prog, _, out, mask = _dropout_program(x_value.shape, attrs, seed)
    exe = spmd.Executor(CPUPlace())
    return [exe.run(prog, feed={"x": x_value}, fetch_list=[out, mask], scope=Scope())
            for _ in range(runs)]


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_train_keep_rate_and_scaling(impl):
    x = RNG.uniform(1.0, 2.0, size=(200, 100))
    p = 0.3
    [(out, mask)] = _run_dropout(x, {"dropout_prob": p, "dropout_implementation": impl}, seed=5)
    assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
    assert abs(mask.mean() - (1 - p)) < 0.01  # 20000 draws: the std of the mean is 0.003
    scale = 1.0 if impl == "downgrade_in_infer" else 1.0 / (1 - p)
    np.testing.assert_allclose(out, x * mask * scale, rtol=1e-15)


def test_dropout_prob_one_drops_everything():
    x = np.ones((4, 5))
    for impl in ("downgrade_in_infer", "upscale_in_train"):
        [(out, mask)] = _run_dropout(x, {"dropout_prob": 1.0, "dropout_implementation": impl})
        assert not out.any() and not mask.any() and np.isfinite(out).all()


def test_dropout_fixed_seed_reproduces_across_runs_and_programs():
    x = np.ones((10, 10))
    attrs = {"dropout_prob": 0.5, "fix_seed": True, "seed": 123}
    (a, ma), (b, mb) = _run_dropout(x, attrs, runs=2)
    [(c, mc)] = _run_dropout(x, attrs)
    np.testing.assert_array_equal(ma, mb)
    np.testing.assert_array_equal(ma, mc)
    [(_, other)] = _run_dropout(x, {**attrs, "seed": 124})
    assert (other != ma).any()


def test_dropout_program_seed_reproduces_and_steps_differ():
    x = np.ones((10, 10))
    first = _run_dropout(x, {"dropout_prob": 0.5}, seed=7, runs=2)
    again = _run_dropout(x, {"dropout_prob": 0.5}, seed=7, runs=2)
    np.testing.assert_array_equal(first[0][1], again[0][1])
    np.testing.assert_array_equal(first[1][1], again[1][1])
    assert (first[0][1] != first[1][1]).any()  # a new mask every step


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_grad_is_mask_times_scale(impl):
    p = 0.4
    prog, x, out, mask = _dropout_program((6, 7), {"dropout_prob": p, "fix_seed": True,
                                                   "seed": 3, "dropout_implementation": impl})
    block = prog.global_block()
    g = block.create_var(name="g", shape=(6, 7), dtype="float64", is_data=True)
    [dx] = gradients([out], [x], target_gradients=[g])
    gv = RNG.uniform(0.5, 1.5, size=(6, 7))
    m, d = spmd.Executor(CPUPlace()).run(prog, feed={"x": rand(6, 7), "g": gv},
                                         fetch_list=[mask, dx], scope=Scope())
    scale = 1.0 if impl == "downgrade_in_infer" else 1.0 / (1 - p)
    np.testing.assert_array_equal(d, gv * (m * scale))
    assert 0 < m.sum() < m.size


def test_dropout_grad_matches_finite_differences_with_a_fixed_seed():
    def shapes_only(X, **_):  # check_grad reads only the output shapes from the reference
        return {"Out": np.zeros_like(X), "Mask": np.zeros(X.shape, dtype=np.uint8)}

    check_grad(OpCase("dropout", {"X": rand(3, 4)}, shapes_only,
                      attrs={"dropout_prob": 0.5, "fix_seed": True, "seed": 11,
                             "dropout_implementation": "upscale_in_train"},
                      grad=["X"], grad_outputs=["Out"]))


# --- accuracy: float32 / int32 outputs, no gradient ------------------------------------------


def test_accuracy_counts_a_hit_anywhere_in_the_top_k():
    idx = np.array([[2, 0], [1, 3], [0, 1], [3, 2]], dtype=np.int64)
    label = np.array([[0], [2], [1], [3]], dtype=np.int64)
    case = OpCase("accuracy", {"Out": rand(4, 2), "Indices": idx, "Label": label}, None,
                  outputs={"Accuracy": 1, "Correct": 1, "Total": 1})
    got = run_forward(case)
    hits = sum(label[i, 0] in idx[i] for i in range(4))
    assert got["Accuracy"][0].dtype == np.float32 and got["Accuracy"][0].shape == (1,)
    np.testing.assert_allclose(got["Accuracy"][0], [hits / 4])
    assert got["Correct"][0].dtype == np.int32 and got["Correct"][0].tolist() == [hits]
    assert got["Total"][0].dtype == np.int32 and got["Total"][0].tolist() == [4]
    assert get_op_def("accuracy").grad is None


def test_top_k_then_accuracy():
    x = rand(5, 4)
    label = labels(5, 1, classes=4)
    prog = Program()
    b = prog.global_block()
    xv = b.create_var(name="x", shape=(-1, 4), dtype="float64", is_data=True)
    lv = b.create_var(name="label", shape=(-1, 1), dtype="int64", is_data=True)
    out, idx = b.create_var(name="topv"), b.create_var(name="topi")
    b.append_op("top_k", {"X": xv}, {"Out": out, "Indices": idx}, {"k": 2})
    acc, cor, tot = (b.create_var(name=n) for n in ("acc", "cor", "tot"))
    b.append_op("accuracy", {"Out": out, "Indices": idx, "Label": lv},
                {"Accuracy": acc, "Correct": cor, "Total": tot})
    assert out.shape == (-1, 2) and idx.dtype == "int64" and acc.shape == (1,)
    [a] = spmd.Executor(CPUPlace()).run(prog, feed={"x": x, "label": label}, fetch_list=[acc],
                                        scope=Scope())
    top2 = np.argsort(-x, axis=1)[:, :2]
    np.testing.assert_allclose(a, [np.mean([label[i, 0] in top2[i] for i in range(5)])])


# --- shape inference with an unknown batch, and user errors -----------------------------------


def _infer(op, inputs, outputs, attrs=None):
    """Append `op` over data vars {slot: (shape, dtype)}; returns {out slot: (shape, dtype)}."""
    prog = Program()
    b = prog.global_block()
    ins = {s: b.create_var(name=f"in_{s}", shape=sh, dtype=dt, is_data=True)
           for s, (sh, dt) in inputs.items()}
    outs = {s: b.create_var(name=f"out_{s}") for s in outputs}
    b.append_op(op, ins, outs, attrs or {})
    return {s: (v.shape, v.dtype) for s, v in outs.items()}


F32 = "float32"


def test_infer_conv_pool_with_unknown_batch():
    got = _infer("conv2d", {"Input": ((-1, 1, 8, 8), F32), "Filter": ((16, 1, 3, 3), F32)},
                 ["Output"], {"paddings": [1, 1]})
    assert got["Output"] == ((-1, 16, 8, 8), F32)
    got = _infer("pool2d", {"X": ((-1, 16, 8, 8), F32)}, ["Out"],
                 {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]})
    assert got["Out"] == ((-1, 16, 4, 4), F32)
    got = _infer("pool2d", {"X": ((-1, 16, 7, 7), F32)}, ["Out"],
                 {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "ceil_mode": True})
    assert got["Out"] == ((-1, 16, 4, 4), F32)
    got = _infer("conv2d", {"Input": ((-1, 2, -1, 9), F32), "Filter": ((4, 2, 3, 3), F32)},
                 ["Output"], {"strides": [2, 2], "padding_algorithm": "SAME"})
    assert got["Output"] == ((-1, 4, -1, 5), F32)


def test_infer_losses_norms_with_unknown_batch():
    got = _infer("softmax_with_cross_entropy",
                 {"Logits": ((-1, 10), F32), "Label": ((-1, 1), "int64")}, ["Softmax", "Loss"])
    assert got == {"Softmax": ((-1, 10), F32), "Loss": ((-1, 1), F32)}
    got = _infer("cross_entropy", {"X": ((-1, 10), F32), "Label": ((-1, 1), "int64")}, ["Y"])
    assert got["Y"] == ((-1, 1), F32)
    got = _infer("batch_norm", {"X": ((-1, 4, 8, 8), F32), "Scale": ((4,), F32),
                                "Bias": ((4,), F32), "Mean": ((4,), F32),
                                "Variance": ((4,), F32)},
                 ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"])
    assert got["Y"] == ((-1, 4, 8, 8), F32) and got["SavedVariance"] == ((4,), F32)
    got = _infer("layer_norm", {"X": ((-1, 3, 4), F32), "Scale": ((12,), F32)},
                 ["Y", "Mean", "Variance"])
    assert got["Mean"] == ((-1,), F32) and got["Y"] == ((-1, 3, 4), F32)
    got = _infer("dropout", {"X": ((-1, 5), F32)}, ["Out", "Mask"])
    assert got["Mask"] == ((-1, 5), "uint8")


def _declared_vs_produced(op, inputs, out_slot, attrs, grad_slot):
    """The shape inference declares, the kernel's output shape, and its gradient's shape (or
    None when shape inference rejects the settings)."""
    try:
        declared = _infer(op, {s: (a.shape, F32) for s, a in inputs.items()}, [out_slot],
                          attrs)[out_slot][0]
    except InvalidArgumentError:
        return None
    opdef = get_op_def(op)
    full = opdef.validate_attrs(attrs, op)
    out = run_kernel(op, np, inputs, full, frozenset([out_slot]))[out_slot]
    grads = run_kernel(op + "_grad", np, {**inputs, out_slot + "@GRAD": np.ones_like(out)},
                                     full, frozenset([grad_slot]))
    return declared, out.shape, grads[grad_slot].shape


def test_conv_kernel_shapes_match_shape_inference():
    """kernels/conv.py restates ops/conv.py's padding arithmetic: both must agree."""
    checked = 0
    for h, k, s, pads, algo, d in itertools.product(
            (5, 6, 7), (1, 2, 3), (1, 2, 3), ([0, 0], [1, 2], [2, 0, 1, 1]),
            ("EXPLICIT", "SAME", "VALID"), (1, 2)):
        x, w = np.zeros((1, 1, h, h + 1), np.float32), np.zeros((1, 1, k, 2), np.float32)
        attrs = {"strides": [s, 1], "paddings": pads, "padding_algorithm": algo,
                 "dilations": [d, 1]}
        got = _declared_vs_produced("conv2d", {"Input": x, "Filter": w}, "Output", attrs,
                                    "Input@GRAD")
        if got is not None:
            declared, produced, grad = got
            assert declared == produced and grad == x.shape, (attrs, h, k, got)
            checked += 1
    assert checked > 400  # the rest are settings shape inference rejects


def test_pool_kernel_shapes_match_shape_inference():
    checked = 0
    for h, k, s, pads, algo, ceil, glob in itertools.product(
            (4, 5, 7), (1, 2, 3), (1, 2, 3), ([0, 0], [1, 0], [2, 0, 1, 1]),
            ("EXPLICIT", "SAME", "VALID"), (False, True), (False, True)):
        x = np.zeros((1, 2, h, h + 1), np.float32)
        attrs = {"pooling_type": "avg", "ksize": [k, 2], "strides": [s, 1], "paddings": pads,
                 "padding_algorithm": algo, "ceil_mode": ceil, "global_pooling": glob}
        got = _declared_vs_produced("pool2d", {"X": x}, "Out", attrs, "X@GRAD")
        if got is not None:
            declared, produced, grad = got
            assert declared == produced and grad == x.shape, (attrs, h, got)
            checked += 1
    assert checked > 500


CONV_IN = {"Input": ((2, 3, 8, 8), F32), "Filter": ((4, 3, 3, 3), F32)}
ERRORS = [
    ("conv2d", CONV_IN, ["Output"], {"data_format": "NHWC"}, "data_format"),
    ("conv2d", {"Input": ((2, 3, 8, 8), F32), "Filter": ((4, 2, 3, 3), F32)}, ["Output"], {},
     "3 channels"),
    ("conv2d", CONV_IN, ["Output"], {"paddings": [1, 1, 1]}, "paddings"),
    ("conv2d", CONV_IN, ["Output"], {"padding_algorithm": "FULL"}, "padding_algorithm"),
    ("conv2d", {"Input": ((2, 3, 2, 2), F32), "Filter": ((4, 3, 3, 3), F32)}, ["Output"], {},
     "too small"),
    ("conv2d", {"Input": ((2, 4, 8, 8), F32), "Filter": ((3, 2, 3, 3), F32)}, ["Output"],
     {"groups": 2}, "divisible"),
    ("pool2d", {"X": ((2, 3, 8, 8), F32)}, ["Out"],
     {"pooling_type": "max", "ksize": [2, 2], "adaptive": True}, "adaptive"),
    ("pool2d", {"X": ((2, 3, 8, 8), F32)}, ["Out"],
     {"pooling_type": "min", "ksize": [2, 2]}, "pooling_type"),
    ("pool2d", {"X": ((2, 3, 8, 8), F32)}, ["Out"], {"ksize": [2, 2]}, "pooling_type"),
    ("softmax_with_cross_entropy", {"Logits": ((4, 10), F32), "Label": ((4, 2), "int64")},
     ["Softmax", "Loss"], {}, "Label shape"),
    # a float32 hard label builds, as in fluid 1.8 (tests/unit/test_float_hard_label.py)
    ("softmax_with_cross_entropy", {"Logits": ((4, 10), F32), "Label": ((4, 1), "bool")},
     ["Softmax", "Loss"], {}, "int64"),
    ("cross_entropy", {"X": ((4, 10), F32), "Label": ((4, 9), F32)}, ["Y"],
     {"soft_label": True}, "soft Label"),
    ("batch_norm", {"X": ((2, 3, 4, 4), F32), "Scale": ((4,), F32), "Bias": ((3,), F32),
                    "Mean": ((3,), F32), "Variance": ((3,), F32)},
     ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"], {}, "Scale must have"),
    ("batch_norm", {"X": ((2, 3), F32), "Scale": ((3,), F32), "Bias": ((3,), F32),
                    "Mean": ((3,), F32), "Variance": ((3,), F32)},
     ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"], {"data_layout": "NDHW"},
     "data_layout"),
    ("layer_norm", {"X": ((2, 3, 4), F32), "Scale": ((4,), F32)}, ["Y", "Mean", "Variance"],
     {}, "[12]"),
    ("layer_norm", {"X": ((2, 3), F32)}, ["Y", "Mean", "Variance"], {"begin_norm_axis": 2},
     "begin_norm_axis"),
    ("dropout", {"X": ((2, 3), F32)}, ["Out", "Mask"], {"dropout_prob": 1.5}, "dropout_prob"),
    ("dropout", {"X": ((2, 3), F32)}, ["Out", "Mask"], {"dropout_implementation": "x"},
     "dropout_implementation"),
    ("top_k", {"X": ((2, 3), F32)}, ["Out", "Indices"], {"k": 4}, "larger"),
    ("accuracy", {"Out": ((4, 2), F32), "Indices": ((4, 2), "int64"),
                  "Label": ((4, 2), "int64")}, ["Accuracy", "Correct", "Total"], {}, "[N, 1]"),
    ("softmax", {"X": ((2, 3), F32)}, ["Out"], {"axis": 2}, "out of range"),
]


@pytest.mark.parametrize("op,inputs,outputs,attrs,msg", ERRORS,
                         ids=[f"{e[0]}-{e[4]}" for e in ERRORS])
def test_infer_errors(op, inputs, outputs, attrs, msg):
    with pytest.raises(InvalidArgumentError) as err:
        _infer(op, inputs, outputs, attrs)
    assert msg in str(err.value)


def test_out_of_range_label_is_reported_not_a_numpy_error():
    case = OpCase("softmax_with_cross_entropy",
                  {"Logits": rand(2, 3), "Label": np.array([[0], [3]], dtype=np.int64)}, None,
                  outputs={"Softmax": 1, "Loss": 1})
    with pytest.raises(ExecutionError, match=r"class id 3, expected ids in \[0, 3\)"):
        run_forward(case)
