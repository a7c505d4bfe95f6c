"""fluid 1.8.5's DistributeTranspiler cutting a sparse embedding table across pservers: for
each case (table rows x width, number of pservers, min_block_size, slice_var_up), what the
trainer program says of the table (distributed_lookup_table's height_sections, table_names,
endpoints; split_selected_rows' height_sections; the send of its gradient blocks) and what
each pserver holds of it (its block variables' shapes in the pserver program, and the shapes
its startup initializes). Also what fluid 1.8.5 does with an `is_distributed=True` table: its
transpile raises (recorded), so spmd has no fluid layout to follow there.

The model: ids -> embedding(size=[rows, width], is_sparse=True, name "emb") -> fc 1 -> square
error, SGD; 2 trainers, as trainer 0. Nothing is run.

    cd /tmp && /work/oracle/venv37/bin/python /path/to/spmd/tests/oracle/make_ps_slicing.py
"""
import os
import sys

TRAINERS = 2
# case -> (rows, width, pservers, min_block_size, slice_var_up)
CASES = {
    "100001x16_3ps": (100001, 16, 3, 8192, True),
    "20000x16_3ps": (20000, 16, 3, 8192, True),
    "300x16_3ps_one_block": (300, 16, 3, 8192, True),
    "1000x16_3ps_two_blocks": (1000, 16, 3, 8192, True),
    "1000000x64_2ps": (1000000, 64, 2, 8192, True),
    "1000000x64_4ps_big_min_block": (1000000, 64, 4, 20000000, True),
    "100001x16_3ps_no_slice": (100001, 16, 3, 8192, False),
}
TABLE_OPS = ("distributed_lookup_table", "split_selected_rows", "send")
ATTRS = ("height_sections", "table_names", "endpoints", "epmap")


def endpoints(n):
    return ",".join(f"127.0.0.1:{6170 + i}" for i in range(n))


def build(fluid, rows, width, distributed=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data(name="ids", shape=[None, 1], dtype="int64")
        y = fluid.data(name="y", shape=[None, 1], dtype="float32")
        emb = fluid.layers.embedding(ids, size=[rows, width], is_sparse=True,
                                     is_distributed=distributed,
                                     param_attr=fluid.ParamAttr(name="emb"))
        pred = fluid.layers.fc(fluid.layers.reshape(emb, [-1, width]), 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup


def transpile(fluid, case):
    rows, width, n, min_block, slice_up = CASES[case]
    main, startup = build(fluid, rows, width)
    config = fluid.DistributeTranspilerConfig()
    config.min_block_size = min_block
    config.slice_var_up = slice_up
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(0, program=main, pservers=endpoints(n), trainers=TRAINERS,
                startup_program=startup)
    return t


def _attrs(op):
    names = op.attr_names if hasattr(op, "attr_names") else list(op.attrs)
    return {k: list(op.attr(k)) if not isinstance(op.attr(k), str) else op.attr(k)
            for k in ATTRS if k in names}


def describe_trainer(program):
    """The ops that read the table or its gradient, in order: (type, inputs, attrs)."""
    out = []
    for op in program.global_block().ops:
        names = list(op.input_arg_names)
        if op.type in TABLE_OPS and any(n == "emb" or n.startswith("emb@GRAD") for n in names):
            out.append({"type": op.type, "inputs": names, "attrs": _attrs(op)})
    return out


def describe_pserver(program, startup):
    held = {name: [int(d) for d in v.shape] for name, v in program.global_block().vars.items()
            if name == "emb" or name.startswith("emb.block")}
    inits = {}
    for op in startup.global_block().ops:
        for n in op.output_arg_names:
            if n == "emb" or n.startswith("emb.block"):
                inits[n] = [int(d) for d in op.attr("shape")]
    return {"held": held, "inits": inits}


def record(fluid, case):
    n = CASES[case][2]
    out = {"pservers": {}}
    for ep in endpoints(n).split(","):  # each role transpiles on its own (fluid's
        prog, start = transpile(fluid, case).get_pserver_programs(ep)  # trainer program
        out["pservers"][ep] = describe_pserver(prog, start)  # rewrite breaks the pservers')
    out["trainer"] = describe_trainer(transpile(fluid, case).get_trainer_program(
        wait_port=False))
    return out


def distributed_table_error(fluid):
    main, startup = build(fluid, 2000, 16, distributed=True)
    try:
        fluid.DistributeTranspiler().transpile(0, program=main, pservers=endpoints(2),
                                               trainers=TRAINERS, startup_program=startup)
    except Exception as e:  # noqa: BLE001 - the error is the fact recorded
        return type(e).__name__
    return None


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    cases = {case: record(fluid, case) for case in CASES}
    cases["is_distributed_error"] = distributed_table_error(fluid)
    save("ps_slicing", cases, meta={"paddle": paddle.__version__, "trainers": TRAINERS})


if __name__ == "__main__":
    main()
