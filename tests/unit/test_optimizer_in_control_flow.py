"""An optimizer's minimize() inside a layers.case branch (fluid 1.8's
test_optimizer_in_control_flow): only the taken branch's backward and update run, with fluid
1.8.5's numbers (tests/oracle/make_optimizer_in_control_flow.py ran the same program there:
Adam on even steps, SGD on odd ones, the loss computed inside the branches or before them)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.operator import OpRole
from tests.oracle.make_optimizer_in_control_flow import DATA, build, run
from tests.oracle_io import load

ORACLE = load("optimizer_in_control_flow")


@pytest.mark.parametrize("case, loss_in_switch", [("loss_in_switch", True),
                                                   ("loss_before_switch", False)])
def test_each_step_trains_with_the_taken_branch_only_as_fluid(case, loss_in_switch):
    got, want = run(fluid, loss_in_switch), ORACLE[case]
    for step, (g, w) in enumerate(zip(got["steps"], want["steps"])):
        for name, a, b in zip(["hidden", "prediction", "loss"], g, w):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {step}: {name}")
    for name, w in want["params"].items():
        np.testing.assert_allclose(got["params"][name], w, rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_backward_and_updates_are_in_the_branch_blocks_not_the_global_block():
    main, _, _ = build(fluid, loss_in_switch=False)
    top = {op.role for op in main.global_block().ops}
    assert OpRole.OPTIMIZE not in top and OpRole.BACKWARD not in top
    updates = [[op.type for op in b.ops if op.role is OpRole.OPTIMIZE] for b in main.blocks[1:]]
    assert updates == [["adam"] * 4, ["sgd"] * 4]


def test_a_minimize_outside_control_flow_still_updates_in_the_global_block():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    assert [op.type for op in main.global_block().ops if op.role is OpRole.OPTIMIZE] == ["sgd"] * 2
    assert len(main.blocks) == 1


def test_a_clone_for_test_drops_the_branches_backward_and_updates_as_fluid():
    main, startup, fetch = build(fluid, loss_in_switch=True)
    test_program = main.clone(for_test=True)
    assert [[op.type for op in b.ops] for b in test_program.blocks[1:]] == [
        ["cross_entropy2", "mean", "assign"], ["softmax_with_cross_entropy", "mean", "assign"]]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("hidden.w_0").get_tensor())
    image, label = DATA[0]
    loss, = exe.run(test_program, feed={"image": image, "label": label,
                                        "id": np.array([0], "int32")},
                    fetch_list=[fetch[2]], scope=scope)
    np.testing.assert_allclose(loss, ORACLE["loss_in_switch"]["steps"][0][2], rtol=1e-5)
    np.testing.assert_array_equal(np.array(scope.find_var("hidden.w_0").get_tensor()), before)


def test_compiled_for_one_place_it_trains_as_the_plain_program():
    main, startup, fetch = build(fluid, loss_in_switch=False)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=fetch[2].name, places=fluid.cpu_places(1))
    for epoch, (image, label) in enumerate(DATA):
        loss, = exe.run(compiled, feed={"image": image, "label": label,
                                        "id": np.array([epoch], "int32")},
                        fetch_list=[fetch[2]], scope=scope)
        np.testing.assert_allclose(loss, ORACLE["loss_before_switch"]["steps"][epoch][2],
                                   rtol=1e-5, atol=1e-6, err_msg=f"step {epoch}")


def test_no_grad_set_with_the_loss_inside_the_branch_freezes_only_the_named_parameter():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        y = fluid.layers.fc(x, 2, name="fc")

        def train():
            loss = fluid.layers.mean(y * y)
            fluid.optimizer.SGD(0.1).minimize(loss, no_grad_set={"fc.b_0"})
            return loss

        fluid.layers.cond(fluid.layers.fill_constant([1], "bool", True), train, train)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in ("fc.w_0", "fc.b_0")}
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, scope=scope)
    after = {n: np.array(scope.find_var(n).get_tensor()) for n in before}
    assert not np.array_equal(after["fc.w_0"], before["fc.w_0"])
    np.testing.assert_array_equal(after["fc.b_0"], before["fc.b_0"])
