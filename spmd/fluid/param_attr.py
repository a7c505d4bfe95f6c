"""fluid.param_attr: ParamAttr."""
from ..layers.param_attr import ParamAttr  # noqa: F401
