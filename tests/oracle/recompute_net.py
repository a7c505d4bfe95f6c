"""The programs of tests/oracle/make_recompute.py, built on the `fluid` given (real fluid 1.8.5
for the oracle, spmd.fluid for the test): Paddle's test_optimizer.py recompute net
(mul -> add b1 -> add b2 -> mean) minimized by RecomputeOptimizer(SGD) with each checkpoint
choice; returns the op types of the block and the names of the recomputed variables."""

CHOICES = {"none": [], "one": ["b1_out"], "multi": ["mul.out", "b2_out"],
           "adjacent": ["mul.out", "b1_out"], "out_of_order": ["b2_out", "mul.out"],
           "input": ["mul.x", "b2_out"]}


def build(fluid, choice):
    program = fluid.Program()
    block = program.global_block()
    v = {}
    v["mul.x"] = block.create_parameter(dtype="float32", shape=[5, 10], name="mul.x")
    v["mul.y"] = block.create_var(dtype="float32", shape=[10, 8], name="mul.y")
    v["mul.out"] = block.create_var(dtype="float32", shape=[5, 8], name="mul.out")
    b1 = block.create_parameter(dtype="float32", shape=[5, 8], name="b1")
    v["b1_out"] = block.create_var(dtype="float32", shape=[5, 8], name="b1_out")
    b2 = block.create_parameter(dtype="float32", shape=[5, 8], name="b2")
    v["b2_out"] = block.create_var(dtype="float32", shape=[5, 8], name="b2_out")
    mean = block.create_var(dtype="float32", shape=[1], name="mean.out")
    block.append_op(type="mul", inputs={"X": v["mul.x"], "Y": v["mul.y"]},
                    outputs={"Out": v["mul.out"]}, attrs={"x_num_col_dims": 1})
    block.append_op(type="elementwise_add", inputs={"X": v["mul.out"], "Y": b1},
                    outputs={"Out": v["b1_out"]})
    block.append_op(type="elementwise_add", inputs={"X": v["b1_out"], "Y": b2},
                    outputs={"Out": v["b2_out"]})
    block.append_op(type="mean", inputs={"X": v["b2_out"]}, outputs={"Out": mean})
    opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(learning_rate=1.0))
    opt._set_checkpoints([v[n] for n in CHOICES[choice]])
    with fluid.program_guard(program, fluid.Program()):
        opt.minimize(mean)
    types = [op.type for op in block.ops]
    subprog = sorted(n for op in block.ops for n in op.output_arg_names if ".subprog_" in n)
    return types, subprog
