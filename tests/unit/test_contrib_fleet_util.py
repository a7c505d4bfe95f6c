"""fluid.incubate.fleet.utils.fleet_util.FleetUtil on one worker: the global AUC of a model's
auc buckets equals the auc layer's own, the CTR metrics of known states, zeroing a variable,
rank-0 printing and the passes of an online-training day."""
from __future__ import annotations

import math

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.incubate.fleet.utils import fleet_util
from spmd.fluid.incubate.fleet.utils.fleet_util import FleetUtil


def _auc_states():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        prob = fluid.data("prob", [None, 2], "float32")
        label = fluid.data("label", [None, 1], "int64")
        auc, batch_auc, states = fluid.layers.auc(prob, label, num_thresholds=63)
    r = np.random.default_rng(3)
    p1 = r.uniform(0, 1, (64, 1)).astype("float32")
    feed = {"prob": np.concatenate([1 - p1, p1], axis=1),
            "label": (r.uniform(0, 1, (64, 1)) < p1).astype("int64")}
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got = exe.run(main, feed=feed, fetch_list=[auc])[0]
    return float(np.asarray(got).reshape(-1)[0]), states


def test_global_auc_of_one_worker_is_the_auc_layers():
    with fluid.scope_guard(fluid.core.Scope()):
        want, states = _auc_states()
        stat_pos, stat_neg = states[-2].name, states[-1].name
        util = FleetUtil("transpiler")
        assert util.get_global_auc(fluid.global_scope(), stat_pos, stat_neg) == \
            pytest.approx(want, abs=1e-6)
        assert util.get_global_auc(fluid.global_scope(), "nope", stat_neg) is None


def _set(name, value):
    fluid.global_scope().var(name).get_tensor().set(np.asarray(value), fluid.CPUPlace())


def test_global_metrics_of_known_states(capsys):
    pos = np.array([[0, 1, 3, 6]], "int64")
    neg = np.array([[5, 4, 2, 1]], "int64")
    with fluid.scope_guard(fluid.core.Scope()):
        for name, value in (("pos_b", pos), ("neg_b", neg), ("sqrerr", [4.5]),
                            ("abserr", [7.0]), ("prob", [11.0]), ("q", [9.0]),
                            ("pos", [10.0]), ("total", [22.0])):
            _set(name, np.asarray(value, "float64") if name not in ("pos_b", "neg_b")
                 else value)
        util = FleetUtil()
        got = util.get_global_metrics(fluid.global_scope(), "pos_b", "neg_b")
        auc = util.get_global_auc(fluid.global_scope(), "pos_b", "neg_b")
        assert got[0] == auc
        assert got[2:] == pytest.approx([7 / 22, math.sqrt(4.5 / 22), 10 / 22, 11 / 22,
                                         (10 / 22) / (11 / 22), 9 / 22, 22])
        assert got[8] == 22 and isinstance(got[8], int)
        # the trapezoids from the highest bucket down
        area, tp, fp = 0.0, 0.0, 0.0
        for i in (3, 2, 1, 0):
            area += neg[0][i] * (2 * tp + pos[0][i]) / 2
            tp, fp = tp + pos[0][i], fp + neg[0][i]
        assert auc == pytest.approx(area / (tp * fp))
        util.print_global_metrics(fluid.global_scope(), "pos_b", "neg_b", print_prefix="day1")
        assert "day1 global AUC=" in capsys.readouterr().out
        assert util.get_global_metrics(fluid.global_scope(), "pos_b", "neg_b",
                                       q_name="absent") == [None] * 9
        assert "not found q_name=absent" in capsys.readouterr().out


def test_set_zero_keeps_the_shape():
    with fluid.scope_guard(fluid.core.Scope()):
        _set("counter", np.arange(6, dtype="int64").reshape(2, 3))
        FleetUtil().set_zero("counter", fluid.global_scope(), param_type="int64")
        got = np.array(fluid.global_scope().find_var("counter").get_tensor())
        assert got.shape == (2, 3) and not got.any()


def test_rank0_print_only_on_worker_0(capsys, monkeypatch):
    util = FleetUtil()
    monkeypatch.setattr(fleet_util.fleet, "worker_index", lambda: 1)
    util.rank0_print("hidden")
    monkeypatch.setattr(fleet_util.fleet, "worker_index", lambda: 0)
    util.rank0_print("shown")
    out = capsys.readouterr().out
    assert "shown" in out and "hidden" not in out
    with pytest.raises(ValueError, match="Please choose one mode"):
        FleetUtil("other")


def test_online_pass_interval():
    util = FleetUtil()
    got = util.get_online_pass_interval("20200101", "9 10 11", 30, 2, False)
    assert got == [["0900", "0930"], ["1000", "1030"], ["1100", "1130"]]
    day = util.get_online_pass_interval("20200101", " ".join(map(str, range(24))), 5, 6, False)
    assert len(day) == 24 * 60 // 5 // 6 and day[0] == ["0000", "0005", "0010", "0015",
                                                         "0020", "0025"]
    hourly = util.get_online_pass_interval("20200101", "0 23", 60, 6, True)
    assert hourly == [[f"{h:02d}" for h in range(i, i + 6)] for i in range(0, 24, 6)]
