"""Op definitions: collectives inserted by the data-parallel passes and the nccl2 transpiler.

Each moves arrays between ranks through its KernelContext's communicator; none has a
gradient. A collective with several variables is a fused bucket: the kernel packs them into
one contiguous buffer (or uses the plan's persistent bucket) and issues one call.
"""
from __future__ import annotations

import math

from .registry import define_op


def _same_as_inputs(ctx):
    ctx.set_output_like("Out", "X")


_RING = {"ring_id": ("int", 0), "use_calc_stream": ("bool", False)}

# fluid's reduction families: c_allreduce_{sum,max,min,prod} and c_reduce_{sum,max,min,prod}
for _reduction in ("sum", "max", "min", "prod"):
    define_op(f"c_allreduce_{_reduction}", inputs=["X*"], outputs=["Out*"], attrs=_RING,
              grad=None, collective=True)(_same_as_inputs)
    define_op(f"c_reduce_{_reduction}", inputs=["X*"], outputs=["Out*"], grad=None,
              collective=True, attrs={**_RING, "root_id": ("int", 0)})(_same_as_inputs)
define_op("c_broadcast", inputs=["X*"], outputs=["Out*"], grad=None, collective=True,
          attrs={**_RING, "root": ("int", 0)})(_same_as_inputs)
# Reduce mode over one fused buffer (see passes/reduce_mode.py): `owners[i]` is the rank that
# owns X[i]. The buffer holds one equal-size section per rank, each owner's pieces in order.
# c_reduce_scatter_owned: every rank gets the sum of its own pieces (the others pass through);
# c_allgather_owned: every rank gets every owner's pieces.
# Out[k] is rows [starts[k], ends[k]) of X[sources[k]] (the whole of it where starts[k] < 0):
# the pieces of chunked gradients are cut while packing, with no copy of their own. `flat`:
# elements [starts[k], ends[k]) of it flattened, the inputs laid end to end being `nranks`
# equal sections (passes/reduce_flat.py).
@define_op("c_reduce_scatter_owned", inputs=["X*"], outputs=["Out*"], grad=None,
           collective=True, attrs={**_RING, "owners": ("ints", []),
                                   "sources": ("ints", []), "starts": ("ints", []),
                                   "ends": ("ints", []), "flat": ("bool", False),
                                   "nranks": ("int", 0)})
def _c_reduce_scatter_owned(ctx):
    xs, n = ctx.inputs("X"), ctx.num_outputs("Out")
    sources, starts, ends = ctx.attr("sources"), ctx.attr("starts"), ctx.attr("ends")
    ctx.check(len(ctx.attr("owners")) == n and len(sources) == n and len(starts) == n
              and len(ends) == n, f"owners, sources, starts and ends need one entry per "
                                  f"output ({n})")
    flat = ctx.attr("flat")
    for k, (src, a, b) in enumerate(zip(sources, starts, ends)):
        ctx.check(0 <= src < len(xs), f"sources[{k}]={src} names no input")
        x = xs[src]
        shape = list(x.shape)
        if a >= 0 and flat:
            size = math.prod(shape)
            ctx.check(0 <= a < b <= size, f"elements [{a}, {b}) of a {size}-element input")
            shape = [b - a]
        elif a >= 0:
            ctx.check(0 <= a < b <= shape[0], f"rows [{a}, {b}) of a {shape[0]}-row input")
            shape[0] = b - a
        ctx.set_output("Out", shape, x.dtype, index=k)


define_op("c_allgather_owned", inputs=["X*"], outputs=["Out*"], grad=None, collective=True,
          attrs={"ring_id": ("int", 0), "owners": ("ints", [])})(_same_as_inputs)
# Every owner's pieces (flat, in the order of passes/reduce_flat.py's sections) gathered and
# returned as whole arrays: Out[j] is the next counts[j] pieces laid end to end, shaped by
# dims / ndims. The outputs are declared already (the parameters): nothing to infer.
@define_op("c_allgather_flat", inputs=["X*"], outputs=["Out*"], grad=None, collective=True,
           attrs={"ring_id": ("int", 0), "owners": ("ints", []), "counts": ("ints", []),
                  "dims": ("ints", []), "ndims": ("ints", [])})
def _c_allgather_flat(ctx):
    n, counts = ctx.num_outputs("Out"), ctx.attr("counts")
    ctx.check(len(counts) == n == len(ctx.attr("ndims")) and sum(counts) ==
              len(ctx.inputs("X")) == len(ctx.attr("owners")),
              f"counts and ndims need one entry per output ({n}), owners one per input, and "
              f"the counts must add up to the inputs")


# Waits for every collective this rank has issued so far: placed before the first op that
# reads a reduced gradient, so communication overlaps the rest of the backward pass.
define_op("c_sync_comm_stream", inputs=["X*"], outputs=["Out*"], attrs={"ring_id": ("int", 0)},
          grad=None, collective=True, passes_inputs_through=True)(_same_as_inputs)


@define_op("c_comm_init", grad=None, collective=True,
           attrs={"ring_id": ("int", 0), "nranks": ("int", 1), "rank": ("int", 0),
                  "endpoints": ("strs", []), "current_endpoint": ("str", "")})
def _c_comm_init(ctx):
    """nccl2 mode's communicator init, run by the startup program: checks the endpoints against
    the MPI world, then makes the communicator (NCCL: the unique id made on rank 0 and broadcast
    over MPI; CPU: MPI)."""
    ctx.check(ctx.attr("nranks") >= 1, f"nranks must be >= 1, got {ctx.attr('nranks')}")
    ctx.check(0 <= ctx.attr("rank") < ctx.attr("nranks"),
              f"rank {ctx.attr('rank')} is not in [0, nranks={ctx.attr('nranks')})")


# fluid.layers.collective's gather/scatter helpers: along dim 0, over the `nranks` ranks of
# the job (spmd's ring 0); nranks must equal the job's size when the op runs.
@define_op("c_allgather", inputs=["X"], outputs=["Out"], grad=None, collective=True,
           attrs={**_RING, "nranks": ("int", 1)})
def _c_allgather(ctx):
    x, n = ctx.input("X"), ctx.attr("nranks")
    ctx.check(n >= 1, f"nranks must be >= 1, got {n}")
    ctx.check(len(x.shape) >= 1, "X must have at least one dim (the one gathered)")
    rows = x.shape[0] * n if x.shape[0] >= 0 else -1
    ctx.set_output("Out", (rows,) + tuple(x.shape[1:]), x.dtype)


@define_op("c_reducescatter", inputs=["X"], outputs=["Out"], grad=None, collective=True,
           attrs={**_RING, "nranks": ("int", 1)})
def _c_reducescatter(ctx):
    x, n = ctx.input("X"), ctx.attr("nranks")
    ctx.check(n >= 1, f"nranks must be >= 1, got {n}")
    ctx.check(len(x.shape) >= 1, "X must have at least one dim (the one scattered)")
    ctx.check(x.shape[0] < 0 or x.shape[0] % n == 0,
              f"X's dim 0 ({x.shape[0]}) must be divisible by nranks={n}")
    rows = x.shape[0] // n if x.shape[0] >= 0 else -1
    ctx.set_output("Out", (rows,) + tuple(x.shape[1:]), x.dtype)


# Compute is synchronous on spmd's places: nothing to wait for (fluid waits for the CUDA
# compute stream here).
define_op("c_sync_calc_stream", inputs=["X*"], outputs=["Out*"], attrs={"ring_id": ("int", 0)},
          grad=None, side_effects=True, passes_inputs_through=True)(_same_as_inputs)


# Elements [start, end) of X flattened, as a view (no copy): Reduce mode's flat piece of a
# parameter (passes/reduce_flat.py); only the passes make it.
@define_op("flat_slice", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"start": ("int", 0), "end": ("int", 0)})
def _flat_slice(ctx):
    x, a, b = ctx.input("X"), ctx.attr("start"), ctx.attr("end")
    size = math.prod(x.shape)
    ctx.check(0 <= a < b <= size, f"elements [{a}, {b}) of a {size}-element input")
    ctx.set_output("Out", [b - a], x.dtype)
