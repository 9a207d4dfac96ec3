"""Two-body statistics over a cluster (the 2-BS paper, sections 3.5 and 5.5:
the points in blocks, the block pairs spread over the devices).

The pairs are covered by tiles of block pairs, each pair exactly once: with
one point set, the tiles (I, J), I <= J, of the upper triangle -- a diagonal
tile is the library's self call on block I, an off-diagonal one its cross
call (``y=`` block J), cut in two halves of J's rows so that every tile has
the same number of pairs (a diagonal tile has half a full tile's) and the
tiles spread evenly over the workers; with ``y``, every (x block, y
block). Each tile is a task running the library's own public call on its worker's device, so the
exactness rules (d <= r, numpy.histogram's bins, periodic boxes) stay the
library's; the integer partials are added exactly (int64) in a tree on the
workers. A histogram's edges are fixed before tiling: the default range is
computed once from the bounds of all the points, as a single call computes
it. With ``exact=True`` (the default) the result equals the single-device
call's bit for bit; ``exact=False`` leaves ties to each tile.

Blocks: numpy inputs are put once for every worker (read from the client's
memory or memory files by the workers of its host, else scattered to every
worker: :mod:`.transport`) and cut into nb ranges (one for one worker; for several,
the fewest whose nb^2 equal tiles are a multiple of the workers, at least
two a worker, else at least four a worker: ``_nblocks``), or into ranges of
``block=`` rows; dask arrays keep their row chunks (``block=`` rows
rechunks them).
"""

import math

import numpy as np

from ..core import inputs
from ..primitives.points import Bounds
from ..twobody import api
from .common import Blocks, check_client, is_dask, tree_sum
from .transport import Transport


def _nblocks(workers):
    """Blocks a side, so that the nb^2 equal tiles (:func:`_tiles`) spread
    evenly: one for one worker, else the fewest blocks whose tiles are a
    multiple of the workers (at least two tiles each), or failing that (up
    to 8 blocks) at least four tiles a worker."""
    if workers == 1:
        return 1
    for nb in range(2, 9):
        if nb * nb % workers == 0 and nb * nb >= 2 * workers:
            return nb
    nb = 2
    while nb * nb < 4 * workers:
        nb += 1
    return nb


def _points(x, name):
    return inputs.points(x, name).array


def _halves(part):
    ref, lo, hi = part
    mid = (lo + hi) // 2
    return [(ref, lo, mid), (ref, mid, hi)]


def _tiles(T, x, y, block, workers):
    """Tiles of equal work: with one point set, the nb diagonal tiles (I, I)
    (b^2 / 2 pairs each) and every off-diagonal (I, J), I < J, cut in two
    along J's rows (b^2 / 2 each); with y, every (x block, y block)."""
    nb = _nblocks(workers)
    X = Blocks(T, x, "x", nb, block, _points)
    if y is None:
        tiles = []
        for i, a in enumerate(X.parts):
            tiles.append((a, a, True))
            tiles += [(a, h, False) for b in X.parts[i + 1:] for h in _halves(b)]
        return X, None, tiles
    Y = Blocks(T, y, "y", nb, block, _points)
    if Y.d != X.d:
        raise ValueError(f"y has {Y.d} dimensions, expected {X.d}")
    return X, Y, [(a, b, False) for a in X.parts for b in Y.parts]


def _tile(fn, a, alo, ahi, b, blo, bhi, diag, arg, kw):
    x = a[alo:ahi]
    y = None if diag else b[blo:bhi]
    res = fn(x, arg, y=y, **kw)
    return np.asarray(res[0] if isinstance(res, tuple) else res, np.int64)


def _run(T, fn, tiles, arg, kw):
    futs = [T.submit(_tile, fn, fa, alo, ahi, fb, blo, bhi, diag, arg, kw)
            for (fa, alo, ahi), (fb, blo, bhi), diag in tiles]
    return tree_sum(T.client, futs)


def pair_count(client, x, r, *, y=None, box=None, device=None, method="auto", exact=True,
               images="nearest", block=None, **options):
    """:func:`clkernels.pair_count` over the workers of ``client``."""
    workers = check_client(client, device)
    scalar = inputs.radii(r)[1]
    with Transport(client) as T:
        X, Y, tiles = _tiles(T, x, y, block, workers)
        kw = dict(box=box, method=method, exact=exact, images=images, **options)
        total = _run(T, api.pair_count, tiles, r, kw)
    return int(total) if scalar else total


def distance_histogram(client, x, bins=10, range=None, *, y=None, box=None, device=None, method="auto",
                       exact=True, images="nearest", block=None, **options):
    """:func:`clkernels.distance_histogram` over the workers of ``client``;
    the default range is computed once, from every point's bounds, as the
    single call computes it."""
    workers = check_client(client, device)
    with Transport(client) as T:
        X, Y, tiles = _tiles(T, x, y, block, workers)
        if range is None and np.ndim(bins) == 0 and not isinstance(bins, str):
            range = _default_range(T, X, Y, inputs.box(box, X.d))
        edges = inputs.histogram_edges(bins, range)
        kw = dict(box=box, method=method, exact=exact, images=images, **options)
        counts = _run(T, api.distance_histogram, tiles, bins, dict(kw, range=range))
    return counts, edges.edges


def _bounds(a, lo, hi, name):
    p = np.asarray(a[lo:hi], np.float64)
    if not len(p):
        return None
    b = Bounds(p.min(axis=0), p.max(axis=0))
    if not (np.isfinite(b.lo).all() and np.isfinite(b.hi).all()):
        raise ValueError(f"{name} contain NaN or inf")
    return b


def _default_range(T, X, Y, box):
    """The single call's default range (:meth:`clkernels.host.twobody.call.Call.default_range`):
    0 .. half the box's shortest side, or 0 .. the diagonal of every point's
    bounding box widened by a relative 1e-6."""
    if box is not None:
        return (0.0, 0.5 * float(np.min(box)))
    parts = [(p, "x") for p in X.parts] + ([] if Y is None else [(p, "y") for p in Y.parts])
    bs = T.client.gather([T.submit(_bounds, f, lo, hi, name) for (f, lo, hi), name in parts])
    b = Bounds.union(*bs)
    maxd = 0.0 if b is None else b.diagonal
    if not math.isfinite(maxd):
        raise ValueError("the largest pair distance overflows float64: give range=(lo, hi)")
    return (0.0, maxd * (1 + 1e-6))


def points_shape(x, name):
    """(n, d) of a numpy or dask point set (as the library reads its shape)."""
    if is_dask(x):
        shape = x.shape if x.ndim == 2 else (x.shape[0], 1) if x.ndim == 1 else None
        if shape is None:
            raise ValueError(f"{name} must be an (n, d) array, got shape {x.shape}")
        return int(shape[0]), int(shape[1])
    P = inputs.points(x, name)
    return P.n, P.d


__all__ = ["pair_count", "distance_histogram", "points_shape"]
