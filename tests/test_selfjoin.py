"""clkernels.self_join against scipy's cKDTree.query_pairs on float64 copies of
the inputs: the same pair sets, exactly (d <= eps), for every output."""

import os

import numpy as np
import pytest

import clkernels
from helpers import distances

scipy_spatial = pytest.importorskip("scipy.spatial")

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "shared", "data", "selfjoin_test_dat.csv")


def _data(kind, n, d, rng, dtype):
    if kind == "uniform":
        x = rng.random((n, d))
    elif kind == "exponential":
        x = rng.exponential(1 / 40, (n, d))
    else:                                   # clustered: a few tight blobs and a background
        c = rng.random((8, d))
        x = np.concatenate([c[rng.integers(0, 8, n - n // 4)] + 0.01 * rng.standard_normal((n - n // 4, d)),
                            rng.random((n // 4, d))])
    return x.astype(dtype)


def _eps(x, k=8):
    """eps giving about k neighbours per point (from a quantile of distances)."""
    d = distances(x[:300])
    return float(np.quantile(d, min(1.0, k / 300)))


def _ref(x, eps):
    t = scipy_spatial.cKDTree(np.asarray(x, np.float64))
    return t.query_pairs(eps, output_type="ndarray")


def _set(i, j):
    return set(zip(np.asarray(i).tolist(), np.asarray(j).tolist()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["uniform", "exponential", "clustered"])
@pytest.mark.parametrize("d", [2, 3, 5, 8])
def test_pairs_equal_query_pairs(device, rng, d, kind, dtype):
    if dtype == np.float64 and not device.fp64:
        pytest.skip("no fp64")
    x = _data(kind, 1500, d, rng, dtype)
    eps = _eps(x)
    ref = _ref(x, eps)
    i, j = clkernels.self_join(x, eps, device=device)
    assert i.dtype == np.int64 and j.dtype == np.int64 and bool((i < j).all())
    assert len(i) == len(ref) and _set(i, j) == _set(ref[:, 0], ref[:, 1])


@pytest.mark.parametrize("n, d", [(1200, 3), (700, 12)])      # the grid's kernels, the tiled d > 8 path
def test_outputs_agree(device, rng, n, d):
    """pairs (both directions, self pairs), CSR, counts and sparse agree with
    cKDTree's pairs."""
    x = _data("clustered", n, d, rng, np.float32)
    eps = _eps(x, 12)
    ref = _ref(x, eps)
    A = np.zeros((n, n), bool)
    A[ref[:, 0], ref[:, 1]] = True
    A |= A.T
    i, j = clkernels.self_join(x, eps, symmetric=True, device=device)
    assert len(i) == 2 * len(ref) and _set(i, j) == _set(*np.nonzero(A))
    i, j = clkernels.self_join(x, eps, symmetric=True, include_self=True, device=device)
    B = A | np.eye(n, dtype=bool)
    assert len(i) == int(B.sum()) and _set(i, j) == _set(*np.nonzero(B))
    i, j = clkernels.self_join(x, eps, include_self=True, device=device)
    assert len(i) == len(ref) + n and _set(i, j) == _set(*np.nonzero(np.triu(B)))
    indptr, indices = clkernels.self_join(x, eps, output="csr", device=device)
    assert indptr.dtype == np.int32 and indices.dtype == np.int32
    assert np.array_equal(indptr, np.concatenate([[0], np.cumsum(A.sum(1))]))
    assert np.array_equal(indices, np.nonzero(A)[1])          # row-major: neighbours ascending
    indptr, indices = clkernels.self_join(x, eps, output="csr", include_self=True, device=device)
    assert np.array_equal(indptr, np.concatenate([[0], np.cumsum(B.sum(1))]))
    assert np.array_equal(indices, np.nonzero(B)[1])
    assert np.array_equal(clkernels.self_join(x, eps, output="count", device=device), A.sum(1))
    assert np.array_equal(clkernels.self_join(x, eps, output="count", include_self=True, device=device),
                          B.sum(1))
    pytest.importorskip("scipy.sparse")
    m = clkernels.self_join(x, eps, output="sparse", device=device)
    assert m.shape == (n, n) and m.dtype == np.float64 and np.array_equal(m.toarray() != 0, A)
    m = clkernels.self_join(x, eps, output="sparse", include_self=True, device=device)
    assert np.array_equal(m.toarray() != 0, B)


def test_ties_on_a_lattice(device):
    """eps exactly a lattice distance: d <= eps takes the ties (as query_pairs)."""
    g = np.arange(12, dtype=np.float32)
    x = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    for eps in (1.0, float(np.sqrt(np.float32(2.0))), 2.0):
        ref = _ref(x, eps)
        i, j = clkernels.self_join(x, eps, device=device)
        assert _set(i, j) == _set(ref[:, 0], ref[:, 1])
        deg = clkernels.self_join(x, eps, output="count", device=device)
        assert int(deg.sum()) == 2 * len(ref)


def test_small_pool_and_scan(device, rng):
    x = _data("uniform", 800, 2, rng, np.float32)
    eps = _eps(x, 20)
    ref = _set(*_ref(x, eps).T)
    for kw in (dict(method="pages", page=4, max_device_bytes=96), dict(method="scan", max_device_bytes=64)):
        i, j = clkernels.self_join(x, eps, device=device, **kw)
        assert len(i) == len(ref) and _set(i, j) == ref


def test_bad_inputs(device):
    x = np.random.default_rng(0).random((50, 3)).astype(np.float32)
    for eps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps"):
            clkernels.self_join(x, eps, device=device)
    with pytest.raises(ValueError, match="output"):
        clkernels.self_join(x, 0.1, output="dense", device=device)
    with pytest.raises(ValueError, match="65 dimensions"):
        clkernels.self_join(np.zeros((10, 65), np.float32), 0.1, device=device)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        clkernels.self_join(bad, 0.1, device=device)
    with pytest.raises((ValueError, TypeError)):
        clkernels.self_join(np.zeros((2, 3, 4), np.float32), 0.1, device=device)
    assert [len(a) for a in clkernels.self_join(x[:1], 0.1, device=device)] == [0, 0]
    assert clkernels.self_join(x[:0], 0.1, output="count", device=device).shape == (0,)


@pytest.mark.skipif(not os.path.exists(DATA), reason="shared/data not beside the checkout")
def test_real_data_count(device):
    """100,000 real 2-D points at eps = 1.0: 27,982,024 ordered pairs with
    self-pairs by a float64 evaluation (the authors' float32 code says
    27,982,028: it decides a few pairs at eps in float32)."""
    x = np.loadtxt(DATA, delimiter=",", dtype=np.float32)
    deg = clkernels.self_join(x, 1.0, output="count", include_self=True, device=device)
    assert int(deg.sum()) == 27_982_024
