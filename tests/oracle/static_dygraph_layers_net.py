"""The program of tests/oracle/make_static_dygraph_layers.py, built on the `fluid` given (real
fluid 1.8.5 for the oracle, spmd.fluid for the test): fluid.dygraph layers used in a static
program (Layer subclass, Embedding, LayerNorm, RowConv, SequenceConv) with fixed parameter
values; returns the parameter names, the outputs and the parameters after one SGD step."""
import numpy as np


def run(fluid):
    nn = fluid.dygraph.nn

    class Block(fluid.Layer):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(size=[10, 4])
            self.norm = fluid.LayerNorm([4], act="tanh")
            self.scale = self.create_parameter(shape=[4], dtype="float32")

        def forward(self, ids):
            h = self.norm(self.emb(ids))
            return fluid.layers.elementwise_mul(h, self.scale)

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
        block = Block()
        h = block(fluid.layers.reshape(ids, [-1]))
        h = fluid.layers.lod_reset(h, ids)
        row = nn.RowConv("row_conv", future_context_size=2, act="relu")(h)
        seq = nn.SequenceConv("seq_conv", num_filters=3, act="sigmoid")(row)
        loss = fluid.layers.mean(seq)
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    names = sorted(p.name for p in main.global_block().all_parameters())
    layer_params = [p.name for p in block.parameters()]
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for i, name in enumerate(names):
            t = scope.find_var(name).get_tensor()
            shape = np.array(t).shape
            n = int(np.prod(shape))
            t.set((np.sin(np.arange(n) * 0.37 + i) * 0.6).astype("float32").reshape(shape),
                  place)
        idv = np.array([[1], [3], [5], [2], [9], [0], [4]], "int64")
        feed = {"ids": fluid.create_lod_tensor(idv, [[3, 4]], place)}
        outs = exe.run(main, feed=feed, fetch_list=[h, row, seq, loss], return_numpy=False)
        after = {name: np.array(scope.find_var(name).get_tensor()) for name in names}
    return names, layer_params, [np.array(o) for o in outs], after
