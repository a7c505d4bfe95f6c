"""InMemoryDataset.load_into_memory and a pass of DataLoader.from_dataset over Criteo-like
MultiSlot text (13 dense floats, 26 one-id sparse slots, a label), in spmd or, with --fluid,
in real fluid 1.8.5 (run it with the oracle's Python 3.7):

    python bench/dataset_load.py --lines 50000
    /path/to/fluid185/bin/python bench/dataset_load.py --lines 50000 --fluid
"""
import argparse
import os
import random
import sys
import tempfile
import time


def write_data(path, lines):
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(lines):
            parts = ["13 " + " ".join("%.3f" % rng.random() for _ in range(13))]  # noqa: UP031
            parts += ["1 " + str(rng.randint(1, 10**6)) for _ in range(26)]
            parts.append("1 " + str(rng.randint(0, 1)))
            f.write(" ".join(parts) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=50000)
    p.add_argument("--fluid", action="store_true", help="time paddle.fluid 1.8.5 instead")
    args = p.parse_args(argv)
    if args.fluid:
        import paddle.fluid as fluid
    else:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import spmd.fluid as fluid
    path = os.path.join(tempfile.mkdtemp(), "criteo.txt")
    write_data(path, args.lines)
    dense = fluid.layers.data(name="dense", shape=[13], dtype="float32")
    sparse = [fluid.layers.data(name="C" + str(i), shape=[1], dtype="int64", lod_level=1)
              for i in range(26)]
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var([dense] + sparse + [label])
    ds.set_batch_size(512)
    ds.set_thread(1)
    ds.set_filelist([path])
    start = time.perf_counter()
    ds.load_into_memory()
    loaded = time.perf_counter()
    batches = sum(1 for _ in fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], False))
    done = time.perf_counter()
    print("{}: load_into_memory of {} lines {:.2f} s; {} batches of 512 in {:.2f} s".format(
        "fluid 1.8.5" if args.fluid else "spmd", args.lines, loaded - start, batches,
        done - loaded))


if __name__ == "__main__":
    main()
