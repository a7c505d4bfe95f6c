"""Build-time checks as fluid 1.8's InferShape has them (Paddle's test_layers.py builds each of
these programs): what fluid checks only in its kernel is checked at run time, with the same
meaning."""
import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError


def _exe_run(main, startup, feed, fetch):
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        return exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)


def test_crop_tensor_takes_list_entries_of_any_dtype_at_build_and_crops_with_int_ones():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[6, 5, 8])
        dim_f = fluid.layers.data(name="dim_f", shape=[1], append_batch_size=False)
        fluid.layers.crop_tensor(x, shape=[-1, dim_f, 2, 4], offsets=[0, dim_f, 1, 0])
        dim = fluid.layers.data(name="dim", shape=[1], dtype="int32",
                                append_batch_size=False)
        out = fluid.layers.crop_tensor(x, shape=[-1, 2, dim, 4], offsets=[0, dim, 1, 0])
    xv = np.arange(2 * 6 * 5 * 8, dtype="float32").reshape(2, 6, 5, 8)
    got, = _exe_run(main, startup, {"x": xv, "dim": np.array([2], "int32"),
                                    "dim_f": np.array([1.0], "float32")}, [out])
    np.testing.assert_array_equal(np.array(got), xv[:, 2:4, 1:3, 0:4])


def test_filter_by_instag_reads_a_fed_tag_lod_and_keeps_whole_rows_of_a_3d_ins():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ins = fluid.layers.data(name="ins", shape=[2, 1], dtype="float32", lod_level=0)
        tag = fluid.layers.data(name="tag", shape=[1], dtype="int64", lod_level=0)
        wanted = fluid.layers.assign(np.array([7], "int64"))
        out, weight = fluid.layers.filter_by_instag(ins, tag, wanted, is_lod=False)
    place = fluid.CPUPlace()
    iv = np.arange(6, dtype="float32").reshape(3, 2, 1)
    tags = fluid.create_lod_tensor(np.array([[1], [7], [7], [3]], "int64"), [[1, 2, 1]], place)
    got, w = _exe_run(main, startup, {"ins": iv, "tag": tags}, [out, weight])
    np.testing.assert_array_equal(np.array(got), iv[1:2])  # instance 1 carries tag 7
    np.testing.assert_array_equal(np.array(w), [[1.0]])


def test_sequence_softmax_of_a_wide_input_builds_and_fails_at_run_time_as_fluid():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_softmax(x)
    feed = {"x": fluid.create_lod_tensor(np.ones((4, 3), "float32"), [[1, 3]],
                                         fluid.CPUPlace())}
    with pytest.raises(ExecutionError, match="width of each timestep"):
        _exe_run(main, startup, feed, [out])


def test_sequence_slice_checks_offset_and_length_shapes_as_fluid():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        seqs = fluid.layers.data(name="x", shape=[10, 5], dtype="float32", lod_level=1)
        offset = fluid.layers.assign(np.array([[0, 1]], "int32"))
        length = fluid.layers.assign(np.array([[2, 1]], "int32"))
        fluid.layers.sequence_slice(input=seqs, offset=offset, length=length)  # builds
        with pytest.raises(InvalidArgumentError, match="same shape"):
            fluid.layers.sequence_slice(input=seqs, offset=offset,
                                        length=fluid.layers.assign(np.array([[2]], "int32")))


def test_warpctc_padded_reads_dim_2_as_the_classes_as_fluid():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        predict = fluid.layers.data(name="predict", shape=[4, 4, 8], dtype="float32")
        loss = fluid.layers.warpctc(
            input=predict, label=fluid.layers.data(name="label", shape=[12, 1], dtype="int32"),
            input_length=fluid.layers.data(name="ll", shape=[11], dtype="int64"),
            label_length=fluid.layers.data(name="bl", shape=[12], dtype="int64"))
        assert list(loss.shape)[-1] == 1
        with pytest.raises(InvalidArgumentError, match="blank"):
            fluid.layers.warpctc(
                input=predict, label=fluid.layers.data(name="l2", shape=[1], dtype="int32"),
                blank=4,  # dim 2 has 4 classes
                input_length=fluid.layers.data(name="ll2", shape=[1], dtype="int64"),
                label_length=fluid.layers.data(name="bl2", shape=[1], dtype="int64"))
