"""tests/unit/ps_scripts/ps_role.py as one role of a job that paddle-launch starts: the role
and rank come from the PADDLE_* variables (spmd.ps.role.read_ps_role), and `--out BASE` becomes
BASE.ps<I>.npz for pserver I and BASE.t<I>.npz for trainer I. With PS_FAIL_TRAINER=I, trainer I
exits with code 3 at its start (the launcher must then stop the pservers); PS_FAIL_SERVER=I the
same for pserver I; PS_HANG_TRAINER=I makes trainer I sleep instead."""
from __future__ import annotations

import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit" / "ps_scripts")]

import ps_role  # noqa: E402

from spmd.ps.role import PSERVER, read_ps_role  # noqa: E402


def main() -> int:
    role = read_ps_role()
    argv = sys.argv[1:]
    at = argv.index("--out") + 1
    argv[at] += f".{'ps' if role.role == PSERVER else 't'}{role.index}.npz"
    name, var = ("pserver", "PS_FAIL_SERVER") if role.role == PSERVER else \
        ("trainer", "PS_FAIL_TRAINER")
    if os.environ.get(var, "") == str(role.index):
        print(f"{name} {role.index}: failing on purpose ({var})", flush=True)
        return 3
    if role.role != PSERVER and os.environ.get("PS_HANG_TRAINER", "") == str(role.index):
        print(f"trainer {role.index}: hanging on purpose (PS_HANG_TRAINER)", flush=True)
        time.sleep(600)
    return ps_role.main(argv)


if __name__ == "__main__":
    sys.exit(main())
