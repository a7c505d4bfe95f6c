"""CompiledProgram and ParallelExecutor members Paddle 1.8's own tests use, with fluid 1.8.5's
behaviour: _compile binds a scope and place once, with_data_parallel takes one place as a list
of it, and ParallelExecutor's local execution state is dropped and made again."""
import numpy as np
import pytest

import spmd.fluid as fluid


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, test, loss


def _feed(n=4):
    return {"x": np.arange(n * 3, dtype="float32").reshape(n, 3) / 10}


def test_compile_binds_the_first_scope_and_place_and_refuses_others():
    main, startup, _, loss = _net()
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main)
    assert compiled._compile(scope, fluid.CPUPlace()) is compiled
    assert compiled._compile(scope, fluid.CPUPlace()) is compiled  # the same: fine
    with pytest.raises(ValueError, match="different scope"):
        compiled._compile(fluid.Scope(), fluid.CPUPlace())
    with pytest.raises(ValueError, match="different place"):
        compiled._compile(scope, fluid.CUDAPlace(0))


def test_compile_of_a_data_parallel_program_makes_its_runner_on_that_scope(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, _, loss = _net()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    assert compiled.place_scopes is None
    compiled._compile(scope, fluid.CPUPlace())
    assert compiled.place_scopes[0] is scope and len(compiled.place_scopes) == 2
    (value,) = exe.run(compiled, feed=_feed(), fetch_list=[loss], scope=scope)
    assert value.shape == (2,)


def test_with_data_parallel_takes_one_place_as_a_list_of_it(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "3")
    main, startup, _, loss = _net()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=fluid.CPUPlace())
    assert compiled.places_for(fluid.CPUPlace()) == [fluid.CPUPlace()]
    (value,) = exe.run(compiled, feed=_feed(), fetch_list=[loss], scope=scope)
    assert value.shape == (1,)  # one place: one loss, not CPU_NUM of them


def test_parallel_executor_drops_its_local_state_and_makes_it_again(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, test, loss = _net()
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    train = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main,
                                   scope=scope)
    infer = fluid.ParallelExecutor(use_cuda=False, main_program=test, share_vars_from=train,
                                   scope=scope)
    assert train._need_create_local_exe_scopes()  # nothing made before the first run
    first = train.run([loss.name], feed=_feed())[0]
    infer.run([loss.name], feed=_feed())
    assert not train._need_create_local_exe_scopes()
    assert not infer._need_create_local_exe_scopes()
    train.drop_local_exe_scopes()
    infer.drop_local_exe_scopes()
    assert train._need_create_local_exe_scopes() and infer._need_create_local_exe_scopes()
    # parameters stay: the next step goes on from the trained ones
    second = train.run([loss.name], feed=_feed())[0]
    assert not train._need_create_local_exe_scopes()
    assert not np.allclose(first, second)


def test_a_program_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="expects a Program"):
        fluid.CompiledProgram("program")


def test_compile_sharing_a_plain_or_unrun_program_is_a_value_error():
    main, startup, _, loss = _net()
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    plain = fluid.CompiledProgram(main)
    unrun = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    for source in (plain, unrun):
        sharing = fluid.CompiledProgram(main).with_data_parallel(share_vars_from=source)
        with pytest.raises(ValueError, match="share_vars_from"):
            sharing._compile(scope, fluid.CPUPlace())
