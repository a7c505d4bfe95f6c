"""What fluid 1.8's own sampler in sampled_softmax_with_cross_entropy (sample_logits) reports
as each sample's probability, for tests/unit/test_sampled_probabilities.py. fluid's random
draws cannot be reproduced in spmd, so the test checks that both follow the same rule: with
q the log-uniform mass of a class, the probability is q * S when the S draws held no repeat,
else 1 - (1 - q)^tries. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_sampled.py

CASES is shared with the test: name -> (classes K, num_samples S, seed, labels).
"""
import os
import sys

import numpy as np

CASES = {
    "no_repeat_k1000": (1000, 3, 5, [[4], [0]]),
    "no_repeat_k100000": (100000, 5, 11, [[4], [0]]),
    "repeats_k50": (50, 10, 9, [[4], [0]]),
    "repeats_k20": (20, 15, 3, [[4], [0]]),
}


def run_case(fluid, name):
    """[samples, probabilities, loss] of one run of CASES[name] on zero logits."""
    k, s, seed, labels = CASES[name]
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(prog, startup):
        x = fluid.data("x", [len(labels), k], "float32")
        y = fluid.data("y", [len(labels), 1], "int64")
        loss = fluid.layers.sampled_softmax_with_cross_entropy(x, y, num_samples=s, seed=seed)
        op = [o for o in prog.global_block().ops if o.type == "sample_logits"][0]
        fetch = [op.output("Samples")[0], op.output("Probabilities")[0], loss]
    feed = {"x": np.zeros((len(labels), k), "float32"), "y": np.array(labels, "int64")}
    with fluid.scope_guard(fluid.core.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        return [np.array(a) for a in exe.run(prog, feed=feed, fetch_list=fetch)]


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    save("sampled", {name: run_case(fluid, name) for name in sorted(CASES)},
         meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
