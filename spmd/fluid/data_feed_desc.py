"""fluid.DataFeedDesc: a data feed description read from a protobuf text file, as fluid 1.8's
data_feed_desc.py reads it (for the MultiSlotDataFeed).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "data.proto")
>>> _ = open(path, "w").write('name: "MultiSlotDataFeed" batch_size: 2 multi_slot_desc {'
...                           ' slots { name: "words" type: "uint64" is_used: false } }')
>>> desc = DataFeedDesc(path)
>>> desc.set_use_slots(["words"])
>>> desc.proto_desc.multi_slot_desc.slots[0].is_used
True
"""
from __future__ import annotations

from ..datafeed.desc import desc_text
from ..datafeed.desc_text import parse_desc, with_slot
from ..errors import InvalidArgumentError

__all__ = ["DataFeedDesc"]


class DataFeedDesc:
    """A data feed description: `proto_desc` (name, batch_size, pipe_command, the slots)."""

    def __init__(self, proto_file: str):
        with open(proto_file) as f:
            self.proto_desc = parse_desc(f.read(), f"DataFeedDesc({proto_file!r})")

    def _multi_slot(self, what: str):
        if self.proto_desc.name != "MultiSlotDataFeed":
            raise InvalidArgumentError(
                f"Only MultiSlotDataFeed needs {what}, please check your datafeed.proto "
                f"(its name is {self.proto_desc.name!r})")

    def set_batch_size(self, batch_size: int):
        self.proto_desc.batch_size = batch_size
        self.proto_desc.explicit.add("batch_size")

    def set_dense_slots(self, dense_slots_name):
        """Mark these slots dense."""
        self._multi_slot("set_dense_slots")
        for name in dense_slots_name:
            with_slot(self.proto_desc, name, is_dense=True)

    def set_use_slots(self, use_slots_name):
        """Mark these slots used (fed)."""
        self._multi_slot("set_use_slots")
        for name in use_slots_name:
            with_slot(self.proto_desc, name, is_used=True)

    def desc(self) -> str:
        """The description in protobuf text form."""
        return desc_text(self.proto_desc)
