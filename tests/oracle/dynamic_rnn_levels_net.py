"""The DynamicRNN programs of tests/oracle/make_dynamic_rnn_levels.py, built on the `fluid`
given (real fluid 1.8.5 for the oracle, spmd.fluid for the test): the compile-time lod_level
of what step_input, memory, the step's output and drnn() give, for a 1- and a 2-level input,
and a DynamicRNN nested in another (Paddle's test_dyn_rnn.py)."""


def levels(fluid, lod_level):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data(name="word", shape=[1], dtype="int64", lod_level=lod_level)
        emb = fluid.layers.embedding(input=words, size=[30, 4])
        drnn = fluid.layers.DynamicRNN()
        with drnn.block():
            step = drnn.step_input(emb)
            mem = drnn.memory(shape=[5], dtype="float32")
            out = fluid.layers.fc(input=[step, mem], size=5)
            drnn.update_memory(mem, out)
            drnn.output(out)
        result = drnn()
    return {"emb": emb.lod_level, "step": step.lod_level, "memory": mem.lod_level,
            "out": out.lod_level, "result": result.lod_level}


def nested_levels(fluid):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data(name="word", shape=[1], dtype="int64", lod_level=2)
        outer = fluid.layers.DynamicRNN()
        with outer.block():
            sentence = outer.step_input(words)
            emb = fluid.layers.embedding(input=sentence, size=[30, 4])
            hidden = fluid.layers.fc(input=emb, size=5, act="tanh")
            inner = fluid.layers.DynamicRNN()
            with inner.block():
                word = inner.step_input(hidden)
                inner.output(fluid.layers.fc(input=[word], size=5, act="tanh"))
            inner_result = inner()
            outer.output(fluid.layers.sequence_last_step(input=inner_result))
        result = outer()
    return {"sentence": sentence.lod_level, "hidden": hidden.lod_level,
            "word": word.lod_level, "inner_result": inner_result.lod_level,
            "result": result.lod_level}
