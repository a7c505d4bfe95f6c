"""fluid 1.8's gradients of spectral_norm and group_norm, batch_norm's moving statistics when
momentum is a Variable, and what inplace_abn writes (tests/unit/test_norm_fluid.py). Run with
PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_norm.py

CASES maps a name to build(fluid, block, vars) -> list of Variables to fetch; the test runs the
same build with spmd.fluid on the same FEEDS. Ops are appended directly (block.append_op) where
the layer would make random parameters (spectral_norm's U and V).
"""
import os
import sys

import numpy as np

R = np.random.RandomState(5)
FEEDS = {
    "w3": R.uniform(-1, 1, (3, 2, 4)).astype("float64"),
    "u3": R.uniform(-1, 1, (3,)).astype("float64"),
    "v8": R.uniform(-1, 1, (8,)).astype("float64"),
    "u2": R.uniform(-1, 1, (2,)).astype("float64"),
    "v12": R.uniform(-1, 1, (12,)).astype("float64"),
    "dw3": R.uniform(-1, 1, (3, 2, 4)).astype("float64"),
    "gx": R.uniform(-1, 1, (2, 6, 3, 2)).astype("float64"),
    "gdy": R.uniform(-1, 1, (2, 6, 3, 2)).astype("float64"),
    "gs": R.uniform(0.5, 1.5, (6,)).astype("float64"),
    "gb": R.uniform(-1, 1, (6,)).astype("float64"),
    "bx": R.uniform(-1, 1, (4, 3)).astype("float32"),
}


def _grads(fluid, outs, ins, douts):
    return list(fluid.gradients(outs, ins, target_gradients=douts))


def _spectral(dim, power_iters, u, v):
    def build(fluid, block, d):
        out = block.create_var(name="sn_out", dtype="float64", shape=[3, 2, 4])
        block.append_op(type="spectral_norm",
                        inputs={"Weight": [d["w3"]], "U": [d[u]], "V": [d[v]]},
                        outputs={"Out": [out]},
                        attrs={"dim": dim, "power_iters": power_iters, "eps": 1e-12})
        return [out] + _grads(fluid, [out], [d["w3"]], [d["dw3"]])
    return build


def _group_norm(scale, bias):
    def build(fluid, block, d):
        names = ["Y", "Mean", "Variance"]
        outs = {n: block.create_var(name="gn_" + n, dtype="float64") for n in names}
        inputs = {"X": [d["gx"]]}
        if scale:
            inputs["Scale"] = [d["gs"]]
        if bias:
            inputs["Bias"] = [d["gb"]]
        block.append_op(type="group_norm", inputs=inputs,
                        outputs={n: [v] for n, v in outs.items()},
                        attrs={"groups": 3, "epsilon": 1e-5})
        wrt = [d["gx"]] + ([d["gs"]] if scale else []) + ([d["gb"]] if bias else [])
        return [outs["Y"]] + _grads(fluid, [outs["Y"]], wrt, [d["gdy"]])
    return build


def _bn_momentum_var(fluid, block, d):
    m = fluid.layers.fill_constant([1], "float32", 0.5)
    y = fluid.layers.batch_norm(d["bx"], momentum=m, moving_mean_name="bn_mm",
                                moving_variance_name="bn_mv")
    return [y, block.var("bn_mm"), block.var("bn_mv")]


def _inplace_abn(act, alpha, train):
    def build(fluid, block, d):
        h = fluid.layers.fc(d["bx"], 3, bias_attr=False, param_attr=fluid.ParamAttr(
            name="abn_w", initializer=fluid.initializer.Constant(0.3)))
        before = fluid.layers.scale(h, 2.0)  # a reader of h before the op: sees the old h
        y = fluid.layers.inplace_abn(h, act=act, act_alpha=alpha)
        same = fluid.layers.fill_constant([1], "int32", int(y is h))
        if not train:  # y is h: fetching h gives the normalized output
            return [y, h, before, same]
        # not y itself: fluid's backward writes the recovered input back over it
        loss = fluid.layers.reduce_sum(fluid.layers.square(y) * before)
        return [loss, before, same] + _grads(fluid, [loss], [block.var("abn_w")], None)
    return build


def _group_norm_nhwc(fluid, block, d):
    x = fluid.layers.transpose(d["gx"], [0, 2, 3, 1])  # [2, 3, 2, 6]: channels last
    y = fluid.layers.group_norm(x, 3, param_attr=fluid.ParamAttr(
        initializer=fluid.initializer.Constant(1.5)), data_layout="NHWC")
    return [y] + _grads(fluid, [y], [d["gx"]], [fluid.layers.transpose(d["gdy"], [0, 2, 3, 1])])


def _data_norm_step(slot_dim, scale_shift):
    def build(fluid, block, d):
        x = fluid.layers.cast(d["gx"], "float32")
        x = fluid.layers.reshape(x, [6, 12])
        y = fluid.layers.data_norm(x, name=f"dn{slot_dim}", slot_dim=slot_dim,
                                   enable_scale_and_shift=scale_shift,
                                   param_attr={"batch_size": 1e3, "batch_sum": 5.0,
                                               "batch_square": 2e3, "scale_w": 1.5,
                                               "bias": 0.5})
        loss = fluid.layers.reduce_sum(y * y)
        fluid.optimizer.SGD(0.01).minimize(loss)
        params = sorted(p.name for p in block.all_parameters())
        return [y] + [block.var(n) for n in params]
    return build


CASES = {
    "group_norm_nhwc": _group_norm_nhwc,
    "data_norm_step": _data_norm_step(-1, False),
    "data_norm_step_slots": _data_norm_step(3, True),
    "spectral_dim0": _spectral(0, 1, "u3", "v8"),
    "spectral_dim0_iters3": _spectral(0, 3, "u3", "v8"),
    "spectral_dim1": _spectral(1, 2, "u2", "v12"),
    "spectral_dim1_iters0": _spectral(1, 0, "u2", "v12"),
    "group_norm_plain": _group_norm(False, False),
    "group_norm_bias": _group_norm(False, True),
    "group_norm_scale": _group_norm(True, False),
    "group_norm_affine": _group_norm(True, True),
    "batch_norm_momentum_var": _bn_momentum_var,
    "inplace_abn_identity": _inplace_abn(None, 1.0, False),
    "inplace_abn_leaky": _inplace_abn("leaky_relu", 0.1, False),
    "inplace_abn_elu": _inplace_abn("elu", 0.5, False),
    "inplace_abn_identity_train": _inplace_abn(None, 1.0, True),
    "inplace_abn_leaky_train": _inplace_abn("leaky_relu", 0.1, True),
    "inplace_abn_elu_train": _inplace_abn("elu", 0.5, True),
}


NAMED = {  # layer builds whose variable names are compared (unnamed ones count on globally)
    "group_norm": lambda L, x: L.group_norm(x, 2, param_attr=True, bias_attr=True),
    "spectral_norm": lambda L, x: L.spectral_norm(L.reshape(x, [4, 12]), dim=1),
    "data_norm": lambda L, x: L.data_norm(L.reshape(x, [-1, 12])),
    "lrn": lambda L, x: L.lrn(x, n=3),
    "layer_norm": lambda L, x: L.layer_norm(x, shift=False),
    "instance_norm": lambda L, x: L.instance_norm(x),
}


def names(fluid):
    """[output name, the names of the program's variables in order] for each NAMED build, all
    in one program, then an unnamed create_global_var (which counts on _generated_var_<n>)."""
    prog, startup = fluid.Program(), fluid.Program()
    out = {}
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        x = fluid.data("nx", [4, 4, 3, 1], "float32")
        for name in sorted(NAMED):
            out[name] = NAMED[name](fluid.layers, x).name
        out["global_var"] = fluid.layers.create_global_var([1], 0.0, "float32").name
    return out


def declare(fluid, feeds):
    """The feed Variables; float64 ones are differentiable leaves."""
    vs = {}
    for k, v in feeds.items():
        vs[k] = fluid.data(k, list(v.shape), str(v.dtype))
        vs[k].stop_gradient = False
    return vs


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, build in sorted(CASES.items()):
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            fetch = build(fluid, prog.global_block(), declare(fluid, FEEDS))
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        out[name] = exe.run(prog, feed=FEEDS, fetch_list=fetch)
    out["names"] = names(fluid)
    save("norm", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
