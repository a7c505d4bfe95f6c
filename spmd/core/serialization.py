"""Reading programs back from `Program.to_dict()`: blocks refilled with their variables and
re-validated ops, and which attribute JSON could not hold when writing fails."""
from __future__ import annotations

import json

from .operator import Operator, OpRole, OpSchema
from .variable import Parameter, Variable


def fill_block(block, entry: dict) -> None:
    """`block`'s vars and ops from its `to_dict()` entry; ops re-validated."""
    for v in entry["vars"]:
        v = dict(v)
        name = v.pop("name")
        if v.pop("parameter", False):
            lr = v.pop("learning_rate", 1.0)
            block.vars[name] = Parameter(block, name, learning_rate=lr, **v)
        else:
            block.vars[name] = Variable(block, name, **v)
    for op in entry["ops"]:
        inputs = {k: list(v) for k, v in op["inputs"].items()}
        outputs = {k: list(v) for k, v in op["outputs"].items()}
        block.ops.append(Operator(block, op["type"], inputs, outputs, validated_attrs(op),
                                  OpRole(op["role"]), op.get("owner")))


def unserializable(data: dict) -> str:
    """Name the op attribute that JSON cannot hold (numpy arrays, objects)."""
    for block in data["blocks"]:
        for i, op in enumerate(block["ops"]):
            for name, value in op["attrs"].items():
                try:
                    json.dumps(value)
                except TypeError:
                    return (f"block {block['idx']} op #{i} '{op['type']}': attribute "
                            f"'{name}' holds a {type(value).__name__}, which cannot be "
                            f"serialized; give it as a number, a string, a bool or a list of "
                            f"those")
    return "the program holds a value that cannot be serialized to JSON"


def validated_attrs(op_dict: dict) -> dict:
    return OpSchema.validate_attrs(op_dict["type"], op_dict["attrs"])
