"""Kernels, one body per op against `xp`. Importing this package registers them in KERNELS."""
from . import (  # noqa: F401 - registration side effects
    activation,
    batch_share,
    collective,
    control_flow,
    crf,
    ctc,
    host,
    index,
    linalg,
    logic,
    loss,
    manip,
    math,
    metric,
    nn,
    norm,
    optim,
    random,
    reader,
    reduce,
    rnn,
    sequence,
    sequence_gru,
    sequence_rnn,
    sparse,
    sync_batch_norm,
    tensor,
    vision,
)
from .registry import KERNELS, get_kernel, kernel

__all__ = ["KERNELS", "get_kernel", "kernel"]
