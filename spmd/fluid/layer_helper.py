"""fluid.layer_helper: LayerHelper, the state of one layer call (its parameters, its
temporaries, its activation), which custom layers build on (spmd/layers/helper.py)."""
from ..layers.helper import LayerHelper

__all__ = ["LayerHelper"]
