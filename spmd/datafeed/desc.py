"""fluid's DataFeedDesc (`dataset.proto_desc`) as a plain object, and its protobuf text form
(`dataset.desc()`), for the programs that read or print them."""
from __future__ import annotations

from dataclasses import dataclass, field

from .slots import SlotsDesc


@dataclass
class DataFeedDesc:
    """The fields of fluid 1.8's DataFeedDesc that a dataset sets."""

    name: str = "MultiSlotDataFeed"
    batch_size: int = 32  # the proto's default
    pipe_command: str = "cat"
    multi_slot_desc: SlotsDesc = field(default_factory=SlotsDesc)
    rank_offset: str = ""
    pv_batch_size: int = 0
    explicit: set = field(default_factory=set)  # fields set (proto2 prints those)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def desc_text(d: DataFeedDesc) -> str:
    """`d` in protobuf's text format, as fluid's `dataset.desc()` prints it."""
    lines = [f"name: {_quoted(d.name)}"]
    if d.batch_size != 32 or "batch_size" in d.explicit:
        lines.append(f"batch_size: {d.batch_size}")
    if d.multi_slot_desc.slots:
        lines.append("multi_slot_desc {")
        for s in d.multi_slot_desc.slots:
            lines += ["  slots {", f"    name: {_quoted(s.name)}", f"    type: {_quoted(s.type)}"]
            for flag in ("is_dense", "is_used"):  # None: not set, not printed
                if getattr(s, flag) is not None:
                    lines.append(f"    {flag}: {str(bool(getattr(s, flag))).lower()}")
            lines += [f"    shape: {d}" for d in s.shape]
            lines.append("  }")
        lines.append("}")
    lines.append(f"pipe_command: {_quoted(d.pipe_command)}")
    if d.rank_offset:
        lines.append(f"rank_offset: {_quoted(d.rank_offset)}")
    if d.pv_batch_size:
        lines.append(f"pv_batch_size: {d.pv_batch_size}")
    return "\n".join(lines) + "\n"
