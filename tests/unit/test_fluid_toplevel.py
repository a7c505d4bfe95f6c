"""fluid's top-level names beyond the layers: fluid.one_hot (one_hot_v2: any id shape) equal
to fluid 1.8.5's output, the fluid.input and fluid.learning_rate_decay modules, and
cuda_pinned_places refusing clearly where CUDA is absent."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, PreconditionError

# fluid 1.8.5: one_hot(ids=[[0, 3, 5], [2, 2, 1]], depth=4, allow_out_of_range=True), flattened
FLUID_ONE_HOT = [1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]


def _one_hot(ids, depth, allow_out_of_range):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("ids", [None, ids.shape[1]], "int64")
        y = fluid.one_hot(x, depth=depth, allow_out_of_range=allow_out_of_range)
    (out,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": ids}, fetch_list=[y],
                                                  scope=fluid.Scope())
    return y, out


def test_one_hot_v2_equals_fluid():
    ids = np.array([[0, 3, 5], [2, 2, 1]], dtype="int64")
    var, out = _one_hot(ids, 4, allow_out_of_range=True)
    assert var.shape == (-1, 3, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out.reshape(-1), np.float32(FLUID_ONE_HOT))


def test_one_hot_v2_out_of_range_is_an_error_by_default():
    with pytest.raises(Exception, match="5"):
        _one_hot(np.array([[0, 5]], dtype="int64"), 4, allow_out_of_range=False)


def test_modules_fluid_programs_import():
    assert fluid.input.one_hot is fluid.one_hot and fluid.input.embedding is fluid.embedding
    for name in ("exponential_decay", "piecewise_decay", "noam_decay", "cosine_decay"):
        assert getattr(fluid.learning_rate_decay, name) is getattr(fluid.layers, name)


def test_cuda_pinned_places():
    if fluid.is_compiled_with_cuda():  # one pinned place per GPU, as fluid
        places = fluid.cuda_pinned_places()
        assert len(places) == len(fluid.cuda_places())
        assert all(isinstance(p, fluid.CUDAPinnedPlace) for p in places)
    else:
        with pytest.raises(PreconditionError, match="cpu_places"):
            fluid.cuda_pinned_places()


def _isolate(monkeypatch, *names):
    """Let the test change these environment variables; pytest restores them afterwards."""
    for name in names:
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)


def test_set_and_get_flags(monkeypatch):
    _isolate(monkeypatch, "FLAGS_fuse_parameter_memory_size", "FLAGS_check_nan_inf",
             "FLAGS_benchmark")
    # fluid 1.8.5's default for a flag spmd does not act on; spmd's own values for the others
    assert fluid.get_flags(["FLAGS_benchmark", "FLAGS_check_nan_inf",
                            "FLAGS_fuse_parameter_memory_size"]) == {
        "FLAGS_benchmark": False, "FLAGS_check_nan_inf": False,
        "FLAGS_fuse_parameter_memory_size": 32.0}
    with pytest.warns(UserWarning, match="does not act on FLAGS_benchmark"):
        fluid.set_flags({"FLAGS_fuse_parameter_memory_size": 8, "FLAGS_check_nan_inf": True,
                         "FLAGS_benchmark": True})
    assert fluid.get_flags("FLAGS_fuse_parameter_memory_size") == {
        "FLAGS_fuse_parameter_memory_size": 8.0}
    assert fluid.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": True}
    from spmd.flags import flags  # the values spmd's passes and plans read
    assert flags().fuse_parameter_memory_size_mb == 8.0 and flags().check_nan_inf


def test_unknown_flags_are_refused():
    with pytest.raises(InvalidArgumentError, match="FLAGS_nope cannot set"):
        fluid.set_flags({"FLAGS_nope": 1})
    with pytest.raises(InvalidArgumentError, match="FLAGS_nope cannot get"):
        fluid.get_flags(["FLAGS_nope"])


def test_device_guard_records_op_device():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        with fluid.device_guard("gpu:0"):
            fluid.layers.relu(x)
        fluid.layers.tanh(x)
    devices = [op.attrs.get("op_device") for op in main.global_block().ops]
    assert devices == ["gpu:0", None]
    with pytest.raises(InvalidArgumentError, match="device id for cpu"):
        with fluid.device_guard("cpu:1"):
            pass


def _train(decorated: bool):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.square(fluid.layers.fc(x, 2)))
        opt = fluid.optimizer.Momentum(0.1, momentum=0.9)
        if decorated:
            opt = fluid.contrib.mixed_precision.decorate(opt, init_loss_scaling=128.0)
        opt.minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for step in range(3):
        exe.run(main, feed={"x": np.full((4, 3), step + 1.0, "float32")}, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    return params, opt


def test_mixed_precision_decorate_trains_as_float32():
    plain, _ = _train(decorated=False)
    with pytest.warns(UserWarning, match="does not cast to float16"):
        mixed, opt = _train(decorated=True)
    assert sorted(mixed) == sorted(plain)
    for name in plain:
        np.testing.assert_array_equal(mixed[name], plain[name])
    assert opt.get_loss_scaling().shape == (1,)
