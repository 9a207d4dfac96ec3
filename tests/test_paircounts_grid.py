"""clkernels.paircounts' double kernel over a cell grid (host/paircounts/gridded.py):
the same counts and sums as numpy float64 brute force (the references of
test_paircounts.py) where only the neighbouring cells' pairs are evaluated --
ties at the last edges (which the cells' width must reach), periodic wraps
over one and two cells, partner ranges cut across work-groups, weights,
ravg and exclusions."""

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from clkernels.host.paircounts import gridded
from helpers import clustered, lattice, uniform
from test_paircounts import check, reference, separations, tie_edges


@pytest.fixture
def forced(monkeypatch):
    """The grid taken at test sizes (no lower bound on the pairs, cells of a few
    points); yields the list of the built tables (a spy on gridded.build)."""
    monkeypatch.setattr(gridded, "MIN_PAIRS", {"gpu": 1, "cpu": 1})
    monkeypatch.setattr(gridded, "OCCUPANCY", 2)
    monkeypatch.setattr(gridded, "MAX_FRACTION", 1.0)
    built, build = [], gridded.build

    def spy(*a, **k):
        t = build(*a, **k)
        built.append(t)
        return t

    monkeypatch.setattr(gridded, "build", spy)
    return built


def _second(mode, pimax):
    if mode == "rppi":
        return dict(pimax=pimax, npi=4), np.linspace(0.0, pimax, 5)
    if mode == "smu":
        return dict(nmu=5), np.linspace(0.0, 1.0, 6)
    return {}, None


@pytest.mark.parametrize("mode,d", [("r", 1), ("r", 3), ("rppi", 2), ("rppi", 3), ("smu", 3)])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_grid_matches_reference(device, rng, forced, mode, d, kind):
    dtype = np.float32 if kind == "uniform" else np.float64
    n, m = (900, 500) if d > 1 else (400, 300)
    make = uniform if kind == "uniform" else clustered
    side = 10.0 if d > 1 else 40.0
    X = make(rng, n, d, dtype) * dtype(side)
    Y = (make(rng, m, d, dtype) * dtype(side) if kind == "uniform"       # clustered: around x's clusters
         else (X[rng.integers(0, n, m)] + 0.1 * rng.standard_normal((m, d))).astype(dtype))
    for cross in (False, True):
        for box in (None, np.full(d, side)):
            yy = Y if cross else None
            v1 = separations(X, yy, box, mode)[0]
            edges = tie_edges(rng, v1, 0.0, 1.2, k=5)      # ties at the edges, the last one among them
            kw, e2 = _second(mode, 0.9)
            w = rng.random(n) + 0.5
            wy = rng.random(m) + 0.5 if cross else None
            before = len(forced)
            res = clkernels.paircounts(X, edges, y=yy, box=box, mode=mode, weights=w, y_weights=wy, ravg=True,
                                       device=device, **kw)
            assert len(forced) == before + 1 and forced[-1].groups > 0
            check(res, *reference(X, edges, yy, box, mode, e2, wx=w, wy=wy))
            if mode != "r":         # unweighted (mode 'r' takes the two-body kernels there)
                plain = clkernels.paircounts(X, edges, y=yy, box=box, mode=mode, device=device, **kw)
                assert len(forced) == before + 2
                np.testing.assert_array_equal(plain["npairs"], reference(X, edges, yy, box, mode, e2)[0])


@pytest.mark.parametrize("periodic", [False, True])
def test_grid_ties_at_the_reach(device, rng, forced, periodic):
    """A lattice of spacing 1 and last edges at exactly 1 (r) or rp = pi = 1: the
    pairs exactly at the reach, counted in the closed last bin, sit in the
    next cells."""
    X = lattice(8, 3, dtype=np.float64) + 0.25
    box = np.full(3, 8.0) if periodic else None
    for mode in ("r", "rppi", "smu"):
        edges = np.array([0.0, 0.5, 1.0]) if mode != "r" else np.array([0.0, 0.999, 1.0])
        kw, e2 = _second(mode, 1.0)
        res = clkernels.paircounts(X, edges, box=box, mode=mode, ravg=True, device=device, **kw)
        n = reference(X, edges, None, box, mode, e2)[0]
        check(res, n)
        assert n.sum() > 0 and (mode != "r" or n[-1] > 0)      # r: pairs at exactly the reach


def test_grid_few_cells_in_a_box(device, rng, forced):
    """A periodic box with two or three cells along an axis: the wrapped neighbours
    coincide, and each pair is still counted once."""
    X = uniform(rng, 700, 3, np.float64) * np.array([10.0, 2.3, 3.1])
    box = np.array([10.0, 2.3, 3.1])
    edges = np.array([0.0, 0.3, 0.7, 1.1])
    for mode in ("r", "rppi"):
        kw, e2 = _second(mode, 1.0)
        res = clkernels.paircounts(X, edges, box=box, mode=mode, ravg=True, device=device, **kw)
        check(res, *reference(X, edges, None, box, mode, e2)[:2])


def test_grid_ranges_cut_across_groups(device, rng, forced, monkeypatch):
    """Partner ranges longer than a group's share (chunk = one tile): cut into
    pieces over several work-groups, every pair once."""
    monkeypatch.setattr(gridded, "MIN_CHUNK_TILES", 1)
    monkeypatch.setattr(gridded, "MAX_GROUPS", 1 << 30)
    X = clustered(rng, 1500, 3, np.float64) * 10
    edges = np.array([0.0, 0.2, 0.5, 0.9])
    w = rng.random(1500)
    res = clkernels.paircounts(X, edges, weights=w, ravg=True, mode="rppi", pimax=0.8, npi=2, device=device)
    wg = int(forced[-1].gtab[0, 1] - forced[-1].gtab[0, 0])
    assert forced[-1].chunk == wg and forced[-1].groups > len(np.unique(forced[-1].gtab[:, 0]))
    check(res, *reference(X, edges, None, None, "rppi", np.linspace(0, 0.8, 3), wx=w))


def test_grid_groups_and_device_arrays(device, rng, forced):
    """Exclusions (pairs of one group id skipped in the kernel) and device-array
    inputs, taken in the grid's order on the device."""
    X = uniform(rng, 800, 3, np.float64) * 8
    g = rng.integers(0, 40, 800).astype(np.int32)
    w = rng.random(800)
    edges = np.array([0.0, 0.4, 0.8, 1.0])
    q = device.queue
    res = clkernels.paircounts(cla.to_device(q, X), edges, weights=cla.to_device(q, w),
                               groups=cla.to_device(q, g), ravg=True, mode="smu", nmu=3, device=device)
    check(res, *reference(X, edges, None, None, "smu", np.linspace(0, 1, 4), wx=w, gx=g))


def test_grid_no_neighbours(device, rng, forced):
    """Cross sets whose cells are never neighbours: no work-group, zeros."""
    X = uniform(rng, 300, 2, np.float64)
    Y = uniform(rng, 300, 2, np.float64) + 50.0
    res = clkernels.paircounts(X, [0.0, 0.5, 1.0], y=Y, weights=np.ones(300), y_weights=np.ones(300),
                               device=device)
    assert not res["npairs"].any() and not res["weightavg"].any()
    assert forced[-1].groups == 0


def test_grid_prunes(device, rng, monkeypatch):
    """At the library's own occupancy and fraction, a 2-D periodic rp-pi count of
    4,000 points evaluates under half of the pairs, with the all-pairs kernel's
    counts and sums."""
    monkeypatch.setattr(gridded, "MIN_PAIRS", {"gpu": 1, "cpu": 1})
    built, build = [], gridded.build
    monkeypatch.setattr(gridded, "build", lambda *a, **k: built.append(build(*a, **k)) or built[-1])
    X = uniform(rng, 4000, 2, np.float64) * 10
    box, edges, w = np.full(2, 10.0), np.geomspace(0.01, 0.2, 8), rng.random(4000)
    kw = dict(box=box, mode="rppi", pimax=0.2, npi=4, weights=w, ravg=True, device=device)
    res = clkernels.paircounts(X, edges, **kw)
    assert len(built) == 1 and built[0].pairs < 0.5 * 4000 ** 2
    monkeypatch.setattr(gridded, "MAX_FRACTION", 0.0)             # all pairs
    ref = clkernels.paircounts(X, edges, **kw)
    assert len(built) == 1
    np.testing.assert_array_equal(res["npairs"], ref["npairs"])
    for f in ("ravg", "weightavg"):
        np.testing.assert_allclose(res[f], ref[f], rtol=1e-13, atol=0)


def test_grid_cells_reach(device, forced, monkeypatch):
    """Cells at least the reach wide: a work-group's worth of points just below a
    cell boundary and as many exactly the reach above them (in the second
    cell on, were the cells narrower) are all counted."""
    monkeypatch.setattr(gridded, "OCCUPANCY", 1e-12)
    r, k = 1.0, np.arange(2, 12, 3, dtype=float)
    edges = np.array([0.0, 0.5, r])
    side = gridded.cell_sides("r", edges, None, 1, 12.0)[0] * (1 + 2.0 ** -40)     # Geometry's open widths
    a = k * side - 1e-9
    X = np.concatenate([[0.0], np.repeat(a, 600), np.repeat(a + r, 600)])[:, None]
    res = clkernels.paircounts(X, edges, ravg=True, device=device)
    n = reference(X, edges)[0]
    assert n[-1] >= 2 * 600 * 600 * len(k)
    check(res, n)


def test_grid_open_cross_at_a_cell_multiple(device, rng, forced, monkeypatch):
    """Cross sets whose joint extent lies a few ulps below a whole number of
    cell widths: y's grid takes x's geometry (its last cell reaches y's
    largest coordinate; this raised before)."""
    monkeypatch.setattr(gridded, "OCCUPANCY", 1e-12)
    lo, hi, r = 10.0, 25.09569351264546, 0.7547846749285818
    X = np.r_[lo, rng.uniform(lo, hi, 500)][:, None]
    Y = np.r_[hi, rng.uniform(lo, hi, 500)][:, None]
    e = np.array([0.0, r / 2, r])
    res = clkernels.paircounts(X, e, y=Y, ravg=True, device=device)
    check(res, *reference(X, e, Y)[:2])


def test_grid_unwrapped_scaled_and_grouped(device, rng, forced):
    """Periodic points up to three boxes outside the box, one cell along an axis
    (the reach half its side), magnitudes at which the separations are scaled
    by a power of two, exclusions in cross pairs, and the call on a queue of
    its own: the all-pairs kernel's counts and sums."""
    import pyopencl as cl

    from clkernels.host.paircounts import api

    L = np.array([10.0, 10.0, 4.0])
    X = rng.random((600, 3)) * L + rng.integers(-3, 4, (600, 3)) * L
    Y = rng.random((400, 3)) * L
    g, gy = rng.integers(0, 30, 600).astype(np.int32), rng.integers(0, 30, 400).astype(np.int32)
    w, wy = rng.random(600), rng.random(400)
    edges = np.array([0.0, 0.6, 1.3, 2.0])
    q2 = cl.CommandQueue(device.context, device.cl_device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    for scale in (1.0, 2.0 ** -700, 2.0 ** 700):
        for yy, kw in ((None, dict(groups=g)), (Y * scale, dict(groups=g, y_groups=gy, y_weights=wy))):
            args = dict(y=yy, box=L * scale, mode="rppi", pimax=2.0 * scale, npi=2, weights=w, ravg=True, **kw)
            got, _, _ = api._evaluate(device, q2, X * scale, edges * scale, **args)
            want, _, _ = api._evaluate(device, None, X * scale, edges * scale, grid=False, **args)
            np.testing.assert_array_equal(got["npairs"], want["npairs"])
            for f in ("ravg", "weightavg"):
                np.testing.assert_allclose(got[f], want[f], rtol=1e-12, atol=0)
            if scale == 1.0:
                check(got, *reference(X, edges, yy, L, "rppi", np.linspace(0, 2, 3), wx=w,
                                      wy=None if yy is None else wy, gx=g, gy=None if yy is None else gy))
    assert len(forced) == 6 and all(t.groups for t in forced)


def test_grid_decision(device):
    """The grid where its neighbour cells hold at most a quarter of the pairs (and
    the call is large enough), all pairs otherwise; never in a triclinic cell.
    Cells are cuboids in mode 'rppi': rp's reach across, pi's along the line of sight."""
    from clkernels.host.paircounts.plan import Problem
    from clkernels.host.primitives.points import bounds

    q = device.queue
    x = cla.to_device(q, np.random.default_rng(0).random((1 << 16, 3)) * 100)
    b = bounds(q, x)

    def bnd():
        return b

    def prob(**kw):
        base = dict(dims=3, mode="rppi", periodic=True, auto=True, weighted=False, ravg=False, grouped=False,
                    nb1=10, nb2=10, uniform1=False, uniform2=True, nx=1 << 16, ny=1 << 16)
        base.update(kw)
        return Problem(**base)

    box = np.full(3, 100.0)
    e1, e2 = np.geomspace(0.1, 5.0, 11), np.linspace(0.0, 10.0, 11)
    got = gridded.plan(device, prob(), e1, e2, box, bnd)
    assert got is not None and (got[0][:2] >= 5.0).all() and got[0][2] >= 10.0    # cuboid cells: rp, rp, pi
    assert got[0][2] == pytest.approx(2 * got[0][0])
    far = np.linspace(0.0, 40.0, 11)
    assert gridded.plan(device, prob(), e1, far, box, bnd) is not None                  # pi far, rp near
    assert gridded.plan(device, prob(), far, far, box, bnd) is None                     # rp and pi far
    assert gridded.plan(device, prob(triclinic=True), e1, e2, box, bnd) is None
    assert gridded.plan(device, prob(nx=100, ny=100), e1, e2, box, bnd) is None              # few pairs
