"""``clkernels.pairs_within``: all pairs at distance d <= r.

Every result must equal the float64 brute-force evaluation of the distances
from the given coordinates (``helpers.distances``), pair for pair: self pairs
(i < j) once each, cross pairs every (i in x, j in y), no duplicates, nothing
missing or extra, with zero tolerance. Radii are mostly taken from the
reference distances themselves (exact ties at r, which d <= r includes).

The collection machinery is driven hard: pools far smaller than the result
(one page of 16 records, two pages of 4, pages of one record), the 'scan'
method in batches of a few records, writers whose records outlast the whole
pool (they resume, skipping what they placed), and both methods must agree.

PoCL economy: each (dims, dtype, periodic, output) is a kernel build, so the
full dims x dtype sweeps are test_open_random and test_periodic_random (and
the lattices); the others mostly use d = 2 or 3. Sizes are a few hundred
points (a few thousand in two tests).
"""

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from helpers import clustered, distances, lattice, ties, uniform, unwrap

DTYPES = [np.float32, np.float64]


def need_fp64(device, dtype=np.float64):
    if np.dtype(dtype) == np.float64 and not device.fp64:
        pytest.skip("no fp64")


def reference(X, r, Y=None, box=None, block=512):
    """(i, j, d) of the pairs with float64 d <= r, in lexicographic (i, j) order
    (``helpers.distances`` over blocks of rows: the same evaluation, elementwise)."""
    X = np.asarray(X)
    Yv = X if Y is None else np.asarray(Y)
    out = [(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))]
    for a in range(0, len(X), block):
        D = distances(X[a:a + block], Yv, box).reshape(-1, len(Yv)) if len(Yv) else np.empty((0, 0))
        i, j = np.nonzero(D <= r)
        if Y is None:
            keep = j > i + a
            i, j = i[keep], j[keep]
        out.append((i.astype(np.int64) + a, j.astype(np.int64), D[i, j]))
    return tuple(np.concatenate(c) for c in zip(*out))


def check(out, X, r, Y=None, box=None, *, sort=False, return_distances=False, ref=None):
    """``out`` of pairs_within(X, r, y=Y, box=box) equals the reference pair set
    exactly (no duplicates); ``sort``: in (i, j) order; ``return_distances``:
    d equals the reference distances bit for bit. Returns the number of pairs."""
    ri, rj, rd = reference(X, r, Y, box) if ref is None else ref
    assert isinstance(out, tuple) and len(out) == (3 if return_distances else 2), type(out)
    i, j = out[0], out[1]
    for a in (i, j):
        assert isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1, \
            (type(a), getattr(a, "dtype", None), getattr(a, "shape", None))
    assert i.shape == j.shape, (i.shape, j.shape)
    nx = len(X)
    ny = nx if Y is None else len(Y)
    if len(i):
        assert i.min() >= 0 and i.max() < nx and j.min() >= 0 and j.max() < ny, "index out of range"
    if Y is None:
        assert (i < j).all(), f"self pairs must have i < j: {np.flatnonzero(i >= j)[:10]}"
    key = i * max(ny, 1) + j
    want = ri * max(ny, 1) + rj
    u, c = np.unique(key, return_counts=True)
    dup = u[c > 1]
    assert len(dup) == 0, f"{len(dup)} pairs repeated, e.g. {[divmod(int(k), ny) for k in dup[:5]]}"
    missing = np.setdiff1d(want, key)
    extra = np.setdiff1d(key, want)
    assert len(missing) == 0 and len(extra) == 0, \
        (f"{len(missing)} missing, e.g. {[divmod(int(k), ny) for k in missing[:5]]}; "
         f"{len(extra)} extra, e.g. {[divmod(int(k), ny) for k in extra[:5]]}; "
         f"got {len(key)}, want {len(want)}")
    if sort:
        assert np.array_equal(i, ri) and np.array_equal(j, rj), "sort=True: not in (i, j) order"
    if return_distances:
        d = out[2]
        assert isinstance(d, np.ndarray) and d.dtype == np.float64 and d.shape == i.shape, \
            (type(d), getattr(d, "dtype", None), getattr(d, "shape", None))
        order = np.argsort(key, kind="stable")
        bad = np.flatnonzero(d[order] != rd)
        assert len(bad) == 0, f"{len(bad)} distances differ, e.g. {d[order][bad[:3]]} vs {rd[bad[:3]]}"
    return len(i)


def at_fraction(D, frac, hi=np.inf):
    """A reference distance (an exact tie) with about ``frac`` of the positive
    distances <= it, at most ``hi``."""
    p = np.sort(D[(D > 0) & (D <= hi)])
    return float(p[int(frac * (len(p) - 1))])


class Progress:
    def __init__(self):
        self.calls = []

    def __call__(self, n):
        self.calls.append(n)

    def check(self, total, *, required=True):
        c = self.calls
        if required or c:
            assert c, "progress was never called"
            assert all(isinstance(v, (int, np.integer)) for v in c), c
            assert all(b >= a for a, b in zip(c, c[1:])), f"progress decreased: {c[:20]}"
            assert c[-1] == total, (c[-1], total)
            assert c[0] >= 0


# ====================================================== random inputs, every dimension

#: per dims: points (self), points of y (cross), fraction of the pairs within r
SIZES = {1: (300, 120, 0.02), 2: (500, 150, 0.01), 3: (500, 150, 0.01), 4: (400, 150, 0.01),
         5: (400, 120, 0.01), 6: (300, 120, 0.01), 7: (300, 100, 0.01), 8: (300, 100, 0.01)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", range(1, 9))
def test_open_random(device, rng, d, dtype):
    """Uniform and clustered points, self and cross, r an exact pair distance."""
    need_fp64(device, dtype)
    n, m, frac = SIZES[d]
    for gen in (uniform, clustered):
        X = gen(rng, n, d, dtype)
        D = distances(X)
        r = at_fraction(D, frac)
        check(clkernels.pairs_within(X, r, device=device), X, r)
        Y = gen(rng, m, d, dtype)
        Y[:5] = X[-5:]                                  # some shared points: d = 0 across
        r = at_fraction(distances(X, Y), 2 * frac)
        check(clkernels.pairs_within(X, r, y=Y, device=device), X, r, Y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", range(1, 9))
def test_periodic_random(device, rng, d, dtype):
    """Periodic boxes of unequal sides, a third of the points outside [0, L)
    (1 to 3 boxes away, either side; far away: test_periodic_far_images), r
    from small up to exactly half the shortest side. (A fixed pool: the
    estimate's count kernel is exercised by the open sweep; a build less.)"""
    need_fp64(device, dtype)
    n, m, frac = SIZES[d]
    pool = dict(npages=64, page=16)
    box = rng.uniform(0.6, 1.4, d)
    box[rng.integers(d)] = 1.0
    half = 0.5 * float(box.min())
    for gen in (uniform, clustered):
        X = np.mod(gen(rng, n, d, np.float64), box).astype(dtype)
        k = rng.integers(0, n, n // 3)
        X[k] = unwrap(rng, X[k], box, 1, 3)                 # wrapped points, both signs
        D = distances(X, box=box)
        for r in (min(at_fraction(D, frac), half), half):
            check(clkernels.pairs_within(X, r, box=box, device=device, **pool), X, r, box=box)
        Y = np.mod(gen(rng, m, d, np.float64), box).astype(dtype)
        Y[::4] = unwrap(rng, Y[::4], box, 1, 3)
        r = min(at_fraction(distances(X, Y, box), 2 * frac), half)
        check(clkernels.pairs_within(X, r, y=Y, box=box, device=device, **pool), X, r, Y, box)
    # a scalar box is a cube
    X = (rng.random((200, d)) * 0.8).astype(dtype)
    r = 0.2 if d < 4 else 0.4
    check(clkernels.pairs_within(X, r, box=0.8, device=device, **pool), X, r, box=np.full(d, 0.8))


def test_larger_clustered(device, rng):
    """A few thousand clustered points in 2-D and 3-D (dense cells, long rows)."""
    for d, n in ((2, 3000), (3, 2500)):
        X = clustered(rng, n, d, np.float32)
        r = 0.01 if d == 2 else 0.025
        got = check(clkernels.pairs_within(X, r, device=device), X, r)
        assert got > 5 * n, got                                 # many pairs per point
        Y = clustered(rng, 300, d, np.float32)
        check(clkernels.pairs_within(X, r, y=Y, device=device), X, r, Y)


def test_sampled_estimate(device, rng):
    """More writers than the estimate samples (4096): the pool is sized from a
    sample; skewed data (one dense clump among sparse points) still comes out
    whole, through however many rounds the estimate's miss takes."""
    n = 6000
    X = rng.random((n, 2)).astype(np.float32)
    X[:300] = (0.5 + 0.002 * rng.standard_normal((300, 2))).astype(np.float32)     # 45k pairs in a clump
    r = 0.01
    ref = reference(X, r)
    prog = Progress()
    k = check(clkernels.pairs_within(X, r, device=device, progress=prog), X, r, ref=ref)
    prog.check(k)
    Y = rng.random((100, 2)).astype(np.float32)
    check(clkernels.pairs_within(X, r, y=Y, device=device), X, r, Y)


@pytest.mark.parametrize("dtype,scale,kind", [
    (np.float32, 1e-20, "spread"), (np.float32, 1e20, "spread"), (np.float32, 1e4, "offset"),
    (np.float64, 1e-150, "spread"), (np.float64, 1e150, "spread"), (np.float64, 1e8, "offset")])
def test_scales(device, rng, dtype, scale, kind):
    """Exact at any finite scale: tiny and huge coordinates, and points far
    from the origin whose differences are far below the coordinates."""
    need_fp64(device, dtype)
    if kind == "spread":
        X = ((2 * rng.random((400, 3)) - 1) * scale).astype(dtype)
        Y = ((2 * rng.random((100, 3)) - 1) * scale).astype(dtype)
    else:
        X = (scale * (1 + 1e-3 * rng.random((400, 3)))).astype(dtype)
        Y = (scale * (1 + 1e-3 * rng.random((100, 3)))).astype(dtype)
    X[:4] = X[4:8]                                                       # duplicates
    D = distances(X)
    for r in (at_fraction(D, 0.01), 0.0):
        check(clkernels.pairs_within(X, r, device=device, return_distances=True), X, r,
              return_distances=True)
    r = at_fraction(distances(X, Y), 0.02)
    check(clkernels.pairs_within(X, r, y=Y, device=device), X, r, Y)


#: regression (periodic grids once built without the points' bounds): two float64 points,
#: one ~6500 boxes away, at d == r exactly; the pair was dropped
FAR_PAIR = np.array([[-6546.631916742752, -3190.2221601311403, -2651.3564290758186, 3769.803644172513],
                     [0.1923324077634445, 0.6973915038045227, 0.13640180240645006, 0.715597405415115]])
FAR_BOX = np.array([0.6711085906752454, 1.0, 1.3688794149910934, 1.1213993644441187])
FAR_R = float.fromhex("0x1.89b92b84ce6dcp-3")


def test_periodic_far_images(device, rng):
    """Points 10^2..10^5 boxes away from [0, L) (unwrapped trajectories), r
    on exact pair distances: the pairs of the minimum image of the given
    coordinates, float32 and float64, self and cross."""
    assert FAR_PAIR.dtype == np.float64 and distances(FAR_PAIR, box=FAR_BOX)[0] == FAR_R
    check(clkernels.pairs_within(FAR_PAIR, FAR_R, box=FAR_BOX, device=device), FAR_PAIR, FAR_R, box=FAR_BOX)
    for dtype in DTYPES:
        need_fp64(device, dtype)
        for d in (1, 3, 4):
            box = rng.uniform(0.6, 1.4, d)
            X = (rng.random((200, d)) * box).astype(dtype)
            X[::2] = unwrap(rng, X[::2], box, 1e2, 1e4)
            X[1::4] = unwrap(rng, X[1::4], box, 1e4, 1e5)
            D = distances(X, box=box)
            for r in ties(D, 3, rng, 0.0, 0.5 * box.min()):
                check(clkernels.pairs_within(X, float(r), box=box, device=device, return_distances=True), X,
                      r, box=box, return_distances=True)
            Y = unwrap(rng, (rng.random((80, d)) * box).astype(dtype), box, 1e2, 1e4)
            for r in ties(distances(X, Y, box), 2, rng, 0.0, 0.5 * box.min()):
                check(clkernels.pairs_within(X, float(r), y=Y, box=box, device=device), X, r, Y, box)


# ================================================================= ties at r

LATTICE_SIDE = {1: 250, 2: 16, 3: 7, 4: 4, 5: 3, 6: 3, 7: 2, 8: 2}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spacing", [1.0, 0.1])
@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
def test_lattice_ties(device, rng, d, spacing, dtype):
    """Integer lattices: r exactly a lattice distance (several pairs on it),
    self and cross, open and in a periodic box the lattice fills (r up to
    half the box, where the minimum image ties both ways)."""
    need_fp64(device, dtype)
    n_side = LATTICE_SIDE[d]
    X = lattice(n_side, d, spacing, dtype)
    if len(X) > 300:
        X = X[np.sort(rng.choice(len(X), 300, replace=False))]
    D = distances(X)
    u = np.unique(D)
    rs = list(ties(D, 3, rng, 0.0, 0.5 * u[-1])) + [float(u[1])]     # u[1]: the nearest neighbours
    for r in rs:
        n = check(clkernels.pairs_within(X, float(r), device=device), X, r)
        assert n >= 1
    # cross: two halves of the lattice
    A, B = X[::2], X[1::2]
    Dc = distances(A, B)
    for r in ties(Dc, 2, rng, 0.0, 0.5 * Dc.max()):
        check(clkernels.pairs_within(A, float(r), y=B, device=device), A, r, B)
    # periodic: the full lattice fills its box (n_side * spacing a side)
    Xp = lattice(n_side, d, spacing, dtype)
    if len(Xp) > 300:
        Xp = Xp[np.sort(rng.choice(len(Xp), 300, replace=False))]
    box = np.full(d, n_side * spacing)
    half = 0.5 * float(box.min())
    Dp = distances(Xp, box=box)
    for r in list(ties(Dp, 2, rng, 0.0, half)) + [half]:
        check(clkernels.pairs_within(Xp, float(r), box=box, device=device), Xp, r, box=box)


def test_lattice_ties_small_pool(device, rng):
    """Ties at r through a pool of one page of 16 and through 'scan' batches."""
    X = lattice(7, 3, 0.1, np.float32)
    D = distances(X)
    r = float(np.unique(D)[3])
    ref = reference(X, r)
    assert (D == r).sum() > 100
    check(clkernels.pairs_within(X, r, device=device, npages=1, page=16), X, r, ref=ref)
    check(clkernels.pairs_within(X, r, device=device, method="scan", max_device_bytes=64), X, r, ref=ref)


# ======================================================== empty, zero, duplicates

def test_zero_results(device, rng):
    """r below every distance: no pair (for either method), typed empty results."""
    for dtype in DTYPES:
        need_fp64(device, dtype)
        X = uniform(rng, 300, 3, dtype)
        Y = uniform(rng, 100, 3, dtype)
        dmin = min(distances(X).min(), distances(X, Y).min())
        assert dmin > 0
        r = 0.5 * float(dmin)
        for method in ("pages", "scan"):
            for y in (None, Y):
                prog = Progress()
                out = clkernels.pairs_within(X, r, y=y, device=device, method=method,
                                             return_distances=True, progress=prog)
                assert check(out, X, r, y, return_distances=True) == 0
                prog.check(0, required=False)
            box = np.ones(3)
            check(clkernels.pairs_within(X, min(r, 0.5), box=box, device=device, method=method), X,
                  min(r, 0.5), box=box)
        check(clkernels.pairs_within(X, 0, device=device), X, 0.0)          # r = 0, no duplicates


def test_r_zero_duplicates(device, rng):
    """r = 0: exactly the pairs of identical points (self and cross, open and
    periodic, where images of a point one box apart are identical too)."""
    for dtype in DTYPES:
        need_fp64(device, dtype)
        X = uniform(rng, 400, 2, dtype)
        X[rng.integers(0, 400, 60)] = X[rng.integers(0, 400, 60)]
        X[:8] = X[8]                                            # a group of 9 identical points
        ref = reference(X, 0.0)
        assert len(ref[0]) >= 36
        for method in ("pages", "scan"):
            check(clkernels.pairs_within(X, 0.0, device=device, method=method), X, 0.0, ref=ref)
        check(clkernels.pairs_within(X, 0.0, device=device, npages=1, page=4), X, 0.0, ref=ref)
        Y = uniform(rng, 100, 2, dtype)
        Y[::3] = X[rng.integers(0, 400, len(Y[::3]))]
        check(clkernels.pairs_within(X, 0.0, y=Y, device=device), X, 0.0, Y)
        # periodic, points on a 1/64 grid (exact in float32) and their images
        box = np.array([1.0, 2.0])
        G = (rng.integers(0, 16, (300, 2)) / 16.0 * box).astype(dtype)
        G[::5] += (rng.integers(-3, 4, (len(G[::5]), 2)) * box).astype(dtype)
        ref = reference(G, 0.0, box=box)
        assert len(ref[0]) > 10
        check(clkernels.pairs_within(G, 0.0, box=box, device=device), G, 0.0, box=box, ref=ref)
        check(clkernels.pairs_within(G, 0.0, box=box, device=device, return_distances=True), G, 0.0,
              box=box, ref=ref, return_distances=True)


def test_all_identical(device):
    """All points identical: every pair, at r = 0 and r > 0."""
    X = np.full((300, 3), 0.25, np.float32)
    Y = np.full((40, 3), 0.25, np.float32)
    for r in (0.0, 0.1):
        check(clkernels.pairs_within(X, r, device=device), X, r)
        check(clkernels.pairs_within(X, r, y=Y, device=device), X, r, Y)


def test_empty_and_single(device, rng):
    """No points, one point, cross with an empty side or single points."""
    for dtype in DTYPES:
        need_fp64(device, dtype)
        E = np.zeros((0, 3), dtype)
        one = uniform(rng, 1, 3, dtype)
        two = np.vstack([one, one + dtype(0.01)])
        some = uniform(rng, 50, 3, dtype)
        cases = [(E, None), (one, None), (E, some), (some, E), (E, E), (one, one), (one, some),
                 (some, one), (two, None)]
        for X, Y in cases:
            for kw in (dict(), dict(box=np.ones(3)), dict(method="scan"),
                       dict(return_distances=True, sort=True)):
                out = clkernels.pairs_within(X, 0.5, y=Y, device=device, **kw)
                check(out, X, 0.5, Y, kw.get("box"), return_distances=kw.get("return_distances", False),
                      sort=kw.get("sort", False))
    # a 1-D array is n points of one dimension
    x = np.array([0.0, 0.5, 1.5, 1.0])
    check(clkernels.pairs_within(x, 0.5, device=device), x[:, None], 0.5)


def test_integer_input(device):
    """Integer coordinates are float64 coordinates."""
    X = lattice(5, 2, 1.0, np.int64)
    want = clkernels.pairs_within(X.astype(np.float64), 1.0, device=device, sort=True)
    got = clkernels.pairs_within(X, 1, device=device, sort=True)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    check(got, X.astype(np.float64), 1.0, sort=True)


def test_array_layouts(device, rng):
    """Fortran order, strided views, nested lists and float16 (as float32):
    the pairs of the same coordinates."""
    X = clustered(rng, 400, 3, np.float32)
    r = 0.04
    want = reference(X, r)
    for x in (np.asfortranarray(X), np.repeat(X, 2, axis=0)[::2], X.tolist()):
        xx = np.asarray(x, np.float64) if isinstance(x, list) else X
        check(clkernels.pairs_within(x, r, device=device), xx, r)
    check(clkernels.pairs_within(np.asfortranarray(X), r, device=device), X, r, ref=want)
    H = X.astype(np.float16)
    check(clkernels.pairs_within(H, r, device=device), H.astype(np.float32), r)


# ============================================== results many times the pool

def _pool_data(rng, n=600, m=150, r=0.02):
    X = clustered(rng, n, 2, np.float32)
    Y = (X[rng.integers(0, n, m)] + 0.01 * rng.standard_normal((m, 2))).astype(np.float32)
    return X, r, Y


POOLS = {
    "default": dict(),
    "1x16": dict(npages=1, page=16, stage=0),          # stage 0: the paper's writers
    "2x4": dict(npages=2, page=4, stage=0),
    "page1": dict(page=1, stage=0),
    "3x1": dict(npages=3, page=1),                    # 'auto'
    "bytes-2pages": dict(page=8, max_device_bytes=2 * 8 * 24, stage=0),
    "staged": dict(stage=2),                          # (stages of 2 and 16 only: fewer builds)
    "staged-1x16": dict(npages=1, page=16, stage=2),
    "staged-2x4": dict(npages=2, page=4, stage=16),
    "staged-page1": dict(page=1, stage=16),
    "scan": dict(method="scan"),
    "scan-64B": dict(method="scan", max_device_bytes=64),
    "scan-8B": dict(method="scan", max_device_bytes=8),
}


@pytest.mark.parametrize("pool", list(POOLS))
def test_small_pools(device, rng, pool):
    """Results many times the pool (or the scan batch): every pair exactly
    once, progress non-decreasing up to the total, both methods the same set."""
    kw = POOLS[pool]
    if pool == "3x1":                       # one record per page: keep the rounds few (~80 pairs)
        X, _, Y = _pool_data(rng, 150, 40)
        r = float(np.sort(distances(X))[79])
    else:
        X, r, Y = _pool_data(rng)
    ref = reference(X, r)
    assert len(ref[0]) > (50 if pool == "3x1" else 2000), len(ref[0])
    prog = Progress()
    n = check(clkernels.pairs_within(X, r, device=device, progress=prog, **kw), X, r, ref=ref)
    prog.check(n)
    if kw.get("npages") or kw.get("max_device_bytes"):
        assert len(prog.calls) > 1, f"one round only: {prog.calls}"
    prog = Progress()
    n = check(clkernels.pairs_within(X, r, y=Y, device=device, progress=prog, sort=True, **kw), X, r, Y,
              sort=True)
    assert n > 0
    prog.check(n)


def test_writer_outlasts_pool(device, rng):
    """Writers with far more records than the whole pool resume round after
    round, skipping what they placed (identical points: writer 0 has n - 1)."""
    for g, configs in ((40, (dict(npages=1, page=8, stage=0), dict(npages=2, page=16, stage=0), dict(npages=3, page=5),
                             dict(npages=1, page=8, stage=2), dict(npages=3, page=5, stage=16),
                             dict(method="scan", max_device_bytes=8),
                             dict(method="scan", max_device_bytes=64))),
                       (12, (dict(npages=1, page=1, stage=0), dict(npages=2, page=1)))):
        X = np.full((2 * g, 2), 0.5, np.float32)
        X[g:] = 0.75                                    # two groups of g identical points
        ref = reference(X, 0.1)
        for kw in configs:
            prog = Progress()
            n = check(clkernels.pairs_within(X, 0.1, device=device, progress=prog, **kw), X, 0.1, ref=ref)
            assert n == g * (g - 1)
            prog.check(n)
            if kw.get("method") != "scan":
                assert len(prog.calls) >= n / (kw["npages"] * kw["page"]), len(prog.calls)
    Y = np.full((30, 2), 0.5, np.float32)
    check(clkernels.pairs_within(X, 0.1, y=Y, device=device, npages=1, page=4), X, 0.1, Y)
    check(clkernels.pairs_within(X, 0.1, y=Y, device=device, method="scan", max_device_bytes=8), X, 0.1, Y)


def test_methods_agree(device, rng):
    """'pages' and 'scan' give the same set (and, sorted, the same arrays),
    periodic and open, float64 too."""
    for dtype in DTYPES:
        need_fp64(device, dtype)
        X = clustered(rng, 500, 3, dtype)
        for box in (None, np.array([1.0, 1.2, 0.9])):
            r = 0.03
            outs = [clkernels.pairs_within(X, r, box=box, device=device, method=m, sort=True,
                                           return_distances=True, **kw)
                    for m, kw in (("pages", {}), ("pages", dict(npages=3, page=8)),
                                  ("pages", dict(stage=2)), ("pages", dict(npages=3, page=8, stage=2)), ("scan", {}),
                                  ("scan", dict(max_device_bytes=256)))]
            for o in outs:
                check(o, X, r, box=box, sort=True, return_distances=True)
            for o in outs[1:]:
                for a, b in zip(o, outs[0]):
                    assert np.array_equal(a, b)


@pytest.mark.slow
def test_many_rounds_large(device, rng):
    """Thousands of rounds: pages of one record, two of them, on ~10^4 pairs."""
    X = clustered(rng, 1500, 3, np.float32)
    r = 0.015
    ref = reference(X, r)
    prog = Progress()
    n = check(clkernels.pairs_within(X, r, device=device, npages=2, page=1, progress=prog), X, r, ref=ref)
    prog.check(n)
    check(clkernels.pairs_within(X, r, device=device, method="scan", max_device_bytes=8), X, r, ref=ref)


# ===================================================== sort, distances, progress

@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_distances(device, rng, dtype):
    """sort=True: lexicographic (i, j); return_distances: the float64 reference
    distance of each pair, bit for bit, sorted or not, open and periodic."""
    need_fp64(device, dtype)
    X = clustered(rng, 400, 3, dtype)
    Y = uniform(rng, 150, 3, dtype)
    box = np.array([1.1, 0.9, 1.0])
    Xw = X.copy()
    Xw[::3] = unwrap(rng, X[::3], box, 1, 3)
    for x, y, b, r in ((X, None, None, 0.04), (X, Y, None, 0.08), (Xw, None, box, 0.04),
                       (Xw, Y, box, 0.08)):
        for s in (False, True):
            out = clkernels.pairs_within(x, r, y=y, box=b, device=device, sort=s, return_distances=True)
            check(out, x, r, y, b, sort=s, return_distances=True)
            assert (out[2] <= r).all()
        out = clkernels.pairs_within(x, r, y=y, box=b, device=device, sort=True)
        check(out, x, r, y, b, sort=True)
        i, j = out
        assert ((np.diff(i) > 0) | ((np.diff(i) == 0) & (np.diff(j) > 0))).all()


def test_progress(device, rng):
    """progress: called after each round/batch, non-decreasing, ending at the
    total; the default pool usually takes one round."""
    X = clustered(rng, 500, 2, np.float32)
    r = 0.02
    ref = reference(X, r)
    for kw in (dict(), dict(npages=4, page=8), dict(method="scan"), dict(method="scan", max_device_bytes=256)):
        prog = Progress()
        n = check(clkernels.pairs_within(X, r, device=device, progress=prog, **kw), X, r, ref=ref)
        prog.check(n)
        # True (a bar or lines on stderr) and False (nothing), as every other call takes them
        for flag in (True, False):
            check(clkernels.pairs_within(X, r, device=device, progress=flag, **kw), X, r, ref=ref)
    with pytest.raises(ValueError, match="progress"):
        clkernels.pairs_within(X, r, device=device, progress="yes")


# ============================================================== device arrays

def test_device_arrays(device, rng):
    """pyopencl arrays in (x, y or both; device= given or taken from the
    arrays' queue): the same pairs and distances as numpy inputs."""
    for dtype in DTYPES:
        need_fp64(device, dtype)
        X = clustered(rng, 400, 3, dtype)
        Y = uniform(rng, 120, 3, dtype)
        box = np.array([1.0, 1.0, 1.2])
        xd = cla.to_device(device.queue, X)
        yd = cla.to_device(device.queue, Y)
        r = 0.05
        for b in (None, box):
            want = clkernels.pairs_within(X, r, box=b, device=device, sort=True, return_distances=True)
            check(want, X, r, box=b, sort=True, return_distances=True)
            for dv in (device, None):
                got = clkernels.pairs_within(xd, r, box=b, device=dv, sort=True, return_distances=True)
                for a, w in zip(got, want):
                    assert np.array_equal(a, w)
            wantc = clkernels.pairs_within(X, r, y=Y, box=b, device=device, sort=True, return_distances=True)
            check(wantc, X, r, Y, b, sort=True, return_distances=True)
            for xx, yy, dv in ((xd, yd, None), (xd, yd, device), (xd, Y, None), (X, yd, device)):
                got = clkernels.pairs_within(xx, r, y=yy, box=b, device=dv, sort=True, return_distances=True)
                for a, w in zip(got, wantc):
                    assert np.array_equal(a, w)
            got = clkernels.pairs_within(xd, r, box=b, device=device, method="scan", max_device_bytes=64)
            check(got, X, r, box=b)
        # the inputs are left as they were
        assert np.array_equal(xd.get(), X) and np.array_equal(yd.get(), Y)
    # a 1-D device array is n points of one dimension
    x = np.array([0.0, 0.25, 1.0, 1.5], np.float32)
    check(clkernels.pairs_within(cla.to_device(device.queue, x), 0.5, device=device), x[:, None], 0.5)


# ================================================================ bad inputs

@pytest.mark.parametrize("periodic", [False, True], ids=["open", "periodic"])
def test_nonfinite_coordinates(device, rng, periodic):
    """NaN or inf in x or y (numpy or device arrays): a ValueError naming it."""
    X = uniform(rng, 50, 3, np.float32)
    Y = uniform(rng, 20, 3, np.float32)
    kw = dict(box=np.ones(3)) if periodic else {}
    pw = clkernels.pairs_within
    for bad_value in (np.nan, np.inf, -np.inf):
        bx, by = X.copy(), Y.copy()
        bx[7, 1] = by[3, 2] = bad_value
        for xx, yy, name in ((bx, None, "x"), (bx, Y, "x"), (X, by, "y"),
                             (cla.to_device(device.queue, bx), None, "x")):
            with pytest.raises(ValueError, match=f"{name} .*(NaN|inf|finite)"):
                pw(xx, 0.1, y=yy, device=device, **kw)


def test_bad_inputs(device, rng):
    X = uniform(rng, 50, 3, np.float32)
    Y = uniform(rng, 20, 3, np.float32)
    pw = clkernels.pairs_within
    with pytest.raises(ValueError, match="r must be >= 0"):
        pw(X, -0.1, device=device)
    with pytest.raises(ValueError, match="r must be finite"):
        pw(X, float("nan"), device=device)
    with pytest.raises(ValueError, match="r must be finite"):
        pw(X, np.inf, device=device)
    with pytest.raises(TypeError, match="r must be a real number"):
        pw(X, "0.1", device=device)
    with pytest.raises(TypeError, match="r must be a real number"):
        pw(X, [0.1, 0.2], device=device)
    # shapes, dims, dtypes
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        pw(np.zeros((4, 3, 2), np.float32), 0.1, device=device)
    with pytest.raises(ValueError, match="dimensions"):
        pw(np.zeros((4, 9), np.float32), 0.1, device=device)
    with pytest.raises(ValueError, match="dimensions"):
        pw(np.zeros((4, 0), np.float32), 0.1, device=device)
    with pytest.raises(ValueError, match="dimensions"):
        pw(X, 0.1, y=np.zeros((5, 2), np.float32), device=device)
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        pw(X, 0.1, y=np.zeros((5, 3, 1), np.float32), device=device)
    with pytest.raises(TypeError, match="dtype"):
        pw(X, 0.1, y=Y.astype(np.float64), device=device)
    with pytest.raises(TypeError, match="float32 or float64"):
        pw(X.astype(np.complex64), 0.1, device=device)
    with pytest.raises(TypeError, match="x is required"):
        pw(None, 0.1, device=device)
    # periodic box
    with pytest.raises(ValueError, match="half"):
        pw(X, 0.51, box=np.ones(3), device=device)
    with pytest.raises(ValueError, match="half"):
        pw(X, 0.45, box=[1.0, 2.0, 0.8], device=device)          # the shortest side rules
    with pytest.raises(ValueError, match="box"):
        pw(X, 0.1, box=[1.0, 1.0], device=device)
    with pytest.raises(ValueError, match="box"):
        pw(X, 0.1, box=[1.0, 0.0, 1.0], device=device)
    with pytest.raises(ValueError, match="box"):
        pw(X, 0.1, box=[1.0, np.nan, 1.0], device=device)
    check(pw(X, 0.5, box=np.ones(3), device=device), X, 0.5, box=np.ones(3))   # exactly half: allowed
    # collection options
    with pytest.raises(ValueError, match="method"):
        pw(X, 0.1, method="bogus", device=device)
    with pytest.raises(ValueError, match="page"):
        pw(X, 0.1, page=0, device=device)
    with pytest.raises(ValueError, match="npages"):
        pw(X, 0.1, npages=-1, device=device)
    with pytest.raises(ValueError, match="npages"):
        pw(X, 0.1, npages=0, device=device)
    with pytest.raises(ValueError, match="page"):
        pw(X, 0.1, page=2.5, device=device)
    with pytest.raises(ValueError, match="page"):
        pw(X, 0.1, page=True, device=device)
    for bad in (3, 32, True, -1):
        with pytest.raises(ValueError, match="stage"):
            pw(X, 0.1, stage=bad, device=device)
    with pytest.raises(ValueError, match="stage"):
        pw(X, 0.1, stage=4, method="scan", device=device)
    with pytest.raises(ValueError, match="max_device_bytes"):
        pw(X, 0.1, max_device_bytes=0, device=device)
    with pytest.raises(ValueError, match="max_device_bytes"):
        pw(X, 0.1, max_device_bytes=64, device=device)               # < one page of 16 x 24 bytes
    with pytest.raises(ValueError, match="max_device_bytes"):
        pw(X, 0.1, max_device_bytes=95, page=4, device=device)
    check(pw(X, 0.1, max_device_bytes=96, page=4, device=device), X, 0.1)      # exactly one page
    check(pw(X, 0.1, max_device_bytes=64, method="scan", device=device), X, 0.1)
    with pytest.raises(TypeError, match="device"):
        pw(X, 0.1, device=42)
    with pytest.raises(ValueError, match="exceeds"):
        pw(X, 0.5, page=2 ** 16, npages=2 ** 16, device=device)          # 2^32 records in one pool
    with pytest.raises(TypeError, match="float32 or float64"):
        pw(cla.to_device(device.queue, np.zeros((5, 3), np.int32)), 0.1, device=device)


def test_pool_grows_after_an_underestimate(device, rng, monkeypatch):
    """A first pool far too small (as a sample that missed a clump gives) doubles
    round after round: a few rounds, not one per page, and every pair once."""
    from clkernels.host.outputs import pairs as P

    monkeypatch.setattr(P, "pool_pages", lambda spec, dev, estimate, writers, dense=False, ordered=False: 1)
    X = np.concatenate([uniform(rng, 300, 3, np.float32) * 100, np.full((40, 3), 0.5, np.float32)])
    rounds = []
    got = clkernels.pairs_within(X, 0.01, device=device, page=4, progress=rounds.append)
    check(got, X, 0.01)
    assert len(got[0]) >= 780 and len(rounds) <= 12, rounds


@pytest.mark.parametrize("method", ["pages", "scan"])
def test_ids_mapped_on_the_device(device, rng, method):
    """``within(ids=...)`` (a distributed join's slab under global ids): each
    pair comes out as (min, max) of its points' ids, self and cross, through
    a pool that runs out (pages) and batches (scan); bad ids are refused."""
    from clkernels.host.cellgrid.pairs import within

    X, Y = uniform(rng, 400, 3), uniform(rng, 150, 3)
    ix = rng.permutation(10 ** 6)[:len(X)].astype(np.int64)
    iy = rng.permutation(10 ** 6)[:len(Y)].astype(np.int64)
    kw = dict(method=method, page=4, npages=3) if method == "pages" else dict(method=method, max_device_bytes=240)
    for Yv, ids, (a, b) in ((None, ix, (ix, ix)), (Y, (ix, iy), (ix, iy))):
        ri, rj, _ = reference(X, 0.2, Yv)
        want = sorted(zip(np.minimum(a[ri], b[rj]).tolist(), np.maximum(a[ri], b[rj]).tolist()))
        (i, j), _ = within(device.queue, X, Yv, r=0.2, ids=ids, **kw)
        assert len(want) > 20 and sorted(zip(i.tolist(), j.tolist())) == want
    dev_ids = cla.to_device(device.queue, ix)
    (i, j), _ = within(device.queue, X, r=0.2, ids=dev_ids)
    ri, rj, _ = reference(X, 0.2)
    assert sorted(zip(i.tolist(), j.tolist())) == sorted(zip(np.minimum(ix[ri], ix[rj]).tolist(),
                                                             np.maximum(ix[ri], ix[rj]).tolist()))
    for Yv, bad in ((None, ix[:-1]), (None, ix.astype(np.int32)), (Y, (ix, ix))):
        with pytest.raises(ValueError, match="ids"):
            within(device.queue, X, Yv, r=0.2, ids=bad)
