"""The loader, LoDTensor, place and feed behaviours Paddle 1.8's own unit tests rely on, against
fluid 1.8.5's (tests/oracle/make_loader_feed.py): places' `_type()` / `_equals` /
`core.Place().set_place`, LoDTensor `_place()` and `_dtype()`, sequence lengths given as
ranges, an iterable loader ended early with `_reset()`, `_check_input_array`, the
instantiable DataLoaderBase, a one-place list feed to a CompiledProgram, and a
fluid.layers.data variable fed another dtype."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError
from tests.oracle_io import load

ORACLE = load("loader_feed")


def test_places_type_codes_equals_and_set_place_are_fluids():
    want = ORACLE["places"]
    cpu = fluid.CPUPlace()
    assert cpu._type() == want["cpu_type"] == fluid.CPUPlace()._type()
    assert fluid.CUDAPlace(0)._type() != cpu._type()
    p = fluid.core.Place()
    p.set_place(cpu)
    assert p._type() == want["set_place_type"]
    assert p.is_cpu_place() is want["set_place_is_cpu"]
    assert p._equals(cpu) and not p._equals(fluid.CUDAPlace(0))
    with pytest.raises(TypeError, match="set_place: expected a place"):
        fluid.core.Place().set_place("cpu")


def test_lod_tensor_place_is_where_it_was_set():
    t = fluid.LoDTensor()
    t.set(np.ones((2, 3), "float32"), fluid.CPUPlace())
    assert t._place()._equals(fluid.CPUPlace()) is ORACLE["places"]["tensor_place_equals_cpu"]
    assert fluid.LoDTensor(np.ones(2))._place() == fluid.CPUPlace()  # a host array: CPU


@pytest.mark.parametrize("dtype", sorted(ORACLE["dtypes"]))
def test_lod_tensor_dtype_is_a_vartype(dtype):
    t = fluid.LoDTensor()
    t.set(np.zeros((1,), dtype), fluid.CPUPlace())
    got = t._dtype()
    assert isinstance(got, fluid.core.VarDesc.VarType)
    assert f"VarType.{got.name}" == ORACLE["dtypes"][dtype]
    assert got == dtype  # spmd's VarType also equals the dtype's name


def test_sequence_lengths_may_be_ranges():
    t = fluid.LoDTensor()
    t.set(np.arange(6, dtype="float32").reshape(6, 1), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([range(1, 4)])
    assert t.recursive_sequence_lengths() == ORACLE["range_lengths"]["lengths"]
    assert t.lod() == ORACLE["range_lengths"]["lod"]


def test_check_input_array_refuses_ragged_data_with_a_type_error():
    want = ORACLE["check_input_array"]
    got = fluid.reader.GeneratorLoader._check_input_array([[1, 2], [3, 4]])
    np.testing.assert_array_equal(got, want["good"])
    assert want["ragged"] == "TypeError"
    with pytest.raises(TypeError, match="nested lists of different lengths"):
        fluid.reader.GeneratorLoader._check_input_array([[1, 2], [3]])
    with pytest.raises(TypeError):
        fluid.reader.DataLoaderBase._check_input_array([[1], [2, 3]])


def test_data_loader_base_is_instantiable_and_its_iteration_is_a_subclass_s():
    base = fluid.reader.DataLoaderBase()
    assert base() is base
    with pytest.raises(NotImplementedError, match="must define __iter__"):
        base.__iter__()
    with pytest.raises(NotImplementedError, match="must define __next__"):
        base.__next__()


def _infinite():
    num = 0
    while True:
        yield (np.ones([2, 3]) * num).astype("float32"),
        num += 1


def test_an_iterable_loader_ended_early_with_reset_starts_over():
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.scope_guard(fluid.Scope()):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
        y = fluid.layers.scale(x, 2.0)
        exe = fluid.Executor(fluid.CPUPlace())
        loader.set_batch_generator(_infinite, places=fluid.CPUPlace())
        for _ in range(3):
            seen = []
            for data in loader():
                seen.append(float(exe.run(feed=data, fetch_list=[y])[0][0, 0]))
                if len(seen) == 3:
                    break
            assert seen == [0.0, 2.0, 4.0]  # each epoch from the generator's start
        loader._reset()  # the reading thread stops; another _reset is harmless
        loader._reset()


def test_a_one_place_list_feed_runs_a_compiled_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        y = fluid.layers.reduce_sum(x)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    value = np.arange(6, dtype="float32").reshape(2, 3)
    got, = exe.run(fluid.CompiledProgram(main), feed=[{"x": value}], fetch_list=[y])
    np.testing.assert_allclose(got, [15.0])


def _scale_net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3])  # float32, need_check_feed False
        y = fluid.layers.scale(x, scale=0.5, bias=1.0)
        s = fluid.layers.reduce_sum(y)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, y, s


def test_layers_data_fed_float64_computes_fluids_values_in_its_own_dtype():
    """fluid runs the ops in float64 on float64 rows; spmd converts them to the variable's
    float32: the same values, to float32's precision."""
    want = ORACLE["fed_other_dtype"]["float64"]
    main, exe, y, s = _scale_net()
    got_y, got_s = exe.run(main, feed={"x": want["fed"]}, fetch_list=[y, s])
    assert got_y.dtype == np.float32
    np.testing.assert_allclose(got_y, want["y"], rtol=1e-6)
    np.testing.assert_allclose(got_s, want["sum"], rtol=1e-6)


def test_layers_data_fed_int32_rows_takes_them_as_floats():
    """fluid runs its int32 kernels there (scale then gives all ones for these rows: stored
    in the oracle data); spmd converts the rows to float32, as if they had been fed so."""
    fed = ORACLE["fed_other_dtype"]["int32"]["fed"]
    main, exe, y, _ = _scale_net()
    got, = exe.run(main, feed={"x": fed}, fetch_list=[y])
    want, = exe.run(main, feed={"x": fed.astype("float32")}, fetch_list=[y])
    np.testing.assert_array_equal(got, want)


def test_float_rows_into_an_int_layers_data_are_still_refused():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        out = fluid.layers.scale(fluid.layers.cast(ids, "float32"), 2.0)
        exe = fluid.Executor(fluid.CPUPlace())
        with pytest.raises(FeedError, match="expected dtype int64, got float64"):
            exe.run(feed={"ids": np.ones((2, 1))}, fetch_list=[out])


def test_fluid_data_keeps_its_dtype_check():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        out = fluid.layers.scale(x, 2.0)
        exe = fluid.Executor(fluid.CPUPlace())
        with pytest.raises(ValueError, match="expected dtype float32, got float64"):
            exe.run(feed={"x": np.ones((2, 3))}, fetch_list=[out])


def _vartype_name(dtype) -> str:
    return f"VarType.{dtype.name}"


def test_as_lodtensor_is_fluids():
    want = ORACLE["as_lodtensor"]
    cpu, vt = fluid.CPUPlace(), fluid.core.VarDesc.VarType
    for key, args in [("array_keeps_dtype", (np.ones((2,), "float64"), cpu, vt.FP32)),
                      ("scalar_fp64", (1, cpu, vt.FP64)), ("scalar_int32", (2.5, cpu, "int32"))]:
        t = fluid.executor._as_lodtensor(*args)
        assert _vartype_name(t._dtype()) == want[key][0], key
        np.testing.assert_array_equal(np.array(t), want[key][1])
        assert np.array(t).dtype == want[key][1].dtype, key
    assert want["list"] == "RuntimeError" and want["scalar_no_dtype"] == "AssertionError"
    with pytest.raises(RuntimeError, match="LoD information"):
        fluid.executor._as_lodtensor([1, 2], cpu)
    with pytest.raises(AssertionError, match="dtype should be given"):
        fluid.executor._as_lodtensor(1, cpu)


def test_lod_tensor_made_from_sequence_lengths_keeps_them_through_set():
    want = ORACLE["lengths_constructor"]
    t = fluid.core.LoDTensor([[2, 2]])
    assert [t.lod(), t.recursive_sequence_lengths()] == want["before_set"]
    t.set(np.ones((4, 3), "float32"), fluid.CPUPlace())
    assert [t.lod(), t.recursive_sequence_lengths()] == want["after_set"]
    # through the feed and fetch holders, as Paddle's test_feed_fetch_method does
    scope = fluid.core.Scope()
    fluid.core.set_feed_variable(scope, t, "feed", 0)
    scope.var("fetch").get_fetch_list().append(t)
    assert fluid.core.get_fetch_variable(scope, "fetch", 0).recursive_sequence_lengths() == [
        [2, 2]]


@pytest.mark.parametrize("compiled", [False, True], ids=["Program", "CompiledProgram"])
def test_fluid_data_feed_errors_say_fluids_words_and_spmds_fix(compiled, monkeypatch):
    monkeypatch.setenv("CPU_NUM", "1")
    want = ORACLE["feed_errors"]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="data", shape=[None, 3, 4, 8], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="int64")
        s = fluid.layers.reduce_sum(x) + fluid.layers.reduce_sum(
            fluid.layers.cast(label, "float32"))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    program = fluid.CompiledProgram(main).with_data_parallel() if compiled else main
    good_x, good_label = np.ones((10, 3, 4, 8), "float32"), np.ones((10, 1), "int64")
    cases = [("shape", {"data": np.ones((10, 3, 4, 5), "float32"), "label": good_label},
              r"expected shape \[None, 3, 4, 8\] \(None = any size\), got \[10, 3, 4, 5\]"),
             ("dtype", {"data": good_x, "label": np.ones((10, 1))},
              r"astype\('int64'\)")]
    for key, feed, fix in cases:
        with pytest.raises(ValueError) as caught:
            exe.run(program, feed=feed, fetch_list=[s])
        assert str(caught.value) == want[key]
        assert caught.match(fix)  # the note pytest (and the traceback) shows


def test_a_lod_tensor_fed_to_a_dense_variable_is_computed_on_its_rows():
    want = ORACLE["lod_into_a_dense_variable"]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[3, 2], dtype="float32")  # 3: not its 6 rows
        s = fluid.layers.reduce_sum(fluid.layers.scale(x, 2.0))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    t = fluid.LoDTensor()
    t.set(want["rows"], fluid.CPUPlace())
    t.set_recursive_sequence_lengths(want["lengths"])
    got, = exe.run(main, feed={"x": t}, fetch_list=[s])
    np.testing.assert_allclose(got, want["sum"])
    with pytest.raises(ValueError, match="should have dimensions = 2"):  # dense: checked
        exe.run(main, feed={"x": want["rows"]}, fetch_list=[s])
