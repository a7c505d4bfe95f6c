"""Op definitions: reader ops."""
from __future__ import annotations

from .registry import define_op


@define_op("load", inputs=[], outputs=["Out"], grad=None,
           attrs={"file_path": ("str", ""), "load_as_fp16": ("bool", False)},
           side_effects=True)
def _load(ctx):
    """The file's shape is known only when it is read: Out keeps its declared shape."""
    ctx.check(bool(ctx.attr("file_path")), "file_path must name the file to load")
