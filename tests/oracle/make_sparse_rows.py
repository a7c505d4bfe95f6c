"""Reference outputs of fluid 1.8.5 for the row-wise sparse updates (issue 24), read by
tests/unit/test_sparse_rows_oracle.py: the program of make_sparse.py (two fixed tables, one
looked up twice, an fc on top, 3 steps), with is_sparse=True and False, for the optimizers
and the regularization / clipping make_sparse.py does not cover:

- rmsprop (plain and centered) and decayed_adagrad, whose fluid 1.8.5 kernels take
  SelectedRows or refuse them (then fluid's error is stored);
- L2Decay / L1Decay on a sparse gradient (fluid 1.8.5's append_regularization_ops sums the
  SelectedRows gradient with the dense decay term: every row of the table is decayed);
- clipping (by value, by norm, by global norm) of a sparse gradient (on its merged rows).

Run with the oracle's Python from outside the checkout:
    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_sparse_rows.py
"""
import os
import sys

import numpy as np

try:
    import paddle.fluid as fluid
except ImportError:  # imported by the spmd tests for its constants only
    fluid = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_sparse import DIM, IDS, VOCAB, Y, init  # noqa: E402
from oracle_io import save  # noqa: E402


def optimizers(f):
    """The cases, built with `f` (paddle.fluid here, spmd.fluid in the tests)."""
    reg, clip = f.regularizer, f.clip
    return {
        "rmsprop": lambda: f.optimizer.RMSProp(0.05),
        "rmsprop_centered": lambda: f.optimizer.RMSProp(0.05, momentum=0.5, centered=True),
        "decayed_adagrad": lambda: f.optimizer.DecayedAdagrad(0.2),
        "sgd_l2": lambda: f.optimizer.SGD(0.3, regularization=reg.L2Decay(0.1)),
        "sgd_l1": lambda: f.optimizer.SGD(0.3, regularization=reg.L1Decay(0.05)),
        "lazy_adam_l2": lambda: f.optimizer.Adam(0.1, lazy_mode=True,
                                                 regularization=reg.L2Decay(0.1)),
        "adagrad_l2": lambda: f.optimizer.Adagrad(0.3, regularization=reg.L2Decay(0.1)),
        "sgd_clip_value": lambda: f.optimizer.SGD(
            0.3, grad_clip=clip.GradientClipByValue(0.02)),
        "sgd_clip_norm": lambda: f.optimizer.SGD(
            0.3, grad_clip=clip.GradientClipByNorm(0.05)),
        "lazy_adam_global_norm": lambda: f.optimizer.Adam(
            0.1, lazy_mode=True, grad_clip=clip.GradientClipByGlobalNorm(0.05)),
        "adagrad_global_norm": lambda: f.optimizer.Adagrad(
            0.3, grad_clip=clip.GradientClipByGlobalNorm(0.05)),
    }


def train(f, make_opt, is_sparse):
    """3 steps of the make_sparse.py program with `make_opt()`, in fluid module `f`."""
    def attr(name, shape, offset):
        return f.ParamAttr(name=name, initializer=f.initializer.NumpyArrayInitializer(
            init(shape, offset)))

    main, startup = f.Program(), f.Program()
    with f.program_guard(main, startup), f.unique_name.guard():
        ids = f.layers.data(name="ids", shape=[1], dtype="int64")
        y = f.layers.data(name="y", shape=[1], dtype="float32")
        a = f.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                               param_attr=attr("table_a", [VOCAB, DIM], 0))
        b1 = f.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                param_attr=attr("table_b", [VOCAB, DIM], 1))
        b2 = f.layers.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse,
                                param_attr="table_b")
        h = f.layers.concat([a, b1 * b2], axis=1)
        pred = f.layers.fc(h, 1, param_attr=attr("fc_w", [2 * DIM, 1], 2),
                           bias_attr=attr("fc_b", [1], 3))
        loss = f.layers.reduce_mean(f.layers.square(pred - y))
        make_opt().minimize(loss)
    exe, scope = f.Executor(f.CPUPlace()), f.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for ids_v, y_v in zip(IDS, Y):
        out, = exe.run(main, feed={"ids": ids_v, "y": y_v}, fetch_list=[loss], scope=scope)
        losses.append(float(np.array(out).reshape(-1)[0]))
    params = {n: np.array(scope.find_var(n).get_tensor())
              for n in ("table_a", "table_b", "fc_w", "fc_b")}
    return {"losses": losses, "params": params}


def main():
    import paddle
    cases = {"meta": {"fluid": paddle.__version__}}
    for name, make_opt in optimizers(fluid).items():
        for sparse in (True, False):
            key = "train/{}/{}".format(name, "sparse" if sparse else "dense")
            try:
                cases[key] = train(fluid, make_opt, sparse)
            except Exception as e:  # noqa: BLE001 - a kernel refusing SelectedRows
                cases[key] = {"error": str(e).strip().splitlines()[-1][:300]}
    save("sparse_rows", cases)


if __name__ == "__main__":
    main()
