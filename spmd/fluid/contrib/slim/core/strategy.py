"""fluid.contrib.slim.core.strategy: Strategy, the base of slim's compression strategies: the
callbacks a Compressor makes (on_compression_begin/end, on_epoch_begin/end,
on_batch_begin/end, restore_from_checkpoint), each given the Context, between start_epoch and
end_epoch.

>>> class Count(Strategy):
...     def on_epoch_begin(self, context):
...         self.seen = getattr(self, "seen", 0) + 1
>>> s = Count(start_epoch=0, end_epoch=2)
>>> s.on_epoch_begin(None); s.seen, s.end_epoch
(1, 2)
"""
from __future__ import annotations

import json

__all__ = ["Strategy"]


def _json_value(value):
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True


class Strategy:
    """A compression strategy applied from epoch start_epoch to end_epoch."""

    def __init__(self, start_epoch=0, end_epoch=0):
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch

    def __getstate__(self):
        """The state a checkpoint keeps: everything but the epoch range (which the config
        gives)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("start_epoch", "end_epoch")}

    def checkpoint_state(self):
        """What a Compressor checkpoint stores of this strategy, as JSON (never pickle): the
        attributes of __getstate__ that are plain data (numbers, strings, lists, dicts)."""
        return {k: v for k, v in self.__getstate__().items() if _json_value(v)}

    def load_checkpoint_state(self, state):
        """Take back, from a checkpoint, the attributes this strategy does not have now (the
        ones its callbacks made in the run that saved it); the config's values win, as in
        fluid."""
        for key, value in state.items():
            if key not in self.__dict__:
                setattr(self, key, value)

    def on_compression_begin(self, context):
        pass

    def on_epoch_begin(self, context):
        pass

    def on_epoch_end(self, context):
        pass

    def on_batch_begin(self, context):
        pass

    def on_batch_end(self, context):
        pass

    def on_compression_end(self, context):
        pass

    def restore_from_checkpoint(self, context):
        pass
