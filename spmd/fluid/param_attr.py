"""fluid.param_attr: ParamAttr, WeightNormParamAttr."""
from ..layers.param_attr import ParamAttr  # noqa: F401
from ..layers.weight_norm import WeightNormParamAttr  # noqa: F401
