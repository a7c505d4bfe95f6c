"""Update ops (sgd, momentum, adam) and optimizer helper ops (sign, clip_by_norm) through the op
harness: forward against numpy references in float64 and float32. The update ops have no
gradient, so only their forward is checked; sign's (zero) gradient is checked too."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand, rand_away_from

from spmd.core import Program
from spmd.errors import InvalidArgumentError

LR = np.array([0.05])
ADAM_OUTS = ["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"]


def sgd_ref(Param, Grad, LearningRate):
    return {"ParamOut": Param - LearningRate[0] * Grad}


def momentum_ref(Param, Grad, Velocity, LearningRate, mu, use_nesterov=False):
    v = mu * Velocity + Grad
    lr = LearningRate[0]
    p = Param - (Grad + mu * v) * lr if use_nesterov else Param - lr * v
    return {"ParamOut": p, "VelocityOut": v}


def adam_ref(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, Beta1Tensor=None,
             Beta2Tensor=None, beta1=0.9, beta2=0.999, epsilon=1e-8, **_):
    """fluid 1.8 adam_op.h: epsilon is added unscaled (2.0 scales it by sqrt(1 - beta2_pow))."""
    b1 = Beta1Tensor[0] if Beta1Tensor is not None else beta1
    b2 = Beta2Tensor[0] if Beta2Tensor is not None else beta2
    lr_t = LearningRate[0] * np.sqrt(1 - Beta2Pow[0]) / (1 - Beta1Pow[0])
    m1 = b1 * Moment1 + (1 - b1) * Grad
    m2 = b2 * Moment2 + (1 - b2) * Grad * Grad
    return {"ParamOut": Param - lr_t * m1 / (np.sqrt(m2) + epsilon), "Moment1Out": m1,
            "Moment2Out": m2, "Beta1PowOut": Beta1Pow * b1, "Beta2PowOut": Beta2Pow * b2}


def clip_by_norm_ref(X, max_norm):
    norm = np.sqrt(np.sum(X * X))
    return {"Out": X * (max_norm / norm) if norm > max_norm else X}


def _adam_inputs(**extra):
    ins = {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR,
           "Moment1": rand(3, 4), "Moment2": rand(3, 4, low=0.0, high=0.5),
           "Beta1Pow": np.array([0.9 ** 3]), "Beta2Pow": np.array([0.999 ** 3])}
    ins.update(extra)
    return ins


UPDATE_CASES = [
    OpCase("sgd", {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR}, sgd_ref),
    OpCase("momentum", {"Param": rand(3, 4), "Grad": rand(3, 4), "Velocity": rand(3, 4),
                        "LearningRate": LR},
           momentum_ref, attrs={"mu": 0.9}, name="momentum"),
    OpCase("momentum", {"Param": rand(5), "Grad": rand(5), "Velocity": rand(5),
                        "LearningRate": LR},
           momentum_ref, attrs={"mu": 0.8, "use_nesterov": True}, name="momentum_nesterov"),
    OpCase("adam", _adam_inputs(), adam_ref, name="adam_defaults"),
    OpCase("adam", _adam_inputs(), adam_ref, name="adam_attrs",
           attrs={"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-3, "lazy_mode": True}),
    # the first step: beta powers start at beta1 / beta2 and moments at zero
    OpCase("adam", _adam_inputs(Moment1=np.zeros((3, 4)), Moment2=np.zeros((3, 4)),
                                Beta1Pow=np.array([0.9]), Beta2Pow=np.array([0.999])),
           adam_ref, name="adam_first_step"),
    OpCase("adam", _adam_inputs(Beta1Tensor=np.array([0.7]), Beta2Tensor=np.array([0.95])),
           adam_ref, name="adam_beta_tensors", attrs={"beta1": 0.1, "beta2": 0.2}),
    OpCase("clip_by_norm", {"X": rand(3, 4)}, clip_by_norm_ref, attrs={"max_norm": 0.5},
           name="clip_by_norm_clips"),
    OpCase("clip_by_norm", {"X": rand(3, 4)}, clip_by_norm_ref, attrs={"max_norm": 100.0},
           name="clip_by_norm_keeps"),
]


@pytest.mark.parametrize("case", UPDATE_CASES, ids=str)
def test_update_op_forward(case):
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=case.fp32_rtol, atol=case.fp32_atol)


def test_sign_forward_and_zero_gradient():
    check_op(OpCase("sign", {"X": rand_away_from(3, 4)}, lambda X: {"Out": np.sign(X)}))


def test_clip_by_norm_reference_really_clips():
    x = rand(3, 4)
    assert np.linalg.norm(clip_by_norm_ref(x, 0.5)["Out"]) == pytest.approx(0.5)


def test_update_kernels_leave_inputs_unchanged():
    from spmd.kernels.registry import run_kernel
    from spmd.ops import get_op_def

    ins = _adam_inputs()
    before = {k: v.copy() for k, v in ins.items()}
    attrs = get_op_def("adam").validate_attrs({}, "adam")
    run_kernel("adam", np, ins, attrs, frozenset(get_op_def("adam").output_slots))
    mom = {"Param": rand(3), "Grad": rand(3), "Velocity": rand(3), "LearningRate": LR}
    mom_before = {k: v.copy() for k, v in mom.items()}
    run_kernel("momentum", np, mom, {"mu": 0.9, "use_nesterov": True}, frozenset())
    for k in ins:
        np.testing.assert_array_equal(ins[k], before[k], err_msg=k)
    for k in mom:
        np.testing.assert_array_equal(mom[k], mom_before[k], err_msg=k)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", [c for c in UPDATE_CASES
                                  if c.op in ("sgd", "momentum", "adam")], ids=str)
def test_update_kernels_write_param_out_where_the_plan_offers(case, dtype):
    """Reduce mode over flat sections offers an update op its piece of the step's all-gather
    buffer for ParamOut (KernelContext.out): the kernel writes there, and every output is
    bitwise what it computes without the offer."""
    from spmd.kernels.context import KernelContext
    from spmd.kernels.registry import run_kernel
    from spmd.ops import get_op_def

    opdef = get_op_def(case.op)
    attrs = opdef.validate_attrs(dict(case.attrs), case.op)
    want = frozenset(opdef.output_slots)
    ins = {k: v.astype(dtype) for k, v in case.inputs.items()}
    plain = run_kernel(case.op, np, ins, attrs, want)
    offered = np.full(ins["Param"].shape, np.nan, dtype=dtype)
    ctx = KernelContext()
    ctx.outputs["ParamOut"] = lambda xp: offered
    got = run_kernel(case.op, np, ins, attrs, want, ctx)
    assert got["ParamOut"] is offered
    assert set(got) == set(plain)
    for slot, value in plain.items():
        np.testing.assert_array_equal(got[slot], value, err_msg=slot)
        assert got[slot].dtype == value.dtype, slot
    # an offer that does not fit (another dtype) is declined: a new array, as without it
    ctx.outputs["ParamOut"] = lambda xp: np.zeros(ins["Param"].shape, dtype="float16")
    np.testing.assert_array_equal(run_kernel(case.op, np, ins, attrs, want, ctx)["ParamOut"],
                                  plain["ParamOut"])


def _append(op_type, shapes, attrs=None, outputs=None):
    block = Program().global_block()
    ins = {slot: block.create_var(name=slot, shape=shape, dtype="float32")
           for slot, shape in shapes.items()}
    outs = {slot: [block.create_var(name=f"{slot}_out")] for slot in (outputs or ["ParamOut"])}
    return block.append_op(op_type, ins, outs, attrs or {})


@pytest.mark.parametrize("op_type, shapes, attrs, outputs, message", [
    ("sgd", {"Param": (3, 4), "Grad": (4, 3), "LearningRate": (1,)}, {}, None,
     "Grad Grad[4, 3] must have the shape of Param Param[3, 4]"),
    ("sgd", {"Param": (3,), "Grad": (3,), "LearningRate": (2,)}, {}, None,
     "LearningRate LearningRate must hold one element, got shape [2]"),
    ("momentum", {"Param": (3,), "Grad": (3,), "Velocity": (3,), "LearningRate": (1,)}, {},
     ["ParamOut", "VelocityOut"], "attribute 'mu' is required"),
    ("momentum", {"Param": (3,), "Grad": (3,), "Velocity": (2,), "LearningRate": (1,)},
     {"mu": 0.9}, ["ParamOut", "VelocityOut"], "Velocity Velocity[2] must have the shape"),
    ("adam", {"Param": (3,), "Grad": (3,), "LearningRate": (1,), "Moment1": (3,),
              "Moment2": (3,), "Beta1Pow": (1,), "Beta2Pow": (1,)}, {"beta1": 1.5},
     ADAM_OUTS, "attribute beta1 must be in [0, 1), got 1.5"),
    ("adam", {"Param": (3,), "Grad": (3,), "LearningRate": (1,), "Moment1": (3,),
              "Moment2": (3,), "Beta1Pow": (2,), "Beta2Pow": (1,)}, {}, ADAM_OUTS,
     "Beta1Pow Beta1Pow must hold one element"),
    ("clip_by_norm", {"X": (3,)}, {"max_norm": 0.0}, ["Out"], "max_norm must be > 0"),
])
def test_shape_and_attr_errors(op_type, shapes, attrs, outputs, message):
    with pytest.raises(InvalidArgumentError) as err:
        _append(op_type, shapes, attrs, outputs)
    assert message in str(err.value)


# -- fluid 1.8's adaptive update ops (references from fluid's op docs and kernels; the kernels
#    are also checked against fluid 1.8.5's own ops in test_optimizers_more.py) ---------------

def adagrad_ref(Param, Grad, Moment, LearningRate, epsilon=1e-6):
    m = Moment + Grad ** 2
    return {"ParamOut": Param - LearningRate[0] * Grad / (np.sqrt(m) + epsilon), "MomentOut": m}


def decayed_adagrad_ref(Param, Grad, Moment, LearningRate, decay=0.95, epsilon=1e-6):
    m = decay * Moment + (1 - decay) * Grad ** 2
    return {"ParamOut": Param - LearningRate[0] * Grad / (np.sqrt(m) + epsilon), "MomentOut": m}


def rmsprop_ref(Param, Grad, Moment, MeanSquare, MeanGrad, LearningRate, epsilon, decay,
                momentum, centered):
    ms = decay * MeanSquare + (1 - decay) * Grad ** 2
    mg = decay * MeanGrad + (1 - decay) * Grad if centered else MeanGrad
    denom = ms - mg ** 2 if centered else ms
    mom = momentum * Moment + LearningRate[0] * Grad / np.sqrt(denom + epsilon)
    return {"ParamOut": Param - mom, "MomentOut": mom, "MeanSquareOut": ms, "MeanGradOut": mg}


def adadelta_ref(Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, rho, epsilon):
    """fluid 1.8: the parameter step reads the already-updated AvgSquaredUpdate."""
    asg = rho * AvgSquaredGrad + (1 - rho) * Grad ** 2
    upd = -np.sqrt((AvgSquaredUpdate + epsilon) / (asg + epsilon)) * Grad
    asu = rho * AvgSquaredUpdate + (1 - rho) * upd ** 2
    return {"ParamOut": Param - np.sqrt((asu + epsilon) / (asg + epsilon)) * Grad,
            "AvgSquaredGradOut": asg, "AvgSquaredUpdateOut": asu}


def adamax_ref(Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow, beta1, beta2, epsilon):
    m = beta1 * Moment + (1 - beta1) * Grad
    u = np.maximum(beta2 * InfNorm + epsilon, np.abs(Grad))
    return {"ParamOut": Param - LearningRate[0] / (1 - Beta1Pow[0]) * m / u, "MomentOut": m,
            "InfNormOut": u}


def ftrl_ref(Param, SquaredAccumulator, LinearAccumulator, Grad, LearningRate, l1, l2,
             lr_power):
    lr, n = LearningRate[0], SquaredAccumulator
    n_new = n + Grad ** 2
    z = LinearAccumulator + Grad - (n_new ** -lr_power - n ** -lr_power) / lr * Param
    pre = (l1 * np.sign(z) - z) / (n_new ** -lr_power / lr + 2 * l2)
    return {"ParamOut": np.where(np.abs(z) > l1, pre, 0.0), "SquaredAccumOut": n_new,
            "LinearAccumOut": z}


def lamb_ref(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, weight_decay,
             beta1, beta2, epsilon):
    m1 = beta1 * Moment1 + (1 - beta1) * Grad
    m2 = beta2 * Moment2 + (1 - beta2) * Grad ** 2
    r = m1 / (np.sqrt(m2) + epsilon) + weight_decay * Param
    ratio = np.linalg.norm(Param) / np.linalg.norm(r)
    return {"ParamOut": Param - LearningRate[0] * ratio * r, "Moment1Out": m1,
            "Moment2Out": m2}


def lars_ref(Param, Grad, Velocity, LearningRate, mu, lars_coeff, lars_weight_decay):
    pn, gn = np.linalg.norm(Param), np.linalg.norm(Grad)
    local = LearningRate[0] * lars_coeff * pn / (gn + lars_weight_decay * pn)
    v = mu * Velocity + local * (Grad + lars_weight_decay * Param)
    return {"ParamOut": Param - v, "VelocityOut": v}


def _state(*slots, n=(3, 4)):
    return {s: rand(*n, low=0.1, high=0.6) for s in slots}


ADAPTIVE_CASES = [
    OpCase("adagrad", {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR,
                       **_state("Moment")}, adagrad_ref, attrs={"epsilon": 1e-6}),
    OpCase("decayed_adagrad", {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR,
                               **_state("Moment")}, decayed_adagrad_ref,
           attrs={"decay": 0.9, "epsilon": 1e-6}),
    *(OpCase("rmsprop", {"Param": rand(3, 4), "Grad": rand(3, 4), "Moment": rand(3, 4),
                         "MeanSquare": rand(3, 4, low=0.5, high=1.0),
                         "MeanGrad": rand(3, 4, low=-0.2, high=0.2), "LearningRate": LR},
             rmsprop_ref, name=f"rmsprop_centered_{c}",
             attrs={"epsilon": 1e-6, "decay": 0.9, "momentum": 0.5, "centered": c})
      for c in (False, True)),
    OpCase("adadelta", {"Param": rand(3, 4), "Grad": rand(3, 4),
                        **_state("AvgSquaredGrad", "AvgSquaredUpdate")}, adadelta_ref,
           attrs={"rho": 0.9, "epsilon": 1e-6}),
    OpCase("adamax", {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR,
                      "Moment": rand(3, 4), **_state("InfNorm"),
                      "Beta1Pow": np.array([0.9 ** 2])}, adamax_ref,
           attrs={"beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8}),
    *(OpCase("ftrl", {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR,
                      "LinearAccumulator": rand(3, 4), **_state("SquaredAccumulator")},
             ftrl_ref, name=f"ftrl_power_{p}", attrs={"l1": 0.05, "l2": 0.1, "lr_power": p})
      for p in (-0.5, -0.3)),
    OpCase("lamb", {"Param": rand(3, 4), "Grad": rand(3, 4), "LearningRate": LR,
                    "Moment1": rand(3, 4), **_state("Moment2"),
                    "Beta1Pow": np.array([0.9]), "Beta2Pow": np.array([0.999])}, lamb_ref,
           attrs={"weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}),
    OpCase("lars_momentum", {"Param": rand(3, 4), "Grad": rand(3, 4), "Velocity": rand(3, 4),
                             "LearningRate": LR}, lars_ref,
           attrs={"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}),
]


@pytest.mark.parametrize("case", ADAPTIVE_CASES, ids=str)
def test_adaptive_update_op_forward(case):
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=case.fp32_rtol, atol=case.fp32_atol)


def test_lars_and_lamb_keep_the_rate_when_a_norm_is_zero():
    """fluid: local_lr = lr (lars) and trust ratio 1 (lamb) when a norm is 0."""
    from spmd.kernels.registry import run_kernel

    zero, g = np.zeros((2, 2)), rand(2, 2)
    out = run_kernel("lars_momentum", np, {"Param": zero, "Grad": g, "Velocity": zero,
                                           "LearningRate": LR},
                                      {"mu": 0.9, "lars_coeff": 0.001,
                                       "lars_weight_decay": 0.0005}, frozenset())
    np.testing.assert_allclose(out["VelocityOut"], LR[0] * g)
    out = run_kernel("lamb", np, {"Param": zero, "Grad": g, "LearningRate": LR,
                                  "Moment1": zero, "Moment2": zero, "Beta1Pow": LR,
                                  "Beta2Pow": LR},
                             {"weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999,
                              "epsilon": 1e-6}, frozenset())
    np.testing.assert_allclose(out["ParamOut"], -LR[0] * (0.1 * g) / (np.sqrt(0.001 * g * g)
                                                                       + 1e-6))
