"""The device cell-list grid (host/grid.py) and pair statistics over it.

References are float64 numpy on the input-rounded coordinates. Pairs whose
distance ties r or an edge within 1e-5 relative may go either way; they are
counted and exactly that slack is allowed.
"""


import numpy as np
import pyopencl.array as cla
import pytest

from clkernels.host.cellgrid import api as G

TOL = 1e-5


def _skip_fp64(device, dtype):
    if np.dtype(dtype) == np.float64 and not device.fp64:
        pytest.skip("device has no fp64")


# ---------------------------------------------------------------- references
def ref_dists(x, y=None, box=None):
    """float64 distances: self pairs i < j, or all (i, j) for cross."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    b = x if y is None else np.asarray(y, np.float64).reshape(len(y), -1)
    diff = x[:, None, :] - b[None, :, :]
    if box is not None:
        L = np.broadcast_to(np.asarray(box, np.float64), (x.shape[1],))
        diff = diff - L * np.round(diff / L)
    d = np.sqrt((diff ** 2).sum(-1))
    if y is None:
        return d[np.triu_indices(len(x), 1)]
    return d.ravel()


def near(d, e):
    return np.abs(d - e) <= TOL * max(1.0, abs(e))


def check_count(got, d, r):
    sure = int((d < r)[~near(d, r)].sum())
    ties = int(near(d, r).sum())
    assert sure <= got <= sure + ties, (got, sure, ties)


def check_hist(got, d, edges):
    edges = np.asarray(edges, np.float64)
    tie = np.zeros(d.shape, bool)
    for e in edges:
        tie |= near(d, e)
    sure = np.histogram(d[~tie], edges)[0]
    assert got.dtype == np.int64 and got.shape == sure.shape
    assert (got >= sure).all(), (got, sure)
    assert (got - sure).sum() <= tie.sum(), (got, sure, tie.sum())


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
    wg = G._wg(device)
    if n2 < 2 * wg:
        n2 = 2 * wg
    keys = rng.integers(0, 50, n2).astype(np.uint64) << np.uint64(40)
    keys[::7] = rng.integers(0, 2 ** 63, len(keys[::7]), dtype=np.uint64)
    vals = rng.permutation(n2).astype(np.uint32)
    kd, vd = cla.to_device(device.queue, keys), cla.to_device(device.queue, vals)
    G.sort_pairs(device, kd, vd)
    order = np.lexsort((vals, keys))
    np.testing.assert_array_equal(kd.get(), keys[order])
    np.testing.assert_array_equal(vd.get(), vals[order])


@pytest.mark.parametrize("n,wg", [(1, None), (100, None), (2049, None), (9000, None), (70000, 32)])
def test_exclusive_scan(device, rng, n, wg):
    a = rng.integers(0, 5, n).astype(np.uint32)
    ad = cla.to_device(device.queue, a)
    total = G.exclusive_scan(device, ad, n, wg)
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
    np.testing.assert_array_equal(start[1:], (start + count)[:-1])
    np.testing.assert_array_equal(pc, np.repeat(np.arange(len(ids)), count))
    # stable inside a cell (sorted by (cell id, index))
    for s, c in zip(start, count):
        assert (np.diff(perm[s:s + c].astype(np.int64)) > 0).all()
    np.testing.assert_array_equal(h["coords"], x[perm].T)
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
    g = G.Grid(device, x, cell)
    np.testing.assert_allclose(g.lo, x.astype(np.float64).min(0))
    np.testing.assert_array_equal(g.ncell, np.floor((x.max(0).astype(np.float64) - g.lo) / cell) + 1)
    check_structure(g, x)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_grid_structure_periodic(device, rng, d):
    box = np.array([1.0, 0.45, 0.7][:d])
    x = (rng.random((500, d)) * 3 - 1).astype(np.float32)   # outside the box: wrapped
    g = G.Grid(device, x, 0.2, box=box)
    np.testing.assert_array_equal(g.ncell, np.maximum(1, np.floor(box / 0.2)))
    check_structure(g, x)


def test_grid_device_array_and_sizes(device, rng):
    x = uniform(rng, 300, 2, np.float32)
    xd = cla.to_device(device.queue, x)
    g = G.Grid(device, xd, 0.1)
    check_structure(g, x)
    for n in (0, 1, 2):
        check_structure(G.Grid(device, x[:n], 0.1), x[:n])
    same = np.full((50, 3), 0.25, np.float32)
    g = G.Grid(device, same, 0.1)
    assert g.num_cells == 1
    check_structure(g, same)
    g = G.Grid(device, x[:, 0], 0.1)    # 1-D input is (n, 1)
    assert g.d == 1
    check_structure(g, x[:, :1])


def test_grid_bad_input(device):
    x = np.random.default_rng(0).random((10, 2))
    for c in (0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError):
            G.Grid(device, x, c)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        G.Grid(device, bad, 0.1)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError):
        G.Grid(device, cla.to_device(device.queue, bad), 0.1)
    with pytest.raises(ValueError):
        G.Grid(device, np.zeros((4, 9)), 0.1)
    with pytest.raises(ValueError):
        G.Grid(device, x, 0.1, box=[1.0, -1.0])
    with pytest.raises(ValueError):
        G.Grid(device, x, 0.1, box=[1.0, 1.0, 1.0])
    with pytest.raises(TypeError):
        G.Grid(device, x.astype(np.complex64), 0.1)
    with pytest.raises(ValueError):
        G.Grid(device, np.array([[0.0], [1e30]]), 1e-20)    # too many cells
    g = G.Grid(device, x, 0.1)
    with pytest.raises(ValueError):
        G.grid_pair_count(g, 0.2)          # r > cell_size
    with pytest.raises(ValueError):
        G.grid_pair_count(g, -0.05)
    with pytest.raises(ValueError):
        G.grid_histogram(g, [0, 0.05, 0.2])
    with pytest.raises(ValueError):
        G.grid_histogram(g, [0, 0.05, 0.02])
    with pytest.raises(ValueError):
        G.grid_pair_count(g, 0.1, G.Grid(device, x * 2, 0.1))   # other geometry
    with pytest.raises(ValueError):
        G.pair_count_grid(x, 0.1, np.zeros((3, 3)), device=device)
    with pytest.raises(ValueError):
        G.pair_count_grid(x, np.nan, device=device)
    with pytest.raises(ValueError):
        G.distance_histogram_grid(x, 0, device=device)


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
        g = G.Grid(device, x, r)
        dist = ref_dists(x)
        check_count(G.grid_pair_count(g, r, variant=variant), dist, r)
        check_count(G.grid_pair_count(g, r * 0.6, variant=variant), dist, r * 0.6)
        check_hist(G.grid_histogram(g, edges, variant=variant), dist, edges)
        if dtype != np.float32:     # cross pairs: float32 here, float64 in the periodic test
            continue
        # cross pairs against a second set on the joint geometry
        y = uniform(rng, 150, d, dtype, scale=1.2)
        gx, gy = G.Grid.joint(device, x, y, r)
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
    g = G.Grid(device, x, r, box=box)
    dist = ref_dists(x, box=box)
    check_count(G.grid_pair_count(g, r, variant=variant), dist, r)
    edges = np.linspace(0, r, 7)
    check_hist(G.grid_histogram(g, edges, variant=variant), dist, edges)
    if dtype != np.float64 and device.fp64:    # cross pairs: float64 here, float32 in the open test
        return
    y = (rng.random((80, d)) * box).astype(dtype)
    gx, gy = G.Grid.joint(device, x, y, r, box=box)
    dxy = ref_dists(x, y, box=box)
    check_count(G.grid_pair_count(gx, r, gy, variant=variant), dxy, r)
    check_hist(G.grid_histogram(gx, edges, gy, variant=variant), dxy, edges)


@pytest.mark.parametrize("variant", VARIANTS)
def test_pairs_small_and_identical(device, rng, variant):
    for n in (0, 1, 2):
        x = uniform(rng, n, 3, np.float32) * 0.05
        g = G.Grid(device, x, 0.1)
        got = G.grid_pair_count(g, 0.1, variant=variant)
        assert got == (1 if n == 2 else 0)
        h = G.grid_histogram(g, [0, 0.05, 0.1], variant=variant)
        assert h.sum() == got
    # identical points: one dense cell (several work-group tiles in 'cell')
    same = np.full((600, 2), 0.5, np.float32)
    g = G.Grid(device, same, 0.1)
    assert G.grid_pair_count(g, 0.1, variant=variant) == 600 * 599 // 2
    np.testing.assert_array_equal(G.grid_histogram(g, [0, 0.05, 0.1], variant=variant),
                                  [600 * 599 // 2, 0])
    y = np.full((7, 2), 0.5, np.float32)
    gx, gy = G.Grid.joint(device, same, y, 0.1)
    assert G.grid_pair_count(gx, 0.1, gy, variant=variant) == 600 * 7
    empty = np.zeros((0, 2), np.float32)
    for a, b in ((empty, y), (y, empty)):
        gx, gy = G.Grid.joint(device, a, b, 0.1)
        assert G.grid_pair_count(gx, 0.1, gy, variant=variant) == 0
        assert G.pair_count_grid(a, 0.1, b, device=device, variant=variant) == 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_pairs_forced_paths(device, rng, variant):
    """64-bit local counters and the global-atomics histogram path."""
    x = clustered(rng, 500, 2, np.float32)
    g = G.Grid(device, x, 0.08)
    dist = ref_dists(x)
    edges = np.linspace(0, 0.08, 9)
    for force in (dict(local64=True), dict(hist_local=False)):
        check_hist(G.grid_histogram(g, edges, variant=variant, _force=force), dist, edges)
    check_count(G.grid_pair_count(g, 0.08, variant=variant, _force=dict(local64=True)), dist, 0.08)


# --------------------------------------------------- planner-facing functions
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_planner_functions(device, rng, dtype):
    _skip_fp64(device, dtype)
    x = uniform(rng, 300, 3, dtype)
    y = uniform(rng, 100, 3, dtype)
    check_count(G.pair_count_grid(x, 0.12, device=device), ref_dists(x), 0.12)
    check_count(G.pair_count_grid(x, 0.12, y, device=device), ref_dists(x, y), 0.12)
    assert G.pair_count_grid(x, 0.0, device=device) == 0
    box = [1.0, 1.0, 1.0]
    check_count(G.pair_count_grid(x, 0.2, box=box, device=device), ref_dists(x, box=box), 0.2)
    # default range: 0 .. bounding-box diagonal (all pairs); with a box: half-box diagonal
    counts, edges = G.distance_histogram_grid(x, 16, device=device)
    dist = ref_dists(x)
    lo, hi = x.astype(np.float64).min(0), x.astype(np.float64).max(0)
    np.testing.assert_allclose(edges, np.linspace(0, np.sqrt(((hi - lo) ** 2).sum()), 17))
    check_hist(counts, dist, edges)
    assert counts.sum() == len(dist)
    counts, edges = G.distance_histogram_grid(x, 10, y, box=box, device=device)
    assert np.isclose(edges[-1], np.sqrt(3 * 0.25))
    check_hist(counts, ref_dists(x, y, box=box), edges)
    assert counts.sum() == 300 * 100
    counts, edges = G.distance_histogram_grid(x, [0.0, 0.01, 0.05, 0.1], range=None, device=device)
    check_hist(counts, dist, edges)
    counts, edges = G.distance_histogram_grid(x, 5, range=(0.02, 0.1), device=device)
    check_hist(counts, dist, edges)
    xd = cla.to_device(device.queue, x)
    check_count(G.pair_count_grid(xd, 0.12, device=device), dist, 0.12)
    check_count(G.pair_count_grid(x, 0.12, device=[device]), dist, 0.12)


@pytest.mark.parametrize("d", [5, 8])
def test_pairs_high_dim(device, rng, d):
    """3^d stencils (243 and 6561 neighbours), open and periodic."""
    x = uniform(rng, 200, d, np.float32)
    r = 0.35 if d == 5 else 0.6
    g = G.Grid(device, x, r)
    for v in ("point", "row"):
        check_count(G.grid_pair_count(g, r, variant=v), ref_dists(x), r)
    box = np.full(d, 1.3)                       # 3 (d = 5) or 2 (d = 8) cells per dim
    g = G.Grid(device, x, r, box=box)
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
    g = G.Grid(device, x, r, box=box)
    assert g.ncell[0] == 5
    check_count(G.grid_pair_count(g, r, variant=variant), ref_dists(x, box=box), r)
    y = (rng.random((60, d)) * box).astype(np.float32)
    gx, gy = G.Grid.joint(device, x, y, r, box=box)
    check_count(G.grid_pair_count(gx, r, gy, variant=variant), ref_dists(x, y, box=box), r)
