"""CNN training steps: spmd's Executor against PyTorch eager and a hand-written numpy step.

Two models, float32, SGD (lr 0.01), softmax cross-entropy, one BLAS thread:

- small CNN (the book's recognize_digits conv_pool net at MNIST size): batch 64, 1x28x28,
  simple_img_conv_pool(conv 5x5 32 + relu, max pool 2/2), simple_img_conv_pool(conv 5x5 64),
  fc 10;
- ResNet-20 (the book's resnet_cifar10, depth 20): batch 32, 3x32x32, conv_bn_layer 16, three
  stages of three basic blocks (16, 32, 64 channels; 1x1 conv + batch_norm projections),
  average pool 8, fc 10.

PyTorch runs the same architecture from the same initial parameters (copied out of spmd's
startup), with the same data; the first losses are checked to agree. The numpy step (small CNN
only) is the plain im2col approach written by hand, a floor for "numpy without a framework".
Every framework runs `--steps` steps per round, rounds interleaved so that machine noise hits
all alike; the figures are medians of per-step times and their ratios. PyTorch is optional:
without it its column is skipped.

    python bench/cnn.py [--quick] [--rounds 9] [--steps 5] [--profile small|resnet] [--out F]

spmd's float32 convolutions run through oneDNN where the `fast` extra is installed
(spmd/kernels/conv_dnnl.py); the report says which.
"""
from __future__ import annotations

import os
import sys

# PyTorch may come from another environment's site-packages on PYTHONPATH: this environment's
# numpy (and its BLAS) must still be the one spmd and the numpy step use, so such paths go last
_foreign = [p for p in sys.path if "site-packages" in p and not p.startswith(sys.prefix)]
sys.path[:] = [p for p in sys.path if p not in _foreign] + _foreign

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from mlp import write_report  # noqa: E402

import spmd.fluid as fluid  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
    torch.set_num_threads(1)
except ImportError:  # the torch column is skipped
    torch = None

LR = 0.01
SMALL = {"batch": 64, "shape": (1, 28, 28)}
RESNET = {"batch": 32, "shape": (3, 32, 32), "depth": 20}


# ---- spmd programs ------------------------------------------------------------------------

def build_program(build_body, shape):
    """(main, startup, loss): `build_body(x)` -> logits, softmax cross-entropy, SGD."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, *shape], "float32")
        y = fluid.data("y", [None, 1], "int64")
        logits = build_body(x)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(LR).minimize(loss)
    return main, startup, loss


def small_cnn_body(x):
    h = fluid.nets.simple_img_conv_pool(input=x, num_filters=32, filter_size=5, pool_size=2,
                                        pool_stride=2, act="relu")
    h = fluid.nets.simple_img_conv_pool(input=h, num_filters=64, filter_size=5, pool_size=2,
                                        pool_stride=2, act="relu")
    return fluid.layers.fc(h, 10)


def _conv_bn(x, ch_out, k, stride, pad, act="relu", bias_attr=False):
    h = fluid.layers.conv2d(x, ch_out, k, stride=stride, padding=pad, bias_attr=bias_attr)
    return fluid.layers.batch_norm(h, act=act)


def _basicblock(x, ch_in, ch_out, stride):
    h = _conv_bn(x, ch_out, 3, stride, 1)
    h = _conv_bn(h, ch_out, 3, 1, 1, act=None, bias_attr=None)
    short = _conv_bn(x, ch_out, 1, stride, 0, act=None) if ch_in != ch_out else x
    return fluid.layers.elementwise_add(h, short, act="relu")


def resnet_body(x, depth=RESNET["depth"]):
    n = (depth - 2) // 6
    h = _conv_bn(x, 16, 3, 1, 1)
    ch = 16
    for ch_out, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(n):
            h = _basicblock(h, ch, ch_out, stride if i == 0 else 1)
            ch = ch_out
    h = fluid.layers.pool2d(h, pool_size=8, pool_type="avg", pool_stride=1)
    return fluid.layers.fc(h, 10)


# ---- the same models in PyTorch eager (functional, parameters in spmd's creation order) ----

class TorchParams:
    """Hands out spmd's parameters as torch tensors (on `device`) in creation order, per layer
    kind; the trained ones as nn.Parameter, so a module holding them can be wrapped (DDP)."""

    def __init__(self, scope, program, device="cpu"):
        self.scope = scope
        self.device = device
        self.count = {}
        self.tensors = []
        self.names = {p.name for p in program.global_block().all_parameters()}

    def _get(self, name, grad=True):
        a = np.array(self.scope.find_var(name).get_tensor())
        t = torch.tensor(a, device=self.device)
        if grad:
            t = torch.nn.Parameter(t)
            self.tensors.append(t)
        return t

    def take(self, kind, has_bias=True):
        i = self.count.get(kind, 0)
        self.count[kind] = i + 1
        w = self._get(f"{kind}_{i}.w_0")
        b = self._get(f"{kind}_{i}.b_0") if has_bias else None
        if kind == "batch_norm":
            return w, b, self._get(f"{kind}_{i}.w_1", False), self._get(f"{kind}_{i}.w_2", False)
        return w, b


def torch_small(p: TorchParams):
    c1, c2, fc = p.take("conv2d"), p.take("conv2d"), p.take("fc")

    def forward(x):
        h = F.max_pool2d(F.relu(F.conv2d(x, *c1)), 2, 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, *c2)), 2, 2)
        return h.flatten(1) @ fc[0] + fc[1]
    return forward


def torch_resnet(p: TorchParams, depth=RESNET["depth"]):
    def conv_bn(ch_out, k, stride, pad, relu=True, bias=False):
        w, b = p.take("conv2d", bias)
        scale, shift, mean, var = p.take("batch_norm")

        def run(x):
            h = F.conv2d(x, w, b, stride, pad)
            h = F.batch_norm(h, mean, var, scale, shift, True, 0.1, 1e-5)
            return F.relu(h) if relu else h
        return run

    def block(ch_in, ch_out, stride):
        a = conv_bn(ch_out, 3, stride, 1)
        b = conv_bn(ch_out, 3, 1, 1, relu=False, bias=True)
        s = conv_bn(ch_out, 1, stride, 0, relu=False) if ch_in != ch_out else (lambda x: x)
        return lambda x: F.relu(b(a(x)) + s(x))

    n = (depth - 2) // 6
    layers, ch = [conv_bn(16, 3, 1, 1)], 16
    for ch_out, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(n):
            layers.append(block(ch, ch_out, stride if i == 0 else 1))
            ch = ch_out
    fc = p.take("fc")

    def forward(x):
        for f in layers:
            x = f(x)
        return F.avg_pool2d(x, 8, 1).flatten(1) @ fc[0] + fc[1]
    return forward


def torch_stepper(forward, params, x, y, device="cpu"):
    opt = torch.optim.SGD(params, lr=LR)
    xt, yt = torch.from_numpy(x).to(device), torch.from_numpy(y[:, 0]).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(xt), yt)
        loss.backward()
        opt.step()
        return loss.item()
    return step


# ---- the small CNN by hand in numpy: plain im2col -----------------------------------------

def _im2col(x, k):
    n, c, h, w = x.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # n c oh ow k k
    oh, ow = h - k + 1, w - k + 1
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * k * k), oh, ow


def _col2im(dcols, shape, k):
    n, c, h, w = shape
    oh, ow = h - k + 1, w - k + 1
    d = dcols.reshape(n, oh, ow, c, k, k)
    dx = np.zeros(shape, dtype=dcols.dtype)
    for i in range(k):
        for j in range(k):
            dx[:, :, i:i + oh, j:j + ow] += d[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dx


def numpy_small_stepper(scope, x, y):
    """The small CNN's SGD step by hand; parameters copied out of `scope`, updated in place."""
    get = lambda n: np.array(scope.find_var(n).get_tensor())  # noqa: E731
    w1, b1, w2, b2 = get("conv2d_0.w_0"), get("conv2d_0.b_0"), get("conv2d_1.w_0"), \
        get("conv2d_1.b_0")
    wf, bf = get("fc_0.w_0"), get("fc_0.b_0")
    params = [w1, b1, w2, b2, wf, bf]
    n, lab = len(y), y[:, 0]

    def conv_relu_pool(h, w, b):
        cols, oh, ow = _im2col(h, 5)
        z = cols @ w.reshape(w.shape[0], -1).T + b  # [n*oh*ow, m]
        a = np.maximum(z, 0).reshape(n, oh, ow, -1)
        p = a.reshape(n, oh // 2, 2, ow // 2, 2, -1).max(axis=(2, 4))
        return cols, a, p  # p: [n, oh/2, ow/2, m]

    def pool_relu_back(dp, a, cols, w, in_shape):
        m = w.shape[0]
        oh, ow = a.shape[1], a.shape[2]
        win = a.reshape(n, oh // 2, 2, ow // 2, 2, m)
        hit = win == dp[0][:, :, None, :, None, :]
        da = (hit * dp[1][:, :, None, :, None, :]).reshape(n * oh * ow, m)
        da *= a.reshape(-1, m) > 0
        dw = (da.T @ cols).reshape(w.shape)
        db = da.sum(0)
        dx = _col2im(da @ w.reshape(m, -1), in_shape, 5) if in_shape else None
        return dw, db, dx

    def step():
        cols1, a1, p1 = conv_relu_pool(x, w1, b1)
        h1 = p1.transpose(0, 3, 1, 2)
        cols2, a2, p2 = conv_relu_pool(np.ascontiguousarray(h1), w2, b2)
        flat = p2.transpose(0, 3, 1, 2).reshape(n, -1)
        logits = flat @ wf + bf
        e = np.exp(logits - logits.max(1, keepdims=True))
        prob = e / e.sum(1, keepdims=True)
        loss = -np.log(prob[np.arange(n), lab]).mean()
        prob[np.arange(n), lab] -= 1
        prob /= n
        dwf, dbf = flat.T @ prob, prob.sum(0)
        dp2 = (prob @ wf.T).reshape(p2.shape[0], p2.shape[3], p2.shape[1], p2.shape[2])
        dw2, db2, dh1 = pool_relu_back((p2, dp2.transpose(0, 2, 3, 1)), a2, cols2, w2,
                                       h1.shape)
        dw1, db1, _ = pool_relu_back((p1, dh1.transpose(0, 2, 3, 1)), a1, cols1, w1, None)
        for prm, g in zip(params, (dw1, db1, dw2, db2, dwf, dbf)):
            prm -= LR * g
        return float(loss)
    return step


# ---- running --------------------------------------------------------------------------------

MODELS = {"small": ("small CNN", SMALL, small_cnn_body, torch_small),
          "resnet": ("ResNet-20", RESNET, resnet_body, torch_resnet)}


def setup(model: str):
    """{framework: step()} over the same data from the same initial parameters."""
    _, cfg, body, torch_body = MODELS[model]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((cfg["batch"], *cfg["shape"])).astype("float32")
    y = rng.integers(0, 10, size=(cfg["batch"], 1)).astype("int64")
    main, startup, loss = build_program(body, cfg["shape"])
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    steps = {}
    if torch is not None:
        p = TorchParams(scope, main)
        steps["torch"] = torch_stepper(torch_body(p), p.tensors, x, y)
    if model == "small":
        steps["numpy"] = numpy_small_stepper(scope, x, y)
    feed = {"x": x, "y": y}
    steps["spmd"] = lambda: float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
    first = {name: step() for name, step in steps.items()}  # also the warm-up step
    for value in first.values():  # same start, same data: same first loss
        assert abs(value - first["spmd"]) < 1e-3 * max(1.0, abs(value)), first
    for step in steps.values():
        step()
    return steps


def bench(model: str, rounds: int, steps: int) -> tuple[dict, dict]:
    """({framework: median wall s/step}, {framework: median process CPU s/step}). CPU time
    is what one thread spent on the step: on a shared, loaded machine it is the steadier
    figure (a step preempted by other work counts its wait in wall time only)."""
    fns = setup(model)
    wall = {name: [] for name in fns}
    cpu = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                fn()
            wall[name].append((time.perf_counter() - t0) / steps)
            cpu[name].append((time.process_time() - c0) / steps)
    return ({name: statistics.median(t) for name, t in wall.items()},
            {name: statistics.median(t) for name, t in cpu.items()})


def profile(model: str, steps: int):
    import cProfile
    import pstats

    fn = setup(model)["spmd"]
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def conv_backend() -> str:
    """Which code runs spmd's float32 2-D convolutions here."""
    from spmd.kernels import conv_dnnl

    if conv_dnnl.available():
        return "oneDNN where it suits (spmd/kernels/conv_dnnl.py), else numpy"
    return "numpy (oneDNN not installed: pip install .[fast])"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: under a minute")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--models", default="small,resnet")
    parser.add_argument("--profile", choices=sorted(MODELS), help="cProfile spmd's step instead")
    parser.add_argument("--out", default=None, help="also write the Markdown report here")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 5, 3
    if args.profile:
        profile(args.profile, args.steps * 4)
        return
    goals = {"small": 1.0, "resnet": 1.2}
    lines = [f"# bench/cnn.py: median of {args.rounds} rounds x {args.steps} steps, interleaved, "
             f"1 BLAS thread" + ("" if torch is not None else " (PyTorch absent: no column)"),
             "", f"spmd's convolutions: {conv_backend()}",
             "", "| model | clock | spmd ms | torch ms | numpy ms | spmd/torch (goal) | "
             "spmd/numpy |", "|---|---|---|---|---|---|---|"]
    for model in args.models.split(","):
        for clock, t in zip(("wall", "cpu"), bench(model, args.rounds, args.steps)):
            ms = {k: f"{v * 1e3:.1f}" for k, v in t.items()}
            vs_torch = (f"{t['spmd'] / t['torch']:.2f} (<= {goals[model]})" if "torch" in t
                        else "-")
            vs_numpy = f"{t['spmd'] / t['numpy']:.2f}" if "numpy" in t else "-"
            lines.append(f"| {MODELS[model][0]} | {clock} | {ms['spmd']} | "
                         f"{ms.get('torch', '-')} | {ms.get('numpy', '-')} | {vs_torch} | "
                         f"{vs_numpy} |")
            print(lines[-1], flush=True)
    write_report("\n".join(lines), args.out)  # --out: where bench/report.py collects it


if __name__ == "__main__":
    main()
