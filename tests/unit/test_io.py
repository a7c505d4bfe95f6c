"""spmd.io: bit-exact round trips, inference models, no pickle, atomic saves, clear errors."""
from __future__ import annotations

import ast
import json
import os
import pickle  # only to write a real pickle file and show that loading refuses it

import numpy as np
import pytest

import spmd
import spmd.io as io
from spmd.autodiff import append_backward
from spmd.core import OpRole, Program, Scope, global_scope, scope_guard
from spmd.errors import InvalidArgumentError, NotFoundError, PreconditionError
from spmd.io.files import MANIFEST

RNG = np.random.default_rng(7)



def _listing(directory) -> list[str]:
    """The files of a save, less the manifest spmd.io keeps beside them."""
    return [n for n in os.listdir(directory) if n != MANIFEST]

def _w32():
    w = RNG.standard_normal((3, 4)).astype("float32")
    w[0, :4] = [np.nan, -0.0, np.inf, 1e-45]  # NaN, signed zero, inf, a denormal: bits matter
    return w


VALUES = {
    "w32": _w32(),
    "w64": RNG.standard_normal((2, 3)),
    "h16": np.array([1.5, -2.25], dtype="float16"),
    "step": np.array([2**62 + 1], dtype="int64"),
}
PERSISTABLES = ["w32", "w64", "h16", "step"]


@pytest.fixture
def scope():
    s = Scope()
    with scope_guard(s):
        yield s


def vars_program() -> Program:
    """Parameters of three float dtypes, an int64 persistable counter and a temporary."""
    prog = Program()
    block = prog.global_block()
    block.create_parameter("w32", (3, 4), "float32")
    block.create_parameter("w64", (2, 3), "float64")
    block.create_parameter("h16", (2,), "float16")
    block.create_var(name="step", shape=(1,), dtype="int64", persistable=True)
    block.create_var(name="tmp", shape=(2,), dtype="float32")
    return prog


def set_values(scope, values=VALUES):
    for name, value in values.items():
        scope.var(name).get_tensor().set(value)


def assert_bit_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def mlp() -> Program:
    """y = relu(x @ w + b), loss = mean(y), backward and sgd; lr and step are optimizer state."""
    prog = Program()
    block = prog.global_block()
    x = block.create_var(name="x", shape=(-1, 3), dtype="float32", is_data=True)
    w = block.create_parameter("w", (3, 4), "float32")
    b = block.create_parameter("b", (4,), "float32")
    for name in ("h", "h2", "y", "loss"):
        block.create_var(name=name)
    block.append_op("mul", {"X": x, "Y": w}, {"Out": "h"})
    block.append_op("elementwise_add", {"X": "h", "Y": b}, {"Out": "h2"})
    block.append_op("relu", {"X": "h2"}, {"Out": "y"})
    block.append_op("mean", {"X": "y"}, {"Out": "loss"})
    params_grads = append_backward(block.var("loss"))
    block.create_var(name="lr", shape=(1,), dtype="float32", persistable=True)
    block.create_var(name="step", shape=(1,), dtype="int64", persistable=True)
    with prog.role_guard(OpRole.OPTIMIZE):
        for p, g in params_grads:
            block.append_op("sgd", {"Param": p, "Grad": g, "LearningRate": "lr"},
                            {"ParamOut": p})
    return prog


def init_mlp(scope):
    set_values(scope, {"w": RNG.standard_normal((3, 4)).astype("float32"),
                       "b": RNG.standard_normal(4).astype("float32"),
                       "lr": np.array([0.5], "float32"), "step": np.array([3], "int64")})


def snapshot(directory) -> dict:
    return {n: (directory / n).read_bytes() for n in sorted(_listing(directory))}


# -- round trips -------------------------------------------------------------------------------
@pytest.mark.parametrize("filename", [None, "all.npz"])
def test_save_load_vars_round_trip(tmp_path, scope, filename):
    prog = vars_program()
    set_values(scope)
    exe = spmd.Executor()
    io.save_vars(exe, str(tmp_path), prog, predicate=io.is_persistable, filename=filename)
    want = {"all.npz"} if filename else {n + ".npy" for n in PERSISTABLES}
    assert set(_listing(tmp_path)) == want
    with scope_guard(Scope()):
        io.load_vars(exe, str(tmp_path), prog, predicate=io.is_persistable, filename=filename)
        for name in PERSISTABLES:
            assert_bit_equal(global_scope().get(name), VALUES[name])
        assert global_scope().get("tmp") is None


def test_save_load_vars_explicit_list(tmp_path, scope):
    prog = vars_program()
    set_values(scope)
    exe = spmd.Executor()
    io.save_vars(exe, str(tmp_path), prog, vars=[prog.global_block().var("w64"), "step"])
    assert set(_listing(tmp_path)) == {"w64.npy", "step.npy"}
    with scope_guard(Scope()):
        io.load_vars(exe, str(tmp_path), prog, vars=["w64", prog.global_block().var("step")])
        assert_bit_equal(global_scope().get("w64"), VALUES["w64"])
        assert_bit_equal(global_scope().get("step"), VALUES["step"])
        assert global_scope().get("w32") is None


@pytest.mark.parametrize("filename", [None, "params"])
def test_save_load_params(tmp_path, scope, filename):
    prog = vars_program()
    set_values(scope)
    exe = spmd.Executor()
    io.save_params(exe, str(tmp_path), prog, filename=filename)
    if filename is None:
        assert set(_listing(tmp_path)) == {"w32.npy", "w64.npy", "h16.npy"}
    else:
        with np.load(tmp_path / filename, allow_pickle=False) as archive:
            assert sorted(archive.files) == ["h16", "w32", "w64"]
    with scope_guard(Scope()):
        io.load_params(exe, str(tmp_path), prog, filename=filename)
        for name in ("w32", "w64", "h16"):
            assert_bit_equal(global_scope().get(name), VALUES[name])
        assert global_scope().get("step") is None  # not a parameter


@pytest.mark.parametrize("filename", [None, "ckpt.npz"])
def test_save_load_persistables(tmp_path, scope, filename):
    prog = vars_program()
    set_values(scope)
    scope.var("tmp").get_tensor().set(np.ones(2, "float32"))
    exe = spmd.Executor()
    io.save_persistables(exe, str(tmp_path / "sub" / "dir"), prog, filename=filename)
    with scope_guard(Scope()):
        io.load_persistables(exe, str(tmp_path / "sub" / "dir"), prog, filename=filename)
        for name in PERSISTABLES:
            assert_bit_equal(global_scope().get(name), VALUES[name])
        assert global_scope().get("tmp") is None  # not persistable, never saved


def test_load_updates_the_scope_the_program_then_runs_on(tmp_path, scope):
    prog = mlp()
    init_mlp(scope)
    exe = spmd.Executor()
    io.save_params(exe, str(tmp_path), prog)
    trained = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}
    scope.var("w").get_tensor().set(np.zeros((3, 4), "float32"))
    io.load_params(exe, str(tmp_path), prog)
    assert_bit_equal(np.array(scope.find_var("w").get_tensor()), trained["w"])


# -- inference models --------------------------------------------------------------------------
def _train_step(prog, scope):
    init_mlp(scope)
    exe = spmd.Executor()
    xv = RNG.standard_normal((5, 3)).astype("float32")
    exe.run(prog, feed={"x": xv}, fetch_list=["loss"])  # one sgd step changes w and b
    want = exe.run(prog.clone(for_test=True), feed={"x": xv}, fetch_list=["y"])[0]
    return exe, xv, want


def test_inference_model_round_trip(tmp_path, scope):
    prog = mlp()
    exe, xv, want = _train_step(prog, scope)
    names = io.save_inference_model(str(tmp_path), ["x"], [prog.global_block().var("y")], exe,
                                    main_program=prog)
    # a Variable target is fetched through fluid 1.8's save_infer_model/scale_<i>
    assert names == ["save_infer_model/scale_0.tmp_0"]
    assert sorted(_listing(tmp_path)) == ["__model__", "b.npy", "w.npy"]  # no lr, no step
    with scope_guard(Scope()):
        program, feeds, fetches = io.load_inference_model(str(tmp_path), spmd.Executor())
        got = spmd.Executor().run(program, feed={feeds[0]: xv}, fetch_list=fetches)[0]
        for name in ("w", "b"):
            assert_bit_equal(global_scope().get(name), scope.get(name))
    assert_bit_equal(got, want)
    assert feeds == ["x"] and [v.name for v in fetches] == ["save_infer_model/scale_0.tmp_0"]
    # fluid 1.8's model: its feed and fetch ops around the pruned forward ops
    assert [op.type for op in program.global_block().ops] == [
        "feed", "mul", "elementwise_add", "relu", "scale", "fetch"]
    assert prog.global_block().ops[-1].type == "scale"  # appended to the caller's, as fluid
    assert all(op.role is OpRole.FORWARD for op in program.global_block().ops)
    assert not any("@GRAD" in n for n in program.global_block().vars)
    data = json.loads((tmp_path / "__model__").read_text())
    assert data["feed_names"] == ["x"] and data["fetch_names"] == ["save_infer_model/scale_0.tmp_0"]
    assert Program.from_json((tmp_path / "__model__").read_text()).fingerprint() == \
        program.fingerprint()


def test_inference_model_custom_filenames_and_intermediate_feed(tmp_path, scope):
    prog = mlp()
    exe, _, _ = _train_step(prog, scope)
    io.save_inference_model(str(tmp_path), "h", ["y"], exe, main_program=prog,
                            model_filename="model.json", params_filename="params.npz")
    assert sorted(_listing(tmp_path)) == ["model.json", "params.npz"]
    with np.load(tmp_path / "params.npz", allow_pickle=False) as archive:
        assert archive.files == ["b"]  # fed from h: w is not needed
    with scope_guard(Scope()):
        with pytest.raises(NotFoundError, match="__model__"):
            io.load_inference_model(str(tmp_path), exe)
        program, feeds, fetches = io.load_inference_model(
            str(tmp_path), exe, model_filename="model.json", params_filename="params.npz")
        hv = RNG.standard_normal((2, 4)).astype("float32")
        got = exe.run(program, feed={"h": hv}, fetch_list=fetches)[0]
    assert [op.type for op in program.global_block().ops] == [
        "feed", "elementwise_add", "relu", "fetch"]
    np.testing.assert_array_equal(got, np.maximum(hv + scope.get("b"), 0))


def test_inference_model_needs_every_input_fed(tmp_path, scope):
    prog = Program()
    block = prog.global_block()
    for name in ("a", "z"):
        block.create_var(name=name, shape=(-1, 2), dtype="float32", is_data=True)
    block.append_op("elementwise_add", {"X": "a", "Y": "z"}, {"Out": "s"})
    with pytest.raises(InvalidArgumentError, match=r"needs \['z'\].*feeded_var_names"):
        io.save_inference_model(str(tmp_path), ["a"], ["s"], spmd.Executor(), prog)
    with pytest.raises(NotFoundError, match="'q'"):
        io.save_inference_model(str(tmp_path), ["a", "q"], ["s"], spmd.Executor(), prog)
    assert _listing(tmp_path) == []


# -- paddle 2.x save / load --------------------------------------------------------------------
def test_save_load_2x(tmp_path, scope):
    prog = mlp()
    _train_step(prog, scope)
    path = str(tmp_path / "ckpt" / "step_1")
    io.save(prog, path)
    assert sorted(_listing(tmp_path / "ckpt")) == [
        "step_1.pdmodel", "step_1.pdopt", "step_1.pdparams"]
    with np.load(path + ".pdparams", allow_pickle=False) as archive:
        assert sorted(archive.files) == ["b", "w"]
    with np.load(path + ".pdopt", allow_pickle=False) as archive:
        assert sorted(archive.files) == ["lr", "step"]
    model = Program.from_json(open(path + ".pdmodel").read())
    assert model.fingerprint() == prog.fingerprint()
    for where in (path, path + ".pdparams"):
        with scope_guard(Scope()):
            io.load(prog, where, spmd.Executor())
            for name in ("w", "b", "lr", "step"):
                assert_bit_equal(global_scope().get(name), scope.get(name))


def test_load_2x_errors(tmp_path, scope):
    prog = mlp()
    _train_step(prog, scope)
    path = str(tmp_path / "m")
    io.save(prog, path)
    bigger = mlp()
    bigger.global_block().create_parameter("extra", (2,), "float32")
    with pytest.raises(NotFoundError, match=r"\['extra'\].*m\.pdparams"):
        io.load(bigger, path)
    os.remove(path + ".pdopt")
    with pytest.raises(NotFoundError, match=r"m\.pdopt"):
        io.load(prog, path)
    with pytest.raises(NotFoundError, match="does not exist"):
        io.load(prog, str(tmp_path / "nothing"))
    with pytest.raises(InvalidArgumentError, match="filename is empty"):
        io.save(prog, str(tmp_path) + "/")


def test_load_2x_reads_a_persistables_directory(tmp_path, scope):
    prog = mlp()
    exe, _, _ = _train_step(prog, scope)
    io.save_persistables(exe, str(tmp_path), prog)
    with scope_guard(Scope()):
        io.load(prog, str(tmp_path), exe)
        for name in ("w", "b", "lr", "step"):
            assert_bit_equal(global_scope().get(name), scope.get(name))


# -- no pickle ---------------------------------------------------------------------------------
def test_pickled_object_array_file_is_refused(tmp_path, scope):
    prog = vars_program()
    set_values(scope)
    exe = spmd.Executor()
    io.save_persistables(exe, str(tmp_path), prog)
    np.save(tmp_path / "w64.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    before = {n: scope.get(n) for n in PERSISTABLES}
    with pytest.raises(InvalidArgumentError) as e:
        io.load_persistables(exe, str(tmp_path), prog)
    msg = str(e.value)
    assert "'w64'" in msg and str(tmp_path / "w64.npy") in msg and "pickle" in msg
    assert all(scope.get(n) is before[n] for n in PERSISTABLES)


def test_pickled_archive_member_and_pickle_file_are_refused(tmp_path, scope):
    prog = vars_program()
    set_values(scope)
    np.savez(tmp_path / "all.npz", w32=VALUES["w32"], w64=np.array([None], dtype=object))
    with pytest.raises(InvalidArgumentError, match="pickle"):
        io.load_vars(spmd.Executor(), str(tmp_path), prog, vars=["w32", "w64"],
                     filename="all.npz")
    (tmp_path / "m.pdparams").write_bytes(pickle.dumps({"w32": VALUES["w32"]}))
    with pytest.raises(InvalidArgumentError, match=r"m\.pdparams.*pickle"):
        io.load(prog, str(tmp_path / "m"))


@pytest.mark.parametrize("module", ["__init__.py", "files.py"])
def test_io_module_never_unpickles(module):
    tree = ast.parse(open(os.path.join(os.path.dirname(io.__file__), module)).read())
    imported = {a.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for a in node.names} | {node.module.split(".")[0] for node in ast.walk(tree)
                                        if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve",
                           "marshal"}
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "save")
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "np"]
    assert calls or module == "__init__.py", "files.py no longer calls np.load / np.save"
    for call in calls:
        kw = {k.arg: k.value for k in call.keywords}
        assert isinstance(kw.get("allow_pickle"), ast.Constant)
        assert kw["allow_pickle"].value is False


# -- atomic saves ------------------------------------------------------------------------------
SAVERS = {
    "per_file": lambda exe, d, prog: io.save_persistables(exe, str(d), prog),
    "one_file": lambda exe, d, prog: io.save_persistables(exe, str(d), prog, filename="all"),
    "paddle2": lambda exe, d, prog: io.save(prog, str(d / "m")),
    "inference": lambda exe, d, prog: io.save_inference_model(str(d), ["x"], ["y"], exe, prog),
}


@pytest.mark.parametrize("saver", list(SAVERS))
def test_interrupted_save_leaves_previous_files(tmp_path, scope, monkeypatch, saver):
    prog = mlp()
    exe, _, _ = _train_step(prog, scope)
    SAVERS[saver](exe, tmp_path, prog)
    before = snapshot(tmp_path)
    scope.var("w").get_tensor().set(np.full((3, 4), 7, "float32"))
    scope.var("b").get_tensor().set(np.full(4, 8, "float32"))
    # the first file written, before the journal: the save is undone
    monkeypatch.setenv("SPMD_TEST_FAIL_AT_FS_STEP", "1")
    with pytest.raises(OSError, match="injected failure"):
        SAVERS[saver](exe, tmp_path, prog)
    assert snapshot(tmp_path) == before  # same files, same bytes, no temporaries left
    monkeypatch.delenv("SPMD_TEST_FAIL_AT_FS_STEP")
    SAVERS[saver](exe, tmp_path, prog)
    after = snapshot(tmp_path)
    assert after.keys() == before.keys() and after != before


def test_failed_save_writes_nothing(tmp_path, scope):
    prog = vars_program()
    set_values(scope, {"w32": VALUES["w32"]})
    with pytest.raises(PreconditionError, match="'w64'.*startup"):
        io.save_params(spmd.Executor(), str(tmp_path / "out"), prog)
    assert not (tmp_path / "out").exists()


# -- load errors -------------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path, scope):
    """vars_program's persistables saved per file; the scope then holds other values, so a
    partial load would show."""
    prog = vars_program()
    set_values(scope)
    io.save_persistables(spmd.Executor(), str(tmp_path), prog)
    set_values(scope, {n: np.zeros_like(v) for n, v in VALUES.items()})
    return prog, {n: scope.get(n) for n in PERSISTABLES}


def _assert_untouched(scope, before):
    for name, array in before.items():
        assert scope.get(name) is array
        assert not np.any(array)


def test_shape_mismatch_is_clear_and_loads_nothing(tmp_path, scope, saved):
    prog, before = saved
    np.save(tmp_path / "w64.npy", np.zeros((3, 2)))
    with pytest.raises(InvalidArgumentError) as e:
        io.load_persistables(spmd.Executor(), str(tmp_path), prog)
    msg = str(e.value)
    assert "'w64'" in msg and "[3, 2]" in msg and "[2, 3]" in msg
    _assert_untouched(scope, before)


def test_dtype_mismatch_is_clear(tmp_path, scope, saved):
    prog, before = saved
    np.save(tmp_path / "w32.npy", VALUES["w32"].astype("float64"))
    with pytest.raises(InvalidArgumentError, match=r"'w32'.*does not match the directory's "
                                                   r"manifest.*dtype float32.*dtype float64"):
        io.load_persistables(spmd.Executor(), str(tmp_path), prog)
    os.remove(tmp_path / MANIFEST)  # the files as they are: the program's dtype is checked
    with pytest.raises(InvalidArgumentError, match=r"'w32'.*dtype float64.*dtype float32"):
        io.load_persistables(spmd.Executor(), str(tmp_path), prog)
    _assert_untouched(scope, before)


def test_missing_file_names_variable_and_path(tmp_path, scope, saved):
    prog, before = saved
    os.remove(tmp_path / "h16.npy")
    with pytest.raises(NotFoundError) as e:
        io.load_persistables(spmd.Executor(), str(tmp_path), prog)
    assert "'h16'" in str(e.value) and str(tmp_path / "h16.npy") in str(e.value)
    _assert_untouched(scope, before)


def test_missing_archive_member_names_variable_and_path(tmp_path, scope):
    prog = vars_program()
    set_values(scope)
    io.save_vars(spmd.Executor(), str(tmp_path), prog, vars=["w32"], filename="part")
    with pytest.raises(NotFoundError) as e:
        io.load_persistables(spmd.Executor(), str(tmp_path), prog, filename="part")
    msg = str(e.value)
    assert "'w64'" in msg and str(tmp_path / "part") in msg and "['w32']" in msg


def test_a_name_with_slashes_is_a_file_of_a_subfolder_as_fluid_saves_it(tmp_path, scope):
    """fluid.layers.rnn's cells name their parameters 'GRUCell/BasicGRUUnit_0.w_0'; fluid's
    save_params writes the file BasicGRUUnit_0.w_0 of the folder GRUCell (the book's
    machine_translation saves so), and its load_program_state walks subfolders."""
    names = ["GRUCell/BasicGRUUnit_0.w_0", "enc/GRUCell/b", "top"]
    prog = Program()
    for i, name in enumerate(names):
        prog.global_block().create_parameter(name, (2,), "float32")
        scope.var(name).get_tensor().set(np.arange(2, dtype="float32") + i)
    io.save_params(spmd.Executor(), str(tmp_path), prog)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.npy")) == [
        "GRUCell/BasicGRUUnit_0.w_0.npy", "enc/GRUCell/b.npy", "top.npy"]
    assert not [p for p in tmp_path.rglob(".*") if p.name != MANIFEST]  # no temporary left
    with scope_guard(Scope()):
        io.load_params(spmd.Executor(), str(tmp_path), prog)
        for i, name in enumerate(names):
            assert_bit_equal(global_scope().get(name), np.arange(2, dtype="float32") + i)
    state = io.load_program_state(str(tmp_path))
    assert sorted(state) == sorted(names)
    assert_bit_equal(state["enc/GRUCell/b"], np.arange(2, dtype="float32") + 1)


@pytest.mark.parametrize("name", ["../up", "a//b", "a/./b", "/abs", "a/", "a/../../b"])
def test_a_name_that_would_leave_the_directory_needs_one_file(tmp_path, scope, name):
    target = tmp_path / "ckpt"
    prog = Program()
    prog.global_block().create_var(name=name, shape=(2,), dtype="float32", persistable=True)
    scope.var(name).get_tensor().set(np.arange(2, dtype="float32"))
    with pytest.raises(InvalidArgumentError, match="filename="):
        io.save_persistables(spmd.Executor(), str(target), prog)
    assert sorted(p.name for p in tmp_path.rglob("*")) in ([], ["ckpt"])  # nothing written
    io.save_persistables(spmd.Executor(), str(target), prog, filename="all")
    with scope_guard(Scope()):
        io.load_persistables(spmd.Executor(), str(target), prog, filename="all")
        assert_bit_equal(global_scope().get(name), np.arange(2, dtype="float32"))


def test_get_parameter_value_by_name_reads_the_scope():
    """fluid 1.8's fluid.io.get_parameter_value(_by_name): a parameter's value in the
    executor's scope (nothing else of the program runs); a non-parameter is an
    AssertionError, as in fluid."""
    import spmd.fluid as fluid_api

    main, startup = fluid_api.Program(), fluid_api.Program()
    with fluid_api.program_guard(main, startup), fluid_api.unique_name.guard():
        x = fluid_api.data(name="x", shape=[None, 3], dtype="float32")
        y = fluid_api.layers.fc(x, size=2, param_attr=fluid_api.initializer.Constant(0.5))
    exe = fluid_api.Executor(fluid_api.CPUPlace())
    exe.run(startup)
    w = fluid_api.io.get_parameter_value_by_name("fc_0.w_0", exe, main)
    np.testing.assert_array_equal(w, np.full((3, 2), 0.5, np.float32))
    fluid_api.global_scope().find_var("fc_0.w_0").get_tensor().set(
        np.arange(6, dtype=np.float32).reshape(3, 2), fluid_api.CPUPlace())
    got = fluid_api.io.get_parameter_value(main.global_block().var("fc_0.w_0"), exe)
    np.testing.assert_array_equal(got, np.arange(6).reshape(3, 2))
    with pytest.raises(AssertionError, match="not a Parameter"):
        fluid_api.io.get_parameter_value(y, exe)
