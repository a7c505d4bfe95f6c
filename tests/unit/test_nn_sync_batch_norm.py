"""paddle.nn.SyncBatchNorm in a 2.x-style static program, on one process: plain batch norm
(forward, gradients and running statistics equal fluid's batch_norm on the same parameters),
paddle's data_format spellings, weight_attr / bias_attr False, train / eval and
clone(for_test=True), convert_sync_batchnorm, and the errors."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import spmd as paddle
import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.layers.nn_layers import get_default_dtype, set_default_dtype

STEPS = 3
# paddle data_format -> (input shape, the batch_norm layout it runs as)
FORMATS = {"NC": ([6, 3], "NCHW"), "NCL": ([6, 3, 5], "NCHW"), "NLC": ([6, 5, 3], "NHWC"),
           "NCHW": ([4, 3, 2, 5], "NCHW"), "NHWC": ([4, 2, 5, 3], "NHWC"),
           "NCDHW": ([2, 3, 2, 2, 3], "NCHW"), "NDHWC": ([2, 2, 2, 3, 3], "NHWC")}


@contextlib.contextmanager
def default_dtype(dtype: str):
    old = get_default_dtype()
    set_default_dtype(dtype)
    try:
        yield
    finally:
        set_default_dtype(old)


def _names(i: int = 0) -> dict:
    return {"scale": f"bn{i}.scale", "bias": f"bn{i}.bias", "mean": f"bn{i}_mean",
            "variance": f"bn{i}_variance"}


def _build(kind: str, data_format: str, dtype: str, momentum=0.8, epsilon=1e-4):
    """x -> norm -> loss = mean(y * y * w) trained by SGD; the norm is paddle.nn.SyncBatchNorm
    or fluid's batch_norm, both with the parameter names of _names()."""
    shape, layout = FORMATS[data_format]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), fluid.unique_name.guard():
        x = paddle.static.data("x", [None, *shape[1:]], dtype)
        x.stop_gradient = False  # so that backward writes x@GRAD, which the test fetches
        w = paddle.static.data("w", [None, *shape[1:]], dtype)
        n = _names()
        if kind == "nn":
            with default_dtype(dtype):
                bn = paddle.nn.SyncBatchNorm(
                    3, momentum=momentum, epsilon=epsilon, data_format=data_format,
                    weight_attr=paddle.ParamAttr(name=n["scale"]),
                    bias_attr=paddle.ParamAttr(name=n["bias"]), name="bn0")
            y = bn(x)
        else:
            y = fluid.layers.batch_norm(
                x, momentum=momentum, epsilon=epsilon, data_layout=layout,
                param_attr=n["scale"], bias_attr=n["bias"], moving_mean_name=n["mean"],
                moving_variance_name=n["variance"])
        loss = paddle.mean(y * y * w)
        paddle.optimizer.SGD(0.5).minimize(loss)
    return main, startup, x, y


def _feeds(data_format: str, dtype: str):
    shape = FORMATS[data_format][0]
    rng = np.random.default_rng(5)
    return [{"x": (rng.standard_normal(shape) * 3 + 2).astype(dtype),
             "w": rng.random(shape).astype(dtype)} for _ in range(STEPS)]


def _train(kind: str, data_format: str, dtype: str):
    main, startup, x, y = _build(kind, data_format, dtype)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    fetched = [exe.run(main, feed=feed, fetch_list=[y, x.name + "@GRAD"], scope=scope)
               for feed in _feeds(data_format, dtype)]
    state = {k: np.array(scope.find_var(v).get_tensor()) for k, v in _names().items()}
    return fetched, state, main


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("data_format", sorted(FORMATS))
def test_equals_fluid_batch_norm(data_format, dtype):
    got, got_state, program = _train("nn", data_format, dtype)
    want, want_state, _ = _train("fluid", data_format, dtype)
    assert [op.type for op in program.global_block().ops if "batch_norm" in op.type] == [
        "sync_batch_norm", "sync_batch_norm_grad"]
    tol = 1e-12 if dtype == "float64" else 1e-5
    for step, (g, w) in enumerate(zip(got, want)):
        for what, a, b in zip(("y", "x@GRAD"), g, w):
            assert a.dtype == b.dtype == np.dtype(dtype)
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"{what} step {step}")
    for name, value in want_state.items():
        np.testing.assert_allclose(got_state[name], value, rtol=tol, atol=tol, err_msg=name)
    assert not np.allclose(got_state["scale"], 1.0)  # the scale did train


def test_running_statistics_use_paddle_momentum():
    """running = momentum * running + (1 - momentum) * batch statistic (variance biased)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 2], "float32")
        bn = paddle.nn.SyncBatchNorm(2, momentum=0.9)
        y = bn(x)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    feed = np.array([[1.0, -2.0], [3.0, 0.0], [5.0, 8.0]], dtype="float32")
    (out,) = exe.run(main, feed={"x": feed}, fetch_list=[y], scope=scope)
    mean, var = feed.mean(axis=0), feed.var(axis=0)
    np.testing.assert_allclose(out, (feed - mean) / np.sqrt(var + 1e-5), rtol=1e-5, atol=1e-6)
    running = {p.name: np.array(scope.find_var(p.name).get_tensor())
               for p in bn.parameters() if not p.trainable}
    assert sorted(running) == ["sync_batch_norm_0.w_1", "sync_batch_norm_0.w_2"]
    np.testing.assert_allclose(running["sync_batch_norm_0.w_1"], 0.1 * mean, rtol=1e-6)
    np.testing.assert_allclose(running["sync_batch_norm_0.w_2"], 0.9 + 0.1 * var, rtol=1e-6)


def test_parameter_names_and_defaults():
    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        with fluid.unique_name.guard():
            a = paddle.nn.SyncBatchNorm(4)
            b = paddle.nn.SyncBatchNorm(4, name="bn")
    assert a.full_name() == "sync_batch_norm_0"
    assert [(p.name, p.trainable, list(p.shape), p.dtype) for p in a.parameters()] == [
        ("sync_batch_norm_0.w_0", True, [4], "float32"),
        ("sync_batch_norm_0.b_0", True, [4], "float32"),
        ("sync_batch_norm_0.w_1", False, [4], "float32"),
        ("sync_batch_norm_0.w_2", False, [4], "float32")]
    assert (a.weight.name, a.bias.name) == ("sync_batch_norm_0.w_0", "sync_batch_norm_0.b_0")
    # `name` names the running statistics, as paddle's _BatchNormBase does
    assert [p.name for p in b.parameters()] == [
        "sync_batch_norm_1.w_0", "sync_batch_norm_1.b_0", "bn_mean", "bn_variance"]
    assert repr(b) == "SyncBatchNorm(num_features=4, momentum=0.9, epsilon=1e-05, name=bn)"


@pytest.mark.parametrize("which", ["weight", "bias", "both"])
def test_attr_false_keeps_scale_ones_and_shift_zeros(which):
    """paddle: weight_attr / bias_attr False -> a scale of ones / shift of zeros that never
    trains (a parameter with stop_gradient); the other one still trains."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 3], "float32")
        w = paddle.static.data("w", [None, 3], "float32")
        bn = paddle.nn.SyncBatchNorm(3, weight_attr=False if which != "bias" else None,
                                     bias_attr=False if which != "weight" else None)
        y = bn(x)
        paddle.optimizer.SGD(0.5).minimize(paddle.mean(y * w))
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    for _ in range(2):
        feed = {"x": rng.standard_normal((5, 3)).astype("float32"),
                "w": rng.standard_normal((5, 3)).astype("float32")}
        (out,) = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    scale = np.array(scope.find_var(bn.weight.name).get_tensor())
    bias = np.array(scope.find_var(bn.bias.name).get_tensor())
    if which in ("weight", "both"):
        assert bn.weight.stop_gradient and (scale == 1).all()
    else:
        assert not np.allclose(scale, 1)
    if which in ("bias", "both"):
        assert bn.bias.stop_gradient and (bias == 0).all()
    else:
        assert not np.allclose(bias, 0)
    if which == "both":
        xs = feed["x"]
        want = (xs - xs.mean(axis=0)) / np.sqrt(xs.var(axis=0) + 1e-5)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def _eval_run(build_test):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 2, 3], "float32")
        bn = paddle.nn.SyncBatchNorm(2, data_format="NCL")
        program, y = build_test(main, bn, x)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    feed = np.arange(12, dtype="float32").reshape(2, 2, 3)
    (out,) = exe.run(program, feed={"x": feed}, fetch_list=[y], scope=scope)
    running = [np.array(scope.find_var(p.name).get_tensor())
               for p in bn.parameters() if not p.trainable]
    return program, feed, out, running


def _after_eval(main, bn, x):
    assert bn.eval() is bn and not bn.training
    return main, bn(x)


def _cloned(main, bn, x):
    y = bn(x)
    return main.clone(for_test=True), y


@pytest.mark.parametrize("build_test", [_after_eval, _cloned], ids=["eval", "clone_for_test"])
def test_evaluation_uses_running_statistics(build_test):
    program, feed, out, (mean, var) = _eval_run(build_test)
    ops = [op for op in program.global_block().ops if op.type == "sync_batch_norm"]
    assert len(ops) == 1 and ops[0].attr("is_test") is True
    np.testing.assert_allclose(out, feed / np.sqrt(1 + 1e-5), rtol=1e-6)  # running 0 and 1
    assert (mean == 0).all() and (var == 1).all()  # left as they were


def test_train_and_eval_walk_sublayers():
    class Block(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.bn = paddle.nn.SyncBatchNorm(3)

        def forward(self, x):
            return self.bn(x)

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.first = Block()
            self.second = paddle.nn.SyncBatchNorm(3)

        def forward(self, x):
            return self.second(self.first(x))

    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        with fluid.unique_name.guard():
            net = Net()
            x = paddle.static.data("x", [None, 3], "float32")
            net.eval()
            assert [n for n, _ in net.named_sublayers()] == ["first", "first.bn", "second"]
            assert not any(layer.training for layer in net.sublayers(include_self=True))
            net.first.train()
            assert net.first.bn.training and not net.second.training
            net(x)
    assert len(net.parameters()) == 8
    assert [n for n, _ in net.named_parameters()][:2] == ["first.bn.weight", "first.bn.bias"]
    program = x.block.program
    is_test = [op.attr("is_test") for op in program.global_block().ops]
    assert is_test == [False, True]  # first (train) then second (eval)


def test_convert_sync_batchnorm_keeps_model_and_parameters():
    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.bn = paddle.nn.SyncBatchNorm(3)

    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        net = Net()
        names = [p.name for p in net.parameters()]
        bn = net.bn
        assert paddle.nn.SyncBatchNorm.convert_sync_batchnorm(net) is net
        assert net.bn is bn and [p.name for p in net.parameters()] == names
        assert paddle.nn.SyncBatchNorm.convert_sync_batchnorm(bn) is bn
        program = fluid.default_main_program()
    with pytest.raises(InvalidArgumentError, match="BuildStrategy.sync_batch_norm"):
        paddle.nn.SyncBatchNorm.convert_sync_batchnorm(program)


def test_errors_say_what_and_how_to_fix():
    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        x64 = paddle.static.data("x64", [None, 3, 4], "float64")
        x = paddle.static.data("x", [None, 4, 3], "float32")
        with pytest.raises(InvalidArgumentError, match="data_format must be one of"):
            paddle.nn.SyncBatchNorm(3, data_format="CHW")
        with pytest.raises(InvalidArgumentError, match="num_features must be a positive int"):
            paddle.nn.SyncBatchNorm(0)
        with pytest.raises(InvalidArgumentError, match="momentum must be in"):
            paddle.nn.SyncBatchNorm(3, momentum=1.5)
        bn = paddle.nn.SyncBatchNorm(3)
        with pytest.raises(InvalidArgumentError, match=r"float64 but the layer's parameters "
                                                       r"are float32.*set_default_dtype"):
            bn(x64)
        with pytest.raises(InvalidArgumentError, match="built for 3 channels.*has 4 in dim 1"):
            bn(x)
        assert bn(paddle.static.data("x3", [None, 3], "float32")).shape[1] == 3
    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        with pytest.raises(InvalidArgumentError, match="same program_guard"):
            bn(paddle.static.data("x", [None, 3], "float32"))


def test_default_dtype():
    assert get_default_dtype() == "float32"
    with pytest.raises(InvalidArgumentError, match="'float16', 'float32' and 'float64'"):
        set_default_dtype("int64")
    with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        with default_dtype("float16"):  # half-precision models keep norm parameters float32
            bn = paddle.nn.SyncBatchNorm(3)
        assert {p.dtype for p in bn.parameters()} == {"float32"}
        y = bn(paddle.static.data("x", [None, 3], "float16"))
        assert y.dtype == "float16"
    assert get_default_dtype() == "float32"
