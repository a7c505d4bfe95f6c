"""LoD tensors: creating them as fluid does, feeding them (exe.run, DataFeeder, DataLoader),
fetching their LoD, the LoD kept by the ops that keep it, bad LoD named in a feed error, and
a LoD batch split over places by whole sequences."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError, InvalidArgumentError
from spmd.executor.feed import split_feed

PLACE = fluid.CPUPlace()


def test_create_lod_tensor_from_a_list_of_sequences():
    t = fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], PLACE)
    assert t.lod() == [[0, 2, 5]] and t.recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_array_equal(np.array(t), np.arange(1, 6).reshape(5, 1))
    assert np.array(t).dtype == np.int64 and t.has_valid_recursive_sequence_lengths()


def test_create_lod_tensor_from_an_array_and_from_a_tensor():
    data = np.arange(12.0).reshape(6, 2)
    t = fluid.create_lod_tensor(data, [[1, 2], [1, 1, 4]], PLACE)
    assert t.lod() == [[0, 1, 3], [0, 1, 2, 6]]
    again = fluid.create_lod_tensor(t, [[6]], PLACE)
    assert again.lod() == [[0, 6]]
    np.testing.assert_array_equal(np.array(again), data)


def test_lengths_that_do_not_match_are_refused():
    with pytest.raises(InvalidArgumentError, match="lengths \\[2, 3\\].*\\[\\[2, 2\\]\\]"):
        fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 2]], PLACE)
    with pytest.raises(InvalidArgumentError, match="ends at offset 5.*4 rows"):
        fluid.create_lod_tensor(np.zeros((4, 1)), [[2, 3]], PLACE)


def test_lod_tensor_api():
    t = fluid.LoDTensor()
    t.set(np.ones((3, 2), "float32"), PLACE)
    assert t.lod() == [] and t.shape() == [3, 2]
    t.set_lod([[0, 1, 3]])
    assert t.recursive_sequence_lengths() == [[1, 2]]
    t.set_recursive_sequence_lengths([[3]])
    assert t.lod() == [[0, 3]] and t.has_valid_recursive_sequence_lengths()
    t.set_recursive_sequence_lengths([[1, 1]])
    assert not t.has_valid_recursive_sequence_lengths()
    assert fluid.core.LoDTensor is fluid.LoDTensor


def test_create_random_int_lodtensor():
    t = fluid.create_random_int_lodtensor([[2, 3]], [4], PLACE, low=0, high=9)
    a = np.array(t)
    assert a.shape == (5, 4) and a.dtype == np.int64 and a.min() >= 0 and a.max() <= 9
    assert t.recursive_sequence_lengths() == [[2, 3]]


def _text_program():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(words, size=[20, 4])
        hidden = fluid.layers.fc(emb, 3, act="tanh")
        pooled = fluid.layers.sequence_pool(hidden, "sum")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(
            fluid.layers.softmax(pooled), label))
    return main, start, words, label, emb, hidden, pooled, loss


def test_lod_levels_follow_the_ops_that_keep_lod():
    main, start, words, label, emb, hidden, pooled, loss = _text_program()
    assert (words.lod_level, emb.lod_level, hidden.lod_level) == (1, 1, 1)
    assert (pooled.lod_level, loss.lod_level, label.lod_level) == (0, 0, 0)


def test_fetching_with_return_numpy_false_gives_the_lod():
    main, start, words, label, emb, hidden, pooled, loss = _text_program()
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    feed = {"words": fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], PLACE),
            "label": np.array([[0], [2]], "int64")}
    e, h, p = exe.run(main, feed=feed, fetch_list=[emb, hidden, pooled], scope=scope,
                      return_numpy=False)
    assert e.lod() == [[0, 2, 5]] and h.lod() == [[0, 2, 5]] and p.lod() == []
    np.testing.assert_allclose(np.array(p), np.add.reduceat(np.array(h), [0, 2]), rtol=1e-6)


def test_bad_lod_in_a_feed_names_the_variable():
    main, start, *_ = _text_program()
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    bad = fluid.LoDTensor()
    bad.set(np.zeros((4, 1), "int64"), PLACE)
    bad.set_lod([[0, 3, 2, 4]])
    with pytest.raises(FeedError, match="feed 'words'.*decreases"):
        exe.run(main, feed={"words": bad, "label": np.zeros((3, 1), "int64")}, scope=scope)
    bad.set_lod([[0, 1, 3]])
    with pytest.raises(FeedError, match="feed 'words'.*must cover the tensor's 4 rows"):
        exe.run(main, feed={"words": bad, "label": np.zeros((2, 1), "int64")}, scope=scope)


def test_lod_fed_to_a_dense_variable_is_computed_on_its_rows():
    """fluid 1.8.5 takes it too (tests/unit/test_loader_feed_compat.py has its numbers); its
    LoD is not carried on to what the dense variable's ops write."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        y = fluid.layers.scale(x, 2.0)
    t = fluid.create_lod_tensor(np.arange(3, dtype="float32").reshape(3, 1), [[1, 2]], PLACE)
    (got,) = fluid.Executor(PLACE).run(main, feed={"x": t}, fetch_list=[y])
    np.testing.assert_array_equal(got, np.arange(3).reshape(3, 1) * 2.0)
    # the book's recommender feeds its ids as one-row sequences: the same
    ones = fluid.create_lod_tensor(np.ones((3, 1), "float32"), [[1, 1, 1]], PLACE)
    (got,) = fluid.Executor(PLACE).run(main, feed={"x": ones}, fetch_list=[y])
    np.testing.assert_array_equal(got, np.full((3, 1), 2.0))


def test_a_sequence_op_without_lod_says_how_to_give_it():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32", lod_level=1)
        y = fluid.layers.sequence_pool(x, "sum")
    with pytest.raises(Exception, match="input X carries no LoD; feed it as a LoDTensor"):
        fluid.Executor(PLACE).run(main, feed={"x": np.ones((3, 2), "float32")}, fetch_list=[y])


def test_data_feeder_builds_lod_from_sequences():
    main, start, words, label, *_ = _text_program()
    feeder = fluid.DataFeeder([words, label], PLACE, program=main)
    feed = feeder.feed([([1, 2], 0), ([3, 4, 5], 1), ([6], 2)])
    assert feed["words"].recursive_sequence_lengths() == [[2, 3, 1]]
    np.testing.assert_array_equal(np.array(feed["words"]).ravel(), [1, 2, 3, 4, 5, 6])
    assert feed["label"].shape == (3, 1)


def test_data_feeder_two_levels():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        para = fluid.layers.data(name="para", shape=[1], dtype="int64", lod_level=2)
    feed = fluid.DataFeeder([para], PLACE, program=main).feed(
        [([[1, 2], [3]],), ([[4, 5, 6]],)])
    assert feed["para"].recursive_sequence_lengths() == [[2, 1], [2, 1, 3]]


def test_data_loader_feeds_lod_batches():
    main, start, words, label, emb, hidden, pooled, loss = _text_program()
    loader = fluid.io.DataLoader.from_generator(feed_list=[words, label], capacity=2)
    samples = [([1, 2], 0), ([3, 4, 5], 1)]
    loader.set_sample_list_generator(lambda: iter([samples]), places=PLACE)
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    (batch,) = list(loader())
    (h,) = exe.run(main, feed=batch[0], fetch_list=[hidden], scope=scope, return_numpy=False)
    assert h.recursive_sequence_lengths() == [[2, 3]]


def test_a_lod_batch_is_split_over_places_by_sequences():
    t = fluid.create_lod_tensor(np.arange(9.0).reshape(9, 1), [[1, 2], [2, 1, 6]], PLACE)
    a, b = split_feed({"x": t, "y": np.arange(2.0).reshape(2, 1)}, 2)
    assert a["x"].recursive_sequence_lengths() == [[1], [2]]
    assert b["x"].recursive_sequence_lengths() == [[2], [1, 6]]
    np.testing.assert_array_equal(np.array(b["x"]).ravel(), np.arange(2.0, 9.0))
    assert a["y"].shape == (1, 1)
    with pytest.raises(FeedError, match="holds 2 sequence\\(s\\) but there are 3 places"):
        split_feed({"x": t}, 3)


def test_scope_tensors_keep_their_lod():
    scope = fluid.Scope()
    tensor = scope.var("x").get_tensor()
    tensor.set(np.zeros((5, 1), "float32"), PLACE)
    tensor.set_recursive_sequence_lengths([[2, 3]])
    assert scope.find_var("x").get_tensor().lod() == [[0, 2, 5]]
    assert tensor.has_valid_recursive_sequence_lengths()


def test_the_tensor_methods_of_fluids_bindings_that_programs_call():
    """fluid 1.8.5's answers (its pybind LoDTensor): [0] dims and not initialized before a
    set; _copy keeps the data and the LoD. PaddleRec's infer.py zeroes its AUC states with
    np.zeros(t._get_dims())."""
    scope = fluid.Scope()
    t = scope.var("x").get_tensor()
    assert t._get_dims() == [0] and t.shape() == [0] and not t._is_initialized()
    t.set(np.arange(6, dtype="float32").reshape(2, 3), PLACE)
    t.set_recursive_sequence_lengths([[1, 1]])
    copy = t._copy(PLACE)
    assert copy._get_dims() == [2, 3] and copy.recursive_sequence_lengths() == [[1, 1]]
    assert np.array(copy).tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert t._place()._equals(PLACE)
    t.set(np.zeros(t._get_dims(), "int64"), PLACE)  # the set_zero idiom
    assert np.array(scope.find_var("x").get_tensor()).tolist() == [[0, 0, 0], [0, 0, 0]]
    t._clear()
    assert not t._is_initialized() and scope.find_var("x") is not None
    standalone = fluid.LoDTensor()
    assert standalone._get_dims() == [0] and not standalone._is_initialized()
    standalone._set_dims([2, 2])
    assert standalone._get_dims() == [2, 2]


def test_training_a_text_model_on_lod_batches_lowers_the_loss():
    main, start, words, label, emb, hidden, pooled, loss = _text_program()
    start.random_seed = main.random_seed = 7
    with fluid.program_guard(main, start):
        fluid.optimizer.SGD(0.2).minimize(loss)
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    feed = {"words": fluid.create_lod_tensor([[1, 2], [3, 4, 5], [6]], [[2, 3, 1]], PLACE),
            "label": np.array([[0], [1], [2]], "int64")}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
              for _ in range(30)]
    assert losses[-1] < losses[0] * 0.5


def test_print_shows_the_lod_as_fluid_does(capsys):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32", lod_level=1)
        y = fluid.layers.Print(x, message="hello")
    t = fluid.create_lod_tensor(np.ones((3, 1), "float32"), [[1, 2]], PLACE)
    (got,) = fluid.Executor(PLACE).run(main, feed={"x": t}, fetch_list=[y], return_numpy=False)
    assert "\tLoD: [[ 0,1,3, ]]\n" in capsys.readouterr().out  # fluid 1.8.5's line
    assert got.lod() == [[0, 1, 3]]


def test_fetching_a_tensor_array_gives_its_elements():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32", lod_level=1)
        arr = fluid.layers.create_array("float32")
        i = fluid.layers.fill_constant([1], "int64", 0)
        fluid.layers.array_write(x, i, array=arr)
        fluid.layers.array_write(fluid.layers.scale(x, 2.0), fluid.layers.increment(i),
                                 array=arr)
    t = fluid.create_lod_tensor(np.arange(3.0, dtype="float32").reshape(3, 1), [[1, 2]], PLACE)
    exe = fluid.Executor(PLACE)
    (items,) = exe.run(main, feed={"x": t}, fetch_list=[arr])
    assert isinstance(items, list) and len(items) == 2  # fluid: a list of arrays
    np.testing.assert_array_equal(items[1], 2 * np.array(t))
    (tensors,) = exe.run(main, feed={"x": t}, fetch_list=[arr], return_numpy=False)
    assert isinstance(tensors, fluid.LoDTensorArray)
    assert [a.lod() for a in tensors] == [[[0, 1, 3]], [[0, 1, 3]]]


def test_element_accessors_read_and_write_one_flat_element_of_their_dtype():
    t = fluid.LoDTensor()
    t.set(np.arange(6, dtype="float32").reshape(2, 3), fluid.CPUPlace())
    assert t._get_float_element(4) == 4.0
    t._set_float_element(5, 2.5)
    assert np.asarray(t)[1, 2] == 2.5
    with pytest.raises(InvalidArgumentError, match="the data is float32, this accessor reads "
                                                   "float64"):
        t._get_double_element(0)
    d = fluid.LoDTensor()
    d.set(np.zeros((2, 2)).T, fluid.CPUPlace())  # a float64, non-contiguous array
    d._set_double_element(1, 7.0)
    assert d._get_double_element(1) == 7.0 and np.asarray(d).reshape(-1)[1] == 7.0
