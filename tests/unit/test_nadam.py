"""paddle.optimizer.NAdam and its nadam op: three training steps against PaddlePaddle 3.3.1's
stored parameters and accumulators (tests/oracle/make_nadam.py), the raw kernel against 3.3.1's
op and against a float64 numpy reference, and N places equal to one place in both data-parallel
modes."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, rand
from oracle_io import load

import spmd as paddle
import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.kernels.registry import run_kernel
from spmd.ops import get_op_def

ORACLE = load("nadam")
TRAIN_CASES = sorted(k.split("/", 1)[1] for k in ORACLE if k.startswith("train/"))
OP_CASES = sorted(k.split("/", 1)[1] for k in ORACLE if k.startswith("op/"))
PARAMS = ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")
ACCS = ("momentum_decay_pow", "beta2_pow", "mu_product", "moment1", "moment2")
OUTS = {"param_out": "param", "momentum_decay_pow_out": "momentum_decay_pow",
        "beta2_pow_out": "beta2_pow", "mu_product_out": "mu_product", "moment1_out": "moment1",
        "moment2_out": "moment2"}


def nadam_ref(param, grad, learning_rate, momentum_decay_pow, beta2_pow, mu_product, moment1,
              moment2, beta1=0.9, beta2=0.999, epsilon=1e-8, momentum_decay=0.004, **_):
    """The update as Paddle's NAdam docstring writes it (Dozat's NAdam with mu_t's schedule)."""
    decay_pow = momentum_decay_pow * 0.96
    mu_t = beta1 * (1 - 0.5 * decay_pow ** momentum_decay)
    mu_next = beta1 * (1 - 0.5 * (decay_pow * 0.96) ** momentum_decay)
    prod = mu_product * mu_t
    m1 = beta1 * moment1 + (1 - beta1) * grad
    m2 = beta2 * moment2 + (1 - beta2) * grad ** 2
    m1_hat = mu_next * m1 / (1 - prod * mu_next) + (1 - mu_t) * grad / (1 - prod)
    v_hat = m2 / (1 - beta2_pow * beta2)
    return {"param_out": param - learning_rate[0] * m1_hat / (np.sqrt(v_hat) + epsilon),
            "momentum_decay_pow_out": decay_pow, "beta2_pow_out": beta2_pow * beta2,
            "mu_product_out": prod, "moment1_out": m1, "moment2_out": m2}


def _op_inputs(shape, step, beta1=0.9, beta2=0.999, psi=0.004):
    """The state after `step` updates: the powers and mu_product filled per element."""
    full = np.ones(shape)
    mus = [beta1 * (1 - 0.5 * 0.96 ** (t * psi)) for t in range(1, step + 1)]
    return {"param": rand(*shape), "grad": rand(*shape), "learning_rate": np.array([0.05]),
            "momentum_decay_pow": full * 0.96 ** step, "beta2_pow": full * beta2 ** step,
            "mu_product": full * np.prod(mus), "moment1": rand(*shape, low=-0.5, high=0.5),
            "moment2": rand(*shape, low=0.0, high=0.5)}


OP_HARNESS_CASES = [
    OpCase("nadam", _op_inputs((3, 4), 0), nadam_ref, name="nadam_first_step"),
    OpCase("nadam", _op_inputs((3, 4), 6), nadam_ref, name="nadam_step7"),
    OpCase("nadam", _op_inputs((5,), 2, 0.8, 0.99, 0.05), nadam_ref, name="nadam_attrs",
           attrs={"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-3, "momentum_decay": 0.05}),
]


@pytest.mark.parametrize("case", OP_HARNESS_CASES, ids=str)
def test_op_forward_equals_the_numpy_reference(case):
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=case.fp32_rtol, atol=case.fp32_atol)


@pytest.mark.parametrize("name", OP_CASES)
def test_kernel_equals_paddle_331_op_and_leaves_its_inputs_alone(name):
    case = ORACLE["op/" + name]
    attrs = get_op_def("nadam").validate_attrs(dict(case["attrs"]), "nadam")
    inputs = {k: v.copy() for k, v in case["inputs"].items()}
    got = run_kernel("nadam", np, inputs, attrs, frozenset(case["outputs"]))
    assert set(got) == set(case["outputs"])
    for slot, want in case["outputs"].items():
        assert got[slot].dtype == want.dtype and got[slot].shape == want.shape, slot
        np.testing.assert_allclose(got[slot], want, rtol=2e-6, atol=1e-7, err_msg=slot)
    for slot, value in case["inputs"].items():
        np.testing.assert_array_equal(inputs[slot], value, err_msg=f"input {slot} was written")
        assert not any(np.shares_memory(inputs[slot], out) for out in got.values()), slot


def test_slots_and_attributes_are_paddle_331s():
    case = ORACLE["train/" + TRAIN_CASES[0]]
    opdef = get_op_def("nadam")
    # master_param is 3.3.1's multi-precision input: spmd keeps no master weights
    assert sorted(s.name for s in opdef.inputs) == sorted(
        s for s in case["slots"]["inputs"] if s != "master_param")
    assert sorted(s.name for s in opdef.outputs) == case["slots"]["outputs"]
    main, _, _ = _build(dict(case["args"]))
    (op,) = [op for op in main.global_block().ops if op.type == "nadam"][:1]
    for attr, want in case["attrs"].items():
        assert op.attr(attr) == pytest.approx(want, rel=1e-7), attr


def _build(args):
    args = dict(args)
    if "grad_clip" in args:  # the oracle's per-parameter norm bound (see make_nadam.py)
        args["grad_clip"] = paddle.nn.ClipGradByNorm(args["grad_clip"])
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 2], "float32")
        attr = {n: fluid.ParamAttr(name=n) for n in PARAMS}
        h = fluid.layers.fc(x, 5, act="tanh", param_attr=attr["fc_0.w_0"],
                            bias_attr=attr["fc_0.b_0"])
        out = fluid.layers.fc(h, 2, param_attr=attr["fc_1.w_0"], bias_attr=attr["fc_1.b_0"])
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        paddle.optimizer.NAdam(**args).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("name", TRAIN_CASES)
def test_three_steps_equal_paddle_331(name):
    """Parameters and every accumulator after each step, and the losses, as 3.3.1's."""
    case = ORACLE["train/" + name]
    main, startup, loss = _build(case["args"])
    names = list(PARAMS) + [f"{p}_{a}_0" for p in PARAMS for a in ACCS]
    for p in PARAMS:  # the state is recorded where Reduce mode and checkpoints look for it
        assert sorted(main.optimizer_state[p]) == sorted(f"{p}_{a}_0" for a in ACCS)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for n, value in case["init"].items():
        scope.find_var(n).get_tensor().set(value, fluid.CPUPlace())
    for step, ((x, y), want) in enumerate(zip(case["batches"], case["steps"])):
        got = exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss] + names, scope=scope)
        assert float(np.array(got[0]).reshape(-1)[0]) == pytest.approx(
            case["losses"][step], rel=1e-5)
        for n, value in zip(names, got[1:]):
            np.testing.assert_allclose(np.array(value), want[n], rtol=2e-5, atol=1e-6,
                                       err_msg=f"{n} after step {step + 1}")


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_two_places_equal_one_place_on_the_whole_batch(mode):
    def build():
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = 4
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.data("x", [None, 16], "float64")
            y = fluid.data("y", [None, 1], "float64")
            pred = fluid.layers.fc(fluid.layers.fc(x, 8, act="tanh"), 1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            paddle.optimizer.NAdam(0.05, weight_decay=1e-3).minimize(loss)
        return main, startup, loss

    rng = np.random.default_rng(3)
    data = [{"x": rng.standard_normal((8, 16)), "y": rng.standard_normal((8, 1))}
            for _ in range(3)]
    results = []
    for places in (None, [fluid.CPUPlace()] * 2):
        main, startup, loss = build()
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        prog = main
        if places is not None:
            bs = fluid.BuildStrategy()
            bs.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
            prog = fluid.CompiledProgram(main).with_data_parallel(
                loss_name=loss.name, build_strategy=bs, places=places)
        for feed in data:
            exe.run(prog, feed=feed, scope=scope)
        results.append({p.name: np.array(scope.find_var(p.name).get_tensor())
                        for p in main.all_parameters()})
    for name, want in results[0].items():
        np.testing.assert_allclose(results[1][name], want, rtol=1e-10, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize("kwargs, message", [
    ({"beta1": 1.0}, "beta1 must be in"),
    ({"beta2": -0.1}, "beta2 must be in"),
    ({"epsilon": -1e-8}, "epsilon must be >= 0"),
    ({"momentum_decay": -0.004}, "momentum_decay must be >= 0"),
    ({"learning_rate": -0.1}, "learning_rate must be >= 0"),
    ({"beta1": "0.9"}, "beta1 must be a float"),
    ({"weight_decay": "0.1"}, "weight_decay must be"),
])
def test_bad_arguments_name_the_argument(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        paddle.optimizer.NAdam(**kwargs)


def test_the_op_checks_state_shapes_and_multi_precision():
    prog = fluid.Program()
    block = prog.global_block()
    ins = {slot: block.create_var(name=slot, shape=[3, 4], dtype="float32")
           for slot in OUTS.values()}
    ins["grad"] = block.create_var(name="grad", shape=[3, 4], dtype="float32")
    ins["learning_rate"] = block.create_var(name="lr", shape=[1], dtype="float32")
    outs = {slot: block.create_var(name=slot + "_v") for slot in OUTS}
    bad = dict(ins, moment2=block.create_var(name="m2", shape=[4, 3], dtype="float32"))
    with pytest.raises(InvalidArgumentError, match="moment2 m2"):
        block.append_op("nadam", bad, outs)
    with pytest.raises(InvalidArgumentError, match="multi_precision must be False"):
        block.append_op("nadam", ins, outs, {"multi_precision": True})
