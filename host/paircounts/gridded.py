"""Pair counts over a cell grid, as Corrfunc's theory routines keep cell lists:
where the last edges reach a small part of the points' extent, the double
kernel evaluates only the pairs of neighbouring cells instead of all pairs.

The grid is the cell grid's (:class:`..cellgrid.api.Grid`, built on the
device: cells whose sides are at least the reach along each axis -- rp
across the line of sight and pi along it in mode 'rppi' --, points sorted by
cell). The kernel's work-groups each take WG_SIZE consecutive anchors in that
order and the partner ranges of the cells next to their cells (3^d of each,
wrapped in a box: 3^(d-1) rows along dimension 0, each one run of the
partners' cells), merged and cut into pieces of at most ``chunk`` partners
per work-group (the 32-bit local counts; the load of one group). The tables
are made on the host from the grids' cells (a few reads of the cells' ids
and starts).

Which pairs are evaluated changes, not how: every pair whose float64
evaluation lies within the last edges is in its anchor's ranges (the cells
are a relative 2^-30 and a few ulps of the coordinates' magnitude wider than
the reach, more than the evaluation rounds), and its separation and bins are
the all-pairs kernel's, so counts and sums are identical.
"""

import itertools

import numpy as np
import pyopencl.array as cla

from ..cellgrid import api as cellgrid_api
from ..cellgrid.plan import Geometry, cell_size_for

#: dimensions the grid covers (3^d neighbour cells a cell)
MAX_DIMS = 3
#: the grid is used where its neighbour cells hold at most this fraction of all pairs
MAX_FRACTION = 0.25
#: ... and for at least this many pairs: below, all pairs take less than the grid's build,
#: host tables and gathers (a GPU evaluates ~3e11 pairs/s in double, a CPU ~2e8)
MIN_PAIRS = {"gpu": 1 << 28, "cpu": 1 << 20}
#: work-groups to aim for at most (their partial histograms); more partners a group beyond
MAX_GROUPS = 1 << 15
#: partners per work-group at least, in tiles
MIN_CHUNK_TILES = 32
#: points a cell at least on average (a wider cell where the reach gives fewer): few cells
#: and partner ranges, which the host lists
OCCUPANCY = 64
#: cells whose neighbours are listed at a time (host memory: ~3^d int64 each)
NEIGHBOUR_SLICE = 1 << 16


def reach(mode, e1, e2, d):
    """The largest separation along each axis that a counted pair can have: the
    last edge (r, s), or in mode 'rppi' rp's across the line of sight and pi's
    along it (the last axis)."""
    if mode == "rppi":
        return np.array([float(e1[-1])] * (d - 1) + [float(e2[-1])])
    return np.full(d, float(e1[-1]))


def cell_sides(mode, e1, e2, d, magnitude):
    """The grid's cell sides (per axis) for coordinates up to ``magnitude`` (their
    largest absolute value, or the box's side): the reach widened by a relative
    2^-30 and 16 ulps of the magnitude (the float64 differences and image shifts
    round by less), or None where nothing can be counted."""
    r = reach(mode, e1, e2, d)
    if not (np.isfinite(r).all() and (r >= 0).all()):
        return None
    c = r * (1 + 2.0 ** -30) + 16 * np.spacing(max(float(magnitude), float(r.max()), np.finfo(np.float64).tiny))
    return c if np.isfinite(c).all() and (c > 0).all() else None


def plan(device, problem, e1, e2, box, bounds):
    """(the grid's cell sides, the points' bounds) where a grid pays for
    ``problem`` on ``device``, else None. ``bounds``: a function giving both
    point sets' Bounds (called only past the cheap refusals: it may read them
    from the device)."""
    p = problem
    if p.triclinic or p.dims > MAX_DIMS or p.nx * p.ny < MIN_PAIRS["gpu" if device.is_gpu else "cpu"]:
        return None
    bnd = bounds()
    mag = max(bnd.maxabs, 0.0 if box is None else float(np.max(box)))
    c = cell_sides(p.mode, e1, e2, p.dims, mag)
    if c is None:
        return None
    # wider cells (all sides alike) where the reach leaves fewer than OCCUPANCY points a cell
    ext = np.maximum(np.asarray(box if box is not None else bnd.extent, np.float64), c)
    with np.errstate(over="ignore"):
        c = c * max(1.0, float(np.prod(ext / c) * (OCCUPANCY / max(p.ny, 1))) ** (1.0 / p.dims))
    if box is None:     # below 2^62 cells (a doubling of every side where not)
        c = c * (cell_size_for(float(c.max()), bnd, p.dims) / float(c.max()))
    if not np.isfinite(c).all():
        return None
    frac = 1.0
    for m in Geometry.make(c, bnd, p.dims, box, device.fp64).ncell:      # the cells the grid will have
        frac *= min(1.0, 3.0 / m)
    return (c, bnd) if frac <= MAX_FRACTION else None


class Tables:
    """A gridded launch: the sorted positions' input indices (``perm_x``,
    ``perm_y``: device arrays), ``gtab`` (uint32 (groups, 4): anchors [a0,
    a1), ranges [r0, r1)), ``rtab`` (uint32 (ranges, 2): partners [j0, j1)),
    ``chunk`` (partners a group at most)."""

    def __init__(self, perm_x, perm_y, gtab, rtab, chunk):
        self.perm_x, self.perm_y, self.gtab, self.rtab, self.chunk = perm_x, perm_y, gtab, rtab, chunk

    @property
    def groups(self):
        return len(self.gtab)

    @property
    def pairs(self):
        """The pairs the kernel evaluates (anchors times partners over the groups; auto pairs counted
        from each group's first anchor on)."""
        ln = np.concatenate([[0], np.cumsum(self.rtab[:, 1].astype(np.int64) - self.rtab[:, 0])])
        g = self.gtab.astype(np.int64)
        return int(((g[:, 1] - g[:, 0]) * (ln[g[:, 3]] - ln[g[:, 2]])).sum())


def build(dev, queue, xo, yo, c, bnd, box, wg, auto, events):
    """:class:`Tables` of x (device, (n, d)) against y (None: auto pairs) on a
    grid of sides ``c`` (per axis) over ``bnd`` (or the periodic ``box``)."""
    side = float(c.max())
    gx = cellgrid_api.Grid(xo, side, box=box, device=dev, _bounds=bnd, _events=events, _lazy=True, _sides=c)
    gy = gx if yo is None else cellgrid_api.Grid(yo, side, box=box, device=dev, like=gx, _bounds=bnd,
                                                 _events=events, _lazy=True)
    gq = gx.queue                   # the grids' own (the reads follow their builds there)
    xs = gx.cell_start.get(gq)
    xid = gx.cell_ids.get(gq).astype(np.int64)
    yid = xid if gy is gx else gy.cell_ids.get(gq).astype(np.int64)
    ys = xs if gy is gx else gy.cell_start.get(gq)
    yc = gy.cell_count.get(gq)
    gtab, rtab, chunk = _tables(gx.n, xs.astype(np.int64), xid, yid, ys.astype(np.int64), yc.astype(np.int64),
                                np.asarray(gx.geom.ncell, np.int64), np.asarray(gx.geom.stride, np.int64),
                                box is not None, wg, auto)
    return Tables(gx.perm, gy.perm, gtab, rtab, chunk)


def _tables(nx, xs, xid, yid, ys, yc, ncell, stride, periodic, wg, auto):
    """(gtab, rtab, chunk) from the grids' non-empty cells: x's ids and starts
    (sorted), y's ids, starts and counts."""
    d = len(ncell)
    nb = -(-nx // wg)
    a0 = np.arange(nb, dtype=np.int64) * wg
    a1 = np.minimum(a0 + wg, nx)
    # the x cells each block spans (consecutive in the sorted order)
    c0 = np.searchsorted(xs, a0, side="right") - 1
    c1 = np.searchsorted(xs, a1 - 1, side="right") - 1
    span = c1 - c0 + 1
    blk = np.repeat(np.arange(nb), span)
    cell = c0[blk] + (np.arange(len(blk)) - np.repeat(np.cumsum(span) - span, span))
    # the neighbour cells of a cell: 3^(d-1) rows along dimension 0 (stride 1), each row's
    # three cells (fewer at an open edge; two pieces where a box wraps) one run of y's
    # cells -- their points one range of y's order
    offs = np.array(list(itertools.product((-1, 0, 1), repeat=d - 1)), np.int64).reshape(3 ** (d - 1), d - 1)
    n0 = int(ncell[0])
    wide = periodic and n0 < 3                 # the whole row (its wrapped cells coincide)
    big = int(yc.sum()) + 1                    # block * big + position: one sortable key
    ys_end = ys + yc
    got = []
    for s0 in range(0, len(cell), NEIGHBOUR_SLICE):       # (slice, 3^(d-1), d) at a time
        sl = slice(s0, s0 + NEIGHBOUR_SLICE)
        co = (xid[cell[sl]][:, None] // stride) % ncell
        rc = co[:, None, 1:] + offs[None]
        if periodic:
            rc %= ncell[1:]
            ok = np.ones(rc.shape[:2], bool)
        else:
            ok = ((rc >= 0) & (rc < ncell[1:])).all(-1)
        row = (rc * stride[1:]).sum(-1)
        x0 = np.broadcast_to(co[:, :1], row.shape)
        b = np.broadcast_to(blk[sl][:, None], row.shape)
        if wide:
            pieces = [(np.zeros_like(x0), np.full_like(x0, n0 - 1), ok)]
        elif periodic:
            lo, hi = x0 - 1, x0 + 1
            pieces = [(np.maximum(lo, 0), np.minimum(hi, n0 - 1), ok),
                      (np.full_like(x0, n0 - 1), np.full_like(x0, n0 - 1), ok & (lo < 0)),
                      (np.zeros_like(x0), np.zeros_like(x0), ok & (hi > n0 - 1))]
        else:
            pieces = [(np.maximum(x0 - 1, 0), np.minimum(x0 + 1, n0 - 1), ok)]
        for lo, hi, m in pieces:
            p0 = np.searchsorted(yid, (row + lo)[m], side="left")
            p1 = np.searchsorted(yid, (row + hi)[m], side="right")
            hit = p1 > p0
            bb = b[m][hit]
            got.append((bb * big + ys[p0[hit]], bb * big + ys_end[p1[hit] - 1]))
    k0 = np.concatenate([g[0] for g in got]) if got else np.zeros(0, np.int64)
    k1 = np.concatenate([g[1] for g in got]) if got else np.zeros(0, np.int64)
    order = np.argsort(k0, kind="stable")
    k0, k1 = k0[order], k1[order]
    # overlapping or touching ranges of a block merged (the keys keep blocks apart)
    reach_ = np.maximum.accumulate(k1) if len(k1) else k1
    new = np.ones(len(k0), bool)
    new[1:] = k0[1:] > reach_[:-1]
    first = np.flatnonzero(new)
    rb = k0[first] // big
    j0 = k0[first] - rb * big
    j1 = (np.maximum.reduceat(k1, first) if len(first) else k1[:0]) - rb * big
    if auto:                                   # partners after the block's first anchor only
        j0 = np.maximum(j0, a0[rb] + 1)
        keep = j0 < j1
        rb, j0, j1 = rb[keep], j0[keep], j1[keep]
    # pieces of at most chunk partners a group: the ranges cut at multiples of chunk of
    # their block's running count of partners, and a group per (block, multiple)
    ln = j1 - j0
    total = int(ln.sum())
    chunk = wg * max(MIN_CHUNK_TILES, -(-total // (wg * max(MAX_GROUPS - nb, nb, 1))))
    chunk = min(chunk, ((1 << 32) - 1) // wg // wg * wg)
    start = np.zeros(len(ln), np.int64)
    if len(ln):
        cs = np.cumsum(ln)
        bstart = np.searchsorted(rb, np.arange(nb))             # first range of each block
        has = bstart < len(rb)
        base = np.zeros(nb, np.int64)
        base[has] = cs[bstart[has]] - ln[bstart[has]]
        start = cs - ln - base[rb]                               # within the block
    k0, k1 = start // chunk, (start + ln - 1) // chunk
    npc = k1 - k0 + 1
    pr = np.repeat(np.arange(len(ln)), npc)
    kk = k0[pr] + (np.arange(len(pr)) - np.repeat(np.cumsum(npc) - npc, npc))
    lo = np.maximum(start[pr], kk * chunk) - start[pr] + j0[pr]
    hi = np.minimum(start[pr] + ln[pr], (kk + 1) * chunk) - start[pr] + j0[pr]
    pb = rb[pr]
    gkey = pb * (int(kk.max()) + 1 if len(kk) else 1) + kk
    newg = np.ones(len(gkey), bool)
    newg[1:] = gkey[1:] != gkey[:-1]
    gfirst = np.flatnonzero(newg)
    gb = pb[gfirst]
    gtab = np.empty((len(gfirst), 4), np.uint32)
    gtab[:, 0], gtab[:, 1] = a0[gb], a1[gb]
    gtab[:, 2] = gfirst
    gtab[:, 3] = np.append(gfirst[1:], len(gkey))
    rtab = np.stack([lo, hi], 1).astype(np.uint32)
    return gtab, rtab, int(chunk)


def sorted_by(queue, bufs, n, perm):
    """The device buffers ``bufs`` (float64, n used) in the grid's order ``perm``:
    new buffers (gathered on the device)."""
    perm = perm.with_queue(queue)
    return [cla.take(cla.Array(queue, (n,), np.float64, data=b), perm, queue=queue).data for b in bufs]
