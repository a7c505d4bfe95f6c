"""`python -m spmd.timeline merge [--out timeline.json] [--force] TRACE...` (see spmd.timeline)."""
from __future__ import annotations

import argparse
import sys

from ..errors import InvalidArgumentError
from . import merge


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m spmd.timeline",
        description="Tools for fluid.profiler's per-rank traces.")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub = commands.add_parser(
        "merge", help="merge the ranks' traces into one trace on one clock",
        description="Merge every rank's profiler trace into one Chrome / Perfetto trace: a "
                    "process per rank, tracks for ops, comm issue, comm wait and comm run, "
                    "on one clock.")
    sub.add_argument("traces", nargs="+", metavar="TRACE",
                     help="a trace file, a directory of <prefix>.rank<r> files, or the "
                          "profile path given to fluid.profiler")
    sub.add_argument("--out", "-o", default="timeline.json",
                     help="where to write the merged trace (default: timeline.json)")
    sub.add_argument("--force", action="store_true",
                     help="merge even with ranks missing or profiled spans that never overlap")
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        merged = merge(args.traces, out=args.out, force=args.force)
    except InvalidArgumentError as e:
        print(f"spmd.timeline merge: error: {e}", file=sys.stderr)
        return 2
    about = merged["otherData"]["spmd_timeline"]
    for note in about["notes"]:
        print(f"spmd.timeline merge: note: {note}", file=sys.stderr)
    events = sum(1 for e in merged["traceEvents"] if e.get("ph") != "M")
    print(f"wrote {args.out}: {len(about['merged'])} of {about['ranks']} rank(s), {events} "
          f"events; open it in https://ui.perfetto.dev or chrome://tracing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
