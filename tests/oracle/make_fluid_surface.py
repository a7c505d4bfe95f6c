"""Store fluid 1.8's public surface for docs/fluid_coverage.md (tests/compat/fluid_coverage.py):
every public module of paddle.fluid (its submodules walked, tests left out), each module's
public names (`__all__` where it has one, else the classes and functions defined in it) with
their kind (class / function / module / constant), and the members programs touch on fluid's
core objects (Program, Block, Variable, Executor, ...: public attributes, the keywords of the
calls programs make, and the private attributes real programs use).

Out-of-count groups are classified here, each with its reason: dygraph's modules and classes,
fluid.core's C++-binding internals, protobuf descriptors, and modules that do not import in
fluid 1.8.5 itself. Run with PaddlePaddle 1.8.5 from a folder outside the checkout.
"""
import importlib
import inspect
import os
import pkgutil
import sys

import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

DYGRAPH = "dygraph (imperative mode): spmd runs static programs, the mission"
CORE_INTERNAL = ("a C++-binding internal of fluid.core (inference engine, descriptors, graph "
                 "passes, dygraph tracer, reader queues) that no static-API program needs")
CORE_BUILD = "a build variant of fluid.core's C++ binding; programs import fluid.core"
PROTO = "protobuf descriptors of fluid's C++ core; spmd's IR is Python classes"
BROKEN = "does not import in fluid 1.8.5 itself"
ABSENT = "in the module's __all__ but not defined in fluid 1.8.5 itself"
DYGRAPH_METHOD = ("a dygraph-only method (@dygraph_only): in a static program fluid 1.8.5 "
                  "refuses it")
# Variable's methods that only dygraph's VarBase serves
DYGRAPH_MEMBERS = ("backward", "clear_gradient", "detach", "gradient", "numpy", "set_value")

# fluid.core's names that static programs use (places, tensors, scopes, dtypes, errors, flags,
# the build queries and the profiler switches); the rest of fluid.core is CORE_INTERNAL
CORE_IN = {
    "CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "Place", "EOFException", "EnforceNotMet",
    "LoDTensor", "LoDTensorArray", "Scope", "SelectedRows", "Tensor", "VarDesc",
    "ProfilerState", "EventSortingKey", "avx_supported", "globals", "grad_var_suffix",
    "empty_var_name", "kEmptyVarName", "kGradVarSuffix", "kTempVarName", "kZeroVarSuffix",
    "kNewGradSuffix", "is_compiled_with_cuda", "is_compiled_with_mkldnn",
    "is_compiled_with_dist", "is_compiled_with_brpc", "set_num_threads", "enable_profiler",
    "disable_profiler", "reset_profiler", "is_profiler_enabled", "op_support_gpu",
    "get_fetch_variable", "set_feed_variable", "size_of_dtype",
}


def kind(value):
    if inspect.ismodule(value):
        return "module"
    if inspect.isclass(value):
        return "class"
    if callable(value):
        return "function"
    return "constant"


def public_modules():
    names = ["paddle.fluid"]
    for info in pkgutil.walk_packages(fluid.__path__, "paddle.fluid.", onerror=lambda n: None):
        parts = info.name.split(".")
        if "tests" in parts or any(p.startswith("_") for p in parts):
            continue
        names.append(info.name)
    return sorted(names)


def module_group(name):
    short = name[len("paddle.fluid"):].lstrip(".")
    if short == "dygraph" or short.startswith("dygraph."):
        return DYGRAPH
    if short in ("core_avx", "core_noavx"):
        return CORE_BUILD
    if short == "proto" or short.startswith("proto."):
        return PROTO
    return None


def names_of(name, module):
    if name == "paddle.fluid.core":
        return sorted(n for n in dir(module) if not n.startswith("_"))
    if hasattr(module, "__all__"):
        return sorted(set(module.__all__))
    return sorted(k for k, v in vars(module).items()
                  if not k.startswith("_") and (inspect.isclass(v) or inspect.isfunction(v))
                  and getattr(v, "__module__", None) == name)


def name_group(module_name, name, value):
    if module_name == "paddle.fluid.core" and name not in CORE_IN:
        return CORE_INTERNAL
    owner = getattr(value, "__module__", "") or ""
    if inspect.isclass(value) and owner.startswith("paddle.fluid.dygraph"):
        return DYGRAPH
    return None


def describe(name):
    group = module_group(name)
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # a module broken in fluid itself is listed apart
        first_line = str(exc).splitlines()[0][:80]
        return {"group": group or f"{BROKEN} ({type(exc).__name__}: {first_line})",
                "names": {}, "out": {}}
    names, out = {}, {}
    for n in names_of(name, module):
        if not hasattr(module, n):
            names[n], out[n] = "absent", ABSENT
            continue
        value = getattr(module, n)
        names[n] = kind(value)
        why = name_group(name, n, value)
        if why:
            out[n] = why
    return {"group": group, "names": names, "out": out}


def members(obj, extra=()):
    got = {}
    for n in [n for n in dir(obj) if not n.startswith("_")] + list(extra):
        try:
            got[n] = "method" if callable(getattr(obj, n)) else "attribute"
        except Exception:  # a property that needs state the bare object lacks
            got[n] = "attribute"
    out = {n: DYGRAPH_METHOD for n in DYGRAPH_MEMBERS if n in got}
    return {"names": got, "out": out}


def keywords(func):
    return {"names": {p: "keyword" for p in inspect.signature(func).parameters
                      if p not in ("self", "args", "kwargs")}, "out": {}}


def member_table():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        y = fluid.layers.fc(x, 2)
    block = main.global_block()
    param = block.all_parameters()[0]
    op = block.ops[0]
    exe = fluid.Executor(fluid.CPUPlace())
    # private attributes of these objects that real programs (the model zoo, PaddleRec,
    # ERNIE, Paddle's own tests) read or call
    program_private = ("_is_distributed", "_is_chief", "_endpoints", "_trainers_endpoints",
                       "_ps_endpoint", "_distributed_lookup_table", "_copy_param_info_from",
                       "_copy_dist_param_info_from", "_prune", "_prune_with_input",
                       "_inference_optimize", "_sync_with_cpp", "_optimized_guard",
                       "_lr_schedule_guard", "_version", "_fleet_opt", "_seed")
    block_private = ("_remove_op", "_insert_op", "_remove_var", "_rename_var", "_prepend_op",
                     "_sync_with_cpp", "_clone_variable", "_var_recursive",
                     "_find_var_recursive")
    op_private = ("_rename_input", "_rename_output", "_set_attr", "_update_desc_attr",
                  "_block_attr", "_blocks_attr")
    scope = fluid.core.Scope()
    tensor = fluid.core.LoDTensor()
    return {
        "Program": members(main, program_private),
        "Block": members(block, block_private),
        "Variable": members(y, ("_set_error_clip",)),
        "Parameter": members(param),
        "Operator": members(op, op_private),
        "Executor": members(exe),
        "Executor.run": keywords(fluid.Executor.run),
        "Executor.train_from_dataset": keywords(fluid.Executor.train_from_dataset),
        "Executor.infer_from_dataset": keywords(fluid.Executor.infer_from_dataset),
        "ParallelExecutor": members(fluid.ParallelExecutor),
        "ParallelExecutor.__init__": keywords(fluid.ParallelExecutor.__init__),
        "ParallelExecutor.run": keywords(fluid.ParallelExecutor.run),
        "CompiledProgram": members(fluid.CompiledProgram(main)),
        "CompiledProgram.with_data_parallel": keywords(
            fluid.CompiledProgram.with_data_parallel),
        "BuildStrategy": members(fluid.BuildStrategy()),
        "ExecutionStrategy": members(fluid.ExecutionStrategy()),
        "core.VarDesc.VarType": members(fluid.core.VarDesc.VarType),
        "core.LoDTensor": members(tensor),
        "core.Scope": members(scope),
        "DataLoader.from_generator": keywords(fluid.io.DataLoader.from_generator),
        "DataFeeder": members(fluid.DataFeeder([x], fluid.CPUPlace())),
    }


def main():
    modules = {name: describe(name) for name in public_modules()}
    save("fluid_surface", {"modules": modules, "members": member_table()},
         meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
