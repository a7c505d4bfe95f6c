"""sampled_softmax_with_cross_entropy with its own sampler: the probability it gives each
sample follows fluid 1.8's rule, q * S when the S draws held no repeat and 1 - (1 - q)^tries
otherwise (q the class's log-uniform mass), checked on stored runs of real fluid
(tests/oracle/make_sampled.py) and on spmd's; and the loss is the softmax cross entropy of
the corrected logits in both. fluid's random draws cannot be reproduced, so the rule, not
the samples, is compared."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_sampled import CASES, run_case
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("sampled")


def _q(samples, k):
    return np.log((samples + 2.0) / (samples + 1.0)) / np.log(k + 1.0)


def _tries(samples, probs, k, s):
    """The number of draws that explains `probs` by fluid's rule, or None."""
    q = _q(samples.astype(np.float64), k)
    if np.allclose(probs, q * s, rtol=1e-5):
        return s
    for t in range(s + 1, 5000):
        if np.allclose(probs, -np.expm1(t * np.log1p(-q)), rtol=1e-5):
            return t
    return None


def _loss_ref(samples, probs, labels):
    """Softmax cross entropy of zero logits corrected by -log(p), hits pushed down by 1e20."""
    z = -np.log(probs.astype(np.float64))
    z[:, 1:] -= 1e20 * (samples[:, 1:] == labels)
    z -= z.max(axis=1, keepdims=True)
    return -(z[:, :1] - np.log(np.exp(z).sum(axis=1, keepdims=True)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_fluid_and_spmd_follow_the_same_rule(name):
    k, s, _, labels = CASES[name]
    labels = np.array(labels)
    for who, (samples, probs, loss) in (("fluid", ORACLE[name]),
                                        ("spmd", run_case(fluid, name))):
        assert (samples[:, 0:1] == labels).all(), f"{who}: true labels come first"
        tries = _tries(samples, probs, k, s)
        assert tries is not None, f"{who} {name}: probabilities follow neither rule"
        if name.startswith("no_repeat"):
            # so few of so many classes: neither sampler repeated a draw
            assert tries == s, f"{who} {name}: expected q * S, found {tries} tries"
        np.testing.assert_allclose(loss, _loss_ref(samples, probs, labels), rtol=1e-5,
                                   err_msg=f"{who} {name} loss")


def test_no_repeat_probability_is_q_times_s():
    """The case the rule splits on, spelt out: 1 - (1 - q)^S would be smaller than q * S."""
    k, s, _, _ = CASES["no_repeat_k1000"]
    samples, probs, _ = run_case(fluid, "no_repeat_k1000")
    q = _q(samples.astype(np.float64), k)
    np.testing.assert_allclose(probs, q * s, rtol=1e-6)
    assert (probs > -np.expm1(s * np.log1p(-q))).all()


def test_more_than_one_true_label_is_refused_as_in_fluid():
    """fluid 1.8.5's layer fails to build with num_true=2 (its softmax_with_cross_entropy
    shape check); spmd says so up front."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 6], "float32")
        y = fluid.data("y", [2, 2], "int64")
        with pytest.raises(ValueError, match="only one true label per row"):
            fluid.layers.sampled_softmax_with_cross_entropy(x, y, num_samples=3, num_true=2)
