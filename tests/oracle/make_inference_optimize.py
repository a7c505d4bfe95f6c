"""Oracle: py_reader's ops in fluid 1.8's programs and Program._inference_optimize: the main
and startup programs' op types of a py_reader net trained by Adam (with and without the
double buffer), and _inference_optimize's ops with prune_read_op on and off (it keeps every
op, drops the ops up to the first `read` and the READER variables, sets is_test).

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_inference_optimize.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402


def build(fluid, use_double_buffer):
    """The net of Paddle's test_program.py test_program_inference_optimize (dropout added,
    to show is_test): (main, startup, the reader, the loss)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.py_reader(capacity=10, shapes=[[-1, 10], [-1, 1]],
                                        lod_levels=[0, 0], dtypes=["float32", "int64"],
                                        use_double_buffer=use_double_buffer)
        in_data, label = fluid.layers.read_file(reader)
        hidden = fluid.layers.dropout(in_data, 0.5)
        predict = fluid.layers.fc(hidden, size=2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))
        fluid.optimizer.Adam().minimize(loss)
    return main, startup, reader, loss


def ops(program):
    return [op.type for op in program.global_block().ops]


def one_case(double):
    """One case in this process (fluid's reader queues are named per process: a second
    py_reader of the same name in one process is refused)."""
    import paddle.fluid as fluid

    main_program, startup, _, _ = build(fluid, double)
    no_read = main_program._inference_optimize()
    keep_read = main_program._inference_optimize(prune_read_op=False)
    return {
        "main": ops(main_program),
        "startup": ops(startup),
        "readers": sorted(n for n, v in main_program.global_block().vars.items()
                          if v.type == fluid.core.VarDesc.VarType.READER),
        "no_read": ops(no_read),
        "keep_read": ops(keep_read),
        "no_read_readers": sorted(n for n, v in no_read.global_block().vars.items()
                                  if v.type == fluid.core.VarDesc.VarType.READER),
        "dropout_is_test": [op.attr("is_test") for op in no_read.global_block().ops
                            if op.type == "dropout"],
    }


def main():
    import json
    import subprocess

    import paddle

    if len(sys.argv) > 1:
        print(json.dumps(one_case(sys.argv[1] == "double")))
        return
    cases = {}
    for kind in ("double", "single"):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), kind], check=True,
                             stdout=subprocess.PIPE).stdout.decode().strip().splitlines()[-1]
        cases[kind] = json.loads(out)
    save("inference_optimize", cases, meta={"fluid": paddle.__version__})


if __name__ == "__main__":
    main()
