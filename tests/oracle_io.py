"""Stored outputs of real fluid (PaddlePaddle 1.8.5, or 3.3.1 where 1.8.5 lacks a feature), so
the suite compares against fluid without needing it installed.

The scripts that made them are tests/oracle/make_<area>.py, run with the oracle's Python (a
Python 3.7 venv with `pip install paddlepaddle==1.8.5 "protobuf<=3.20.3"`), from a folder
outside this checkout so that they import the real paddle:

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_math.py

Each writes tests/oracle/data/<area>.json with `save(area, cases)`; tests read it with
`load(area)`. Arrays are stored as {"dtype", "shape", "data"}; this file runs on Python 3.7
(the oracle) and on the project's Python alike, so it keeps to syntax both accept.
"""
import json
import os

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle", "data")


def encode(value):
    """Arrays (and numpy scalars) inside nested dicts/lists as JSON-ready dicts."""
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        a = np.asarray(value)
        return {"__array__": True, "dtype": a.dtype.name, "shape": list(a.shape),
                "data": a.reshape(-1).tolist()}
    return value


def decode(value):
    """The inverse of encode: JSON dicts marked as arrays become numpy arrays."""
    if isinstance(value, dict):
        if value.get("__array__"):
            return np.asarray(value["data"], dtype=value["dtype"]).reshape(value["shape"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def save(area, cases, meta=None):
    """Write cases (a dict name -> anything encode takes) as tests/oracle/data/<area>.json."""
    if not os.path.isdir(DATA_DIR):
        os.makedirs(DATA_DIR)
    doc = {"meta": meta or {}, "cases": encode(cases)}
    with open(os.path.join(DATA_DIR, area + ".json"), "w") as f:
        json.dump(doc, f, sort_keys=True)
        f.write("\n")


def load(area):
    """The cases stored for `area`: a dict name -> decoded value."""
    with open(os.path.join(DATA_DIR, area + ".json")) as f:
        return decode(json.load(f)["cases"])
