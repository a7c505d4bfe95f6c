"""Which ops (and variable names) fluid 1.8.5's layers and framework calls build, and what they
compute, for tests/unit/test_program_ops.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_program_ops.py
"""
import os
import sys

import numpy as np

R = np.random.RandomState(5)
X = R.uniform(-1, 1, (4, 3)).astype("float32")
Y = R.uniform(-1, 1, (4, 3)).astype("float32")


def ops_of(block):
    return [[op.type, sorted(op.input_arg_names), sorted(op.output_arg_names)]
            for op in block.ops]


def square_error_cost(fluid):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3], "float32")
        x.stop_gradient = False
        y = fluid.data("y", [-1, 3], "float32")
        cost = fluid.layers.square_error_cost(x, y)
        loss = fluid.layers.mean(cost)
        forward = ops_of(main.global_block())
        fluid.backward.append_backward(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    c, g = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[cost.name, "x@GRAD"])
    return {"name": cost.name, "ops": forward, "cost": c, "x_grad": g}


def create_parameter(fluid):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        block = main.global_block()
        w = block.create_parameter(name="w", shape=[2, 3], dtype="float32",
                                   initializer=fluid.initializer.Constant(0.5))
        plain = block.create_parameter(name="p", shape=[2], dtype="float32")
    return {"main_ops": ops_of(main.global_block()),
            "startup_ops": ops_of(startup.global_block()),
            "startup_vars": sorted(startup.global_block().vars),
            "w": w.name, "plain": plain.name}


def while_loop_grads(fluid, body_kind, i0):
    """Paddle's test_while_loop_op.py::TestApiWhileLoop_Backward (body_kind "square": x = i * i;
    fluid's answer there is 110) and x = x + i * i ("accumulate"), from i = i0, x = 2, while
    i < 11: the loss mean(x) and its gradients w.r.t. i and x."""
    layers = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        i = fluid.data(name="i", shape=[1], dtype="float32")
        i.stop_gradient = False
        eleven = layers.fill_constant(shape=[1], dtype="float32", value=11)
        x = fluid.data(name="x", shape=[1], dtype="float32")
        x.stop_gradient = False

        def body(i, x):
            sq = layers.elementwise_mul(x=i, y=i)
            x = sq if body_kind == "square" else layers.elementwise_add(x, sq)
            return [layers.increment(i), x]

        out = layers.while_loop(lambda i, x: layers.less_than(i, eleven), body, [i, x])
        mean = layers.mean(out[1])
        fluid.backward.append_backward(mean)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"i": np.full([1], i0, "float32"), "x": np.full([1], 2.0, "float32")}
    loss, gi, gx = exe.run(main, feed=feed, fetch_list=[mean.name, i.grad_name, x.grad_name])
    return {"loss": np.asarray(loss), "i_grad": np.asarray(gi), "x_grad": np.asarray(gx)}


def rnn_unit_names(fluid):
    """The parameters of LSTMCell / GRUCell and of contrib's BasicLSTMUnit / BasicGRUUnit (Paddle's
    test_rnn_cell_api.py copies values between them by these names)."""
    from importlib import import_module

    rnn_impl = import_module(fluid.__name__ + ".contrib.layers.rnn_impl")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 8], dtype="float32")
        h = fluid.data(name="h", shape=[None, 16], dtype="float32")
        c = fluid.data(name="c", shape=[None, 16], dtype="float32")
        fluid.layers.LSTMCell(16)(x, [h, c])
        rnn_impl.BasicLSTMUnit("basicLSTM", 16, None, None, None, None, 1.0, "float32")(x, h, c)
        fluid.layers.GRUCell(16)(x, h)
        rnn_impl.BasicGRUUnit("basicGRU", 16, None, None, None, None, "float32")(x, h)
    return {"params": [[p.name, list(p.shape)] for p in main.all_parameters()]}


SPLIT_X = np.arange(20, dtype="float32").reshape(10, 2)


def split_merge_lod(fluid, x_lens, mask, level):
    """split_lod_tensor / merge_lod_tensor of a LoD input (one mask value per sequence of LoD
    level `level`): both halves with their LoD, the merge, and d sum(merge * w) / d x."""
    from importlib import import_module

    cf = import_module(fluid.__name__ + ".layers.control_flow")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32", lod_level=len(x_lens))
        x.stop_gradient = False
        m = fluid.data(name="m", shape=[-1, 1], dtype="bool")
        t, f = cf.split_lod_tensor(input=x, mask=m, level=level)
        out = cf.merge_lod_tensor(in_true=t, in_false=f, x=x, mask=m, level=level)
        w = fluid.layers.assign(np.arange(20, dtype="float32").reshape(10, 2) / 10.0)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, w))
        fluid.backward.append_backward(loss)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(startup)
    feed = {"x": fluid.create_lod_tensor(SPLIT_X, x_lens, place),
            "m": np.array(mask, "bool").reshape(-1, 1)}
    got = exe.run(main, feed=feed, fetch_list=[t, f, out, "x@GRAD"], return_numpy=False)
    return {k: {"value": np.array(v), "lod": v.recursive_sequence_lengths()}
            for k, v in zip(("true", "false", "out", "x_grad"), got)}


ARG_CASES = {
    "gv_int_shape": lambda L: L.create_global_var(1, 2.0, np.float32),
    "gv_float_items": lambda L: L.create_global_var([1.0, 2.0], 2.0, "float32"),
    "gv_complex": lambda L: L.create_global_var([1, 2], 2.0, np.complex128),
    "gv_ndarray_shape": lambda L: L.create_global_var(np.array([2, 3]), 2.0, "float32"),
    "gv_np_int_items": lambda L: L.create_global_var([np.int64(2), 3], 2.0, "float32"),
    "gv_tuple": lambda L: L.create_global_var((2, 3), 2.0, "int64"),
    "p_int_shape": lambda L: L.create_parameter(1, np.float32),
    "p_float_items": lambda L: L.create_parameter([1.0, 2.0], "float32"),
    "p_attr_array": lambda L: L.create_parameter([1, 2], np.float32, attr=np.arange(6)),
    "p_init_array": lambda L: L.create_parameter([1, 2], np.float32,
                                                 default_initializer=np.arange(6)),
    "p_complex": lambda L: L.create_parameter([1, 2], np.complex128),
    "p_ndarray_shape": lambda L: L.create_parameter(np.array([2, 3]), "float32"),
}


def argument_checks(fluid):
    """create_global_var / create_parameter on bad and good arguments: the shape made, or
    whether the error is a TypeError or a ValueError (Paddle's test_create_global_var.py and
    test_create_parameter.py)."""
    out = {}
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        for name, make in ARG_CASES.items():
            try:
                out[name] = {"shape": [int(d) for d in make(fluid.layers).shape]}
            except Exception as e:  # noqa: BLE001 - the kind is what is recorded
                out[name] = {"type_error": isinstance(e, TypeError),
                             "value_error": isinstance(e, ValueError)}
    return out


DECAYS = {"exponential": ("exponential_decay", 1.0, 5, 0.5),
          "natural_exp": ("natural_exp_decay", 1.0, 5, 0.5),
          "inverse_time": ("inverse_time_decay", 1.0, 5, 0.5)}


def lr_decay(fluid, kind, staircase):
    """The ops an LR decay builds (main and startup) and its value over 10 runs."""
    layer, lr, steps, rate = DECAYS[kind]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        out = getattr(fluid.layers, layer)(lr, steps, rate, staircase)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    values = [exe.run(main, fetch_list=[out])[0] for _ in range(10)]
    return {"main": [op.type for op in main.global_block().ops],
            "startup": [op.type for op in startup.global_block().ops],
            "values": np.concatenate(values)}


POW_R = np.random.RandomState(9)
POW_X = POW_R.uniform(0.1, 3, (300,)).astype("float32")
POW_Y = POW_R.uniform(-3, 3, (300,)).astype("float32")


def elementwise_pow(fluid):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [300], "float32")
        y = fluid.data("y", [300], "float32")
        z = fluid.layers.elementwise_pow(x, y)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": POW_X, "y": POW_Y},
                                                fetch_list=[z])
    return {"out": got}


def backward_helpers(fluid):
    """fluid.backward's private helpers after append_backward, as Paddle's test_backward.py
    calls them: stop-gradient names, the op path to the loss, the no-grad variables."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x_no_grad", shape=[13], dtype="int64", lod_level=0)
        x2 = fluid.data(name="x2", shape=[-1, 13], dtype="int64")
        x_emb = fluid.embedding(x, size=[100, 64], param_attr=fluid.ParamAttr(name="w2v"))
        x2_emb = fluid.embedding(x2, size=[100, 64], param_attr=fluid.ParamAttr(name="w2v"))
        x_merge = fluid.layers.elementwise_add(x_emb, x2_emb, name="x_add_x2")
        y = fluid.data(name="label", shape=[-1, 1], dtype="float32")
        pred = fluid.layers.fc(x_merge, size=1, act="softmax",
                               param_attr=fluid.ParamAttr(name="fc_w"), name="fc_predict")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y), name="mean_loss")
        fluid.backward.append_backward(loss)
        block = main.global_block()
        no_grad = fluid.backward._get_stop_gradients_(main)
        block_no_grad = set(map(fluid.backward._strip_grad_suffix_, no_grad[0]))
        path = fluid.backward._find_op_path_(block, [loss], [], block_no_grad)
        no_grad_vars = fluid.backward._find_no_grad_vars(block, path, [loss], block_no_grad)
    out = {"stop_gradients": sorted(no_grad[0]), "op_path": [op.type for op in path],
           "no_grad_vars": sorted(no_grad_vars)}
    # an output nothing reads (softmax_with_cross_entropy's Softmax), and an input path
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        x.stop_gradient = False
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        h = fluid.layers.fc(x, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(h, label))
        fluid.backward.append_backward(loss)
        block = main.global_block()
        no_grad = set(map(fluid.backward._strip_grad_suffix_,
                          fluid.backward._get_stop_gradients_(main)[0]))
        path = fluid.backward._find_op_path_(block, [loss], [x], no_grad)
        out["swce_op_path"] = [op.type for op in path]
        out["swce_no_grad_set"] = sorted(no_grad)
        out["swce_no_grad_vars"] = sorted(
            fluid.backward._find_no_grad_vars(block, path, [loss], no_grad))
    return out


WHILE_CASES = [("square", 1.0), ("square", 5.0), ("accumulate", 1.0), ("accumulate", 5.0)]

CASES = {"square_error_cost": square_error_cost, "create_parameter": create_parameter,
         "rnn_unit_names": rnn_unit_names, "argument_checks": argument_checks,
         "elementwise_pow": elementwise_pow, "backward_helpers": backward_helpers,
         "split_merge_level0": lambda fluid: split_merge_lod(fluid, [[3, 6, 1]], [0, 1, 0], 0),
         "split_merge_level1": lambda fluid: split_merge_lod(
             fluid, [[2, 1], [3, 4, 3]], [1, 0, 1], 1),
         "split_merge_2levels_level0": lambda fluid: split_merge_lod(
             fluid, [[2, 1], [3, 4, 3]], [0, 1], 0)}
CASES.update({f"lr_{kind}_{int(st)}": (lambda fluid, k=kind, v=st: lr_decay(fluid, k, v))
              for kind in DECAYS for st in (False, True)})
CASES.update({f"while_{kind}_{int(i0)}": (lambda fluid, k=kind, v=i0: while_loop_grads(
    fluid, k, v)) for kind, i0 in WHILE_CASES})


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import paddle
    import paddle.fluid as fluid
    from oracle_io import save

    out = {}
    for name, make in CASES.items():
        try:
            out[name] = make(fluid)
        except Exception as e:  # noqa: BLE001 - recorded: the test expects the same error
            out[name] = {"error": type(e).__name__, "message": str(e)[:300]}
    save("program_ops", out, meta={"paddle": paddle.__version__})
