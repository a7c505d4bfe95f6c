"""fluid.core._create_loaded_parameter (fluid 1.8): the variables a scope lacks are made in
it with their shape and dtype, ready for the loaded values to be set into them; those it
has are left as they are."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid


def test_missing_parameters_are_made_with_their_shape_and_dtype_and_take_loaded_values():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[4, 3], dtype="float32")
        out = fluid.layers.fc(fluid.layers.fc(x, 2), 5)
    params = [v for v in main.list_vars() if fluid.io.is_parameter(v)]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    kept = np.full([3, 2], 7.0, "float32")
    scope.var(params[0].name).get_tensor().set(kept, fluid.CPUPlace())
    fluid.core._create_loaded_parameter(params, scope, exe._default_executor)
    for p in params:
        made = np.array(scope.find_var(p.name).get_tensor())
        assert made.shape == tuple(p.shape) and made.dtype == np.float32, p.name
    np.testing.assert_array_equal(np.array(scope.find_var(params[0].name).get_tensor()), kept)
    loaded = {p.name: np.random.default_rng(i).standard_normal(p.shape).astype("float32")
              for i, p in enumerate(params)}
    for name, value in loaded.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    xv = np.ones((4, 3), "float32")
    (got,) = exe.run(main, feed={"x": xv}, fetch_list=[out], scope=scope)
    w0, b0, w1, b1 = (loaded[p.name] for p in params)
    np.testing.assert_allclose(got, (xv @ w0 + b0) @ w1 + b1, rtol=1e-5)
