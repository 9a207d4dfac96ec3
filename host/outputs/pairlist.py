"""Exclusions as a list of pairs: the pairs whose group ids are equal, and the
exact histogram of listed pairs (``outputs.cl.mako``'s ``pair_list_hist``),
which a caller subtracts from a statistic over all pairs. The listed pairs
are binned by the same float64 evaluation and rule as every band decision,
so the difference is the statistic without them, exactly."""

import numpy as np
import pyopencl as cl

from ..core.build import build, program_kernel
from ..core.launch import global_size, pow2_floor
from ..core.transfer import kept, upload, zeros

#: at most this many excluded pairs are listed (8 bytes each on the host and
#: the device); beyond it callers use a kernel that skips them in place
MAX_LISTED = 1 << 24


def _runs(g):
    """(order, the sorted ids, first sorted position of each run, run sizes)
    of the int array g, sorted stably."""
    order = np.arange(len(g)) if np.all(g[1:] >= g[:-1]) else np.argsort(g, kind="stable")
    gs = g[order]
    first = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    return order, gs, first, np.diff(np.r_[first, len(g)])


def group_sizes(g):
    """(ids, sizes): the distinct ids of the int array g, increasing, and how
    many points carry each (numpy.unique's return_counts, without a sort when
    g is already sorted, as exclusion blocks are)."""
    g = np.asarray(g, np.int64)
    if not len(g):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    _, gs, first, sizes = _runs(g)
    return gs[first], sizes


def _expand(owner, count, base):
    """Pairs (owner[k], base[k] + t) for t < count[k], every k."""
    total = int(count.sum())
    i = np.repeat(owner, count)
    t = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    return i, np.repeat(base, count) + t


def group_pairs(gx, gy=None, limit=MAX_LISTED):
    """The pairs whose group ids are equal: without ``gy`` the unordered pairs
    i < j of one set (as (i, j) with i != j, each once), with ``gy`` every
    (i of x, j of y). Returns (i, j) as uint32 arrays, or None when there
    are more than ``limit``."""
    gx = np.asarray(gx, np.int64)
    if gy is None:
        if len(gx) < 2:
            return np.empty(0, np.uint32), np.empty(0, np.uint32)
        order, _, first, sizes = _runs(gx)
        if int(np.sum(sizes * (sizes - 1) // 2)) > limit:
            return None
        kinds = np.unique(sizes[sizes > 1])
        if len(kinds) <= 32:        # few run lengths (molecules): the pairs of each length at once
            tri = {int(c): np.triu_indices(c, 1) for c in kinds}
            parts = [(first[sizes == c][:, None] + tri[int(c)][0]).ravel() for c in kinds]
            partb = [(first[sizes == c][:, None] + tri[int(c)][1]).ravel() for c in kinds]
            a = np.concatenate(parts) if parts else np.empty(0, np.int64)
            b = np.concatenate(partb) if partb else np.empty(0, np.int64)
        else:
            pos = np.arange(len(gx)) - np.repeat(first, sizes)        # rank within the run
            a, b = _expand(np.arange(len(gx)), np.repeat(sizes, sizes) - 1 - pos, np.arange(len(gx)) + 1)
        return order[a].astype(np.uint32), order[b].astype(np.uint32)
    gy = np.asarray(gy, np.int64)
    if len(gx) == 0 or len(gy) == 0:
        return np.empty(0, np.uint32), np.empty(0, np.uint32)
    ox, gxs, _, _ = _runs(gx)
    oy, gys, _, _ = _runs(gy)
    lo = np.searchsorted(gys, gxs, side="left")
    cnt = np.searchsorted(gys, gxs, side="right") - lo
    if int(cnt.sum()) > limit:
        return None
    a, b = _expand(np.arange(len(gx)), cnt, lo)
    return ox[a].astype(np.uint32), oy[b].astype(np.uint32)


def pair_list_histogram(queue, device, X0, Y0, xp, i, j, nbins, events):
    """uint64 counts per bin of the listed pairs (X0[i[k]], Y0[j[k]]): ``X0``,
    ``Y0`` the original (n, D) coordinates on the device, ``xp`` the exact
    path's parameters (xs, the box times xs, the nbins + 1 edges times xs;
    float64 numpy), ``i``, ``j`` uint32 numpy arrays."""
    npairs = len(i)
    out = np.zeros(nbins, np.uint64)
    if npairs == 0:
        return out
    wg = pow2_floor(min(256, device.max_work_group_size))
    dims = X0.shape[1]
    orig = "double" if X0.dtype == np.float64 else "float"
    box = bool(np.any(xp[1:1 + dims]))
    prg = build(device, "outputs.cl.mako", "pair_list_hist", dict(orig=orig, dims=dims, box=box, wg_size=wg))
    hist = zeros(queue, nbins, np.uint32, events=events)
    di = upload(device, i, queue=queue, events=events)
    dj = upload(device, j, queue=queue, events=events)
    dxp = kept(queue, np.asarray(xp, np.float64))
    events.add("exclude", program_kernel(prg, "pair_list_hist")(
        queue, (global_size(npairs, wg),), (wg,), X0.data, Y0.data, dxp.data, di.data, dj.data,
        np.uint32(npairs), np.uint32(nbins), hist.data))
    h = np.empty(nbins, np.uint32)
    events.add("read", cl.enqueue_copy(queue, h, hist.data, is_blocking=True))
    out += h.astype(np.uint64)
    return out


__all__ = ["MAX_LISTED", "group_pairs", "group_sizes", "pair_list_histogram"]
