"""Real training: the digits MLP and CNN reach >= 97% test accuracy, and the same seed gives
bitwise the same losses twice."""
from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "digits"))
from train import train  # noqa: E402


@pytest.mark.parametrize("model, epochs", [("mlp", 20), ("cnn", 10)])
def test_reaches_97_percent(model, epochs):
    losses, accuracy = train(model, epochs=epochs, log=lambda *_: None)
    assert losses[-1] < losses[0] / 5, losses
    assert accuracy >= 0.97, f"{model}: test accuracy {accuracy:.4f} < 0.97"


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_same_seed_same_losses_bitwise(model):
    first, acc1 = train(model, epochs=2, log=lambda *_: None)
    second, acc2 = train(model, epochs=2, log=lambda *_: None)
    assert first == second and acc1 == acc2  # exact float equality, not approximate
