"""Reference outputs of PaddlePaddle 1.8.5 for the loader, LoDTensor and feed behaviours that
Paddle 1.8's own unit tests use: the places' `_type()` codes, LoDTensor `_dtype()` and
`_place()`, sequence lengths given as ranges, the loaders' `_check_input_array`, and what a
fluid.layers.data variable computes when fed another dtype than its own.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_loader_feed.py
"""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402


def place_cases():
    cpu = fluid.CPUPlace()
    p = fluid.core.Place()
    p.set_place(cpu)
    t = fluid.LoDTensor()
    t.set(np.ones((2, 3), "float32"), cpu)
    return {
        "cpu_type": cpu._type(),
        "set_place_type": p._type(),
        "set_place_is_cpu": p.is_cpu_place(),
        "tensor_place_equals_cpu": t._place()._equals(cpu),
    }


def dtype_cases():
    out = {}
    for name in ["float32", "float64", "int32", "int64", "bool", "uint8"]:
        t = fluid.LoDTensor()
        t.set(np.zeros((1,), name), fluid.CPUPlace())
        out[name] = str(t._dtype())
    return out


def range_lengths():
    t = fluid.LoDTensor()
    t.set(np.arange(6, dtype="float32").reshape(6, 1), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([range(1, 4)])
    return {"lengths": t.recursive_sequence_lengths(), "lod": t.lod()}


def check_input_array():
    good = fluid.reader.GeneratorLoader._check_input_array([[1, 2], [3, 4]])
    try:
        fluid.reader.GeneratorLoader._check_input_array([[1, 2], [3]])
        ragged = "accepted"
    except TypeError:
        ragged = "TypeError"
    return {"good": good, "ragged": ragged}


def fed_other_dtype():
    """layers.data float32 fed float64 and int32 rows: fluid checks no dtype there."""
    out = {}
    for fed in ["float64", "int32"]:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.scale(x, scale=0.5, bias=1.0)
            s = fluid.layers.reduce_sum(y)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        value = (np.arange(6).reshape(2, 3) + 0.25).astype(fed)
        got_y, got_s = exe.run(main, feed={"x": value}, fetch_list=[y, s])
        out[fed] = {"fed": value, "y": got_y, "sum": got_s}
    return out


def as_lodtensor_cases():
    cpu = fluid.CPUPlace()
    VT = fluid.core.VarDesc.VarType
    out = {}
    t = fluid.executor._as_lodtensor(np.ones((2,), "float64"), cpu, VT.FP32)
    out["array_keeps_dtype"] = [str(t._dtype()), np.array(t)]
    t = fluid.executor._as_lodtensor(1, cpu, VT.FP64)
    out["scalar_fp64"] = [str(t._dtype()), np.array(t)]
    t = fluid.executor._as_lodtensor(2.5, cpu, "int32")
    out["scalar_int32"] = [str(t._dtype()), np.array(t)]
    for key, args in [("list", ([1, 2], cpu)), ("scalar_no_dtype", (1, cpu))]:
        try:
            fluid.executor._as_lodtensor(*args)
            out[key] = "accepted"
        except Exception as e:  # noqa: BLE001 - the class is what is stored
            out[key] = type(e).__name__
    return out


def lengths_constructor():
    t = fluid.core.LoDTensor([[2, 2]])
    before = [t.lod(), t.recursive_sequence_lengths()]
    t.set(np.ones((4, 3), "float32"), fluid.CPUPlace())
    return {"before_set": before, "after_set": [t.lod(), t.recursive_sequence_lengths()]}


def feed_errors():
    """fluid.data's checks: the exact messages (Paddle's tests compare them whole)."""
    out = {}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="data", shape=[None, 3, 4, 8], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="int64")
        s = fluid.layers.reduce_sum(x) + fluid.layers.reduce_sum(
            fluid.layers.cast(label, "float32"))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    good_x = np.ones((10, 3, 4, 8), "float32")
    good_label = np.ones((10, 1), "int64")
    for key, feed in [("shape", {"data": np.ones((10, 3, 4, 5), "float32"),
                                 "label": good_label}),
                      ("dtype", {"data": good_x, "label": np.ones((10, 1))})]:
        try:
            exe.run(main, feed=feed, fetch_list=[s])
            out[key] = "accepted"
        except ValueError as e:
            out[key] = str(e)
    return out


def lod_into_a_dense_variable():
    """A LoDTensor fed to a lod_level=0 fluid.data: accepted, its batch size (rows) not
    checked, the ops computing on its rows."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[3, 2], dtype="float32")
        s = fluid.layers.reduce_sum(fluid.layers.scale(x, 2.0))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    t = fluid.LoDTensor()
    t.set(np.arange(12, dtype="float32").reshape(6, 2), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[1, 2, 3]])
    got, = exe.run(main, feed={"x": t}, fetch_list=[s])
    return {"rows": np.array(t), "lengths": [[1, 2, 3]], "sum": got}


def io_cases():
    """save/load to memory (dirname=None) and the warnings save_inference_model gives."""
    import tempfile
    import warnings

    out = {}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        y = fluid.layers.fc(x, 1, param_attr=fluid.initializer.Constant(0.5),
                            bias_attr=fluid.initializer.Constant(0.25))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    params = fluid.io.save_persistables(exe, None, main)
    out["save_to_memory_type"] = type(params).__name__
    with tempfile.TemporaryDirectory() as d:
        fluid.io.save_inference_model(d, ["x"], [y], exe, main, "model", "params")
        with open(os.path.join(d, "model"), "rb") as f:
            model = f.read()
    program, feeds, fetches = fluid.io.load_inference_model(None, exe, model, params)
    value = np.array([[1, 2], [3, 4]], "float32")
    out["from_memory"] = {"x": value, "y": exe.run(program, feed={feeds[0]: value},
                                                   fetch_list=fetches)[0]}
    try:
        fluid.io.load_inference_model(None, exe, model, None)
        out["no_params"] = "accepted"
    except ValueError:
        out["no_params"] = "ValueError"

    def warned(build, **kwargs):
        m, st = fluid.Program(), fluid.Program()
        with fluid.program_guard(m, st):
            target = build()
        e = fluid.Executor(fluid.CPUPlace())
        e.run(st)
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fluid.io.save_inference_model(d, ["x"], [target], e, m, **kwargs)
        return [str(i.message) for i in w]

    def no_var():
        x = fluid.layers.data(name="x", shape=[-1, 1], dtype="float32",
                              append_batch_size=False)
        return x + 1

    def with_auc():
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        predict = fluid.layers.fc(x, 2, act="softmax")
        fluid.layers.auc(input=predict, label=y)
        return predict

    def fc():
        return fluid.layers.fc(fluid.layers.data(name="x", shape=[2], dtype="float32"), 1)

    out["warnings"] = {"no_var": warned(no_var), "auc": warned(with_auc),
                       "program_only": warned(fc, program_only=True)}
    return out


def py_reader_queue():
    """Batches pushed into py_reader.queue by the program itself, read without start()."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 2), (-1, 1)],
                                        dtypes=["float32", "int64"])
        queue = reader.queue
        x, y = fluid.layers.read_file(reader)
        out = fluid.layers.scale(x, 2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fetched = []
    for i in range(3):
        batch = fluid.LoDTensorArray()
        for value in (np.full((i + 1, 2), i, "float32"), np.full((i + 1, 1), i, "int64")):
            t = fluid.LoDTensor()
            t.set(value, fluid.CPUPlace())
            batch.append(t)
        queue.push(batch)
        fetched.append(exe.run(main, fetch_list=[out, y]))
    queue.close()
    try:
        exe.run(main, fetch_list=[out])
        end = "ran"
    except fluid.core.EOFException:
        end = "EOFException"
    pushed_after_close = queue.push(fluid.LoDTensorArray())
    return {"fetched": fetched, "end": end, "push_after_close": bool(pushed_after_close),
            "capacity": queue.capacity()}


def fetched_tensor_array():
    """A LoDTensorArray fetched from a data-parallel program on 2 CPU places, merged or not."""
    os.environ["CPU_NUM"] = "2"
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.zeros(shape=[1], dtype="int64")
        img = fluid.data(name="image", shape=[-1, 4], dtype="float32")
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        pred = fluid.layers.fc(img, 3, act="softmax",
                               param_attr=fluid.initializer.Constant(0.1),
                               bias_attr=fluid.initializer.Constant(0.0))
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
        fluid.optimizer.SGD(0.5).minimize(loss)
        array = fluid.layers.array_write(x=img, i=i)
        i = fluid.layers.increment(i)
        fluid.layers.array_write(x=label, i=i, array=array)
        i = fluid.layers.increment(i)
        fluid.layers.array_write(x=loss, i=i, array=array)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"image": (np.arange(32, dtype="float32").reshape(8, 4) / 32),
            "label": (np.arange(8) % 3).reshape(8, 1).astype("int64")}
    binary = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    out = {"feed": feed}
    loss_v, array_v = exe.run(binary, feed=feed, fetch_list=[loss, array], return_merged=False)
    out["unmerged"] = {"loss": [np.array(v) for v in loss_v],
                       "array": [[np.array(t) for t in place] for place in array_v]}
    loss_v, array_v = exe.run(binary, feed=feed, fetch_list=[loss, array], return_merged=True)
    out["merged"] = {"loss": np.array(loss_v), "array": [np.array(t) for t in array_v]}
    _, tensors = exe.run(binary, feed=feed, fetch_list=[loss, array], return_numpy=False)
    out["tensors"] = {"type": type(tensors).__name__, "len": len(tensors),
                      "item_type": type(tensors[0]).__name__}
    return out


def persisted_tensor_array():
    """A persistable tensor array read back from the scope (var.get_lod_tensor_array())."""
    from paddle.fluid.layers.control_flow import (
        array_to_lod_tensor,
        lod_rank_table,
        lod_tensor_to_array,
    )
    t = fluid.LoDTensor()
    t.set(np.arange(20).reshape(20, 1).astype("float32"), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 3], [3, 6, 2, 6, 3]])
    program = fluid.Program()
    with fluid.program_guard(program):
        x = fluid.layers.data(name="x", shape=[1], lod_level=2)
        table = lod_rank_table(x, level=0)
        array = lod_tensor_to_array(x, table)
        array.persistable = True
        result = array_to_lod_tensor(array, table)
        result.persistable = True
    scope = fluid.core.Scope()
    fluid.Executor(fluid.CPUPlace()).run(program, feed={"x": t}, scope=scope)
    elements = scope.find_var(array.name).get_lod_tensor_array()
    back = scope.find_var(result.name).get_tensor()
    return {"rows": np.array(t), "lengths": t.recursive_sequence_lengths(),
            "elements": [np.array(e) for e in elements],
            "element_lengths": [e.recursive_sequence_lengths() for e in elements],
            "result": np.array(back), "result_lengths": back.recursive_sequence_lengths()}


if __name__ == "__main__":
    save("loader_feed", {
        "meta": {"fluid": paddle.__version__},
        "places": place_cases(),
        "dtypes": dtype_cases(),
        "range_lengths": range_lengths(),
        "check_input_array": check_input_array(),
        "fed_other_dtype": fed_other_dtype(),
        "as_lodtensor": as_lodtensor_cases(),
        "lengths_constructor": lengths_constructor(),
        "feed_errors": feed_errors(),
        "lod_into_a_dense_variable": lod_into_a_dense_variable(),
        "io": io_cases(),
        "py_reader_queue": py_reader_queue(),
        "fetched_tensor_array": fetched_tensor_array(),
        "persisted_tensor_array": persisted_tensor_array(),
    })
