"""The self-join kernels (GPUCALCGLOBAL, UNICOMP, LID-UNICOMP), k work-items
per point and the SORTBYWL / WORKQUEUE orders against scipy's
cKDTree.query_pairs on float64 copies of the inputs: the same pair sets and
per-point counts, exactly (d <= eps; eps is the float64 distance of one of
the pairs, so there is a tie at eps)."""

import numpy as np
import pytest

import clkernels
from clkernels.host.cellgrid import JOIN_KERNELS, JoinPlan
from helpers import distances, lattice

scipy_spatial = pytest.importorskip("scipy.spatial")

DIMS = (2, 3, 6)
KINDS = ("uniform", "exponential", "clustered")
KS = (1, 4, 32)


def _data(kind, n, d, rng, dtype):
    if kind == "uniform":
        x = rng.random((n, d))
    elif kind == "exponential":
        x = rng.exponential(1 / 40, (n, d))
    else:                                   # a few tight blobs and a background
        c = rng.random((6, d))
        m = n - n // 4
        x = np.concatenate([c[rng.integers(0, 6, m)] + 0.02 * rng.standard_normal((m, d)), rng.random((n // 4, d))])
    return x.astype(dtype)


def _eps(x, k=10):
    """The float64 distance of one pair (a tie at eps) giving about k neighbours a point."""
    d = np.sort(distances(x[:200]))
    return float(d[min(len(d) - 1, int(k / 200 * len(d)))])


def _ref(x, eps):
    """cKDTree's pairs (it compares squared distances with eps**2, which can
    round a tie either way) decided by the float64 distance, summed over the
    dimensions in order as the library promises."""
    xd = np.asarray(x, np.float64)
    pairs = scipy_spatial.cKDTree(xd).query_pairs(eps * (1 + 2.0 ** -40), output_type="ndarray").reshape(-1, 2)
    s = np.zeros(len(pairs))
    for k in range(xd.shape[1]):
        dk = xd[pairs[:, 0], k] - xd[pairs[:, 1], k]
        s = s + dk * dk
    pairs = pairs[np.sqrt(s) <= eps]
    deg = np.bincount(pairs.ravel(), minlength=len(x)).astype(np.int64)
    return set(map(tuple, pairs.tolist())), deg


def _check(device, x, eps, **kw):
    ref, deg = _ref(x, eps)
    i, j = clkernels.self_join(x, eps, device=device, **kw)
    assert i.dtype == np.int64 and bool((i < j).all())
    assert len(i) == len(ref) and set(zip(i.tolist(), j.tolist())) == ref
    c = clkernels.self_join(x, eps, output="count", device=device, **kw)
    assert c.dtype == np.int64 and np.array_equal(c, deg)


# every kernel x k; the data (kind, d, dtype) rotate so that each kernel sees every d and kind
CASES = [(kern, k, KINDS[(2 * a + b) % 3], DIMS[(a + b) % 3], (np.float32, np.float64)[(a + b) % 2])
         for a, kern in enumerate(JOIN_KERNELS) for b, k in enumerate(KS)]


@pytest.mark.parametrize("kernel,k,kind,d,dtype", CASES,
                         ids=[f"{c[0]}-k{c[1]}-{c[2]}-{c[3]}d-{np.dtype(c[4]).name}" for c in CASES])
def test_kernels_equal_query_pairs(device, rng, kernel, k, kind, d, dtype):
    if dtype == np.float64 and not device.fp64:
        pytest.skip("no fp64")
    x = _data(kind, 900, d, rng, dtype)
    _check(device, x, _eps(x), kernel=kernel, k=k)


# the orders, the lattices and the output paths reuse CASES' programs (kernel, k, d, dtype: the
# order is a run-time switch), so the file builds few programs
@pytest.mark.parametrize("kernel,k,d,dtype,order", [("gpucalcglobal", 4, 3, np.float64, "workqueue"),
                                                    ("unicomp", 1, 3, np.float64, "workqueue"),
                                                    ("lidunicomp", 32, 3, np.float32, "sortbywl"),
                                                    ("lidunicomp", 4, 2, np.float64, "workqueue"),
                                                    ("gpucalcglobal", 1, 2, np.float32, "input"),
                                                    ("lidunicomp", 4, 2, np.float64, "input")])
def test_orders(device, rng, kernel, k, d, dtype, order):
    if dtype == np.float64 and not device.fp64:
        pytest.skip("no fp64")
    x = _data("exponential", 900, d, rng, dtype)
    _check(device, x, _eps(x, 20), kernel=kernel, k=k, order=order)


@pytest.mark.parametrize("kernel,k,d,side,radii", [("gpucalcglobal", 1, 2, 11, (1, 2, 4)),
                                                   ("unicomp", 4, 6, 3, (1, 2, 3)),
                                                   ("lidunicomp", 32, 3, 6, (1, 2, 3))])
def test_ties_on_a_lattice(device, kernel, k, d, side, radii):
    """eps exactly a lattice distance sqrt(m) (float32 points, many on the cell
    boundaries): d <= eps takes the ties, as the float64 evaluation."""
    x = lattice(side, d)
    for m in radii:
        _check(device, x, float(np.sqrt(np.float32(m))), kernel=kernel, k=k)
        _check(device, x, float(np.sqrt(m)), kernel=kernel, k=k)


@pytest.mark.parametrize("kernel,k,dtype,order,table", [("gpucalcglobal", 1, np.float32, "cell", True),
                                                        ("lidunicomp", 4, np.float64, "workqueue", True),
                                                        ("lidunicomp", 4, np.float64, "workqueue", False)])
def test_small_pool_scan_and_csr(device, rng, kernel, k, dtype, order, table, monkeypatch):
    """Writers that stop when a small pool runs out resume (k lanes, each a
    writer); the scan method in batches of writers; CSR rows from the degrees.
    2-D grids read the cells' row tables; without them (table=False) the lanes
    share their searches, or search per lane (listed writers, batches)."""
    from clkernels.host.cellgrid import plan

    if dtype == np.float64 and not device.fp64:
        pytest.skip("no fp64")
    if not table:
        monkeypatch.setattr(plan, "JOIN_TABLE_MAX_ROWS", 0)
    x = _data("uniform", 300, 2, rng, dtype)
    eps = _eps(x, 20)
    ref, deg = _ref(x, eps)
    kw = dict(device=device, kernel=kernel, k=k, order=order)
    for extra in (dict(method="pages", page=4, max_device_bytes=96 * 8), dict(method="scan", max_device_bytes=640)):
        i, j = clkernels.self_join(x, eps, **kw, **extra)
        assert len(i) == len(ref) and set(zip(i.tolist(), j.tolist())) == ref
    indptr, indices = clkernels.self_join(x, eps, output="csr", **kw)
    assert np.array_equal(np.diff(indptr), deg)
    a = np.array(sorted(ref | {(b, a) for a, b in ref}), np.int64).reshape(-1, 2)
    assert np.array_equal(indices, a[:, 1])                   # rows ascending, neighbours ascending


@pytest.mark.parametrize("kind,n,d,eps", [("exponential", 3000, 2, 0.004), ("uniform", 90_000, 3, 0.004)],
                         ids=["few-cells", "many-cells"])
def test_sortbywl_order(device, rng, kind, n, d, eps, monkeypatch):
    """SORTBYWL's order against numpy: the grid's points in descending order of
    their cell neighbourhood's size (the points of the 3^d cells around theirs)
    to within an eighth of an octave, ties in cell order; the second case has
    many cells (many work-groups of the counting sort); and the
    cells' row table. The arrays are poisoned (all bits set) when made, so an
    unwritten element fails."""
    from itertools import product

    import pyopencl as cl

    from clkernels.host.cellgrid import execute
    from clkernels.host.core.launch import Events

    def poisoned(*args, **kwargs):
        a = empty(*args, **kwargs)
        if a.nbytes:
            cl.enqueue_fill_buffer(device.queue, a.base_data, np.uint8(0xFF), a.offset, a.nbytes)
        return a

    g = clkernels.Grid(_data(kind, n, d, rng, np.float32), eps, device=device)
    h = g.get()
    ids, stride, ncell = h["cell_ids"].astype(np.int64), g.stride.astype(np.int64), g.ncell.astype(np.int64)
    cc = (ids[:, None] // stride) % ncell
    wl = np.zeros(len(ids), np.int64)
    for o in product((-1, 0, 1), repeat=d):
        nb = cc + np.array(o)
        ok = ((nb >= 0) & (nb < ncell)).all(axis=1)
        nid = (nb * stride).sum(axis=1)
        at = np.minimum(np.searchsorted(ids, nid), len(ids) - 1)
        wl += np.where(ok & (ids[at] == nid), h["cell_count"][at], 0)
    # the workload to within an eighth of an octave: exact below 16, then 8 buckets an octave
    e = np.floor(np.log2(np.maximum(wl, 1))).astype(np.int64)
    bucket = np.where(wl < 16, wl, 16 + (e - 4) * 8 + ((wl >> np.maximum(e - 3, 0)) & 7))
    want = np.argsort(-bucket[h["point_cell"]], kind="stable")
    empty = execute.cla.empty
    monkeypatch.setattr(execute.cla, "empty", poisoned)
    got, tab = execute.join_cells(device.queue, device, g, "sortbywl", True, Events())
    assert np.array_equal(got.get(), want)
    # the row table: each cell's neighbour rows but its own (cells c0-1..c0+1 of dimension 0),
    # the sorted positions of their points, (0, 0) where none
    first, end = h["cell_start"].astype(np.int64), (h["cell_start"] + h["cell_count"]).astype(np.int64)
    rows = [o for o in product((-1, 0, 1), repeat=d - 1) if any(o)]
    want_tab = np.zeros((len(ids), len(rows), 2), np.int64)
    for t, o in enumerate(sorted(rows, key=lambda o: o[::-1])):       # dimension 1's offset varies first
        nb = cc + np.array((0,) + o)
        ok = ((nb >= 0) & (nb < ncell)).all(axis=1)
        rid = (nb * stride).sum(axis=1)
        lo = np.searchsorted(ids, rid + np.maximum(cc[:, 0] - 1, 0) - cc[:, 0])
        hi = np.searchsorted(ids, rid + np.minimum(cc[:, 0] + 1, ncell[0] - 1) - cc[:, 0], side="right")
        hit = ok & (hi > lo)
        want_tab[hit, t, 0] = first[lo[hit]]
        want_tab[hit, t, 1] = end[hi[hit] - 1]
    assert np.array_equal(tab.get().reshape(len(ids), len(rows), 2), want_tab)


def test_lidunicomp_without_the_row_kernel(device, rng):
    """LID-UNICOMP, k = 1, cell order by selfjoin.cl.mako rather than the grid's
    row kernel; k = 8 work-items splitting the candidates or the stencil rows."""
    from clkernels.host.cellgrid.pairs import degrees, within

    x = _data("exponential", 900, 6, rng, np.float32)
    eps = _eps(x)
    ref, deg = _ref(x, eps)
    plans = [JoinPlan.resolve(device, len(x), "lidunicomp", 1, "cell", row=False)]
    plans += [JoinPlan.resolve(device, len(x), "lidunicomp", 8, "cell", dims=6, split=s) for s in ("candidates", "rows")]
    assert JoinPlan.resolve(device, len(x), "lidunicomp", 8, dims=6).split == "candidates"
    for plan in plans:
        (i, j), _ = within(device.queue, x, r=eps, join=plan)
        assert len(i) == len(ref) and set(zip(i.tolist(), j.tolist())) == ref
        assert np.array_equal(degrees(device.queue, x, r=eps, join=plan)[0], deg)


def test_default_is_the_row_kernel(device):
    plan = JoinPlan.resolve(device)
    assert (plan.kernel, plan.k, plan.order, plan.row) == ("lidunicomp", 1, "cell", True)
    assert not JoinPlan.resolve(device, 10, "lidunicomp", 8, "workqueue").row
    assert not JoinPlan.resolve(device, 10, "lidunicomp", row=False).row
    with pytest.raises(ValueError, match="row kernel"):
        JoinPlan.resolve(device, 10, "unicomp", row=True)


def test_bad_options(device):
    x = np.random.default_rng(0).random((50, 3)).astype(np.float32)
    for kw, word in ((dict(kernel="superego"), "kernel"), (dict(k=3), "k must"), (dict(k=64), "k must"),
                     (dict(order="random"), "order")):
        with pytest.raises(ValueError, match=word):
            clkernels.self_join(x, 0.1, device=device, **kw)
