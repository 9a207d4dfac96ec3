"""Rectangle spatial join: ``rect_join``.

Two sets of axis-aligned boxes, (n, 2d) arrays of rows [lo_1..lo_d,
hi_1..hi_d] (d = 1..4), closed intervals; the pairs (query i, data j) that
intersect (a.lo_k <= b.hi_k and b.lo_k <= a.hi_k for every k: touching boxes
intersect), counted, counted per query, or listed. Brute force as the
spatial-join thesis (a work-item per query box, data boxes tiled through
local memory, counts by one global atomic per hit or reduced in the
work-group), a uniform grid with the reference-cell rule, or sort and
sweep along axis 0 (see ``clkernels/cl/rectjoin.cl.mako``,
``rectjoin_sweep.cl.mako`` and :mod:`.plan` for the method rule).
"""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core import inputs
from ..core.errors import DeviceCapabilityError
from ..core.launch import Events
from ..core.transfer import download, fill_words, upload, zeros
from ..outputs.pairs import Pairs, collect, ordered, sampled_writers
from . import execute
from .plan import GRID_BUILDS, MAX_BOXES, METHODS, OUTPUTS, SAMPLE, VARIANTS, RectPlan

#: per-query counts start as this (a count no writer can reach: nb < 2^31)
POISON = 0xFFFFFFFF
#: writers sampled for the first pool's size (at least this many, or 1/256 of them)
SAMPLE_WRITERS = 1024


def _boxes(x, name):
    """(array: numpy or device (n, 2d), n, d) of a checked box set; numpy sets
    are checked for finiteness and lo <= hi here, device sets by the layout
    kernel."""
    if x is None:
        raise TypeError(f"{name} is required")
    if inputs.is_device_array(x):
        a = x
        if a.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must be float32 or float64, got {a.dtype}")
        if not a.flags.c_contiguous or a.offset:
            raise ValueError(f"{name} must be a C-contiguous (n, 2d) device array without offset")
    else:
        try:
            a = np.asarray(x)
        except Exception:
            raise TypeError(f"{name} must be an (n, 2d) array of boxes, got {type(x).__name__}") from None
        if a.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must be float32 or float64, got {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{name} must be an (n, 2d) array of boxes [lo_1..lo_d, hi_1..hi_d], got shape {a.shape}")
    n, c = int(a.shape[0]), int(a.shape[1])
    if c == 0 or c % 2:
        raise ValueError(f"{name} must have an even number 2d of columns (lo_1..lo_d, hi_1..hi_d), got {c}")
    d = c // 2
    if d > 4:
        raise ValueError(f"{name}: at most 4 dimensions (8 columns), got {d}")
    if n > MAX_BOXES:
        raise ValueError(f"{name}: at most {MAX_BOXES} boxes, got {n}")
    if not inputs.is_device_array(a):
        a = np.ascontiguousarray(a, a.dtype.newbyteorder("="))
        # NaN propagates through min/max: two contiguous reductions instead of
        # an elementwise isfinite over the whole set
        if n and not (np.isfinite(a.min()) and np.isfinite(a.max())):
            raise ValueError(f"{name} has values that are not finite (NaN or inf)")
        if n and (a[:, :d] > a[:, d:]).any():
            k = int(np.argmax((a[:, :d] > a[:, d:]).any(axis=1)))
            raise ValueError(f"{name}: box {k} has lo > hi ({a[k].tolist()})")
    return a, n, d


def _check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def rect_join(queries, data, *, output="count", method="auto", variant=None, wg_size=None, device=None,
              pairs_method="pages", page=16, npages=None, max_device_bytes=None, grid_build="scatter",
              vec=None, client=None, tiles=None, collect=True):
    """The intersecting pairs of two box sets.

    ``queries`` (nq, 2d), ``data`` (nb, 2d): rows [lo_1..lo_d, hi_1..hi_d],
    d = 1..4, float32 or float64, numpy or ``pyopencl.array.Array``; closed
    intervals (touching and zero-extent boxes intersect what they touch).
    ``output``: 'count' -> the number of pairs (int); 'per_query' -> int64
    array of counts per query box; 'pairs' -> (query index, data index) int64
    arrays sorted by (i, j).

    ``method``: 'brute' (one work-item per query box over every data box),
    'grid' (a uniform grid, each pair reported once by the reference-cell
    rule), 'sweep' (data boxes sorted by lo_0, each query searching the
    window [lo_0 - W, hi_0]; boxes wider than W on axis 0 tested by every
    query) or 'auto' (brute force for small problems, else the index method
    of least estimated tests per query, brute force when neither prunes;
    see :mod:`clkernels.host.rectjoin.plan`). ``variant`` of the
    count: 'atomic' (a global atomic per hit) or 'reduce' (counts reduced in
    the work-group); ``wg_size``: work-items per group; ``vec``: brute-force
    tiles as vectors; None: the tuned choice. Pairs are collected by
    ``pairs_method`` 'pages' (the atomic page allocator, ``page`` records a
    page, ``npages`` pages or a sampled estimate) or 'scan' (count, scan,
    write); ``max_device_bytes`` bounds the output buffers. ``grid_build``:
    how the grid lists its boxes, 'scatter' (a counting sort, the default)
    or 'sort' (the shared sort of (cell, box) pairs).

    Raises ValueError / TypeError for bad inputs before anything is enqueued
    (device arrays: non-finite values and lo > hi are found by the first
    kernel, before the join), DeviceCapabilityError for float64 boxes on a
    device without fp64.

    ``client``: a ``dask.distributed.Client``: ``tiles`` tiles of the
    queries over its workers, the data on every worker (numpy or dask
    arrays; ``collect=False``: per-query counts and pairs as dask arrays
    left on the workers), see :mod:`clkernels.host.distributed.rectjoin`."""
    if client is not None:
        from .. import distributed
        return distributed.rect_join(client, queries, data, output=output, method=method, variant=variant,
                                     wg_size=wg_size, device=device, pairs_method=pairs_method, page=page,
                                     npages=npages, max_device_bytes=max_device_bytes, grid_build=grid_build,
                                     vec=vec, tiles=tiles, collect=collect)
    if tiles is not None or collect is not True:
        raise ValueError("tiles= and collect= apply with client= only")
    result, _ = rect_join_events(queries, data, output=output, method=method, variant=variant,
                                 wg_size=wg_size, device=device, pairs_method=pairs_method, page=page,
                                 npages=npages, max_device_bytes=max_device_bytes, grid_build=grid_build, vec=vec)
    return result


def rect_join_events(queries, data, *, output="count", method="auto", variant=None, wg_size=None,
                     device=None, pairs_method="pages", page=16, npages=None, max_device_bytes=None,
                     grid_build="scatter", vec=None):
    """:func:`rect_join` returning ``(result, (events, plan))``: the
    :class:`~clkernels.host.core.launch.Events` of every step by name and the
    :class:`RectPlan` (None for empty sets), for benchmarks."""
    Q, nq, dq = _boxes(queries, "queries")
    B, nb, db = _boxes(data, "data")
    if dq != db:
        raise ValueError(f"queries and data must have the same dimensions, got {dq} and {db}")
    _check_choice(output, "output", OUTPUTS)
    _check_choice(method, "method", METHODS)
    _check_choice(grid_build, "grid_build", GRID_BUILDS)
    if variant is not None:
        _check_choice(variant, "variant", VARIANTS)
    if wg_size is not None and (isinstance(wg_size, bool) or not isinstance(wg_size, (int, np.integer))
                                or wg_size < 1):
        raise ValueError(f"wg_size must be a positive integer, got {wg_size!r}")
    spec = Pairs(pairs_method, page, npages, max_device_bytes)
    try:
        spec.validate()
    except ValueError as e:
        raise ValueError(f"pairs_method/page/npages/max_device_bytes: {e}") from None
    if Q.dtype != B.dtype:
        if inputs.is_device_array(Q) or inputs.is_device_array(B):
            raise TypeError(f"queries ({Q.dtype}) and data ({B.dtype}) device arrays must have the same dtype")
        Q, B = Q.astype(np.float64), B.astype(np.float64)       # float32 -> float64 is exact
    dev = inputs.device_for(device, Q, B)
    inputs.check_context(dev, Q, B)
    if Q.dtype == np.float64 and not dev.fp64:
        raise DeviceCapabilityError(f"float64 boxes need double precision (cl_khr_fp64), which {dev.name} "
                                    "lacks; pass float32 boxes")
    events = Events()
    if nq == 0 or nb == 0:
        if output == "count":
            return 0, (events, None)
        if output == "per_query":
            return np.zeros(nq, np.int64), (events, None)
        return (np.empty(0, np.int64), np.empty(0, np.int64)), (events, None)
    d, real = dq, ("double" if Q.dtype == np.float64 else "float")
    q = dev.queue
    # the SoA columns (and the device sets' checks)
    cols = []
    for a, n, name in ((Q, nq, "queries"), (B, nb, "data")):
        if inputs.is_device_array(a):
            a.finish()
            src = a
        else:
            src = upload(dev, a, events=events)
        soa, flags = execute.layout(q, dev, real, d, src, n, events)
        cols.append(soa)
        if inputs.is_device_array(a):
            f = int(download(dev, flags, events=events)[0])
            if f & 1:
                raise ValueError(f"{name} has values that are not finite (NaN or inf)")
            if f & 2:
                raise ValueError(f"{name} has a box with lo > hi")
    dq_, db_ = cols

    def stats():
        rng = np.random.default_rng(nb)
        m = min(nb, SAMPLE)
        idx = np.sort(rng.choice(nb, m, replace=False)) if m < nb else np.arange(nb)
        # from the device's SoA columns, for numpy sets too: numpy's min(axis=0)
        # over an (n, 2d) array is a strided reduction (tens of ms at 1.9M boxes)
        import warnings

        with warnings.catch_warnings():          # pyopencl's reduction kernels' build logs
            warnings.simplefilter("ignore", cl.CompilerWarning)
            lo = [float(cla.min(db_[k * nb:(k + 1) * nb]).get()) for k in range(d)]
            hi = [float(cla.max(db_[(d + k) * nb:(d + k + 1) * nb]).get()) for k in range(d)]
            flat = (np.arange(2 * d)[None, :] * nb + idx[:, None]).astype(np.int64)
            sample = cla.take(db_, upload(dev, flat.ravel(), events=events)).get().reshape(m, 2 * d)
        sample = sample.astype(np.float64)
        with np.errstate(over="ignore"):                 # (float64 extents may overflow to inf)
            return lo, hi, sample[:, d:] - sample[:, :d], sample

    plan = RectPlan.resolve(dev, nq, nb, d, Q.dtype, output, method=method, variant=variant,
                            wg_size=wg_size, stats=stats, grid_build=grid_build, vec=vec)
    # the passes: (plan, SoA queries, their number, the query ids or None for all)
    passes = [(plan, dq_, nq, None)]
    index = None
    if plan.method == "sweep":
        index = execute.Sweep(q, dev, plan, db_, nb, events)
    elif plan.method == "grid":
        index = grid = execute.Grid(q, dev, plan, db_, nb, events)
        big = grid.big_queries(q, dev, plan, dq_, nq, events)
        if len(big):            # queries over more than qcap cells: brute force (the grid skips them)
            passes.append((plan.split_for(dev, len(big), nb),
                           execute.gather(q, dev, real, d, dq_, nq, big, events), len(big), big))
    no_list = zeros(q, 1, np.uint32, events=events)

    def writers(p, n):
        return p.brute_layout(n, nb)[2] if p.method == "brute" else n

    def launcher(p, qs, n):
        def launch(out, tail, nw, w0=0, wl=None):
            execute.join(q, dev, p, out, qs, n, db_, nb, index, nw, w0, no_list if wl is None else wl,
                         wl is not None, tail, events)
        return launch

    if output == "count":
        total = zeros(q, 1, np.uint64, events=events)
        for p, qs, n, _ in passes:
            launcher(p, qs, n)("count", [total.data], writers(p, n))
        return int(download(dev, total, events=events)[0]), (events, plan)
    if output == "per_query":
        res = None
        for p, qs, n, ids in passes:
            nw = writers(p, n)
            cnt = cla.empty(q, nw, np.uint32, allocator=dev.pool)
            # poisoned: every writer writes its count
            fill_words(q, cnt.data, nw, POISON, events=events, step="fill")
            launcher(p, qs, n)("paircount", [cnt.data], nw)
            c = download(dev, cnt, events=events).astype(np.int64)
            if p.method == "brute" and p.split > 1:         # the parts' counts of each query
                c = c.reshape(p.split, -1)[:, :n].sum(axis=0)
            if ids is None:
                res = c
            else:
                res[ids] = c
        return res, (events, plan)

    # one pass (no query over too many cells, so no ids): its records in (i, j) order on the device
    single = plan.order_on_device and len(passes) == 1
    parts = []
    for p, qs, nqs, ids in passes:
        launch, n = launcher(p, qs, nqs), writers(p, nqs)

        def estimate(launch=launch, n=n):
            m = min(n, max(SAMPLE_WRITERS, n // 256))
            ids_, wl = sampled_writers(q, n, m)
            cnt = zeros(q, n, np.uint32, events=events)
            launch("paircount", [cnt.data], m, 0, wl)
            return int(download(dev, cnt, events=events)[ids_].astype(np.int64).sum()) * n / m

        i, j = collect(q, n, spec,
                       launch_pages=lambda nw, wl, args, launch=launch: launch("pairs", args, nw, 0, wl),
                       launch_count=lambda w0, nw, wl, cnt, launch=launch: launch("paircount", [cnt.data], nw, w0,
                                                                                  wl),
                       launch_write=lambda w0, nw, offs, out, launch=launch: launch("pairwrite",
                                                                                    [offs.data, out.data], nw, w0),
                       estimate=estimate, events=events, order=nq if single else None)
        parts.append((i if ids is None else ids.astype(np.int64)[i], j))
    if single:
        return parts[0], (events, plan)
    return ordered(dev, parts, plan.order_on_device), (events, plan)
