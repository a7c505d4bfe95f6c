"""Bad records and pipe commands: each is an error naming the file and the line (and the
slot, what it expected and what it found); the data generators' output format and checks."""
from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
import spmd.fluid.incubate.data_generator as dg
from spmd.datafeed import RecordError


@pytest.fixture()
def variables():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        dense = fluid.layers.data(name="dense", shape=[2], dtype="float32")
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
    return [dense, ids]


def read_all(variables, path, kind="QueueDataset", pipe="cat"):
    ds = fluid.DatasetFactory().create_dataset(kind)
    ds.set_use_var(variables)
    ds.set_batch_size(2)
    ds.set_filelist([str(path)])
    ds.set_pipe_command(pipe)
    if kind == "InMemoryDataset":
        ds.load_into_memory()
    return [f for step in fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], False)
            for f in step]


GOOD = "2 0.5 1.5 2 3 4\n"


@pytest.mark.parametrize("line,expected", [
    ("2 0.5 1.5 0\n", r"slot 1 \('ids', uint64\): the count is 0; it must be > 0"),
    ("2 0.5 1.5 x 3\n", r"slot 1 \('ids', uint64\): expected the slot's count .*got 'x'"),
    ("2 0.5 1.5 2 3 4.5\n", r"slot 1 .*expected a uint64 value .*got '4.5'"),
    ("2 0.5 1.5 2 3 -4\n", r"expected a uint64 value .*got '-4'"),
    ("2 0.5 abc 1 3\n", r"slot 0 \('dense', float, dense\): expected a float value, got 'abc'"),
    ("3 0.5 1.5 2 1 3\n", r"a dense slot of shape \[-1, 2\] takes 2 value\(s\) per record, got 3"),
    ("2 0.5 1.5 3 1 2\n", r"the count says 3 value\(s\), the line has 2 left"),
    ("2 0.5 1.5\n", r"slot 1 .*the line ends after 3 token\(s\) \(2 slots declared\)"),
    ("2 0.5 1.5 1 3 9 9\n", r"2 token\(s\) left after the 2 declared slots .*starting '9'"),
])
@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
def test_a_bad_record_names_file_line_slot_and_what_it_expected(tmp_path, variables, kind,
                                                                line, expected):
    path = tmp_path / "data.txt"
    path.write_text(GOOD + GOOD + line + GOOD)
    with pytest.raises(RecordError, match=expected) as err:
        read_all(variables, path, kind)
    assert f"file '{path}', line 3" in str(err.value)


def test_a_bad_record_from_the_pipe_command_names_the_command(tmp_path, variables):
    path = tmp_path / "data.txt"
    path.write_text(GOOD + "2 1 2 0\n")
    with pytest.raises(RecordError, match=r"\(the output of 'sed s/x/y/'\), line 2"):
        read_all(variables, path, pipe="sed s/x/y/")


def test_a_failing_pipe_command_names_file_command_status_and_stderr(tmp_path, variables):
    path = tmp_path / "data.txt"
    path.write_text(GOOD)
    pipe = f"{sys.executable} -c \"import sys; sys.stdin.read(); sys.exit('no model here')\""
    with pytest.raises(Exception, match=r"(?s)failed: exit status 1 after 0 line.*no model here"):
        read_all(variables, path, pipe=pipe)


def test_missing_file_and_remote_paths(tmp_path, variables):
    with pytest.raises(ValueError, match="does not exist"):
        read_all(variables, tmp_path / "nope.txt")
    with pytest.raises(Exception, match="spmd reads local files only"):
        read_all(variables, "hdfs:/data/part-0")


def test_gz_files_and_download_cmd(tmp_path, variables):
    import gzip

    with gzip.open(tmp_path / "d.gz", "wt") as f:
        f.write(GOOD * 3)
    feeds = read_all(variables, tmp_path / "d.gz")
    assert [np.array(f["dense"]).shape for f in feeds] == [(2, 2), (1, 2)]
    (tmp_path / "remote").write_text(GOOD)
    ds = fluid.DatasetFactory().create_dataset()
    ds.set_use_var(variables)
    ds.set_filelist(["remote"])
    ds.set_download_cmd(f"cd {tmp_path} && cat")
    steps = list(fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()]))
    assert len(steps) == 0  # batch size 32 and drop_last: the one record is dropped
    steps = list(fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], drop_last=False))
    np.testing.assert_array_equal(np.array(steps[0][0]["ids"]).ravel(), [3, 4])


def test_in_memory_reading_drops_sparse_zeros_and_fills_an_empty_slot(tmp_path, variables):
    path = tmp_path / "d.txt"
    path.write_text("2 0 1.5 3 0 7 0\n2 0 0 1 0\n")
    queue = read_all(variables, path)[0]
    memory = read_all(variables, path, "InMemoryDataset")[0]
    np.testing.assert_array_equal(np.array(queue["ids"]).ravel(), [0, 7, 0, 0])
    assert queue["ids"].lod() == [[0, 3, 4]]
    np.testing.assert_array_equal(np.array(memory["ids"]).ravel(), [7, 0])  # row 2: one 0
    assert memory["ids"].lod() == [[0, 1, 2]]
    np.testing.assert_array_equal(np.array(memory["dense"]), [[0, 1.5], [0, 0]])  # dense kept


def test_uint64_ids_are_fed_as_int64_bit_for_bit(tmp_path, variables):
    path = tmp_path / "d.txt"
    path.write_text(f"2 0 0 2 {2**64 - 1} {2**63}\n")
    ids = np.array(read_all(variables, path)[0]["ids"]).ravel()
    np.testing.assert_array_equal(ids, [-1, -(2**63)])


class Words(dg.MultiSlotDataGenerator):
    def generate_sample(self, line):
        def records():
            words = [int(w) for w in line.split()]
            yield [("words", words), ("weight", [0.5 * len(words)])]
        return records


def run_generator(generator, text):
    out = io.StringIO()
    saved_in, saved_out = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(text), out
    try:
        generator.run_from_stdin()
    finally:
        sys.stdin, sys.stdout = saved_in, saved_out
    return out.getvalue()


def test_multislot_generator_writes_counts_then_values():
    gen = Words()
    assert run_generator(gen, "1 2 3\n7\n") == "3 1 2 3 1 1.5\n1 7 1 0.5\n"


def test_generate_batch_sees_set_batch_samples_at_a_time():
    class Padded(Words):
        def generate_batch(self, samples):
            def padded():
                longest = max(len(s[0][1]) for s in samples)
                for (name, words), weight in samples:
                    yield [(name, words + [0] * (longest - len(words))), weight]
            return padded

    gen = Padded()
    gen.set_batch(2)
    assert run_generator(gen, "1 2 3\n7\n5\n") == (
        "3 1 2 3 1 1.5\n3 7 0 0 1 0.5\n1 5 1 0.5\n")


def test_run_from_memory_and_the_string_generator(capsys):
    class FromMemory(dg.MultiSlotStringDataGenerator):
        def generate_sample(self, line):
            def records():
                for i in range(2):
                    yield [("a", [str(i), "9"]), ("b", ["x"])]
            return records

    FromMemory().run_from_memory()
    assert capsys.readouterr().out == "2 0 9 1 x\n2 1 9 1 x\n"


def written(*records):
    """What a MultiSlotDataGenerator yielding `records` writes (run_from_memory)."""

    class Given(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def given():
                yield from records
            return given

    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        Given().run_from_memory()
    finally:
        sys.stdout = saved
    return out.getvalue()


@pytest.mark.parametrize("record,message", [
    ([("words", [])], "can not be empty"),
    ([("words", ["1"])], "must be in int or float"),
    ("words 1", "must be in list or tuple type"),
    ([(1, [1])], "must be in str type"),
])
def test_generator_refuses_what_the_feed_could_not_read(record, message):
    with pytest.raises(ValueError, match=message):
        written(record)


def test_generator_refuses_a_record_of_other_slots():
    assert written([("a", [1]), ("b", [2])]) == "1 1 1 2\n"
    with pytest.raises(ValueError, match="require<a>, get<c>"):
        written([("a", [1]), ("b", [2])], [("c", [1]), ("b", [2])])
    with pytest.raises(ValueError, match="inconsistent"):
        written([("a", [1]), ("b", [2])], [("a", [1])])


def test_a_generator_script_is_a_pipe_command(tmp_path, variables):
    script = tmp_path / "gen.py"
    script.write_text(
        "import spmd.fluid.incubate.data_generator as dg\n"
        "class G(dg.MultiSlotDataGenerator):\n"
        "    def generate_sample(self, line):\n"
        "        def r():\n"
        "            a, b = line.split(',')\n"
        "            yield [('dense', [float(a), float(b)]), ('ids', [int(a), int(b)])]\n"
        "        return r\n"
        "G().run_from_stdin()\n")
    raw = tmp_path / "raw.txt"
    raw.write_text("1,2\n3,4\n5,6\n")
    feeds = read_all(variables, raw, pipe=f"{sys.executable} {script}")
    np.testing.assert_array_equal(np.array(feeds[0]["dense"]), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(np.array(feeds[1]["ids"]).ravel(), [5, 6])
    assert subprocess.run([sys.executable, str(script)], input="7,8\n", text=True,
                          capture_output=True, check=True).stdout == "2 7.0 8.0 2 7 8\n"
