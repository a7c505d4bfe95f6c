"""Before the first data-parallel step every process checks it compiled the same program, so a
rank that built a different model fails at once, naming the first differing op with every
rank's shapes of its variables (a layer size that differs shows there), instead of hanging in
a collective that the others never reach. Raw bytes over MPI: no pickle."""
from __future__ import annotations

import hashlib
import json

import numpy as np

from ..errors import PreconditionError

_TEXT = 1200  # bytes of each rank's description of the first differing op


def _var_shapes(block, op) -> dict:
    """name -> [shape, dtype] of every variable `op` reads or writes."""
    names = sorted(set(op.input_arg_names) | set(op.output_arg_names))
    return {n: [list(block.vars[n].shape), block.vars[n].dtype] for n in names
            if n in block.vars}


def _op_digests(program) -> np.ndarray:
    """One digest per op of its type, attributes, arguments and their shapes and dtypes."""
    block = program.global_block()
    ops = program.to_dict()["ops"]
    for op, live in zip(ops, block.ops):  # as Program.fingerprint does
        op["attrs"].pop("op_callstack", None)
        op["shapes"] = _var_shapes(block, live)
    return np.array([int.from_bytes(hashlib.sha256(json.dumps(op, sort_keys=True, default=str)
                                                   .encode()).digest()[:8], "little", signed=True)
                     for op in ops], dtype=np.int64)


def _describe(block, op) -> str:
    shapes = ", ".join(f"{n} {shape} {dtype}" for n, (shape, dtype) in
                       _var_shapes(block, op).items())
    return f"{op}; variables: {shapes}"


def check_same_program(program, mpi) -> None:
    """Compare `program` across the processes of `mpi` (an MPICommunicator); raise on every
    rank when any differs."""
    mine = np.frombuffer(bytes.fromhex(program.fingerprint()), dtype=np.uint8).copy()
    everyone = mpi.allgather(mine)
    if (everyone == everyone[0]).all():
        return
    digests = _op_digests(program)
    counts = mpi.allgather(np.array([len(digests)], dtype=np.int64))[:, 0]
    width = int(counts.max())
    padded = np.full(width + 1, -1, dtype=np.int64)
    padded[:len(digests)] = digests
    table = mpi.allgather(padded)
    differs = np.nonzero((table != table[0]).any(axis=0))[0]
    if not len(differs):
        raise PreconditionError(
            f"{mpi.describe()} the ranks compiled different programs: the ops agree but the "
            f"variables (shapes, dtypes, persistable) or the gradient / optimizer-state maps "
            f"differ; every rank must build the same model from the same script")
    first = int(differs[0])
    block = program.global_block()
    ops = block.ops
    text = _describe(block, ops[first]) if first < len(ops) else "(no op: the program ends here)"
    encoded = np.frombuffer(text.encode()[:_TEXT].ljust(_TEXT), dtype=np.uint8).copy()
    texts = [bytes(row).decode(errors="replace").rstrip() for row in mpi.allgather(encoded)]
    listing = "\n".join(f"    rank {r} ({int(counts[r])} ops): {t}" for r, t in enumerate(texts))
    raise PreconditionError(
        f"{mpi.describe()} the ranks compiled different programs, so their collectives would "
        f"not match (every rank must build the same model from the same script): first "
        f"difference at op #{first}:\n{listing}")
