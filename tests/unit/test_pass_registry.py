"""The pass registry: passes run in their registered order when their condition holds, a lookup
of an unknown pass names the ones that exist, a pass in a new module registers itself (no list
elsewhere), and every BuildStrategy / ExecutionStrategy field has exactly one decision: it acts
(a registered pass serves it, or spmd checks it or always does what it asks) or a value spmd
does not honour warns once, naming it."""
from __future__ import annotations

import enum
import sys
import textwrap
import warnings

import pytest

import spmd.fluid as fluid
from spmd.core import Program
from spmd.errors import InvalidArgumentError
from spmd.passes.common import PassContext
from spmd.passes.registry import PASSES, PassRegistry, get_pass
from spmd.passes.strategy import (
    BuildStrategy,
    ExecutionStrategy,
    field_decisions,
    field_defaults,
    forget_warnings,
    warn_unacted,
)


def context(**kwargs) -> PassContext:
    return PassContext(Program(), BuildStrategy(), kwargs.pop("num_devices", 2),
                       kwargs.pop("loss_name", "loss"), **kwargs)


# -- the registry ------------------------------------------------------------------------------
def test_passes_run_by_order_then_name_when_their_condition_holds():
    registry, ran = PassRegistry(), []
    for name, order in (("late", 30), ("early", 10), ("b_mid", 20), ("a_mid", 20)):
        registry.register(name, order=order, when=lambda ctx: True)(
            lambda ctx, name=name: ran.append(name))
    registry.register("never", order=5, when=lambda ctx: False)(lambda ctx: ran.append("never"))
    assert [p.name for p in registry.passes()] == ["never", "early", "a_mid", "b_mid", "late"]
    assert registry.run(context()) == ["early", "a_mid", "b_mid", "late"]
    assert ran == ["early", "a_mid", "b_mid", "late"]


def test_a_condition_sees_what_earlier_passes_did():
    registry = PassRegistry()

    @registry.register("adds", order=1, when=lambda ctx: True)
    def adds(ctx):
        ctx.collectives_added = True

    registry.register("finishes", order=2, when=lambda ctx: ctx.collectives_added)(
        lambda ctx: None)
    assert registry.run(context()) == ["adds", "finishes"]


def test_an_unknown_pass_is_named_with_the_ones_that_exist():
    with pytest.raises(InvalidArgumentError, match=r"no pass named 'fuse_everything'.*"
                       r"'allreduce'.*'graphviz'.*'reduce_mode'.*'scale_loss_grad'"):
        get_pass("fuse_everything")
    registry = PassRegistry()
    registry.register("only", order=1, when=lambda ctx: True)(lambda ctx: None)
    with pytest.raises(InvalidArgumentError, match=r"no pass named 'other'.*\['only'\]"):
        registry.get("other")


def test_two_functions_under_one_name_are_refused():
    registry = PassRegistry()
    registry.register("twice", order=1, when=lambda ctx: True)(lambda ctx: None)

    def another(ctx):
        pass

    with pytest.raises(InvalidArgumentError, match="'twice' is registered twice"):
        registry.register("twice", order=2, when=lambda ctx: True)(another)


def test_a_pass_in_a_new_module_registers_itself(tmp_path, monkeypatch):
    """Adding a pass touches only its own module: the registry imports every module of its
    package on the first lookup."""
    package = tmp_path / "more_passes"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        from spmd.passes.registry import PassRegistry
        REGISTRY = PassRegistry(discover=__name__)
    """))
    (package / "extra.py").write_text(textwrap.dedent("""
        from more_passes import REGISTRY

        @REGISTRY.register("extra", order=7, fields=("sync_batch_norm",),
                           when=lambda ctx: True)
        def extra(ctx):
            ctx.sharding = "extra ran"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import more_passes

        assert more_passes.REGISTRY.get("extra").fields == ("sync_batch_norm",)
        ctx = context()
        assert more_passes.REGISTRY.run(ctx) == ["extra"]
        assert ctx.sharding == "extra ran"
    finally:
        for name in ("more_passes", "more_passes.extra"):
            sys.modules.pop(name, None)


def test_spmds_passes_and_their_order():
    names = [p.name for p in PASSES.passes()]
    assert names == ["scale_loss_grad", "sequence_loss_scale", "sync_batch_norm", "fuse_bn_act",
                     "fuse_elewise_add_act", "allreduce", "reduce_mode",
                     "fuse_all_optimizer_ops", "finish_collectives", "memory_optimize",
                     "graphviz"]
    assert get_pass("reduce_mode").fields == ("reduce_strategy", "fuse_broadcast_ops",
                                              "fuse_all_reduce_ops")


def test_a_test_program_only_gets_its_graph(tmp_path):
    ctx = context(loss_name=None)
    assert PASSES.run(ctx) == []
    ctx.strategy.debug_graphviz_path = str(tmp_path / "g.dot")
    assert PASSES.run(ctx) == ["graphviz"]
    assert (tmp_path / "g.dot").read_text().startswith("digraph program {")


@pytest.mark.parametrize("reduce", [False, True])
def test_the_strategy_picks_the_gradient_pass(reduce):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(fluid.layers.batch_norm(x), 2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    strategy = BuildStrategy()
    strategy.sync_batch_norm = True
    if reduce:
        strategy.reduce_strategy = BuildStrategy.ReduceStrategy.Reduce
    ctx = PassContext(main.clone(), strategy, 2, loss.name)
    gradients = "reduce_mode" if reduce else "allreduce"
    assert PASSES.run(ctx) == ["scale_loss_grad", "sync_batch_norm", gradients,
                               "finish_collectives"]
    assert (ctx.sharding is not None) == reduce
    one_device = PassContext(main.clone(), strategy, 1, loss.name)
    assert PASSES.run(one_device) == ["scale_loss_grad"]


# -- every field has a decision ----------------------------------------------------------------
def other_value(name, value):
    """A value of field `name` other than its default `value`."""
    if isinstance(value, enum.Enum):
        return next(m for m in type(value) if m != value)
    if isinstance(value, bool) or value is None:
        return not value
    if isinstance(value, int):
        return value + 2
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return ["127.0.0.1:6170", "127.0.0.1:6171"]
    if isinstance(value, set):
        return {"conv2d"}
    raise AssertionError(f"no other value for {name}: {value!r}")


@pytest.mark.parametrize("cls", [BuildStrategy, ExecutionStrategy])
def test_every_field_acts_or_warns_once_by_name(cls):
    decisions = field_decisions(cls)
    defaults = field_defaults(cls)
    assert sorted(decisions) == sorted(defaults), "a field without a decision (or a stale one)"
    for name, default in defaults.items():
        decision = decisions[name]
        assert decision.startswith(("acts: ", "warns: ")), (name, decision)
        if name.startswith("_"):
            continue  # _dry_run: test_strategies.py runs it
        strategy = cls()
        setattr(strategy, name, other_value(name, default))
        forget_warnings()
        if decision.startswith("acts: "):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert warn_unacted(strategy) == [], name
            continue
        why = decision.removeprefix("warns: ")
        with pytest.warns(UserWarning) as caught:
            assert warn_unacted(strategy) == [name]
        (message,) = [str(w.message) for w in caught]
        assert message.startswith(f"{cls.__name__}.{name}=") and why in message
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert warn_unacted(strategy) == []  # once per process


# which passes serve each BuildStrategy field, written out by hand (not derived from the
# registry, so a pass that stops declaring a field, or a field served by a wrong pass, fails)
SERVED = {
    "reduce_strategy": ["allreduce", "reduce_mode"],
    "gradient_scale_strategy": ["scale_loss_grad", "sequence_loss_scale"],
    "fuse_all_reduce_ops": ["allreduce", "reduce_mode"],
    "fuse_broadcast_ops": ["reduce_mode"],
    "sync_batch_norm": ["sync_batch_norm"],
    "debug_graphviz_path": ["graphviz"],
    "fuse_elewise_add_act_ops": ["fuse_elewise_add_act"],
    "fuse_bn_act_ops": ["fuse_bn_act"],
    "fuse_all_optimizer_ops": ["fuse_all_optimizer_ops"],
    "memory_optimize": ["memory_optimize"],
}


def test_fields_a_pass_serves_are_strategy_fields_and_act():
    decisions = field_decisions(BuildStrategy)
    served = {name: sorted(passes) for name, passes in PASSES.fields_served().items()}
    assert served == SERVED
    for name in SERVED:
        assert decisions[name].startswith("acts: "), (name, decisions[name])


def test_memory_optimize_acts_and_warns_for_no_value():
    """memory_optimize is served by its pass (passes/memory_optimize.py): True, False and
    fluid's default None all run without a warning."""
    forget_warnings()
    strategy = BuildStrategy()
    for value in (None, False, True):
        strategy.memory_optimize = value
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert warn_unacted(strategy) == []
