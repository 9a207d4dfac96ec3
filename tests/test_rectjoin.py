"""Rectangle spatial join: exact counts, per-query counts and pair sets
against numpy's broadcast evaluation of the closed-interval test in the
input dtype (comparisons only, so exact), on every device, for every method
(brute force, grid, sort and sweep)."""

import dataclasses

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from clkernels import rect_join
from clkernels.host.rectjoin import rect_join_events
from clkernels.host.rectjoin import Geometry, RectPlan
from clkernels.host.rectjoin.plan import QCAP

OUTPUTS = ("count", "per_query", "pairs")
METHODS = ("brute", "grid", "sweep")


def ref_mask(Q, B):
    """m[i, j]: query box i intersects data box j (closed intervals)."""
    d = Q.shape[1] // 2
    m = np.ones((len(Q), len(B)), bool)
    for k in range(d):
        m &= (Q[:, None, k] <= B[None, :, d + k]) & (B[None, :, k] <= Q[:, None, d + k])
    return m


def lognormal_boxes(rng, n, d, dtype, sigma=1.0, big=0):
    """Map-like boxes in [0, 1)^d: log-normal extents, plus ``big`` large ones."""
    lo = rng.random((n, d))
    ext = rng.lognormal(np.log(0.3 / max(n, 1) ** (1.0 / d)), sigma, (n, d))
    if big:
        ext[rng.choice(n, big, replace=False)] = rng.uniform(0.3, 1.0, (big, d))
    return np.hstack([lo, lo + ext]).astype(dtype)


def lattice_boxes(rng, n, d, dtype, side=6):
    """Integer boxes on a small lattice: shared edges and corners, nested and
    zero-extent (degenerate) boxes."""
    lo = rng.integers(0, side, (n, d))
    ext = rng.integers(0, 3, (n, d))
    ext[rng.random(n) < 0.2] = 0                     # points
    return np.hstack([lo, lo + ext]).astype(dtype)


def uneven_boxes(rng, n):
    """1-D float64 boxes, 90% of them in [0, 1e-3), the rest over [0, 1000):
    a uniform grid crowds the dense part into a cell or two."""
    x = np.concatenate([rng.random(n - n // 10) * 1e-3, rng.random(n // 10) * 1000])
    return np.stack([x, x + rng.lognormal(np.log(1e-7), 0.5, n)], 1)


def check(Q, B, device, output, **kw):
    m = ref_mask(Q, B)
    got = rect_join(Q, B, output=output, device=device, **kw)
    if output == "count":
        assert isinstance(got, int)
        assert got == int(m.sum())
    elif output == "per_query":
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, m.sum(axis=1))
    else:
        i, j = got
        assert i.dtype == np.int64 and j.dtype == np.int64
        ri, rj = np.nonzero(m)
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(j, rj)
    return m


# (d, dtype, what beyond the reduce count, per-query counts and the pages):
# every d, both dtypes, every output form and variant somewhere (each kernel
# variant is a build: PoCL compiles each in about half a second)
CASES = [(1, np.float64, ()), (2, np.float32, ("atomic", "scan", "sort")), (2, np.float64, ()),
         (3, np.float32, ()), (4, np.float64, ("atomic", "scan"))]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("d,dtype,extra", CASES, ids=[f"{d}d-{np.dtype(t).name}" for d, t, _ in CASES])
def test_lognormal_all_outputs(device, rng, d, dtype, extra, method):
    Q = lognormal_boxes(rng, 400, d, dtype, big=3)
    B = lognormal_boxes(rng, 900, d, dtype, big=5)
    m = check(Q, B, device, "count", method=method, variant="reduce")
    assert m.sum() > 0
    check(Q, B, device, "per_query", method=method)
    if "scan" in extra:
        check(Q, B, device, "pairs", method=method, pairs_method="scan")
    else:
        check(Q, B, device, "pairs", method=method)
    if "atomic" in extra:
        check(Q, B, device, "count", method=method, variant="atomic")
    if "sort" in extra and method == "grid":
        check(Q, B, device, "pairs", method=method, grid_build="sort")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_touching_nested_degenerate(device, rng, dtype, method):
    Q = lattice_boxes(rng, 300, 2, dtype)
    B = lattice_boxes(rng, 500, 2, dtype)
    B[:20] = [0, 0, 7, 7]                            # boxes holding every other (nested)
    m = check(Q, B, device, "pairs", method=method)
    # touching only: shared edges / corners must count
    a, b = np.array([[0, 0, 1, 1]], dtype), np.array([[1, 1, 2, 2], [1, 0, 2, 1], [1.0, 1.0, 1.0, 1.0]], dtype)
    assert rect_join(a, b, device=device, method=method) == 3
    check(Q, B, device, "count", method=method, variant="reduce")
    assert m.sum() > 0


@pytest.mark.parametrize("method", METHODS)
def test_identical_sets_one_page(device, rng, method):
    B = lognormal_boxes(rng, 700, 2, np.float32, sigma=1.5, big=2)
    m = check(B, B, device, "pairs", method=method, npages=1)
    assert np.all(np.diag(m))
    check(B, B, device, "pairs", method=method, npages=1, page=4)


@pytest.mark.parametrize("method", METHODS)
def test_ordered_on_the_device(device, rng, method, monkeypatch):
    """The GPU plans' (i, j) order made on the device (forced here on any
    device; boxes of moderate size, so the grid takes them in one pass), in
    one round and over rounds of a one-page pool."""
    import dataclasses

    from clkernels.host.rectjoin import plan as rect_plan

    resolve = rect_plan.RectPlan.resolve.__func__
    monkeypatch.setattr(rect_plan.RectPlan, "resolve", classmethod(
        lambda cls, *a, **k: dataclasses.replace(resolve(cls, *a, **k), order_on_device=True)))
    Q = lognormal_boxes(rng, 300, 2, np.float32)
    B = lognormal_boxes(rng, 600, 2, np.float32)
    m = ref_mask(Q, B)
    assert m.sum() > 100
    for kw in ({}, dict(npages=1, page=8)):
        (i, j), (ev, _) = rect_join_events(Q, B, output="pairs", method=method, device=device, **kw)
        np.testing.assert_array_equal(i, np.nonzero(m)[0])
        np.testing.assert_array_equal(j, np.nonzero(m)[1])
        assert "order" in ev                    # sorted on the device, not by the host's fallback


def test_grid_geometry_edges(device, rng):
    # all boxes equal (zero span), a huge query (tests every box), boxes outside the data's bounds
    B = np.tile(np.array([[0.5, 0.5, 0.5, 0.5]], np.float32), (50, 1))
    Q = np.array([[0.5, 0.5, 0.5, 0.5], [0, 0, 0.4, 0.4], [-1e30, -1e30, 1e30, 1e30]], np.float32)
    check(Q, B, device, "pairs", method="grid")
    B2 = lognormal_boxes(rng, 5000, 2, np.float32, sigma=0.3)
    g = Geometry.from_stats(B2[:, :2].min(0), B2[:, 2:].max(0), B2[:, 2:] - B2[:, :2], len(B2), np.float32)
    assert g.ncells > QCAP                           # the [-5, 5] queries test every data box
    Q2 = np.vstack([lognormal_boxes(rng, 100, 2, np.float32) * 3 - 1,
                    np.array([[-5, -5, 5, 5], [0.2, -5, 0.2, 5]], np.float32)])
    # (the large queries' brute force splits the data over many writers; redo rounds mix parts)
    check(Q2, B2, device, "per_query", method="grid")
    check(Q2, B2, device, "count", method="grid")
    check(Q2, B2, device, "pairs", method="grid")
    check(Q2, B2, device, "pairs", method="grid", npages=1, page=4)
    check(Q2, B2, device, "pairs", method="grid", pairs_method="scan", max_device_bytes=24 * 64)


def test_auto_and_device_arrays(device, rng):
    Q = lognormal_boxes(rng, 1500, 2, np.float32)
    B = lognormal_boxes(rng, 3000, 2, np.float32, big=4)
    q = device.queue
    dq, db = cla.to_device(q, Q), cla.to_device(q, B)
    m = ref_mask(Q, B)
    assert rect_join(dq, db) == int(m.sum())                   # auto: the grid at this size
    assert rect_join(dq, db, method="brute") == int(m.sum())
    ri, rj = np.nonzero(m)
    for method in ("grid", "sweep"):
        i, j = rect_join(dq, db, output="pairs", method=method)
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(j, rj)
    assert rect_join(dq, db, method="sweep") == int(m.sum())
    bad = B.copy()
    bad[7, 0] = bad[7, 2] + 1
    with pytest.raises(ValueError, match="data.*lo > hi"):
        rect_join(dq, cla.to_device(q, bad))
    bad[7, 0] = np.nan
    with pytest.raises(ValueError, match="data.*not finite"):
        rect_join(dq, cla.to_device(q, bad))


def test_mixed_dtypes_promote(device, rng):
    Q = lognormal_boxes(rng, 100, 2, np.float32)
    B = lognormal_boxes(rng, 200, 2, np.float64)
    if not device.fp64:
        pytest.skip("no fp64")
    want = int(ref_mask(Q.astype(np.float64), B).sum())
    assert rect_join(Q, B, device=device) == want
    assert rect_join(Q, B, device=device, method="sweep") == want


def test_empty_sets(device):
    e, b = np.empty((0, 4), np.float32), np.array([[0, 0, 1, 1]], np.float32)
    for q, d in ((e, b), (b, e), (e, e)):
        assert rect_join(q, d, device=device) == 0
        assert rect_join(q, d, device=device, method="sweep") == 0
        pq = rect_join(q, d, output="per_query", device=device)
        assert pq.dtype == np.int64 and pq.shape == (len(q),) and not pq.any()
        i, j = rect_join(q, d, output="pairs", device=device)
        assert i.dtype == np.int64 and len(i) == len(j) == 0


def test_plan_rule(device, rng):
    B = lognormal_boxes(rng, 3000, 2, np.float32)
    small = RectPlan.resolve(device, 10, 10, 2, np.float32, "count", stats=None)
    assert small.method == "brute"
    g = Geometry.from_stats(B[:, :2].min(0), B[:, 2:].max(0), B[:, 2:] - B[:, :2], len(B), np.float32)
    assert 1 <= g.ncells <= 2 * len(B)
    assert g.overflow_fraction(B.astype(np.float64), 2) < 0.5

    def stats(boxes):
        d = boxes.shape[1] // 2
        return lambda: (boxes[:, :d].min(0), boxes[:, d:].max(0), boxes[:, d:] - boxes[:, :d],
                        boxes.astype(np.float64))

    big = RectPlan.resolve(device, 5000, 5000, 2, np.float32, "count", stats=stats(B))
    assert big.method == "grid" and big.geometry is not None
    # boxes that span most of the set: the grid cannot prune, auto takes brute force
    H = np.hstack([rng.random((5000, 2)) * 0.1, 0.9 + rng.random((5000, 2)) * 0.1]).astype(np.float32)
    H[:100] = lognormal_boxes(rng, 100, 2, np.float32)
    assert RectPlan.resolve(device, 5000, 5000, 2, np.float32, "count", stats=stats(H)).method == "brute"
    # 1-D, 90% of the boxes in 0.1% of the span: the uniform grid's cells there hold most boxes,
    # the sweep's window a few: auto takes the sweep
    p = RectPlan.resolve(device, 5000, 5000, 1, np.float64, "count", stats=stats(uneven_boxes(rng, 5000)))
    assert p.method == "sweep" and p.geometry is None and 0 < p.width < 1e-5
    assert big.width is None
    assert RectPlan.resolve(device, 10, 10, 2, np.float32, "count", method="sweep", stats=stats(B)).width > 0
    with pytest.raises(ValueError, match="width"):
        dataclasses.replace(p, width=None).validate(device)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sweep_extreme_values(device, rng, dtype):
    # extents that overflow (lo_0 + W and hi_0 - lo_0 reach inf), huge and tiny coordinates
    big = np.finfo(dtype).max
    B = lognormal_boxes(rng, 300, 2, dtype)
    B[:4] = [[-big, 0, big, 1], [-big, -big, -big, big], [big, 0, big, 0], [0, 0, big / 2, big]]
    B[4:8, [0, 2]] = np.array([[-1e-40, 1e-40], [1e-40, 1e-40], [0, 5e-324], [-0.0, 0.0]]).astype(dtype)
    Q = np.vstack([lognormal_boxes(rng, 100, 2, dtype), B[:8], [[-big, -big, big, big], [0, 0, 0, 0]]]).astype(dtype)
    for output in OUTPUTS:
        check(Q, B, device, output, method="sweep")


def test_auto_runs_sweep(device, rng):
    # past the brute-force size, 1-D boxes of very uneven density: auto's plan is the sweep, and exact
    B = uneven_boxes(rng, 2100)
    Q = B[rng.permutation(len(B))]
    got, (_, plan) = rect_join_events(Q, B, output="per_query", device=device)
    assert plan.method == "sweep"
    np.testing.assert_array_equal(got, ref_mask(Q, B).sum(axis=1))


@pytest.mark.parametrize("bad,err,match", [
    (np.array([[1.0, 0.0, 0.0, 1.0]], np.float32), ValueError, "queries.*lo > hi"),
    (np.array([[np.nan, 0, 1, 1]], np.float32), ValueError, "queries.*not finite"),
    (np.array([[0, 0, np.inf, 1]], np.float32), ValueError, "queries.*not finite"),
    (np.zeros((3, 3), np.float32), ValueError, "queries.*even"),
    (np.zeros((3, 10), np.float32), ValueError, "queries.*4 dimensions"),
    (np.zeros(4, np.float32), ValueError, "queries.*shape"),
    (np.zeros((2, 4), np.int32), TypeError, "queries.*float32"),
    ("boxes", TypeError, "queries"),
])
def test_bad_queries(device, bad, err, match):
    with pytest.raises(err, match=match):
        rect_join(bad, np.array([[0, 0, 1, 1]], np.float32), device=device)


def test_bad_parameters(device):
    a = np.array([[0, 0, 1, 1]], np.float32)
    with pytest.raises(ValueError, match="dimensions"):
        rect_join(a, np.array([[0, 1]], np.float32), device=device)
    with pytest.raises(ValueError, match="output"):
        rect_join(a, a, output="list", device=device)
    with pytest.raises(ValueError, match="method"):
        rect_join(a, a, method="rtree", device=device)
    with pytest.raises(ValueError, match="variant"):
        rect_join(a, a, variant="warp", device=device)
    with pytest.raises(ValueError, match="grid_build"):
        rect_join(a, a, grid_build="tree", device=device)
    with pytest.raises(ValueError, match="wg_size"):
        rect_join(a, a, wg_size=0, device=device)
    with pytest.raises(ValueError, match="pairs_method"):
        rect_join(a, a, output="pairs", pairs_method="magic", device=device)
    with pytest.raises(ValueError, match="data.*lo > hi"):
        rect_join(a, np.array([[0, 2, 1, 1]], np.float32), device=device)


def test_float64_needs_fp64(device, monkeypatch):
    monkeypatch.setattr(device, "fp64", False)
    a = np.array([[0, 0, 1, 1]], np.float64)
    with pytest.raises(clkernels.DeviceCapabilityError, match="float64"):
        rect_join(a, a, device=device)


@pytest.mark.parametrize("wg_size", [64])
def test_wg_sizes(device, rng, wg_size):
    if wg_size > device.max_work_group_size:
        pytest.skip("work-group too large for the device")
    Q = lognormal_boxes(rng, 300, 2, np.float32)
    B = lognormal_boxes(rng, 777, 2, np.float32)
    for variant in ("atomic", "reduce"):
        for vec in (False, True):
            check(Q, B, device, "count", method="brute", variant=variant, wg_size=wg_size, vec=vec)
    for d in (1, 3, 4):                              # vector tiles of 2, 4 + 2, 4 + 4 columns
        Qd, Bd = lognormal_boxes(rng, 200, d, np.float32), lognormal_boxes(rng, 300, d, np.float32)
        check(Qd, Bd, device, "count", method="brute", variant="reduce", wg_size=wg_size, vec=True)


@pytest.mark.parametrize("method", ["grid", "sweep"])
def test_against_shapely(device, rng, method):
    shapely = pytest.importorskip("shapely")
    Q = lognormal_boxes(rng, 500, 2, np.float64, big=2)
    B = lognormal_boxes(rng, 1500, 2, np.float64, big=3)
    tree = shapely.STRtree(shapely.box(B[:, 0], B[:, 1], B[:, 2], B[:, 3]))
    qi, dj = tree.query(shapely.box(Q[:, 0], Q[:, 1], Q[:, 2], Q[:, 3]), predicate="intersects")
    order = np.lexsort((dj, qi))
    i, j = rect_join(Q, B, output="pairs", method=method, device=device)
    np.testing.assert_array_equal(i, qi[order])
    np.testing.assert_array_equal(j, dj[order])


def test_reduce_every_subgroup_backend(device, sg_backend, rng):
    # the count's work-group reduction through each sub-group back end the device has
    from clkernels.host.core.device import Device

    dev = Device(device.cl_device, sg_backend=sg_backend)
    Q = lognormal_boxes(rng, 300, 2, np.float32)
    B = lognormal_boxes(rng, 900, 2, np.float32, big=2)
    for method in METHODS:
        check(Q, B, dev, "count", method=method, variant="reduce")


@pytest.mark.parametrize("d,dtype", [(1, np.float32), (2, np.float64), (3, np.float32), (4, np.float64)],
                         ids=["1d-float32", "2d-float64", "3d-float32", "4d-float64"])
def test_sweep_window_edges(device, rng, d, dtype):
    """The sweep's window [q.lo_0 - W, q.hi_0] at its edges: data boxes whose
    hi_0 = lo_0 + W (exact on a dyadic part, rounded on another, so that the
    true extent is a little above or below W), queries touching each data box
    at either end of axis 0 (b.lo_0 = q.lo_0 - ext_0(b)) or just missing it,
    zero-extent boxes, and wide boxes (the list every query tests)."""
    n = 240
    lo = rng.random((n, d)) * 10
    ext = rng.lognormal(-2.0, 1.0, (n, d))
    ext[:, 0] = np.minimum(ext[:, 0], 0.2)
    ext[: n // 4] = 0                                          # zero-extent boxes
    dy = np.arange(n // 4, n // 2)
    lo[dy] = np.round(lo[dy] * 8) / 8                          # dyadic: ext_0 = 0.25 exactly
    ext[dy, 0] = 0.25
    B = np.hstack([lo, lo + ext]).astype(dtype)
    r = np.arange(n // 2, 7 * n // 8)
    B[r, d] = B[r, 0] + np.asarray(0.25, dtype)                # rounded: hi_0 = fl(lo_0 + 0.25)
    B[-6:, d] = B[-6:, 0] + rng.uniform(4, 9, 6).astype(dtype)  # wide on axis 0
    _, (_, plan) = rect_join_events(B[:1], B, method="sweep", device=device)
    w = np.asarray(plan.width, dtype)
    narrow = B[:, 0] + w >= B[:, d]                            # the kernel's test, in the same type
    assert (B[:, 0] + w == B[:, d]).sum() > n // 4             # boxes at the window's edge (W = 0.25)
    assert narrow.sum() > n // 2 and (~narrow).any()
    # per data box: a query touching it on the right of axis 0, on the left, and one missing it
    right, left, miss = B.copy(), B.copy(), B.copy()
    right[:, 0] = B[:, d]
    right[:, d] = B[:, d] + np.asarray(0.5, dtype)
    left[:, d] = B[:, 0]
    left[:, 0] = B[:, 0] - np.asarray(0.5, dtype)
    miss[:, 0] = np.nextafter(B[:, d], np.asarray(np.inf, dtype))
    miss[:, d] = miss[:, 0] + np.asarray(0.5, dtype)
    Q = np.vstack([right, left, miss, lattice_boxes(rng, 60, d, dtype, side=10)])
    m = check(Q, B, device, "pairs", method="sweep")
    assert m[np.arange(n), np.arange(n)].all() and m[n + np.arange(n), np.arange(n)].all()
    assert not m[2 * n + np.arange(n), np.arange(n)].any()
    check(Q, B, device, "count", method="sweep")
    check(Q, B, device, "per_query", method="sweep")
    check(Q, B, device, "pairs", method="sweep", npages=1, page=4)
