"""examples/detection/ssd_tiny.py (the model zoo's SSD, shrunk) against real fluid: the same
file run in PaddlePaddle 1.8.5 (tests/oracle/make_detection_ssd.py) from the same initial
parameters on the same synthetic batches gives the same first losses, with the zoo's RMSProp
and with Momentum; and its inference program gives per-image LoD detections."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_detection_ssd import load_example
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("detection_ssd")["ssd_tiny_losses"]
EXAMPLE = load_example("spmd.fluid")


@pytest.mark.parametrize("optimizer", ["rmsprop", "momentum"])
def test_first_losses_equal_fluid(optimizer):
    got = EXAMPLE.first_losses(optimizer=optimizer)
    assert len(got) == len(ORACLE[optimizer]) == EXAMPLE.ORACLE_STEPS
    np.testing.assert_allclose(got, ORACLE[optimizer], rtol=2e-5,
                               err_msg=f"ssd_tiny's first losses with {optimizer}")


def test_trains_and_detects():
    losses, params, (test_program, nmsed, scope) = EXAMPLE.train(
        12, batch_size=4, log=lambda line: None, data_parallel=False)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    image, boxes, labels = EXAMPLE.synthetic_images(np.random.RandomState(5), 3)
    place = fluid.CPUPlace()
    (out,) = fluid.Executor(place).run(test_program, feed=EXAMPLE.feed_of(image, boxes, labels,
                                                                           place),
                                       fetch_list=[nmsed], scope=scope, return_numpy=False)
    rows, (offsets,) = np.array(out), out.lod()
    if rows.shape[1] == 6:  # detections: one LoD entry per image, labels of real classes
        assert len(offsets) == 4 and offsets[-1] == rows.shape[0]
        assert set(rows[:, 0].astype(int)) <= {1, 2, 3}
        assert np.all((rows[:, 1] > 0.1) & (rows[:, 1] <= 1.0))
    else:  # nothing above the score threshold: fluid's [[-1]]
        assert rows.tolist() == [[-1.0]]
