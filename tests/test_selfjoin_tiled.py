"""clkernels.self_join beyond the cell grid (d = 9..64: the tiled all-pairs
join) against scipy's cKDTree.query_pairs on float64 copies, and against a
float64 brute force in the library's evaluation order (squares summed
dimension by dimension) where ties at eps decide: the same pair sets and
counts, exactly (d <= eps), for every output."""

import numpy as np
import pytest

import clkernels
from clkernels.host.selfjoin.tiled import TiledPlan

scipy_spatial = pytest.importorskip("scipy.spatial")


def _data(kind, n, d, rng, dtype):
    if kind == "uniform":
        x = rng.random((n, d))
    elif kind == "clustered":               # a few tight blobs and a background
        c = rng.random((6, d))
        m = n - n // 4
        x = np.concatenate([c[rng.integers(0, 6, m)] + 0.05 * rng.standard_normal((m, d)),
                            rng.random((n // 4, d))])
    else:                                   # a lattice: integer coordinates, ties everywhere
        x = rng.integers(0, 3, (n, d))
    return x.astype(dtype)


def _brute(x):
    """float64 distances (n, n), squares summed over the dimensions in order."""
    x = np.asarray(x, np.float64)
    s = np.zeros((len(x), len(x)))
    for k in range(x.shape[1]):
        dk = x[:, None, k] - x[None, :, k]
        s = s + dk * dk
    return np.sqrt(s)


def _eps(x, k=6):
    """eps giving about k neighbours per point (from a quantile of distances)."""
    d = _brute(x[:300])
    return float(np.quantile(d[np.triu_indices(len(d), 1)], min(1.0, k / 300)))


def _ref(x, eps):
    return scipy_spatial.cKDTree(np.asarray(x, np.float64)).query_pairs(eps, output_type="ndarray")


def _set(i, j):
    return set(zip(np.asarray(i).tolist(), np.asarray(j).tolist()))


def _skip64(device, dtype):
    if dtype == np.float64 and not device.fp64:
        pytest.skip("no fp64")


@pytest.mark.parametrize("kind", ["uniform", "clustered"])
@pytest.mark.parametrize("d,dtype", [(9, np.float32), (9, np.float64), (12, np.float32), (16, np.float32),
                                     (16, np.float64), (64, np.float32), (64, np.float64)])
def test_pairs_and_counts_equal_query_pairs(device, rng, d, dtype, kind):
    _skip64(device, dtype)
    x = _data(kind, 900, d, rng, dtype)
    eps = _eps(x)
    ref = _ref(x, eps)
    i, j = clkernels.self_join(x, eps, device=device)
    assert i.dtype == np.int64 and j.dtype == np.int64 and bool((i < j).all())
    assert len(i) == len(ref) and _set(i, j) == _set(ref[:, 0], ref[:, 1])
    deg = clkernels.self_join(x, eps, output="count", device=device)
    assert deg.dtype == np.int64 and np.array_equal(deg, np.bincount(ref.ravel(), minlength=len(x)))


@pytest.mark.parametrize("d,dtype", [(9, np.float32), (16, np.float64), (64, np.float32)])
def test_ties_on_a_lattice(device, rng, d, dtype):
    """Integer coordinates, eps an integer or the square root of one: many
    pairs lie exactly at eps (decided in double, d <= eps takes them)."""
    _skip64(device, dtype)
    x = _data("lattice", 500, d, rng, dtype)
    D = _brute(x)
    iu = np.triu_indices(len(x), 1)
    base = {9: 2.0, 16: 3.0, 64: 8.0}[d]
    for eps in (base, float(np.sqrt(base * base + 1)), float(np.nextafter(base, 0)),
                float(np.float32(np.sqrt(np.float32(base * base - 1))))):
        want = D[iu] <= eps
        i, j = clkernels.self_join(x, eps, device=device)
        assert _set(i, j) == _set(iu[0][want], iu[1][want]), eps
        deg = clkernels.self_join(x, eps, output="count", device=device)
        assert np.array_equal(deg, (D <= eps).sum(axis=1) - 1), eps


def test_small_pool_and_scan(device, rng):
    """One page of 4 records (writers stop and resume from the redo list) and
    count-scan-write in batches of a few records: nothing lost or repeated."""
    x = _data("uniform", 400, 16, rng, np.float32)
    eps = _eps(x, 4)
    ref = _set(*_ref(x, eps).T)
    for kw in (dict(method="pages", page=4, max_device_bytes=96), dict(method="scan", max_device_bytes=64)):
        rounds = []
        i, j = clkernels.self_join(x, eps, device=device, progress=rounds.append, **kw)
        assert len(i) == len(ref) and _set(i, j) == ref, kw
        assert len(rounds) > 10 and rounds[-1] == len(ref), kw


def test_device_array_and_inexact(device, rng):
    import pyopencl.array as cla

    x = _data("uniform", 400, 12, rng, np.float32)
    eps = _eps(x)
    ref = _set(*_ref(x, eps).T)
    i, j = clkernels.self_join(cla.to_device(device.queue, x), eps, device=device)
    assert _set(i, j) == ref
    if device.fp64:
        # exact=False decides in float32: pairs within its rounding of eps may go either way
        i, j = clkernels.self_join(x, eps, exact=False, device=device)
        d = np.sqrt(((x[i].astype(np.float64) - x[j].astype(np.float64)) ** 2).sum(axis=1))
        assert (i < j).all() and (d <= eps * (1 + 1e-5)).all()
        dr = np.sqrt(((x[:, None].astype(np.float64) - x[None].astype(np.float64)) ** 2).sum(axis=2))
        sure = {(a, b) for a, b in zip(*np.nonzero(np.triu(dr < eps * (1 - 1e-5), 1)))}
        assert sure <= _set(i, j)


def test_plan(device):
    p = TiledPlan.resolve(device, 64, np.float64, 10_000)
    assert p.tile * 64 * 8 <= device.local_mem_size and p.anchors >= 1
    assert p.writers(10_000) % p.wg_size == 0 and p.writers(10_000) * p.anchors >= 10_000
    for bad in (dict(tile=0), dict(anchors=0), dict(wg_size=3), dict(tile=1 << 20)):
        with pytest.raises(ValueError):
            TiledPlan.resolve(device, 64, np.float64, 100, **bad)
    with pytest.raises(ValueError, match="dimensions"):
        TiledPlan.resolve(device, 8, np.float32, 100)


def test_bad_inputs(device):
    x = np.random.default_rng(0).random((50, 16)).astype(np.float32)
    for eps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps"):
            clkernels.self_join(x, eps, device=device)
    with pytest.raises(ValueError, match="65 dimensions"):
        clkernels.self_join(np.zeros((10, 65), np.float32), 0.1, device=device)
    bad = x.copy()
    bad[3, 11] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clkernels.self_join(bad, 0.1, device=device)
    bad[3, 11] = np.inf
    with pytest.raises(ValueError, match="inf"):
        clkernels.self_join(bad, 0.1, output="count", device=device)
    with pytest.raises(ValueError):
        clkernels.self_join(np.zeros((2, 3, 16), np.float32), 0.1, device=device)
    for kw in (dict(kernel="unicomp"), dict(k=2), dict(order="workqueue")):
        with pytest.raises(ValueError, match=f"{next(iter(kw))} is an option of the cell-grid"):
            clkernels.self_join(x, 0.1, device=device, **kw)
    with pytest.raises(ValueError, match="page"):
        clkernels.self_join(x, 0.1, page=0, device=device)
    assert [len(a) for a in clkernels.self_join(x[:1], 0.1, device=device)] == [0, 0]
    assert clkernels.self_join(x[:0], 0.1, output="count", device=device).shape == (0,)
    indptr, indices = clkernels.self_join(x[:1], 0.1, output="csr", include_self=True, device=device)
    assert indptr.tolist() == [0, 1] and indices.tolist() == [0]
    indptr, indices = clkernels.self_join(x[:0], 0.1, output="csr", device=device)
    assert indptr.tolist() == [0] and len(indices) == 0


def test_owned_anchors_and_ids(device, rng):
    """``tiled.within(owned=m, ids=...)``: only the pairs with a point among
    the first m (a slab's own points ahead of its halo), under the given ids,
    through a pool that runs out."""
    from clkernels.host.selfjoin import tiled

    x = _data("uniform", 500, 12, rng, np.float32)
    eps = _eps(x)
    ref = _ref(x, eps)
    ids = rng.permutation(10 ** 6)[:len(x)].astype(np.int64)
    for m in (0, 1, 130, 499, 500):
        keep = ref[:, 0] < m
        a, b = ids[ref[keep, 0]], ids[ref[keep, 1]]
        (i, j), _ = tiled.within(device.queue, x, r=eps, owned=m, ids=ids, page=4, npages=2)
        assert _set(i, j) == _set(np.minimum(a, b), np.maximum(a, b)), m
    with pytest.raises(ValueError, match="owned"):
        tiled.within(device.queue, x, r=eps, owned=501)
