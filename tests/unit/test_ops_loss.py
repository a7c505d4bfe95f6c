"""fluid 1.8's loss ops through the op harness (forward against numpy loops over each op's
definition, gradients against central finite differences), and every loss layer against
stored outputs of real fluid (PaddlePaddle 1.8.5, tests/oracle/make_loss.py)."""
from __future__ import annotations

import numpy as np
import pytest
from loss_oracle import ORACLE, assert_matches_fluid
from op_harness import RNG, OpCase, check_op, rand, rand_away_from

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError


def ids(*shape, classes, dtype=np.int64):
    return RNG.integers(0, classes, size=shape).astype(dtype)


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


# --- references -----------------------------------------------------------------------------

def bpr_ref(X, Label, **_):
    y = np.zeros((X.shape[0], 1))
    for i in range(X.shape[0]):
        lab = Label[i, 0]
        y[i] = sum(np.log(1 + np.exp(X[i, j] - X[i, lab]))
                   for j in range(X.shape[1]) if j != lab) / (X.shape[1] - 1)
    return {"Y": y}


def center_ref(X, Label, Centers, CenterUpdateRate, cluster_num=0, need_update=False, **_):
    diff = X - Centers[Label[:, 0]]
    out = Centers.copy()
    if need_update:
        for c in range(Centers.shape[0]):
            mine = Label[:, 0] == c
            out[c] += CenterUpdateRate[0] * diff[mine].sum(0) / (1 + mine.sum())
    return {"CentersOut": out, "SampleCenterDiff": diff,
            "Loss": 0.5 * (diff ** 2).sum(1, keepdims=True)}


def huber_ref(X, Y, delta=1.0, **_):
    r = Y - X
    out = np.array([0.5 * v * v if abs(v) <= delta else delta * (abs(v) - 0.5 * delta)
                    for v in r.ravel()]).reshape(r.shape)
    return {"Residual": r, "Out": out}


def kldiv_ref(X, Target, reduction="mean", **_):
    loss = np.where(Target > 0, Target * (np.log(np.maximum(Target, 1e-300)) - X), 0)
    if reduction == "none":
        return {"Loss": loss}
    div = {"sum": 1, "mean": loss.size, "batchmean": X.shape[0]}[reduction]
    return {"Loss": np.array([loss.sum() / div])}


def margin_rank_ref(X1, X2, Label, margin=0.0, **_):
    out = np.maximum(0, -Label * (X1 - X2) + margin)
    return {"Activated": (out > 0).astype(float), "Out": out}


def rank_ref(Label, Left, Right, **_):
    o = Left - Right
    return {"Out": np.log(1 + np.exp(o)) - Label * o}


def sce_ref(X, Label, normalize=False, ignore_index=-100, **_):
    loss = np.maximum(X, 0) - X * Label + np.log(1 + np.exp(-np.abs(X)))
    loss = np.where(Label.astype(np.int64) != ignore_index, loss, 0)
    # fluid's normalizer counts the labels not exactly ignore_index (-1.5 counts for -1)
    return {"Out": loss / max((Label != ignore_index).sum(), 1e-6) if normalize else loss}


def teacher_ref(X, Label, **_):
    y = np.zeros_like(X)
    for i, (x, lab) in enumerate(zip(X.ravel(), Label.ravel())):
        def ce(z, x=x):
            return max(x, 0) - x * z + np.log(1 + np.exp(-abs(x)))
        if lab < -1:
            y.flat[i] = ce(0)
        elif lab < 0:
            y.flat[i] = ce(1)
        elif lab < 1:
            y.flat[i] = ce(0) + ce(lab)
        else:
            y.flat[i] = ce(1) + ce(lab - 1)
    return {"Y": y}


def log_loss_ref(Predicted, Labels, epsilon=1e-4, **_):
    p, y = Predicted, Labels
    return {"Loss": -y * np.log(p + epsilon) - (1 - y) * np.log(1 - p + epsilon)}


def smooth_l1_ref(X, Y, InsideWeight=None, OutsideWeight=None, sigma=3.0, **_):
    both = InsideWeight is not None and OutsideWeight is not None
    d = (X - Y) * (InsideWeight if both else 1)
    s2 = sigma * sigma
    e = np.where(np.abs(d) < 1 / s2, 0.5 * d * d * s2, np.abs(d) - 0.5 / s2)
    e = e * (OutsideWeight if both else 1)
    return {"Diff": d, "Out": e.reshape(X.shape[0], -1).sum(1, keepdims=True)}


def label_smooth_ref(X, PriorDist=None, epsilon=0.0, **_):
    mu = 1.0 / X.shape[-1] if PriorDist is None else PriorDist.reshape(-1)
    return {"Out": (1 - epsilon) * X + epsilon * mu}


def focal_ref(X, Label, FgNum, gamma=2.0, alpha=0.25, **_):
    out = np.zeros_like(X)
    fg = max(FgNum[0], 1)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            p, g = sig(X[i, j]), Label[i, 0]
            if g == j + 1:
                out[i, j] = -alpha * (1 - p) ** gamma * np.log(p) / fg
            elif g != -1:
                out[i, j] = -(1 - alpha) * p ** gamma * np.log(1 - p) / fg
    return {"Out": out}


# --- cases ----------------------------------------------------------------------------------

SCE_LAB = rand(3, 4, low=0, high=1)
SCE_LAB[0, 1] = SCE_LAB[2, 3] = -1.0  # ignored with ignore_index=-1
SCE_LAB[1, 2] = -1.5  # ignored too (int(-1.5) == -1), yet counted by normalize
TS_LAB = np.array([[-2.0], [-1.0], [0.3], [1.6], [-1.5], [0.0]])
FOCAL_LAB = np.array([[0], [2], [-1], [3]], dtype=np.int32)
FG = np.array([2], dtype=np.int32)

CASES = [
    OpCase("bpr_loss", {"X": rand(4, 5), "Label": ids(4, 1, classes=5)}, bpr_ref),
    OpCase("center_loss", {"X": rand(5, 3), "Label": np.array([[0], [2], [0], [1], [0]]),
                           "Centers": rand(4, 3), "CenterUpdateRate": np.array([0.5])},
           center_ref, attrs={"cluster_num": 4, "need_update": True}, grad=["X"],
           grad_outputs=["Loss"]),
    OpCase("huber_loss", {"X": rand(6, 1) * 3, "Y": rand_away_from(6, 1, points=(-1, 1))},
           huber_ref, attrs={"delta": 0.7}),
    OpCase("kldiv_loss", {"X": rand(3, 4), "Target": rand(3, 4, low=-0.2, high=1)},
           kldiv_ref, attrs={"reduction": "none"}, name="kldiv_none"),
    *[OpCase("kldiv_loss", {"X": rand(3, 4), "Target": rand(3, 4, low=-0.2, high=1)},
             kldiv_ref, attrs={"reduction": r}, name=f"kldiv_{r}")
      for r in ("mean", "sum", "batchmean")],
    OpCase("margin_rank_loss", {"X1": rand(5, 1), "X2": rand(5, 1),
                                "Label": np.array([[1.0], [-1], [1], [-1], [1]])},
           margin_rank_ref, attrs={"margin": 0.1}),
    OpCase("rank_loss", {"Label": np.array([[1.0], [0], [0.5], [1]]), "Left": rand(4, 1) * 3,
                         "Right": rand(4, 1)}, rank_ref),
    OpCase("sigmoid_cross_entropy_with_logits", {"X": rand(3, 4) * 4, "Label": SCE_LAB},
           sce_ref, attrs={"ignore_index": -1}, name="sce_ignore"),
    OpCase("sigmoid_cross_entropy_with_logits", {"X": rand(3, 4) * 4, "Label": SCE_LAB},
           sce_ref, attrs={"ignore_index": -1, "normalize": True}, name="sce_normalize"),
    OpCase("teacher_student_sigmoid_loss", {"X": rand(6, 1) * 3, "Label": TS_LAB}, teacher_ref),
    OpCase("log_loss", {"Predicted": rand(5, 1, low=0.05, high=0.95),
                        "Labels": rand(5, 1, low=0, high=1)}, log_loss_ref,
           attrs={"epsilon": 1e-4}),
    OpCase("smooth_l1_loss", {"X": rand(3, 4), "Y": rand(3, 4)}, smooth_l1_ref,
           attrs={"sigma": 1.0}, name="smooth_l1"),
    OpCase("smooth_l1_loss", {"X": rand(3, 2, 2), "Y": rand(3, 2, 2),
                              "InsideWeight": rand(3, 2, 2, low=0.5, high=2),
                              "OutsideWeight": rand(3, 2, 2, low=0.5, high=2)},
           smooth_l1_ref, attrs={"sigma": 2.0}, name="smooth_l1_weights"),
    OpCase("label_smooth", {"X": rand(3, 4, low=0, high=1)}, label_smooth_ref,
           attrs={"epsilon": 0.1}),
    OpCase("label_smooth", {"X": rand(3, 4, low=0, high=1),
                            "PriorDist": rand(1, 4, low=0, high=0.5)},
           label_smooth_ref, attrs={"epsilon": 0.2}, name="label_smooth_prior"),
    OpCase("sigmoid_focal_loss", {"X": rand(4, 3) * 3, "Label": FOCAL_LAB, "FgNum": FG},
           focal_ref, attrs={"gamma": 2.0, "alpha": 0.25}),
    OpCase("sigmoid_focal_loss", {"X": rand(4, 3) * 3, "Label": FOCAL_LAB, "FgNum": FG},
           focal_ref, attrs={"gamma": 0.5, "alpha": 0.6}, name="focal_gamma_half"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


# --- layers against real fluid (tests/oracle/make_loss.py) -----------------------------------

LAYER_CASES = ["bpr_loss", "center_loss", "dice_loss", "huber_loss", "kldiv_batchmean",
               "kldiv_mean", "kldiv_none", "kldiv_sum", "label_smooth", "label_smooth_prior",
               "log_loss", "margin_rank_loss", "mse_loss", "npair_loss", "rank_loss", "sce",
               "sce_ignore_normalize", "sigmoid_focal_loss", "sigmoid_focal_loss_args",
               "smooth_l1", "smooth_l1_weights", "teacher_student", "teacher_student_bounds",
               "hsigmoid", "hsigmoid_no_bias", "hsigmoid_custom", "nce_custom_dist",
               "nce_sample_weight", "sampled_softmax", "sampled_softmax_keep_hits",
               "sce_ignore_fraction", "sce_ignore_fraction_normalize", "square_error_cost",
               "huber_kinks", "log_loss_eps", "dice_loss_eps", "margin_rank_default",
               "npair_loss_default", "cross_entropy_soft_grad", "cross_entropy_soft_ignore",
               "teacher_student_label_edges", "center_loss_frozen"]


@pytest.mark.parametrize("name", LAYER_CASES)
def test_layer_matches_fluid(name):
    """Values and the gradients of the inputs; center_loss runs twice, its centers moving."""
    assert_matches_fluid(name)


def test_smooth_l1_needs_both_weights_or_neither():
    """fluid 1.8.5 refuses an inside weight alone and drops an outside weight alone (its
    stored loss equals the unweighted one); spmd refuses both, naming the way out."""
    (dropped,), = ORACLE["smooth_l1_outside_only"]
    np.testing.assert_array_equal(dropped, ORACLE["smooth_l1"][0][0])
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        with pytest.raises(InvalidArgumentError, match="both InsideWeight and OutsideWeight"):
            fluid.layers.smooth_l1(x, x, inside_weight=x)
        with pytest.raises(InvalidArgumentError, match="pass inside weights of ones"):
            fluid.layers.smooth_l1(x, x, outside_weight=x)


def test_loss_layer_argument_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        y = fluid.data("y", [2, 1], "float32")
        with pytest.raises(InvalidArgumentError, match="epsilon must be in"):
            fluid.layers.label_smooth(x, epsilon=1.5)
        with pytest.raises(InvalidArgumentError, match="reduction must be one of"):
            fluid.layers.kldiv_loss(x, x, reduction="avg")
        with pytest.raises(InvalidArgumentError, match="int64"):
            fluid.layers.bpr_loss(x, y)
        with pytest.raises(InvalidArgumentError, match="alpha must be a float"):
            fluid.layers.center_loss(x, fluid.data("l", [2, 1], "int64"), 3, "0.1", None)


# --- hierarchical_sigmoid, nce, sample_logits ---------------------------------------------------

def hsigmoid_ref(X, W, Label, PathTable=None, PathCode=None, Bias=None, num_classes=2, **_):
    if PathTable is None:
        width = (num_classes - 1).bit_length()
        paths = []
        for c in Label[:, 0] + num_classes:
            c = int(c)
            paths.append([((c >> (j + 1)) - 1, (c >> j) & 1) for j in range(c.bit_length() - 1)])
    else:
        width = PathTable.shape[1]
        paths = [[(t, b) for t, b in zip(*row) if t >= 0] for row in zip(PathTable, PathCode)]
    out, pre = np.zeros((X.shape[0], 1)), np.zeros((X.shape[0], width))
    for i, path in enumerate(paths):
        for j, (node, bit) in enumerate(path):
            z = np.clip(X[i] @ W[node] + (Bias[node, 0] if Bias is not None else 0), -40, 40)
            pre[i, j] = z
            out[i] -= bit * z
    softplus = np.log1p(np.exp(pre))
    return {"Out": out + softplus.sum(1, keepdims=True), "PreOut": softplus}


def nce_ref(Input, Label, Weight, Bias=None, SampleWeight=None, num_neg_samples=10,
            num_total_classes=0, custom_neg_classes=(), **_):
    n_true = Label.shape[1]
    samples = np.concatenate([Label, np.tile(custom_neg_classes, (Label.shape[0], 1))], 1)
    b = num_neg_samples / num_total_classes  # uniform sampler
    cost = np.zeros((Input.shape[0], 1))
    logits = np.zeros(samples.shape)
    for i in range(samples.shape[0]):
        for j, c in enumerate(samples[i]):
            o = sig(Input[i] @ Weight[c] + (Bias[c, 0] if Bias is not None else 0))
            logits[i, j] = o
            cost[i] -= np.log((o if j < n_true else b) / (o + b))
    if SampleWeight is not None:
        cost = cost * SampleWeight
    return {"Cost": cost, "SampleLogits": logits, "SampleLabels": samples}


def sample_logits_ref(Logits, Labels, CustomizedSamples, CustomizedProbabilities,
                      remove_accidental_hits=True, **_):
    nt = Labels.shape[1]
    out = np.take_along_axis(Logits, CustomizedSamples, 1) - np.log(CustomizedProbabilities)
    if remove_accidental_hits:
        for i in range(out.shape[0]):
            for j in range(nt, out.shape[1]):
                if CustomizedSamples[i, j] in Labels[i]:
                    out[i, j] -= 1e20
    return {"Samples": CustomizedSamples, "Probabilities": CustomizedProbabilities,
            "SampledLogits": out, "SampledLabels": np.tile(np.arange(nt), (out.shape[0], 1))}


TABLE = np.array([[0, 1, 3], [0, 2, -1], [0, 1, 4]])
CODE = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]])
SAMPLED = dict(CustomizedSamples=np.array([[1, 3, 0], [3, 4, 2]]),
               CustomizedProbabilities=rand(2, 3, low=0.1, high=0.9))
SAMPLED_CASES = [
    OpCase("hierarchical_sigmoid", {"X": rand(4, 3), "W": rand(5, 3), "Bias": rand(5, 1),
                                    "Label": np.array([[0], [5], [3], [2]])},
           hsigmoid_ref, attrs={"num_classes": 6}, grad_outputs=["Out"], name="hsigmoid"),
    OpCase("hierarchical_sigmoid", {"X": rand(3, 3), "W": rand(6, 3),
                                    "Label": np.array([[0], [1], [2]]), "PathTable": TABLE,
                                    "PathCode": CODE},
           hsigmoid_ref, attrs={"num_classes": 6, "is_sparse": True}, grad_outputs=["Out"],
           name="hsigmoid_custom"),
    OpCase("nce", {"Input": rand(3, 4), "Label": np.array([[1], [4], [0]]), "Weight": rand(6, 4),
                   "Bias": rand(6, 1), "SampleWeight": rand(3, 1, low=0.5, high=1.5)},
           nce_ref, attrs={"num_total_classes": 6, "num_neg_samples": 2,
                           "custom_neg_classes": [3, 5]}, grad_outputs=["Cost"]),
    OpCase("sample_logits", {"Logits": rand(2, 5), "Labels": np.array([[1], [3]]), **SAMPLED},
           sample_logits_ref, attrs={"use_customized_samples": True, "num_samples": 2},
           grad_outputs=["SampledLogits"]),
]


@pytest.mark.parametrize("case", SAMPLED_CASES, ids=str)
def test_sampled_op(case):
    check_op(case)


def _nce_samples(sampler, custom_dist=None, seed=0, k=5, neg=4000):
    """The negatives an nce layer draws on one run, and its cost."""
    prog, startup = fluid.Program(), fluid.Program()
    prog.random_seed = startup.random_seed = 7
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [2, 3], "float32")
        y = fluid.data("y", [2, 1], "int64")
        cost = fluid.layers.nce(x, y, k, num_neg_samples=neg, sampler=sampler,
                                custom_dist=custom_dist, seed=seed)
        labels = [op for op in prog.global_block().ops if op.type == "nce"][0]
        labels = labels.output("SampleLabels")[0]
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.ones((2, 3), "float32"), "y": np.array([[0], [1]], "int64")}
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        got, c = exe.run(prog, feed=feed, fetch_list=[labels, cost])
    return np.asarray(got)[:, 1:], np.asarray(c)


@pytest.mark.parametrize("sampler,dist", [
    ("uniform", [0.2] * 5),
    ("custom_dist", [0.1, 0.4, 0.0, 0.3, 0.2]),
    ("log_uniform", [np.log((v + 2) / (v + 1)) / np.log(5) for v in range(4)] + [0.0]),
])
def test_nce_sampler_statistics(sampler, dist):
    """The negatives follow the sampler's distribution (log_uniform, as in fluid, over all
    classes but the last); 8000 draws put each frequency within 0.025 of its probability."""
    neg, cost = _nce_samples(sampler, dist if sampler == "custom_dist" else None)
    freq = np.bincount(neg.ravel(), minlength=5) / neg.size
    np.testing.assert_allclose(freq, dist, atol=0.025)
    assert np.isfinite(cost).all()


def test_nce_seed_fixes_the_negatives():
    a, _ = _nce_samples("uniform", seed=3, neg=20)
    b, _ = _nce_samples("uniform", seed=3, neg=20)
    c, _ = _nce_samples("uniform", seed=4, neg=20)
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_sampled_softmax_draws_distinct_shared_negatives():
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [3, 50], "float32")
        y = fluid.data("y", [3, 1], "int64")
        loss = fluid.layers.sampled_softmax_with_cross_entropy(x, y, num_samples=10, seed=9)
        op = [o for o in prog.global_block().ops if o.type == "sample_logits"][0]
        samples, probs = op.output("Samples")[0], op.output("Probabilities")[0]
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.zeros((3, 50), "float32"), "y": np.array([[4], [7], [0]], "int64")}
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        s, p, out = exe.run(prog, feed=feed, fetch_list=[samples, probs, loss])
    np.testing.assert_array_equal(s[:, 0], [4, 7, 0])
    assert all(len(set(row[1:])) == 10 for row in s) and (s[:, 1:] == s[0, 1:]).all()
    assert ((p > 0) & (p <= 1)).all() and np.isfinite(out).all()


def test_hsigmoid_argument_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        y = fluid.data("y", [2, 1], "int64")
        with pytest.raises(InvalidArgumentError, match="num_classes must be >= 2"):
            fluid.layers.hsigmoid(x, y, 1)
        with pytest.raises(InvalidArgumentError, match="is_custom=True"):
            fluid.layers.hsigmoid(x, y, 4, path_table=y)
        with pytest.raises(InvalidArgumentError, match="needs path_table"):
            fluid.layers.hsigmoid(x, y, 4, is_custom=True)
        with pytest.raises(InvalidArgumentError, match="custom_dist"):
            fluid.layers.nce(x, y, 4, sampler="custom_dist", custom_dist=[0.5, 0.5])
