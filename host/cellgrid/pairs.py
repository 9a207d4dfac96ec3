"""All pairs within r over the cell grid: ``pairs_within``.

The grid's 'row' kernel (a work-item per point: one writer) lists every pair
with d <= r as input indices, decided exactly at r as the two-body counts
are (pairs within the rounding band of r in double from the original
coordinates), through the ``Pairs`` output (``host/outputs/pairs.py``): the
atomic page allocator by default, or count, scan, write.

Self pairs may run another kernel instead (``join=``, a
:class:`~.plan.JoinPlan`: ``selfjoin.cl.mako``'s GPUCALCGLOBAL, UNICOMP or
LID-UNICOMP with k work-items per point, each its own writer, the points in
cell, SORTBYWL or WORKQUEUE order); they share the grid, the thresholds and
the exact decisions of the 'row' kernel, so every choice gives the same pairs.
"""

import numpy as np
import pyopencl.array as cla

from ..core import inputs, tuning
from ..core.launch import Events
from ..core.progress import check as check_progress
from ..core.transfer import download, kept, upload, zeros
from ..outputs.exact import count_band
from ..outputs.pairs import Pairs, collect, device_ids, ordered, sampled_writers
from ..primitives.pages import stage_fit
from . import execute
from .api import _grids
from .plan import MAX_POINTS, JoinPlan, PairPlan, join_table

#: writers sampled for the first pool's size (at least this many, or 1%)
SAMPLE_WRITERS = 4096
#: staging of the grid's row kernel ('auto'): its writers' groups share STAGE_GROUPED[0]
#: records a writer where the sample finds at most STAGE_GROUPED_MAX records a writer
#: (or where no sample runs), else STAGE_GROUPED[1] (pages.cl.mako's grouped staging:
#: nothing spills, whatever the density). H200, 2^20 uniform 3-D points, the whole call's
#: device time at n / 10n / 100n pairs: 0.747 / 0.987 / 3.46 ms (stage 4), 0.783 / 1.024 /
#: 3.26 ms (8); the writers' own stages (16, below) 0.93 / 1.29 / 6.42 ms; PERFORMANCE.md
STAGE_GROUPED, STAGE_GROUPED_MAX = (4, 8), 32
#: staging of the self-join kernels ('auto'; each writer its own stage, pages.cl.mako):
#: STAGE_AUTO records a writer where the sample finds at most STAGE_AUTO_MAX records a
#: writer or at most STAGE_ROW_MAX a stencil row (3^(d-1) rows: the stage is committed
#: between groups of k rows once half full, so it rarely spills), else none. 2M 6-D
#: points at ~100 neighbours (~0.2 records a row, ~1,400 candidates a point: the staged
#: loop tests candidates with no atomic and no exit) 51 against 130 ms; the same
#: stages in the row kernel ran 6.6 against 5.2 ms at 100n pairs (spills); PERFORMANCE.md
STAGE_AUTO, STAGE_AUTO_MAX, STAGE_ROW_MAX = 16, 12, 4


def _default(device, problem):
    # CPU devices: the paper's writers (staging cost PoCL and Intel's runtime 1.3-2x there:
    # the chunks' collective steps are work-group barriers or serial loops)
    return {"method": "pages", "page": 16, "stage": "auto" if device.is_gpu else 0}


def _stage(v):
    """A tuned or given stage: 'auto' (None: decided from the sample) or an int."""
    return None if v is None or v == "auto" else int(v)


def _restrict(params, device):
    Pairs(params["method"], int(params["page"]), stage=_stage(params.get("stage", 0))).validate()
    return params["method"] == "pages" or not params.get("stage") or params["stage"] == "auto"


#: the collection method, page size and staging, per device and size (``autotune --ops cellgrid.pairs``)
TUNABLE = tuning.register(tuning.Tunable(
    op="cellgrid.pairs", templates=["cellgrid.cl.mako", "pages.cl.mako", "outputs.cl.mako"],
    space={"method": ["pages", "scan"], "page": [4, 8, 16, 32, 64, 128], "stage": ["auto", 0, 4, 8, 16]},
    default=_default, restrict=_restrict))


def pairs_within(x, r, *, y=None, box=None, return_distances=False, sort=False, device=None, exact=True,
                 method=None, page=None, npages=None, max_device_bytes=None, stage=None, progress=None,
                 client=None, slabs=None, collect=True):
    """All pairs of points at distance d <= r: ``(i, j)`` int64 arrays (and
    ``d``, float64, with ``return_distances``).

    ``x``, ``y``: (n, d) float32/float64 arrays, numpy or
    ``pyopencl.array.Array`` (d = 1..8). Self pairs (no ``y``): i < j, each
    pair once; with ``y``: every (i in x, j in y). ``box``: orthorhombic
    periodic side lengths (r at most half the shortest side; the minimum
    image). The rule is scipy's ``cKDTree.query_pairs`` / ``query_ball_tree``
    one, d <= r, and with ``exact`` (the default) the pairs equal a float64
    evaluation of the distances from the given coordinates. ``sort``: pairs
    in (i, j) order (else in no particular order). ``d`` is that float64
    distance, computed on the host from the indices.

    How the pairs are collected: ``method`` 'pages' (the atomic page
    allocator: one pass, pools of ``page``-record pages, ``npages`` of them
    or as many as a sampled estimate asks for; when the pool runs out the
    filled pages go to the host and the unfinished points resume: nothing is
    lost, whatever the pool) or 'scan' (count, scan, write in batches);
    None: the tuned choice for the device (``autotune``; default 'pages',
    16-record pages, 'auto' staging on GPUs, none on CPUs); ``stage`` (0, 2, 4, 8, 16 or 'auto'): the records a
    point may keep in local memory, in a buffer its sub-group of 32 points
    (its work-group's groups of up to 32 on other devices) shares and
    places in the pool's next free records with one atomic (the pool then
    fills densely: ``npages * page`` records; 0: each point takes its own
    pages, as the paper's; 'auto': 4, 8 where the sample finds more than 32
    pairs a point (the self-join kernels of ``join=``:
    16 where the sample finds at most 12 pairs a point or where ``npages``
    is given, else 0); None: tuned, by default 'auto');
    ``max_device_bytes`` bounds the output buffers on the device (the pairs
    themselves go to host memory round by round). ``progress``: a callable
    ``progress(pairs_so_far)`` is called after each round; True shows a bar
    (tqdm, else lines on stderr), None or False nothing.

    ``client``: a ``dask.distributed.Client``: the pairs in ``slabs`` slabs
    along axis 0 over its workers (numpy or dask arrays; with ``box`` the
    slabs are arcs of the periodic axis 0; ``collect=False``: dask arrays
    left on the workers), see
    :mod:`clkernels.host.distributed.slabs`."""
    if client is not None:
        from .. import distributed
        return distributed.pairs_within(client, x, r, y=y, box=box, return_distances=return_distances, sort=sort,
                                        device=device, exact=exact, method=method, page=page, npages=npages,
                                        max_device_bytes=max_device_bytes, stage=stage, progress=progress,
                                        slabs=slabs, collect=collect)
    if slabs is not None or collect is not True:
        raise ValueError("slabs= and collect= apply with client= only")
    X = inputs.points(x, "x", max_n=MAX_POINTS)
    Y = None if y is None else inputs.points(y, "y", dims=X.d, max_n=MAX_POINTS)
    dev = inputs.device_for(device, X.array, None if Y is None else Y.array)
    # sort: on GPUs the records are put in (i, j) order on the device before they come down
    (i, j), _ = within(dev.queue, X.array, None if Y is None else Y.array, r=r, box=box, exact=exact,
                       method=method, page=page, npages=npages, max_device_bytes=max_device_bytes,
                       stage=stage, progress=progress, order=bool(sort) and dev.is_gpu)
    if sort and not dev.is_gpu:
        i, j = ordered(dev, [(i, j)], False)
    if not return_distances:
        return i, j
    b = inputs.box(box, X.d)
    xh = X.array.get() if X.on_device else X.array
    yh = xh if Y is None else (Y.array.get() if Y.on_device else Y.array)
    return i, j, pair_distances(xh, yh, i, j, b)


def within(queue, x, y=None, *, r, box=None, exact=True, method=None, page=None, npages=None,
           max_device_bytes=None, stage=None, progress=None, events=None, join=None, ids=None, order=False):
    """:func:`pairs_within` as an op on ``queue``'s device (device arrays stay
    there; numpy inputs are uploaded): returns ((i, j) int64 numpy, Events by
    step: upload, bounds, keys, sort, compact, gather, order (the self-join kernels' row
    tables and SORTBYWL order; with ``order``, the pairs' sort), pairs
    (the pair kernels), read, drain (the pages' dense copy), download).
    ``join``: a :class:`~.plan.JoinPlan` for self pairs (None: the default,
    the grid's 'row' kernel). ``ids``: int64 arrays (numpy or device), the
    ids of x's points (and of y's: a pair of arrays): each pair comes out as
    (min, max) of its two points' ids, mapped on the device (the points of
    a slab of a distributed join, under their global ids). ``order``: the
    pairs in (i, j) order, sorted on the device before they come down (not
    with ``ids``)."""
    if order and ids is not None:
        raise ValueError("order= sorts the pairs by their indices: not with ids=")
    dev, X, r, b = _inputs(queue, x, r, box, exact)
    check_progress(progress)
    join = _join(dev, X, b, join, y is None)
    Y = None if y is None else inputs.points(y, "y", dims=X.d, max_n=MAX_POINTS)
    if Y is not None:
        if Y.dtype != X.dtype:
            raise TypeError(f"x and y must have one dtype, got {X.dtype} and {Y.dtype}")
        inputs.check_context(dev, Y.array)
    if method is None or page is None or stage is None:
        tuned, _ = TUNABLE.resolve(dev, {"size": max(X.n, 1), "dtype": X.dtype.name, "dims": X.d})
        method = tuned["method"] if method is None else method
        page = int(tuned["page"]) if page is None else page
        if stage is None:
            stage = tuned.get("stage", 0) if method == "pages" else 0
    spec = Pairs(method, page, npages, max_device_bytes, _stage(stage))
    spec.validate()
    events = Events() if events is None else events
    return _within(dev, X, Y, r, b, exact, spec, events, progress, join, ids, order), events


def _join(dev, X, box, join, self_pairs=True):
    """The self-join plan checked (None for the default 'row' kernel)."""
    if join is None:
        return None
    if not isinstance(join, JoinPlan):
        raise TypeError("join must be a JoinPlan")
    if not self_pairs and not join.row:
        raise ValueError("the self-join kernels take one point set (no y)")
    join.validate(dev, X.n, box is not None)
    return None if join.row else join


def _within(dev, X, Y, r, b, exact, spec, events, progress, join=None, ids=None, order=False):
    ids = device_ids(dev, ids, X.n, X.n if Y is None else Y.n, events)
    xo = X.array if X.on_device else upload(dev, X.array, events=events)
    yo = None if Y is None else (Y.array if Y.on_device else upload(dev, Y.array, events=events))
    empty = X.n == 0 or (Y is not None and Y.n == 0) or (Y is None and X.n < 2)
    if empty:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return _records(dev, xo, yo, r, b, exact, spec, events, progress, join, ids, order)


def pair_distances(xh, yh, i, j, box):
    """The float64 distances of the pairs (coordinates taken in float64), in
    the library's evaluation order (numpy's: squared differences summed
    dimension by dimension)."""
    s = np.zeros(len(i))
    for k in range(xh.shape[1]):
        dk = np.asarray(xh[i, k], np.float64) - np.asarray(yh[j, k], np.float64)
        if box is not None:
            dk = dk - box[k] * np.round(dk / box[k])
        s = s + dk * dk
    return np.sqrt(s)


def _setup(dev, xo, yo, r, box, exact, events, join=None):
    """The grid, a launcher of pair-output kernels, the number of writers
    (the row plan: one a point; a JoinPlan: k a point) and, for the row
    kernel, the stage its 'pairs' kernel is built with for a requested one
    (grouped staging, within the local memory; None for a JoinPlan, whose
    kernels fit their own per-writer stages)."""
    cell = r
    if r == 0:          # identical points only: any cell works
        cell = 1.0 if box is None else 0.5 * float(np.min(box))
    ga, gb = _grids(dev, xo, yo, cell, box, None, events)
    b = ga if gb is None else gb
    plan = PairPlan.resolve(dev, ga, b, "pairs", variant="row")
    sc, real = ga.scaling, ga.scaling.real
    t = (r * sc.scale) ** 2
    thr = [real.type(t), real.type(count_band(sc, t) if exact else 0.0)]
    if exact:
        xs = sc.exact_scale
        xp_box = [0.0] * ga.d if box is None else list(np.asarray(box) * xs)
        xp = kept(dev.queue, np.array([xs] + xp_box + [r * xs], np.float64))
        head = [ga.orig.data, ga.perm.data, b.orig.data, b.perm.data, xp.data]
    else:
        head = [ga.perm.data, b.perm.data]

    if join is not None:
        head = [head[0], head[1], head[4]] if exact else [head[0]]
        order, rtab = execute.join_cells(dev.queue, dev, ga, join.order, join.table and join_table(ga.d),
                                         events)

        def launch(output, tail, nw, w0=0, wl=None, stage=0, sample=False):
            execute.join_records(dev.queue, dev, join, ga, output, head, thr + tail, nw, w0, wl, order, rtab,
                                 events, stage)
        return ga, launch, ga.n * join.k, None

    def launch(output, tail, nw, w0=0, wl=None, stage=0, sample=False):
        execute.pair_records(dev.queue, dev, plan, ga, b, output, head, thr + tail, nw, w0, wl, events, stage,
                             row_parts=sample and nw * 3 ** (ga.d - 1) < 2 ** 31)
    return ga, launch, ga.n, lambda s: stage_fit(dev, plan.wg_size, s, grouped=True)


def degrees(queue, x, *, r, box=None, exact=True, events=None, join=None):
    """Neighbours within r of every point of ``x`` (itself excluded): int64
    numpy, by the grid's row kernel (or ``join``'s) with per-point atomic
    counts (no pair is materialised). Returns (degrees, Events)."""
    dev, X, r, b = _inputs(queue, x, r, box, exact)
    join = _join(dev, X, b, join)
    events = Events() if events is None else events
    if X.n < 2:
        return np.zeros(X.n, np.int64), events
    xo = X.array if X.on_device else upload(dev, X.array, events=events)
    ga, launch, nwr, _ = _setup(dev, xo, None, r, b, exact, events, join)
    deg = zeros(dev.queue, X.n, np.uint32, events=events)
    launch("degree", [deg.data], nwr)
    return download(dev, deg, events=events).astype(np.int64), events


def csr(queue, x, *, r, box=None, exact=True, include_self=False, events=None, join=None):
    """The neighbours within r of every point of ``x`` as CSR, built on the
    device: per-point counts (the 'degree' kernel), their scan into row
    starts, a write pass putting every pair in both rows (atomic cursors),
    and the segmented sort of each row. Returns ((indptr, indices) int32
    numpy arrays, as scipy.sparse keeps them; Events). More than 2^31 - 1
    entries raise ValueError (``self_join(output='pairs')`` streams them)."""
    from ..primitives import exclusive_scan
    from ..segsort import sort as segsort

    dev, X, r, b = _inputs(queue, x, r, box, exact)
    join = _join(dev, X, b, join)
    events = Events() if events is None else events
    n = X.n
    if n < 2:
        k = np.arange(n, dtype=np.int32)
        return ((np.arange(n + 1, dtype=np.int32), k) if include_self else
                (np.zeros(n + 1, np.int32), np.empty(0, np.int32))), events
    q = dev.queue
    xo = X.array if X.on_device else upload(dev, X.array, events=events)
    ga, launch, nwr, _ = _setup(dev, xo, None, r, b, exact, events, join)
    rows = zeros(q, n + 1, np.uint32, events=events)
    launch("degree", [rows.data], nwr)
    if include_self:
        rows += np.uint32(1)                      # the point's own entry
        rows[n:] = 0
    # the total in 64 bits before the 32-bit scan (which wraps past 2^32)
    total = int(download(dev, rows, events=events).astype(np.int64).sum())
    if total >= 2 ** 31:
        raise ValueError(f"{total} CSR entries: more than 2^31 - 1 (use output='pairs', which streams)")
    exclusive_scan(q, rows, n + 1, events=events, read_total=False)      # rows[i] = start of row i
    cur = rows[:n].copy()
    idx = cla.empty(q, max(total, 1), np.uint32, allocator=dev.pool)
    launch("csrwrite", [cur.data, idx.data, np.uint32(include_self)], nwr)
    if total:
        idx, ev = segsort(q, idx[:total], rows)
        for evs in ev.values():
            for e in evs:
                events.add("rowsort", e)
    indptr = download(dev, rows, events=events).astype(np.int32)
    indices = download(dev, idx[:total], out=np.empty(total, np.int32), events=events) if total else \
        np.empty(0, np.int32)
    return (indptr, indices), events


def _inputs(queue, x, r, box, exact):
    """(device, points, r, box) checked: the shared prelude of the ops."""
    from ..core.device import as_device

    dev = as_device(queue)
    X = inputs.points(x, "x", max_n=MAX_POINTS)
    r = inputs.scalar(r, "r")
    b = inputs.box(box, X.d)
    _check_reach(r, b)
    _check_device(dev, X, exact)
    return dev, X, r, b


def _check_device(dev, X, exact):
    inputs.check_context(dev, X.array)
    dev.check_dtype(X.dtype)
    if exact and not dev.fp64:
        from ..core.errors import DeviceCapabilityError

        raise DeviceCapabilityError(f"exact pairs are decided in double, which {dev.name} lacks; "
                                    "pass exact=False")


def _check_reach(r, b):
    if b is not None and r > 0.5 * float(np.min(b)):
        raise ValueError(f"r = {r:g} exceeds half the shortest box side ({0.5 * float(np.min(b)):g}): "
                         "the minimum image misses other images within it")


def _records(dev, xo, yo, r, box, exact, spec, events, progress, join=None, ids=None, order=False):
    ga, launch, nwr, fit = _setup(dev, xo, yo, r, box, exact, events, join)
    q = dev.queue

    per_writer = []

    def estimate():
        n = nwr
        m = min(n, max(SAMPLE_WRITERS, n // 100))
        _, wl = sampled_writers(q, n, m)
        cnt = zeros(q, n, np.uint32, events=events)
        launch("paircount", [cnt.data], m, 0, wl, sample=True)
        # the sampled counts summed on the device (cnt is zero elsewhere): one word read
        total = int(cla.sum(cnt, dtype=np.uint64, queue=q).get()) * n / m
        per_writer.append(total / n)
        return total

    def stage():
        if spec.stage is not None:
            return spec.stage
        if join is None:
            return STAGE_GROUPED[1 if per_writer and per_writer[0] > STAGE_GROUPED_MAX else 0]
        if not per_writer:
            return STAGE_AUTO
        w = per_writer[0]
        return STAGE_AUTO if w <= STAGE_AUTO_MAX or w <= STAGE_ROW_MAX * 3 ** (ga.d - 1) else 0

    def built():        # the stage the pages kernel runs with (the host's dense drain follows it)
        return stage() if fit is None else fit(stage())

    return collect(q, nwr, spec,
                   launch_pages=lambda nw, wl, args: launch("pairs", args, nw, 0, wl, built()),
                   launch_count=lambda w0, nw, wl, cnt: launch("paircount", [cnt.data], nw, w0, wl),
                   launch_write=lambda w0, nw, offs, out: launch("pairwrite", [offs.data, out.data], nw, w0),
                   estimate=estimate, events=events, progress=progress, ids=ids,
                   dense=lambda: fit is not None and built() > 0, order=ga.n if order else None)
