"""fluid.incubate.fleet.utils.utils.check_saved_vars_try_dump: an inference model saved by
fluid.io.save_inference_model is loaded, checked and run on one batch of random or
file-read feeds, giving the model's outputs; a mismatched feed shape is refused."""
from __future__ import annotations

import types

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.incubate.fleet.utils import utils as fleet_utils


def _save_model(folder, params_filename=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        out = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(folder), ["x"], [out], exe, main,
                                      model_filename="model", params_filename=params_filename)
    return out


def _configs(dims=(3,), filelist=None, fetch=None):
    feed = types.SimpleNamespace(feeded_vars_names=["x"], feeded_vars_dims=[list(dims)],
                                 feeded_vars_types=["float32"], feeded_vars_filelist=filelist)
    return feed, types.SimpleNamespace(fetch_vars_names=fetch)


@pytest.mark.parametrize("params_filename", [None, "params"])
def test_random_batch_runs_through_the_saved_model(tmp_path, params_filename):
    _save_model(tmp_path, params_filename)
    feed, fetch = _configs()
    (out,) = fleet_utils.check_saved_vars_try_dump(str(tmp_path), "model", False, feed, fetch,
                                                   batch_size=4, save_filename=params_filename)
    assert out.shape == (4, 2)
    # every weight is 0.5: both outputs are half the sum of the row's random values
    np.testing.assert_allclose(out[:, 0], out[:, 1])
    assert ((out > 0) & (out < 1.5)).all()


def test_feeds_read_from_files(tmp_path):
    _save_model(tmp_path)
    data = tmp_path / "x.txt"
    data.write_text("1 2 3 4 5 6\n")
    feed, fetch = _configs(filelist=[str(data)])
    (out,) = fleet_utils.check_saved_vars_try_dump(str(tmp_path), "model", False, feed, fetch,
                                                   batch_size=2)
    np.testing.assert_allclose(out, [[3.0, 3.0], [7.5, 7.5]])


def test_a_feed_shape_the_model_does_not_take_is_refused(tmp_path):
    _save_model(tmp_path)
    feed, fetch = _configs(dims=(4,))
    with pytest.raises(RuntimeError, match="feed variable 'x' shape not match"):
        fleet_utils.check_saved_vars_try_dump(str(tmp_path), "model", False, feed, fetch)
