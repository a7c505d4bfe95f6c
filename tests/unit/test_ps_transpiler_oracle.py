"""spmd's DistributeTranspiler (pserver mode) against fluid 1.8.5's on the same models
(tests/oracle/make_transpiler.py -> data/transpiler.json): 2 pservers, 2 trainers (1 in
big_param_one_trainer), as trainer 0; SGD, Adam with exponential decay and L2, Momentum with
piecewise decay, an is_sparse embedding (fluid 1.8.5's remote-prefetch table), a parameter
cut across both pservers; sync and async; RoundRobin, a crc32 HashName, slice_var_up False.

What is compared, exactly:
- trainer program: the communication ops (send, split_byref, split_selected_rows,
  send_barrier, recv, fetch_barrier, concat, distributed_lookup_table) in order, each with
  its inputs, outputs (control variables renamed @CONTROLk by first use) and placement
  attributes (epmap, sections, send_varnames, endpoints, height_sections, table_names,
  merge_add, ...); each send's position (the grad op or communication op right before it);
  that no update op and no learning-rate op is left; the shapes of the block variables
  ("fc_0.w_0.block0", "fc_0.w_0@GRAD.block1.trainer_0", ...).
- trainer startup: its communication ops in order (recv, fetch_barrier, concat, fake_init).
- each pserver program: listen_and_serv's inputs and attributes (grad_to_block_id as a set:
  fluid orders it through a Python set), every optimize block's ops in order with inputs and
  outputs, the shapes of the global block's parameter, gradient and optimizer-state variables.
  Where spmd's source program differs from fluid's (not the transpiler's doing) the ops are
  mapped: fluid builds exponential/piecewise decay from many ops (piecewise from
  conditional blocks), spmd from one `lr_<schedule>` op after the counter's increment, so
  the learning-rate block is compared as "the counter step first, then the schedule"; the
  names of temporaries (fluid's _generated_var_k, tmp_k; spmd's <param>_l2_decay_0) are
  compared by role (same op slot), and the learning-rate variable by being the schedule's
  output.
- each pserver startup: the set of (op type, output, shape) (spmd's startup program lists
  initializers in another order than fluid's, before the transpiler runs).
- distributed_mode: fluid 1.8.5 reads it from config.sync_mode only, so transpile(
  sync_mode=False) still says 0 (sync) while the trainer sends no barrier; spmd says 2
  (half async, fluid's value for config.sync_mode=False) in the async cases.
"""
from __future__ import annotations

import warnings

import pytest
from oracle.make_transpiler import CASES, PSERVERS, describe, transpile
from oracle_io import load

import spmd.fluid as fluid
from spmd.ps import PSDispatcher

FLUID18 = load("transpiler")
COMM = {"send", "split_byref", "split_selected_rows", "send_barrier", "recv", "fetch_barrier",
        "concat", "distributed_lookup_table", "fake_init"}
GONE = {"sgd", "adam", "momentum", "increment", "lr_exponential_decay", "lr_piecewise_decay"}


class Crc32Name(PSDispatcher):
    """The oracle's dispatcher for big_param_hash: what spmd's HashName does."""

    def dispatch(self, varlist):
        import zlib

        return [self._eps[zlib.crc32(v.name.encode()) % len(self._eps)] for v in varlist]


def spmd_case(case):
    split = Crc32Name if CASES[case][1].get("split") == "Crc32Name" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, main, startup = transpile(fluid, case, split)
        trainer = describe(t.get_trainer_program(wait_port=False))
        out = {"trainer": trainer, "trainer_startup": describe(startup), "pservers": {}}
        for ep in PSERVERS.split(","):
            prog, start = t.get_pserver_programs(ep)
            out["pservers"][ep] = {"main": describe(prog), "startup": describe(start)}
    return out


def _comm_ops(ops):
    return [op for op in ops if op["type"] in COMM]


def _predecessors(ops):
    """The type of the op right before each send (where the send was placed)."""
    return [ops[i - 1]["type"] for i, op in enumerate(ops) if op["type"] == "send"]


NORMALIZE = {"square_error_cost_grad": "elementwise_sub_grad"}  # spmd's fused loss op


def _sent_where_params_are(ops):
    """fluid's trainer ops with each gradient block sent to the pserver its parameter block
    is received from (and updated on). fluid 1.8.5 hashes the gradients' own names for the
    sends: under a name-hashing split_method (big_param_hash) fc_0.w_0's gradient blocks go
    to 6171 while both its parameter blocks live, and wait for them, on 6170, so fluid's job
    never updates them; spmd sends them to 6170 (pserver_mode._send_where_params_are)."""
    held = {}
    for op in ops:
        if op["type"] == "recv":
            held.update(zip(op["outputs"]["Out"], op["attrs"]["epmap"]))
    out = []
    for op in ops:
        if op["type"] == "send" and op["attrs"].get("epmap") and not op["attrs"]["merge_add"]:
            params = [n.replace("@GRAD", "").replace(".trainer_0", "").replace(".trainer_1", "")
                      for n in op["inputs"]["X"]]
            if all(p in held for p in params):
                op = dict(op, attrs=dict(op["attrs"], epmap=[held[p] for p in params]))
        out.append(op)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_trainer_program_matches_fluid(case):
    want, got = FLUID18[case], spmd_case(case)
    w_ops, g_ops = want["trainer"][0]["ops"], got["trainer"][0]["ops"]
    assert _comm_ops(g_ops) == _comm_ops(_sent_where_params_are(w_ops))
    if case == "big_param_hash":  # the one case where that moves a send
        assert _comm_ops(w_ops) != _comm_ops(_sent_where_params_are(w_ops))
    assert [NORMALIZE.get(t, t) for t in _predecessors(g_ops)] == _predecessors(w_ops)
    assert not GONE & {op["type"] for op in g_ops}
    g_vars, w_vars = got["trainer"][0]["vars"], want["trainer"][0]["vars"]
    for name, v in w_vars.items():
        if ".block" in name or ".trainer_" in name:
            assert g_vars[name]["shape"] == v["shape"], name


@pytest.mark.parametrize("case", sorted(CASES))
def test_trainer_startup_matches_fluid(case):
    want, got = FLUID18[case], spmd_case(case)
    assert _comm_ops(got["trainer_startup"][0]["ops"]) == _comm_ops(
        want["trainer_startup"][0]["ops"])


def _lr_output(blocks):
    lr = blocks[0]["ops"][0]["attrs"]["lr_decay_block_id"]
    return blocks[lr]["ops"][-1]["outputs"]["Out"][0] if lr >= 0 else None


def _canonical_block(ops, lr_var):
    """An optimize block's ops with temporaries named by where they are written."""
    names = {}
    if lr_var:
        names[lr_var] = "@LR"
    out = []
    for k, op in enumerate(ops):
        for slot, vs in op["outputs"].items():
            for v in vs:
                if v not in names and ("_generated_var_" in v or "_l2_decay_" in v
                                       or "_grad_regularized_" in v):
                    names[v] = f"@TMP{k}.{slot}"
        ren = {s: [names.get(v, v) for v in vs] for s, vs in op["inputs"].items()}
        outs = {s: [names.get(v, v) for v in vs] for s, vs in op["outputs"].items()}
        out.append((op["type"], ren, outs))
    return out


def _canonical_adam_grad(ops):
    """fluid 1.8.5's L2 sum writes the gradient in place; spmd's writes a new variable that
    the update reads: make both read '@REG'."""
    fixed = []
    for t, ins, outs in ops:
        if t == "sum" and any(v.startswith("@TMP") for v in ins["X"]):
            fixed.append((t, ins, {"Out": ["@REG"]}))
            continue
        if "Grad" in ins and fixed and fixed[-1][2] == {"Out": ["@REG"]}:
            ins = dict(ins, Grad=["@REG"])
        fixed.append((t, ins, outs))
    return fixed


def _blocks_by_grad(blocks, ls):
    """grad name -> the optimize block that grad feeds, from grad_to_block_id."""
    out = {}
    for entry in ls["attrs"]["grad_to_block_id"]:
        grad, idx = entry.rsplit(":", 1)
        out[grad] = blocks[int(idx)]
    return out


def fluid_dropped_blocks(case, ep):
    """Gradient blocks sent to `ep` that fluid 1.8.5 serves no optimize block for: when two
    blocks of one parameter land on the same pserver (possible with a hash placement), fluid
    updates only the first (its _get_param_block takes the first match), so the second is
    never updated nor initialized there. spmd gives each block its own optimize block."""
    ls = FLUID18[case]["pservers"][ep]["main"][0]["ops"][0]
    served = {e.rsplit(":", 1)[0] for e in ls["attrs"]["grad_to_block_id"]}
    sent = {n.rsplit(".trainer_", 1)[0] for n in ls["inputs"].get("X", [])}
    return sent - served


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("ep", PSERVERS.split(","))
def test_pserver_program_matches_fluid(case, ep):
    want = FLUID18[case]["pservers"][ep]["main"]
    got = spmd_case(case)["pservers"][ep]["main"]
    (w_ls,), (g_ls,) = want[0]["ops"], got[0]["ops"]
    assert g_ls["type"] == w_ls["type"] == "listen_and_serv"
    assert g_ls["inputs"] == w_ls["inputs"]
    for key in ("Fanin", "endpoint", "pserver_id", "sparse_grad_to_param", "dc_asgd",
                "prefetch_var_name_to_block_id", "checkpint_block_id"):
        assert g_ls["attrs"][key] == w_ls["attrs"][key], key
    sync = CASES[case][1].get("sync_mode", True)
    assert w_ls["attrs"]["distributed_mode"] == 0
    assert g_ls["attrs"]["distributed_mode"] == (0 if sync else 2)
    dropped = fluid_dropped_blocks(case, ep)
    assert dropped == ({"fc_0.w_0@GRAD.block1"} if (case, ep) == (
        "big_param_hash", "127.0.0.1:6170") else set())
    # optimize blocks compared by the gradient they serve, in listen_and_serv's order (fluid's
    # piecewise_decay puts the lr block's conditional sub-blocks between them)
    w_by, g_by = _blocks_by_grad(want, w_ls), _blocks_by_grad(got, g_ls)
    assert set(g_by) == set(w_by) | dropped
    order = {b: i for i, b in enumerate(g_ls["attrs"]["optimize_blocks"])}
    w_order = {b: i for i, b in enumerate(w_ls["attrs"]["optimize_blocks"])}
    assert sorted(w_by, key=lambda g: w_order[w_by[g]["idx"]]) == \
        sorted(w_by, key=lambda g: order[g_by[g]["idx"]])
    lr_w, lr_g = w_ls["attrs"]["lr_decay_block_id"], g_ls["attrs"]["lr_decay_block_id"]
    assert (lr_w >= 0) == (lr_g >= 0)
    parent = 0 if lr_g < 0 else lr_g
    assert all(got[i]["parent_idx"] == parent for i in g_ls["attrs"]["optimize_blocks"]
               if i != lr_g)
    w_lr, g_lr = _lr_output(want), _lr_output(got)
    for grad, w_b in w_by.items():
        w_c = _canonical_adam_grad(_canonical_block(w_b["ops"], w_lr))
        g_c = _canonical_adam_grad(_canonical_block(g_by[grad]["ops"], g_lr))
        assert g_c == w_c, grad
    if lr_w >= 0:
        assert lr_g == 1 and g_ls["attrs"]["optimize_blocks"][0] == 1
        w_ops, g_ops = want[lr_w]["ops"], got[lr_g]["ops"]
        # the counter's step first (increment; async: the sum of the trainers' counters)
        assert g_ops[0] == w_ops[0] or (g_ops[0]["type"], g_ops[0]["inputs"]) == (
            w_ops[0]["type"], w_ops[0]["inputs"])
        # exponential_decay as fluid's chain of ops; piecewise_decay one fused op
        g_types = [op["type"] for op in g_ops[1:]]
        assert g_types == [op["type"] for op in w_ops[1:]] or g_types == ["lr_piecewise_decay"]
    g_vars, w_vars = got[0]["vars"], want[0]["vars"]
    for name, v in w_vars.items():
        if name in g_vars and not name.startswith(("tmp_", "_generated", "cast_", "floor_")):
            assert g_vars[name]["shape"] == v["shape"], name
            assert g_vars[name]["persistable"] == v["persistable"], name


def _init_set(blocks, lr_var):
    return sorted((op["type"], "@LR" if op["outputs"]["Out"][0] == lr_var
                   else op["outputs"]["Out"][0], tuple(op["attrs"].get("shape", ())))
                  for op in blocks[0]["ops"])


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("ep", PSERVERS.split(","))
def test_pserver_startup_matches_fluid(case, ep):
    want = FLUID18[case]["pservers"][ep]
    got = spmd_case(case)["pservers"][ep]
    w_lr, g_lr = _lr_output(want["main"]), _lr_output(got["main"])
    w = {e for e in _init_set(want["startup"], w_lr) if e[1] != "@LR"}
    g = {e for e in _init_set(got["startup"], g_lr) if e[1] != "@LR"}
    extra = {e[1] for e in g - w}
    assert w <= g
    assert extra == {d.replace("@GRAD", "") for d in fluid_dropped_blocks(case, ep)}


def test_hash_name_transpiles_where_fluids_cannot_and_places_by_crc32():
    """fluid 1.8.5's HashName fails under its own transpiler (it calls var.name()), which is
    why the oracle's hash case uses a crc32 dispatcher; spmd's HashName transpiles the same
    program and places every block exactly where that dispatcher does."""
    assert "TypeError" in FLUID18["fluid_hash_name_error"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, _, _ = transpile(fluid, "big_param_hash", fluid.transpiler.HashName)
        oracles, _, _ = transpile(fluid, "big_param_hash", Crc32Name)
    assert describe(ours.get_trainer_program(wait_port=False)) == \
        describe(oracles.get_trainer_program(wait_port=False))
    for ep in PSERVERS.split(","):
        assert describe(ours.get_pserver_programs(ep)[0]) == \
            describe(oracles.get_pserver_programs(ep)[0])


def test_geo_sgd_programs_match_fluid():
    """Geo-SGD (tests/oracle/make_pserver.py --geo-programs: fluid 1.8.5's GeoSgdTranspiler,
    k=5): the trainer program is the trained one (optimizer kept) plus one send at its end;
    the startup receives the dense parameters then sends param_init; each pserver adds
    `<block>.delta` to its blocks. spmd's geo send also lists the parameters in X and Out
    (its kernel sees values only through its slots; fluid's communicator reads the scope)."""
    from oracle.make_pserver import geo_programs

    want = load("geo_transpiler")["mixed"]
    got = geo_programs(fluid, fluid.DistributeTranspiler)
    def types(names):  # the loss: fluid's elementwise_sub + square, spmd's one op
        return [t for t in names if not t.startswith(("square", "elementwise_sub"))]

    assert types(got["trainer_types"]) == types(want["trainer_types"])
    assert got["trainer_types"].count("sgd") == 5 and got["trainer_types"][-1] == "send"
    kind, xs, outs, tables = got["trainer_send"]
    w_kind, w_xs, w_outs, w_tables = want["trainer_send"]
    assert (kind, xs[:len(w_xs)], outs[:1], tables) == (w_kind, w_xs, w_outs, w_tables)
    held = {n.split(".block")[0] for ep in want["pservers"].values() for n in ep["vars"]
            if not n.endswith(".delta")}
    assert xs[len(w_xs):] == outs[1:] and set(xs[len(w_xs):]) == held
    assert got["startup"] == want["startup"]
    assert got["pservers"] == want["pservers"]
