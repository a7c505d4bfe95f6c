"""Optimizer base and the fluid 1.8 optimizers SGD, Momentum and Adam.

`minimize(loss)` appends, after the backward pass, in fluid 1.8's order (checked against
fluid's `Optimizer.apply_gradients`):

1. gradient clipping (`grad_clip`), on the raw gradients;
2. regularization (`regularization` / `param.regularizer`), on the clipped gradients;
3. one update op per parameter (sgd, momentum or adam), with its learning rate, times
   `param.optimize_attr["learning_rate"]` when that is not 1.

Fluid clips before it adds weight decay, so the decay term is never clipped. Every op from
step 1 on has role OpRole.OPTIMIZE. The learning rate and the accumulators are persistable
variables of the main program, set by fill_constant ops in the startup program, named from the
parameter name through spmd.core.unique_name (`fc_0.w_0_moment1_0`); `program.optimizer_state`
maps each parameter to its accumulators.

>>> # opt = AdamOptimizer(learning_rate=0.01, grad_clip=GradientClipByGlobalNorm(1.0))
>>> # optimize_ops, params_grads = opt.minimize(avg_loss)
"""
from __future__ import annotations

import numbers

import numpy as np

from ..autodiff import append_backward
from ..core import unique_name
from ..core.dtypes import is_floating
from ..core.operator import OpRole
from ..core.program import default_main_program, default_startup_program, program_guard
from ..core.scope import global_scope
from ..core.variable import Variable
from ..errors import InvalidArgumentError, PreconditionError
from .clip import append_gradient_clip_ops, check_grad_clip
from .common import persistable_var, tmp_var
from .lr import LRScheduler
from .regularizer import append_regularization_ops, check_regularizer

__all__ = ["Adam", "AdamOptimizer", "Momentum", "MomentumOptimizer", "Optimizer", "SGD",
           "SGDOptimizer"]


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class Optimizer:
    """Base of the optimizers: builds the backward pass, clipping, regularization and the
    update ops into the loss's program. Subclasses set `type` (the update op) and implement
    `_create_accumulators` and `_append_optimize_op`."""

    type = ""

    def __init__(self, learning_rate, parameter_list=None, regularization=None, grad_clip=None,
                 name=None):
        where = type(self).__name__
        if not _is_number(learning_rate) and not isinstance(learning_rate,
                                                              (Variable, LRScheduler)):
            raise InvalidArgumentError(
                f"{where}: learning_rate must be a float, a Variable (a fluid.layers schedule) "
                f"or a paddle.optimizer.lr scheduler, got {learning_rate!r}"
            )
        self._learning_rate = learning_rate
        self._parameter_list = list(parameter_list) if parameter_list is not None else None
        self.regularization = check_regularizer(regularization, where)
        self._grad_clip = check_grad_clip(grad_clip, where)
        self._name = name
        # per program: its learning-rate variable; accumulator name -> param name -> variable
        # (per program, so one optimizer may minimize several programs; `_accumulators` is
        # fluid's flat view of it)
        self._learning_rate_map: dict = {}
        self._accumulators_by_program: dict = {}

    @property
    def _accumulators(self) -> dict:
        """fluid 1.8's layout: accumulator name -> parameter name -> variable, over every
        program this optimizer built (fluid's own tests and model scripts read it)."""
        flat: dict = {}
        for per_name in self._accumulators_by_program.values():
            for name, per_param in per_name.items():
                flat.setdefault(name, {}).update(per_param)
        return flat

    @_accumulators.setter
    def _accumulators(self, value) -> None:
        """fluid's tests reset the state before building a new program with
        `opt._accumulators = defaultdict(dict)`: an empty mapping forgets every accumulator."""
        if value:
            raise InvalidArgumentError(
                f"{type(self).__name__}._accumulators can only be reset to an empty mapping "
                f"(got {len(value)} entries); accumulators are created by minimize")
        self._accumulators_by_program = {}

    # -- learning rate -----------------------------------------------------------------------
    def _create_global_learning_rate(self, main, startup):
        if main in self._learning_rate_map:
            return self._learning_rate_map[main]
        lr = self._learning_rate
        if isinstance(lr, Variable):
            if lr.block.program is not main:
                raise InvalidArgumentError(
                    f"{type(self).__name__}: the learning_rate Variable '{lr.name}' belongs to "
                    f"another Program than the loss; create it inside the same program_guard"
                )
            if any(d > 1 for d in lr.shape) or not is_floating(lr.dtype):
                raise InvalidArgumentError(
                    f"{type(self).__name__}: the learning_rate Variable '{lr.name}' must hold "
                    f"one float (shape [1]), got shape {list(lr.shape)} and dtype {lr.dtype}"
                )
            var = lr
        elif isinstance(lr, LRScheduler):
            var = persistable_var(main, startup, unique_name.generate("learning_rate"), [1],
                                  "float32", float(lr()))
            main.run_hooks.append(_SchedulerHook(lr, var.name))
        else:
            # fluid keeps the learning rate as a float32 [1] tensor whatever the params' dtype
            var = persistable_var(main, startup, unique_name.generate("learning_rate"), [1],
                                  "float32", float(lr))
        self._learning_rate_map[main] = var
        return var

    def _global_learning_rate(self, program=None):
        """The learning-rate variable of `program`: a Variable given as learning_rate (a
        schedule) from the start, as in fluid (model-zoo scripts fetch it before minimize);
        otherwise None until minimize builds it."""
        if program is None:
            program = default_main_program()
        lr = self._learning_rate
        if (program not in self._learning_rate_map and isinstance(lr, Variable)
                and lr.block.program is program):
            return lr
        return self._learning_rate_map.get(program)

    def _create_param_lr(self, block, param):
        """The global learning rate, times the parameter's multiplier when that is not 1."""
        lr = self._learning_rate_map[block.program]
        optimize_attr = getattr(param, "optimize_attr", None) or {}
        mult = float(optimize_attr.get("learning_rate", 1.0))
        if mult == 1.0:
            return lr
        scaled = tmp_var(block, f"{param.name}_learning_rate", lr.shape, lr.dtype)
        block.append_op("scale", inputs={"X": [lr]}, outputs={"Out": [scaled]},
                        attrs={"scale": mult})
        return scaled

    def get_lr(self) -> float:
        """The current learning rate: the float given, the scheduler's current value, or the
        value of the learning-rate Variable (a fluid.layers schedule) in the global scope.

        >>> SGDOptimizer(learning_rate=0.1).get_lr()
        0.1
        """
        lr = self._learning_rate
        if isinstance(lr, LRScheduler):
            return float(lr())
        if not isinstance(lr, Variable):
            return float(lr)
        value = global_scope().get(lr.name)
        if value is None:
            raise PreconditionError(
                f"learning rate variable '{lr.name}' has no value yet: run the startup program "
                f"(and, for a schedule, the main program) first"
            )
        host = value if isinstance(value, np.ndarray) else value.get()  # cupy -> numpy
        return float(host.reshape(-1)[0])

    def current_step_lr(self) -> float:
        """fluid 1.8's name of get_lr(): the learning rate of the current step.

        >>> SGDOptimizer(learning_rate=0.1).current_step_lr()
        0.1
        """
        return self.get_lr()

    # -- accumulators ------------------------------------------------------------------------
    def _add_accumulator(self, main, startup, name, param, fill_value=0.0, shape=None,
                         dtype=None):
        """A persistable accumulator `<param>_<name>_N` (shaped like `param` unless `shape`),
        filled with `fill_value` by the startup program, recorded in program.optimizer_state."""
        accs = self._accumulators_by_program.setdefault(main, {}).setdefault(name, {})
        if param.name in accs:
            raise InvalidArgumentError(
                f"{type(self).__name__}: accumulator '{name}' of parameter '{param.name}' "
                f"already exists: minimize was called twice on the same program"
            )
        key = f"{param.name}_{self._name}_{name}" if self._name else f"{param.name}_{name}"
        var = persistable_var(main, startup, unique_name.generate(key),
                              param.shape if shape is None else shape,
                              param.dtype if dtype is None else dtype, fill_value)
        accs[param.name] = var
        main.optimizer_state.setdefault(param.name, []).append(var.name)
        return var

    def _get_accumulator(self, program, name, param):
        try:
            return self._accumulators_by_program[program][name][param.name]
        except KeyError:
            raise InvalidArgumentError(
                f"{type(self).__name__}: no accumulator '{name}' for parameter '{param.name}'"
            ) from None

    def get_opti_var_name_list(self) -> list[str]:
        """Names of every accumulator this optimizer created."""
        return [v.name for per_prog in self._accumulators_by_program.values()
                for per_name in per_prog.values() for v in per_name.values()]

    def _create_accumulators(self, main, startup, parameters):
        """Hook: create the accumulators of `parameters` (SGD has none)."""

    def _append_optimize_op(self, block, param, grad):
        raise NotImplementedError

    # -- the pipeline ------------------------------------------------------------------------
    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        """Append the backward pass of `loss`; return [(param, grad)]."""
        if not isinstance(loss, Variable):
            raise InvalidArgumentError(
                f"{type(self).__name__}.minimize expects the loss Variable, "
                f"got {type(loss).__name__}"
            )
        params = parameter_list if parameter_list is not None else self._parameter_list
        if no_grad_set:
            # fluid: a parameter named in no_grad_set gets no gradient and so no update;
            # append_backward keeps every parameter it is asked for, so leave those out here
            skip = {v.name if isinstance(v, Variable) else v for v in no_grad_set}
            if params is None:
                params = [p for p in loss.block.program.all_parameters() if p.trainable]
            params = [p for p in params if (p.name if isinstance(p, Variable) else p) not in skip]
        return append_backward(loss, params, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        """Clip, regularize and append the update ops for `params_grads`; the learning rate and
        accumulators are initialized in the default startup program. Returns the ops the
        optimization pass appended (learning-rate scales, updates, finishing ops), as fluid."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        if not params_grads:
            return []
        main = params_grads[0][0].block.program
        startup = default_startup_program()
        with main.role_guard(OpRole.OPTIMIZE):
            if self._grad_clip is not None:
                params_grads = self._grad_clip(params_grads)
            else:  # what fluid.clip.set_gradient_clip attached to the parameters
                params_grads = append_gradient_clip_ops(params_grads)
            params_grads = append_regularization_ops(params_grads, self.regularization)
            return self._create_optimization_pass(params_grads, main, startup)

    def apply_optimize(self, loss, startup_program, params_grads):
        """apply_gradients with the loss's program as main program and `startup_program` (or
        the default one) receiving the initializers."""
        program = loss.block.program
        startup = startup_program if startup_program is not None else default_startup_program()
        with program_guard(program, startup):
            return self.apply_gradients(params_grads)

    def _create_optimization_pass(self, params_grads, main, startup):
        """Append the update ops; return every op appended here, as fluid 1.8's slice of the
        block from its start: each parameter's learning-rate `scale` (a multiplier != 1), its
        update op, and what `_finish_update` adds (Adamax's beta1-power `scale`)."""
        # fluid 1.8: minimize inside a branch updates only when the branch runs; its backward
        # is in the branch's block (autodiff/backward.py), and the updates follow it there
        block = main.current_block()
        start = len(block.ops)
        self._create_global_learning_rate(main, startup)
        live = [(p, g) for p, g in params_grads
                if g is not None and getattr(p, "trainable", True)]
        self._create_accumulators(main, startup, [p for p, _ in live])
        state = main.optimizer_state
        for param, grad in live:
            state.setdefault(param.name, [])
            self._append_optimize_op(block, param, grad)
        self._finish_update(block, live)
        return list(block.ops[start:])

    def _finish_update(self, block, params_grads):
        """Hook: ops after all updates (Adamax advances its beta1 power here, as fluid)."""

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Append backward, clipping, regularization and update ops for `loss`; return
        (optimize_ops, params_grads) where params_grads are the raw (param, grad) pairs.

        >>> # optimize_ops, params_grads = SGD(learning_rate=0.1).minimize(avg_loss)
        """
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        optimize_ops = self.apply_optimize(loss, startup_program, params_grads)
        return optimize_ops, params_grads


class SGDOptimizer(Optimizer):
    """param -= lr * grad.

    >>> opt = SGDOptimizer(learning_rate=0.1)
    """

    type = "sgd"

    def __init__(self, learning_rate, parameter_list=None, regularization=None, grad_clip=None,
                 name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)

    def _append_optimize_op(self, block, param, grad):
        lr = self._create_param_lr(block, param)
        return block.append_op("sgd", inputs={"Param": [param], "Grad": [grad],
                                              "LearningRate": [lr]},
                               outputs={"ParamOut": [param]})


class MomentumOptimizer(Optimizer):
    """velocity = momentum * velocity + grad; param -= lr * velocity
    (Nesterov: param -= lr * (grad + momentum * velocity)).

    Dense, as fluid's: on a sparse gradient (embedding(is_sparse=True)) every row's velocity
    decays and every row moves, so a step costs the whole table (fluid has no row update for
    momentum); for a step that costs its rows, use SGD, Adagrad, Ftrl or Adam(lazy_mode=True).

    >>> opt = MomentumOptimizer(learning_rate=0.1, momentum=0.9)
    """

    type = "momentum"
    _velocity_acc_str = "velocity"

    def __init__(self, learning_rate, momentum, parameter_list=None, use_nesterov=False,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        if not _is_number(momentum):
            raise InvalidArgumentError(f"{type(self).__name__}: momentum must be a float, "
                                       f"got {momentum!r}")
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)

    def _create_accumulators(self, main, startup, parameters):
        for p in parameters:
            self._add_accumulator(main, startup, self._velocity_acc_str, p)

    def _append_optimize_op(self, block, param, grad):
        velocity = self._get_accumulator(block.program, self._velocity_acc_str, param)
        lr = self._create_param_lr(block, param)
        return block.append_op(
            "momentum",
            inputs={"Param": [param], "Grad": [grad], "Velocity": [velocity],
                    "LearningRate": [lr]},
            outputs={"ParamOut": [param], "VelocityOut": [velocity]},
            attrs={"mu": self._momentum, "use_nesterov": self._use_nesterov})


class AdamOptimizer(Optimizer):
    """Adam with fluid 1.8's update (see the adam kernel in spmd/kernels/optim.py):
    per parameter moment1, moment2 and the beta1/beta2 power accumulators.

    Dense by default, as fluid's: on a sparse gradient every row's moments decay and every
    row moves (a step costs the whole table); lazy_mode=True updates only the looked-up rows
    and their moments, in place (a step costs its rows).

    >>> opt = AdamOptimizer(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8)
    """

    type = "adam"
    _moment1_acc_str = "moment1"
    _moment2_acc_str = "moment2"
    _beta1_pow_acc_str = "beta1_pow_acc"
    _beta2_pow_acc_str = "beta2_pow_acc"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameter_list=None, regularization=None, grad_clip=None, name=None,
                 lazy_mode=False):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        where = type(self).__name__
        for arg, value in (("beta1", beta1), ("beta2", beta2)):
            if not _is_number(value) and not isinstance(value, Variable):
                raise InvalidArgumentError(f"{where}: {arg} must be a float or a Variable, "
                                           f"got {value!r}")
            if _is_number(value) and not 0.0 <= value < 1.0:
                raise InvalidArgumentError(f"{where}: {arg} must be in [0, 1), got {value}")
        if not _is_number(epsilon) or epsilon < 0:
            raise InvalidArgumentError(f"{where}: epsilon must be a float >= 0, got {epsilon!r}")
        self._beta1, self._beta2 = beta1, beta2
        self._epsilon = float(epsilon)
        self._lazy_mode = bool(lazy_mode)

    def _create_accumulators(self, main, startup, parameters):
        # fluid 1.8 starts the beta powers at 0.9 / 0.999 when beta1 / beta2 are Variables
        b1_init = 0.9 if isinstance(self._beta1, Variable) else self._beta1
        b2_init = 0.999 if isinstance(self._beta2, Variable) else self._beta2
        for p in parameters:
            self._add_accumulator(main, startup, self._moment1_acc_str, p)
            self._add_accumulator(main, startup, self._moment2_acc_str, p)
            self._add_accumulator(main, startup, self._beta1_pow_acc_str, p, fill_value=b1_init,
                                  shape=[1])
            self._add_accumulator(main, startup, self._beta2_pow_acc_str, p, fill_value=b2_init,
                                  shape=[1])

    def _append_optimize_op(self, block, param, grad):
        prog = block.program
        m1 = self._get_accumulator(prog, self._moment1_acc_str, param)
        m2 = self._get_accumulator(prog, self._moment2_acc_str, param)
        b1p = self._get_accumulator(prog, self._beta1_pow_acc_str, param)
        b2p = self._get_accumulator(prog, self._beta2_pow_acc_str, param)
        lr = self._create_param_lr(block, param)
        inputs = {"Param": [param], "Grad": [grad], "LearningRate": [lr], "Moment1": [m1],
                  "Moment2": [m2], "Beta1Pow": [b1p], "Beta2Pow": [b2p]}
        attrs = {"epsilon": self._epsilon, "lazy_mode": self._lazy_mode,
                 "min_row_size_to_use_multithread": 1000}
        for slot, attr, beta in (("Beta1Tensor", "beta1", self._beta1),
                                 ("Beta2Tensor", "beta2", self._beta2)):
            if isinstance(beta, Variable):
                inputs[slot] = [beta]
            else:
                attrs[attr] = float(beta)
        return block.append_op(
            "adam", inputs=inputs,
            outputs={"ParamOut": [param], "Moment1Out": [m1], "Moment2Out": [m2],
                     "Beta1PowOut": [b1p], "Beta2PowOut": [b2p]},
            attrs=attrs)


class _SchedulerHook:
    """Run hook writing a paddle.optimizer.lr scheduler's current value into the learning-rate
    variable before each run. It goes in as a feed: a persistable [1] feed is copied to every
    place of a data-parallel program (and every rank computes the same value)."""

    def __init__(self, scheduler, name: str):
        self.scheduler, self.name = scheduler, name

    def __call__(self, feed, scope):
        if self.name not in feed:
            feed[self.name] = np.array([self.scheduler()], dtype="float32")


# fluid.optimizer exports both spellings
SGD = SGDOptimizer
Momentum = MomentumOptimizer
Adam = AdamOptimizer
