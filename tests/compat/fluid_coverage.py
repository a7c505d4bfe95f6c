"""docs/fluid_coverage.md: how much of fluid 1.8's whole public surface spmd.fluid provides.

    python tests/compat/fluid_coverage.py            # print the table
    python tests/compat/fluid_coverage.py --write    # rewrite docs/fluid_coverage.md
    python tests/compat/fluid_coverage.py --check    # exit 1 when docs/fluid_coverage.md is stale

The modules, their names and kinds come from tests/oracle/data/fluid_surface.json
(tests/oracle/make_fluid_surface.py read them from PaddlePaddle 1.8.5). For every module
`paddle.fluid.<path>` the table imports `spmd.fluid.<path>` and checks each name: "working"
when spmd's module has it and it is of fluid's kind (a class where fluid has a class, callable
where fluid has a function, a module, a value); otherwise its reason comes from DEFERRED /
NOT_PLANNED below, and a name in neither is "missing". The members rows do the same for the
attributes, methods and keywords of fluid's core objects (Program, Block, Variable, Executor,
...), checked on the same objects built in spmd. Groups fluid itself does not count as its
static API (dygraph, fluid.core's C++ internals, protobuf descriptors, modules that do not
import in fluid 1.8.5) are listed apart with their reasons, out of the count.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import pathlib
import sys
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from oracle_io import load  # noqa: E402

DOC = ROOT / "docs" / "fluid_coverage.md"

DETECTION = "detection (issue 22 item 4: fluid.layers.detection and the ROI ops, in progress)"
SLIM_IRGRAPH = ("slim's quantization rewrites fluid's C++ IrGraph (core.Graph and its passes, "
                "int8 and MKL-DNN kernels), which spmd's Python IR and float kernels do not have")
PSLIB = ("pslib: Baidu's closed-source parameter server (core.Fleet), not in fluid's public "
         "wheels; spmd's parameter server is fluid's gRPC transpiler mode")
TRAINER_DESC = ("a protobuf description of fluid's C++ dataset trainers and device workers; "
                "spmd's train_from_dataset runs the program itself")
FP16 = ("fluid's float16 rewrite; spmd trains in the program's own dtype "
        "(contrib.mixed_precision.decorate says so)")

# names that need a capability not yet built, keyed "<module path>:<name>" or "<path>:*"
DEFERRED: dict[str, str] = {
    **{f"{m}:*": DETECTION for m in ("layers.detection",)},
    **{f"layers:{n}": DETECTION for n in (
        "deformable_roi_pooling", "generate_mask_labels", "locality_aware_nms", "matrix_nms",
        "retinanet_detection_output", "retinanet_target_assign", "roi_perspective_transform",
        "prroi_pool", "psroi_pool", "roi_align", "roi_pool", "generate_proposal_labels",
        "rpn_target_assign", "distribute_fpn_proposals", "collect_fpn_proposals",
        "detection_output", "multi_box_head", "ssd_loss")},
    **{f"layers.nn:{n}": DETECTION for n in (
        "deformable_roi_pooling", "prroi_pool", "psroi_pool", "roi_align", "roi_pool")},
}

# names spmd does not plan to provide, and why
NOT_PLANNED: dict[str, str] = {
    **{f"{m}:*": SLIM_IRGRAPH for m in (
        "contrib.slim.quantization", "contrib.slim.quantization.mkldnn_post_training_strategy",
        "contrib.slim.quantization.post_training_quantization",
        "contrib.slim.quantization.qat2_int8_mkldnn_pass",
        "contrib.slim.quantization.qat_int8_mkldnn_pass",
        "contrib.slim.quantization.quantization_pass",
        "contrib.slim.quantization.quantization_strategy")},
    **{f"{m}:QuantizeTranspiler": "fake-quantization (int8) training; spmd trains in "
       "float32 / float64" for m in ("contrib", "contrib.quantize",
                                     "contrib.quantize.quantize_transpiler")},
    **{f"{m}:*": PSLIB for m in (
        "distributed", "distributed.fleet", "distributed.helper", "distributed.ps_instance",
        "incubate.fleet.parameter_server.pslib",
        "incubate.fleet.parameter_server.pslib.node",
        "incubate.fleet.parameter_server.pslib.optimizer_factory",
        "incubate.fleet.parameter_server.pslib.ps_pb2")},
    **{f"{m}:*": TRAINER_DESC for m in ("trainer_desc", "trainer_factory", "device_worker")},
    **{f"op:{n}": "fluid's C++ op protos (OpProto, OpDesc creation); spmd's ops are Python "
       "definitions, and op.Operator runs them" for n in (
        "OpDescCreationMethod", "OpInfo", "create_op_creation_method", "get_all_op_protos")},
    **{f"{m}:ComplexVariable": "a dygraph-only complex tensor (a pair of VarBases) in fluid "
       "1.8" for m in ("", "framework")},
    **{f"{m}:load_op_library": "loads a custom C++ operator library (.so) into fluid's C++ "
       "registry; spmd's ops are added in Python (define_op and kernel)"
       for m in ("", "framework")},
    **{f"contrib.mixed_precision.fp16_utils:{n}": FP16 for n in (
        "rewrite_program", "update_loss_scaling", "update_role_var_grad")},
    "Operator:attr_type": "fluid's C++ AttrType codes; spmd's attributes are typed Python "
    "values checked against the op definition",
    "Program:_version": "spmd's Program._version is its mutation counter (an int, as plan "
    "caches key on it); fluid's is a method returning the ProgramDesc version",
    **{f"Executor:{n}": "fluid Executor's private caches of C++ contexts and scopes; spmd's "
       "is Executor.plan_cache" for n in (
        "ctx_caches", "program_caches", "pruned_program_caches",
        "pruned_program_scope_caches", "scope_caches", "var_caches")},
}


def surface() -> dict:
    return load("fluid_surface")


def short(module: str) -> str:
    return module[len("paddle.fluid"):].lstrip(".")


def spmd_path(module: str) -> str:
    return "spmd.fluid" + module[len("paddle.fluid"):]


def reason_for(path: str, name: str) -> tuple[str, str] | None:
    for table, state in ((DEFERRED, "later"), (NOT_PLANNED, "not planned")):
        for key in (f"{path}:{name}", f"{path}:*"):
            if key in table:
                return state, table[key]
    return None


def same_kind(want: str, value) -> bool:
    if want == "module":
        return inspect.ismodule(value)
    if want == "class":
        return inspect.isclass(value)
    if want in ("function", "method"):
        return callable(value)
    return not inspect.ismodule(value)  # a constant or attribute: any value


def kind_of(value) -> str:
    if inspect.ismodule(value):
        return "module"
    if inspect.isclass(value):
        return "class"
    return "function" if callable(value) else "constant"


def import_spmd(module: str):
    """(spmd's module, None) or (None, the error in one line)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(spmd_path(module)), None
    except Exception as exc:  # the table says why a module does not import
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def check_name(owner, path: str, name: str, want: str) -> tuple[str, str]:
    """("working", "") or (state, reason) for one name of one module."""
    try:
        value = getattr(owner, name) if owner is not None else None
        found = owner is not None
    except AttributeError:
        found = False
    except Exception as exc:  # a lazy name that fails to load is a failure, said here
        return "broken", f"{type(exc).__name__}: {exc}"
    if found and same_kind(want, value):
        return "working", ""
    known = reason_for(path, name)
    if known:
        return known
    if found:
        return "wrong kind", f"fluid has a {want}, spmd a {kind_of(value)}"
    return "missing", ""


def module_rows(data: dict) -> list[dict]:
    rows = []
    for module, info in sorted(data["modules"].items()):
        row = {"module": module, "path": short(module), "group": info["group"], "names": []}
        if info["group"]:
            rows.append(row)
            continue
        owner, error = import_spmd(module)
        row["import_error"] = error
        for name, want in sorted(info["names"].items()):
            if name in info["out"]:
                row["names"].append((name, "out", info["out"][name]))
                continue
            state, why = check_name(owner, row["path"], name, want)
            row["names"].append((name, state, why))
        rows.append(row)
    return rows


def member_objects() -> dict:
    """spmd's counterparts of the objects make_fluid_surface.py read members from."""
    import spmd.fluid as fluid

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        y = fluid.layers.fc(x, 2)
    block = main.global_block()
    return {
        "Program": main, "Block": block, "Variable": y,
        "Parameter": block.all_parameters()[0], "Operator": block.ops[0],
        "Executor": fluid.Executor(fluid.CPUPlace()),
        "Executor.run": fluid.Executor.run,
        "Executor.train_from_dataset": getattr(fluid.Executor, "train_from_dataset", None),
        "Executor.infer_from_dataset": getattr(fluid.Executor, "infer_from_dataset", None),
        "ParallelExecutor": fluid.ParallelExecutor,
        "ParallelExecutor.__init__": fluid.ParallelExecutor.__init__,
        "ParallelExecutor.run": fluid.ParallelExecutor.run,
        "CompiledProgram": fluid.CompiledProgram(main),
        "CompiledProgram.with_data_parallel": fluid.CompiledProgram.with_data_parallel,
        "BuildStrategy": fluid.BuildStrategy(),
        "ExecutionStrategy": fluid.ExecutionStrategy(),
        "core.VarDesc.VarType": fluid.core.VarDesc.VarType,
        "core.LoDTensor": fluid.core.LoDTensor(),
        "core.Scope": fluid.core.Scope(),
        "DataLoader.from_generator": fluid.io.DataLoader.from_generator,
        "DataFeeder": fluid.DataFeeder([x], fluid.CPUPlace()),
    }


def check_member(obj, owner: str, name: str, want: str) -> tuple[str, str]:
    if want == "keyword":
        params = inspect.signature(obj).parameters if obj is not None else {}
        if name in params:
            return "working", ""
        return reason_for(owner, name) or ("missing", "")
    return check_name(obj, owner, name, want)


def member_rows(data: dict) -> list[dict]:
    objects = member_objects()
    rows = []
    for owner, info in sorted(data["members"].items()):
        names = []
        for name, want in sorted(info["names"].items()):
            if name in info["out"]:
                names.append((name, "out", info["out"][name]))
                continue
            names.append((name, *check_member(objects[owner], owner, name, want)))
        rows.append({"owner": owner, "names": names})
    return rows


def counts(rows: list[dict]) -> tuple[int, int]:
    counted = [s for r in rows for _, s, _ in r["names"] if s != "out"]
    return sum(s == "working" for s in counted), len(counted)


def pct(got: int, total: int) -> str:
    return f"{100 * got / total:.1f}%" if total else "-"


def headline(mods: list[dict], members: list[dict]) -> str:
    counted = [r for r in mods if not r["group"]]
    importable = sum(r["import_error"] is None for r in counted)
    got, total = counts(mods)
    mgot, mtotal = counts(members)
    states = [st for r in mods + members for _, st, _ in r["names"]]
    later, not_planned = states.count("later"), states.count("not planned")
    unexplained = len(states) - states.count("working") - states.count("out") - later - (
        not_planned)
    return (f"Of fluid 1.8.5's static-API modules, **{importable} of {len(counted)}** import as "
            f"`spmd.fluid.<same path>`; **{got} of {total}** of their public names work "
            f"(**{pct(got, total)}**), and {mgot} of {mtotal} ({pct(mgot, mtotal)}) of the "
            f"members programs touch on fluid's core objects. Of the names and members that "
            f"do not work, {later} are later (a capability not built yet) and {not_planned} "
            f"not planned, each with its reason below; {unexplained} without a reason.")


def gap_text(state: str, why: str) -> str:
    return f"{state}{' — ' + why if why else ''}"


def render(data: dict) -> str:
    mods, members = module_rows(data), member_rows(data)
    lines = [
        "# fluid 1.8 coverage",
        "",
        headline(mods, members),
        "",
        "Generated by `python tests/compat/fluid_coverage.py --write` from fluid 1.8.5's "
        "modules and names (stored by tests/oracle/make_fluid_surface.py). A name works when "
        "`spmd.fluid.<path>` has it and it is of fluid's kind (class, function, module, "
        "value); every other name is listed below with its reason. fluid.layers' names are "
        "also in docs/layers_coverage.md.",
        "",
        "## Modules",
        "",
        "| fluid 1.8 module | imports | names working | gaps |",
        "|---|---|---|---|",
    ]
    for row in mods:
        if row["group"]:
            continue
        got, total = counts([row])
        gaps = sum(s not in ("working", "out") for _, s, _ in row["names"])
        imports = "yes" if row["import_error"] is None else f"no ({row['import_error']})"
        lines.append(f"| `{row['module']}` | {imports} | {got}/{total} | {gaps or ''} |")
    lines += ["", "## Names that do not work yet, and why", "",
              "| module | name | status |", "|---|---|---|"]
    for row in mods:
        for name, state, why in row["names"]:
            if state not in ("working", "out"):
                lines.append(f"| `{row['path'] or 'fluid'}` | `{name}` | "
                             f"{gap_text(state, why)} |")
    lines += ["", "## Members of fluid's core objects", "",
              "| object | members working | not working |", "|---|---|---|"]
    for row in members:
        got, total = counts([row])
        bad = ", ".join(f"`{n}` ({gap_text(s, w)})" for n, s, w in row["names"]
                        if s not in ("working", "out"))
        lines.append(f"| `{row['owner']}` | {got}/{total} | {bad} |")
    lines += ["", "## Out of the count", "",
              "Listed apart, as the issue that asked for this table says: groups that are not "
              "fluid's static API.", "", "| module | why |", "|---|---|"]
    for row in mods:
        if row["group"]:
            lines.append(f"| `{row['module']}` | {row['group']} |")
    out: dict[str, list[str]] = {}
    for row in mods + members:
        for name, state, why in row["names"]:
            if state == "out":
                out.setdefault(why, []).append(
                    f"{row.get('path', row.get('owner')) or 'fluid'}.{name}")
    lines += ["", "| names | why |", "|---|---|"]
    for why, names in sorted(out.items()):
        lines.append(f"| {', '.join(f'`{n}`' for n in names)} | {why} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/fluid_coverage.md")
    parser.add_argument("--check", action="store_true", help="fail if the doc is stale")
    args = parser.parse_args(argv)
    text = render(surface())
    if args.write:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(text)
    elif args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/fluid_coverage.md is out of date: run "
                  "python tests/compat/fluid_coverage.py --write")
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
