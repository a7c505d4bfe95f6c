"""The small CTR-style model and data of the Dataset API tests, written once for both sides:
tests/oracle/make_dataset_api.py builds it in fluid 1.8.5 (Python 3.7), the tests in spmd.
`fluid` is the module given (paddle.fluid or spmd.fluid)."""
import os

import numpy as np

SLOTS = ("dense", "c1", "c2", "label")
VOCAB = 30
FILES = (("a.txt", 23), ("b.txt", 18))
GENERATOR = """import sys
{path_line}
{import_line}


class Raw(dg.MultiSlotDataGenerator):
    def generate_sample(self, line):
        def records():
            label, dense, c1, c2 = line.rstrip("\\n").split("\\t")
            yield [("dense", [float(v) for v in dense.split(",")]),
                   ("c1", [int(v) for v in c1.split()]),
                   ("c2", [int(v) for v in c2.split()]),
                   ("label", [int(label)])]
        return records


Raw().run_from_stdin()
"""


def rows(seed, count):
    """`count` records (dense floats, c1 ids, c2 ids, label); ids include 0, which the
    InMemoryDataset drops from a sparse slot."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(count):
        dense = [round(float(v), 3) for v in rng.rand(4)]
        if rng.rand() < 0.3:
            dense[rng.randint(4)] = 0.0
        c1 = [int(v) for v in rng.randint(0, VOCAB, size=rng.randint(1, 4))]
        c2 = [int(v) for v in rng.randint(0, VOCAB, size=rng.randint(1, 3))]
        label = int(dense[0] + 0.1 * (c1[0] % 3) > 0.6)
        out.append((dense, c1, c2, label))
    return out


def multislot_line(row):
    dense, c1, c2, label = row
    fields = [dense, c1, c2, [label]]
    return " ".join(" ".join([str(len(f))] + [str(v) for v in f]) for f in fields) + "\n"


def raw_line(row):
    dense, c1, c2, label = row
    return "{}\t{}\t{}\t{}\n".format(label, ",".join(str(v) for v in dense),
                                    " ".join(map(str, c1)), " ".join(map(str, c2)))


def write_data(folder, raw=False):
    """The data files in `folder` (MultiSlot text, or with raw=True the generator's input);
    returns their paths."""
    paths = []
    for index, (name, count) in enumerate(FILES):
        path = os.path.join(folder, ("raw_" if raw else "") + name)
        with open(path, "w") as f:
            for row in rows(index + 1, count):
                f.write(raw_line(row) if raw else multislot_line(row))
        paths.append(path)
    return paths


def write_generator(folder, import_path, import_line):
    """A data-generator script (the pipe command's program) in `folder`."""
    path = os.path.join(folder, "raw_generator.py")
    with open(path, "w") as f:
        path_line = f"sys.path.insert(0, {import_path!r})" if import_path else ""
        f.write(GENERATOR.format(path_line=path_line, import_line=import_line))
    return path


def build(fluid, lr=0.05, is_sparse=True):
    """The model: two sparse id slots embedded and sum-pooled, a dense slot, two fc layers,
    softmax cross-entropy, SGD (is_sparse: the embeddings' gradients as SelectedRows).
    Returns (main, startup, data variables, loss)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7  # the oracle regenerates byte-identical
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        dense = fluid.layers.data(name="dense", shape=[4], dtype="float32")
        c1 = fluid.layers.data(name="c1", shape=[1], dtype="int64", lod_level=1)
        c2 = fluid.layers.data(name="c2", shape=[1], dtype="int64", lod_level=1)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        pooled = []
        for var in (c1, c2):
            emb = fluid.layers.embedding(var, size=[VOCAB, 4], is_sparse=is_sparse)
            pooled.append(fluid.layers.sequence_pool(emb, "sum"))
        h = fluid.layers.concat(pooled + [dense], axis=1)
        h = fluid.layers.fc(h, 8, act="relu")
        prob = fluid.layers.fc(h, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, [dense, c1, c2, label], loss


PARAMS = ("embedding_0.w_0", "embedding_1.w_0", "fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")
