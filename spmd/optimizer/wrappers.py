"""fluid.optimizer's RecomputeOptimizer, and the two fluid 1.8 optimizers spmd refuses with a
reason: DGCMomentumOptimizer and PipelineOptimizer.

RecomputeOptimizer(inner) (BERT / ERNIE scripts: `opt._set_checkpoints([...]);
opt.minimize(loss)`) trains exactly as `inner` does: recomputing activations in the backward
pass trades compute for memory and does not change the numbers (fluid 1.8 gives the same
losses with and without it; tests/oracle/make_optimizer_extra.py). As fluid 1.8, the backward
pass recomputes each segment's forward ops between the checkpoints before its gradient ops
(spmd/optimizer/recompute.py: fluid's segments and op order; random ops' outputs are kept
rather than recomputed, where fluid adds a seed op).

>>> import spmd.fluid as fluid
>>> opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.Adam(learning_rate=0.01))
>>> # opt._set_checkpoints([hidden, pred]); opt.minimize(loss)
"""
from __future__ import annotations

from ..core.variable import Variable
from ..errors import InvalidArgumentError, PreconditionError
from .optimizer import Optimizer
from .recompute import apply_recompute, insert_dropout_seeds

__all__ = ["DGCMomentumOptimizer", "PipelineOptimizer", "RecomputeOptimizer"]


class RecomputeOptimizer(Optimizer):
    """fluid.optimizer.RecomputeOptimizer: `inner`'s training with recompute checkpoints
    declared (spmd keeps activations instead of recomputing them: same numbers; see the module
    docstring).

    >>> import spmd.fluid as fluid
    >>> opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(learning_rate=0.1))
    >>> opt.get_lr()
    0.1
    """

    def __init__(self, optimizer):
        if not isinstance(optimizer, Optimizer):
            raise InvalidArgumentError(
                "RecomputeOptimizer(optimizer): optimizer must be a fluid optimizer such as "
                f"fluid.optimizer.Adam(...), got {type(optimizer).__name__}: {optimizer!r}")
        super().__init__(optimizer._learning_rate, name=optimizer._name)
        self._optimizer = optimizer
        self._checkpoints = None
        # one state with the inner optimizer: its learning rate, accumulators, clip and decay
        self._learning_rate_map = optimizer._learning_rate_map
        self._accumulators_by_program = optimizer._accumulators_by_program
        self.regularization, self._grad_clip = optimizer.regularization, optimizer._grad_clip

    def _set_checkpoints(self, checkpoints) -> None:
        """The Variables that cut the network into recompute segments (fluid's name; spmd
        checks and keeps them but does not recompute)."""
        if not isinstance(checkpoints, (list, tuple)):
            raise InvalidArgumentError(
                "RecomputeOptimizer._set_checkpoints: checkpoints must be a list of Variables "
                f"(e.g. [hidden, pred]), got {type(checkpoints).__name__}")
        for i, c in enumerate(checkpoints):
            if not isinstance(c, Variable):
                raise InvalidArgumentError(
                    f"RecomputeOptimizer._set_checkpoints: checkpoint #{i} must be a Variable "
                    f"(a layer's output), got {type(c).__name__}: {c!r}")
        self._checkpoints = list(checkpoints)

    def load(self, stat_dict):
        """Not supported, as in fluid 1.8: load the inner optimizer's state instead."""
        raise NotImplementedError(
            "load function is not supported by Recompute Optimizer for now")

    def _require_checkpoints(self, loss):
        if self._checkpoints is None:
            raise PreconditionError(
                "RecomputeOptimizer.minimize: no checkpoints set; call "
                "opt._set_checkpoints([var, ...]) with the layer outputs that cut the network "
                "into segments before minimize (fluid: 'You should call _set_checkpoints "
                "first')")
        program = loss.block.program
        for c in self._checkpoints:
            if c.block.program is not program:
                raise InvalidArgumentError(
                    f"RecomputeOptimizer: checkpoint '{c.name}' belongs to another Program than "
                    f"the loss '{loss.name}'; pass outputs of the layers that compute the loss")

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        """The inner optimizer's backward pass, rewritten so that each segment between
        checkpoints recomputes its forward ops before its gradient ops (spmd/optimizer/
        recompute.py), as fluid 1.8 builds it."""
        if not isinstance(loss, Variable):
            return self._optimizer.backward(loss, startup_program, parameter_list,
                                            no_grad_set, callbacks)
        self._require_checkpoints(loss)
        if self._checkpoints:
            insert_dropout_seeds(loss.block)
        n_forward = len(loss.block.ops)
        params_grads = self._optimizer.backward(loss, startup_program, parameter_list,
                                                no_grad_set, callbacks)
        apply_recompute(loss.block, n_forward, self._checkpoints)
        return params_grads

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def apply_optimize(self, loss, startup_program, params_grads):
        return self._optimizer.apply_optimize(loss, startup_program, params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """As the inner optimizer's minimize; needs `_set_checkpoints` first, as in fluid.

        >>> # optimize_ops, params_grads = opt.minimize(loss)
        """
        if not isinstance(loss, Variable):
            raise InvalidArgumentError(
                f"RecomputeOptimizer.minimize expects the loss Variable, got "
                f"{type(loss).__name__}")
        self._require_checkpoints(loss)
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        optimize_ops = self.apply_optimize(loss, startup_program, params_grads)
        return optimize_ops, params_grads

    def get_lr(self) -> float:
        return self._optimizer.get_lr()

    def get_opti_var_name_list(self) -> list[str]:
        return self._optimizer.get_opti_var_name_list()


class DGCMomentumOptimizer(Optimizer):
    """Deep Gradient Compression (fluid.optimizer.DGCMomentumOptimizer): not available in spmd.
    fluid 1.8 has it on GPUs only (its CPU build refuses it at construction) and spmd has no
    top-k sparse gradient exchange, so constructing one raises with what to use instead.

    >>> DGCMomentumOptimizer(0.1, 0.9, rampup_begin_step=0)   # doctest: +SKIP
    Traceback (most recent call last):
    spmd.errors.PreconditionError: DGCMomentumOptimizer is not available in spmd ...
    """

    def __init__(self, learning_rate, momentum, rampup_begin_step, rampup_step=1,
                 sparsity=(0.999,), parameter_list=None, use_nesterov=False,
                 num_trainers=None, regularization=None, grad_clip=None, name=None):
        raise PreconditionError(
            "DGCMomentumOptimizer is not available in spmd: Deep Gradient Compression sends "
            "only the top-k gradient values between GPUs (fluid 1.8 has it on CUDA builds only; "
            "its CPU build refuses it with 'DGC is only support GPU for now'), and spmd's "
            "all-reduce exchanges whole gradients. Use fluid.optimizer.MomentumOptimizer("
            f"learning_rate={learning_rate!r}, momentum={momentum!r}, "
            f"use_nesterov={use_nesterov!r}): DGC's update without the compression (what DGC "
            "itself runs before rampup_begin_step)")


class PipelineOptimizer:
    """Pipeline parallelism (fluid.optimizer.PipelineOptimizer): not available in spmd, which
    runs the whole program on every place (data parallel) and never cuts it into sections on
    different devices. Constructing one raises with what to use instead.

    >>> PipelineOptimizer(fluid.optimizer.SGD(0.1))   # doctest: +SKIP
    Traceback (most recent call last):
    spmd.errors.PreconditionError: PipelineOptimizer is not available in spmd ...
    """

    def __init__(self, optimizer, cut_list=None, place_list=None, concurrency_list=None,
                 queue_size=30, sync_steps=1, start_cpu_core_id=0):
        inner = type(optimizer).__name__
        raise PreconditionError(
            "PipelineOptimizer is not available in spmd: pipeline training cuts the program "
            "into sections (cut_list) that run on different devices (place_list) with queues "
            "between them, and spmd runs the whole program on every place, data parallel. "
            f"Use the inner optimizer ({inner}) directly and train data parallel: "
            "fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name) under "
            "`mpirun -n N` or `paddle-launch`, or fleet's collective mode")
