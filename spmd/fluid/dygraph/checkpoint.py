"""fluid.dygraph.checkpoint: save_dygraph / load_dygraph save a dygraph state_dict; spmd
programs are static, so they point to fluid.save / fluid.load and fluid.io.

>>> from spmd.fluid.dygraph.checkpoint import save_dygraph
"""
from __future__ import annotations

from ._static_only import static_only

__all__ = ["save_dygraph", "load_dygraph"]


def save_dygraph(state_dict, model_path):
    """Refused: saves a dygraph Layer's state_dict."""
    raise static_only("fluid.dygraph.save_dygraph()",
                      "fluid.save(program, model_path) or fluid.io.save_persistables")


def load_dygraph(model_path, keep_name_table=False):
    """Refused: loads a dygraph state_dict (a pickle file)."""
    raise static_only("fluid.dygraph.load_dygraph()",
                      "fluid.load(program, model_path, exe) or fluid.io.load_persistables")
