"""Reference outputs of PaddlePaddle 1.8.5's Dataset API for tests/unit/test_dataset_api*.py:
the CTR-style model of tests/dataset_api_model.py trained by Executor.train_from_dataset
(thread=1, so fluid is deterministic) over a QueueDataset, an InMemoryDataset and a
QueueDataset whose pipe command is a MultiSlotDataGenerator script; the printed fetches
(fetch_info, print_period) as fluid's C++ writes them; the parameters after; the batches
DataLoader.from_dataset hands out; the generator's output text.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_dataset_api.py
"""
import os
import sys
import tempfile

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dataset_api_model as model  # noqa: E402
from oracle_io import save  # noqa: E402


def captured_stdout(run):
    """What `run()` writes to file descriptor 1 (fluid's C++ prints there)."""
    sys.stdout.flush()
    with tempfile.TemporaryFile(mode="w+") as out:
        saved = os.dup(1)
        os.dup2(out.fileno(), 1)
        try:
            run()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return out.read()


def param_values(scope):
    return {n: np.array(scope.find_var(n).get_tensor()) for n in model.PARAMS}


def make_dataset(kind, variables, files, pipe="cat", batch_size=8):
    ds = fluid.DatasetFactory().create_dataset(kind)
    ds.set_use_var(variables)
    ds.set_batch_size(batch_size)
    ds.set_thread(1)
    ds.set_filelist(files)
    ds.set_pipe_command(pipe)
    if kind == "InMemoryDataset":
        ds.load_into_memory()
    return ds


def train_case(kind, files, pipe, init, infer=False):
    main, startup, variables, loss = model.build(fluid)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for name, value in init.items():
            scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
        ds = make_dataset(kind, variables, files, pipe)
        run = exe.infer_from_dataset if infer else exe.train_from_dataset
        text = captured_stdout(lambda: run(main, ds, scope=scope, thread=1,
                                           fetch_list=[loss, variables[1]],
                                           fetch_info=["loss", "c1"], print_period=1))
        return {"printed": text, "params": param_values(scope)}


def loader_case(kind, files, drop_last):
    _, _, variables, _ = model.build(fluid)
    ds = make_dataset(kind, variables, files, batch_size=5)
    out = []
    for step in fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], drop_last):
        out.append({name: {"data": np.array(t), "lod": t.lod()} for name, t in step[0].items()})
    return out


PROTO = """name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
    slots {
        name: "words"
        type: "uint64"
        is_dense: false
        is_used: false
    }
    slots {
        name: "label"
        type: "uint64"
        is_dense: false
        is_used: false
    }
    slots {
        name: "weight"
        type: "float"
        shape: 1
    }
}
"""


def data_feed_desc_case(work):
    path = os.path.join(work, "data.proto")
    with open(path, "w") as f:
        f.write(PROTO)
    desc = fluid.DataFeedDesc(path)
    before = desc.desc()
    desc.set_batch_size(128)
    desc.set_dense_slots(["words"])
    desc.set_use_slots(["words", "weight"])
    return {"proto": PROTO, "before": before, "after": desc.desc()}


def main():
    work = tempfile.mkdtemp()
    files = model.write_data(work)
    raw = model.write_data(work, raw=True)
    gen = model.write_generator(work, "",
                                "import paddle.fluid.incubate.data_generator as dg")
    pipe = f"{sys.executable} {gen}"
    generated = os.popen(f"{pipe} < {raw[0]}").read()
    main_prog, startup, _, _ = model.build(fluid)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        init = param_values(scope)
    cases = {
        "init": init,
        "generated_a": generated,
        "queue": train_case("QueueDataset", files, "cat", init),
        "inmemory": train_case("InMemoryDataset", files, "cat", init),
        "pipe": train_case("QueueDataset", raw, pipe, init),
        "infer_inmemory": train_case("InMemoryDataset", files, "cat", init, infer=True),
        "loader_queue": loader_case("QueueDataset", files[:1], False),
        "loader_inmemory": loader_case("InMemoryDataset", files[:1], False),
        "loader_inmemory_drop": loader_case("InMemoryDataset", files[:1], True),
        "data_feed_desc": data_feed_desc_case(work),
    }
    save("dataset_api", cases, meta={"paddle": paddle.__version__,
                                     "script": "tests/oracle/make_dataset_api.py"})


if __name__ == "__main__":
    main()
