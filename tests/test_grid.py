"""The device cell-list grid (host/cellgrid) and pair statistics over it,
against the float64 reference (tests/helpers.py), exactly."""

import dataclasses
import types

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from clkernels.host import cellgrid as G
from clkernels.host.cellgrid import PairPlan
from clkernels.host.primitives import exclusive_scan, padded_length, sort_pairs
from helpers import distances, ties


def _skip_fp64(device, dtype):
    if np.dtype(dtype) == np.float64 and not device.fp64:
        pytest.skip("device has no fp64")


def ref_dists(x, y=None, box=None):
    x = np.asarray(x).reshape(len(x), -1)
    y = None if y is None else np.asarray(y).reshape(len(y), -1)
    return distances(x, y, box)


def check_count(got, d, r):
    assert got == int((d <= r).sum()), (got, int((d <= r).sum()))


def check_hist(got, d, edges):
    want = np.histogram(d, np.asarray(edges, np.float64))[0]
    assert got.dtype == np.int64 and got.shape == want.shape
    assert (got == want).all(), (got, want)


def uniform(rng, n, d, dtype, scale=1.0):
    return (rng.random((n, d)) * scale).astype(dtype)


def clustered(rng, n, d, dtype):
    """A few tight Gaussian blobs (dense cells) plus a sparse background."""
    k = 3
    centers = rng.random((k, d))
    lab = rng.integers(0, k, n)
    x = centers[lab] + rng.normal(scale=0.02, size=(n, d))
    bg = rng.random(n) < 0.2
    x[bg] = rng.random((bg.sum(), d))
    return x.astype(dtype)


# ---------------------------------------------------------- sort and scan
@pytest.mark.parametrize("n2", [512, 2048, 8192])
def test_sort_pairs(device, rng, n2):
    n2 = max(n2, padded_length(device, 1))
    keys = rng.integers(0, 50, n2).astype(np.uint64) << np.uint64(40)
    keys[::7] = rng.integers(0, 2 ** 63, len(keys[::7]), dtype=np.uint64)
    vals = rng.permutation(n2).astype(np.uint32)
    kd, vd = cla.to_device(device.queue, keys), cla.to_device(device.queue, vals)
    sort_pairs(device.queue, kd, vd)
    order = np.lexsort((vals, keys))
    np.testing.assert_array_equal(kd.get(), keys[order])
    np.testing.assert_array_equal(vd.get(), vals[order])


@pytest.mark.parametrize("n", [1, 100, 2049, 9000, 70000])
def test_exclusive_scan(device, rng, n):
    a = rng.integers(0, 5, n).astype(np.uint32)
    ad = cla.to_device(device.queue, a)
    total, _ = exclusive_scan(device.queue, ad, n)
    ref = np.concatenate([[0], np.cumsum(a)[:-1]]).astype(np.uint32)
    np.testing.assert_array_equal(ad.get(), ref)
    assert total == int(a.sum())


# ------------------------------------------------------------ grid structure
def _ref_cells(g, x):
    """numpy cell coordinates (float64) and a mask of points near a boundary."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    if g.box is not None:
        x = x - g.box * np.floor(x / g.box)
    t = (x - g.lo) / g.width
    c = np.clip(np.floor(t), 0, g.ncell.astype(np.float64) - 1)
    frac = np.abs(t - np.round(t))
    return c.astype(np.int64), (frac < 1e-4).any(axis=1)


def check_structure(g, x):
    x = np.asarray(x)
    x = x[:, None] if x.ndim == 1 else x
    h = g.get()
    n = len(x)
    ids, start, count, pc, perm = (h[k] for k in ("cell_ids", "cell_start", "cell_count", "point_cell", "perm"))
    assert g.num_cells == len(ids) == len(start) == len(count)
    assert (np.diff(ids.astype(object)) > 0).all() if len(ids) > 1 else True
    if n == 0:
        assert len(ids) == 0 and len(perm) == 0
        return
    # every point exactly once, cells contiguous and non-empty
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    assert start[0] == 0 and (count > 0).all() and count.sum() == n
    assert g.max_cell_count == count.max()          # the build's longest run, read once
    np.testing.assert_array_equal(start[1:], (start + count)[:-1])
    np.testing.assert_array_equal(pc, np.repeat(np.arange(len(ids)), count))
    # stable inside a cell (sorted by (cell id, index))
    same_cell = pc[1:] == pc[:-1]
    assert (np.diff(perm.astype(np.int64))[same_cell] > 0).all()
    xs = np.asarray(x, np.float64)[perm]
    if g.box is not None:
        xs = xs - g.box * np.floor(xs / g.box)
        xs[xs >= g.box] -= np.broadcast_to(g.box, xs.shape)[xs >= g.box]
    np.testing.assert_array_equal(h["coords"], (xs * g.scaling.scale).astype(x.dtype).T)
    # cell ids: linearized coordinates, equal to numpy's away from boundaries
    key = ids[pc]
    coords = (key[:, None] // g.stride[None, :]) % g.ncell[None, :]
    ref, edge = _ref_cells(g, x[perm])
    ok = (coords.astype(np.int64) == ref).all(axis=1)
    assert (ok | edge).all(), np.nonzero(~(ok | edge))
    off = np.abs(coords.astype(np.int64) - ref).max(axis=1)
    assert (off <= 1).all()
    assert (coords < g.ncell).all()


@pytest.mark.parametrize("d", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grid_structure(device, rng, d, dtype):
    _skip_fp64(device, dtype)
    x = clustered(rng, 700, d, dtype) * 3 - 1
    cell = 0.3 if d <= 4 else 0.8
    g = G.Grid(x, cell, device=device)
    np.testing.assert_allclose(g.lo, x.astype(np.float64).min(0))
    np.testing.assert_array_equal(g.ncell, np.floor((x.max(0).astype(np.float64) - g.lo) / cell) + 1)
    check_structure(g, x)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_grid_structure_periodic(device, rng, d):
    box = np.array([1.0, 0.45, 0.7][:d])
    x = (rng.random((500, d)) * 3 - 1).astype(np.float32)   # outside the box: wrapped
    g = G.Grid(x, 0.2, box=box, device=device)
    np.testing.assert_array_equal(g.ncell, np.maximum(1, np.floor(box / 0.2)))
    check_structure(g, x)


@pytest.mark.parametrize("box", [None, [1.0, 1.0]])
def test_grid_structure_merge_sort(device, rng, box):
    """Past BITONIC_MAX_POINTS the keys are sorted by the segmented sort (one segment)."""
    n = G.BITONIC_MAX_POINTS + 1237
    x = clustered(rng, n, 2, np.float32)
    g = G.Grid(x, 0.05, box=box, device=device)
    check_structure(g, x)
    assert g.num_cells > 100


def test_grid_structure_segsort_fallback(device, rng, monkeypatch):
    """Where sort_long does not apply (None), the grid's keys go through the
    segmented sort's async path: the same structure."""
    from clkernels.host import segsort

    monkeypatch.setattr(segsort, "sort_long", lambda *a, **k: None)
    n = G.BITONIC_MAX_POINTS + 1237
    x = clustered(rng, n, 3, np.float32)
    g = G.Grid(x, 0.05, device=device)
    check_structure(g, x)
    assert g.num_cells > 100


def test_grid_device_array_and_sizes(device, rng):
    x = uniform(rng, 300, 2, np.float32)
    xd = cla.to_device(device.queue, x)
    g = G.Grid(xd, 0.1, device=device)
    check_structure(g, x)
    for n in (0, 1, 2):
        check_structure(G.Grid(x[:n], 0.1, device=device), x[:n])
    same = np.full((50, 3), 0.25, np.float32)
    g = G.Grid(same, 0.1, device=device)
    assert g.num_cells == 1
    check_structure(g, same)
    g = G.Grid(x[:, 0], 0.1, device=device)    # 1-D input is (n, 1)
    assert g.d == 1
    check_structure(g, x[:, :1])


def test_grid_bad_input(device):
    x = np.random.default_rng(0).random((10, 2))
    for c in (0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError):
            G.Grid(x, c, device=device)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        G.Grid(bad, 0.1, device=device)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError):
        G.Grid(cla.to_device(device.queue, bad), 0.1, device=device)
    with pytest.raises(ValueError):
        G.Grid(np.zeros((4, 9)), 0.1, device=device)
    with pytest.raises(ValueError):
        G.Grid(x, 0.1, box=[1.0, -1.0], device=device)
    with pytest.raises(ValueError):
        G.Grid(x, 0.1, box=[1.0, 1.0, 1.0], device=device)
    with pytest.raises(TypeError):
        G.Grid(x.astype(np.complex64), 0.1, device=device)
    with pytest.raises(ValueError):
        G.Grid(np.array([[0.0], [1e30]]), 1e-20, device=device)    # too many cells
    g = G.Grid(x, 0.1, device=device)
    with pytest.raises(ValueError):
        G.grid_pair_count(g, 0.2)          # r > cell_size
    with pytest.raises(ValueError):
        G.grid_pair_count(g, -0.05)
    with pytest.raises(ValueError):
        G.grid_histogram(g, [0, 0.05, 0.2])
    with pytest.raises(ValueError):
        G.grid_histogram(g, [0, 0.05, 0.02])
    with pytest.raises(ValueError):
        G.grid_pair_count(g, 0.1, G.Grid(x * 2, 0.1, device=device))   # other geometry
    with pytest.raises(ValueError):
        clkernels.pair_count(x, 0.1, y=np.zeros((3, 3)), device=device, method="cells")
    with pytest.raises(ValueError):
        clkernels.pair_count(x, np.nan, device=device, method="cells")
    with pytest.raises(ValueError):
        clkernels.distance_histogram(x, 0, device=device, method="cells")
    with pytest.raises(TypeError, match="device="):
        G.Grid(device, x, 0.1)                            # the old argument order
    with pytest.raises(TypeError, match="device="):
        G.Grid(x, 0.1, device=42)


# -------------------------------------------------------------- pair counts
VARIANTS = list(G.VARIANTS)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_pairs_open(device, rng, variant, dtype, d):
    _skip_fp64(device, dtype)
    r = [0.02, 0.06, 0.15, 0.25][d - 1]
    edges = np.sort(np.concatenate([[0.0, r], rng.random(5) * r]))
    for data in ("uniform", "clustered"):
        x = uniform(rng, 400, d, dtype) if data == "uniform" else clustered(rng, 400, d, dtype)
        g = G.Grid(x, r, device=device)
        dist = ref_dists(x)
        check_count(G.grid_pair_count(g, r, variant=variant), dist, r)
        check_count(G.grid_pair_count(g, r * 0.6, variant=variant), dist, r * 0.6)
        check_hist(G.grid_histogram(g, edges, variant=variant), dist, edges)
        if dtype != np.float32:     # cross pairs: float32 here, float64 in the periodic test
            continue
        # cross pairs against a second set on the joint geometry
        y = uniform(rng, 150, d, dtype, scale=1.2)
        gx, gy = G.Grid.joint(x, y, r, device=device)
        dxy = ref_dists(x, y)
        check_count(G.grid_pair_count(gx, r, gy, variant=variant), dxy, r)
        check_hist(G.grid_histogram(gx, edges, gy, variant=variant), dxy, edges)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_pairs_periodic(device, rng, variant, dtype, d):
    """Boxes with 1, 2, 3 and many cells per dimension vs minimum image."""
    _skip_fp64(device, dtype)
    r = 0.3
    box = np.array([0.45, 0.7, 1.0, 2.5][:d])[rng.permutation(d)]   # 1, 2, 3, 8 cells
    n = 300 if d > 1 else 120
    x = (rng.random((n, d)) * box).astype(dtype)
    x[: n // 10] += box.astype(dtype)          # some outside the box
    g = G.Grid(x, r, box=box, device=device)
    dist = ref_dists(x, box=box)
    check_count(G.grid_pair_count(g, r, variant=variant), dist, r)
    edges = np.linspace(0, r, 7)
    check_hist(G.grid_histogram(g, edges, variant=variant), dist, edges)
    if dtype != np.float64 and device.fp64:    # cross pairs: float64 here, float32 in the open test
        return
    y = (rng.random((80, d)) * box).astype(dtype)
    gx, gy = G.Grid.joint(x, y, r, box=box, device=device)
    dxy = ref_dists(x, y, box=box)
    check_count(G.grid_pair_count(gx, r, gy, variant=variant), dxy, r)
    check_hist(G.grid_histogram(gx, edges, gy, variant=variant), dxy, edges)


@pytest.mark.parametrize("variant", VARIANTS)
def test_pairs_small_and_identical(device, rng, variant):
    for n in (0, 1, 2):
        x = uniform(rng, n, 3, np.float32) * 0.05
        g = G.Grid(x, 0.1, device=device)
        got = G.grid_pair_count(g, 0.1, variant=variant)
        assert got == (1 if n == 2 else 0)
        h = G.grid_histogram(g, [0, 0.05, 0.1], variant=variant)
        assert h.sum() == got
    # identical points: one dense cell (several work-group tiles in 'cell')
    same = np.full((600, 2), 0.5, np.float32)
    g = G.Grid(same, 0.1, device=device)
    assert G.grid_pair_count(g, 0.1, variant=variant) == 600 * 599 // 2
    np.testing.assert_array_equal(G.grid_histogram(g, [0, 0.05, 0.1], variant=variant),
                                  [600 * 599 // 2, 0])
    y = np.full((7, 2), 0.5, np.float32)
    gx, gy = G.Grid.joint(same, y, 0.1, device=device)
    assert G.grid_pair_count(gx, 0.1, gy, variant=variant) == 600 * 7
    empty = np.zeros((0, 2), np.float32)
    for a, b in ((empty, y), (y, empty)):
        gx, gy = G.Grid.joint(a, b, 0.1, device=device)
        assert G.grid_pair_count(gx, 0.1, gy, variant=variant) == 0
        assert clkernels.pair_count(a, 0.1, y=b, device=device, method="cells") == 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_pairs_forced_paths(device, rng, variant):
    """64-bit local counters, copies of the local histogram (GPUs' default) and
    the global-atomics histogram path."""
    x = clustered(rng, 500, 2, np.float32)
    g = G.Grid(x, 0.08, device=device)
    dist = ref_dists(x)
    edges = np.linspace(0, 0.08, 9)
    base = PairPlan.resolve(device, g, g, "hist", len(edges) - 1, variant)
    for force in (dict(local64=True), dict(hist_local=0), dict(hist_local=G.plan.HIST_COPIES),
                  dict(local64=True, hist_local=3)):
        plan = dataclasses.replace(base, **force)
        check_hist(G.grid_histogram(g, edges, plan=plan), dist, edges)
    plan = dataclasses.replace(PairPlan.resolve(device, g, g, "count", 0, variant), local64=True)
    check_count(G.grid_pair_count(g, 0.08, plan=plan), dist, 0.08)


def test_histogram_from_zero_lists_no_coincident_pairs(device, monkeypatch):
    """A first edge at 0 has no band (every distance is on its upper side):
    coincident points are binned by the kernel, not listed for the double
    pass -- with a list limit of 8 pairs, 3,540 coincident pairs take no
    second pass; the bins are exact."""
    x = np.repeat(np.array([[0.5, 0.5, 0.5], [0.5, 0.5, 0.6]]), 60, axis=0)
    edges = np.array([0.0, 0.05, 0.2])
    monkeypatch.setattr(G.api, "BAND_ROOM_LIMITS", (4, 4))
    monkeypatch.setattr(G.plan, "band_list_max", lambda device: 8)
    for dtype in (np.float32, np.float64):
        if np.dtype(dtype) == np.float64 and not device.fp64:
            continue
        g = G.Grid(x.astype(dtype), 0.25, device=device)
        for variant in VARIANTS:
            before = len(g.events.get("pairs", ()))
            check_hist(G.grid_histogram(g, edges, variant=variant), ref_dists(x.astype(dtype)), edges)
            assert len(g.events.get("pairs", ())) - before == 1


def test_plan_for_another_grid(device, rng):
    """A plan made for one grid and given for another is checked against it:
    images by cell only where the grid has them, 64-bit local counters where
    a work-group's pairs may reach 2^32."""
    x = rng.random((400, 3)).astype(np.float32)
    periodic = G.Grid(x, 0.25, box=np.ones(3), device=device)
    open_ = G.Grid(x, 0.25, device=device)
    plan = PairPlan.resolve(device, periodic, periodic, "count", 0, "cell")
    assert plan.by_cell
    with pytest.raises(ValueError, match="by_cell"):
        G.grid_pair_count(open_, 0.1, plan=plan)
    with pytest.raises(ValueError, match="by_cell"):
        G.grid_pair_count(periodic, 0.1, plan=dataclasses.replace(plan, by_cell=False))
    check_count(G.grid_pair_count(periodic, 0.1, plan=plan), ref_dists(x, box=np.ones(3)), 0.1)
    # a full cell against many points: a local histogram needs 64-bit counters (a grid's
    # shape, no kernel run); counts and global-atomics histograms tally in 64 bits anyway
    full = types.SimpleNamespace(max_cell_count=1 << 20, geom=types.SimpleNamespace(box=None, ncell=(8, 8, 8)))
    many = types.SimpleNamespace(n=1 << 13)
    small = dataclasses.replace(plan, by_cell=False, local64=False, chunks=1, hist_local=1)
    with pytest.raises(ValueError, match="local64"):
        small.validate(device, full, many)
    dataclasses.replace(small, local64=True).validate(device, full, many)
    dataclasses.replace(small, chunks=64).validate(device, full, many)      # 2^14 anchors a group
    dataclasses.replace(small, hist_local=0).validate(device, full, many)


def _kernel_decisions(v, sq, sb):
    """The histogram kernel's guess and band tests for squared distances v,
    emulated in their real type: (bin, band pair, in range)."""
    nb = len(sq) - 1
    k = np.zeros(v.shape, np.int64)
    for e in sq[1:nb]:                      # the largest k < nbins with sq[k] <= v (0 below sq[0])
        k += v >= e
    band = (np.abs(v - sq[k]) <= sb[k]) | (np.abs(sq[k + 1] - v) <= sb[k + 1])
    return k, band, (v >= sq[0]) & (v <= sq[nb])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bin_table_decides_as_the_kernel(rng, dtype, monkeypatch):
    """Every value the bin table decides (a bin, or no bin) gets the bin the
    guess and band tests give, with no band pair, and a span with one edge
    the bin of one comparison with it: span ends, values a few
    units in the last place around every span end, edge and band end, and
    random bit patterns over the whole range; log bins always get a table
    (the clustered catalog's decides 90% of random bit patterns and leaves
    0.2% of a uniform spread's pairs to the guess), 254 bins or more none."""
    uint = np.uint32 if dtype == np.float32 else np.uint64
    # (edges, whether the plan makes a table (None: either), the least share of random
    # patterns it decides); every case's entries are checked with a table made at any cost
    cases = [(np.geomspace(0.17, 23.9, 15), True, 0.9), (np.geomspace(1e-3, 1e3, 40), True, 0),
             (np.linspace(0, 15, 76), None, 0), (np.sqrt(np.arange(1, 30.0)), None, 0),
             (np.concatenate([[0.0], np.sort(rng.random(8))]), None, 0), (np.linspace(1, 2, 255), False, 0),
             (np.sqrt([1, 1 + 1e-7, 1 + 2e-7, 2]), None, 0),           # two edges within one span
             (np.sqrt(1 + 1e-4 * np.arange(8)), None, 0),              # edges a few spans apart
             (np.sqrt(np.sort(rng.random(12)) + 1), None, 0)]
    for edges, expect, most in cases:
        sq = (edges * edges).astype(dtype)
        sb = (sq * rng.uniform(1e-7, 1e-5, len(sq))).astype(dtype)
        if sq[0] == 0:
            sb[0] = -1
        t = G.bins.bin_table(sq, sb, 3)
        if expect is not None:
            assert (t is not None) == expect, edges
        assert t is None or (t.entries.size % 4 == 0 and t.n <= G.bins.TABLE_MAX
                             and t.ambiguous <= G.bins.TABLE_MAX_AMBIG)
        with monkeypatch.context() as m:
            m.setattr(G.bins, "TABLE_MAX_AMBIG", 1.0)
            t = G.bins._bin_table_of(sq, sb, 3)
        if t is None:
            assert len(sq) - 1 >= G.bins.TABLE_OUT
            continue
        nb = len(sq) - 1
        ends = (np.arange(t.n + 1, dtype=np.uint64) + np.uint64(t.base)) << np.uint64(t.shift)
        marks = np.concatenate([sq, sq + np.abs(sb), sq - np.abs(sb)]).astype(dtype).view(uint).astype(np.uint64)
        near = (np.concatenate([ends, marks])[:, None] + np.arange(-3, 4).astype(np.uint64)).ravel()
        lo = int(np.nextafter(dtype(sq[0] - max(sb[0], 0)), dtype(-np.inf)).view(uint)) if sq[0] > 0 else 0
        hi = int(np.nextafter(dtype(sq[nb] + sb[nb]), dtype(np.inf)).view(uint))
        bits = np.concatenate([near, rng.integers(lo, hi + 1, 50_000, dtype=np.uint64)])
        bits = bits[(bits >= lo) & (bits <= hi)]
        v = bits.astype(uint).view(dtype)
        e = t.entries[np.minimum(np.maximum(bits >> np.uint64(t.shift), t.base) - t.base, t.n - 1).astype(np.int64)]
        k, band, inr = _kernel_decisions(v, sq, sb)
        binned = e < nb
        assert (k[binned] == e[binned]).all() and not band[binned].any() and inr[binned].all()
        out = e == G.bins.TABLE_OUT
        assert not band[out].any() and not inr[out].any()
        edge = (e >= G.bins.TABLE_EDGE) & (e < G.bins.TABLE_OUT)     # one comparison gives the bin
        below = e[edge].astype(np.int64) - G.bins.TABLE_EDGE
        assert (k[edge] == np.minimum(below + (v[edge] >= sq[below + 1]), nb - 1)).all()
        assert edge.any() == (nb <= G.bins.TABLE_EDGE_MAX_BINS)
        assert binned[-50_000:].mean() >= most          # the random patterns (all within the range)
    with np.errstate(all="raise"):                  # extreme squared edges: no warning
        for sq in ([1e200, 1e210, 1e250], [5e-324, 1e-320, 1e-300], [0.0, 1e300, 1.7e308]):
            G.bins.bin_table(np.asarray(sq, np.float64), np.zeros(3), 3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_bin_table_kernels_bin_as_the_guess(device, rng, variant, monkeypatch):
    """Histograms with a bin table made at any cost equal those without one,
    exact and not (without exactness an edge value is no band pair: the
    one-edge spans' comparison decides it), over random edges (inside
    spans) and edges two to a span, on lattice and clustered points."""
    G.bins._bin_table.cache_clear()
    monkeypatch.setattr(G.bins, "TABLE_MAX_AMBIG", 1.0)
    true_table = G.bins.bin_table
    side = 7
    lat = (np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3) * 0.1).astype(np.float32)
    pts = np.concatenate([lat, clustered(rng, 400, 3, np.float32) * 0.7])
    r = 0.5
    for edges in (np.sort(np.concatenate([[0.0, r], rng.random(9) * r])),
                  np.sqrt([0.01, 0.02, 0.02 + 1e-8, 0.04, 0.0401, 0.09, 0.16, 0.25]),
                  np.sqrt(0.04 + 0.01 * np.arange(16))):
        for box in (None, np.full(3, 0.7)):
            g = G.Grid(pts, float(edges[-1]), box=box, device=device)
            for exact in (True, False):
                made = []
                monkeypatch.setattr(G.bins, "bin_table", lambda *a: made.append(true_table(*a)) or made[-1])
                with_table = G.grid_histogram(g, edges, variant=variant, exact=exact)
                assert made and made[-1] is not None
                monkeypatch.setattr(G.bins, "bin_table", lambda *a: None)
                assert (with_table == G.grid_histogram(g, edges, variant=variant, exact=exact)).all()
                if exact:
                    check_hist(with_table, ref_dists(pts, box=box), edges)
    G.bins._bin_table.cache_clear()


@pytest.mark.parametrize("table", ["plan", "none", "ambiguous"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_histogram_bin_guesses(device, rng, variant, table, monkeypatch):
    """A pair's bin from a guess (uniform edges: sqrt(d^2); log bins: log2(d^2))
    corrected by the edges is the binary search's: integer-lattice distances
    on every edge, open and periodic; with the bin table where the plan makes
    one, without, and with one that leaves every value to the guess."""
    true_table, made = G.bins.bin_table, []
    if table == "none":
        monkeypatch.setattr(G.bins, "bin_table", lambda *a: None)
    elif table == "ambiguous":
        monkeypatch.setattr(G.bins, "bin_table", lambda *a: (lambda t: None if t is None else dataclasses.replace(
            t, entries=np.full_like(t.entries, G.bins.TABLE_AMBIG)))(true_table(*a)))
    else:
        monkeypatch.setattr(G.bins, "bin_table", lambda *a: made.append(true_table(*a)) or made[-1])
    # random clustered points over a catalog's log bins: most pairs binned by the table
    xr = clustered(rng, 700, 3, np.float32)
    log_edges = np.geomspace(0.004, 0.25, 15)
    for box in (None, np.ones(3)):
        g = G.Grid(xr, float(log_edges[-1]), box=box, device=device)
        check_hist(G.grid_histogram(g, log_edges, variant=variant), ref_dists(xr, box=box), log_edges)
    assert table != "plan" or any(t is not None for t in made)
    side = 9
    X = (np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
         .astype(np.float32))
    X = X[np.sort(rng.choice(len(X), 400, replace=False))]
    cases = ((np.sqrt(2.0 ** np.arange(0, 6)), "log"),                     # 1, sqrt 2, 2, sqrt 8, 4, sqrt 32
             (np.arange(0, 6.0), "uniform"),
             (np.arange(1, 5.0) * np.sqrt(2.0), "uniform"),
             (np.array([0.0, 1.0, 1.5, 3.0, 3.2, 4.0]), "search"))
    for edges, mode in cases:
        assert G.bins.bin_guess(edges ** 2)[0] == mode
        for box in (None, np.full(3, float(side))):
            g = G.Grid(X, float(edges[-1]), box=box, device=device)
            check_hist(G.grid_histogram(g, edges, variant=variant), ref_dists(X, box=box), edges)
    assert G.bins.bin_guess(np.array([1.0, 4.0]))[0] == "search"             # one bin
    assert G.bins.bin_guess(np.array([-1.0, 1.0, 4.0]))[0] == "search"       # an edge below 0
    # guesses several bins off either way: the corrections walk to the same bins
    true_guess = G.bins.bin_guess
    for shift, factor in ((-1.5, 1.0), (2.0, 1.0), (0.0, 0.25), (0.0, 4.0)):
        monkeypatch.setattr(G.bins, "bin_guess",
                            lambda sq, s=shift, f=factor: (lambda m, lo, sc: (m, lo + s, sc * f))(*true_guess(sq)))
        for edges, mode in cases[:2]:
            g = G.Grid(X, float(edges[-1]), device=device)
            check_hist(G.grid_histogram(g, edges, variant=variant), ref_dists(X), edges)
            check_hist(G.grid_histogram(g, edges, variant=variant, exact=False), ref_dists(X), edges)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("periodic", [False, True])
def test_cell_windows_of_sorted_cells(device, rng, dtype, periodic):
    """Grids whose cells sort their points by the first coordinate (the
    internal grids of counts and histograms): the 'cell' kernel stages only
    the window of each neighbour cell within the cut of its chunk's span, the
    'row' kernel (open grids) a point's window of each row's sorted range.
    Counts and histograms equal the float64 reference and, without
    exactness, the unsorted grid's; points of equal first coordinates (ties
    in the sort key), several chunks a cell, the windows' ends at the cut."""
    _skip_fp64(device, dtype)
    box = np.ones(3) if periodic else None
    x = np.concatenate([clustered(rng, 500, 3, np.float64), rng.random((150, 3))])
    x[:60, 0] = 0.25                                    # one first coordinate, many cells
    x[60:90] = x[90:120] + [0.1, 0.0, 0.0]             # partners exactly 0.1 along the first axis
    x = x.astype(dtype)
    if periodic:
        x = np.mod(x, 1.0).astype(dtype)
    r = 0.1
    g = G.Grid(x, r, box=box, device=device, _xorder=True)
    assert g.xorder
    if periodic:
        assert min(g.geom.ncell) >= 3                  # images by cell: the window applies
    st = g.get()
    first = st["coords"][0]
    for s0, n0 in zip(st["cell_start"], st["cell_count"]):
        seg = first[s0:s0 + n0]
        assert (np.diff(seg) >= -np.spacing(np.abs(seg[1:]) + 1)).all()   # sorted (an ulp for ties)
    u = G.Grid(x, r, box=box, device=device)
    dist = ref_dists(x, box=box)
    edges = np.concatenate([[0.0], np.geomspace(0.01, r, 7)])
    plan = dataclasses.replace(PairPlan.resolve(device, g, g, "hist", len(edges) - 1, "cell"), wg_size=32)
    for grid in (g, u):
        check_hist(G.grid_histogram(grid, edges, plan=plan), dist, edges)
        for v in ("cell", "row"):       # 'row': windows of a row's sorted range on open grids
            check_count(G.grid_pair_count(grid, r, variant=v), dist, r)
            check_count(G.grid_pair_count(grid, 0.1, variant=v), dist, 0.1)
            check_hist(G.grid_histogram(grid, edges, variant=v), dist, edges)
    assert (G.grid_histogram(g, edges, plan=plan, exact=False) == G.grid_histogram(u, edges, plan=plan, exact=False)).all()
    for v in ("cell", "row"):
        assert G.grid_pair_count(g, r, variant=v, exact=False) == G.grid_pair_count(u, r, variant=v, exact=False)
        assert (G.grid_histogram(g, edges, variant=v, exact=False) == G.grid_histogram(u, edges, variant=v,
                                                                                       exact=False)).all()
    # the public calls take sorted grids
    check_hist(clkernels.distance_histogram(x, edges, box=box, method="cells", device=device)[0], dist, edges)
    assert clkernels.pair_count(x, r, box=box, method="cells", device=device) == int((dist <= r).sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cell_windows_ties_in_the_sort_key(device, dtype):
    """Points whose places in a cell tie in the sort key keep their index
    order, so a chunk's first anchor need not be its smallest: the windows
    widen by a tie's spread. r = 0 cross counts (the cut is 0; 1e-30 and 0
    tie), and a device without double precision, whose keys' places are
    coarse far from the grid's origin (a review's reproducers)."""
    _skip_fp64(device, dtype)
    from clkernels.host.cellgrid import api as A
    from clkernels.host.core.device import Device
    from clkernels.host.core.launch import Events

    x = np.array([[1e-30, 0.0], [0.0, 0.0], [10.0, 1.0]], dtype)
    y = np.array([[0.0, 0.0]], dtype)
    xo, yo = cla.to_device(device.queue, x), cla.to_device(device.queue, y)
    for exact in (False, True):         # without exactness: as the unwindowed 'row' kernel
        if exact and not device.fp64:
            continue
        want = [A.count_within(device.queue, xo, yo, 0.0, exact=exact, variant="point"),
                A.histogram_within(device.queue, xo, yo, np.array([-1.0, 0.0]), exact=exact,
                                   variant="point").tolist()]
        assert not exact or want == [1, [1]]
        for v in ("row", "cell"):
            assert [A.count_within(device.queue, xo, yo, 0.0, exact=exact, variant=v),
                    A.histogram_within(device.queue, xo, yo, np.array([-1.0, 0.0]), exact=exact,
                                       variant=v).tolist()] == want
    if dtype != np.float32:
        return
    narrow = Device(device.cl_device)
    narrow.fp64 = False                 # the keys' places in float: coarse 1e5 cells from the origin
    anch = np.array([0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035], np.float32)[::-1]
    x = np.zeros((len(anch) + 1, 2), np.float32)
    x[0, 0], x[1:, 0] = -1e5, anch
    y = np.array([[0.0005 - 0.999, 0.0]], np.float32)
    xo, yo = cla.to_device(narrow.queue, x), cla.to_device(narrow.queue, y)
    gx, gy = A._grids(narrow, xo, yo, 1.0, None, None, Events(), xorder=True)
    assert gx.xorder
    for grid, other, pts in ((gx, gy, None), (G.Grid(np.concatenate([x, y]), 1.0, device=narrow, _xorder=True),
                                              None, np.concatenate([x, y]))):
        dist = ref_dists(x, y) if pts is None else ref_dists(pts)
        for v in ("row", "cell"):
            check_count(int(A._pairs(grid, other, "count", 1.0, False, v)[0]), dist, 1.0)
            check_hist(A._pairs(grid, other, "hist", np.array([0.0, 0.5, 1.0]), False, v, 2).astype(np.int64),
                       dist, [0.0, 0.5, 1.0])


@pytest.mark.parametrize("periodic", [False, True])
def test_cell_variant_chunks_and_parts(device, rng, periodic):
    """The 'cell' variant's work-groups: a full cell's chunks of wg_size points
    each a work-group, fewer work-groups than chunks (a work-group takes every
    chunks-th one), more than the fullest cell needs, and the stencil split
    into parts: every split gives the same exact counts and histograms."""
    box = np.ones(2) if periodic else None
    x = np.concatenate([clustered(rng, 700, 2, np.float32),
                        np.full((300, 2), 0.5, np.float32)])     # one cell of > 300 points
    g = G.Grid(x, 0.1, box=box, device=device)
    dist = ref_dists(x, box=box)
    edges = np.linspace(0, 0.1, 6)
    base = dataclasses.replace(PairPlan.resolve(device, g, g, "hist", len(edges) - 1, "cell"), wg_size=32)
    full = -(-g.max_cell_count // 32)
    assert full > 4
    for chunks, parts in ((1, 1), (3, 1), (full, 1), (full + 5, 2), (2, 9)):
        plan = dataclasses.replace(base, chunks=chunks, parts=parts)
        check_hist(G.grid_histogram(g, edges, plan=plan), dist, edges)
        cplan = dataclasses.replace(plan, hist_local=0)
        check_count(G.grid_pair_count(g, 0.1, plan=cplan), dist, 0.1)


# --------------------------------------------------- through the public calls
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_public_calls_cells(device, rng, dtype):
    _skip_fp64(device, dtype)
    x = uniform(rng, 300, 3, dtype)
    y = uniform(rng, 100, 3, dtype)
    cells = dict(device=device, method="cells")
    check_count(clkernels.pair_count(x, 0.12, **cells), ref_dists(x), 0.12)
    check_count(clkernels.pair_count(x, 0.12, y=y, **cells), ref_dists(x, y), 0.12)
    assert clkernels.pair_count(x, 0.0, **cells) == int((ref_dists(x) <= 0).sum())
    box = [1.0, 1.0, 1.0]
    check_count(clkernels.pair_count(x, 0.2, box=box, **cells), ref_dists(x, box=box), 0.2)
    # default range: 0 .. bounding-box diagonal (every pair); with a box: half its shortest side
    counts, edges = clkernels.distance_histogram(x, 16, **cells)
    dist = ref_dists(x)
    lo, hi = x.astype(np.float64).min(0), x.astype(np.float64).max(0)
    np.testing.assert_allclose(edges, np.linspace(0, np.sqrt(((hi - lo) ** 2).sum()), 17), rtol=2e-6)
    check_hist(counts, dist, edges)
    assert counts.sum() == len(dist)
    counts, edges = clkernels.distance_histogram(x, 10, y=y, box=box, **cells)
    assert edges[-1] == 0.5
    check_hist(counts, ref_dists(x, y, box=box), edges)
    counts, edges = clkernels.distance_histogram(x, [0.0, 0.01, 0.05, 0.1], **cells)
    check_hist(counts, dist, edges)
    counts, edges = clkernels.distance_histogram(x, 5, (0.02, 0.1), **cells)
    check_hist(counts, dist, edges)
    xd = cla.to_device(device.queue, x)
    check_count(clkernels.pair_count(xd, 0.12, **cells), dist, 0.12)
    check_count(clkernels.pair_count(x, 0.12, device=[device], method="allpairs"), dist, 0.12)


@pytest.mark.parametrize("d", [5, 8])
def test_pairs_high_dim(device, rng, d):
    """3^d stencils (243 and 6561 neighbours), open and periodic."""
    x = uniform(rng, 200, d, np.float32)
    r = 0.35 if d == 5 else 0.6
    g = G.Grid(x, r, device=device)
    for v in ("point", "row"):
        check_count(G.grid_pair_count(g, r, variant=v), ref_dists(x), r)
    box = np.full(d, 1.3)                       # 3 (d = 5) or 2 (d = 8) cells per dim
    g = G.Grid(x, r, box=box, device=device)
    assert (g.ncell == (3 if d == 5 else 2)).all()
    for v in ("point", "row"):
        check_count(G.grid_pair_count(g, r, variant=v), ref_dists(x, box=box), r)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_pairs_periodic_long_rows(device, rng, variant, d):
    """Four or more cells along dimension 0 (rows that wrap at both ends)."""
    r = 0.2
    box = np.array([1.0, 0.3, 0.5][:d])            # 5, 1, 2 cells
    x = (rng.random((250, d)) * box).astype(np.float32)
    g = G.Grid(x, r, box=box, device=device)
    assert g.ncell[0] == 5
    check_count(G.grid_pair_count(g, r, variant=variant), ref_dists(x, box=box), r)
    y = (rng.random((60, d)) * box).astype(np.float32)
    gx, gy = G.Grid.joint(x, y, r, box=box, device=device)
    check_count(G.grid_pair_count(gx, r, gy, variant=variant), ref_dists(x, y, box=box), r)


def test_choose_variant(device, rng):
    """On a GPU the work-group-per-cell variant is chosen for dense periodic
    grids (clustered too: a full cell's chunks are work-groups of their own)
    and very dense open ones; never on CPUs."""
    gpu = types.SimpleNamespace(is_gpu=True)
    u = rng.random((20000, 3)).astype(np.float32)
    g = G.Grid(u, 0.25, device=device)            # 64 cells, ~312 points each
    assert G.choose_variant(gpu, g) == "cell"
    assert G.choose_variant(gpu, G.Grid(u, 0.1, device=device)) == "row"          # ~20 a cell
    assert G.choose_variant(gpu, G.Grid(u, 0.125, device=device)) == "row"        # ~39 a cell, open
    assert G.choose_variant(gpu, G.Grid(u, 0.125, box=np.ones(3), device=device)) == "cell"
    c = np.concatenate([u, 0.1 + 0.01 * rng.random((5000, 3)).astype(np.float32)])
    assert G.choose_variant(gpu, G.Grid(c, 0.25, box=np.ones(3), device=device)) == "cell"
    assert G.choose_variant(types.SimpleNamespace(is_gpu=False), g) == "row"


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("box", [None, 3.0])
def test_float64_grid_float32_kernels(device, rng, variant, box, monkeypatch):
    """Exact ops on float64 grids run float32 kernels (float32_view) where the
    coordinates' rounding is small beside the thresholds, and give the
    float64 evaluation's counts: edges and r on exact ties of float64
    points, periodic and open, self and cross."""
    _skip_fp64(device, np.float64)
    views = []
    true_view = G.Grid.float32_view
    monkeypatch.setattr(G.Grid, "float32_view", lambda self, sc: views.append(sc) or true_view(self, sc))
    x = clustered(rng, 600, 3, np.float64) * 3.0
    y = uniform(rng, 300, 3, np.float64, 3.0)
    bx = None if box is None else np.full(3, box)
    if bx is not None:
        x, y = np.mod(x, box), np.mod(y, box)
    d_self, d_cross = ref_dists(x, box=bx), ref_dists(x, y, box=bx)
    edges = np.r_[0.0, ties(d_self, 6, rng, 0.01, 0.3)]
    g = G.Grid(x, float(edges[-1]), box=bx, device=device)
    gx, gy = G.Grid.joint(x, y, float(edges[-1]), box=bx, device=device)
    check_hist(G.grid_histogram(g, edges, variant=variant), d_self, edges)
    check_hist(G.grid_histogram(gx, edges, gy, variant=variant), d_cross, edges)
    for r in edges[1:4]:
        check_count(G.grid_pair_count(g, r, variant=variant), d_self, r)
    assert views and all(sc.real == np.float32 and sc.coord_err > 0 for sc in views)
    if box is None:
        # far from the origin (coordinates ~1e4, thresholds ~1e-2): float32 would
        # round them by more than the thresholds allow, so the float64 kernels run
        views.clear()
        far = x[:200] * 0.01 + 1e4
        g = G.Grid(far, 0.01, device=device)
        d_far = ref_dists(far)
        e_far = np.r_[0.0, ties(d_far, 3, rng, 1e-4, 0.01)]
        check_hist(G.grid_histogram(g, e_far, variant=variant), d_far, e_far)
        assert not views


@pytest.mark.parametrize("variant", VARIANTS)
def test_band_list_overflow(device, rng, variant, monkeypatch):
    """Band pairs the kernels list for the double pass: a list too small for
    them (tie-dense lattice, every pair on an edge) runs the pass again with
    room for all, and past the list's limit with the band pairs decided in
    the kernel's loop; nothing is lost or counted twice."""
    side = 7
    X = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3) * 0.1
    for dtype in (np.float32, np.float64):
        if np.dtype(dtype) == np.float64 and not device.fp64:
            continue
        x = X.astype(dtype)
        dist = ref_dists(x)
        edges = np.array([0.0, 0.1, np.sqrt(2) * 0.1, 0.2, 0.3])
        g = G.Grid(x, 0.3, device=device)
        for cap in (4, 1 << 16):
            monkeypatch.setattr(G.api, "BAND_ROOM_LIMITS", (cap, cap))
            check_hist(G.grid_histogram(g, edges, variant=variant), dist, edges)
            for r in (0.1, 0.2):
                check_count(G.grid_pair_count(g, r, variant=variant), dist, r)
        # more band pairs than a list may hold: the kernel decides them in its loop
        # (one pass more, with no band pass after it)
        monkeypatch.setattr(G.api, "BAND_ROOM_LIMITS", (4, 4))
        monkeypatch.setattr(G.plan, "band_list_max", lambda device: 8)
        before = {s: len(g.events.get(s, ())) for s in ("pairs", "band")}
        check_hist(G.grid_histogram(g, edges, variant=variant), dist, edges)
        for r in (0.1, 0.2):
            check_count(G.grid_pair_count(g, r, variant=variant), dist, r)
        runs = {s: len(g.events.get(s, ())) - before[s] for s in ("pairs", "band")}
        assert runs["pairs"] == 2 * 3 and runs["band"] == 3, runs
        monkeypatch.undo()


def test_lazy_coordinates(device, rng):
    """The two-body entries' grids gather their float64 coordinates where first
    used (their kernels run on float32 views); gathered then, they equal an
    eager grid's."""
    x = uniform(rng, 3000, 3, np.float64)
    xd = cla.to_device(device.queue, x)
    eager = G.Grid(xd, 0.1, device=device)
    lazy, _ = G.api._grids(device, xd, None, 0.1, None, None, G.api.Events(), lazy=True)
    assert eager._coords is not None and lazy._coords is None
    np.testing.assert_array_equal(lazy.coords.get(), eager.coords.get())
    check_structure(lazy, x)
