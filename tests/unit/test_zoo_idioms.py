"""Names the model zoo's fluid 1.8 image_classification trainer reaches for before it builds
anything spmd-specific (found by running it): fluid.wrapped_decorator, fluid.framework's place
helpers, and an optimizer's learning-rate Variable read before minimize."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid
from spmd.fluid.wrapped_decorator import signature_safe_contextmanager


def test_signature_safe_contextmanager_keeps_the_function():
    @signature_safe_contextmanager
    def scoped(tag: str):
        """A guard."""
        yield tag.upper()

    with scoped("a") as got:
        assert got == "A"
    assert scoped.__name__ == "scoped" and scoped.__doc__ == "A guard."


def test_framework_holds_the_place_helpers():
    assert fluid.framework.cpu_places(2) == [fluid.CPUPlace()] * 2
    assert fluid.framework.is_compiled_with_cuda() is fluid.is_compiled_with_cuda()
    assert fluid.framework.device_guard is fluid.device_guard


def test_a_schedule_learning_rate_is_known_before_minimize():
    """utils/optimizer.py of the zoo: opt = Momentum(piecewise_decay(...)); lr =
    opt._global_learning_rate(); lr.persistable = True; then minimize; fetch lr each step."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        lr = fluid.layers.piecewise_decay(boundaries=[2], values=[0.1, 0.01])
        opt = fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9)
        global_lr = opt._global_learning_rate()
        assert global_lr is lr
        global_lr.persistable = True
        opt.minimize(loss)
        assert opt._global_learning_rate() is lr
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    seen = [float(exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[global_lr],
                          scope=scope)[0]) for _ in range(4)]
    np.testing.assert_allclose(seen, [0.1, 0.1, 0.01, 0.01], rtol=1e-6)
