"""One role of a parameter-server job trained through the Dataset API (for
tests/unit/test_dataset_api_pserver.py): PADDLE_TRAINING_ROLE PSERVER / TRAINER runs fluid 1.8's
DistributeTranspiler job of tests/dataset_api_model.py's model, the trainer with
Executor.train_from_dataset over an InMemoryDataset of its files of `--files` (trainer i
files i, i + N, ...); LOCAL runs the same in one
process from `--init` (the pserver's values after its startup). `--out` gets the role's
parameters (a pserver also its initial ones in `--out`.init.npz)."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dataset_api_model as model  # noqa: E402

import spmd.fluid as fluid  # noqa: E402


def values(scope, names) -> dict:
    out = {}
    for name in names:
        var = scope.find_var(name)
        if var is not None and var.is_initialized():
            out[name] = np.array(var.get_tensor())
    return out


def dataset_of(variables, files, batch_size):
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var(variables)
    ds.set_batch_size(batch_size)
    ds.set_thread(1)
    ds.set_filelist(files)
    ds.load_into_memory()
    return ds


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--files", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--init")
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args(argv)
    files = args.files.split(",")
    role = os.environ["PADDLE_TRAINING_ROLE"]
    # is_sparse=False: a transpiled trainer's sparse lookup loses the ids' LoD in spmd today
    # (issue 22 item 5), which sequence_pool then refuses
    main_prog, startup, variables, loss = model.build(fluid, is_sparse=False)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.global_scope()
    if role == "LOCAL":
        exe.run(startup)
        for name, value in np.load(args.init).items():
            scope.var(name).get_tensor().set(value, fluid.CPUPlace())
        exe.train_from_dataset(main_prog, dataset_of(variables, files, args.batch))
        np.savez(args.out, **values(scope, model.PARAMS))
        return 0
    endpoints = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    t = fluid.DistributeTranspiler()
    t.transpile(int(os.environ.get("PADDLE_TRAINER_ID", "0")), program=main_prog,
                pservers=endpoints, trainers=int(os.environ["PADDLE_TRAINERS_NUM"]),
                startup_program=startup)
    if role == "PSERVER":
        current = os.environ["PADDLE_CURRENT_ENDPOINT"]
        ps_prog = t.get_pserver_program(current)
        exe.run(t.get_startup_program(current, ps_prog))
        np.savez(args.out + ".init.npz", **values(scope, model.PARAMS))
        exe.run(ps_prog)
        np.savez(args.out, **values(scope, model.PARAMS))
        return 0
    exe.run(startup)
    trainer_id = int(os.environ["PADDLE_TRAINER_ID"])
    mine = files[trainer_id::int(os.environ["PADDLE_TRAINERS_NUM"])]  # each trainer its own files
    exe.train_from_dataset(t.get_trainer_program(), dataset_of(variables, mine, args.batch),
                           fetch_list=[loss], fetch_info=["loss"], print_period=1)
    exe.close()
    np.savez(args.out, **values(scope, model.PARAMS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
