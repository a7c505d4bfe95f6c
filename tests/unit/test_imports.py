"""The dependency direction docs/design.md fixes, checked by scanning imports; and `import spmd`
stays free of cupy and MPI."""
from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# package -> spmd packages it must never import. docs/design.md: core <- ops <- kernels,
# core <- autodiff <- optimizer <- layers, core <- passes <- executor; comm imports no IR
# and not spmd.run (the status file it shares with the launcher is spmd.status_file).
FORBIDDEN = {
    "core": {"ops", "kernels", "autodiff", "optimizer", "layers", "passes", "executor", "comm",
             "ps", "io"},
    "ops": {"kernels", "autodiff", "optimizer", "layers", "passes", "executor", "comm", "ps"},
    "kernels": {"autodiff", "optimizer", "layers", "passes", "executor", "comm", "ps"},
    "autodiff": {"kernels", "optimizer", "layers", "passes", "executor", "comm", "ps"},
    "optimizer": {"kernels", "layers", "passes", "executor", "comm", "ps"},
    "passes": {"kernels", "layers", "executor", "comm", "ps"},
    "comm": {"core", "ops", "kernels", "autodiff", "optimizer", "layers", "passes", "executor",
             "ps", "io", "run"},
}


def _spmd_imports(path: pathlib.Path, package: str):
    """Top-level spmd subpackages imported by `path` (absolute or relative imports)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(ROOT / "spmd").parts) - 1  # dirs below spmd/
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level > depth:  # reaches spmd/ itself: `from .. import x` / `from ..x`
                    target = (node.module or "").split(".")[0]
                    names = [target] if target else [a.name for a in node.names]
                    yield from names
                continue
            parts = (node.module or "").split(".")
            if parts[0] == "spmd" and len(parts) > 1:
                yield parts[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "spmd" and len(parts) > 1:
                    yield parts[1]


def test_dependency_direction():
    bad = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / "spmd" / package).rglob("*.py")):
            for target in _spmd_imports(path, package):
                if target in forbidden:
                    bad.append(f"{path.relative_to(ROOT)} imports spmd.{target}")
    assert not bad, "imports against docs/design.md's dependency direction:\n" + "\n".join(bad)


def test_launch_imports_only_run_flags_and_status_file():
    bad = []
    for path in sorted((ROOT / "launch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for m in mods:
                allowed = ("spmd.run", "spmd.flags", "spmd.status_file", "spmd.job_token",
                           "spmd.launcher_vars")
                if m.split(".")[0] == "spmd" and m not in allowed:
                    bad.append(f"{path.relative_to(ROOT)} imports {m}")
    assert not bad, "\n".join(bad)


def test_import_spmd_loads_neither_cupy_nor_mpi():
    code = ("import sys, spmd, spmd.fluid, spmd.static; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'mpi4py')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_lazy_indexes_are_complete_and_exact():
    """Importing every module that registers ops or kernels registers exactly what the
    generated indexes say, each key by the module they name (spmd.lazy.INDEXES)."""
    code = (
        "import json, spmd.lazy as lazy\n"
        "diffs = {}\n"
        "for table, index, dec_module, dec in lazy.INDEXES:\n"
        "    made, stored = lazy.generate(table, dec_module, dec), lazy.read_index(index)\n"
        "    diffs[index] = sorted(f'{k}: {stored.get(k)} -> {made.get(k)}'\n"
        "                          for k in set(made) | set(stored)\n"
        "                          if made.get(k) != stored.get(k))\n"
        "    assert made, table\n"
        "print(json.dumps(diffs))\n")
    diffs = json.loads(_run(code))
    assert not any(diffs.values()), (
        "the lazy indexes are stale; regenerate them with "
        "python -c 'from spmd.lazy import write_indexes; write_indexes()':\n"
        + json.dumps(diffs, indent=1))


def test_lod_rules_name_defined_ops():
    from spmd.lazy import read_index
    from spmd.ops.lod_rules import SHARE_LOD

    defined = read_index("spmd.ops.op_index")
    assert not [t for t in SHARE_LOD if t not in defined]


def test_lazy_tables_read_as_full_tables():
    code = (
        "import sys, spmd.fluid\n"
        "from spmd.kernels import KERNELS\n"
        "from spmd.ops import OP_DEFS\n"
        "from spmd.lazy import read_index\n"
        "assert 'spmd.kernels.conv' not in sys.modules\n"
        "assert 'conv2d' in KERNELS and 'spmd.kernels.conv' in sys.modules\n"
        "assert 'no_such_op' not in OP_DEFS\n"
        "assert set(OP_DEFS) == set(read_index('spmd.ops.op_index'))\n"
        "assert set(KERNELS) == set(read_index('spmd.kernels.kernel_index'))\n"
        "print(len(OP_DEFS), len(KERNELS))\n")
    n_ops, n_kernels = map(int, _run(code).split())
    assert n_ops > 500 and n_kernels > 500


def test_import_spmd_fluid_loads_only_the_core():
    """`import spmd.fluid` (and `import spmd`) load no kernel or op module, no data set, no
    fleet, no parameter server, no gRPC, only the layers every program uses (fc's module and
    what Variable's operators need); each comes at its first use."""
    code = ("import sys, spmd, spmd.fluid\n"
            "print(' '.join(sorted(sys.modules)))\n")
    loaded = set(_run(code).split())
    kernels = {m for m in loaded if m.startswith("spmd.kernels.")} - {
        "spmd.kernels.registry", "spmd.kernels.context"}
    ops = {m for m in loaded if m.startswith("spmd.ops.")} - {
        "spmd.ops.registry", "spmd.ops.build", "spmd.ops.lod_rules"}
    unwanted = {m for m in loaded if m.split(".")[0] in ("grpc", "cupy", "mpi4py", "launch")
                or m.split(".")[:2] in (["spmd", p] for p in (
                    "dataset", "fleet", "distributed", "ps", "io", "reader", "timeline",
                    "executor", "passes", "optimizer", "autodiff"))
                or m.startswith(("spmd.fluid.", "spmd.static"))
                or m in {f"spmd.layers.{name}" for name in (
                    "control_flow", "conv", "decode", "dynamic_rnn", "loss", "rnn_cells",
                    "sequence", "sequence_rnn", "static_rnn", "vision", "paddle_tensor")}}
    assert not kernels and not ops and not unwanted, sorted(kernels | ops | unwanted)


def test_lazy_faces_list_what_their_modules_export():
    import spmd
    import spmd.fluid as fluid
    from spmd.fluid import data_feeder, framework, reader
    from spmd.layers import paddle_tensor

    assert list(spmd._TENSOR_NAMES) == list(paddle_tensor.__all__)
    assert list(fluid._FRAMEWORK_ALL) == list(framework.__all__)
    assert list(fluid._READER_ALL) == list(reader.__all__)
    assert list(fluid._DATA_FEEDER_ALL) == list(data_feeder.__all__)


def test_layers_name_index_is_exact():
    """spmd/layers/name_index.py names, for every fluid.layers name, the module that star
    imports of spmd.layers._STAR_MODULES in order would take it from."""
    code = ("import json, spmd.lazy as lazy\n"
            "print(json.dumps([[p, lazy.face_index(p), lazy.read_index(i)]\n"
            "                  for p, i in lazy.FACES]))\n")
    for package, made, stored in json.loads(_run(code)):
        assert made == stored, (
            f"{package}'s name index is stale; regenerate it with "
            "python -c 'from spmd.lazy import write_indexes; write_indexes()'")


def test_lazy_faces_resolve_every_public_name():
    """Every name of the faces' __all__ resolves, and to what the module that defines it
    holds; `from spmd.fluid import *` works."""
    code = (
        "import types, spmd, spmd.fluid, spmd.fluid.layers, spmd.layers, spmd.static\n"
        "import spmd.optimizer.fluid_names\n"
        "from spmd.fluid import clip, optimizer, regularizer\n"
        "for face in (spmd, spmd.fluid, spmd.fluid.layers, spmd.layers, spmd.static,\n"
        "             spmd.optimizer, spmd.optimizer.fluid_names, clip, optimizer, regularizer):\n"
        "    for name in face.__all__:\n"
        "        assert getattr(face, name) is not None, (face.__name__, name)\n"
        "    assert set(face.__all__) <= set(dir(face)), face.__name__\n"
        "assert isinstance(spmd.fluid.incubate.fleet, types.ModuleType)\n"
        "assert spmd.fluid.layers.fc is spmd.layers.nn.fc\n"
        "import importlib\n"
        "assert isinstance(importlib.import_module('spmd.layers.rnn'), types.ModuleType)\n"
        "assert callable(spmd.fluid.layers.rnn) and spmd.layers.rnn is spmd.fluid.layers.rnn\n"
        "assert spmd.fluid.core.VarType is spmd.core.dtypes.VarType\n"
        "assert spmd.mean is spmd.layers.paddle_tensor.mean\n"
        "exec('from spmd.fluid import *')\n"
        "exec('from spmd.fluid.layers import *')\n"
        "exec('from spmd import *')\n"
        "print('ok')\n")
    assert _run(code).strip() == "ok"


def test_each_indexed_module_registers_its_keys_alone():
    """The lazy tables import one module for a key: each indexed module, imported first in a
    fresh process, registers every key the index gives it (no registration left to a module
    that used to import it)."""
    import concurrent.futures

    from spmd.lazy import INDEXES, read_index

    indexes = [(table, read_index(index)) for table, index, _, _ in INDEXES]
    modules = sorted({m for _, index in indexes for m in index.values()})
    check = ("import importlib, sys, spmd\n"
             "from spmd.lazy import INDEXES, read_index\n"
             "m = sys.argv[1]\n"
             "importlib.import_module(m)\n"
             "for table, index, _, _ in INDEXES:\n"
             "    mod, _, attr = table.partition(':')\n"
             "    t = getattr(importlib.import_module(mod), attr)\n"
             "    keys = [k for k, v in read_index(index).items() if v == m]\n"
             "    missing = [k for k in keys if not t.registered(k)]\n"
             "    assert not missing, (m, missing)\n")

    def run(module):
        out = subprocess.run([sys.executable, "-c", check, module], capture_output=True,
                             text=True)
        return module, out.returncode, out.stderr[-1000:]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        bad = [(m, err) for m, rc, err in pool.map(run, modules) if rc]
    assert not bad, bad


def test_an_mlp_step_loads_only_what_it_uses():
    """Build, initialize and run one SGD step of a small MLP (bench/startup.py's program):
    no convolution, sequence, control-flow or adaptive-optimizer code, no data set, fleet,
    parameter server or gRPC is imported on the way, nor the thread-pool, logging and socket
    modules (start-up: the communication thread needs none of them)."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "import spmd.fluid as fluid\n"
        "main, startup = fluid.Program(), fluid.Program()\n"
        "with fluid.program_guard(main, startup):\n"
        "    x = fluid.data('x', [None, 8], 'float32')\n"
        "    y = fluid.data('y', [None, 1], 'int64')\n"
        "    h = fluid.layers.fc(x, 8, act='relu')\n"
        "    loss = fluid.layers.mean(\n"
        "        fluid.layers.softmax_with_cross_entropy(fluid.layers.fc(h, 3), y))\n"
        "    fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)\n"
        "exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()\n"
        "exe.run(startup, scope=scope)\n"
        "feed = {'x': np.ones((4, 8), 'float32'), 'y': np.zeros((4, 1), 'int64')}\n"
        "exe.run(main, feed=feed, fetch_list=[loss], scope=scope)\n"
        "print(' '.join(sorted(sys.modules)))\n")
    loaded = set(_run(code).split())
    unwanted = {m for m in loaded if m.split(".")[0] in ("grpc", "cupy", "mpi4py", "launch")
                or m.split(".")[:2] in (["spmd", p] for p in (
                    "dataset", "fleet", "distributed", "ps", "timeline", "reader"))
                or m in {"concurrent.futures", "logging", "socket"}
                or m in {"spmd.kernels.conv", "spmd.kernels.pool", "spmd.kernels.sequence",
                         "spmd.kernels.control_flow", "spmd.kernels.optim_adaptive",
                         "spmd.kernels.loss_sampled", "spmd.ops.conv", "spmd.ops.sequence",
                         "spmd.ops.optim_adaptive", "spmd.optimizer.adaptive",
                         "spmd.optimizer.averaging", "spmd.layers.decode",
                         "spmd.layers.control_flow", "spmd.layers.sequence"}}
    assert not unwanted, sorted(unwanted)


def test_comm_backend_modules_are_exact():
    """comm.factory.BACKEND_MODULES names, for every backend but 'self', the module that
    registers it."""
    code = ("import importlib, pkgutil, spmd.comm as comm\n"
            "from spmd.comm.base import BACKENDS\n"
            "from spmd.comm.factory import BACKEND_MODULES\n"
            "for m in pkgutil.iter_modules(comm.__path__):\n"
            "    importlib.import_module('spmd.comm.' + m.name)\n"
            "made = {k: '.' + c.__module__.rpartition('.')[2] for k, c in BACKENDS.items()\n"
            "        if k != 'self'}\n"
            "assert made == BACKEND_MODULES, (made, BACKEND_MODULES)\n")
    _run(code)


def test_launcher_imports_load_no_engine():
    """paddle-launch reads spmd.flags and spmd.status_file, and every worker starts in
    spmd.run: none of them loads numpy or the IR, so the launcher takes no CPU from the
    workers it starts. The first name used from spmd loads the op schema and Variable's
    operators, as `import spmd` did."""
    code = ("import sys, spmd.flags, spmd.status_file, spmd.job_token, spmd.run\n"
            "assert 'numpy' not in sys.modules and 'spmd.core' not in sys.modules, \\\n"
            "    sorted(m for m in sys.modules if m.startswith(('spmd', 'numpy')))\n"
            "import spmd\n"
            "program = spmd.Program()\n"
            "assert 'spmd.ops' in sys.modules and 'spmd.layers' in sys.modules\n"
            "with spmd.static.program_guard(program):\n"
            "    x = spmd.static.data('x', [2, 3], 'float32')\n"
            "    assert (x + 1).shape == (2, 3)\n"
            "print('ok')\n")
    assert _run(code).strip() == "ok"


def test_pass_index_is_exact():
    """spmd/passes/pass_index.py is what its generator writes for the passes every pass module
    registers: each pass's module, order, one-place flag and gate."""
    code = ("import pathlib, sys\n"
            "import spmd.passes.pass_index as index\n"
            "from spmd.passes.pass_gates import index_source\n"
            "sys.stdout.write(str(pathlib.Path(index.__file__).read_text() == index_source()))\n")
    assert _run(code) == "True", (
        "spmd/passes/pass_index.py is stale; regenerate it with "
        "python -c 'from spmd.lazy import write_indexes; write_indexes()'")


def test_pass_index_names_every_registered_pass():
    """Every pass the registry knows once all its modules are imported is in the index, under
    the module that registers it, with its order and one-place flag."""
    from spmd.passes.pass_index import PASSES as INDEX
    from spmd.passes.registry import PASSES

    registered = {p.name: (p.apply.__module__, p.order, p.one_place) for p in PASSES.passes()}
    indexed = {name: (e.module, e.order, e.one_place) for name, e in INDEX.items()}
    assert registered == indexed


_DP_MLP = (
    "import sys\n"
    "import numpy as np\n"
    "import spmd.fluid as fluid\n"
    "from spmd.passes.registry import PASSES\n"
    "main, startup = fluid.Program(), fluid.Program()\n"
    "with fluid.program_guard(main, startup):\n"
    "    x = fluid.data('x', [None, 8], 'float32')\n"
    "    y = fluid.data('y', [None, 1], 'int64')\n"
    "    h = fluid.layers.fc(x, 8, act='relu')\n"
    "    loss = fluid.layers.mean(\n"
    "        fluid.layers.softmax_with_cross_entropy(fluid.layers.fc(h, 3), y))\n"
    "    fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)\n"
    "exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()\n"
    "exe.run(startup, scope=scope)\n"
    "strategy = fluid.BuildStrategy()\n"
    "STRATEGY\n"
    "program = fluid.CompiledProgram(main).with_data_parallel(\n"
    "    loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * 2)\n"
    "feed = {'x': np.ones((4, 8), 'float32'), 'y': np.zeros((4, 1), 'int64')}\n"
    "out, = exe.run(program, feed=feed, fetch_list=[loss], scope=scope)\n"
    "assert np.isfinite(out).all()\n"
    "from spmd.passes.pass_index import PASSES as INDEX\n"
    "modules = sorted({e.module for e in INDEX.values()} & set(sys.modules))\n"
    "print(' '.join(PASSES.imported()) + '|' + ' '.join(modules))\n")


def _dp_mlp_passes(strategy: str = "") -> tuple[list[str], list[str]]:
    """(passes imported, pass modules imported) after a data-parallel MLP step."""
    passes, modules = _run(_DP_MLP.replace("STRATEGY", strategy or "pass")).strip().split("|")
    return passes.split(), modules.split()


def test_a_data_parallel_mlp_step_imports_only_the_passes_it_runs():
    """The first data-parallel step of a small MLP imports the modules of the passes that run
    (loss scaling, allreduce, the collectives' finish) and of no other pass."""
    passes, modules = _dp_mlp_passes()
    assert passes == ["allreduce", "finish_collectives", "scale_loss_grad"]
    assert modules == ["spmd.passes.allreduce", "spmd.passes.common",
                       "spmd.passes.scale_loss_grad"]


def test_a_strategy_field_imports_the_pass_it_asks_for():
    """A BuildStrategy field turns its pass on: it is imported and runs (Reduce mode replaces
    allreduce; fuse_all_optimizer_ops fuses the SGD updates)."""
    passes, modules = _dp_mlp_passes(
        "strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce\n"
        "strategy.fuse_all_optimizer_ops = True")
    assert {"reduce_mode", "fuse_all_optimizer_ops", "scale_loss_grad"} <= set(passes)
    assert {"spmd.passes.reduce_mode", "spmd.passes.fuse_optimizer"} <= set(modules)
    assert not {"sync_batch_norm", "sequence_loss_scale", "graphviz", "fuse_bn_act",
                "memory_optimize"} & set(passes)
