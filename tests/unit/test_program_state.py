"""fluid.io.load_program_state / set_program_state / get_program_parameter /
get_program_persistable_vars: round trips over every way of saving, errors, and fluid 1.8.5's
behaviour (tests/oracle/data/program_state.json, made by tests/oracle/make_program_state.py)."""
from __future__ import annotations

import os
import pickle  # only to write a real pickle and show that loading refuses it
import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, NotFoundError, PreconditionError
from tests.oracle_io import load

ORACLE = load("program_state")


def build(opt: str = "adam"):
    """The oracle's model: fc(4, tanh) -> fc(2), mean of squares, Adam or SGD at 0.1."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.layers.fc(x, 4, act="tanh")
        y = fluid.layers.fc(h, 2)
        loss = fluid.layers.mean(fluid.layers.square(y))
        optimizer = fluid.optimizer.Adam(0.1) if opt == "adam" else fluid.optimizer.SGD(0.1)
        optimizer.minimize(loss)
    return main, start, loss


@pytest.fixture
def scope():
    s = fluid.Scope()
    with fluid.scope_guard(s):
        yield s


@pytest.fixture
def exe():
    return fluid.Executor(fluid.CPUPlace())


def scope_values(program) -> dict:
    return {v.name: np.array(fluid.global_scope().find_var(v.name).get_tensor())
            for v in fluid.io.get_program_persistable_vars(program)}


def randomize(program, seed=0) -> dict:
    """Distinct values in every persistable, so that a round trip shows which value went where."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, current in scope_values(program).items():
        values[name] = rng.uniform(0.1, 1, current.shape).astype(current.dtype)
        fluid.global_scope().var(name).get_tensor().set(values[name], fluid.CPUPlace())
    return values


# -- the listings --------------------------------------------------------------------------------
@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_listings_name_what_fluid_names_in_its_order(opt):
    main, _, _ = build(opt)
    assert [v.name for v in fluid.io.get_program_parameter(main)] == ORACLE["parameters_" + opt]
    # the same set; the order of the optimizer's variables is the program's creation order,
    # where spmd puts the learning rate before the moments and fluid after them
    assert (sorted(v.name for v in fluid.io.get_program_persistable_vars(main))
            == sorted(ORACLE["persistables_" + opt]))


def test_listings_take_a_compiled_program_and_refuse_none():
    main, _, loss = build("sgd")
    compiled = fluid.CompiledProgram(main)
    assert fluid.io.get_program_parameter(compiled) == fluid.io.get_program_parameter(main)
    with pytest.raises(InvalidArgumentError, match="program is None"):
        fluid.io.get_program_persistable_vars(None)


# -- load_program_state ---------------------------------------------------------------------------
@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_fluid_save_round_trip_with_fluid_keys(tmp_path, scope, exe, opt):
    main, start, _ = build(opt)
    exe.run(start)
    values = randomize(main)
    fluid.save(main, str(tmp_path / "m"))
    for given in ("m", "m.pdparams", "m.pdopt", "m.pdmodel"):
        state = fluid.io.load_program_state(str(tmp_path / given))
        assert {k: [v.dtype.name, list(v.shape)] for k, v in state.items()} == \
            ORACLE["saved_keys_" + opt]
        for name, value in state.items():
            np.testing.assert_array_equal(value, values[name])


@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_directory_round_trip_reads_every_variable_file(tmp_path, scope, exe, opt):
    main, start, _ = build(opt)
    exe.run(start)
    values = randomize(main)
    fluid.io.save_persistables(exe, str(tmp_path / "p"), main)
    state = fluid.io.load_program_state(str(tmp_path / "p"))
    assert sorted(state) == ORACLE["dir_keys_" + opt]
    for name, value in state.items():
        np.testing.assert_array_equal(value, values[name])
    params = fluid.io.get_program_parameter(main)
    picked = fluid.io.load_program_state(str(tmp_path / "p"), var_list=params)
    assert sorted(picked) == sorted(p.name for p in params)


def test_save_params_and_save_vars_directories(tmp_path, scope, exe):
    main, start, _ = build("adam")
    exe.run(start)
    values = randomize(main)
    fluid.io.save_params(exe, str(tmp_path / "params"), main)
    assert sorted(fluid.io.load_program_state(str(tmp_path / "params"))) == sorted(
        ORACLE["parameters_adam"])
    w = main.global_block().var("fc_1.w_0")
    fluid.io.save_vars(exe, str(tmp_path / "one"), main, vars=[w])
    state = fluid.io.load_program_state(str(tmp_path / "one"))
    assert list(state) == ["fc_1.w_0"]
    np.testing.assert_array_equal(state["fc_1.w_0"], values["fc_1.w_0"])


def test_single_file_needs_var_list_as_in_fluid(tmp_path, scope, exe):
    main, start, _ = build("adam")
    exe.run(start)
    values = randomize(main)
    fluid.io.save_persistables(exe, str(tmp_path / "c"), main, filename="all")
    path = str(tmp_path / "c" / "all")
    assert ORACLE["file_without_var_list_adam"]["result"] == "ValueError"
    with pytest.raises(ValueError, match="pass var_list="):
        fluid.io.load_program_state(path)
    persistables = fluid.io.get_program_persistable_vars(main)
    state = fluid.io.load_program_state(path, var_list=persistables)
    assert sorted(state) == ORACLE["dir_keys_adam"]
    # spmd reads a subset too (fluid's combined file must be read whole), by name as well
    subset = fluid.io.load_program_state(path, var_list=["fc_0.b_0", "learning_rate_0"])
    assert sorted(subset) == ["fc_0.b_0", "learning_rate_0"]
    np.testing.assert_array_equal(subset["fc_0.b_0"], values["fc_0.b_0"])


def test_directory_of_a_combined_save_says_to_name_the_file(tmp_path, scope, exe):
    main, start, _ = build("sgd")
    exe.run(start)
    fluid.io.save_persistables(exe, str(tmp_path / "c"), main, filename="all")
    with pytest.raises(NotFoundError, match="no per-variable files.*'all'.*var_list="):
        fluid.io.load_program_state(str(tmp_path / "c"))


def test_missing_path_is_an_error_not_an_empty_dict(tmp_path):
    # fluid 1.8.5 returns {} here, which set_program_state then applies silently
    with pytest.raises(NotFoundError, match="nothing saved at"):
        fluid.io.load_program_state(str(tmp_path / "nowhere"))
    with pytest.raises(InvalidArgumentError, match="model_path must be a path"):
        fluid.io.load_program_state(None)


def test_var_list_checked_against_the_files(tmp_path, scope, exe):
    main, start, _ = build("sgd")
    exe.run(start)
    fluid.io.save_params(exe, str(tmp_path / "p"), main)
    other, _, _ = build("sgd")
    other.global_block().var("fc_0.w_0").shape = (5, 4)  # a different model's declaration
    with pytest.raises(InvalidArgumentError, match="fc_0.w_0.*shape \\[3, 4\\].*\\[5, 4\\]"):
        fluid.io.load_program_state(str(tmp_path / "p"),
                                    var_list=[other.global_block().var("fc_0.w_0")])
    with pytest.raises(NotFoundError, match="learning_rate_0"):
        fluid.io.load_program_state(str(tmp_path / "p"), var_list=["learning_rate_0"])
    with pytest.raises(InvalidArgumentError, match="Variables or names, got int"):
        fluid.io.load_program_state(str(tmp_path / "p"), var_list=[3])


def test_pickled_pdparams_refused(tmp_path):
    with open(tmp_path / "m.pdparams", "wb") as f:
        pickle.dump({"w": np.zeros(2)}, f, protocol=2)  # what PaddlePaddle itself writes
    with pytest.raises(InvalidArgumentError, match="pickled data"):
        fluid.io.load_program_state(str(tmp_path / "m"))


# -- set_program_state ----------------------------------------------------------------------------
def test_load_pretrained_into_a_new_program(tmp_path, scope, exe):
    main, start, _ = build("adam")
    exe.run(start)
    values = randomize(main)
    fluid.save(main, str(tmp_path / "pre"))
    with fluid.scope_guard(fluid.Scope()):
        fresh, fresh_start, _ = build("adam")
        exe.run(fresh_start)
        fluid.io.set_program_state(fresh, fluid.io.load_program_state(str(tmp_path / "pre")))
        got = scope_values(fresh)
    assert sorted(got) == sorted(values)
    for name in values:
        np.testing.assert_array_equal(got[name], values[name])


def test_pretrained_state_trains_as_in_fluid(scope, exe):
    case = ORACLE["pretrained"]
    main, start, loss = build("adam")
    exe.run(start)
    fluid.io.set_program_state(main, case["state"])
    losses = [exe.run(main, feed={"x": case["feed"]}, fetch_list=[loss])[0] for _ in range(3)]
    np.testing.assert_allclose(np.ravel(losses), np.ravel(case["losses"]), rtol=1e-5)
    for name, want in case["after"].items():
        got = np.array(fluid.global_scope().find_var(name).get_tensor())
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _outcome(program, state) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fluid.io.set_program_state(program, state)
            result = "ok"
        except AssertionError:  # the type fluid raises; spmd's errors are also one
            result = "AssertionError"
    unused = [str(w.message).rsplit(": ", 1)[1].split() for w in caught
              if "were not set" in str(w.message)]
    return {"result": result, "unused": sorted(unused[0]) if unused else []}


def test_set_program_state_outcomes_match_fluid(exe):
    main, start, _ = build("adam")
    w0 = np.full((3, 4), 0.5, "float32")
    checks = {
        "before_startup": (False, {}),
        "missing_and_unused": (True, {"fc_0.w_0": w0, "zzz": w0, "aaa": w0}),
        "shape": (True, {"fc_0.w_0": np.zeros((4, 3), "float32")}),
        "dtype": (True, {"fc_0.w_0": np.zeros((3, 4), "float64")}),
        "scalar_for_shape_1": (True, {"learning_rate_0": np.float32(3)}),
        "transposed_view": (True, {"fc_0.w_0": np.zeros((4, 3), "float32").T}),
    }
    for name, (startup, state) in checks.items():
        with fluid.scope_guard(fluid.Scope()):
            if startup:
                exe.run(start)
            assert _outcome(main, state) == ORACLE["set_" + name], name
            if name == "missing_and_unused":
                got = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
                np.testing.assert_array_equal(got, ORACLE["set_value_after"])


def test_set_errors_name_the_variable_and_the_fix(scope, exe):
    main, start, _ = build("adam")
    with pytest.raises(PreconditionError, match="run the startup program"):
        fluid.io.set_program_state(main, {})
    exe.run(start)
    with pytest.raises(InvalidArgumentError, match="'fc_0.w_0' has shape \\[4, 3\\].*\\[3, 4\\]"):
        fluid.io.set_program_state(main, {"fc_0.w_0": np.zeros((4, 3), "float32")})
    with pytest.raises(InvalidArgumentError, match="dtype float64.*astype\\('float32'\\)"):
        fluid.io.set_program_state(main, {"fc_0.w_0": np.zeros((3, 4))})
    with pytest.raises(InvalidArgumentError, match="'fc_0.b_0' is a list.*np.asarray"):
        fluid.io.set_program_state(main, {"fc_0.b_0": [0.0] * 4})
    with pytest.raises(InvalidArgumentError, match="must be a dict"):
        fluid.io.set_program_state(main, [("fc_0.b_0", np.zeros(4, "float32"))])


def test_set_checks_everything_before_setting_anything(scope, exe):
    main, start, _ = build("adam")
    exe.run(start)
    before = scope_values(main)
    bad = {"fc_0.b_0": np.ones(4, "float32"), "fc_1.w_0": np.ones(3, "float32")}
    with pytest.raises(InvalidArgumentError):
        fluid.io.set_program_state(main, bad)
    after = scope_values(main)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])


def test_set_copies_so_the_dict_stays_the_callers(scope, exe):
    main, start, _ = build("sgd")
    exe.run(start)
    b = np.ones(4, "float32")
    fluid.io.set_program_state(main, {"fc_0.b_0": b})
    b[:] = 7
    got = np.array(fluid.global_scope().find_var("fc_0.b_0").get_tensor())
    np.testing.assert_array_equal(got, np.ones(4, "float32"))


def test_top_level_names_where_fluid_has_them():
    assert fluid.io.load_program_state is not None and fluid.io.set_program_state is not None
    if hasattr(fluid, "load_program_state"):  # fluid 1.8 exports these two at its top level
        assert fluid.load_program_state is fluid.io.load_program_state
        assert fluid.set_program_state is fluid.io.set_program_state


def test_manifest_catches_a_changed_pdparams(tmp_path, scope, exe):
    main, start, _ = build("sgd")
    exe.run(start)
    fluid.save(main, str(tmp_path / "m"))
    with open(tmp_path / "m.pdparams", "r+b") as f:
        f.seek(os.path.getsize(tmp_path / "m.pdparams") // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(InvalidArgumentError, match="does not match the directory's manifest"):
        fluid.io.load_program_state(str(tmp_path / "m"))
