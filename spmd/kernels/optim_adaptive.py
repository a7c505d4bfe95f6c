"""Kernels: fluid 1.8's adaptive update ops and average_accumulates (dense gradients).

Each docstring gives fluid 1.8.5's update in its order of operations; tests/unit/
test_optimizers_more.py checks every kernel against the outputs of fluid 1.8.5's own op on the
same inputs (tests/oracle/data/optim.json). Scalars stay 0-d arrays of the parameter's dtype,
so the same code runs on numpy and on cupy.
"""
from __future__ import annotations

from .registry import kernel
from .sparse_update import SparseRule


def _scalar(a, dtype):
    return a.reshape(()).astype(dtype, copy=False)


def _consts(p, attrs, *names):
    return [p.dtype.type(attrs[n]) for n in names]


@kernel("adagrad", context=True, inplace=("ParamOut", "MomentOut"), sparse=SparseRule(
    rows_only=True, state=(("Param", "ParamOut"), ("Moment", "MomentOut"))))
def adagrad(xp, ins, attrs, want, ctx=None):
    """moment += g*g;  p -= lr * g / (sqrt(moment) + epsilon).

    A SelectedRows gradient updates only its rows (merged), in place where the plan lends the
    arrays: fluid 1.8.5's SparseAdagradFunctor. A row not looked up has g = 0, which leaves
    both unchanged in the dense formula too, so the two agree."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    (eps,) = _consts(p, attrs, "epsilon")
    m = ins["Moment"] + g * g
    return {"ParamOut": p - lr * g / (xp.sqrt(m) + eps), "MomentOut": m}


@kernel("decayed_adagrad", sparse=SparseRule(rows_only=False))
def decayed_adagrad(xp, ins, attrs, want):
    """moment = decay*moment + (1-decay)*g*g;  p -= lr * g / (sqrt(moment) + epsilon).

    Dense semantics: the decay shrinks every row's moment, looked up or not, so a SelectedRows
    gradient is applied as its dense table (fluid 1.8.5's op refuses SelectedRows; this is its
    dense result)."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    decay, eps = _consts(p, attrs, "decay", "epsilon")
    m = decay * ins["Moment"] + (1 - decay) * g * g
    return {"ParamOut": p - lr * g / (xp.sqrt(m) + eps), "MomentOut": m}


@kernel("rmsprop", sparse=SparseRule(rows_only=False))
def rmsprop(xp, ins, attrs, want):
    """ms = decay*ms + (1-decay)*g*g; centered: mg = decay*mg + (1-decay)*g and
    mom = momentum*mom + lr*g / sqrt(ms - mg*mg + epsilon), else
    mom = momentum*mom + lr*g / sqrt(ms + epsilon);  p -= mom.

    Dense semantics: every row's mean square decays and its momentum keeps moving, looked up
    or not, so a SelectedRows gradient is applied as its dense table, as fluid 1.8.5's sparse
    rmsprop functor does (which looks rows up by a binary search in the unsorted, unmerged
    ids and misses some: tests/unit/test_sparse_rows_oracle.py; this gives its dense
    result)."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    decay, eps, mu = _consts(p, attrs, "decay", "epsilon", "momentum")
    ms = decay * ins["MeanSquare"] + (1 - decay) * g * g
    out = {"MeanSquareOut": ms}
    if attrs["centered"]:
        mg = decay * ins["MeanGrad"] + (1 - decay) * g
        mom = mu * ins["Moment"] + lr * g / xp.sqrt(ms - mg * mg + eps)
        out["MeanGradOut"] = mg
    else:
        mom = mu * ins["Moment"] + lr * g / xp.sqrt(ms + eps)
        if "MeanGradOut" in want and "MeanGrad" in ins:
            out["MeanGradOut"] = ins["MeanGrad"].copy()
    out.update(ParamOut=p - mom, MomentOut=mom)
    return out


@kernel("adadelta")
def adadelta(xp, ins, attrs, want):
    """asg = rho*asg + (1-rho)*g*g;  update = -sqrt((asu + eps) / (asg + eps)) * g;
    asu = rho*asu + (1-rho)*update*update;  p -= sqrt((asu + eps) / (asg + eps)) * g.
    The parameter step uses the *new* asu: fluid 1.8's kernel keeps `update` as a lazy Eigen
    expression over the AvgSquaredUpdate buffer, which it overwrites in place before computing
    ParamOut (checked against fluid 1.8.5's op). There is no learning rate in fluid 1.8."""
    p, g = ins["Param"], ins["Grad"]
    rho, eps = _consts(p, attrs, "rho", "epsilon")
    asg = rho * ins["AvgSquaredGrad"] + (1 - rho) * g * g
    update = -xp.sqrt((ins["AvgSquaredUpdate"] + eps) / (asg + eps)) * g
    asu = rho * ins["AvgSquaredUpdate"] + (1 - rho) * update * update
    p_out = p - xp.sqrt((asu + eps) / (asg + eps)) * g
    return {"ParamOut": p_out, "AvgSquaredGradOut": asg, "AvgSquaredUpdateOut": asu}


@kernel("adamax")
def adamax(xp, ins, attrs, want):
    """m = beta1*m + (1-beta1)*g;  u = max(beta2*u + epsilon, |g|);
    p -= lr / (1 - beta1_pow) * m / u  (beta1_pow is advanced by a separate scale op)."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    b1p = _scalar(ins["Beta1Pow"], p.dtype)
    beta1, beta2, eps = _consts(p, attrs, "beta1", "beta2", "epsilon")
    m = beta1 * ins["Moment"] + (1 - beta1) * g
    u = xp.maximum(beta2 * ins["InfNorm"] + eps, xp.abs(g))
    lr_t = lr / (1 - b1p)
    return {"ParamOut": p - lr_t * (m / u), "MomentOut": m, "InfNormOut": u}


@kernel("ftrl", context=True,
        inplace=("ParamOut", "SquaredAccumOut", "LinearAccumOut"), sparse=SparseRule(
            rows_only=True, state=(("Param", "ParamOut"),
                                   ("SquaredAccumulator", "SquaredAccumOut"),
                                   ("LinearAccumulator", "LinearAccumOut"))))
def ftrl(xp, ins, attrs, want, ctx=None):
    """n' = n + g*g;  z' = z + g - (n'^-power - n^-power) / lr * p  (sqrt when power = -0.5);
    p = (l1*sign(z') - z') / (n'^-power / lr + 2*l2) where |z'| > l1, else 0.

    A SelectedRows gradient updates only its rows (merged), in place where the plan lends the
    arrays (fluid 1.8.5's ftrl op refuses SelectedRows; its sparse FTRL in the pserver's
    large-scale tables updates only the rows pushed)."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    l1, l2, power = _consts(p, attrs, "l1", "l2", "lr_power")
    sq = ins["SquaredAccumulator"]
    new_sq = sq + g * g
    if attrs["lr_power"] == -0.5:
        new_root, old_root = xp.sqrt(new_sq), xp.sqrt(sq)
    else:
        new_root, old_root = new_sq ** -power, sq ** -power
    lin = ins["LinearAccumulator"] + g - (new_root - old_root) / lr * p
    pre_shrink = (l1 * xp.sign(lin) - lin) / (new_root / lr + 2 * l2)
    p_out = xp.where(xp.abs(lin) > l1, pre_shrink, p.dtype.type(0))
    return {"ParamOut": p_out, "SquaredAccumOut": new_sq, "LinearAccumOut": lin}


def _ratio(xp, num, den):
    """num/den where both norms are positive, else 1 (fluid's lamb and lars guard)."""
    ok = (num > 0) & (den > 0)
    return xp.where(ok, num / xp.where(ok, den, 1), 1).astype(num.dtype)


@kernel("lamb")
def lamb(xp, ins, attrs, want):
    """m1 = beta1*m1 + (1-beta1)*g;  m2 = beta2*m2 + (1-beta2)*g*g;
    r = m1 / (sqrt(m2) + eps) + weight_decay*p;  p -= lr * (||p|| / ||r|| if both > 0 else 1) * r.
    fluid 1.8's lamb kernel has no bias correction: Beta1Pow/Beta2Pow are inputs it does not
    use (checked against fluid 1.8.5's op); they are kept as slots for fluid's programs."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    beta1, beta2, eps, wd = _consts(p, attrs, "beta1", "beta2", "epsilon", "weight_decay")
    m1 = beta1 * ins["Moment1"] + (1 - beta1) * g
    m2 = beta2 * ins["Moment2"] + (1 - beta2) * g * g
    r = m1 / (xp.sqrt(m2) + eps) + wd * p
    ratio = _ratio(xp, xp.sqrt(xp.sum(p * p)), xp.sqrt(xp.sum(r * r)))
    return {"ParamOut": p - lr * ratio * r, "Moment1Out": m1, "Moment2Out": m2}


@kernel("lars_momentum")
def lars_momentum(xp, ins, attrs, want):
    """local_lr = lr * lars_coeff * ||p|| / (||g|| + lars_weight_decay*||p||) when both norms
    are positive, else lr;  v = mu*v + local_lr*(g + lars_weight_decay*p);  p -= v."""
    p, g = ins["Param"], ins["Grad"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    mu, coeff, wd = _consts(p, attrs, "mu", "lars_coeff", "lars_weight_decay")
    p_norm, g_norm = xp.sqrt(xp.sum(p * p)), xp.sqrt(xp.sum(g * g))
    ok = (p_norm > 0) & (g_norm > 0)
    local_lr = xp.where(ok, lr * coeff * p_norm / xp.where(ok, g_norm + wd * p_norm, 1), lr)
    v = mu * ins["Velocity"] + local_lr.astype(p.dtype) * (g + wd * p)
    return {"ParamOut": p - v, "VelocityOut": v}


_MAX_NUM_ACCUMULATES = 16384  # fluid's kMaxNumAccumulates: sum_1 moves into sum_2 this often


@kernel("average_accumulates")
def average_accumulates(xp, ins, attrs, want):
    """fluid 1.8 average_accumulates_op.h, whose outputs alias its inputs (ModelAverage binds
    them in place), so each step sees the sums as already updated:
        sum_1 += param
        every 16384th update: sum_2 += sum_1; sum_1 = 0
        when num_accumulates >= min_average_window and
             num_accumulates >= min(max_average_window, int(num_updates * average_window)):
            sum_3 = sum_1 + sum_2; sum_1 = sum_2 = 0
            old_num_accumulates = num_accumulates; num_accumulates = 0
    (counts after this step's increment; checked against fluid 1.8.5's op)."""
    param, s1, s2, s3 = ins["param"], ins["in_sum_1"], ins["in_sum_2"], ins["in_sum_3"]
    counters = [ins[k] for k in ("in_num_accumulates", "in_old_num_accumulates",
                                 "in_num_updates")]
    n_acc, old_acc, n_upd = (int(c.reshape(-1)[0]) for c in counters)  # host control flow
    n_upd += 1
    n_acc += 1
    out1, out2, out3 = s1 + param, s2.copy(), s3.copy()
    if n_upd % _MAX_NUM_ACCUMULATES == 0:
        out2 = out2 + out1
        out1 = xp.zeros_like(s1)
    window = min(attrs["max_average_window"], int(n_upd * attrs["average_window"]))
    if n_acc >= attrs["min_average_window"] and n_acc >= window:
        out3 = out1 + out2
        out1, out2 = xp.zeros_like(s1), xp.zeros_like(s2)
        old_acc, n_acc = n_acc, 0
    dtype = counters[0].dtype
    return {"out_sum_1": out1, "out_sum_2": out2, "out_sum_3": out3,
            "out_num_accumulates": xp.full(counters[0].shape, n_acc, dtype=dtype),
            "out_old_num_accumulates": xp.full(counters[1].shape, old_acc, dtype=dtype),
            "out_num_updates": xp.full(counters[2].shape, n_upd, dtype=dtype)}
