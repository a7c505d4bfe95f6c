"""fluid.incubate.data_generator: a user's Python preprocessing as a dataset's pipe command.

Subclass MultiSlotDataGenerator, write generate_sample(line) returning a function that yields
`[(slot name, [values]), ...]` per record, and call run_from_stdin(): each raw line read from
stdin becomes MultiSlot text on stdout (`3 12 7 9 1 1`: per slot a count then the values),
which the dataset parses; `set_pipe_command("python my_generator.py")` runs it per file.

>>> class Words(MultiSlotDataGenerator):
...     def generate_sample(self, line):
...         def records():
...             yield [("words", [int(w) for w in line.split()]), ("label", [1])]
...         return records
>>> Words()._gen_str([("words", [4, 2]), ("label", [1])])
'2 4 2 1 1\\n'
"""
from __future__ import annotations

import numbers
import sys

__all__ = ["MultiSlotDataGenerator", "MultiSlotStringDataGenerator"]


class DataGenerator:
    """The base: reading lines, batching samples (generate_batch), writing records."""

    def __init__(self):
        self._proto_info = None
        self.batch_size_ = 32

    def _set_line_limit(self, line_limit):
        if not isinstance(line_limit, int):
            raise ValueError(f"line_limit{type(line_limit)} must be in int type")
        if line_limit < 1:
            raise ValueError("line_limit can not less than 1")
        self._line_limit = line_limit

    def set_batch(self, batch_size: int):
        """How many samples generate_batch receives at a time."""
        self.batch_size_ = batch_size

    def _write_batches(self, samples, out):
        pending = []
        for sample in samples:
            if sample is None:
                continue
            pending.append(sample)
            if len(pending) == self.batch_size_:
                self._flush(pending, out)
                pending = []
        if pending:
            self._flush(pending, out)

    def _flush(self, pending, out):
        for sample in self.generate_batch(pending)():
            out.write(self._gen_str(sample))

    def run_from_memory(self):
        """Write the records generate_sample(None) yields (for debugging and benchmarks)."""
        self._write_batches(self.generate_sample(None)(), sys.stdout)

    def run_from_stdin(self):
        """Read raw lines from stdin and write their records to stdout."""

        def samples():
            for line in sys.stdin:
                yield from self.generate_sample(line)()

        self._write_batches(samples(), sys.stdout)

    def _gen_str(self, line):
        raise ValueError(
            "DataGenerator writes no format itself: use MultiSlotDataGenerator or "
            "MultiSlotStringDataGenerator")

    def generate_sample(self, line):
        """Override: return a function yielding `[(name, [values]), ...]` per record."""
        raise ValueError(
            "Please rewrite this function to return a list or tuple: "
            "[(name, [feasign, ...]), ...] or ((name, [feasign, ...]), ...)")

    def generate_batch(self, samples):
        """Override to process a batch of samples (padding, ...); default: as they are."""

        def local_iter():
            yield from samples

        return local_iter


def _check_record(line, example: str):
    if not isinstance(line, (list, tuple)):
        raise ValueError(
            f"the output of process() must be in list or tuple type, got "
            f"{type(line).__name__}. Example: {example}")


class MultiSlotStringDataGenerator(DataGenerator):
    """Values given as strings, written as they are."""

    def _gen_str(self, line):
        _check_record(line, "[('words', ['1926', '08', '17']), ('label', ['1'])]")
        fields = []
        for _name, elements in line:
            fields.append(" ".join([str(len(elements)), *elements]))
        return " ".join(fields) + "\n"


class MultiSlotDataGenerator(DataGenerator):
    """Values given as ints or floats; a slot with a float anywhere is a float slot
    (`_proto_info` keeps each slot's name and type, and later records must match it)."""

    def _gen_str(self, line):
        _check_record(line, "[('words', [1926, 8, 17]), ('label', [1])]")
        first = self._proto_info is None
        if first:
            self._proto_info = []
        elif len(line) != len(self._proto_info):
            raise ValueError("the complete field set of two given line are inconsistent.")
        fields = []
        for index, (name, elements) in enumerate(line):
            if not isinstance(name, str):
                raise ValueError(f"name{type(name)} must be in str type")
            if not isinstance(elements, list):
                raise ValueError(f"elements{type(elements)} must be in list type")
            if not elements:
                raise ValueError("the elements of each field can not be empty, you need "
                                 "padding it in process().")
            if first:
                self._proto_info.append((name, "uint64"))
            elif name != self._proto_info[index][0]:
                raise ValueError(
                    f"the field name of two given line are not match: require"
                    f"<{self._proto_info[index][0]}>, get<{name}>.")
            for elem in elements:
                if isinstance(elem, float):
                    self._proto_info[index] = (name, "float")
                elif not isinstance(elem, numbers.Integral) or isinstance(elem, bool):
                    raise ValueError(f"the type of element{type(elem)} must be in int or float")
            fields.append(" ".join([str(len(elements)), *map(str, elements)]))
        return " ".join(fields) + "\n"
