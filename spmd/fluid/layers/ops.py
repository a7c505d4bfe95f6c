"""fluid.layers.ops: fluid 1.8's module of that name (see fluid_modules), with the two layers
fluid's module makes outside its __all__ from the op definitions (`_scale(x=, scale=, out=)`
writes an existing variable, as Paddle's own tests use it; `_elementwise_div`)."""
from .fluid_modules import populate


def _scale(*args, **kwargs):
    from .layer_function_generator import generate_layer_fn

    return generate_layer_fn("scale")(*args, **kwargs)


def _elementwise_div(*args, **kwargs):
    from .layer_function_generator import generate_layer_fn

    return generate_layer_fn("elementwise_div")(*args, **kwargs)


__all__ = populate(globals(), "ops", {"_scale": _scale, "_elementwise_div": _elementwise_div})
