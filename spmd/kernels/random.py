"""Kernels: random tensors, drawn on the host from the run's numpy Generator (or the op's own,
seeded, when its `seed` attribute is nonzero) and moved to the device."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel
from .tensor import ints_of, shape_arg


def _draw_rng(attrs, ctx, key="seed"):
    """The op's own generator when it has a seed (same seed, same values on every run),
    else the run's (ctx.rng)."""
    seed = attrs[key]
    return np.random.default_rng(seed) if seed else ctx.rng


def _batch_like_shape(ins, attrs):
    shape = list(attrs["shape"])
    shape[attrs["output_dim_idx"]] = ins["Input"].shape[attrs["input_dim_idx"]]
    return shape


# elements drawn (in float64, as numpy's Generator draws them) per chunk of a large tensor:
# 512 KiB of scratch, which stays in cache between the draw and the cast
FILL_CHUNK = 1 << 16
# a tensor of fewer elements is filled on the calling thread alone (threads cost more there)
PARALLEL_MIN = 1 << 21


def fill_threads() -> int:
    """Threads a large random fill may use, at most 8: SPMD_FILL_THREADS where set (the knob
    that names this count alone); else OMP_NUM_THREADS where the user or a launcher set it
    (spmd sets it to a rank's share of the node's cores under a launcher that starts several
    ranks on a node, spmd/comm/topology.py); else the cores this process may run on. fluid's
    default of 1, which the first Executor writes into an unset OMP_NUM_THREADS for the math
    library's products (spmd/executor/math_threads.py), is not a fill's count, or every default
    run would initialise its tables on one thread. The environment cannot tell that default
    from the same 1 set again later in the process: set SPMD_FILL_THREADS to be sure."""
    import os

    from ..core.omp_default import omp_threads_defaulted

    threads = _count(os.environ.get("SPMD_FILL_THREADS"))
    if threads <= 0 and not omp_threads_defaulted():
        threads = _count(os.environ.get("OMP_NUM_THREADS"))
    if threads <= 0:
        try:
            threads = len(os.sched_getaffinity(0))
        except AttributeError:
            threads = os.cpu_count() or 1
    return max(1, min(threads, 8))


def _count(value: str | None) -> int:
    """A thread count read from the environment; 0 when unset or not a number."""
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def _filled(draw, scale, shift, shape, dtype):
    """`shift + scale * draw(...)` in float64, cast to `dtype`: the values numpy's
    Generator.uniform(low, high) (draw=random, scale=high-low, shift=low) and
    Generator.normal(mean, std) (draw=standard_normal) give, bit for bit, in the same order of
    operations. A large tensor is drawn a chunk at a time into a float64 scratch buffer and
    cast into the output, so initialising a table makes no float64 temporary of its size (a
    10M x 64 float32 table would need 5 GB more); consecutive chunks continue the one stream
    (tests/unit/test_sparse_large.py), and the generator is left where one whole draw leaves
    it. With more than one fill thread (fill_threads), a uniform draw from a PCG64 generator
    is cut into one range per thread, each drawn from a copy of the generator advanced to the
    range's start (Generator.random takes exactly one 64-bit step a value); any other draw
    runs on one thread while a second scales and casts the chunk drawn before."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if n <= FILL_CHUNK:
        values = draw(size=n, dtype=np.float64)
        values *= scale
        values += shift
        return values.astype(dtype, copy=False).reshape(shape)
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    threads = fill_threads() if n >= PARALLEL_MIN else 1
    if threads > 1 and _advanceable(draw):
        _fill_ranges(draw, scale, shift, flat, threads)
    elif threads > 1:
        _fill_pipelined(draw, scale, shift, flat)
    else:
        _fill_range(draw, scale, shift, flat)
    return out


def _fill_range(draw, scale, shift, flat):
    """flat[:] = shift + scale * draw, a chunk at a time, on this thread."""
    n = flat.size
    buf = np.empty(min(FILL_CHUNK, n), dtype=np.float64)
    multiply, add = np.multiply, np.add  # looked up once: about 1000 chunks per 64M elements
    for a in range(0, n, FILL_CHUNK):
        b = min(a + FILL_CHUNK, n)
        part = buf[:b - a]
        draw(out=part, dtype=np.float64)
        multiply(part, scale, out=part)
        # the shift's float64 sum is rounded straight into the output (the ufunc's loop adds in
        # float64 and casts on the way out): the values of add-then-cast, one pass fewer
        add(part, shift, out=flat[a:b], casting="unsafe")


def _advanceable(draw) -> bool:
    """`draw` is Generator.random on a PCG64 bit generator: value i of the stream is the
    generator's step i, so a copy advanced by i draws from value i on."""
    rng = getattr(draw, "__self__", None)
    return (isinstance(rng, np.random.Generator) and draw.__name__ == "random"
            and type(rng.bit_generator) is np.random.PCG64)


def _fill_ranges(draw, scale, shift, flat, threads):
    """One contiguous range of `flat` per thread, each from a PCG64 copy advanced to its
    start; then the caller's generator is advanced past all of them (its buffered 32-bit half,
    which a float64 draw never reads, kept)."""
    import threading

    bit_generator = draw.__self__.bit_generator
    state = bit_generator.state
    n = flat.size
    per = -(-n // threads // FILL_CHUNK) * FILL_CHUNK  # whole chunks a range
    starts = list(range(0, n, per))

    def copy_at(step):
        copy = np.random.PCG64()
        copy.state = state
        copy.advance(step)
        return copy

    failed: list[BaseException] = []

    def fill(start):
        try:
            _fill_range(np.random.Generator(copy_at(start)).random, scale, shift,
                        flat[start:start + per])
        except BaseException as e:  # raised on the caller's thread below
            failed.append(e)

    workers = [threading.Thread(target=fill, args=(start,), name="spmd-fill", daemon=True)
               for start in starts[1:]]
    for worker in workers:
        worker.start()
    fill(starts[0])  # the first range on this thread
    for worker in workers:
        worker.join()
    if failed:
        raise failed[0]
    after = copy_at(n).state
    after["has_uint32"], after["uinteger"] = state["has_uint32"], state["uinteger"]
    bit_generator.state = after


def _fill_pipelined(draw, scale, shift, flat):
    """_fill_range with the draw on a second thread, one chunk ahead of the scale and cast
    here (numpy releases the GIL in both): the stream is drawn in order, as on one thread."""
    import threading

    n = flat.size
    bufs = [np.empty(FILL_CHUNK, dtype=np.float64) for _ in range(3)]
    drawn = [threading.Semaphore(0) for _ in bufs]
    free = [threading.Semaphore(1) for _ in bufs]
    chunks = range(0, n, FILL_CHUNK)
    failed: list[BaseException] = []

    stop: list[bool] = []

    def drawer():
        try:
            for i, a in enumerate(chunks):
                free[i % 3].acquire()
                if stop:
                    return
                draw(out=bufs[i % 3][:min(FILL_CHUNK, n - a)], dtype=np.float64)
                drawn[i % 3].release()
        except BaseException as e:  # handed to the caller's thread below
            failed.append(e)
            for sem in drawn:
                sem.release()

    thread = threading.Thread(target=drawer, name="spmd-fill-draw", daemon=True)
    thread.start()
    multiply, add = np.multiply, np.add
    try:
        for i, a in enumerate(chunks):
            drawn[i % 3].acquire()
            if failed:
                break
            b = min(a + FILL_CHUNK, n)
            part = bufs[i % 3][:b - a]
            multiply(part, scale, out=part)
            add(part, shift, out=flat[a:b], casting="unsafe")
            free[i % 3].release()
    except BaseException:
        stop.append(True)  # the drawer, waiting for a free buffer, ends
        for sem in free:
            sem.release()
        raise
    finally:
        thread.join()
    if failed:
        raise failed[0]


def _uniform(attrs, ctx, shape):
    low, high = attrs["min"], attrs["max"]
    values = _filled(_draw_rng(attrs, ctx).random, float(high) - float(low), low, shape,
                     attrs["dtype"])
    num, step = attrs["diag_num"], attrs["diag_step"]
    if num > 0:
        flat = values.reshape(-1)
        flat[np.arange(num) * (step + 1)] = attrs["diag_val"]
    return values


@kernel("uniform_random", context=True)
def uniform_random(xp, ins, attrs, want, ctx):
    return {"Out": xp.asarray(_uniform(attrs, ctx, shape_arg(ins, attrs)))}


@kernel("uniform_random_batch_size_like", context=True)
def uniform_random_batch_size_like(xp, ins, attrs, want, ctx):
    return {"Out": xp.asarray(_uniform(attrs, ctx, _batch_like_shape(ins, attrs)))}


def _gaussian(attrs, ctx, shape):
    return _filled(_draw_rng(attrs, ctx).standard_normal, attrs["std"], attrs["mean"], shape,
                   attrs["dtype"])


@kernel("gaussian_random", context=True)
def gaussian_random(xp, ins, attrs, want, ctx):
    return {"Out": xp.asarray(_gaussian(attrs, ctx, shape_arg(ins, attrs)))}


@kernel("gaussian_random_batch_size_like", context=True)
def gaussian_random_batch_size_like(xp, ins, attrs, want, ctx):
    return {"Out": xp.asarray(_gaussian(attrs, ctx, _batch_like_shape(ins, attrs)))}


@kernel("truncated_gaussian_random", context=True)
def truncated_gaussian_random(xp, ins, attrs, want, ctx):
    # a standard normal redrawn wherever it falls outside +-2 (about 4.6% per round), then
    # scaled: the same distribution as fluid's inverse-CDF sampling of the truncated normal
    values = _truncated(_draw_rng(attrs, ctx), attrs["mean"], attrs["std"], attrs["shape"],
                        attrs["dtype"])
    return {"Out": xp.asarray(values)}


def _truncated(rng, mean, std, shape, dtype):
    """mean + std * z of a standard normal z drawn whole, then redrawn, in index order, where
    it lies outside +-2, round after round, cast to `dtype`. A large tensor gets the same
    values a chunk at a time: the first draws chunk by chunk into the output, keeping only
    the indices to redraw (about 4.6%), so no float64 array of its size is made."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if n <= FILL_CHUNK:
        z = rng.standard_normal(size=shape)
        bad = np.abs(z) > 2.0
        while bad.any():
            z[bad] = rng.standard_normal(size=int(bad.sum()))
            bad = np.abs(z) > 2.0
        return (mean + std * z).astype(dtype)
    out = np.empty(n, dtype=dtype)
    buf = np.empty(FILL_CHUNK, dtype=np.float64)
    index = np.int32 if n < 2 ** 31 else np.int64
    todo = []
    for a in range(0, n, FILL_CHUNK):
        z = buf[:min(FILL_CHUNK, n - a)]
        rng.standard_normal(out=z)
        todo.append((np.flatnonzero(np.abs(z) > 2.0) + a).astype(index))
        z *= std
        z += mean
        np.copyto(out[a:a + z.size], z, casting="unsafe")
    todo = np.concatenate(todo)
    while todo.size:  # one round: every index still to redraw, in order, one draw each
        left = []
        for a in range(0, todo.size, FILL_CHUNK):
            where = todo[a:a + FILL_CHUNK]
            z = buf[:where.size]
            rng.standard_normal(out=z)
            outside = np.abs(z) > 2.0
            left.append(where[outside])
            inside = ~outside
            out[where[inside]] = std * z[inside] + mean
        todo = np.concatenate(left)
    return out.reshape(shape)


@kernel("randint", context=True)
def randint(xp, ins, attrs, want, ctx):
    values = _draw_rng(attrs, ctx).integers(attrs["low"], attrs["high"], size=shape_arg(ins, attrs))
    return {"Out": xp.asarray(values.astype(attrs["dtype"]))}


@kernel("randperm", context=True)
def randperm(xp, ins, attrs, want, ctx):
    values = _draw_rng(attrs, ctx).permutation(attrs["n"])
    return {"Out": xp.asarray(values.astype(attrs["dtype"]))}


@kernel("random_crop", context=True)
def random_crop(xp, ins, attrs, want, ctx):
    """Each instance (the leading dims) gets its own random window of `shape` in the trailing
    dims. With a Seed tensor the windows come from that seed, and SeedOut carries the next one,
    so a persistable seed variable makes the sequence of crops reproducible."""
    x, shape = ins["X"], list(attrs["shape"])
    res = {}
    if ins.get("Seed") is not None:
        rng = np.random.default_rng(ints_of(ins["Seed"])[0] & 0xFFFFFFFFFFFFFFFF)
        res["SeedOut"] = xp.asarray(
            np.asarray([rng.integers(1, 2 ** 31)], dtype=ins["Seed"].dtype))
    else:
        rng = _draw_rng(attrs, ctx, "startup_seed")
    k = x.ndim - len(shape)
    if k < 0 or any(d < s for d, s in zip(x.shape[k:], shape)):
        raise InvalidArgumentError(
            f"random_crop: shape {shape} does not fit in the trailing dims of X {list(x.shape)}")
    lead = x.shape[:k]
    flat = x.reshape((-1,) + x.shape[k:])
    out = xp.empty((flat.shape[0],) + tuple(shape), dtype=x.dtype)
    for i in range(flat.shape[0]):
        starts = [int(rng.integers(0, d - s + 1)) for d, s in zip(x.shape[k:], shape)]
        out[i] = flat[(i,) + tuple(slice(b, b + s) for b, s in zip(starts, shape))]
    res["Out"] = out.reshape(tuple(lead) + tuple(shape))
    return res


@kernel("sampling_id", context=True)
def sampling_id(xp, ins, attrs, want, ctx):
    """One id per row of X: the first column where the running sum of the row exceeds a
    uniform draw in [min, max) (X's rows are probabilities)."""
    x = ins["X"]
    host = x.get() if hasattr(x, "get") else np.asarray(x)
    r = _draw_rng(attrs, ctx).uniform(attrs["min"], attrs["max"], size=(host.shape[0], 1))
    above = np.cumsum(host, axis=1) > r
    # a row whose sum never exceeds the draw takes its last column, as fluid does
    ids = np.where(above.any(axis=1), above.argmax(axis=1), host.shape[1] - 1)
    return {"Out": xp.asarray(ids.astype(np.int64))}
