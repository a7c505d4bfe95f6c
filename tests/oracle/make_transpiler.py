"""fluid 1.8.5's DistributeTranspiler in parameter-server mode: for each model and config below,
the trainer program, the trainer startup program, every pserver program (global block and
sub-blocks, listen_and_serv's attributes) and every pserver startup program, described op by
op (type, slot -> variable names, the attributes that say where things go) with the shapes of
the variables the split makes ("w.block0", "w@GRAD.block1.trainer_0", ...). Nothing is run:
fluid transpiles without starting servers (get_trainer_program(wait_port=False)).

The model builders and `describe` take the `fluid` module, so tests/unit/test_ps_transpiler_
oracle.py builds the same models with spmd and describes its programs the same way.

fluid 1.8.5's own HashName cannot run under the transpiler (its dispatch calls `var.name()`, a
str: TypeError), and would hash with Python's per-process `hash()` if it did; the "hash" case
records that error, and "big_param_hash" transpiles with `Crc32Name`, a PSDispatcher placing a
block on pserver crc32(name) % n, which is what spmd's HashName does (stable across processes).

Run with the oracle's Python from outside the checkout (see README.md):
    cd /tmp && /tmp/pd18/bin/python /path/to/spmd/tests/oracle/make_transpiler.py
"""
import os
import sys

PSERVERS = "127.0.0.1:6170,127.0.0.1:6171"
TRAINERS = 2

# case -> (model, transpile options); options: sync_mode, split ("RoundRobin" | "HashName"),
# slice_var_up, min_block_size
CASES = {
    "mlp_sgd": ("mlp_sgd", {}),
    "mlp_sgd_async": ("mlp_sgd", {"sync_mode": False}),
    "adam_exp_decay_l2": ("adam_exp_decay_l2", {}),
    "momentum_piecewise": ("momentum_piecewise", {}),
    "sparse_embedding": ("sparse_embedding", {}),
    "big_param": ("big_param", {}),
    "big_param_async": ("big_param", {"sync_mode": False}),
    "big_param_hash": ("big_param", {"split": "Crc32Name"}),
    "big_param_no_slice": ("big_param", {"slice_var_up": False}),
    "big_param_one_trainer": ("big_param", {"trainers": 1}),
    "adam_exp_decay_async": ("adam_exp_decay_l2", {"sync_mode": False}),
}


def _data(fluid, name, shape, dtype="float32"):
    return fluid.data(name=name, shape=[None] + list(shape), dtype=dtype)


def _regression(fluid, width_in, hidden):
    x = _data(fluid, "x", [width_in])
    y = _data(fluid, "y", [1])
    h = fluid.layers.fc(x, hidden, act="relu")
    pred = fluid.layers.fc(h, 1)
    return fluid.layers.mean(fluid.layers.square_error_cost(pred, y))


def mlp_sgd(fluid):
    loss = _regression(fluid, 13, 10)
    fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)


def adam_exp_decay_l2(fluid):
    loss = _regression(fluid, 13, 10)
    lr = fluid.layers.exponential_decay(0.1, decay_steps=100, decay_rate=0.9, staircase=True)
    fluid.optimizer.Adam(learning_rate=lr,
                         regularization=fluid.regularizer.L2Decay(1e-4)).minimize(loss)


def momentum_piecewise(fluid):
    loss = _regression(fluid, 13, 10)
    lr = fluid.layers.piecewise_decay(boundaries=[10, 20], values=[0.1, 0.05, 0.01])
    fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9).minimize(loss)


def sparse_embedding(fluid):
    ids = fluid.data(name="ids", shape=[None, 1], dtype="int64")
    y = _data(fluid, "y", [1])
    emb = fluid.layers.embedding(ids, size=[2000, 16], is_sparse=True,
                                 param_attr=fluid.ParamAttr(name="emb"))
    pred = fluid.layers.fc(fluid.layers.reshape(emb, [-1, 16]), 1)
    loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
    fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)


def big_param(fluid):
    """fc_0.w_0 is [100, 200]: 20000 elements, over 2 * 8192, so it is cut in two."""
    loss = _regression(fluid, 100, 200)
    fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)


MODELS = {f.__name__: f for f in (mlp_sgd, adam_exp_decay_l2, momentum_piecewise,
                                  sparse_embedding, big_param)}


def build(fluid, model):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        MODELS[model](fluid)
    return main, startup


def crc32_name(fluid):
    """A PSDispatcher subclass placing each block on pserver crc32(name) % n (spmd's
    HashName)."""
    import zlib

    from paddle.fluid.transpiler.ps_dispatcher import PSDispatcher

    class Crc32Name(PSDispatcher):
        def dispatch(self, varlist):
            return [self._eps[zlib.crc32(v.name.encode()) % len(self._eps)] for v in varlist]

    return Crc32Name


def transpile(fluid, case, split_method=None):
    """Build the case's model and transpile it as trainer 0; `split_method` overrides the
    dispatcher class the case names."""
    model, opts = CASES[case]
    main, startup = build(fluid, model)
    config = fluid.DistributeTranspilerConfig()
    config.slice_var_up = opts.get("slice_var_up", True)
    split = opts.get("split", "RoundRobin")
    if split_method is None:
        split_method = (crc32_name(fluid) if split == "Crc32Name"
                        else getattr(fluid.transpiler, split))
    config.split_method = split_method
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(0, program=main, pservers=PSERVERS, trainers=opts.get("trainers", TRAINERS),
                sync_mode=opts.get("sync_mode", True), startup_program=startup)
    return t, main, startup


def _attr(value):
    if hasattr(value, "idx") and hasattr(value, "ops"):  # a Block
        return value.idx
    if type(value).__name__ == "BlockDesc" or hasattr(value, "op_size"):  # a block's desc
        return value.id
    if isinstance(value, (list, tuple)):
        return [_attr(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


# attributes that say where things go; the rest (op_role, op_callstack, ...) are not recorded
KEY_ATTRS = ("epmap", "sections", "send_varnames", "recv_varnames", "height_sections",
             "endpoints", "trainer_id", "axis", "merge_add", "use_send_handler", "half_async",
             "optimize_blocks", "endpoint", "pserver_id", "Fanin", "distributed_mode",
             "grad_to_block_id", "sparse_grad_to_param", "lr_decay_block_id",
             "prefetch_var_name_to_block_id", "checkpint_block_id", "dc_asgd", "sub_block",
             "shape", "scale", "table_names", "padding_idx", "is_distributed")


def _shape(var):
    """The var's dims, or None for one without a tensor shape (fluid's RAW control vars)."""
    try:
        return [int(d) for d in var.shape]
    except Exception:  # noqa: BLE001 - fluid raises EnforceNotMet for RAW vars
        return None


def describe_block(block):
    ops = []
    for op in block.ops:
        entry = {"type": op.type,
                 "inputs": {k: list(op.input(k)) for k in op.input_names if op.input(k)},
                 "outputs": {k: list(op.output(k)) for k in op.output_names if op.output(k)}}
        names = op.attr_names if hasattr(op, "attr_names") else op.all_attrs()
        entry["attrs"] = {k: _attr(op.attr(k)) for k in KEY_ATTRS if k in names}
        ops.append(entry)
    vars_ = {name: {"shape": _shape(v), "persistable": bool(v.persistable)}
             for name, v in block.vars.items()}
    return {"idx": block.idx, "parent_idx": block.parent_idx, "ops": ops, "vars": vars_}


def describe(program):
    """Every block described; control variables (fluid's `__control_var@<random>`, spmd's
    `__control_var_<k>`) renamed `@CONTROL<k>` in order of first use, so programs compare
    across processes."""
    blocks = [describe_block(b) for b in program.blocks]
    renames = {}

    def rename(name):
        if not name.startswith("__control_var"):
            return name
        return renames.setdefault(name, f"@CONTROL{len(renames)}")

    for b in blocks:
        for op in b["ops"]:
            for slots in (op["inputs"], op["outputs"]):
                for k, names in slots.items():
                    slots[k] = [rename(n) for n in names]
        b["vars"] = {rename(n): v for n, v in b["vars"].items()}
    return blocks


def record(fluid, case, split_method=None):
    """Each role transpiles on its own, as each process of a job does (fluid's
    get_trainer_program deletes the optimizer ops that get_pserver_program reads)."""
    t, main, startup = transpile(fluid, case, split_method)
    trainer = t.get_trainer_program(wait_port=False)
    out = {"trainer": describe(trainer), "trainer_startup": describe(startup), "pservers": {}}
    for ep in PSERVERS.split(","):
        t = transpile(fluid, case, split_method)[0]
        prog, start = t.get_pserver_programs(ep)
        out["pservers"][ep] = {"main": describe(prog), "startup": describe(start)}
    return out


def fluid_hash_name_error(fluid):
    """What fluid 1.8.5's own HashName does under the transpiler."""
    main, startup = build(fluid, "big_param")
    config = fluid.DistributeTranspilerConfig()
    config.split_method = fluid.transpiler.HashName
    try:
        fluid.DistributeTranspiler(config=config).transpile(
            0, program=main, pservers=PSERVERS, trainers=TRAINERS, startup_program=startup)
    except Exception as e:  # noqa: BLE001 - the error is the fact recorded
        return f"{type(e).__name__}: {e}"
    return None


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    cases = {case: record(fluid, case) for case in CASES}
    cases["fluid_hash_name_error"] = fluid_hash_name_error(fluid)
    save("transpiler", cases, meta={"paddle": paddle.__version__, "pservers": PSERVERS,
                                    "trainers": TRAINERS})


if __name__ == "__main__":
    main()
