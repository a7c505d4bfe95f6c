"""Inference pruning keeps the global variables a sub-block's ops name: a StaticRNN's state
(written by its step block, read by the recurrent op's `states`) survives
save_inference_model, and the loaded model computes what the program did (Paddle's
test_executor_and_use_program_cache.py saves and reloads such a model)."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid


def test_a_saved_static_rnn_reloads_and_computes_the_same(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 2, 4], "float32")  # [time, batch, size]
        h0 = fluid.data("h0", [2, 4], "float32")
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            xt = rnn.step_input(x)
            h = rnn.memory(init=h0)
            nh = fluid.layers.fc([xt, h], 4, act="tanh")
            rnn.update_memory(h, nh)
            rnn.step_output(nh)
        loss = fluid.layers.reduce_mean(rnn())
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.RandomState(2)
    feed = {"x": rng.rand(3, 2, 4).astype("float32"), "h0": rng.rand(2, 4).astype("float32")}
    want, = exe.run(main, feed=feed, fetch_list=[loss])
    fluid.io.save_inference_model(str(tmp_path), ["x", "h0"], [loss], exe, main_program=main,
                                  params_filename="__params__")
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe,
                                                             params_filename="__params__")
        state = next(op for op in prog.global_block().ops
                     if op.type == "recurrent").attr("states")[0]
        assert prog.global_block().has_var(state)
        got, = exe.run(prog, feed=feed, fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-6)
