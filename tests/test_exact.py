"""Issue 12, "Two-body statistics, safe and exact": every finding as a test.

Counts and histograms must equal the float64 evaluation of the distances from
the given coordinates (tests/helpers.py ``distances``), pair for pair, at any
finite scale, with zero tolerance. float64 inputs whose squares would overflow
or underflow double are referenced scaled by a power of two
(``helpers.scaled_distances``), which changes no rounding; thresholds are
compared scaled the same way (exactly). Thresholds (r, radii, bin edges) are
mostly taken from the reference distances themselves, so that pairs lie
exactly on them.

The nine library bugs these tests found when they were written (radii on
ties, float64 overflow in the planner, r = 0 at tiny scales, periodic grid
boundaries, float64 periodic rounding, images='all' histograms, kde_sum
scaling, unrepresentable ranges with exact=False, unnamed option errors) are
fixed; the tests that found them stay.

PoCL economy: every distinct kernel (dims, dtype, variant, stage, number of
bins, ...) is a build, so histograms use NB bins and radii arrays NB radii
wherever the test does not need otherwise; sizes are n ~ 20-250.
"""

import types

import numpy as np
import pyopencl as cl
import pytest

import clkernels
from clkernels.host.core import inputs
from clkernels.host.outputs import HistStage
from clkernels.host.twobody.call import Call
from clkernels.host.twobody.plan import cells_min_pairs
from clkernels.host.twobody.stats import CountStat, HistStat
from helpers import (between, clustered, count, cumulative, distances, histogram, images_for, lattice,
                     scaled_distances, ties, unwrap, water)

VARIANTS = ("naive", "readonly", "lrshm", "regshm", "shuffle")
STAGES = {"global": dict(output="global"),
          "local-reduce": dict(output="local", flush="reduce"),
          "local-atomic": dict(output="local", copies=2, flush="atomic")}
#: the output stage each variant runs with on hostile data (every stage >= once)
VARIANT_STAGE = {"naive": "global", "readonly": "local-reduce", "lrshm": "local-atomic",
                 "regshm": "global", "shuffle": "local-reduce"}
SMALL = dict(wg_size=32, ppw=2)        # several blocks at n ~ 150 on any device
NB = 8                                 # bins / radii per histogram (one build per count)
SCALES32 = (1e-25, 1e-8, 1.0, 1e21, 1e30, 3e38)
SCALES64 = (1e-200, 1e160)
KPC = 3.0857e21                        # 1 kpc in cm


def need_fp64(device, dtype=np.float64):
    if np.dtype(dtype) == np.float64 and not device.fp64:
        pytest.skip("no fp64")


def npairs(X, Y=None):
    return len(X) * (len(X) - 1) // 2 if Y is None else len(X) * len(Y)


def check_count(got, want):
    assert isinstance(got, int), type(got)
    assert got == int(want), (got, int(want))


def check_array(got, want):
    want = np.asarray(want, np.int64)
    assert isinstance(got, np.ndarray) and got.dtype == np.int64 and got.shape == want.shape, \
        (type(got), getattr(got, "dtype", None), getattr(got, "shape", None), want.shape)
    assert (got == want).all(), (got, want, np.flatnonzero(got != want))


def at_quantile(ds, q, hi=np.inf):
    """The reference distance at quantile q among those in (0, hi]: a pair
    distance, so an exact tie (0.0 when there is none)."""
    p = np.sort(ds[(ds > 0) & (ds <= hi)])
    return float(p[int(q * (len(p) - 1))]) if len(p) else 0.0


def n_thresholds(t, n=NB + 1):
    """Exactly n sorted thresholds from t (repeats allowed: bins of width 0 are legal)."""
    t = np.sort(np.asarray(t, np.float64))
    return t[np.linspace(0, len(t) - 1, n).round().astype(int)]


def hostile(rng, n, d, scale, dtype, kind):
    """Points at ``scale``: 'spread' uniform in [-scale, scale]; 'offset' near
    (scale, ..., scale) with a relative spread of 1e-3 (differences far below
    the coordinates); 'clustered' four tight clusters. A few exact duplicates."""
    if kind == "spread":
        x = (2 * rng.random((n, d)) - 1) * scale
    elif kind == "offset":
        x = scale * (1 + 1e-3 * rng.random((n, d)))
    else:
        c = 2 * rng.random((4, d)) - 1
        x = scale * (c[rng.integers(0, 4, n)] + 1e-3 * rng.standard_normal((n, d))) / 1.01
    x = x.astype(dtype)
    x[rng.integers(0, n, 3)] = x[rng.integers(0, n, 3)]          # duplicates: d = 0
    assert np.isfinite(x).all()
    return x


def battery(device, X, Y=None, box=None, *, opts=None, hist_opts=None, rng, method=None, zero_r=True):
    """Counts (r on a tie, r = 0, radii arrays), histograms (default range,
    partial range ending on a tie, a range between ties, edges on ties, ranges
    holding no pair) against the reference, for self (Y None) or cross pairs."""
    opts = dict(opts or {})
    hopts = dict(opts, **(hist_opts or {}))
    if method is not None:
        opts["method"] = hopts["method"] = method
    kw = dict(y=Y, box=box, device=device)
    ds, s = scaled_distances(X, Y, box)
    pos = np.unique(ds[ds > 0])
    top = pos[-1] if box is None else min(pos[-1], 0.5 * float(np.min(box)) * s)
    # r: an exact pair distance; r = 0 (the duplicates only)
    r = at_quantile(ds, 0.1, top)
    check_count(clkernels.pair_count(X, r / s, **kw, **opts), count(ds, r))
    if zero_r:
        check_count(clkernels.pair_count(X, 0.0, **kw, **opts), count(ds, 0.0))
    if method != "cells":
        # cumulative counts: 0, radii clear of every pair (radii on ties: test_radii_on_ties),
        # one beyond every pair (open)
        far = [2 * pos[-1]] if box is None else [0.5 * float(np.min(box)) * s]
        radii = n_thresholds(np.concatenate([[0.0], between(ds, NB - 2, rng, 0.0, top), far]), NB)
        check_array(clkernels.pair_count(X, radii / s, **kw, **opts), cumulative(ds, radii))
    # the default range (open: every pair; box: half the shortest side)
    c, e = clkernels.distance_histogram(X, NB, **kw, **hopts)
    check_array(c, histogram(ds, e * s))
    if box is None:
        assert c.sum() == npairs(X, Y)
    # from 0 to a tie; between two ties; edges on ties
    hi = at_quantile(ds, 0.4, top)
    c, e = clkernels.distance_histogram(X, NB, (0.0, hi / s), **kw, **hopts)
    check_array(c, histogram(ds, e * s))
    if len(pos) > 1:
        t = n_thresholds(ties(ds, 2 * NB, rng, 0.0, top))
        c, e = clkernels.distance_histogram(X, NB, (t[0] / s, t[-1] / s), **kw, **hopts)
        check_array(c, histogram(ds, e * s))
        c, e = clkernels.distance_histogram(X, t / s, **kw, **hopts)
        assert (e == t / s).all()
        check_array(c, histogram(ds, t))
    # ranges holding no pair: beyond every pair; below the smallest positive distance
    if box is None:
        c, e = clkernels.distance_histogram(X, NB, (2 * pos[-1] / s, 3 * pos[-1] / s), **kw, **hopts)
        check_array(c, np.zeros(NB))
    if len(pos):
        c, e = clkernels.distance_histogram(X, NB, (0.0, 0.5 * pos[0] / s), **kw, **hopts)
        check_array(c, histogram(ds, e * s))            # the duplicates only, in bin 0
        assert c[1:].sum() == 0


# ====================================================== hostile scales (memory safety)

@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("scale", SCALES32)
def test_hostile_scales_float32(device, rng, scale, variant):
    """Every pairwise variant (each with an output stage) on float32 data at
    1e-25 .. 3e38: self and cross."""
    opts = dict(variant=variant, **SMALL)
    stage = STAGES[VARIANT_STAGE[variant]]
    kind = ("spread", "offset", "clustered")[(VARIANTS.index(variant) + SCALES32.index(scale)) % 3]
    X = hostile(rng, 140, 3, scale, np.float32, kind)
    battery(device, X, opts=opts, hist_opts=stage, rng=rng)
    Y = hostile(rng, 60, 3, scale, np.float32, "offset" if kind == "spread" else "spread")
    battery(device, X[:80], Y, opts=opts, hist_opts=stage, rng=rng)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("scale", SCALES64)
def test_hostile_scales_float64(device, rng, scale, variant):
    """float64 data whose squared distances underflow (1e-200) or overflow
    (1e160) double; r = 0 at 1e-200: test_r_zero_tiny_float64."""
    need_fp64(device)
    opts = dict(variant=variant, **SMALL)
    stage = STAGES[VARIANT_STAGE[variant]]
    kind = ("spread", "offset", "clustered")[VARIANTS.index(variant) % 3]
    X = hostile(rng, 120, 3, scale, np.float64, kind)
    battery(device, X, opts=opts, hist_opts=stage, rng=rng, zero_r=scale > 1)
    Y = hostile(rng, 50, 3, scale, np.float64, "offset")
    battery(device, X[:70], Y, opts=opts, hist_opts=stage, rng=rng, zero_r=scale > 1)


@pytest.mark.parametrize("scale", SCALES32)
def test_hostile_scales_cells(device, rng, scale):
    """method='cells' (the cell grid) on hostile float32 data, self and cross."""
    X = hostile(rng, 160, 3, scale, np.float32, "clustered")
    battery(device, X, rng=rng, method="cells")
    Y = hostile(rng, 60, 3, scale, np.float32, "clustered")
    battery(device, X[:80], Y, rng=rng, method="cells")


@pytest.mark.parametrize("scale", SCALES64)
def test_hostile_scales_grid_float64(device, rng, scale):
    """The cell grid on float64 data near underflow / overflow (Grid directly:
    the public method='cells' fails there, test_float64_near_overflow_public_methods)."""
    need_fp64(device)
    X = hostile(rng, 160, 3, scale, np.float64, "clustered")
    ds, s = scaled_distances(X)
    for q in (0.02, 0.1):
        r = at_quantile(ds, q)
        g = clkernels.Grid(X, r / s, device=device)
        check_count(clkernels.grid_pair_count(g, r / s), count(ds, r))
        edges = n_thresholds(np.concatenate([[0.0], ties(ds, NB, rng, 0.0, r)]))
        check_array(clkernels.grid_histogram(g, edges / s), histogram(ds, edges))


@pytest.mark.parametrize("method", ["allpairs", "cells", "auto"])
def test_float64_near_overflow_public_methods(device, rng, method):
    need_fp64(device)
    n = 100
    if method == "auto":      # enough pairs that 'auto' weighs the cell grid (else all pairs, no bug)
        n = int(np.ceil(np.sqrt(2 * cells_min_pairs(device)))) + 2
        if n > 1000:
            pytest.skip(f"'auto' weighs the cell grid from {n} points here: too many for the reference")
    X = hostile(rng, n, 3, 1e160, np.float64, "spread")
    ds, s = scaled_distances(X)
    r = at_quantile(ds, 0.05)
    check_count(clkernels.pair_count(X, r / s, device=device, method=method), count(ds, r))
    c, e = clkernels.distance_histogram(X, NB, (0.0, r / s), device=device, method=method)
    check_array(c, histogram(ds, e * s))


def test_default_range_overflowing_float64_raises(device):
    """A histogram whose default range (the largest distance) overflows float64
    raises a clear ValueError; an explicit range works, exactly."""
    need_fp64(device)
    X = np.array([[-1.5e308, 0.0], [1.5e308, 1e300], [0.0, -1e307], [1e308, 1e308], [1e308, 1e308]])
    for opts in ({}, dict(variant="readonly")):
        with pytest.raises(ValueError, match="range"):
            clkernels.distance_histogram(X, NB, device=device, **opts)
    ds, s = scaled_distances(X)
    c, e = clkernels.distance_histogram(X, NB, (0.0, 1.7e308), device=device, variant="readonly")
    check_array(c, histogram(ds, e * s))
    assert 0 < c.sum() < npairs(X)                  # some pairs lie beyond float64
    radii = n_thresholds([0.0, 1e300, 1e307, 1.7e308], NB)
    check_array(clkernels.pair_count(X, radii, device=device, variant="regshm"),
                cumulative(ds, radii * s))


# ------------------------------------------------- the issue's reports, as reported

@pytest.mark.parametrize("kind", ["spread", "offset"])
def test_issue_float32_near_1e30(device, rng, kind):
    X = hostile(rng, 200, 3, 1e30, np.float32, kind)
    d = distances(X)
    for opts in ({}, STAGES["global"], STAGES["local-reduce"], STAGES["local-atomic"], dict(method="cells")):
        c, e = clkernels.distance_histogram(X, NB, device=device, **opts)
        check_array(c, histogram(d, e))
        assert c.sum() == npairs(X)
        assert c[-1] < c.sum()                      # not every pair in the last bin


def test_issue_float32_kpc(device, rng):
    """Galaxy-like data in cm (1 kpc = 3.0857e21): each report of the issue."""
    X = (rng.random((220, 3)) * KPC).astype(np.float32)
    d = distances(X)
    for opts in ({}, STAGES["global"], STAGES["local-atomic"], dict(method="cells"), dict(method="allpairs")):
        c, e = clkernels.distance_histogram(X, NB, device=device, **opts)
        check_array(c, histogram(d, e))
        c, e = clkernels.distance_histogram(X, NB, range=(0, 5e21), device=device, **opts)
        check_array(c, histogram(d, e))
        assert c.sum() == count(d, 5e21) > 0.99 * npairs(X)
    for m in ("auto", "allpairs", "cells"):
        assert count(d, 1e21) > 0
        check_count(clkernels.pair_count(X, 1e21, device=device, method=m), count(d, 1e21))
        check_count(clkernels.pair_count(X, 1e20, device=device, method=m), count(d, 1e20))
    # rdf in a periodic box of side 1 kpc
    box = np.full(3, KPC)
    g, e = clkernels.rdf(X, NB, box=box, device=device)
    want = histogram(distances(X, box=box), e)
    shells = 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
    ideal = len(X) * (len(X) - 1) / KPC ** 3 * shells / 2
    assert np.allclose(g, want / ideal, rtol=1e-12, atol=0)
    assert g[2:].min() > 0                          # not zeros
    check_array(clkernels.distance_histogram(X, NB, box=box, device=device)[0], want)


def test_issue_1d_float32_at_3e38(device, rng):
    """1-D points at +-3e38 (differences overflow float32)."""
    X = (rng.choice([-1.0, 1.0], 80) * rng.uniform(2.9e38, 3.4e38, 80)).astype(np.float32)[:, None]
    X[:3] = np.float32(3.4028235e38)                # the largest float32, three times
    X[3] = -X[0]
    d = distances(X)
    for opts in ({}, STAGES["global"], STAGES["local-reduce"], STAGES["local-atomic"], dict(method="cells"),
                 dict(variant="shuffle", **SMALL), dict(variant="lrshm", **SMALL)):
        c, e = clkernels.distance_histogram(X, NB, device=device, **opts)
        check_array(c, histogram(d, e))
        assert c.sum() == npairs(X)
    for r in (0.0, 1e37, float(np.max(d)), 6.5e38, 1e39):
        for m in ("allpairs", "cells"):
            check_count(clkernels.pair_count(X, r, device=device, method=m), count(d, r))
    radii = n_thresholds([0.0, 1e36, 1e38, 2 * float(np.max(d))], NB)
    check_array(clkernels.pair_count(X, radii, device=device), cumulative(d, radii))


# kde_sum is a float sum (not exact): finite and close to a float64 reference
@pytest.mark.parametrize("scale", [1e-25, 1e-8, 1.0, 1e15, 1e21, 1e30])
def test_kde_sum_hostile_scales(device, rng, scale):
    X = (rng.random((150, 3)) * scale).astype(np.float32)
    h = 0.3 * scale
    ds, s = scaled_distances(X)
    hs = h * s
    want = float(np.exp(-ds * ds / (2 * hs * hs)).sum())
    got = clkernels.kde_sum(X, h, device=device)
    assert np.isfinite(got), got
    assert abs(got - want) <= 1e-4 * want, (got, want)


# ================================================================= underflow

@pytest.mark.parametrize("dtype,r", [(np.float32, 1e-30), (np.float32, 0.0), (np.float64, 1e-200),
                                     (np.float64, 0.0), (np.float64, 5e-324)])
def test_identical_points_tiny_r(device, dtype, r):
    """50 identical points: 1225 pairs at any r >= 0 (d <= r), anywhere."""
    need_fp64(device, dtype)
    for where in (0.3, 0.0, 1e-30, -7e29):
        X = np.full((50, 3), where, dtype)
        for m in ("auto", "allpairs", "cells"):
            check_count(clkernels.pair_count(X, r, device=device, method=m), 1225)
        check_array(clkernels.pair_count(X, n_thresholds([r, 1.0], NB), device=device), [1225] * NB)
        c, e = clkernels.distance_histogram(X, NB, (0.0, max(r, 1e-300)), device=device)
        check_array(c, [1225] + [0] * (NB - 1))
        c, e = clkernels.distance_histogram(X, NB, device=device)   # numpy: (0, 0) -> (-0.5, 0.5)
        check_array(c, histogram(np.zeros(1225), e))
    X = np.full((50, 3), 0.3, dtype)
    for v in VARIANTS:
        check_count(clkernels.pair_count(X, r, device=device, variant=v, **SMALL), 1225)


@pytest.mark.parametrize("method", ["allpairs", "cells"])
def test_r_zero_tiny_float64(device, method):
    need_fp64(device)
    X = np.array([[1e-200, 0.0, 0.0], [2e-200, 0.0, 0.0], [2e-200, 0.0, 0.0]])
    check_count(clkernels.pair_count(X, 0.0, device=device, method=method), 1)


def test_underflowing_coordinates_float32(device, rng):
    """Coordinates at 1e-25, 1e-38 and 1e-44 (subnormal float32): squares underflow."""
    for scale in (1e-25, 1e-38, 1e-44):
        X = (rng.random((120, 2)) * scale).astype(np.float32)
        d = distances(X)
        r = at_quantile(d, 0.3)
        for m in ("allpairs", "cells"):
            check_count(clkernels.pair_count(X, r, device=device, method=m), count(d, r))
        for opts in ({}, STAGES["global"]):
            c, e = clkernels.distance_histogram(X, NB, device=device, **opts)
            check_array(c, histogram(d, e))
            c, e = clkernels.distance_histogram(X, NB, (0.0, r), device=device, **opts)
            check_array(c, histogram(d, e))


# ====================================================================== ties

LATTICE_SIDE = {1: 100, 2: 12, 3: 6, 4: 4, 5: 3, 6: 3, 7: 2, 8: 2}
#: beyond counts (all pairs and cells), edges on ties and periodic counts at every d, these
#: checks rotate over d (each is another kernel build per d and dtype)
LATTICE_EXTRA = {1: ("radii", "uniform", "cells-hist"), 2: ("periodic-hist", "cells-hist"),
                 3: ("radii", "periodic-hist"), 4: ("uniform", "cells-hist"), 5: ("radii", "cells-hist"),
                 6: ("uniform", "periodic-hist"), 7: ("radii", "periodic-hist"),
                 8: ("uniform", "cells-hist", "radii")}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", range(1, 9))
def test_lattice_ties_every_dim(device, rng, d, dtype):
    """Integer lattices (spacings 1, 0.1, 2^-100, 2^90), d = 1..8: every
    threshold an exact pair distance. Self and cross, open and periodic, all
    pairs and cells (periodic cells: test_periodic_cells_boundary_ties)."""
    need_fp64(device, dtype)
    n_side, extra = LATTICE_SIDE[d], LATTICE_EXTRA[d]
    for spacing in (1.0, 0.1, 2.0 ** -100, 2.0 ** 90):
        X = lattice(n_side, d, spacing, dtype)
        if len(X) > 250:
            X = X[np.sort(rng.choice(len(X), 250, replace=False))]
        ds, s = scaled_distances(X)
        u = np.unique(ds)
        for r in ties(ds, 2, rng, 0.0, 0.5 * u[-1]):
            for m in ("allpairs", "cells"):
                check_count(clkernels.pair_count(X, r / s, device=device, method=m), count(ds, r))
        edges = n_thresholds(u[: 2 * NB])
        c, e = clkernels.distance_histogram(X, edges / s, device=device)
        check_array(c, histogram(ds, edges))
        if "radii" in extra:
            # radii on the distinct distances where the arithmetic is exact (float32 and
            # power-of-two spacings), else between them (ties: test_radii_on_ties)
            exact_arith = dtype == np.float32 and spacing != 0.1
            radii = n_thresholds(u if exact_arith else np.concatenate([[0.0], between(ds, NB, rng)]), NB)
            check_array(clkernels.pair_count(X, radii / s, device=device), cumulative(ds, radii))
        if "uniform" in extra:      # uniform bins of one spacing: every edge a lattice distance
            c, e = clkernels.distance_histogram(X, NB, (0.0, NB * spacing), device=device)
            check_array(c, histogram(ds, e * s))
        if "cells-hist" in extra:
            c, e = clkernels.distance_histogram(X, NB, (0.0, spacing * (1 + (d > 1))), device=device,
                                                method="cells")
            check_array(c, histogram(ds, e * s))
        # cross: two halves
        A, B = X[: len(X) // 2], X[len(X) // 2:]
        dc, sc = scaled_distances(A, B)
        r = at_quantile(dc, 0.3)
        check_count(clkernels.pair_count(A, r / sc, y=B, device=device), count(dc, r))
        # periodic: the lattice fills its box exactly (minimum images at exactly L/2 too);
        # float64 with spacing 0.1: test_periodic_float64_reference_rounding
        if dtype == np.float64 and spacing == 0.1:
            continue
        box = np.full(d, n_side * spacing)
        db, sb = scaled_distances(X, box=box)
        half = 0.5 * float(box[0]) * sb
        for r in ties(db, 2, rng, 0.0, half):
            check_count(clkernels.pair_count(X, r / sb, box=box, device=device), count(db, r))
        if "periodic-hist" in extra:
            t = n_thresholds(np.concatenate([[0.0], ties(db, NB, rng, 0.0, half)]))
            c, e = clkernels.distance_histogram(X, t / sb, box=box, device=device)
            check_array(c, histogram(db, t))


def test_periodic_box_side_rounding(device):
    """The kernel's minimum image shifts by L rounded to float32 (1.2 -> 1.2000000477):
    the band holds that absolute error. (0, 0)-(1.1f, 1.1f) in a 1.2 box lies 3e-8
    relative below the edge at the float64 distance of (0, 0)-(0.1f, 0.1f)'s image."""
    a = np.array([[0.0, 0.0]], np.float32)
    b = np.array([[1.1, 1.1]], np.float32)
    box = np.array([1.2, 1.2])
    d = float(distances(a, b, box)[0])
    t1 = float(np.nextafter(d, np.inf))          # d < t1 by one float64 ulp
    for m in ("allpairs", "cells"):
        check_array(clkernels.distance_histogram(a, [0.0, t1, 0.2], y=b, box=box, device=device,
                                                 method=m)[0], np.array([1, 0]))
    check_array(clkernels.pair_count(a, [d, t1], y=b, box=box, device=device), np.array([1, 1]))
    check_count(clkernels.pair_count(a, float(np.nextafter(d, 0)), y=b, box=box, device=device), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_periodic_cells_boundary_ties(device, dtype):
    need_fp64(device, dtype)
    X = np.array([[0.0], [6.0]], dtype)
    check_count(clkernels.pair_count(X, 2.0, box=[8.0], device=device, method="allpairs"), 1)   # right
    check_count(clkernels.pair_count(X, 2.0, box=[8.0], device=device, method="cells"), 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_water_ties(device, rng, dtype):
    """A liquid-water-like configuration (Angstrom, periodic, molecules whole):
    rdf, O-H and all-atom histograms, edges on the intramolecular O-H distances."""
    need_fp64(device, dtype)
    O, H, box = water(rng, 4, dtype)
    allx = np.concatenate([O, H])
    L = float(box[0])
    V = L ** 3
    d = distances(allx, box=box)
    c, e = clkernels.distance_histogram(allx, 60, box=box, device=device)
    assert e[-1] == 0.5 * L                         # the default range with a box
    check_array(c, histogram(d, e))
    g, e = clkernels.rdf(allx, 60, box=box, device=device)
    n = len(allx)
    shells = 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
    assert np.allclose(g, histogram(d, e) / (n * (n - 1) / V * shells / 2), rtol=1e-12, atol=0)
    # O-H cross pairs: the bonds are ties
    doh = distances(O, H, box=box)
    bonds = np.sort(doh[np.abs(doh - 0.9572) < 1e-4])
    assert len(bonds) == 2 * len(O)
    for r in bonds[[0, len(bonds) // 2, -1]]:
        for m in ("allpairs", "cells"):
            check_count(clkernels.pair_count(O, float(r), y=H, box=box, device=device, method=m),
                        count(doh, r))
    radii = n_thresholds(np.concatenate([[0.5, 0.5 * L], between(doh, NB, rng, 0.0, 0.5 * L)]), NB)
    check_array(clkernels.pair_count(O, radii, y=H, box=box, device=device), cumulative(doh, radii))
    edges = n_thresholds(np.concatenate([[0.5, 1.5, 2.5, 0.5 * L], bonds]))
    c, _ = clkernels.distance_histogram(O, edges, y=H, box=box, device=device)
    check_array(c, histogram(doh, edges))
    g, e = clkernels.rdf(O, NB, y=H, box=box, device=device, output="global")
    shells = 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
    assert np.allclose(g, histogram(doh, e) / (len(O) * len(H) / V * shells), rtol=1e-12, atol=0)
    # O-O: a uniform range ending on an O-O distance
    doo = distances(O, box=box)
    hi = at_quantile(doo, 0.5, 0.5 * L)
    c, e = clkernels.distance_histogram(O, NB, (0.0, hi), box=box, device=device, **STAGES["local-atomic"])
    check_array(c, histogram(doo, e))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clustered_ties_self_cross(device, rng, dtype):
    need_fp64(device, dtype)
    X = clustered(rng, 240, 3, dtype)
    X[rng.integers(0, 240, 20)] = X[rng.integers(0, 240, 20)]
    Y = clustered(rng, 100, 3, dtype)
    Y[:10] = X[:10]
    for m in ("allpairs", "cells"):
        battery(device, X, rng=rng, method=m)
        battery(device, X[:120], Y, rng=rng, method=m)


@pytest.mark.parametrize("shift", [1e3, 1e4, 1e5])
def test_unwrapped_periodic_coordinates(device, rng, shift):
    """float32 points shifted by whole box lengths (1e3..1e5 of them): the exact
    counts of the minimum image of the given coordinates (float64:
    test_periodic_float64_reference_rounding)."""
    box = np.array([1.0, 1.3, 0.8])
    X = (rng.random((150, 3)) * box).astype(np.float32)
    Xu = unwrap(rng, X, box, shift, 2 * shift)
    d = distances(Xu, box=box)
    for m in ("allpairs", "cells"):
        for r in ties(d, 2, rng, 0.0, 0.4):
            check_count(clkernels.pair_count(Xu, float(r), box=box, device=device, method=m), count(d, r))
        c, e = clkernels.distance_histogram(Xu, NB, (0.0, 0.1), box=box, device=device, method=m)
        check_array(c, histogram(d, e))
    c, e = clkernels.distance_histogram(Xu, NB, box=box, device=device)
    check_array(c, histogram(d, e))
    radii = n_thresholds(np.concatenate([[0.0, 0.4], between(d, NB, rng, 0.0, 0.4)]), NB)
    check_array(clkernels.pair_count(Xu, radii, box=box, device=device), cumulative(d, radii))
    Yu = unwrap(rng, (rng.random((60, 3)) * box).astype(np.float32), box, shift, 2 * shift)
    dc = distances(Xu, Yu, box=box)
    for r in ties(dc, 2, rng, 0.0, 0.4):
        check_count(clkernels.pair_count(Xu, float(r), y=Yu, box=box, device=device, variant="shuffle",
                                         **SMALL), count(dc, r))
    c, e = clkernels.distance_histogram(Xu, NB, y=Yu, box=box, device=device, **STAGES["global"])
    check_array(c, histogram(dc, e))




@pytest.mark.parametrize("method", ["allpairs", "cells"])
@pytest.mark.parametrize("case", ["boundary", "unwrapped", "lattice-0.1"])
def test_periodic_float64_reference_rounding(device, method, case):
    need_fp64(device)
    if case == "lattice-0.1":                       # a 1-D lattice of spacing 0.1 filling its box
        X, box = lattice(100, 1, 0.1, np.float64), np.array([10.0])
        d = distances(X, box=box)
        got = [clkernels.pair_count(X, float(r), box=box, device=device, method=method)
               for r in np.unique(d)[1:10]]
        assert got == [count(d, r) for r in np.unique(d)[1:10]]
        return
    if case == "boundary":                          # the minimum image crosses the boundary
        X, box = np.array([[0.1], [9.9]]), np.array([10.0])
    else:                                           # coordinates ~1000 boxes away
        X = np.array([[1000.6250954666046, -1999.1027861990303, 1500.7756856902452],
                      [-999.671745350656, 2001.0899508519992, 3000.9539273474966]])
        box = np.ones(3)
    r = float(distances(X, box=box)[0])
    check_count(clkernels.pair_count(X, r, box=box, device=device, method=method), 1)


def test_frac_band_keeps_every_bin_outside_its_window():
    """The fraction-bit binning's host rule (exact.frac_band), emulated: x
    perturbed within the bound a (x + 1) + b (bins), rounded onto the 2^-F
    grid by the kernel's one fma, added to its fast slot; outside the window
    the slot is the true bin (x's own integer part); inside it, outside edge
    k's own bound, the side of edge k is the true bin; inside that, the true
    bin is the slot or the one below (what exact_edge decides between). A
    bound too wide for a window asks for the full search (window 2^F + 1)."""
    from clkernels.host.outputs.exact import frac_band, frac_bits

    rng = np.random.default_rng(7)
    assert frac_bits(8) == 19 and frac_bits(256) == 14 and frac_bits(32765) == 8 and frac_bits(32766) is None
    for nb, a, b in ((8, 1e-6, 0.0), (256, 1e-6, 0.0), (256, 3e-5, 1e-4), (4000, 2e-6, 1e-3), (32765, 1e-7, 0.0),
                     (256, 1e-4, 0.0), (512, 1e-3, 0.2)):
        f = frac_bits(nb)
        moff, window, wa, wb = frac_band(nb, a, b)
        base = (150 - f) << (23 - f)
        # true x on and around every edge and uniform inside, then a perturbation within the bound
        k = rng.integers(0, nb + 1, 200_000).astype(np.float64)
        bound = lambda x: a * (np.floor(x + 0.5) + 1) + b
        x = np.concatenate([k + rng.uniform(-4, 4, k.size) * bound(k), rng.uniform(0, nb, 200_000)])
        x = np.clip(x, 0.0, nb)
        xc = np.maximum(x + rng.uniform(-1, 1, x.size) * bound(x), 0.0)
        yi = (np.float64(moff) + xc).astype(np.float32).view(np.uint32).astype(np.int64)
        band = (yi & (2 ** f - 1)) < window
        slot = (yi >> f) - base
        if window == 2 ** f + 1:
            assert 2 * (a * (nb + 1) + b) * 2 ** f + 1 > 2 ** (f - 3) and band.all()
            continue
        assert window <= 2 ** (f - 3)
        true = np.floor(x)
        assert (slot[~band] == true[~band]).all()
        fr = (yi & (2 ** f - 1)) - window // 2
        near = band & (np.abs(fr) <= (slot * np.float32(wa)).astype(np.float32) + np.float32(wb))
        side = band & ~near
        assert (np.where(fr < 0, slot - 1, slot)[side] == true[side]).all()
        assert ((true[near] == slot[near]) | (true[near] == slot[near] - 1)).all()
        # uniform x: band pairs only as often as the window is wide
        assert band[k.size:].mean() <= 1.2 * window / 2 ** f + 1e-3


def test_sqrt_thresholds_split_numpys_roots():
    """exact.sqrt_thresholds: T[k] is the first double whose square root reaches
    edge k (the last: exceeds it), next to its predecessor, on edges that are
    exact roots, random, tiny and large."""
    from clkernels.host.outputs.exact import sqrt_thresholds

    rng = np.random.default_rng(3)
    for e in (np.array([0.0, 1.0, 2.0, 3.0, 3.0]), np.sort(rng.random(300)) * 7.3,
              np.linspace(0.0, 1e-150, 33), np.linspace(0.0, 1e150, 33), np.sqrt(np.arange(50.0))):
        t = sqrt_thresholds(e)
        below = np.nextafter(t, 0.0)
        assert (np.sqrt(t[:-1]) >= e[:-1]).all() and ((t[:-1] == 0) | (np.sqrt(below[:-1]) < e[:-1])).all()
        assert np.sqrt(t[-1]) > e[-1] and np.sqrt(below[-1]) <= e[-1]
    # edges past sqrt(DBL_MAX): no finite square reaches them
    t = sqrt_thresholds(np.array([0.0, 1e150, 1e160, 1e200]))
    assert np.sqrt(t[1]) >= 1e150 and np.isinf(t[2:]).all()


@pytest.mark.parametrize("nbins", [16, 40000])
def test_magic_band_forms_on_lattice_ties(device, nbins):
    """Uniform bins from 0 whose edges sit on pair distances (pairs a float32
    rounding either side of one edge; lattice distances on edges), ranges
    that cut the data: the fraction-bit window (16 bins) and the two-scale
    band (40000 bins, beyond frac_bits) give numpy's bins, in every output
    stage that fits (full ranges: test_magic_full_range_unclamped)."""
    from clkernels.host.outputs.exact import frac_bits

    assert (frac_bits(nbins) is None) == (nbins > 32765)
    w = 2.0 ** -4 if nbins == 16 else 2.0 ** -12         # bin width: integer distances on edges
    # pairs a float32 rounding apart from the edge at 1.0 (on either side, inside the band),
    # and some a few 1e-6 below it (the window's edge, outside edge 1.0's own bound): each a
    # point in [0, 1)^3 and one at distance 1 - t in a random direction
    rng = np.random.default_rng(11)
    a = rng.random((300, 3)).astype(np.float32)
    u = rng.normal(size=(300, 3))
    t = rng.choice([0.0, 0.0, 0.0, 1e-6, 2e-6, 3e-6, 5e-6], 300)
    b = (a + u / np.linalg.norm(u, axis=1)[:, None] * (1 - t)[:, None]).astype(np.float32)
    X = np.concatenate([a, b])
    ds, s = scaled_distances(X)
    dp = ds[np.isclose(ds, s, rtol=1e-5)]
    assert (dp < s).sum() > 50 and (dp > s).sum() > 50        # both sides of the edge
    hi = 4.0 if nbins == 16 else nbins * w
    for opts in [{}, dict(output="global")]:
        c, e = clkernels.distance_histogram(X, nbins, (0.0, hi), device=device, method="allpairs", **opts)
        check_array(c, histogram(ds, e * s))
    X = lattice(6, 3, 1.0, np.float32)
    ds, s = scaled_distances(X)
    stages = [{}, dict(output="global")]
    if nbins == 16:         # partial and diagonal blocks (masked pairs, per-anchor loops), the flushes
        stages += [dict(output="local", flush=f, variant=v, diag=dg, wg_size=32, ppw=2)
                   for v, dg, f in (("regshm", "mask", "reduce"), ("readonly", "balanced", "atomic"),
                                    ("shuffle", "triangle", "reduce"), ("lrshm", "mask", "atomic"))]
    for hi in (nbins * w, nbins * w * 0.25):
        for opts in stages:
            c, e = clkernels.distance_histogram(X, nbins, (0.0, hi / s), device=device, method="allpairs",
                                                **opts)
            check_array(c, histogram(ds, e * s))


@pytest.mark.parametrize("nbins", [3, 16, 75, 16381])
def test_magic_full_range_unclamped(device, nbins):
    """A range that holds every distance (the last edge the lattice's largest
    distance, closed): the unclamped local slots (plan.UNCLAMPED_MAX_BINS)
    with the deferred band fix, partial and diagonal blocks, every variant."""
    X = lattice(6, 3, 1.0, np.float32)
    X = np.concatenate([X, (np.random.default_rng(5).random((37, 3)) * 5).astype(np.float32)])
    ds, s = scaled_distances(X)
    hi = float(np.sqrt(75.0))
    assert ds.max() <= hi * s
    stages = [{}, dict(output="global")]
    if nbins < 16381:
        stages += [dict(output="local", flush=f, variant=v, diag=dg, wg_size=32, ppw=p, copies=c)
                   for v, dg, f, p, c in (("regshm", "mask", "reduce", 2, 2), ("readonly", "balanced", "atomic", 3, 1),
                                          ("shuffle", "triangle", "reduce", 1, 4), ("lrshm", "mask", "atomic", 2, 1),
                                          ("naive", "mask", "reduce", 4, 2))]
    for opts in stages:
        c, e = clkernels.distance_histogram(X, nbins, (0.0, hi), device=device, method="allpairs", **opts)
        check_array(c, histogram(ds, e * s))


@pytest.mark.parametrize("nbins", [509, 1021, 2045])
def test_magic_bins_in_a_periodic_box(device, nbins):
    """Periodic coordinates carry an absolute error (the wrap), which the
    window takes in bins, not relative to the first edge times the number of
    bins (that made the window a whole bin and the full search was missing:
    a few pairs one bin off at 1021 bins)."""
    rng = np.random.default_rng(4)
    for L, lift in ((10.0, 0), (10.3, 50)):         # inside the box; unwrapped by up to 50 sides
        X = (rng.random((1500, 3)) * L + rng.integers(-lift, lift + 1, (1500, 3)) * L).astype(np.float32)
        box = np.full(3, L)
        ds = distances(X, box=box)
        c, e = clkernels.distance_histogram(X, nbins, (0.0, L / 2), box=box, device=device, method="allpairs")
        check_array(c, histogram(ds, e))


def test_magic_full_search_when_no_window_fits(device, monkeypatch):
    """The window too wide for a bin (exact.frac_band's 2^F + 1): every pair is
    searched among all the edges in double, still numpy's bins (forced here,
    float32 data does not need it; the fast slot biased by 1.25 bins, which
    the search must not lean on), deferred and per-pair, open and periodic,
    ranges that cut the data (clamped slots)."""
    from clkernels.host.outputs.exact import frac_bits
    from clkernels.host.twobody import stats

    monkeypatch.setattr(stats, "frac_band",
                        lambda nb, a, b: (2.0 ** (23 - frac_bits(nb)) + 1.25, 2 ** frac_bits(nb) + 1, 0.0, 0.0))
    # pairs a float32 rounding either side of the edge at 1.0, and a lattice
    rng = np.random.default_rng(8)
    a = rng.random((200, 3)).astype(np.float32)
    u = rng.normal(size=(200, 3))
    X = np.concatenate([a, (a + u / np.linalg.norm(u, axis=1)[:, None]).astype(np.float32),
                        lattice(4, 3, 1.0, np.float32)])
    for nb, box, rng_ in ((16, None, (0.0, 4.0)), (16, np.full(3, 8.0), (0.0, 4.0)),
                          (16381, None, (0.0, 16381 / 16000))):
        ds = distances(X, box=box)
        local = [dict(output="local", variant="regshm", diag="mask", wg_size=32, ppw=2)] if nb == 16 else []
        for opts in [{}, dict(output="global")] + local:        # (16381 local bins fit no GPU's local memory)
            c, e = clkernels.distance_histogram(X, nb, rng_, box=box, device=device, method="allpairs", **opts)
            check_array(c, histogram(ds, e))


def _f32_fma(a, b, c):
    """float32 fma, emulated (the float64 sum of an exact float32 product and c,
    rounded once more: off by one ulp in rare double-rounding ties)."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


@pytest.mark.parametrize("case", ["open", "periodic-unwrapped"])
def test_frac_err_bounds_the_kernels_x(case):
    """exact.frac_err's bound |x - x_true| <= a (k + 1) + b, against the
    kernel's float32 arithmetic emulated in numpy (wrap into [0, L) in double
    then float32, the exact minimum image, fma sums, a correctly rounded
    root: sqrt_ulp 0.5), on open data (the relative part a) and periodic
    coordinates far outside the box (the wrap's absolute error, b)."""
    from clkernels.host.outputs.exact import choose_scaling, frac_err
    from clkernels.host.primitives.points import Bounds

    rng = np.random.default_rng(12)
    L, nb = 10.3, 2045              # (a side float32 does not hold: wrapped coordinates round)
    p = rng.random((1500, 3)) * L
    x = np.concatenate([p, p + rng.normal(size=p.shape) * 0.1]).astype(np.float32)   # short pairs too
    box = None
    if case == "periodic-unwrapped":
        box = np.full(3, L)
        x = (x + rng.integers(-300, 300, x.shape) * L).astype(np.float32)
    i, j = np.triu_indices(len(x), 1)
    i, j = np.concatenate([i[::7], np.arange(1500)]), np.concatenate([j[::7], np.arange(1500) + 1500])
    hi = 0.5 * L if box is not None else float(np.sqrt(3) * L)
    sc = choose_scaling(np.float32, 3, Bounds(x.min(0).astype(np.float64), x.max(0).astype(np.float64)),
                        box=box, thresholds=[hi])
    assert sc.scale == 1.0
    x64 = x.astype(np.float64)
    k = (np.mod(x64, L) if box is not None else x64).astype(np.float32)     # kernel coordinates
    v = np.zeros(len(i), np.float32)
    dt = np.zeros(len(i))
    for q in range(3):
        a, b = k[i, q], k[j, q]
        if box is not None:
            n = np.rint((a - b) * np.float32(1 / L)).astype(np.float32)
            Lf = np.float32(L)
            dk = _f32_fma(-np.maximum(n, 0), Lf, a) - _f32_fma(np.minimum(n, 0), Lf, b)
            d64 = x64[i, q] - x64[j, q]
            d64 = d64 - L * np.rint(d64 / L)
        else:
            dk = a - b
            d64 = x64[i, q] - x64[j, q]
        v = _f32_fma(dk, dk, v)
        dt += d64 * d64
    scale = np.float32(nb / hi)
    xk = np.sqrt(v).astype(np.float64) * scale                           # exact inside the fma
    xt = np.sqrt(dt) * (nb / hi)
    a, b = frac_err(sc, hi, nb, 0.5)
    err = np.abs(xk - xt)
    assert (err <= a * (np.floor(xt) + 2) + b).all()
    # both parts matter: without either the bound fails somewhere (the test has teeth)
    assert (err > a * (np.floor(xt) + 2)).any() if case == "periodic-unwrapped" else (err > b).any()


@pytest.mark.parametrize("r,c", [(2e-5, 0.0), (0.0, 3e-3), (1e-5, 1e-3)])
def test_magic_window_absorbs_its_bound(device, monkeypatch, r, c):
    """Error injected into the fast path -- x scaled by (1 + r) and shifted by
    c bins -- and the bound (frac_err's a, b) widened by as much: numpy's bins
    still, in the deferred local stages whose branch decides by edge k's own
    bound (a kernel that drops its k * wa or halves it leaves pairs off)."""
    from clkernels.host.twobody import stats

    err, stage, band = stats.frac_err, stats.HistStat.stage, stats.frac_band

    def wide_err(*args):
        a, b = err(*args)
        return a + 1.25 * r, b + 1.25 * c

    def scaled_stage(self, *args):
        st = stage(self, *args)
        st.values[0] *= 1 + r
        return st

    def shifted_band(nb, a, b):
        moff, window, wa, wb = band(nb, a, b)
        return moff + c, window, wa, wb

    monkeypatch.setattr(stats, "frac_err", wide_err)
    monkeypatch.setattr(stats.HistStat, "stage", scaled_stage)
    monkeypatch.setattr(stats, "frac_band", shifted_band)
    X = np.random.default_rng(2).random((500, 3)).astype(np.float32)
    ds = distances(X)
    for opts in ({}, dict(output="local", variant="regshm", wg_size=32, ppw=2),
                 dict(output="local", variant="readonly", diag="balanced", wg_size=32, ppw=3)):
        got, e = clkernels.distance_histogram(X, 256, (0.0, 1.5), device=device, method="allpairs", **opts)
        check_array(got, histogram(ds, e))


def test_magic_range_beyond_float64_squares(device):
    """A range whose last edge squared overflows float64 (root thresholds of
    inf): every pair in the first bin, as numpy."""
    X = np.random.default_rng(6).random((50, 3)).astype(np.float32)
    ds = distances(X)
    for hi in (1e160, 1e200):
        c, e = clkernels.distance_histogram(X, 8, (0.0, hi), device=device, method="allpairs")
        check_array(c, histogram(ds, e))


# ================================================================== periodic

def test_reach_beyond_half_box_raises(device, rng):
    X = rng.random((30, 3)).astype(np.float32)
    with pytest.raises(ValueError, match="half"):
        clkernels.rdf(X, 10, range=(0, 0.8), box=[1, 1, 1], device=device)
    with pytest.raises(ValueError, match="half"):
        clkernels.pair_count(X, 0.51, box=[1, 1, 1], device=device)
    with pytest.raises(ValueError, match="half"):
        clkernels.pair_count(X, [0.1, 0.6], box=[1, 1, 1], device=device)
    with pytest.raises(ValueError, match="half"):
        clkernels.distance_histogram(X, [0.0, 0.3, 0.55], box=[1, 1, 1], device=device)
    with pytest.raises(ValueError, match="half"):
        clkernels.pair_count(X, 0.45, box=[1, 2, 0.8], device=device)    # the shortest side rules
    d = distances(X, box=[1, 1, 1])                                       # exactly half is allowed
    check_count(clkernels.pair_count(X, 0.5, box=[1, 1, 1], device=device), count(d, 0.5))


@pytest.mark.parametrize("d,dtype", [(1, np.float32), (2, np.float64), (3, np.float32), (3, np.float64)])
def test_images_all(device, rng, d, dtype):
    """images='all' equals an explicit image enumeration (self: i < j, cross: all
    i, j; a point's own images excluded), reach beyond the box."""
    need_fp64(device, dtype)
    # dyadic box and coordinates: the reference's differences are exact (general float64
    # periodic data near ties: test_periodic_float64_reference_rounding)
    box = rng.integers(23, 33, d) / 32
    X = (np.floor(rng.random(({1: 40, 2: 30, 3: 16}[d], d)) * box * 2 ** 20) / 2 ** 20).astype(dtype)
    X[1] = X[0]                                     # a duplicate: its images count
    Y = (np.floor(rng.random(({1: 20, 2: 16, 3: 10}[d], d)) * box * 2 ** 20) / 2 ** 20).astype(dtype)
    reach = 1.25 * float(box.max())
    K = images_for(box, reach)
    hd = 0.5 * float(np.sqrt(np.sum(box ** 2)))     # the half-box diagonal
    for A, B in ((X, None), (X, Y)):
        kw = dict(y=B, box=box, images="all", device=device)
        dr = distances(A, B, box=box, images=K)
        r = float(ties(dr, 1, rng, float(box.max()), reach)[0])
        check_count(clkernels.pair_count(A, r, **kw), count(dr, r))
        check_count(clkernels.pair_count(A, 0.0, **kw), count(dr, 0.0))
        radii = n_thresholds(np.concatenate([[0.0, reach], between(dr, NB, rng, 0.0, reach)]), NB)
        check_array(clkernels.pair_count(A, radii, **kw), cumulative(dr, radii))
        c, e = clkernels.distance_histogram(A, NB, (0.05, r), output="global" if B is None else "local", **kw)
        check_array(c, histogram(dr, e))
        edges = n_thresholds(np.concatenate([[0.0], ties(dr, 2 * NB, rng, 0.0, reach)]))
        c, e = clkernels.distance_histogram(A, edges, **kw)
        check_array(c, histogram(dr, edges))
        c, e = clkernels.distance_histogram(A, NB, (0.0, 0.9 * hd), **kw)   # from 0, short of hd
        check_array(c, histogram(dr, e))




def _images_hist_from_zero(device, rng, dtype):
    box = np.array([1.0, 1.2, 0.9])
    X = (rng.random((30, 3)) * box).astype(dtype)
    dr = distances(X, box=box, images=images_for(box, 1.3))
    for out in ("global", "local"):
        c, e = clkernels.distance_histogram(X, NB, (0.0, 1.3), box=box, images="all", device=device,
                                            output=out)
        check_array(c, histogram(dr, e))
    cube = np.ones(3)
    Xc = rng.random((30, 3)).astype(dtype)
    dc = distances(Xc, box=cube, images=images_for(cube, 0.9))
    g, e = clkernels.rdf(Xc, NB, range=(0, 0.8), box=cube, images="all", device=device)
    shells = 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
    assert np.allclose(g, histogram(dc, e) / (30 * 29 * shells / 2), rtol=1e-12, atol=0)
    c, e = clkernels.distance_histogram(Xc, NB, (0.0, 0.9), box=cube, images="all", device=device)
    check_array(c, histogram(dc, e))


def test_images_all_histogram_from_zero_float64(device, rng):
    """images='all' histograms with uniform bins from 0 up to or beyond the
    half-box diagonal, and the rdf, against the image enumeration."""
    need_fp64(device)
    _images_hist_from_zero(device, rng, np.float64)


def test_images_all_histogram_from_zero_float32(device, rng):
    _images_hist_from_zero(device, rng, np.float32)


# =============================================================== conventions

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_d_le_r_and_range_conventions(device, dtype):
    """pair_count counts d <= r (a unit lattice at r = 1: its nearest neighbours);
    distance_histogram(x, 4, (0, 1)) takes (0, 1) as the range."""
    need_fp64(device, dtype)
    X = lattice(4, 3, 1.0, dtype)
    nn = 3 * 4 * 4 * 3                                  # nearest-neighbour pairs of a 4^3 lattice
    for m in ("auto", "allpairs", "cells"):
        check_count(clkernels.pair_count(X, 1, device=device, method=m), nn)
        check_count(clkernels.pair_count(X, np.nextafter(1.0, 0.0), device=device, method=m), 0)
    radii = n_thresholds([0.0, 1.0, 1.0, 2.0, 3.0], NB)          # (sqrt ties: test_radii_on_ties)
    check_array(clkernels.pair_count(X, radii, device=device), cumulative(distances(X), radii))
    c, e = clkernels.distance_histogram(X, 4, (0, 1), device=device)
    assert (e == np.linspace(0, 1, 5)).all()
    check_array(c, [0, 0, 0, nn])                       # the last bin is closed
    c, e = clkernels.distance_histogram(X, 4, (1, 2), device=device)
    check_array(c, histogram(distances(X), e))
    assert c[0] == nn                                   # [1, 1.25): d = 1 in the first bin


def test_argument_errors_name_the_parameter(device, rng):
    X = rng.random((20, 3)).astype(np.float32)
    with pytest.raises(TypeError, match="device="):
        clkernels.pair_count(X, 0.1, device=42)
    with pytest.raises(TypeError, match="device="):
        clkernels.distance_histogram(X, 4, device=42)
    with pytest.raises(TypeError, match="device="):
        clkernels.Grid(X, 0.1, 0.1)
    with pytest.raises(TypeError, match="device="):
        clkernels.Grid(X, 0.1, device=42)
    with pytest.raises(ValueError, match="bins"):
        clkernels.distance_histogram(X, "auto", device=device)
    with pytest.raises(ValueError, match="bins"):
        clkernels.rdf(X, "auto", box=1.0, device=device)
    for bad in ("abc", "1"):            # a string, even one numpy would parse as a number
        for call in (lambda: clkernels.pair_count(X, 0.1, box=bad, device=device),
                     lambda: clkernels.distance_histogram(X, 4, box=bad, device=device),
                     lambda: clkernels.rdf(X, 4, box=bad, device=device),
                     lambda: clkernels.Grid(X, 0.1, box=bad, device=device),
                     lambda: clkernels.paircounts(X, [0.0, 0.1], box=bad, device=device)):
            with pytest.raises((TypeError, ValueError), match="box"):
                call()


def _pc(X, device, **kw):
    return clkernels.pair_count(X, kw.pop("r", 0.1), device=device, **kw)


def _dh(X, device, **kw):
    return clkernels.distance_histogram(X, kw.pop("bins", 4), kw.pop("range", None), device=device, **kw)


BAD = [  # (call, keywords, the parameter the message must name)
    (_pc, dict(x=None), "x"), (_pc, dict(x="abc"), "x"), (_pc, dict(x=np.zeros((3, 9))), "x"),
    (_pc, dict(x=np.zeros((2, 2, 2))), "x"), (_pc, dict(x=np.zeros((3, 2), complex)), "x"),
    (_pc, dict(y=np.zeros((3, 2), np.float32)), "y"), (_pc, dict(y="abc"), "y"),
    (_pc, dict(r=-1.0), "r"), (_pc, dict(r=np.nan), "r"), (_pc, dict(r=np.inf), "r"), (_pc, dict(r="a"), "r"),
    (_pc, dict(r=[0.2, 0.1]), "r"), (_pc, dict(r=[[0.1]]), "r"), (_pc, dict(r=[]), "r"), (_pc, dict(r=None), "r"),
    (_dh, dict(bins="auto"), "bins"), (_dh, dict(bins=0), "bins"), (_dh, dict(bins=2.5), "bins"),
    (_dh, dict(bins=[0, 2, 1]), "bins"), (_dh, dict(bins=[0, np.nan]), "edges"), (_dh, dict(bins=True), "bins"),
    (_dh, dict(range=(1, 0)), "range"), (_dh, dict(range="ab"), "range"), (_dh, dict(range=(0, np.inf)), "range"),
    (_dh, dict(range=(0, 1, 2)), "range"),
    (_pc, dict(box="abc"), "box"), (_pc, dict(box=[1, -1, 1]), "box"), (_pc, dict(box=[1, 1]), "box"),
    (_pc, dict(box=0), "box"), (_pc, dict(box=np.nan), "box"),
    (_pc, dict(device=42), "device="), (_pc, dict(method="kd"), "method"),
    (_pc, dict(images="some", box=1.0), "images"), (_pc, dict(images="all"), "images"),
    (_pc, dict(variant="x"), "variant"), (_pc, dict(ppw="2"), "ppw"), (_pc, dict(ppw=17), "ppw"),
    (_pc, dict(wg_size=3), "wg_size"), (_pc, dict(wg_size="32"), "wg_size"), (_pc, dict(diag="x"), "diag"),
    (_pc, dict(vec=3), "vec"), (_dh, dict(output="x"), "output"), (_dh, dict(copies=3), "copies"),
    (_dh, dict(flush="x"), "flush"), (_pc, dict(form="x"), "form"), (_pc, dict(bogus=1), "bogus"),
    (_pc, dict(output="local"), "output"), (_pc, dict(method="cells", variant="naive"), "allpairs"),
    (_pc, dict(method="cells", r=[0.1, 0.2]), "cells"),
]


@pytest.mark.parametrize("call,kw,name", BAD, ids=[f"{c.__name__[1:]}-{n}-{i}" for i, (c, _, n) in enumerate(BAD)])
def test_bad_arguments_named(device, call, kw, name):
    X = np.random.default_rng(0).random((20, 3)).astype(np.float32)
    kw = dict(kw)
    x = kw.pop("x", X)
    with pytest.raises((TypeError, ValueError), match=name):
        call(x, kw.pop("device", device), **kw)


BAD_UNNAMED = [  # bad values that escape as another error or are silently accepted
    dict(ppw=0), dict(wg_size=0), dict(chunk_points="x"), dict(launch_blocks="x"), dict(launch_blocks=0),
    dict(launch_blocks=-1), dict(chunk_points=-5)]


@pytest.mark.parametrize("kw", BAD_UNNAMED, ids=[f"{k}={v!r}" for d in BAD_UNNAMED for k, v in d.items()])
def test_bad_kernel_options_named(device, kw):
    X = np.random.default_rng(0).random((20, 3)).astype(np.float32)
    (name,) = kw
    with pytest.raises((TypeError, ValueError), match=name):
        _dh(X, device, **kw)


# ================================================== exact=False: still memory-safe

REL = 1e-5      # exact=False: a pair may only cross a threshold it lies within REL (relative) of


def check_inexact_count(got, ds, r):
    lo, hi = int((ds < r * (1 - REL)).sum()), int((ds <= r * (1 + REL)).sum())
    assert lo <= got <= hi, (got, lo, hi, count(ds, r))


def check_inexact_hist(got, ds, e):
    """For every edge e_b: the pairs counted below it and above it are those of
    the reference, up to the pairs within REL of e_b or of the range's ends."""
    lo, hi = e[0], e[-1]
    total = int(got.sum())
    for b in range(1, len(e)):
        below = int(got[:b].sum())
        assert int(((ds > lo * (1 + REL)) & (ds < e[b] * (1 - REL))).sum()) <= below <= \
            int(((ds >= lo * (1 - REL)) & (ds <= e[b] * (1 + REL))).sum()), (b, got, histogram(ds, e))
        assert int(((ds > e[b] * (1 + REL)) & (ds < hi * (1 - REL))).sum()) <= total - below <= \
            int(((ds >= e[b] * (1 - REL)) & (ds <= hi * (1 + REL))).sum()), (b, got, histogram(ds, e))


@pytest.mark.parametrize("dtype,scale", [(np.float32, s) for s in SCALES32] + [(np.float64, s) for s in SCALES64])
def test_inexact_is_memory_safe(device, rng, dtype, scale):
    """exact=False on hostile data: no crash, counts <= the number of pairs,
    and (open data) off the reference only for pairs within 1e-5 (relative) of
    a threshold."""
    need_fp64(device, dtype)
    i = (SCALES32 + SCALES64).index(scale)
    opts = dict(variant="readonly", exact=False, **SMALL)
    stage = list(STAGES.values())[i % 3]
    X = hostile(rng, 120, 3, scale, dtype, ("spread", "offset", "clustered")[i % 3])
    ds, s = scaled_distances(X)
    P = npairs(X)

    r = at_quantile(ds, 0.2)
    got = clkernels.pair_count(X, r / s, device=device, **opts)
    assert isinstance(got, int) and 0 <= got <= P
    check_inexact_count(got, ds, r)
    radii = n_thresholds(np.concatenate([[0.0], ties(ds, NB, rng)]), NB)
    got = clkernels.pair_count(X, radii / s, device=device, **opts)
    assert got.dtype == np.int64 and (np.diff(got) >= 0).all() and 0 <= got[0] and got[-1] <= P
    for g, t in zip(got, radii):
        check_inexact_count(int(g), ds, t)
    for rng_ in (None, (0.0, r / s), (0.5 * r / s, 2 * r / s), (1e4 * ds.max() / s, 2e4 * ds.max() / s)):
        c, e = clkernels.distance_histogram(X, NB, rng_, device=device, **opts, **stage)
        assert c.dtype == np.int64 and (c >= 0).all() and c.sum() <= P
        check_inexact_hist(c, ds, e * s)
    got = clkernels.pair_count(X[:60], r / s, y=X[60:], device=device, **opts)
    assert 0 <= got <= 60 * 60
    check_inexact_count(got, distances(X[:60] * s, X[60:] * s), r)
    if scale < 1e100:      # (near 1e160 method='cells' fails: test_float64_near_overflow_public_methods)
        got = clkernels.pair_count(X, r / s, device=device, exact=False, method="cells")
        assert 0 <= got <= P
        check_inexact_count(got, ds, r)


@pytest.mark.parametrize("nbins", [16, 256])
def test_inexact_floor_bins_and_the_guard_slot(device, rng, nbins):
    """exact=False on a full range (the one-FFMA floor onto 2^-F steps): pairs
    at d = 0 and below 2^-(F+1) of a bin (x under the binade: the guard slot
    before bin 0) are counted in bin 0; the rest within the inexact rule, in
    every local stage."""
    X = rng.random((300, 3)).astype(np.float32)
    X[150:170] = X[0]                                      # 190 + 20 pairs at d = 0
    X[170] = X[1] + np.float32(1e-7)                       # far below a 2^-15 step of a bin
    ds = distances(X)
    for opts in (dict(output="local", flush="reduce"), dict(output="local", copies=2, flush="atomic"),
                 dict(output="local", variant="readonly", wg_size=32, ppw=2)):
        c, e = clkernels.distance_histogram(X, nbins, device=device, exact=False, **opts)
        assert c.sum() == npairs(X)
        assert c[0] >= int((ds < e[1] * (1 - REL)).sum()) >= 211
        check_inexact_hist(c, ds, e)


def test_subnormal_squared_distances(device, rng):
    """Pairs whose float32 squared distance is subnormal or underflows to 0 (a
    flushing square root, Device.fast_sqrt, maps a subnormal square to 0): data
    whose spread float32 cannot hold beside its bins (a point at 2^100, bins of
    2^-39: kernel edges near 2^-80) get numpy's bins in the fraction-bit form
    and the two-scale form (past 32,765 bins); and the bands: at a first edge
    of 2^-66 kernel units a flushed root is off by up to ten bins, so the
    fraction-bit window takes every pair and the two-scale form decides every
    pair in double (without the flush term neither would)."""
    from clkernels.host.outputs.exact import Scaling, frac_band, frac_bits, frac_err, magic_eps

    w = 2.0 ** -39
    X = np.array([[0, 0, 0], [1.5 * w, 0, 0], [3.25 * w, 0, 0], [0, 2.5 * w, 0], [7 * w, w, 0],
                  [2.0 ** 100, 0, 0]], np.float32)
    X = np.concatenate([X, (rng.random((20, 3)) * 9 * w).astype(np.float32)])
    ds = distances(X)
    for nbins in (16, 64, 32768):
        c, e = clkernels.distance_histogram(X, nbins, (0.0, w * nbins), device=device, method="allpairs")
        check_array(c, histogram(ds, e))
    sc = Scaling(np.dtype(np.float32), 3, 1.0)
    for nb in (64, 256):
        a, b = frac_err(sc, 2.0 ** -66 * nb, nb, 1.0)
        assert frac_band(nb, a, b)[1] > 2 ** frac_bits(nb)
        assert frac_band(nb, *frac_err(sc, 2.0 ** -30 * nb, nb, 1.0))[1] < 64
    assert magic_eps(sc, 2.0 ** -66, 1.0)[1] and not magic_eps(sc, 2.0 ** -30, 1.0)[1]


def test_inexact_range_far_below_the_data(device):
    X = np.zeros((4, 3), np.float32)
    X[1], X[2] = 3e38, -3e38                        # X[3] == X[0]: one pair at d = 0
    c, e = clkernels.distance_histogram(X, 4, (0.0, 1e-30), device=device, exact=False)
    check_array(c, [1, 0, 0, 0])


# ========================================================= cumulative counts on ties



def test_radii_on_ties_minimal(device):
    X = np.array([[0.60663575, 0.72949654, 0.543625], [0.9350724, 0.81585354, 0.0027385]], np.float32)
    d = float(distances(X)[0])
    check_count(clkernels.pair_count(X, d, device=device), 1)          # a scalar r: right
    check_array(clkernels.pair_count(X, [0.0, d], device=device), [0, 1])


def _tie_case(rng, case):
    """(X, Y, box, images, options) of a radii-on-ties case."""
    if case == "lattice-0.1":
        return lattice(6, 3, 0.1, np.float32), None, None, None, {}
    if case == "lattice-float64":                   # radii sqrt(k): fl(sqrt(k))^2 != k
        return lattice(4, 3, 1.0, np.float64), None, None, None, {}
    if case == "water-OH":
        O, H, box = water(rng, 3, np.float32)
        return O, H, box, None, {}
    if case == "unwrapped":
        box = np.array([1.0, 1.3, 0.8])
        return unwrap(rng, (rng.random((80, 3)) * box).astype(np.float32), box), None, box, None, {}
    if case == "images-all":
        box = np.array([0.7, 0.9])
        return (rng.random((30, 2)) * box).astype(np.float32), None, box, "all", {}
    dt, rest = case.split("-", 1)
    scale, kind = rest.rsplit("-", 1)
    X = hostile(rng, 100, 3, float(scale), np.dtype(dt), kind)
    return X, None, None, None, (dict(variant="readonly") if dt == "float64" else {})


@pytest.mark.parametrize("case", ["float32-1e-25-spread", "float32-1-spread", "float32-1e30-clustered",
                                  "float64-1e-200-spread", "float64-1e160-offset", "lattice-0.1", "lattice-float64",
                                  "water-OH", "unwrapped", "images-all"])
def test_radii_on_ties(device, rng, case):
    """Radii on exact pair distances (64 of them, 200 with images): cumulative counts."""
    X, Y, box, images, opts = _tie_case(rng, case)
    need_fp64(device, X.dtype)
    K = None if images is None else images_for(box, 1.5 * float(np.max(box)))
    ds, s = scaled_distances(X, Y, box, K)
    if box is None:
        reach = ds.max()
    else:
        reach = (1.5 * float(np.max(box)) if images else 0.5 * float(np.min(box))) * s
    k = 200 if images else 64
    radii = n_thresholds(np.concatenate([[0.0], ties(ds, k, rng, 0.0, reach)]), k)
    got = clkernels.pair_count(X, radii / s, y=Y, box=box, device=device, images=images or "nearest",
                               **opts)
    check_array(got, cumulative(ds, radii))


# ============================================================== guard zones

POISON = np.uint32(0xA5C3F00D)


class GuardedHistStage(HistStage):
    """A HistStage whose device histogram (and per-group partials) are
    sub-buffers in the middle of larger buffers poisoned around them;
    :meth:`check_guards` verifies that nothing outside was written."""

    @classmethod
    def wrap(cls, stage):
        g = cls.__new__(cls)
        g.__dict__.update(stage.__dict__)
        g.zones = []
        return g

    def _zone(self, device, queue, nbytes, fill):
        align = max(8, device.cl_device.mem_base_addr_align // 8)
        guard = -(-4096 // align) * align
        total = 2 * guard + nbytes
        big = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, total)
        cl.enqueue_fill_buffer(queue, big, POISON, 0, total)
        cl.enqueue_fill_buffer(queue, big, fill, guard, nbytes)
        sub = big.get_sub_region(guard, nbytes)
        self.zones.append((queue, big, guard, nbytes))
        return types.SimpleNamespace(data=sub, nbytes=nbytes)

    #: test_guard_zones_have_teeth: a histogram this many words too short
    short = 0

    def start(self, device, queue, allocator, launches, events):
        st = super().start(device, queue, allocator, launches, events)
        st.hist = self._zone(device, queue, 8 * (self.nbins - self.short), np.uint64(0))
        if self.reduce:
            st.part = self._zone(device, queue, st.part.nbytes, np.uint32(0xFFFFFFFF))
        return st

    def finish(self, states, events):
        if not self.short:
            return super().finish(states, events)
        h = np.zeros(self.nbins, np.uint64)
        for st in states:
            cl.enqueue_copy(st.queue, h[: self.nbins - self.short], st.hist.data, is_blocking=True)
        return h

    def check_guards(self):
        assert self.zones
        for q, big, guard, n in self.zones:
            h = np.empty(big.size // 4, np.uint32)
            cl.enqueue_copy(q, h, big, is_blocking=True)
            lo, hi = h[: guard // 4], h[(guard + n) // 4:]
            assert (lo == POISON).all() and (hi == POISON).all(), \
                ("written outside the histogram", np.flatnonzero(lo != POISON), np.flatnonzero(hi != POISON))


class GuardedHist(HistStat):
    short = 0

    def stage(self, *args):
        self.guarded = GuardedHistStage.wrap(super().stage(*args))
        self.guarded.short = self.short
        return self.guarded


class GuardedRadii(CountStat):
    def stage(self, *args):
        self.guarded = GuardedHistStage.wrap(super().stage(*args))
        return self.guarded


def guarded_histogram(device, X, bins, range=None, exact=True, **options):
    """distance_histogram through a guarded output stage (one Call)."""
    call = Call(X, None, device)
    edges = inputs.histogram_edges(bins, range, call.default_range() if range is None else None)
    stat = GuardedHist(edges, call.max_distance())
    got = stat.result(call.run(stat, exact, options))
    stat.guarded.check_guards()
    return got, edges.edges


def guarded_radii(device, X, radii, exact=True, **options):
    call = Call(X, None, device)
    stat = GuardedRadii(np.asarray(radii, np.float64), False)
    got = stat.result(call.run(stat, exact, options))
    stat.guarded.check_guards()
    return got


GUARD_CASES = ["1e30-beyond-range", "1e30-full", "1e-25-one-bin", "simplex-3e38-last-edge",
               "1e30-below-range", "float64-1e160", "radii-3e38", "inexact-1e30-full", "inexact-3e38-beyond"]


@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("case", GUARD_CASES)
def test_histogram_guard_zones(device, rng, case, stage):
    """The histogram output stage writes its histogram (and partials) only:
    poisoned guard words around them stay intact on hostile inputs."""
    opts = dict(variant="readonly", **SMALL, **STAGES[stage])
    exact = not case.startswith("inexact")
    if case == "float64-1e160":
        need_fp64(device)
        X = hostile(rng, 100, 3, 1e160, np.float64, "spread")
    elif case == "simplex-3e38-last-edge":
        X = (np.repeat(np.eye(8), 2, axis=0) * 3e38).astype(np.float32)
        X[1::2] *= np.float32(-1)                   # 16 points, every distance 3e38*sqrt(2) or *2
    elif "1e-25" in case:
        X = hostile(rng, 100, 3, 1e-25, np.float32, "spread")
    else:
        X = hostile(rng, 100, 3, 3e38 if "3e38" in case else 1e30, np.float32, "spread")
    ds, s = scaled_distances(X)
    if case.startswith("radii"):
        radii = n_thresholds([0.0, 1e30, 1e37, 1e38, 1e39], NB)
        got = guarded_radii(device, X, radii, exact, **opts)
        check_array(got, cumulative(ds, radii * s))
        return
    rng_ = {"1e30-beyond-range": (0.0, 1.0), "1e-25-one-bin": (0.0, 1.0), "1e30-below-range": (1e31, 2e31),
            "simplex-3e38-last-edge": (0.0, float(ds.max() / s)), "inexact-3e38-beyond": (0.0, 1e-30)}.get(case)
    got, e = guarded_histogram(device, X, NB, rng_, exact, **opts)
    want = histogram(ds, e * s)
    if exact:
        check_array(got, want)
    else:       # memory-safe; the values: test_inexact_* (this range: test_inexact_range_far_below_the_data)
        assert got.dtype == np.int64 and (got >= 0).all() and got.sum() <= npairs(X)
        if case != "inexact-3e38-beyond":
            check_inexact_hist(got, ds, e * s)
    if case == "1e-25-one-bin":
        assert got[0] == npairs(X)
    if case in ("1e30-beyond-range", "1e30-below-range"):
        assert got[1:].sum() == 0 and got[0] == count(ds, 0.0) * (case != "1e30-below-range")
    if case == "simplex-3e38-last-edge":
        assert got[-1] == int((ds == ds.max()).sum()) > 0


def test_guard_zones_have_teeth(device):
    """The guard check itself: a device histogram one word short, every pair in
    the last bin (global atomics): the write lands in the guard and is caught."""
    X = np.repeat(np.eye(4, dtype=np.float32), 3, axis=0)         # distances 0 and sqrt(2)
    call = Call(X, None, device)
    stat = GuardedHist(inputs.histogram_edges(NB, (0.0, float(np.sqrt(2)))), call.max_distance())
    stat.short = 1
    call.run(stat, True, dict(variant="readonly", output="global", **SMALL))
    with pytest.raises(AssertionError, match="outside"):
        stat.guarded.check_guards()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_periodic_grid_points_on_faces(device, rng, dtype):
    """Points whose wrap lands on the box's face (exactly L, -tiny, k L, L
    less an ulp): every grid variant puts them in the cell of the coordinate
    its kernels hold (the 'cell' variant's images by cell dropped their pairs
    when the cell came from the unwrapped value), counts and histograms exact."""
    need_fp64(device, dtype)
    L = 1.0
    box = np.full(3, L)
    face = np.array([0.0, L, -1e-20, -2.0 ** -60, 3 * L, -L, np.nextafter(L, 0.0), 1e-20, 0.01, 0.99, 0.5])
    X = rng.random((200, 3)) * 0.05
    X[:, 0] = rng.choice(face, 200)
    X[:, 1:] = 0.5 + X[:, 1:]
    X = X.astype(dtype)
    ds, s = scaled_distances(X, None, box=box)
    g = clkernels.Grid(X, 0.25, box=box, device=device)
    assert min(g.ncell) >= 3
    edges = np.array([0.0, 0.01, 0.02, 0.05, 0.1, 0.2]) * s
    for v in ("point", "row", "cell"):
        for t in (0.0, 0.01, 0.02, 0.1, 0.2):
            check_count(clkernels.grid_pair_count(g, t, variant=v), count(ds, t * s))
        check_array(clkernels.grid_histogram(g, edges / s, variant=v), histogram(ds, edges))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [2, 3])
def test_periodic_grid_variants_ties(device, rng, d, dtype):
    """Every grid variant in a periodic box of 3 or more cells per dimension
    ('cell' takes a neighbour cell's image from its wrap instead of a minimum
    image per pair): lattice ties across the box's faces, and random points
    near the faces, self and cross, counts and histograms exact."""
    need_fp64(device, dtype)
    n_side = 7
    X = lattice(n_side, d, 1.0, dtype) + dtype(0.25)
    box = np.full(d, float(n_side))
    Y = (rng.random((120, d)) ** 4 * n_side).astype(dtype)      # crowded near 0: images across faces
    Y = np.concatenate([Y, np.float64(n_side) - Y[:60].astype(np.float64)]).astype(dtype) % dtype(n_side)
    for A, B in ((X, None), (Y, None), (X, Y)):
        ds, s = scaled_distances(A, B, box=box)
        for r in (2.0, 2.2):
            g = clkernels.Grid(A, r, box=box, device=device) if B is None else None
            grids = (g, None) if B is None else clkernels.Grid.joint(A, B, r, box=box, device=device)
            assert min(grids[0].ncell) >= 3
            rs = ties(ds, 3, rng, 0.0, r * s)
            edges = n_thresholds(np.concatenate([[0.0], ties(ds, NB, rng, 0.0, r * s)]))
            for v in ("row", "cell"):
                for t in rs:
                    check_count(clkernels.grid_pair_count(grids[0], t / s, grids[1], variant=v), count(ds, t))
                check_array(clkernels.grid_histogram(grids[0], edges / s, grids[1], variant=v),
                            histogram(ds, edges))
