"""fluid.incubate.fleet.utils.utils: fleet's program-file helpers: save_program /
load_program (binary: spmd's serialized program, Program.serialize_to_string; text: its
indented JSON), program_type_trans between the two, graphviz of a block, and
check_pruned_program_vars, and check_saved_vars_try_dump (load an inference model's program
and variables, check them and run one batch of random or file-read feeds). fluid writes
protobuf ProgramDescs; spmd's program files are its own JSON, so files cross between the
two only through spmd.

>>> import os, tempfile
>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     y = fluid.layers.relu(x)
>>> path = os.path.join(tempfile.mkdtemp(), "__model__")
>>> save_program(main, path)
>>> [op.type for op in load_program(path).global_block().ops]
['relu']
"""
from __future__ import annotations

import json
import logging
import os

import numpy as np

from .....core.program import Program
from ....debugger import draw_block_graphviz

__all__ = ["check_pruned_program_vars", "check_saved_vars_try_dump", "graphviz",
           "load_program", "parse_program", "program_type_trans", "save_program"]

# ops an inference program should not hold once pruned (fluid's list)
not_expected_op_types = ["lookup_table"]

logger = logging.getLogger(__name__)


def save_program(program, model_filename: str = "__model__", is_text: bool = False) -> None:
    """Write `program` to `model_filename` (text: indented JSON)."""
    if is_text:
        with open(model_filename, "w") as f:
            json.dump(program.to_dict(), f, indent=1, sort_keys=True)
    else:
        with open(model_filename, "wb") as f:
            f.write(program.serialize_to_string())


def load_program(model_filename: str, is_text: bool = False) -> Program:
    """The program save_program wrote."""
    if is_text:
        with open(model_filename) as f:
            return Program.from_dict(json.load(f))
    with open(model_filename, "rb") as f:
        return Program.parse_from_string(f.read())


def program_type_trans(prog_dir: str, prog_fn: str, is_text: bool) -> str:
    """Rewrite `prog_dir/prog_fn` in the other form (text -> `.bin`, binary -> `.pbtxt`);
    returns the new file's name."""
    program = load_program(os.path.join(prog_dir, prog_fn), is_text)
    out_fn = prog_fn + (".bin" if is_text else ".pbtxt")
    save_program(program, os.path.join(prog_dir, out_fn), not is_text)
    return out_fn


def parse_program(program, output_dir: str) -> None:
    """Write the program's persistable variables, all variables and ops to
    `output_dir`/{persistable_vars,all_vars,ops}.txt."""
    os.makedirs(output_dir, exist_ok=True)
    block = program.global_block()
    listings = {
        "persistable_vars.txt": [repr(v) for v in block.vars.values() if v.persistable],
        "all_vars.txt": [repr(v) for v in block.vars.values()],
        "ops.txt": [repr(op) for op in block.ops],
    }
    for name, lines in listings.items():
        with open(os.path.join(output_dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")


def graphviz(block, output_dir: str = "", filename: str = "debug") -> None:
    """`output_dir/filename.dot` (and .pdf where Graphviz's dot is installed) of `block`."""
    draw_block_graphviz(block, path=os.path.join(output_dir, filename + ".dot"))


def check_pruned_program_vars(train_prog, pruned_prog) -> bool:
    """Whether every persistable variable of `pruned_prog` (feed and fetch aside) is in
    `train_prog` with the same shape and dtype; each mismatch is logged."""
    train = train_prog.global_block().vars
    ok = True
    for name, var in pruned_prog.global_block().vars.items():
        if not var.persistable or var.type in ("FEED_MINIBATCH", "FETCH_LIST"):
            continue
        other = train.get(name)
        if other is None:
            logger.error("not find variable '%s' in train program", name)
            ok = False
        elif (tuple(other.shape), other.dtype) != (tuple(var.shape), var.dtype):
            logger.error("variable '%s': shape %s / dtype %s in the pruned program, %s / %s "
                         "in the train program", name, list(var.shape), var.dtype,
                         list(other.shape), other.dtype)
            ok = False
    return ok



def check_not_expected_ops(prog) -> None:
    """Warn once per op type of not_expected_op_types found in `prog`."""
    seen = set()
    for op in prog.global_block().ops:
        if op.type in not_expected_op_types and op.type not in seen:
            logger.warning("find op type '%s' in program, please check if your program is "
                           "pruned correctly !", op.type)
            seen.add(op.type)


def reader(batch_size, fn, dim):
    """Batches [batch_size, *dim] of the space-separated floats of file `fn`."""
    shape = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    size = int(np.prod(shape)) * batch_size
    data = []
    with open(fn) as f:
        for line in f:
            fields = [float(d) for d in line.split()]
            while len(fields) >= size:
                data.append(np.array(fields[:size]).reshape([batch_size] + shape))
                fields = fields[size:]
    return data


def feed_gen(batch_size, feeded_vars_dims, feeded_vars_filelist):
    return [reader(batch_size, fn, feeded_vars_dims[i])
            for i, fn in enumerate(feeded_vars_filelist)]


def check_saved_vars_try_dump(dump_dir, dump_prog_fn, is_text_dump_program, feed_config,
                              fetch_config, batch_size=1, save_filename=None):
    """Load the inference model saved in `dump_dir` (program file `dump_prog_fn`, variables
    per file or in `save_filename`), check every persistable's loaded shape against the
    program and the feeds against `feed_config` (feeded_vars_names, feeded_vars_dims,
    feeded_vars_types, feeded_vars_filelist), then run one batch (random values, or read
    from the files) and return the fetched values (fetch_config.fetch_vars_names, or the
    model's own targets)."""
    from .....core.places import CPUPlace
    from .....core.scope import Scope, global_scope, scope_guard
    from .... import io
    from ....data_feeder import DataFeeder
    from ....executor import Executor
    from ....lod_tensor import create_lod_tensor

    dump_prog = load_program(os.path.join(dump_dir, dump_prog_fn), is_text_dump_program)
    saved_params = [v for v in dump_prog.list_vars() if io.is_persistable(v)]
    logger.info("persistable vars in dump program: %s", [v.name for v in saved_params])
    check_not_expected_ops(dump_prog)
    place = CPUPlace()
    exe = Executor(place)
    with scope_guard(Scope()):
        if is_text_dump_program:
            dump_prog_fn = program_type_trans(dump_dir, dump_prog_fn, is_text_dump_program)
        program, feed_names, fetch_targets = io.load_inference_model(
            dump_dir, exe, model_filename=dump_prog_fn, params_filename=save_filename)
        for var in saved_params:
            found = global_scope().find_var(var.name)
            if found is None:
                raise RuntimeError(f"can't not find var: {var.name}")
            got = np.array(found.get_tensor()).shape
            if tuple(got) != tuple(var.shape):
                raise RuntimeError(
                    f"Shape not matching: the Program requires a parameter with a shape of "
                    f"({tuple(var.shape)}), while the loaded parameter (namely [ {var.name} ]) "
                    f"has a shape of  ({tuple(got)}).")
        fetch_names = [v.name for v in fetch_targets]
        if not feed_names:
            logger.warning("no feed targets in program.")
        if not fetch_names:
            logger.warning("no fetch targets in program.")
        fetch_list = fetch_targets
        wanted_feeds = feed_config.feeded_vars_names
        if wanted_feeds is not None and list(feed_names) != list(wanted_feeds):
            logger.warning("feed vars in program and config are diff: feed in program: %s. "
                           "feed in config %s.", feed_names, wanted_feeds)
        wanted_fetches = fetch_config.fetch_vars_names
        if wanted_fetches is not None and fetch_names != list(wanted_fetches):
            logger.warning("fetch vars in program and config are diff: fetch in program: %s. "
                           "fetch in config %s.", fetch_names, wanted_fetches)
            fetch_list = [program.global_block().var(n) for n in wanted_fetches]
        return_numpy = all(v.lod_level == 0 for v in fetch_list)
        names, dims = list(feed_config.feeded_vars_names), list(feed_config.feeded_vars_dims)
        types = list(feed_config.feeded_vars_types)
        if not len(names) == len(dims) == len(types):
            raise ValueError(f"feed_config: {len(names)} names, {len(dims)} dims and "
                             f"{len(types)} types; they go together one by one")
        block = program.global_block()
        for i, name in enumerate(names):
            dims[i] = tuple(dims[i]) if isinstance(dims[i], (list, tuple)) else (dims[i],)
            var_shape = tuple(block.var(name).shape[1:])
            if dims[i] != var_shape:
                raise RuntimeError(f"feed variable '{name}' shape not match. infer program  "
                                   f"shape: {var_shape}. feed tensor shape: {dims[i]}")
        if not getattr(feed_config, "feeded_vars_filelist", None):
            logger.info("generate random feed vars.")
            feed = {}
            for i, name in enumerate(names):
                var = block.var(name)
                value = np.array(np.random.random((batch_size,) + dims[i]), dtype=types[i])
                if var.lod_level == 0:
                    feed[name] = value
                elif var.lod_level == 1:
                    feed[name] = create_lod_tensor(value, [[1] * batch_size], place)
                else:
                    raise RuntimeError("vars with lod_level >= 2 is not supported now in this "
                                       "infer program check tool.")
        else:
            logger.info("load feed vars from files: %s.", feed_config.feeded_vars_filelist)
            feeder = DataFeeder(feed_list=[block.var(n) for n in names], place=place)
            batches = feed_gen(batch_size, dims, feed_config.feeded_vars_filelist)
            feed = feeder.feed([[b[0] for b in batches]])
        results = exe.run(program, feed=feed, fetch_list=fetch_list, return_numpy=return_numpy)
        for v, r in zip(fetch_list, results):
            logger.info("fetch_targets name: %s", v.name)
            logger.info("fetch_targets: %s", r)
        return results
