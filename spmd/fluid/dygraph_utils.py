"""fluid.dygraph_utils: fluid 1.8 keeps dygraph's op-appending helpers here (no public name);
spmd runs static programs, so the module is importable and empty."""

__all__: list[str] = []
