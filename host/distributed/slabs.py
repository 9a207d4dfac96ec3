"""Pairs within a radius over a cluster: slabs along axis 0.

The points are cut by their first coordinate s into slabs of near-equal
counts (boundaries q at the equal-count cuts; equal values stay in one
slab, so ties at a cut make slabs uneven, and a set whose first coordinate
is constant is one slab); a slab owns the points with s in [q_k-1, q_k) and
reads, as a halo, the points ahead of it within r of q_k (slightly widened:
a larger halo only adds candidates), see ``_layout``. Each slab is a task
running the library's own call (:func:`clkernels.pairs_within`,
:func:`clkernels.self_join`) on its points and halo, so the pairs are the
library's (d <= r, exact in float64); a pair is kept by the slab owning the
earlier of its two points in the order, so each pair is reported exactly
once (the later point is within r along axis 0, hence in the halo). Cross
pairs (``y``): each slab of x reads the points of y within r of it along
axis 0. Neighbour counts (``self_join(output='count')``) read halos on both
sides and keep their own points' counts.

Inputs: numpy or dask arrays (dask arrays are computed: the points are
small beside their pairs); the points and their order are put once for
every worker (a worker that dies loses no data). Results are numpy arrays
on the client, concatenated slab by slab (``sort=True``: (i, j) order, as
the single call sorts). Workers on the client's host read the inputs and
return the pairs through memory files (:mod:`.transport`).

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

import numpy as np

from ..cellgrid import pairs as cellpairs
from ..core import inputs
from ..selfjoin import api as selfjoin_api
from .common import check_client, check_collect, column, concat, is_dask, split
from .transport import Transport


def _host(x, name):
    return inputs.points(x.compute() if is_dask(x) else x, name).array


def _reach(v, r):
    """r along axis 0 from v, widened so rounding never drops a partner."""
    return r + 1e-9 * (r + abs(v))


def _layout(x, r, nslabs):
    """(order, [(start, lo, hi, end)]) of the slabs: points order[lo:hi]
    owned, order[start:lo] and order[hi:end] the halos within r. One slab
    is every point as given (order None: no sort, no copy).

    No full sort: with boundaries q[0] < ... (taken at the equal-count cuts
    by a partial sort, ``np.partition``), slab k owns the points whose first
    coordinate s lies in [q[k-1], q[k]) (the first slab everything below
    q[0], the last everything from its boundary on); its halos are the
    points within reach of its boundaries (s in [q[k-1] - reach, q[k-1])
    and [q[k], q[k] + reach)). Every range is a union of the intervals
    between those thresholds, so the points ordered by their interval (a
    radix sort of small integers) make every slab and halo a contiguous
    range of the order. Equal values of s stay in one slab: ties at a cut
    leave slabs uneven or empty."""
    n = len(x)
    if nslabs == 1:
        return None, [(0, 0, n, n)]
    s = x[:, 0].astype(np.float64)
    cuts = [lo for lo, _ in split(n, nslabs)][1:]
    q = np.partition(s, cuts)[cuts] if cuts else np.empty(0)
    reach = _reach(q, r)
    thr = np.unique(np.concatenate([q, q - reach, q + reach]))
    key = np.searchsorted(thr, s, side="right")              # thresholds <= s
    order = np.argsort(key.astype(np.uint16) if len(thr) < 65535 else key, kind="stable")
    below = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=len(thr) + 1))])

    def before(t):                      # points with s < t (t one of thr: key <= its index)
        return int(below[np.searchsorted(thr, t, side="left") + 1])

    bounds = [0] + [before(v) for v in q] + [n]
    out = []
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        if hi == lo:
            out.append((lo, lo, hi, hi))
            continue
        start = before(q[k - 1] - reach[k - 1]) if k else 0
        end = before(q[k] + reach[k]) if k < len(q) else n
        out.append((min(start, lo), lo, hi, max(end, hi)))
    return order, out


def _nslabs(slabs, workers):
    if slabs is None:
        return 1 if workers == 1 else 2 * workers
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


def _self_slab(fn, x, order, lo, hi, end, arg, kw):
    """The pairs of order[lo:end] with at least one point in order[lo:hi], as global (i < j)."""
    if order is None:
        return fn(x, arg, **kw)
    idx = order[lo:end]
    res = fn(x[idx], arg, **kw)
    li, lj = res[0], res[1]
    keep = np.minimum(li, lj) < hi - lo
    gi, gj = idx[li[keep]], idx[lj[keep]]
    return (np.minimum(gi, gj), np.maximum(gi, gj)) + tuple(v[keep] for v in res[2:])


def _cross_slab(x, xorder, lo, hi, y, yorder, ypos, r, kw):
    ix, iy = xorder[lo:hi], yorder[ypos]
    res = cellpairs.pairs_within(x[ix], r, y=y[iy], **kw)
    return (ix[res[0]], iy[res[1]]) + tuple(res[2:])


def _count_slab(x, order, start, lo, hi, end, eps, kw):
    deg = selfjoin_api.self_join(x if order is None else x[order[start:end]], eps, output="count", **kw)
    return deg[lo - start:hi - start]


def _concat(parts, width):
    return tuple(concat([p[k] for p in parts]) for k in range(width))


def pairs_within(client, x, r, *, y=None, box=None, return_distances=False, sort=False, device=None,
                 exact=True, method=None, page=None, npages=None, max_device_bytes=None, stage=None,
                 progress=None, slabs=None, collect=True):
    """:func:`clkernels.pairs_within` over the workers of ``client``, in
    ``slabs`` slabs along axis 0 (default: one per worker, two per worker
    when there are several). ``collect=False``: the arrays as dask arrays
    left on the workers (slab by slab, no ``sort``)."""
    workers = check_client(client, device)
    _reject(progress)
    check_collect(collect, sort)
    r = inputs.scalar(r, "r")
    nslabs = _nslabs(slabs, workers)
    xh = _host(x, "x")
    b = inputs.box(box, xh.shape[1])
    kw = dict(return_distances=return_distances, exact=exact, method=method, page=page, npages=npages,
              max_device_bytes=max_device_bytes, stage=stage, box=b)
    width = 3 if return_distances else 2
    L = None if b is None else float(b[0])
    if b is not None and r > 0.5 * float(np.min(b)):      # the single call's rule, before any task
        raise ValueError(f"r = {r:g} exceeds half the shortest box side ({0.5 * float(np.min(b)):g})")
    with Transport(client, collect) as T:
        futs = _pairs_tasks(T, xh, y, r, L, nslabs, kw)
        if not collect:
            return tuple(column(futs, k, np.float64 if k == 2 else np.int64) for k in range(width))
        out = _concat(T.gather(futs), width)
    if sort:
        o = np.lexsort((out[1], out[0]))
        out = tuple(v[o] for v in out)
    return out


def _pairs_tasks(T, xh, y, r, L, nslabs, kw):
    """The slab tasks of :func:`pairs_within` (their results for :meth:`.Transport.gather`)."""
    if y is None and L is not None and nslabs > 1:
        order, s, layout = _ring_layout(_wrapped(xh[:, 0], L), r, nslabs, L)
        xf, of, sf = T.put([xh, order, s])
        return [T.submit(_ring_self_slab, xf, of, sf, L, lo, hi, halo, r, kw, out=True)
                for lo, hi, halo in layout]
    if y is None:
        order, layout = _layout(xh, r, nslabs)
        xf, of = T.put([xh, order])
        return [T.submit(_self_slab, cellpairs.pairs_within, xf, of, lo, hi, end, r, kw, out=True)
                for _, lo, hi, end in layout]
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
        futs.append(T.submit(_cross_slab, xf, xof, lo, hi, yf, yof, ypos, r, kw, out=True))
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
    n = len(xh)
    perm, layout = _layout(xh, eps, _nslabs(slabs, workers))
    kw = dict(exact=exact, kernel=kernel, k=k, order=order)
    with Transport(client, collect or output == "count") as T:
        xf, of = T.put([xh, perm])
        if output == "count":
            futs = [T.submit(_count_slab, xf, of, start, lo, hi, end, eps, dict(kw, include_self=include_self),
                             out=True) for start, lo, hi, end in layout]
            deg = np.empty(n, np.int64)
            for (_, lo, hi, _), part in zip(layout, T.gather(futs)):
                deg[slice(lo, hi) if perm is None else perm[lo:hi]] = part
            return deg
        kw.update(output="pairs", method=method, page=page, max_device_bytes=max_device_bytes)
        futs = [T.submit(_self_slab, selfjoin_api.self_join, xf, of, lo, hi, end, eps, kw, out=True)
                for _, lo, hi, end in layout]
        if collect:
            i, j = _concat(T.gather(futs), 2)
            xp = np
        else:
            import dask.array as xp
            i, j = column(futs, 0, np.int64), column(futs, 1, np.int64)
    if output == "pairs":
        return selfjoin_api.pair_forms(i, j, n, symmetric, include_self, xp)
    return selfjoin_api.csr_output(*selfjoin_api.pair_forms(i, j, n, True, include_self), n, output)


__all__ = ["pairs_within", "self_join"]
