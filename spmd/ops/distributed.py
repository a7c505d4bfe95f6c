"""Op definitions: parameter-server mode, as fluid 1.8.5's DistributeTranspiler emits them
(spmd/ps/transpiler.py). Slots and attributes are fluid's; none has a gradient.

Trainer side: `send` (gradient blocks to their pservers), `send_barrier` (sync mode: every
gradient of this step is sent), `recv` (parameter blocks back), `fetch_barrier`, `split_byref`
(a dense gradient cut into row blocks, without a copy), `split_selected_rows` (a SelectedRows
gradient's rows dealt to the blocks by height), `fake_init` (a table the pservers hold is only
declared), `distributed_lookup_table` (rows prefetched from the pservers that hold the table),
`checkpoint_notify` (tell the pservers to save their slices).
Pserver side: `listen_and_serv` (serve on `endpoint`, run `optimize_blocks` as gradients
arrive), `ref_by_trainer_id` (DC-ASGD: the backup of the trainer that sent), and the rest of
fluid's distributed-table family (`prefetch`, `split_ids`, `merge_ids`, `lookup_sparse_table`).

Control outputs (`Out` of send and the barriers) are dependency markers with no data; their
variables have type "RAW". The kernels are in spmd/ps/kernels.py (they call the pserver RPC
client, which spmd/kernels must not import).
"""
from __future__ import annotations

from .registry import define_op

# A program holding one of these runs as parameter-server mode's trainer or pserver job.
TRAINER_JOB, PSERVER_JOB = "spmd.ps.jobs:TrainerJob", "spmd.ps.jobs:PServerJob"


def _no_inference(ctx):
    """Outputs are control markers, or variables the transpiler declared with their shapes."""


define_op("send", inputs=["X*"], outputs=["Out*"], grad=None, job_kind=TRAINER_JOB,
          attrs={"trainer_id": ("int", 0), "epmap": ("strs", []), "sections": ("ints", []),
                 "send_varnames": ("strs", []), "num": ("int", 0),
                 "merge_add": ("bool", False), "use_send_handler": ("bool", True)}
          )(_no_inference)

define_op("recv", inputs=["X*"], outputs=["Out*"], grad=None, job_kind=TRAINER_JOB,
          attrs={"epmap": ("strs", []), "trainer_id": ("int", 0),
                 "with_barrier": ("bool", True), "varnames": ("strs", []),
                 "recv_varnames": ("strs", []), "do_not_run": ("int", 0)})(_no_inference)

define_op("send_barrier", inputs=["X*"], outputs=["Out*"], grad=None, job_kind=TRAINER_JOB,
          attrs={"trainer_id": ("int", 0), "endpoints": ("strs", []),
                 "half_async": ("bool", False)})(_no_inference)

define_op("fetch_barrier", inputs=["X*"], outputs=["Out*"], grad=None, job_kind=TRAINER_JOB,
          attrs={"trainer_id": ("int", 0), "endpoints": ("strs", [])})(_no_inference)

define_op("checkpoint_notify", grad=None, side_effects=True, job_kind=TRAINER_JOB,
          attrs={"epmap": ("strs", []), "dir": ("str", ""), "lookup_table": ("str", ""),
                 "trainer_id": ("int", 0)})(_no_inference)

define_op("prefetch", inputs=["X*"], outputs=["Out*"], grad=None,
          attrs={"trainer_id": ("int", 0), "epmap": ("strs", [])})(_no_inference)

define_op("split_ids", inputs=["Ids*"], outputs=["Out*"], grad=None)(_no_inference)

define_op("merge_ids", inputs=["Ids*", "Rows*", "X*"], outputs=["Out*"],
          grad=None)(_no_inference)


def _row_blocks(ctx, sections_attr: str):
    """Out[i] is rows sections[i] of X (the blocks in order, all of X's other dims)."""
    x, sections = ctx.input("X"), ctx.attr(sections_attr)
    n = ctx.num_outputs("Out")
    ctx.check(len(sections) == n, f"{sections_attr} {sections} needs one entry per output "
                                  f"({n})")
    ctx.check(len(x.shape) >= 1, "X needs at least one dim (the rows cut into blocks)")
    ctx.check(x.shape[0] < 0 or sum(sections) == x.shape[0],
              f"{sections_attr} {sections} add up to {sum(sections)} rows, X has "
              f"{x.shape[0]}")
    for i, rows in enumerate(sections):
        ctx.set_output("Out", [rows] + list(x.shape[1:]), x.dtype, index=i)


@define_op("split_byref", inputs=["X"], outputs=["Out*"], grad=None,
           attrs={"sections": ("ints", []), "num": ("int", 0)})
def _split_byref(ctx):
    _row_blocks(ctx, "sections")


@define_op("split_selected_rows", inputs=["X"], outputs=["Out*"], grad=None,
           attrs={"height_sections": ("ints", [])})
def _split_selected_rows(ctx):
    _row_blocks(ctx, "height_sections")


# The table exists (its variable is declared with its shape and dtype) but is not filled: the
# pservers hold its values.
define_op("fake_init", outputs=["Out"], grad=None, attrs={"shape": ("ints", [])})(_no_inference)

# each output keeps its ids' LoD (a CTR model pools the prefetched rows per sequence)
define_op("distributed_lookup_table", inputs=["Ids*", "W"], outputs=["Outputs*"],
          grad=None, job_kind=TRAINER_JOB,
          lod_inputs=("Ids",), lod_outputs=("Outputs",),
          attrs={"table_names": ("strs", []), "height_sections": ("ints", []),
                 "endpoints": ("strs", []), "trainer_id": ("int", 0),
                 "lookup_table_version": ("str", "lookup_table"),
                 "padding_idx": ("int", -1), "dtype": ("int", 5)})(_no_inference)


@define_op("lookup_sparse_table", inputs=["W", "Ids"], outputs=["Out"], grad=None,
           attrs={"padding_idx": ("int", -1), "auto_grown_table": ("bool", True),
                  "is_test": ("bool", False), "is_sparse": ("bool", True),
                  "is_distributed": ("bool", True)})
def _lookup_sparse_table(ctx):
    w, ids = ctx.input("W"), ctx.input("Ids")
    ctx.set_output("Out", [ids.shape[0], w.shape[-1]], w.dtype)


@define_op("ref_by_trainer_id", inputs=["X*", "TrainerId"], outputs=["Out"], grad=None,
           side_effects=True)
def _ref_by_trainer_id(ctx):
    x = ctx.inputs("X")[0]
    ctx.set_output("Out", x.shape, x.dtype)


# The pserver's loop. `optimize_blocks` are block indices (spmd names a sub-block by its index,
# as `sub_block` of control flow does); `grad_to_block_id` maps "grad_name:block_idx",
# `sparse_grad_to_param` "grad_name:param_name", `prefetch_var_name_to_block_id`
# "ids_name:block_idx". `distributed_mode`: 0 sync, 1 async, 2 half async (fluid's
# DistributedMode); `Fanin` the number of trainers.
define_op("listen_and_serv", inputs=["X*"], grad=None, job_kind=PSERVER_JOB,
          attrs={"endpoint": ("str", "127.0.0.1:6164"), "pserver_id": ("int", 0),
                 "grad_to_block_id": ("strs", []), "distributed_mode": ("int", 0),
                 "dc_asgd": ("bool", False), "optimize_blocks": ("blocks", []),
                 "prefetch_var_name_to_block_id": ("strs", []),
                 "sparse_grad_to_param": ("strs", []), "Fanin": ("int", 1),
                 "checkpint_block_id": ("int", -1), "lr_decay_block_id": ("int", -1),
                 "rpc_get_thread_num": ("int", 12), "rpc_send_thread_num": ("int", 12),
                 "rpc_prefetch_thread_num": ("int", 12)})(_no_inference)
