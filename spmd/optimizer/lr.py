"""paddle.optimizer.lr: PaddlePaddle 2.x's learning-rate scheduler objects, for static programs.

A scheduler is a Python object holding the epoch/step count (`last_epoch`) and the current rate
(`last_lr`, also `scheduler()`); the user advances it with `scheduler.step()`. Given one as
`learning_rate`, an optimizer creates a persistable float32 [1] learning-rate variable and
registers a run hook on the program that writes `scheduler()` into it before every run
(paddle 2.x's static Executor does the same), so the program itself never changes.

>>> sched = StepDecay(learning_rate=0.5, step_size=2, gamma=0.1)
>>> sched(); sched.step(); sched.step(); round(sched(), 4)
0.5
0.05
>>> # opt = paddle.optimizer.SGD(learning_rate=sched); ...; sched.step() after each run
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["CosineAnnealingDecay", "ExponentialDecay", "InverseTimeDecay", "LRScheduler",
           "LambdaDecay", "LinearWarmup", "MultiStepDecay", "NaturalExpDecay", "NoamDecay",
           "PiecewiseDecay", "PolynomialDecay", "ReduceOnPlateau", "StepDecay"]


def _num(value, what: str, where: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InvalidArgumentError(f"{where}: {what} must be a number, got {value!r}")
    return float(value)


class LRScheduler:
    """Base of the schedulers: subclasses implement `get_lr()` from `self.base_lr` and
    `self.last_epoch`. Creating one calls `step()` once, so `last_epoch` starts at 0.

    >>> class Halving(LRScheduler):
    ...     def get_lr(self):
    ...         return self.base_lr * 0.5 ** self.last_epoch
    >>> Halving(learning_rate=1.0)()
    1.0
    """

    keys = ("last_epoch", "last_lr")

    def __init__(self, learning_rate=0.1, last_epoch=-1, verbose=False):
        where = type(self).__name__
        self.base_lr = _num(learning_rate, "learning_rate", where)
        if not isinstance(last_epoch, numbers.Integral):
            raise InvalidArgumentError(f"{where}: last_epoch must be an int, got {last_epoch!r}")
        self.last_epoch = int(last_epoch)
        self.last_lr = self.base_lr
        self.verbose = bool(verbose)
        self.step()

    def __call__(self) -> float:
        """The current learning rate."""
        return self.last_lr

    def step(self, epoch=None):
        """Advance to the next epoch (or to `epoch`) and recompute the rate."""
        if epoch is None:
            self.last_epoch += 1
            self.last_lr = self.get_lr()
        else:
            self.last_epoch = int(epoch)
            closed = getattr(self, "_get_closed_form_lr", None)
            self.last_lr = closed() if closed is not None else self.get_lr()
        if self.verbose:
            print(f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to "
                  f"{self.last_lr}.")

    def get_lr(self) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def state_dict(self) -> dict:
        """The scheduler's counters (`keys`), for checkpoints."""
        return {k: getattr(self, k) for k in self.keys}

    def set_state_dict(self, state_dict: dict):
        """Restore what state_dict() returned."""
        missing = [k for k in self.keys if k not in state_dict]
        if missing:
            raise InvalidArgumentError(
                f"{type(self).__name__}.set_state_dict: missing keys {missing}; expected the "
                f"dict state_dict() returned (keys {list(self.keys)})")
        for k in self.keys:
            setattr(self, k, state_dict[k])

    set_dict = set_state_dict


class NoamDecay(LRScheduler):
    """base_lr * d_model**-0.5 * min(epoch**-0.5, warmup_steps**-1.5 * epoch) (epoch 0: the
    first factor is 1).

    >>> round(NoamDecay(d_model=16, warmup_steps=4, learning_rate=2.0)(), 6)
    0.0
    """

    def __init__(self, d_model, warmup_steps, learning_rate=1.0, last_epoch=-1, verbose=False):
        self.d_model = _num(d_model, "d_model", "NoamDecay")
        self.warmup_steps = _num(warmup_steps, "warmup_steps", "NoamDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        a = 1.0 if self.last_epoch == 0 else self.last_epoch ** -0.5
        b = self.warmup_steps ** -1.5 * self.last_epoch
        return self.base_lr * self.d_model ** -0.5 * min(a, b)


class PiecewiseDecay(LRScheduler):
    """values[i] for the first i with epoch < boundaries[i], else values[-1].

    >>> PiecewiseDecay(boundaries=[2, 4], values=[0.1, 0.05, 0.01])()
    0.1
    """

    def __init__(self, boundaries, values, last_epoch=-1, verbose=False):
        if len(values) != len(boundaries) + 1:
            raise InvalidArgumentError(
                f"PiecewiseDecay: values needs one entry more than boundaries, got "
                f"{len(values)} values and {len(boundaries)} boundaries")
        self.boundaries, self.values = list(boundaries), [float(v) for v in values]
        super().__init__(last_epoch=last_epoch, verbose=verbose)

    def get_lr(self):
        for boundary, value in zip(self.boundaries, self.values):
            if self.last_epoch < boundary:
                return value
        return self.values[-1]


class NaturalExpDecay(LRScheduler):
    """base_lr * exp(-gamma * epoch).

    >>> round(NaturalExpDecay(learning_rate=0.5, gamma=0.1)(), 4)
    0.5
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _num(gamma, "gamma", "NaturalExpDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * math.exp(-1 * self.gamma * self.last_epoch)


class InverseTimeDecay(LRScheduler):
    """base_lr / (1 + gamma * epoch).

    >>> InverseTimeDecay(learning_rate=0.5, gamma=0.1)()
    0.5
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _num(gamma, "gamma", "InverseTimeDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr / (1 + self.gamma * self.last_epoch)


class PolynomialDecay(LRScheduler):
    """(base_lr - end_lr) * (1 - epoch / decay_steps) ** power + end_lr, the epoch capped at
    decay_steps; with cycle, decay_steps grows to decay_steps * ceil(epoch / decay_steps).

    >>> PolynomialDecay(learning_rate=0.5, decay_steps=10)()
    0.5
    """

    def __init__(self, learning_rate, decay_steps, end_lr=0.0001, power=1.0, cycle=False,
                 last_epoch=-1, verbose=False):
        if not isinstance(decay_steps, numbers.Integral) or decay_steps <= 0:
            raise InvalidArgumentError(
                f"PolynomialDecay: decay_steps must be a positive int, got {decay_steps!r}")
        self.decay_steps = int(decay_steps)
        self.end_lr = _num(end_lr, "end_lr", "PolynomialDecay")
        self.power = _num(power, "power", "PolynomialDecay")
        self.cycle = bool(cycle)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        epoch, steps = self.last_epoch, self.decay_steps
        if self.cycle:
            steps = steps * (1 if epoch == 0 else math.ceil(epoch / steps))
        else:
            epoch = min(epoch, steps)
        return (self.base_lr - self.end_lr) * (1 - epoch / steps) ** self.power + self.end_lr


class LinearWarmup(LRScheduler):
    """start_lr + (end_lr - start_lr) * epoch / warmup_steps for epoch < warmup_steps, then
    `learning_rate`: a float, or a scheduler stepped to epoch - warmup_steps.

    >>> LinearWarmup(learning_rate=0.5, warmup_steps=4, start_lr=0.0, end_lr=0.5)()
    0.0
    """

    def __init__(self, learning_rate, warmup_steps, start_lr, end_lr, last_epoch=-1,
                 verbose=False):
        if not isinstance(learning_rate, (LRScheduler, numbers.Real)):
            raise InvalidArgumentError(
                f"LinearWarmup: learning_rate must be a float or an LRScheduler, got "
                f"{learning_rate!r}")
        self.learning_rate = learning_rate
        if not isinstance(warmup_steps, numbers.Integral) or warmup_steps <= 0:
            raise InvalidArgumentError(
                f"LinearWarmup: warmup_steps must be a positive int, got {warmup_steps!r}")
        self.warmup_steps = int(warmup_steps)
        self.start_lr = _num(start_lr, "start_lr", "LinearWarmup")
        self.end_lr = _num(end_lr, "end_lr", "LinearWarmup")
        if self.end_lr <= self.start_lr:
            raise InvalidArgumentError(
                f"LinearWarmup: end_lr ({end_lr}) must be greater than start_lr ({start_lr})")
        super().__init__(start_lr, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch < self.warmup_steps:
            return ((self.end_lr - self.start_lr) * float(self.last_epoch) /
                    float(self.warmup_steps) + self.start_lr)
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate.step(self.last_epoch - self.warmup_steps)
            return self.learning_rate()
        return float(self.learning_rate)


class ExponentialDecay(LRScheduler):
    """base_lr * gamma ** epoch.

    >>> ExponentialDecay(learning_rate=0.5, gamma=0.9)()
    0.5
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _num(gamma, "gamma", "ExponentialDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** self.last_epoch


def _check_gamma(gamma, where):
    gamma = _num(gamma, "gamma", where)
    if gamma >= 1.0:
        raise InvalidArgumentError(f"{where}: gamma should be < 1.0, got {gamma}")
    return gamma


class MultiStepDecay(LRScheduler):
    """base_lr * gamma ** (number of milestones <= epoch).

    >>> MultiStepDecay(learning_rate=0.5, milestones=[2, 4], gamma=0.1)()
    0.5
    """

    def __init__(self, learning_rate, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(milestones, (list, tuple)):
            raise InvalidArgumentError(
                f"MultiStepDecay: milestones must be a list or tuple, got {milestones!r}")
        if any(milestones[i] >= milestones[i + 1] for i in range(len(milestones) - 1)):
            raise InvalidArgumentError(
                f"MultiStepDecay: milestones must be increasing, got {list(milestones)}")
        self.milestones = list(milestones)
        self.gamma = _check_gamma(gamma, "MultiStepDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        for i, milestone in enumerate(self.milestones):
            if self.last_epoch < milestone:
                return self.base_lr * self.gamma ** i
        return self.base_lr * self.gamma ** len(self.milestones)


class StepDecay(LRScheduler):
    """base_lr * gamma ** (epoch // step_size).

    >>> StepDecay(learning_rate=0.5, step_size=2)()
    0.5
    """

    def __init__(self, learning_rate, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(step_size, numbers.Integral) or step_size <= 0:
            raise InvalidArgumentError(
                f"StepDecay: step_size must be a positive int, got {step_size!r}")
        self.step_size = int(step_size)
        self.gamma = _check_gamma(gamma, "StepDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class LambdaDecay(LRScheduler):
    """base_lr * lr_lambda(epoch).

    >>> LambdaDecay(learning_rate=0.5, lr_lambda=lambda e: 0.9 ** e)()
    0.5
    """

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        if not callable(lr_lambda):
            raise InvalidArgumentError(
                f"LambdaDecay: lr_lambda must be a function epoch -> factor, got {lr_lambda!r}")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.lr_lambda(self.last_epoch)


class CosineAnnealingDecay(LRScheduler):
    """SGDR's cosine annealing without restarts, in its recursive form (closed form when
    step(epoch) is given): eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.

    >>> CosineAnnealingDecay(learning_rate=0.5, T_max=10)()
    0.5
    """

    def __init__(self, learning_rate, T_max, eta_min=0, last_epoch=-1, verbose=False):
        if not isinstance(T_max, numbers.Integral) or T_max <= 0:
            raise InvalidArgumentError(
                f"CosineAnnealingDecay: T_max must be a positive int, got {T_max!r}")
        self.T_max = int(T_max)
        self.eta_min = _num(eta_min, "eta_min", "CosineAnnealingDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self.base_lr
        if (e - 1 - t) % (2 * t) == 0:
            return self.last_lr + (self.base_lr - lo) * (1 - math.cos(math.pi / t)) / 2
        return ((1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) *
                (self.last_lr - lo) + lo)

    def _get_closed_form_lr(self):
        return (self.eta_min + (self.base_lr - self.eta_min) *
                (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2)


class ReduceOnPlateau(LRScheduler):
    """Multiply the rate by `factor` once the metric passed to `step(metrics)` has not improved
    for more than `patience` epochs (then wait `cooldown` epochs), never below `min_lr`.

    >>> sched = ReduceOnPlateau(learning_rate=1.0, patience=0)
    >>> sched.step(1.0); sched.step(2.0); sched()
    0.1
    """

    keys = ("cooldown_counter", "best", "num_bad_epochs", "last_epoch", "last_lr")

    def __init__(self, learning_rate, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, epsilon=1e-8, verbose=False):
        where = "ReduceOnPlateau"
        if mode not in ("min", "max"):
            raise InvalidArgumentError(f"{where}: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise InvalidArgumentError(
                f"{where}: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.factor = _num(factor, "factor", where)
        if self.factor >= 1.0:
            raise InvalidArgumentError(f"{where}: factor should be < 1.0, got {factor}")
        self.mode, self.threshold_mode = mode, threshold_mode
        self.patience, self.cooldown = int(patience), int(cooldown)
        self.threshold = _num(threshold, "threshold", where)
        self.min_lr = _num(min_lr, "min_lr", where)
        self.epsilon = _num(epsilon, "epsilon", where)
        self.base_lr = self.last_lr = _num(learning_rate, "learning_rate", where)
        self.cooldown_counter, self.best, self.num_bad_epochs = 0, None, 0
        self.last_epoch = 0
        self.verbose = bool(verbose)

    def step(self, metrics, epoch=None):
        """Record this epoch's metric (a number or a one-element array) and maybe reduce."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        values = np.asarray(metrics, dtype="float64").reshape(-1)
        if values.size != 1:
            raise InvalidArgumentError(
                f"ReduceOnPlateau.step: metrics must be a number or hold one element, got "
                f"shape {list(np.shape(metrics))}")
        current = float(values[0])
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            return
        if self.best is None or self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.num_bad_epochs > self.patience:
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
            new_lr = max(self.last_lr * self.factor, self.min_lr)
            if self.last_lr - new_lr > self.epsilon:
                self.last_lr = new_lr
                if self.verbose:
                    print(f"Epoch {self.last_epoch}: ReduceOnPlateau set learning rate to "
                          f"{self.last_lr}.")

    def _is_better(self, current, best):
        if self.mode == "min":
            bound = best - best * self.threshold if self.threshold_mode == "rel" \
                else best - self.threshold
            return current < bound
        bound = best + best * self.threshold if self.threshold_mode == "rel" \
            else best + self.threshold
        return current > bound
