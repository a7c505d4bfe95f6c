"""Optimizer wrappers that keep second copies of the parameters: LookaheadOptimizer,
ExponentialMovingAverage and ModelAverage (fluid 1.8's names and arguments).

Their per-step ops come after the optimizer's updates with the forward role, so in data
parallel they run on every rank on the complete, updated parameters (in Reduce mode: after the
owners' broadcast), and every rank holds the same averages. `apply(exe)` / `restore(exe)` run
small programs of their own on the executor's (global) scope, as fluid's do.

>>> # opt = fluid.optimizer.SGD(0.1); opt.minimize(loss)
>>> # ema = fluid.optimizer.ExponentialMovingAverage(0.999); ema.update()
>>> # with ema.apply(exe):
>>> #     exe.run(test_program, feed=...)
"""
from __future__ import annotations

import contextlib
import numbers

from ..core import unique_name
from ..core.operator import OpRole
from ..core.program import Program, default_main_program, default_startup_program
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .common import persistable_var

__all__ = ["ExponentialMovingAverage", "LookaheadOptimizer", "ModelAverage"]


def _averaged_params(program):
    """fluid: every parameter except those with ParamAttr(do_model_average=False)."""
    return [p for p in program.global_block().all_parameters()
            if getattr(p, "do_model_average", None) is not False]


class LookaheadOptimizer:
    """Lookahead (Zhang et al.): the inner optimizer updates the fast weights every step; every
    k steps the slow weights move alpha of the way to them and the fast weights restart there.

    >>> # opt = LookaheadOptimizer(fluid.optimizer.SGD(0.1), alpha=0.5, k=5)
    >>> # opt.minimize(avg_loss)
    """

    def __init__(self, inner_optimizer, alpha=0.5, k=5):
        if inner_optimizer is None or not hasattr(inner_optimizer, "minimize"):
            raise InvalidArgumentError(
                f"LookaheadOptimizer: inner_optimizer must be an optimizer, got "
                f"{inner_optimizer!r}")
        if not isinstance(alpha, numbers.Real) or not 0.0 <= alpha <= 1.0:
            raise InvalidArgumentError(
                f"LookaheadOptimizer: alpha should be larger or equal to 0.0, and less or equal "
                f"than 1.0, got {alpha!r}")
        if not isinstance(k, numbers.Integral) or k <= 0:
            raise InvalidArgumentError(f"LookaheadOptimizer: k should be a positive integer, "
                                       f"got {k!r}")
        self.inner_optimizer, self.alpha, self.k = inner_optimizer, float(alpha), int(k)
        self.type = "lookahead"

    def minimize(self, loss, startup_program=None):
        """The inner optimizer's minimize, then the slow-weight ops; returns what the inner
        minimize returned."""
        result = self.inner_optimizer.minimize(loss, startup_program=startup_program)
        startup = default_startup_program() if startup_program is None else startup_program
        main = loss.block.program
        block, sblock = main.global_block(), startup.global_block()
        params = [p.name for p in block.all_parameters()]
        with main.role_guard(OpRole.FORWARD):
            step = persistable_var(main, startup, "lookahead_step", [1], "int32", 0)
            block.append_op("increment", inputs={"X": [step]}, outputs={"Out": [step]},
                            attrs={"step": 1.0})
            for name in params:
                fast = block.var(name)
                slow = block.create_var(name=name + "@SLOW", shape=fast.shape,
                                        dtype=fast.dtype, persistable=True, stop_gradient=True)
                sblock.create_var(name=slow.name, shape=fast.shape, dtype=fast.dtype,
                                  persistable=True)
                sblock.append_op("assign", inputs={"X": [name]}, outputs={"Out": [slow.name]})
                block.append_op("lookahead_step",
                                inputs={"Param": [fast], "SlowParam": [slow], "Step": [step]},
                                outputs={"ParamOut": [fast], "SlowParamOut": [slow]},
                                attrs={"alpha": self.alpha, "k": self.k})
        return result


class _ApplyRestore:
    """apply(executor, need_restore) / restore(executor) over `apply_program` and
    `restore_program`, as fluid's ExponentialMovingAverage and ModelAverage."""

    apply_program: Program
    restore_program: Program

    @contextlib.contextmanager
    def apply(self, executor, need_restore=True):
        """Swap the averaged values into the parameters for the body of the `with`; put the
        trained values back afterwards unless need_restore is False."""
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor):
        """Put back the parameter values apply() saved."""
        executor.run(self.restore_program)

    @staticmethod
    def _clone_var(block, var, persistable=None):
        return block.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                                persistable=var.persistable if persistable is None
                                else persistable)

    def _backup_programs(self, pairs, fill_param):
        """apply: save each parameter into its backup, then fill_param(block, param);
        restore: copy the backups back. Backups are persistable so they survive between the
        two programs' runs."""
        self.apply_program, self.restore_program = Program(), Program()
        ablock, rblock = self.apply_program.global_block(), self.restore_program.global_block()
        for param, backup in pairs:
            p, b = self._clone_var(ablock, param), self._clone_var(ablock, backup, True)
            ablock.append_op("assign", inputs={"X": [p]}, outputs={"Out": [b]})
            fill_param(ablock, p)
            p, b = self._clone_var(rblock, param), self._clone_var(rblock, backup, True)
            rblock.append_op("assign", inputs={"X": [b]}, outputs={"Out": [p]})


class ExponentialMovingAverage(_ApplyRestore):
    """ema = decay * ema + (1 - decay) * param after each step (`update()` adds the ops);
    apply() swaps in ema / (1 - decay**t), the bias-corrected average after t updates.
    With thres_steps (a Variable counting steps), decay = min(decay, (t + 1) / (t + 10)).
    As in fluid 1.8, apply() also leaves the corrected value in the ema variable.

    >>> # ema = ExponentialMovingAverage(0.999); ema.update()   # after opt.minimize(loss)
    >>> # with ema.apply(exe): exe.run(test_program, feed=...)
    """

    _step_counter_name = "@EMA_STEP_COUNTER@"

    def __init__(self, decay=0.999, thres_steps=None, name=None):
        if not isinstance(decay, numbers.Real) or isinstance(decay, bool):
            raise InvalidArgumentError(
                f"ExponentialMovingAverage: decay must be a float, got {decay!r}")
        if thres_steps is not None and not isinstance(thres_steps, Variable):
            raise InvalidArgumentError(
                f"ExponentialMovingAverage: thres_steps must be a Variable (a step counter) or "
                f"None, got {thres_steps!r}")
        self._decay, self._thres_steps = float(decay), thres_steps
        self._name = name if name is not None else ""
        main, startup = default_main_program(), default_startup_program()
        self._main = main
        with main.role_guard(OpRole.LR_SCHED):  # fluid computes the decay as a schedule
            self._decay_var = self._make_decay(main, startup)
        with main.role_guard(OpRole.FORWARD):
            self._params_tmps, self._ema_vars = [], {}
            for param in _averaged_params(main):
                tmp = main.global_block().create_var(
                    name=unique_name.generate(f"{self._name}{param.name}.ema_tmp"),
                    shape=param.shape, dtype=param.dtype, stop_gradient=True)
                self._params_tmps.append((param, tmp))
                self._ema_vars[param.name] = persistable_var(
                    main, startup, unique_name.generate(f"{self._name}{param.name}_ema"),
                    param.shape, param.dtype, 0.0)
        block = main.global_block()
        if block.has_var(self._step_counter_name):  # a second EMA shares fluid's counter
            self._step = block.var(self._step_counter_name)
        else:
            self._step = persistable_var(main, startup, self._step_counter_name, [1], "int64",
                                         0)
        self._backup_programs(self._params_tmps, self._fill_corrected)

    def _make_decay(self, main, startup):
        decay = persistable_var(main, startup, "scheduled_ema_decay_rate", [1], "float32",
                                self._decay)
        if self._thres_steps is not None:
            block = main.global_block()
            t = block.create_var(name=unique_name.generate("ema_thres_steps"), shape=[1],
                                 dtype="float32", stop_gradient=True)
            block.append_op("cast", inputs={"X": [self._thres_steps]}, outputs={"Out": [t]},
                            attrs={"in_dtype": self._thres_steps.dtype, "out_dtype": "float32"})
            num, den, ratio, cap = (
                block.create_var(name=unique_name.generate(f"ema_decay_{k}"), shape=[1],
                                 dtype="float32", stop_gradient=True)
                for k in ("num", "den", "ratio", "cap"))
            block.append_op("scale", inputs={"X": [t]}, outputs={"Out": [num]},
                            attrs={"scale": 1.0, "bias": 1.0})
            block.append_op("scale", inputs={"X": [t]}, outputs={"Out": [den]},
                            attrs={"scale": 1.0, "bias": 10.0})
            block.append_op("elementwise_div", inputs={"X": [num], "Y": [den]},
                            outputs={"Out": [ratio]})
            block.append_op("fill_constant", outputs={"Out": [cap]},
                            attrs={"shape": [1], "value": self._decay, "dtype": "float32"})
            block.append_op("elementwise_min", inputs={"X": [ratio], "Y": [cap]},
                            outputs={"Out": [decay]})
        return decay

    def _fill_corrected(self, block, param):
        ema = self._clone_var(block, self._ema_vars[param.name])
        decay, step = self._clone_var(block, self._decay_var), self._clone_var(block, self._step)
        block.append_op("ema_bias_correction",
                        inputs={"Ema": [ema], "Decay": [decay], "Step": [step]},
                        outputs={"Out": [ema]})
        block.append_op("assign", inputs={"X": [ema]}, outputs={"Out": [param]})

    def update(self):
        """Append the moving-average ops (call it after the optimizer's minimize)."""
        main = self._main
        block = main.global_block()
        if not any(op.type == "increment" and op.input("X") == [self._step.name]
                   for op in block.ops):
            # fluid's autoincreased_step_counter: advanced first thing in every run
            block._prepend_op("increment", inputs={"X": [self._step]},
                              outputs={"Out": [self._step]}, attrs={"step": 1.0},
                              role=OpRole.FORWARD)
        with main.role_guard(OpRole.AVERAGE):
            factors = {}  # dtype -> (decay, 1 - decay) in that dtype
            for param, _ in self._params_tmps:
                if param.dtype not in factors:
                    factors[param.dtype] = self._decay_factors(block, param.dtype)
                decay, one_minus = factors[param.dtype]
                ema = self._ema_vars[param.name]
                kept, added = (block.create_var(name=unique_name.generate(f"{ema.name}.{k}"),
                                                shape=param.shape, dtype=param.dtype,
                                                stop_gradient=True) for k in ("kept", "new"))
                block.append_op("elementwise_mul", inputs={"X": [ema], "Y": [decay]},
                                outputs={"Out": [kept]})
                block.append_op("elementwise_mul", inputs={"X": [param], "Y": [one_minus]},
                                outputs={"Out": [added]})
                block.append_op("elementwise_add", inputs={"X": [kept], "Y": [added]},
                                outputs={"Out": [ema]})

    def _decay_factors(self, block, dtype):
        """decay and 1 - decay as [1] variables of `dtype` (the decay variable is float32, as
        fluid's; float64 parameters get a cast copy)."""
        decay = self._decay_var
        if dtype != decay.dtype:
            cast = block.create_var(name=unique_name.generate("ema_decay_cast"), shape=[1],
                                    dtype=dtype, stop_gradient=True)
            block.append_op("cast", inputs={"X": [decay]}, outputs={"Out": [cast]},
                            attrs={"in_dtype": decay.dtype, "out_dtype": dtype})
            decay = cast
        one_minus = block.create_var(name=unique_name.generate("ema_one_minus_decay"),
                                     shape=[1], dtype=dtype, stop_gradient=True)
        block.append_op("scale", inputs={"X": [decay]}, outputs={"Out": [one_minus]},
                        attrs={"scale": -1.0, "bias": 1.0})
        return decay, one_minus


class ModelAverage(_ApplyRestore):
    """Average of the parameters over a sliding window of recent steps (fluid 1.8's
    average_accumulates op keeps running sums; the window is between min_average_window and
    min(max_average_window, average_window_rate * steps)). Build it after minimize; apply()
    swaps in the averages, restore() the trained values.

    >>> # model_average = ModelAverage(0.15, min_average_window=10000, max_average_window=12500)
    >>> # with model_average.apply(exe): exe.run(test_program, feed=...)
    """

    _SUMS = ("sum_1", "sum_2", "sum_3")
    _COUNTS = ("num_accumulates", "old_num_accumulates", "num_updates")

    def __init__(self, average_window_rate, min_average_window=10000, max_average_window=10000,
                 regularization=None, name=None):
        if not isinstance(average_window_rate, numbers.Real):
            raise InvalidArgumentError(
                f"ModelAverage: average_window_rate must be a float, got {average_window_rate!r}")
        for arg, value in (("min_average_window", min_average_window),
                           ("max_average_window", max_average_window)):
            if not isinstance(value, numbers.Integral):
                raise InvalidArgumentError(f"ModelAverage: {arg} must be an int, got {value!r}")
        self.average_window = float(average_window_rate)
        self.min_average_window, self.max_average_window = (int(min_average_window),
                                                            int(max_average_window))
        self.regularization, self._name = regularization, name
        main, startup = default_main_program(), default_startup_program()
        self._state: dict[str, dict] = {}
        self.params_grads = []
        with main.role_guard(OpRole.AVERAGE):
            for param in _averaged_params(main):
                backup = main.global_block().create_var(
                    name=unique_name.generate(f"{param.name}.tmp"), shape=param.shape,
                    dtype=param.dtype, stop_gradient=True)
                self.params_grads.append((param, backup))
                self._append_accumulate_op(main, startup, param)
        self._backup_programs(self.params_grads, self._fill_average)

    def _append_accumulate_op(self, main, startup, param):
        state = {}
        for acc in self._SUMS + self._COUNTS:
            shape, dtype = (param.shape, param.dtype) if acc in self._SUMS else ([1], "int64")
            state[acc] = persistable_var(main, startup,
                                         unique_name.generate(f"{param.name}_{acc}"), shape,
                                         dtype, 0.0)
        self._state[param.name] = state
        main.global_block().append_op(
            "average_accumulates",
            inputs={"param": [param], **{f"in_{k}": [v] for k, v in state.items()}},
            outputs={f"out_{k}": [v] for k, v in state.items()},
            attrs={"average_window": self.average_window,
                   "min_average_window": self.min_average_window,
                   "max_average_window": self.max_average_window})

    def _fill_average(self, block, param):
        """param = (sum_1 + sum_2 + sum_3) / (num_accumulates + old_num_accumulates)."""
        state = {k: self._clone_var(block, v) for k, v in self._state[param.name].items()}
        names = {k: unique_name.generate(f"{param.name}.avg_{k}")
                 for k in ("count", "total", "fcount")}
        block.create_var(name=names["count"], shape=[1], dtype="int64")
        block.create_var(name=names["fcount"], shape=[1], dtype=param.dtype)
        block.create_var(name=names["total"], shape=param.shape, dtype=param.dtype)
        block.append_op("sum", inputs={"X": [state["num_accumulates"],
                                             state["old_num_accumulates"]]},
                        outputs={"Out": [names["count"]]})
        block.append_op("cast", inputs={"X": [names["count"]]}, outputs={"Out": [names["fcount"]]},
                        attrs={"in_dtype": "int64", "out_dtype": param.dtype})
        block.append_op("sum", inputs={"X": [state[k] for k in self._SUMS]},
                        outputs={"Out": [names["total"]]})
        block.append_op("elementwise_div", inputs={"X": [names["total"]],
                                                   "Y": [names["fcount"]]},
                        outputs={"Out": [param]})
