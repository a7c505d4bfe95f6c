"""fluid.layers.device: fluid 1.8 lists no public name here (its get_places is deprecated)."""

__all__: list[str] = []
