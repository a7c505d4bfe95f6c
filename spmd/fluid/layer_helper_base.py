"""fluid.layer_helper_base: LayerHelperBase. fluid splits its helper in two classes (a base
shared with dygraph, and LayerHelper); spmd has one, LayerHelper, which is both."""
from ..layers.helper import LayerHelper as LayerHelperBase

__all__ = ["LayerHelperBase"]
