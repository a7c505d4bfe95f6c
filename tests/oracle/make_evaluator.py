"""Store fluid 1.8.5's fluid.evaluator EditDistance and ChunkEvaluator over a pass of two LoD
batches (each batch's metrics, then eval() after reset and the pass), for
tests/unit/test_fluid_evaluator.py. Run with PaddlePaddle 1.8.5 outside the checkout."""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

# (tokens, sequence lengths) of hypotheses and references, two batches
EDIT_BATCHES = [
    {"hyp": ([1, 2, 3, 4, 5, 6, 6], [3, 2, 2]), "ref": ([1, 2, 4, 5, 6, 7], [3, 2, 1])},
    {"hyp": ([3, 3, 1, 2], [2, 2]), "ref": ([3, 3, 1, 2, 2], [2, 3])},
]
# IOB tags of 2 chunk types: B-0=0 I-0=1 B-1=2 I-1=3 O=4
CHUNK_BATCHES = [
    {"inf": ([0, 1, 4, 2, 3, 4, 0], [4, 3]), "lab": ([0, 1, 4, 2, 4, 4, 0], [4, 3])},
    {"inf": ([2, 3, 3, 0, 4], [5]), "lab": ([2, 3, 3, 4, 4], [5])},
]


def lod(place, tokens, lengths):
    return fluid.create_lod_tensor(np.array(tokens, "int64").reshape(-1, 1), [lengths], place)


def run(kind, batches):
    place = fluid.CPUPlace()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [None, 1], "int64", lod_level=1)
        b = fluid.data("b", [None, 1], "int64", lod_level=1)
        if kind == "edit":
            evaluator = fluid.evaluator.EditDistance(a, b, ignored_tokens=[6])
        else:
            evaluator = fluid.evaluator.ChunkEvaluator(a, b, "IOB", 2)
    exe = fluid.Executor(place)
    exe.run(startup)
    evaluator.reset(exe)
    per_batch = []
    keys = ("hyp", "ref") if kind == "edit" else ("inf", "lab")
    for batch in batches:
        feed = {"a": lod(place, *batch[keys[0]]), "b": lod(place, *batch[keys[1]])}
        per_batch.append(exe.run(main, feed=feed, fetch_list=evaluator.metrics))
    result = evaluator.eval(exe)
    evaluator.reset(exe)
    after_reset = exe.run(main, feed=feed, fetch_list=evaluator.metrics)
    return {"per_batch": per_batch, "eval": list(result),
            "eval_after_reset_and_one_batch": list(evaluator.eval(exe)),
            "last_batch_again": after_reset}


if __name__ == "__main__":
    save("evaluator", {"edit": dict(batches=EDIT_BATCHES, **run("edit", EDIT_BATCHES)),
                       "chunk": dict(batches=CHUNK_BATCHES, **run("chunk", CHUNK_BATCHES))},
         meta={"paddle": paddle.__version__})
