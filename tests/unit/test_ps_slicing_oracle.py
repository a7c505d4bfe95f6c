"""How a sparse table is cut across pservers, against fluid 1.8.5's DistributeTranspiler
(tests/oracle/make_ps_slicing.py -> data/ps_slicing.json): tables of 300 to 1M rows on 2, 3
and 4 pservers, fluid's min_block_size floor and a larger one, slice_var_up off. The same
height_sections, block names and endpoints in the trainer's distributed_lookup_table and
split_selected_rows, the same gradient blocks sent where, and on each pserver the same block
variables with the same shapes, initialized at those shapes (a pserver given no block holds
nothing of the table, as in fluid)."""
from __future__ import annotations

import warnings

import pytest
from oracle.make_ps_slicing import CASES, describe_pserver, describe_trainer, endpoints
from oracle.make_ps_slicing import build as build_model
from oracle.make_ps_slicing import transpile as transpile_case
from oracle_io import load

import spmd.fluid as fluid

FLUID18 = load("ps_slicing")


@pytest.mark.parametrize("case", list(CASES))
def test_a_table_is_cut_as_fluid_cuts_it(case):
    want = FLUID18[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a pserver given no block says so
        assert describe_trainer(transpile_case(fluid, case).get_trainer_program(
            wait_port=False)) == want["trainer"]
        n = CASES[case][2]
        for ep in endpoints(n).split(","):
            prog, start = transpile_case(fluid, case).get_pserver_programs(ep)
            assert describe_pserver(prog, start) == want["pservers"][ep], ep


def test_a_distributed_table_where_fluid_cannot_transpile_it():
    """fluid 1.8.5's transpile of an is_distributed=True table raises (its prefetch rewrite
    finds no lookup: IndexError); spmd cuts it as an is_sparse table and prefetches its rows
    (spmd/ps/pserver_mode.py's _prefetch_distributed_tables)."""
    assert FLUID18["is_distributed_error"] == "IndexError"
    main, startup = build_model(fluid, 2000, 16, distributed=True)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=endpoints(2), trainers=2, startup_program=startup)
    ops = describe_trainer(t.get_trainer_program(wait_port=False))
    assert ops[0]["type"] == "distributed_lookup_table"
    assert ops[0]["attrs"]["height_sections"] == [1000, 1000]
