"""Pairs within a radius over a cluster: slabs along axis 0.

Self pairs (``self_join``, ``pairs_within`` without ``y`` or ``box``): the
points are cut by their first coordinate s into slabs of near-equal
estimated work, one per worker by default: each slab's task counts the
neighbours of the same sample of the points on its device (exactly, so
every device finds the same counts) and the cuts q split the sampled
points' weights (a point's cost plus half its neighbours, scaled to the
whole set) in equal shares (:func:`_bounds`): every task derives the same
cuts, with no round trip to the client before the slabs. Slab k owns the points
with s in [q[k-1], q[k]) (equal values stay in one slab, so ties at a cut
make slabs uneven or empty) and reads, as its halo, the points ahead of it
within r of q[k] (slightly widened: a larger halo only adds candidates).
Each slab is a task that selects its points and halo from the whole set
itself (the client sorts nothing) and runs the library's ops on its device:
the pairs among its own points and those of its own points with the halo (a
cross join), each pair decided as the single call decides it (d <= r, exact
in float64) and mapped to global ids (min, max) on the device as the pages
drain (:func:`..cellgrid.pairs.within`'s ``ids``). A pair belongs to the
slab of its point with the smaller s (the other is within r ahead along
axis 0, hence in the halo), so each pair is reported exactly once. d > 8
(the tiled join): one join over own points and halo with only the own
points as anchors. Neighbour counts (``self_join(output='count')``) read
halos on both sides and keep their own points' counts. One slab runs the
single call on the whole set.

Inputs: numpy or dask arrays (dask arrays are computed: the points are
small beside their pairs); the points are put once for every worker (a
worker that dies loses no data). Results are numpy arrays on the client,
concatenated slab by slab (``sort=True``: (i, j) order, as the single call
sorts), or dask arrays left on the workers (``collect=False``). Workers on
the client's host read the inputs and return the pairs past dask's comms
(copies between the processes' memories, or memory files: :mod:`.transport`).

Cross pairs (``y``): x is sorted by its first coordinate and cut into
slabs of equal counts; each slab of x reads the points of y within r of it
along axis 0 and runs the single call.

Periodic boxes (``pairs_within(box=...)``): the order is of the first
coordinate wrapped into [0, L_0), and the slabs are arcs of that ring.
A slab reads as its halo the points following it along the ring (wrapping
past L_0 to the start) up to r past its last point, and runs the single
call with the box; a pair is kept by the slab owning the point from which
the other lies the shorter way forward along the ring (ties: the earlier
position in the order). The partner is then at most the pair's axis-0
minimum-image separation (<= r) ahead, inside that slab's halo, and every
slab decides the same owner, so each pair is reported exactly once. Cross
pairs read y within r of the slab on both sides, around the ring.
"""

import functools
import threading
import weakref

import numpy as np
import pyopencl.array as cla

from ..cellgrid import JoinPlan
from ..cellgrid import pairs as cellpairs
from ..core import inputs
from ..core.transfer import upload
from ..primitives import select_rows
from ..selfjoin import api as selfjoin_api
from ..selfjoin import tiled
from .common import check_client, check_collect, column, is_dask, split
from .transport import Transport


def _host(x, name):
    return inputs.points(x.compute() if is_dask(x) else x, name).array


def _reach(v, r):
    """r along axis 0 from v, widened so rounding never drops a partner."""
    return r + 1e-9 * (r + abs(v))


#: points sampled for the slab boundaries: their neighbour counts weigh the cuts
SAMPLE = 1 << 16
#: what a point costs a slab beside its pairs, in pairs (its share of the grid
#: build, the upload and the selection)
POINT_WEIGHT = 4.0
#: rows a slab selects from at once on its device (select_rows counts in uint32)
SELECT_ROWS = 1 << 30


def _sample(x, n):
    """Rows of x for :func:`_bounds`: all of them when few, else SAMPLE rows
    drawn with replacement (a fixed seed: a call's slabs are reproducible)."""
    if n <= SAMPLE:
        return x
    return x[np.sort(np.random.default_rng(n).integers(0, n, SAMPLE))]


def _bounds(sample, n, r, nslabs):
    """Slab boundaries q[0] <= ... <= q[nslabs - 2] (float64 values of the
    points' dtype) along axis 0 cutting near-equal estimated work, from
    ``sample`` (m rows of the n points): a sampled point weighs POINT_WEIGHT
    plus the pairs it stands for (its neighbours within r among the sample,
    counted on this worker's device, scaled by (n - 1) / (m - 1), halved: a
    pair has two ends) -- the grid's work; the tiled d > 8 join's grows with
    own x (own + halo) points, which this does not weigh. Equal first
    coordinates fall in one slab (slab k owns [q[k-1], q[k])), so ties
    leave slabs uneven or empty. The counts are exact (float64 decisions
    on any device), so the slab tasks, each computing this on its own
    device, agree on the cuts: the client needs no device."""
    m = len(sample)
    dev = inputs.device_for(None, sample)
    if sample.shape[1] > tiled.GRID_DIMS:
        deg, _ = tiled.degrees(dev.queue, sample, r=r, exact=True)
    else:
        deg, _ = cellpairs.degrees(dev.queue, sample, r=r, exact=True)
    s = sample[:, 0].astype(np.float64)
    o = np.argsort(s, kind="stable")
    c = np.cumsum(POINT_WEIGHT + deg[o] * (0.5 * (n - 1) / max(m - 1, 1)))
    k = np.searchsorted(c, c[-1] * np.arange(1, nslabs) / nslabs, side="left")
    return s[o][np.minimum(k, m - 1)]


def _rounded(v, dtype, up):
    """v (float64) as a value of ``dtype`` at or past it (``up``: >= v, else <= v)."""
    f = np.dtype(dtype).type(v)
    if (f < v) if up else (f > v):
        f = np.nextafter(f, f.dtype.type(np.inf if up else -np.inf))
    return f


def _select(dev, x, lo, hi, r, behind=False):
    """(rows, positions) on ``dev`` of the points of x (numpy) a slab owns
    (first coordinate s in [lo, hi); the last slab, hi = inf, every s not
    below lo: a NaN or +inf point reaches a call, which refuses it) and of
    its halo ahead within reach of them (s in [hi, hi + reach)), and with
    ``behind`` of its halo behind (s in [lo - reach, lo)); lo = -inf at the
    first. The cuts are values of the points' dtype (the sample's
    coordinates), so every slab compares them alike on any device; the halo
    limits are rounded outward. x goes up in chunks of at most a quarter of
    the device's largest allocation, each selected on the device."""
    dt = x.dtype
    ranges = [(lo, hi, hi == np.inf), (hi, _rounded(hi + _reach(hi, r), dt, True), False)]
    if behind:
        ranges.append((_rounded(lo - _reach(lo, r), dt, False), lo, False))
    n, d = x.shape
    rows = max(1, min(n, SELECT_ROWS, dev.max_mem_alloc_size // (4 * d * dt.itemsize)))
    parts = [[] for _ in ranges]
    for start in range(0, n, rows):
        xd = upload(dev, x[start:start + rows])
        for got, (a, b, rest) in zip(parts, ranges):
            got.append(select_rows(dev.queue, xd, a, b, rest=rest, start=start))
    return [p[0] if len(p) == 1 else (cla.concatenate([v[0] for v in p]), cla.concatenate([v[1] for v in p]))
            for p in parts]


def _edges(q):
    """[(lo, hi)] of the slabs cut at q (-inf and inf at the ends)."""
    e = np.concatenate([[-np.inf], q, [np.inf]])
    return list(zip(e[:-1].tolist(), e[1:].tolist()))


def _nslabs(slabs, workers, per=2):
    """Slabs given, or ``per`` a worker (one with one worker)."""
    if slabs is None:
        return 1 if workers == 1 else per * workers
    if isinstance(slabs, bool) or not isinstance(slabs, (int, np.integer)) or slabs < 1:
        raise ValueError(f"slabs must be a positive integer, got {slabs!r}")
    return int(slabs)


def _wrapped(x0, L):
    """The first coordinate wrapped into [0, L) (float64)."""
    s = np.mod(np.asarray(x0, np.float64), L)
    s[s >= L] = 0.0                    # rounding of tiny negatives
    return s


def _ring_layout(s, r, nslabs, L):
    """(order, s sorted, [(lo, hi, halo positions)]) of the periodic slabs:
    the halo follows hi around the ring up to r past s[hi - 1], never
    reaching lo again."""
    order = np.argsort(s, kind="stable")
    s = s[order]
    n = len(s)
    out = []
    for lo, hi in split(n, nslabs):
        if hi == lo:
            out.append((lo, hi, np.empty(0, np.int64)))
            continue
        v = s[hi - 1] + _reach(s[hi - 1], r)
        ahead = np.arange(hi, int(np.searchsorted(s, v, side="right")))
        if v >= L:                     # the halo wraps to the start of the ring
            ahead = np.r_[np.arange(hi, n), np.arange(0, min(lo, int(np.searchsorted(s, v - L, side="right"))))]
        out.append((lo, hi, ahead.astype(np.int64)))
    return order, s, out


def _ring_self_slab(x, order, s, L, lo, hi, halo, r, kw):
    """The pairs within r of order[lo:hi] and its halo that this slab owns, as global (i < j)."""
    pos = np.r_[np.arange(lo, hi), halo].astype(np.int64)
    idx = order[pos]
    res = cellpairs.pairs_within(x[idx], r, **kw)
    p, q = pos[res[0]], pos[res[1]]
    fwd, back = np.mod(s[q] - s[p], L), np.mod(s[p] - s[q], L)
    owner = np.where(fwd < back, p, np.where(fwd > back, q, np.minimum(p, q)))
    keep = (owner >= lo) & (owner < hi)
    gi, gj = idx[res[0][keep]], idx[res[1][keep]]
    return (np.minimum(gi, gj), np.maximum(gi, gj)) + tuple(v[keep] for v in res[2:])


def _ring_window(ys, a, b, L):
    """Positions of the sorted ring coordinates ys within [a, b] around the ring."""
    ny = len(ys)
    if b - a >= L:
        return np.arange(ny)
    if a < 0:
        return np.r_[np.arange(int(np.searchsorted(ys, a + L, side="left")), ny),
                     np.arange(0, int(np.searchsorted(ys, b, side="right")))]
    if b >= L:
        return np.r_[np.arange(int(np.searchsorted(ys, a, side="left")), ny),
                     np.arange(0, int(np.searchsorted(ys, b - L, side="right")))]
    return np.arange(int(np.searchsorted(ys, a, side="left")), int(np.searchsorted(ys, b, side="right")))


def _reject(progress=None):
    if progress is not None and progress is not False:
        raise ValueError("progress= is not supported with client=: use dask's progress "
                         "(distributed.progress) or its dashboard")


def _self_slab(x, slab, r, kw, join=None, distances=False):
    """The pairs (i < j, global ids) of slab ``slab`` = (k, nslabs), owning
    first coordinates [lo, hi) (:func:`_slab_range`): its own points' pairs
    and theirs with the halo ahead (the
    halo's pairs among themselves are later slabs'), mapped to global ids on
    the device: (i, j[, d]) of the own points' pairs, then of the pairs with
    the halo. One slab (lo = -inf, hi = inf): the whole set as given.
    ``join``: (kernel, k, order) of a self-join's grid kernels; d > 8: the
    tiled join over own points and halo with only the own points as anchors
    (one part, the second empty)."""
    dev = inputs.device_for(None, x)
    q, d = dev.queue, x.shape[1]
    none = np.empty(0, np.int64)
    lo, hi = _slab_range(x, slab, r)
    if lo == -np.inf and hi == np.inf:
        (xo, own), (xa, ahead) = (x, None), (None, none)
    else:
        (xo, own), (xa, ahead) = _select(dev, x, lo, hi, r)
    if d > tiled.GRID_DIMS:
        owned = None
        if own is not None:
            owned = len(own)
            xo, own = cla.concatenate([xo, xa]), cla.concatenate([own, ahead])
        parts = [tiled.within(q, xo, r=r, owned=owned, ids=own, **kw)[0], (none, none)]
    else:
        plan = None if join is None else JoinPlan.resolve(dev, len(xo), *join, dims=d, output="pairs")
        parts = [cellpairs.within(q, xo, r=r, ids=own, join=plan, **kw)[0],
                 cellpairs.within(q, xo, xa, r=r, ids=(own, ahead), **kw)[0] if len(ahead) else (none, none)]
    if distances:
        parts = [(i, j, cellpairs.pair_distances(x, x, i, j, None)) for i, j in parts]
    return tuple(v for p in parts for v in p)


def _cross_slab(x, xorder, lo, hi, y, yorder, ypos, r, kw):
    ix, iy = xorder[lo:hi], yorder[ypos]
    res = cellpairs.pairs_within(x[ix], r, y=y[iy], **kw)
    return (ix[res[0]], iy[res[1]]) + tuple(res[2:])


def _count_slab(x, slab, eps, kw):
    """(own positions, their neighbour counts) of slab ``slab`` = (k,
    nslabs), owning first coordinates [lo, hi) (:func:`_slab_range`): its
    own points with the halos on both sides. One slab: (None, the counts of
    the whole set)."""
    lo, hi = _slab_range(x, slab, eps)
    if lo == -np.inf and hi == np.inf:
        return None, selfjoin_api.self_join(x, eps, output="count", **kw)
    dev = inputs.device_for(None, x)
    parts = _select(dev, x, lo, hi, eps, behind=True)
    deg = selfjoin_api.self_join(cla.concatenate([p[0] for p in parts]), eps, output="count", device=dev, **kw)
    own = parts[0][1]
    return own.get(), deg[:len(own)]


#: the last cuts a worker derived: (weak reference to the points, r, nslabs, cuts); a
#: worker's tasks of one call read one array (:mod:`.transport`), so several slabs of
#: a call on one worker count the sample once
_last_cuts = None
_cuts_lock = threading.Lock()


def _slab_range(x, slab, r):
    """(lo, hi) of slab ``slab`` = (k, nslabs) along axis 0, in its task: one
    slab is the whole set; more are cut at :func:`_bounds` of the same
    sample in every task."""
    global _last_cuts
    k, nslabs = slab
    if nslabs == 1 or len(x) < 2:
        return -np.inf, np.inf
    with _cuts_lock:          # tasks of a call on one worker's threads: one counts, the others wait
        last = _last_cuts
        if last is None or last[0]() is not x or last[1:3] != (r, nslabs):
            last = _last_cuts = (weakref.ref(x), r, nslabs, _bounds(_sample(x, len(x)), len(x), r, nslabs))
    return _edges(last[3])[k]


def _pair_columns(T, futs, width, collect):
    """The columns (i, j[, d]) of the slab tasks' results (each: the own
    points' part, then the halo part): assembled on the client
    (:meth:`.Transport.columns`), or as dask arrays left on the workers
    (once the workers hold them: :meth:`.Transport.hold`)."""
    if collect:
        return T.columns(futs, width)
    import dask.array as da

    T.hold(futs)
    return tuple(da.concatenate([column(futs, p * width + k, np.float64 if k == 2 else np.int64)
                                 for p in range(2)]) for k in range(width))


def pairs_within(client, x, r, *, y=None, box=None, return_distances=False, sort=False, device=None,
                 exact=True, method=None, page=None, npages=None, max_device_bytes=None, stage=None,
                 progress=None, slabs=None, collect=True):
    """:func:`clkernels.pairs_within` over the workers of ``client``, in
    ``slabs`` slabs along axis 0 (default: one per worker; with ``y`` or
    ``box``, two per worker when there are several). ``collect=False``: the
    arrays as dask arrays left on the workers (slab by slab, no ``sort``)."""
    workers = check_client(client, device)
    _reject(progress)
    check_collect(collect, sort)
    r = inputs.scalar(r, "r")
    xh = _host(x, "x")
    b = inputs.box(box, xh.shape[1])
    width = 3 if return_distances else 2
    L = None if b is None else float(b[0])
    if b is not None and r > 0.5 * float(np.min(b)):      # the single call's rule, before any task
        raise ValueError(f"r = {r:g} exceeds half the shortest box side ({0.5 * float(np.min(b)):g})")
    kw = dict(exact=exact, method=method, page=page, npages=npages, max_device_bytes=max_device_bytes, stage=stage)
    with Transport(client, lend=collect) as T:
        if y is None and L is None:
            ns = _nslabs(slabs, workers, 1)
            [xf] = T.put([xh])
            futs = [T.submit(_self_slab, xf, (s, ns), r, kw, None, return_distances, slot=s) for s in range(ns)]
            out = _pair_columns(T, futs, width, collect)
            if not collect:
                return out
        else:
            kw.update(return_distances=return_distances, box=b)
            futs = _pairs_tasks(T, xh, y, r, L, _nslabs(slabs, workers), kw)
            if not collect:
                T.hold(futs)
                return tuple(column(futs, k, np.float64 if k == 2 else np.int64) for k in range(width))
            out = T.columns(futs, width)
    if sort:
        o = np.lexsort((out[1], out[0]))
        out = tuple(v[o] for v in out)
    return out


def _pairs_tasks(T, xh, y, r, L, nslabs, kw):
    """The slab tasks of :func:`pairs_within` with ``y`` or a periodic box
    (their results for :meth:`.Transport.columns`)."""
    if y is None and nslabs == 1:
        [xf] = T.put([xh])
        return [T.submit(functools.partial(cellpairs.pairs_within, **kw), xf, r)]
    if y is None:
        order, s, layout = _ring_layout(_wrapped(xh[:, 0], L), r, nslabs, L)
        xf, of, sf = T.put([xh, order, s])
        return [T.submit(_ring_self_slab, xf, of, sf, L, lo, hi, halo, r, kw)
                for lo, hi, halo in layout]
    yh = _host(y, "y")
    if yh.shape[1] != xh.shape[1]:
        raise ValueError(f"y has {yh.shape[1]} dimensions, expected {xh.shape[1]}")
    xs = xh[:, 0].astype(np.float64) if L is None else _wrapped(xh[:, 0], L)
    ys = yh[:, 0].astype(np.float64) if L is None else _wrapped(yh[:, 0], L)
    xorder = np.argsort(xs, kind="stable")
    yorder = np.argsort(ys, kind="stable")
    xs, ys = xs[xorder], ys[yorder]
    xf, xof, yf, yof = T.put([xh, xorder, yh, yorder])
    futs = []
    for lo, hi in split(len(xs), nslabs):
        ypos = np.empty(0, np.int64)
        if hi > lo:
            a, z = xs[lo] - _reach(xs[lo], r), xs[hi - 1] + _reach(xs[hi - 1], r)
            ypos = _ring_window(ys, a, z, L) if L is not None else np.arange(
                int(np.searchsorted(ys, a, side="left")), int(np.searchsorted(ys, z, side="right")))
        futs.append(T.submit(_cross_slab, xf, xof, lo, hi, yf, yof, ypos, r, kw))
    return futs


def self_join(client, x, eps, *, output="pairs", symmetric=False, include_self=False, device=None, exact=True,
              method=None, page=None, max_device_bytes=None, progress=None, kernel=None, k=None, order=None,
              slabs=None, collect=True):
    """:func:`clkernels.self_join` over the workers of ``client``, in
    ``slabs`` slabs along axis 0: ``output`` 'pairs' (each pair found once,
    then both directions and self pairs as the single call adds them;
    ``collect=False``: as dask arrays left on the workers), 'csr' and
    'sparse' (the gathered pairs in both directions made into rows on the
    client, every row ascending: the single call's arrays) or 'count' (halos
    on both sides; each slab keeps its own points' counts)."""
    workers = check_client(client, device)
    _reject(progress)
    check_collect(collect)
    if output not in ("pairs", "count", "csr", "sparse"):
        raise ValueError(f"output={output!r} is not supported with client=: use 'pairs', 'csr', "
                         "'sparse' or 'count'")
    if output in ("csr", "sparse") and not collect:
        raise ValueError(f"output={output!r} is built on the client: collect=False applies to 'pairs'")
    eps = inputs.scalar(eps, "eps", positive=True)
    xh = inputs.points(x.compute() if is_dask(x) else x, "x", max_dims=selfjoin_api.MAX_DIMS).array
    n, d = xh.shape
    if d > tiled.GRID_DIMS:
        tiled.reject_grid_options(d, kernel=kernel, k=k, order=order)
    with Transport(client, lend=collect) as T:
        ns = _nslabs(slabs, workers, 1)
        [xf] = T.put([xh])
        if output == "count":
            kw = dict(exact=exact, kernel=kernel, k=k, order=order, include_self=include_self)
            return T.placed([T.submit(_count_slab, xf, (s, ns), eps, kw, slot=s) for s in range(ns)], n, np.int64)
        kw = dict(exact=exact, method=method, page=page, max_device_bytes=max_device_bytes)
        join = None if d > tiled.GRID_DIMS else (kernel, k, order)
        futs = [T.submit(_self_slab, xf, (s, ns), eps, kw, join, slot=s) for s in range(ns)]
        i, j = _pair_columns(T, futs, 2, collect)
        if collect:
            xp = np
        else:
            import dask.array as xp
    if output == "pairs":
        return selfjoin_api.pair_forms(i, j, n, symmetric, include_self, xp)
    return selfjoin_api.csr_output(*selfjoin_api.pair_forms(i, j, n, True, include_self), n, output)


__all__ = ["pairs_within", "self_join"]
