"""fluid.incubate.fleet.utils.fleet_util: FleetUtil, PaddleRec's helpers around a fleet job:
rank-0 printing, zeroing a variable, the global AUC and CTR metrics of the workers' auc /
metric states (summed over the workers by the role maker's `_all_reduce`), and the passes
of an online-training day.

spmd has one parameter-server fleet (fluid's "transpiler" mode); pslib, Baidu's
closed-source server, is not in spmd, so mode="pslib" (fluid's default) uses it too. The
methods that only drive pslib or its HDFS model files (load / save_*_model, write_*_donefile,
get_last_save_*, pull_all_dense_params) and the protobuf program tools are not here.

>>> # util = FleetUtil("transpiler")
>>> # util.print_global_auc(fluid.global_scope(), stat_pos.name, stat_neg.name)
"""
from __future__ import annotations

import logging
import math
import sys

import numpy as np

from .....core.places import CPUPlace
from .....core.scope import global_scope
from .....errors import InvalidArgumentError, PreconditionError
from ..parameter_server.distribute_transpiler import fleet as fleet_transpiler

__all__ = ["FleetUtil"]

_logger = logging.getLogger("FleetUtil")
fleet = fleet_transpiler


def _role():
    return getattr(fleet, "_role_maker", None)


def _worker(what: str) -> int:
    """fleet.worker_index() / worker_num(); a process outside a fleet job (fleet.init not
    called) is worker 0 of 1."""
    try:
        return getattr(fleet, what)()
    except PreconditionError:
        return 1 if what == "worker_num" else 0


def _barrier_worker():
    role = _role()
    if role is not None and hasattr(role, "_barrier_worker"):
        role._barrier_worker()


def _all_reduce(local: np.ndarray) -> np.ndarray:
    """The sum of `local` over the fleet's workers."""
    role = _role()
    if role is not None and hasattr(role, "_all_reduce"):
        out = np.zeros_like(local)
        role._all_reduce(local, out)
        return out
    if _worker("worker_num") == 1:
        return np.copy(local)
    raise InvalidArgumentError(
        f"FleetUtil: summing metrics over {_worker('worker_num')} workers needs a role maker "
        f"with worker collectives (role_maker.MPISymetricRoleMaker or GeneralRoleMaker); "
        f"{type(role).__name__} has none")


class FleetUtil:
    """Helpers of a fleet job (see the module)."""

    def __init__(self, mode="pslib"):
        if mode not in ("pslib", "transpiler"):
            raise ValueError("Please choose one mode from [\"pslib\", \"transpiler\"]")
        self.mode = mode

    # -- rank 0 output ---------------------------------------------------------------------------
    def rank0_print(self, s):
        if _worker("worker_index") != 0:
            return
        print(s)
        sys.stdout.flush()

    def rank0_info(self, s):
        if _worker("worker_index") != 0:
            return
        _logger.info(s)

    def rank0_error(self, s):
        if _worker("worker_index") != 0:
            return
        _logger.error(s)

    # -- variables -------------------------------------------------------------------------------
    def set_zero(self, var_name, scope=None, place=None, param_type="int64"):
        """Zero variable `var_name` of `scope` (its shape kept), as `param_type`."""
        scope = scope if scope is not None else global_scope()
        tensor = scope.var(var_name).get_tensor()
        shape = np.array(tensor).shape
        tensor.set(np.zeros(shape, dtype=param_type), place or CPUPlace())

    # -- metrics ---------------------------------------------------------------------------------
    def _global(self, scope, name):
        local = np.array(scope.find_var(name).get_tensor())
        return _all_reduce(local.reshape(-1)).reshape(local.shape)

    def get_global_auc(self, scope=None, stat_pos="_generated_var_2",
                       stat_neg="_generated_var_3"):
        """The AUC of the workers' summed auc buckets (fluid.layers.auc's stat_pos /
        stat_neg states); None when they are not in the scope."""
        scope = scope if scope is not None else global_scope()
        if scope.find_var(stat_pos) is None or scope.find_var(stat_neg) is None:
            self.rank0_print("not found auc bucket")
            return None
        _barrier_worker()
        global_pos = self._global(scope, stat_pos).reshape(1, -1)
        global_neg = self._global(scope, stat_neg).reshape(1, -1)
        area = pos = neg = 0.0
        total = 0
        for index in reversed(range(global_pos.shape[1])):  # from the highest score down
            new_pos, new_neg = pos + global_pos[0][index], neg + global_neg[0][index]
            total += global_pos[0][index] + global_neg[0][index]
            area += (new_neg - neg) * (pos + new_pos) / 2
            pos, neg = new_pos, new_neg
        auc = 0.5 if pos * neg == 0 or total == 0 else area / (pos * neg)
        _barrier_worker()
        return float(auc)

    def print_global_auc(self, scope=None, stat_pos="_generated_var_2",
                         stat_neg="_generated_var_3", print_prefix=""):
        auc_value = self.get_global_auc(scope, stat_pos, stat_neg)
        self.rank0_print(print_prefix + f" global auc = {auc_value}")

    _METRIC_ARGS = ("sqrerr_name", "abserr_name", "prob_name", "q_name", "pos_ins_num_name",
                    "total_ins_num_name")

    def _missing_metric(self, scope, names: dict) -> bool:
        if scope.find_var(names["stat_pos_name"]) is None or \
                scope.find_var(names["stat_neg_name"]) is None:
            self.rank0_print("not found auc bucket")
            return True
        for arg in self._METRIC_ARGS:
            if scope.find_var(names[arg]) is None:
                self.rank0_print(f"not found {arg}={names[arg]}")
                return True
        return False

    def get_global_metrics(self, scope=None, stat_pos_name="_generated_var_2",
                           stat_neg_name="_generated_var_3", sqrerr_name="sqrerr",
                           abserr_name="abserr", prob_name="prob", q_name="q",
                           pos_ins_num_name="pos", total_ins_num_name="total"):
        """[auc, bucket_error, mae, rmse, actual_ctr, predicted_ctr, copc,
        mean_predict_qvalue, total_ins_num] over the workers (the states of
        fluid.contrib.layers.ctr_metric_bundle and the auc buckets); nine Nones when a state
        is missing."""
        scope = scope if scope is not None else global_scope()
        names = dict(stat_pos_name=stat_pos_name, stat_neg_name=stat_neg_name,
                     sqrerr_name=sqrerr_name, abserr_name=abserr_name, prob_name=prob_name,
                     q_name=q_name, pos_ins_num_name=pos_ins_num_name,
                     total_ins_num_name=total_ins_num_name)
        if self._missing_metric(scope, names):
            return [None] * 9
        _barrier_worker()
        auc = self.get_global_auc(scope, stat_pos_name, stat_neg_name)
        global_pos = self._global(scope, stat_pos_name).reshape(1, -1)
        global_neg = self._global(scope, stat_neg_name).reshape(1, -1)

        def metric(name):
            return float(self._global(scope, name).reshape(-1)[0])

        sqrerr, abserr = metric(sqrerr_name), metric(abserr_name)
        prob, q_value = metric(prob_name), metric(q_name)
        pos_ins, total_ins = metric(pos_ins_num_name), metric(total_ins_num_name)
        mae = abserr / total_ins
        rmse = math.sqrt(sqrerr / total_ins)
        actual_ctr = pos_ins / total_ins
        predicted_ctr = prob / total_ins
        mean_q = q_value / total_ins
        copc = actual_ctr / predicted_ctr if abs(predicted_ctr) > 1e-6 else 0.0
        return [auc, _bucket_error(global_pos[0], global_neg[0]), mae, rmse, actual_ctr,
                predicted_ctr, copc, mean_q, int(total_ins)]

    def print_global_metrics(self, scope=None, stat_pos_name="_generated_var_2",
                             stat_neg_name="_generated_var_3", sqrerr_name="sqrerr",
                             abserr_name="abserr", prob_name="prob", q_name="q",
                             pos_ins_num_name="pos", total_ins_num_name="total",
                             print_prefix=""):
        scope = scope if scope is not None else global_scope()
        got = self.get_global_metrics(scope, stat_pos_name, stat_neg_name, sqrerr_name,
                                      abserr_name, prob_name, q_name, pos_ins_num_name,
                                      total_ins_num_name)
        if got[0] is None:
            return
        auc, bucket_error, mae, rmse, actual_ctr, predicted_ctr, copc, mean_q, total = got
        self.rank0_print(f"{print_prefix} global AUC={auc:.6f} BUCKET_ERROR={bucket_error:.6f} "
                         f"MAE={mae:.6f} RMSE={rmse:.6f} Actural_CTR={actual_ctr:.6f} "
                         f"Predicted_CTR={predicted_ctr:.6f} COPC={copc:.6f} "
                         f"MEAN Q_VALUE={mean_q:.6f} Ins number={total}")

    # -- online training -------------------------------------------------------------------------
    def get_online_pass_interval(self, days, hours, split_interval, split_per_pass,
                                 is_data_hourly_placed):
        """The passes of a day: split_interval-minute splits between the first and the last
        of `hours` (space-separated, as the shell gives them), split_per_pass per pass, each
        named HH (is_data_hourly_placed) or HHMM. fluid 1.8.5 counts the passes of the whole
        day and fails on Python 3 (its split counts are floats) and on hours short of the
        day (it indexes past the splits); here the passes are those the hours fill."""
        hours = str(hours).split()
        split_interval, split_per_pass = int(split_interval), int(split_per_pass)
        splits_per_day = 24 * 60 // split_interval
        left, right = int(hours[0]), int(hours[-1])
        split_path = []
        for i in range(splits_per_day):
            h, m = divmod(i * split_interval, 60)
            if left <= h <= right:
                split_path.append(f"{h:02d}" if is_data_hourly_placed else f"{h:02d}{m:02d}")
        return [split_path[i * split_per_pass:(i + 1) * split_per_pass]
                for i in range(len(split_path) // split_per_pass)]


def _bucket_error(pos: np.ndarray, neg: np.ndarray) -> float:
    """fluid's bucket error: per span of predicted CTR buckets with enough impressions, the
    relative error of the actual CTR, weighted by impressions."""
    buckets = pos.size
    last_ctr, impressions, ctr_sum, click_sum = -1.0, 0.0, 0.0, 0.0
    error_sum = error_count = 0.0
    for i in range(buckets):
        click, show = float(pos[i]), float(pos[i] + neg[i])
        ctr = float(i) / buckets
        if abs(ctr - last_ctr) > 0.01:
            last_ctr, impressions, ctr_sum, click_sum = ctr, 0.0, 0.0, 0.0
        impressions += show
        ctr_sum += ctr * show
        click_sum += click
        if impressions == 0:
            continue
        adjust_ctr = ctr_sum / impressions
        if adjust_ctr == 0:
            continue
        relative_error = math.sqrt((1 - adjust_ctr) / (adjust_ctr * impressions))
        if relative_error < 0.05:
            error_sum += abs(click_sum / impressions / adjust_ctr - 1) * impressions
            error_count += impressions
            last_ctr = -1
    return error_sum / error_count if error_count > 0 else 0.0
