"""Scale-out on dask.distributed (issue 19): a LocalCluster of 2 worker
processes (one thread each) pinned to one CPU device; every distributed call
equals the single-device call on that device exactly, a worker killed
mid-run changes nothing, and calls without ``client`` never import dask.

One device kind for the cluster: the first of CLKERNELS_TEST_DEVICES, else
PoCL where present, else the default device. Few kernel configurations
(float32 3-D points, float32 2-D boxes, float32 keys), so the workers' cold
builds stay few."""

import mmap
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import clkernels
from helpers import lattice, uniform

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


def _spec():
    spec = os.environ.get("CLKERNELS_TEST_DEVICES", "").split(",")[0].strip()
    if spec:
        return spec
    return "pocl" if any(d.is_pocl for d in clkernels.devices()) else "0:0"


SPEC = _spec()


def _two_workers(**client_kw):
    cluster = clkernels.local_cluster([SPEC, SPEC], dashboard_address=":0")
    c = distributed.Client(cluster, **client_kw)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def client():
    yield from _two_workers()


@pytest.fixture
def own_client():
    """A cluster of its own for a test that kills workers: the restarts stay
    in it (in clean CI runs on the 2-core machine, the fourth SIGKILL in the
    shared cluster lost the other worker's nanny: 1 of 2 workers came back)."""
    yield from _two_workers(set_as_default=False)


@pytest.fixture(scope="module")
def dev():
    return clkernels.Device(SPEC)


def test_workers_pinned(client):
    envs = client.run(lambda: os.environ.get("CLKERNELS_DEVICE"))
    assert sorted(envs.values()) == [SPEC, SPEC]
    assert all(w["nthreads"] == 1 for w in client.scheduler_info()["workers"].values())


def test_pair_count(client, dev, rng):
    x = uniform(rng, 1500, 3)
    y = uniform(rng, 700, 3)
    radii = np.array([0.05, 0.1, 0.2])
    assert clkernels.pair_count(x, 0.1, client=client) == clkernels.pair_count(x, 0.1, device=dev)
    got = clkernels.pair_count(x, radii, y=y, client=client, block=300)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, clkernels.pair_count(x, radii, y=y, device=dev))
    # ties at r on a lattice; dask array input keeps its chunks (4 blocks: 4 + 6 x 2 tiles)
    box = dict(box=1.0, images="all")       # periodic images: the tiles count each image once too
    assert clkernels.pair_count(x, 0.6, client=client, **box) == clkernels.pair_count(x, 0.6, device=dev, **box)
    g = lattice(10, 3)
    xd = da.from_array(g, chunks=(250, 3))
    assert clkernels.pair_count(xd, 2.0, client=client) == clkernels.pair_count(g, 2.0, device=dev)


@pytest.mark.parametrize("workers", [2, 3, 4, 8])
@pytest.mark.parametrize("n", [97, 1000])
def test_tiles_cover_each_pair_once_with_equal_work(workers, n):
    from clkernels.host.distributed import twobody

    class Put:                                  # Transport.put without a cluster: the arrays themselves
        def put(self, arrays):
            return list(arrays)

    x = np.zeros((n, 3), np.float32)
    X, _, tiles = twobody._tiles(Put(), x, None, None, workers)
    seen = np.zeros((n, n), np.int64)
    work = []
    for (_, alo, ahi), (_, blo, bhi), diag in tiles:
        if diag:
            assert (alo, ahi) == (blo, bhi)
            i, j = np.triu_indices(ahi - alo, 1)
            seen[alo + i, alo + j] += 1
            work.append(len(i))
        else:
            assert ahi <= blo                  # cross tiles lie above the diagonal
            seen[alo:ahi, blo:bhi] += 1
            work.append((ahi - alo) * (bhi - blo))
    assert (seen[np.triu_indices(n, 1)] == 1).all() and seen.sum() == n * (n - 1) // 2
    nb = twobody._nblocks(workers)
    assert len(tiles) == nb * nb and len(tiles) >= 2 * workers
    b = n / nb                                  # every tile about b^2 / 2 pairs
    assert max(work) - min(work) <= 2 * b + 2


def test_distance_histogram_and_rdf(client, dev, rng):
    x = uniform(rng, 1500, 3)
    y = uniform(rng, 600, 3)
    for args, kw in (((16,), {}), ((16,), dict(y=y)), ((np.linspace(0, 1, 9),), {}),
                     ((16, (0.1, 0.9)), dict(block=200))):
        got, ge = clkernels.distance_histogram(x, *args, client=client, **kw)
        kw.pop("block", None)
        ref, re_ = clkernels.distance_histogram(x, *args, device=dev, **kw)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(ge, re_)      # the default range too, bit for bit
    g, e = clkernels.rdf(x, 12, box=1.0, client=client)
    g0, e0 = clkernels.rdf(x, 12, box=1.0, device=dev)
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(e, e0)


def _pairs(i, j):
    return sorted(zip(i.tolist(), j.tolist()))


def test_pairs_within(client, dev, rng):
    x = uniform(rng, 2000, 3)
    y = uniform(rng, 800, 3)
    i, j, d = clkernels.pairs_within(x, 0.08, client=client, sort=True, return_distances=True)
    i0, j0, d0 = clkernels.pairs_within(x, 0.08, device=dev, sort=True, return_distances=True)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(j, j0)
    np.testing.assert_array_equal(d, d0)
    i, j = clkernels.pairs_within(x, 0.08, y=y, client=client, slabs=5)
    assert _pairs(i, j) == _pairs(*clkernels.pairs_within(x, 0.08, y=y, device=dev))
    g = lattice(9, 3)                     # pairs at exactly r across slab borders
    i, j = clkernels.pairs_within(g, 1.0, client=client, slabs=6, sort=True)
    i0, j0 = clkernels.pairs_within(g, 1.0, device=dev, sort=True)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(j, j0)


@pytest.mark.parametrize("slabs", [2, 3, 7])
def test_pairs_within_periodic(client, dev, rng, slabs):
    """Slabs on the ring of a periodic box: every pair once, equal to the single call."""
    box = np.array([1.0, 1.2, 0.9])
    x = (rng.random((1500, 3)) * box).astype(np.float32)
    x[:100, 0] += np.float32(3.0)                 # some points images away along the slab axis
    x[100:200, 0] -= np.float32(1.0)
    y = (rng.random((600, 3)) * box).astype(np.float32)
    for r in (0.07, 0.45):                         # a thin and a nearly half-box radius
        i, j, d = clkernels.pairs_within(x, r, box=box, client=client, slabs=slabs, sort=True,
                                         return_distances=True)
        i0, j0, d0 = clkernels.pairs_within(x, r, box=box, device=dev, sort=True, return_distances=True)
        np.testing.assert_array_equal(i, i0)
        np.testing.assert_array_equal(j, j0)
        np.testing.assert_array_equal(d, d0)
        got = clkernels.pairs_within(x, r, y=y, box=box, client=client, slabs=slabs)
        assert _pairs(*got) == _pairs(*clkernels.pairs_within(x, r, y=y, box=box, device=dev))
    g = lattice(6, 3)                              # a periodic lattice: pairs at exactly r across the wrap
    i, j = clkernels.pairs_within(g, 1.0, box=6.0, client=client, slabs=slabs, sort=True)
    i0, j0 = clkernels.pairs_within(g, 1.0, box=6.0, device=dev, sort=True)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(j, j0)
    i, j = clkernels.pairs_within(g, 3.0, box=6.0, client=client, slabs=slabs, sort=True)   # r = L / 2
    i0, j0 = clkernels.pairs_within(g, 3.0, box=6.0, device=dev, sort=True)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(j, j0)
    with pytest.raises(ValueError, match="half the shortest box side"):
        clkernels.pairs_within(x, 0.5, box=box, client=client)


def test_self_join(client, dev, rng):
    x = uniform(rng, 2000, 3)
    for kw in ({}, dict(symmetric=True, include_self=True)):
        got = clkernels.self_join(x, 0.08, client=client, **kw)
        assert _pairs(*got) == _pairs(*clkernels.self_join(x, 0.08, device=dev, **kw))
    i, j = clkernels.self_join(x, 0.08, client=client, symmetric=True, collect=False)
    assert isinstance(i, da.Array)
    assert _pairs(i.compute(), j.compute()) == _pairs(*clkernels.self_join(x, 0.08, device=dev, symmetric=True))
    np.testing.assert_array_equal(clkernels.self_join(x, 0.08, output="count", client=client, slabs=3),
                                  clkernels.self_join(x, 0.08, output="count", device=dev))
    for include_self in (False, True):              # CSR and sparse: the single call's arrays exactly
        got = clkernels.self_join(x, 0.08, output="csr", include_self=include_self, client=client, slabs=3)
        want = clkernels.self_join(x, 0.08, output="csr", include_self=include_self, device=dev)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
    sp = clkernels.self_join(x, 0.08, output="sparse", client=client)
    assert (sp != clkernels.self_join(x, 0.08, output="sparse", device=dev)).nnz == 0


def test_self_join_ties_on_slab_boundaries(client, dev, rng):
    """Lattice points: many equal first coordinates at the slabs' cuts and pairs at exactly eps."""
    g = lattice(9, 3).astype(np.float32)
    for slabs in (2, 5, 40):
        assert _pairs(*clkernels.self_join(g, 1.0, client=client, slabs=slabs)) == \
            _pairs(*clkernels.self_join(g, 1.0, device=dev))
        np.testing.assert_array_equal(clkernels.self_join(g, 1.0, output="count", client=client, slabs=slabs),
                                      clkernels.self_join(g, 1.0, output="count", device=dev))


@pytest.mark.parametrize("d, eps", [(2, 0.004), (6, 0.03), (10, 0.05)])
def test_self_join_slabs_exponential(client, dev, rng, d, eps):
    """Skewed points (most pairs in the first slabs, halos as wide as slabs in
    6-D), the grid's kernels and the tiled d > 8 join: the slabs' pairs --
    own points' with the grid, with the halo ahead, mapped to global ids on
    the device -- equal the single call's, in every output."""
    x = rng.exponential(0.025, (3000, d)).astype(np.float32)
    want = _pairs(*clkernels.self_join(x, eps, device=dev))
    assert len(want) > len(x)
    for slabs in (2, 5):
        assert _pairs(*clkernels.self_join(x, eps, client=client, slabs=slabs)) == want
    i, j = clkernels.self_join(x, eps, client=client, collect=False)
    assert _pairs(i.compute(), j.compute()) == want
    np.testing.assert_array_equal(clkernels.self_join(x, eps, output="count", client=client, slabs=3),
                                  clkernels.self_join(x, eps, output="count", device=dev))
    if d <= 8:
        kw = dict(kernel="unicomp", k=2)
        assert _pairs(*clkernels.self_join(x, eps, client=client, slabs=3, **kw)) == want
        i, j, dd = clkernels.pairs_within(x, eps, client=client, slabs=3, sort=True, return_distances=True)
        i0, j0, d0 = clkernels.pairs_within(x, eps, device=dev, sort=True, return_distances=True)
        np.testing.assert_array_equal(i, i0)
        np.testing.assert_array_equal(j, j0)
        np.testing.assert_array_equal(dd, d0)            # float64 distances of float32 points, bit for bit


@pytest.mark.parametrize("case", ["exponential", "uniform", "ties", "equal", "few", "chunks"])
def test_slab_members(dev, rng, case, monkeypatch):
    """The slabs' selection on the device: every point owned by one slab;
    every point within r (along axis 0) of a slab's owned points in its
    halos, the halo ahead after them, the halo behind before them, with
    their positions; slabs cut at q with ties on the cuts and empty slabs;
    the points uploaded in chunks (SELECT_ROWS)."""
    from clkernels.host.distributed import slabs as S

    x, r, q = {"exponential": (rng.exponential(0.025, (20000, 2)), 1e-3, [0.01, 0.02, 0.05]),
               "uniform": (rng.random((1000, 3)), 0.01, np.sort(rng.random(6))),
               "ties": (np.round(rng.random((1000, 2)) * 3), 1.0, [1.0, 1.0, 2.0]),
               "equal": (np.zeros((100, 2)), 0.1, [0.0, 0.0]),
               "few": (rng.random((5, 2)), 0.1, np.sort(rng.random(7))),
               "chunks": (rng.random((3000, 2)), 0.02, [0.3, 0.5, 0.5, 0.8])}[case]
    if case == "chunks":
        monkeypatch.setattr(S, "SELECT_ROWS", 700)
    x = x.astype(np.float32)
    q = np.asarray(q, np.float32).astype(np.float64)         # cuts are values of the points' dtype
    s64 = x[:, 0].astype(np.float64)
    owned = np.zeros(len(x), np.int64)
    for lo, hi in S._edges(q):
        parts = S._select(dev, x, lo, hi, r, behind=True)
        (ro, own), (ra, ahead), (rb, back) = [(a.get(), b.get()) for a, b in parts]
        for rows, pos in ((ro, own), (ra, ahead), (rb, back)):
            assert rows.shape == (len(pos), x.shape[1]) and (np.diff(pos) > 0).all()
            np.testing.assert_array_equal(rows, x[pos])
        owned[own] += 1
        if len(own) == 0:
            continue
        o = s64[own]
        assert ((o >= lo) & (o < hi)).all()
        want_ahead = np.flatnonzero((s64 >= hi) & (s64 <= o.max() + r))
        want_back = np.flatnonzero((s64 < lo) & (s64 >= o.min() - r))
        assert set(want_ahead) <= set(ahead) and set(want_back) <= set(back)
        assert (s64[ahead] >= hi).all() and (s64[back] < lo).all()
    assert (owned == 1).all()


def test_self_join_nonfinite_and_empty(client, dev, rng, monkeypatch):
    """A NaN or +inf first coordinate outside the sampled points still
    reaches a slab's call, which refuses it (no point silently left out);
    empty and one-point sets in every output."""
    from clkernels.host.distributed import slabs as S

    monkeypatch.setattr(S, "SAMPLE", 64)              # the bad rows are (almost surely) not sampled
    x = uniform(rng, 3000, 2)
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[1234, 0] = bad
        for output in ("pairs", "count"):
            with pytest.raises(Exception, match="NaN or inf"):
                clkernels.self_join(y, 0.01, client=client, slabs=3, output=output)
    for n in (0, 1):
        x = uniform(rng, n, 3)
        assert clkernels.self_join(x, 0.1, client=client, output="count").shape == (n,)
        i, j = clkernels.self_join(x, 0.1, client=client)
        assert len(i) == len(j) == 0 and i.dtype == np.int64


@pytest.mark.parametrize("dims", [2, 10])
def test_slab_bounds_balance_pairs(dev, rng, dims):
    """With the sample the whole set (n <= SAMPLE), the cuts split the
    estimated work -- POINT_WEIGHT a point plus half its neighbours, counted
    here by numpy in float64 -- into equal shares, up to a point's weight."""
    from clkernels.host.distributed import slabs as S

    n, ns = 3000, 4
    x = rng.exponential(0.025, (n, dims)).astype(np.float32)
    r = 0.01 if dims == 2 else 0.05
    x64 = x.astype(np.float64)
    deg = np.zeros(n, np.int64)
    for a in range(0, n, 500):
        dd = np.sqrt(((x64[a:a + 500, None, :] - x64[None, :, :]) ** 2).sum(-1))
        deg[a:a + 500] = (dd <= r).sum(1) - 1
    assert deg.sum() > 10 * n                      # the pairs weigh more than the points
    q = S._bounds(x, n, r, ns, True)
    assert q.shape == (ns - 1,) and (np.diff(q) >= 0).all()
    w = S.POINT_WEIGHT + 0.5 * deg
    share = [w[(x64[:, 0] >= lo) & (x64[:, 0] < hi)].sum() for lo, hi in S._edges(q)]
    assert abs(sum(share) - w.sum()) < 1e-6 * w.sum()
    assert max(abs(v - w.sum() / ns) for v in share) <= 2 * w.max()


def _boxes(rng, n):
    lo = rng.random((n, 2)).astype(np.float32)
    return np.concatenate([lo, lo + 0.05 * rng.random((n, 2)).astype(np.float32)], axis=1)


def test_rect_join(client, dev, rng):
    q, b = _boxes(rng, 900), _boxes(rng, 1200)
    assert clkernels.rect_join(q, b, client=client) == clkernels.rect_join(q, b, device=dev)
    np.testing.assert_array_equal(clkernels.rect_join(da.from_array(q, chunks=(200, 4)), b, output="per_query",
                                                      client=client),
                                  clkernels.rect_join(q, b, output="per_query", device=dev))
    i, j = clkernels.rect_join(q, b, output="pairs", client=client, tiles=3)
    i0, j0 = clkernels.rect_join(q, b, output="pairs", device=dev)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(j, j0)
    i, j = clkernels.rect_join(q, b, output="pairs", client=client, collect=False)     # left on the workers
    assert isinstance(i, da.Array)
    np.testing.assert_array_equal(i.compute(), i0)
    np.testing.assert_array_equal(j.compute(), j0)
    pq = clkernels.rect_join(q, b, output="per_query", client=client, collect=False)
    np.testing.assert_array_equal(pq.compute(), clkernels.rect_join(q, b, output="per_query", device=dev))


def test_segmented_sort(client, dev, rng):

    sizes = rng.integers(0, 300, 60)
    sizes[7] = 3000                       # longer than a run's share: split over workers and merged
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.random(int(offsets[-1])).astype(np.float32)
    values = rng.integers(0, 1 << 30, len(keys)).astype(np.int32)
    k, v = clkernels.segmented_sort(keys, offsets, values, client=client, ranges=5)
    k0, v0 = clkernels.segmented_sort(keys, offsets, values, device=dev)
    np.testing.assert_array_equal(k, k0)
    np.testing.assert_array_equal(v, v0)
    np.testing.assert_array_equal(clkernels.segmented_sort(keys, offsets, descending=True, client=client),
                                  clkernels.segmented_sort(keys, offsets, descending=True, device=dev))


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_segmented_sort_forms(client, dev, rng):
    """Every extended form with client= equals the single call."""
    sizes = rng.integers(0, 200, 40)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    keys = rng.integers(-50, 50, n).astype(np.int16)              # a widened key type, many ties
    vals = rng.random(n).astype(np.float16)                       # 2-byte values
    ids = np.repeat(np.arange(40), sizes)
    for kw in (dict(offsets=offsets), dict(segment_ids=ids), dict(segment_ids=ids, num_segments=45)):
        for extra in ({}, dict(return_indices=True), dict(descending=True)):
            args = dict(kw, **extra)
            off = args.pop("offsets", None)
            _same(clkernels.segmented_sort(keys, off, vals, client=client, ranges=4, **args),
                  clkernels.segmented_sort(keys, off, vals, device=dev, **args))
    # segments with gaps, in any order: the elements outside stay
    b = np.array([500, 20, 900, 300, 1400])
    e = np.array([700, 250, 905, 300, 2000])
    for extra in ({}, dict(return_indices=True)):
        _same(clkernels.segmented_sort(keys, (b, e), vals, client=client, ranges=3, **extra),
              clkernels.segmented_sort(keys, (b, e), vals, device=dev, **extra))
        _same(clkernels.segmented_sort(keys, (b, e), client=client, **extra),
              clkernels.segmented_sort(keys, (b, e), device=dev, **extra))
    # one segment far longer than a run's share: split over the workers and merged
    big = np.concatenate([[0, 30], [30 + 5000], [5000 + 30 + 40]])
    kb = rng.integers(0, 20, int(big[-1])).astype(np.float32)
    kb[rng.random(len(kb)) < 0.02] = np.nan
    kb[rng.random(len(kb)) < 0.05] = -0.0
    vb = np.arange(len(kb), dtype=np.int64)
    for extra in ({}, dict(descending=True), dict(return_indices=True), dict(descending=True, return_indices=True)):
        _same(clkernels.segmented_sort(kb, big, vb, client=client, ranges=6, **extra),
              clkernels.segmented_sort(kb, big, vb, device=dev, **extra))
    ki = rng.integers(-(2 ** 31), 2 ** 31, 4000, dtype=np.int64).astype(np.int32)
    ki[:3] = -(2 ** 31)                                            # the most negative key, descending
    _same(clkernels.segmented_sort(ki, np.array([0, 4000]), client=client, ranges=5, descending=True),
          clkernels.segmented_sort(ki, np.array([0, 4000]), device=dev, descending=True))
    ko, vo = np.empty_like(keys), np.empty_like(vals)             # out=
    res = clkernels.segmented_sort(keys, offsets, vals, out=(ko, vo), client=client)
    assert res[0] is ko and res[1] is vo
    _same(res, clkernels.segmented_sort(keys, offsets, vals, device=dev))
    with pytest.raises(ValueError, match="overlap"):
        clkernels.segmented_sort(keys, (np.array([0, 5]), np.array([10, 12])), client=client)
    with pytest.raises(ValueError, match="sorted"):
        clkernels.segmented_sort(keys, segment_ids=ids[::-1], client=client)
    with pytest.raises(ValueError, match="asynchronous"):
        clkernels.segmented_sort(keys, offsets, asynchronous=True, client=client)


def test_options_rejected(client, rng):
    x = uniform(rng, 50, 3)
    with pytest.raises(ValueError, match="device= and client="):
        clkernels.pair_count(x, 0.1, client=client, device=SPEC)
    with pytest.raises(ValueError, match="output="):
        clkernels.self_join(x, 0.1, output="graph", client=client)
    with pytest.raises(ValueError, match="built on the client"):
        clkernels.self_join(x, 0.1, output="csr", client=client, collect=False)
    with pytest.raises(ValueError, match="sort=True needs collect=True"):
        clkernels.pairs_within(x, 0.1, client=client, sort=True, collect=False)
    with pytest.raises(ValueError, match="client= only"):
        clkernels.rect_join(_boxes(rng, 5), _boxes(rng, 5), tiles=2)
    with pytest.raises(TypeError, match="dask.distributed.Client"):
        clkernels.pair_count(x, 0.1, client="tcp://127.0.0.1:8786")


def _on_workers(client, fn):
    """``client.run(fn)`` once the cluster has its two workers again: a
    killed worker can stay listed for a moment after its replacement joined
    (a broadcast to it fails: "Address removed")."""
    deadline = time.time() + 60
    while True:
        try:
            got = client.run(fn)
            if len(got) == 2 or time.time() > deadline:
                return got
        except OSError:                 # distributed's CommClosedError
            if time.time() > deadline:
                raise
        time.sleep(0.1)


def _killing_a_worker(client, call):
    """``call()``'s result, one worker SIGKILLed while it runs; then both
    workers back, no memory file left. A call that ends before the kill
    could land (a fast device: the sizes are for CPU devices) skips, once
    its result was checked to exist and nothing leaked; an error raises."""
    out = {}

    def run_call():
        try:
            out["res"] = call()
        except BaseException as e:          # re-raised below
            out["err"] = e

    run = threading.Thread(target=run_call)
    run.start()
    deadline = time.time() + 60
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)                       # some tasks done, most still to run
    if not run.is_alive():
        run.join()
        if "err" in out:
            raise out["err"]
        assert _shm_files() == []
        pytest.skip("the run ended before the kill (a fast device): nothing was killed mid-run")
    pids = client.run(os.getpid)
    os.kill(pids[sorted(pids)[0]], signal.SIGKILL)
    run.join(120)
    client.wait_for_workers(2, timeout=60)      # the nanny restarted it, pinned to its device again
    assert sorted(_on_workers(client, lambda: os.environ.get("CLKERNELS_DEVICE")).values()) == [SPEC, SPEC]
    assert _shm_files() == []
    if "err" in out:
        raise out["err"]
    return out["res"]


def test_worker_killed_mid_run(own_client, dev, rng):
    client = own_client
    x = uniform(rng, 6000, 3)
    ref = clkernels.pair_count(x, 0.1, device=dev)
    assert _killing_a_worker(client, lambda: clkernels.pair_count(x, 0.1, client=client, block=300)) == ref


def test_worker_killed_mid_self_join(own_client, dev, rng):
    """Slab results held on the workers until they write them into the
    client's files: a killed worker's slabs rerun, the pairs and counts are
    the single call's, nothing leaks."""
    client = own_client
    x = uniform(rng, 300000, 3)
    want = clkernels.self_join(x, 0.012, device=dev)
    got = _killing_a_worker(client, lambda: clkernels.self_join(x, 0.012, client=client, slabs=6))
    assert len(got[0]) == len(want[0]) and _pairs(*got) == _pairs(*want)
    deg = _killing_a_worker(client, lambda: clkernels.self_join(x, 0.012, output="count", client=client, slabs=6))
    np.testing.assert_array_equal(deg, clkernels.self_join(x, 0.012, output="count", device=dev))


def test_worker_killed_mid_sort(own_client, dev, rng):
    """Runs whose sorted keys come back through memory files: a killed worker's runs rerun, nothing leaks."""
    client = own_client
    keys = rng.random(1 << 23).astype(np.float32)
    offsets = np.arange(0, len(keys) + 1, 1000)
    offsets[-1] = len(keys)                      # 24 runs of 1.4 MB: above transport.MIN_BYTES
    got = _killing_a_worker(client, lambda: clkernels.segmented_sort(keys, offsets, client=client, ranges=24))
    _same(got, clkernels.segmented_sort(keys, offsets, device=dev))


def _shm_files():
    from clkernels.host.distributed import transport
    return sorted(f for f in os.listdir(transport.ROOT) if f.startswith("clkernels-"))


def _mapped(a):
    """Whether ``a`` is a view of a memory file's mapping (it came through shared memory)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


def _nothing_kept(client):
    """Whether no worker keeps inputs or results of an ended call, nor
    lends memory to one (their release is sent without a wait: allow it a
    moment)."""
    from clkernels.host.distributed import transport
    deadline = time.time() + 10
    while True:
        kept = _on_workers(client, transport._kept)
        if all(v == (0, 0, 0) for v in kept.values()) or time.time() > deadline:
            return all(v == (0, 0, 0) for v in kept.values())
        time.sleep(0.05)


def _skip_without_memory(client):
    from clkernels.host.distributed import transport
    if not transport._crossed(client):
        pytest.skip("the kernel forbids copies between these processes (Yama ptrace_scope, seccomp)")


@pytest.mark.parametrize("memory", [True, False])
def test_host_transport(client, dev, rng, monkeypatch, memory):
    """Workers on the client's host: inputs and large results cross by
    copies between the processes' memories (``memory``) or through memory
    files (results mapped, no copy), bit for bit -- pair columns read at
    each slab's offsets, counts placed by position -- and nothing stays
    behind -- no file, nothing kept on a worker -- after a task that fails
    too."""
    from clkernels.host.distributed import transport
    if memory:
        _skip_without_memory(client)
    monkeypatch.setattr(transport, "MEMORY", memory)
    with transport.Transport(client) as T:
        assert T.mode == ("memory" if memory else "files")
        assert (T.dir is not None and os.path.isdir(T.dir)) != memory
        [big] = T.gather([T.submit(np.arange, 1 << 18, out=True)])     # 2 MiB: above MIN_BYTES
        np.testing.assert_array_equal(big, np.arange(1 << 18))
        if memory:                                                     # held until the call ends
            assert sum(v[1] for v in client.run(transport._kept).values()) == 1
    assert _shm_files() == [] and _nothing_kept(client)
    x = uniform(rng, 60000, 3)
    i, j = clkernels.self_join(x, 0.05, client=client, slabs=1)
    assert _mapped(i) != memory and _mapped(j) != memory     # files: one slab, the worker's arrays mapped
    i0, j0 = clkernels.self_join(x, 0.05, device=dev)
    assert len(i0) > 3 * (transport.MIN_BYTES // 8)          # three slabs' columns cross as arrays
    assert i.dtype == i0.dtype and _pairs(i, j) == _pairs(i0, j0)
    i, j = clkernels.self_join(x, 0.05, client=client, slabs=3)
    assert _pairs(i, j) == _pairs(i0, j0)
    xc = uniform(rng, 400000, 3)                             # three slabs' counts cross as arrays
    deg = clkernels.self_join(xc, 0.01, output="count", device=dev)
    for slabs in (1, 3):                                     # all in place at once, and placed by position
        np.testing.assert_array_equal(clkernels.self_join(xc, 0.01, output="count", client=client, slabs=slabs),
                                      deg)
    keys = rng.random(1 << 19).astype(np.float32)
    offsets = np.arange(0, len(keys) + 1, 1000)
    offsets[-1] = len(keys)
    got = clkernels.segmented_sort(keys, offsets, client=client, ranges=1)
    assert _mapped(got) != memory and got.flags.writeable
    want = clkernels.segmented_sort(keys, offsets, device=dev)
    _same(got, want)
    _same(clkernels.segmented_sort(keys, offsets, client=client, ranges=3), want)   # rows at offsets
    q, b = _boxes(rng, 20000), _boxes(rng, 20000)
    assert clkernels.rect_join(q, b, client=client) == clkernels.rect_join(q, b, device=dev)
    assert _shm_files() == [] and _nothing_kept(client)
    with pytest.raises(TypeError):                        # every task fails on its worker
        clkernels.rect_join(q, b, output="pairs", client=client, no_such_option=1)
    assert _shm_files() == [] and _nothing_kept(client)


def test_memory_reads_retried(client, dev, rng, monkeypatch):
    """A worker's results that cannot be read (as when it died after its
    task) are asked for again -- dask recomputes a lost result -- and an
    input a task shares with the call's other tasks on its worker is
    read-only there."""
    from clkernels.host.distributed import transport
    _skip_without_memory(client)
    keys = rng.random(1 << 21).astype(np.float32)           # two runs of 4 MiB: read, not in dask's reply
    offsets = np.arange(0, len(keys) + 1, 1000)
    offsets[-1] = len(keys)
    want = clkernels.segmented_sort(keys, offsets, device=dev)
    x = uniform(rng, 60000, 3)
    pairs = _pairs(*clkernels.self_join(x, 0.05, device=dev))
    read = transport.Remote.read
    left = [0]

    def flaky(self, dst=None):
        if left[0]:
            left[0] -= 1
            raise ProcessLookupError(3, "No such process")
        return read(self, dst)
    monkeypatch.setattr(transport.Remote, "read", flaky)
    for fails in (1, transport.RETRIES):
        left[0] = fails
        _same(clkernels.segmented_sort(keys, offsets, client=client, ranges=2), want)
        assert left[0] == 0
        left[0] = fails
        assert _pairs(*clkernels.self_join(x, 0.05, client=client, slabs=2)) == pairs
        assert left[0] == 0
    left[0] = transport.RETRIES + 1
    with pytest.raises(OSError):
        clkernels.segmented_sort(keys, offsets, client=client, ranges=2)
    monkeypatch.setattr(transport.Remote, "read", read)
    with transport.Transport(client) as T:
        [h] = T.put([keys])
        assert T.submit(lambda a: (a.flags.writeable, float(a.sum())), h).result() == (False, float(keys.sum()))
        with pytest.raises(TypeError):
            T.put([np.array([object()] * 3)])
    assert _nothing_kept(client)


def test_memory_fence(client, rng, monkeypatch, arena_state):
    """A worker that missed an ended call's release (one restarted after a
    crash while the message went out) keeps nothing of it: it reads the
    call's fence in the client's memory first; one that holds an ended
    call's arrays, or lends it memory, drops them when it next keeps
    something (a task that finds the fence gone, at once)."""
    import collections

    from clkernels.host.distributed import transport
    arena = arena_state
    _skip_without_memory(client)
    for name, fresh in (("_ended", collections.OrderedDict()), ("_held", {}), ("_inputs", {})):
        monkeypatch.setattr(transport, name, fresh)                   # this process as a worker
    a = rng.random(1000)
    with transport.Transport(client) as T:
        [h] = T.put([a])
        call = T.call
        assert transport._live(call)
        np.testing.assert_array_equal(transport._fetch(h), a)        # here, as on a worker
    assert not transport._live(call)
    monkeypatch.setattr(transport, "_ended", collections.OrderedDict())   # a worker the release missed
    assert transport._kept() == (1, 0, 0)                     # the input read above
    with pytest.raises(RuntimeError):
        transport._fetch(h)
    assert transport._kept() == (0, 0, 0)                     # dropped by the read that found the fence gone
    with pytest.raises(RuntimeError):
        transport._hold(call, a)
    assert transport._kept() == (0, 0, 0)
    with transport.Transport(client) as T1, transport.Transport(client) as T2:
        transport._hold(T1.call, a)
        transport._hold(T2.call, a)
        T1._nonce[0] = 0                                     # T1's client gone without a release
        transport._hold(T2.call, a)                          # the next keep drops what T1 left
        assert transport._kept() == (0, 2, 0)
    big = 1 << 21
    with transport.Transport(client, lend=True) as T:        # a task's lent memory, its call ended mid-task
        with arena.lending(T.call):
            r = transfer_empty(big)
            T._nonce[0] = 0
            with pytest.raises(RuntimeError):
                transport._hold(T.call, r)                   # finds the fence gone: the call's blocks go back...
            assert transport._kept()[2] == big
        assert transport._kept()[2] == 0                     # ...once the task ends
    with transport.Transport(client, lend=True) as T1, transport.Transport(client) as T2:
        with arena.lending(T1.call):
            transfer_empty(big)
        T1._nonce[0] = 0                                     # ended without a release, nothing held
        assert transport._kept()[2] == big
        transport._hold(T2.call, a)                          # the next keep sweeps the lent blocks too
        assert transport._kept() == (0, 1, 0)


def transfer_empty(nbytes):
    from clkernels.host.core.transfer import host_empty
    return host_empty((nbytes,), np.uint8)


def test_crossmem(rng):
    """Copies out of a process's memory: this one's (always allowed), in
    chunks on threads; an unmapped range or a process that is gone raises."""
    from clkernels.host.distributed import crossmem
    for n in (0, 1, 4097, (crossmem.CHUNK_BYTES >> 3) * 2 + 3):
        a = rng.integers(0, 1 << 62, n)
        np.testing.assert_array_equal(crossmem.read(os.getpid(), a.ctypes.data, np.empty_like(a)), a)
    assert crossmem.probe(*crossmem.token())
    pid, addr, tok = crossmem.token()
    assert not crossmem.probe(pid, addr, bytes(64 - len(tok)) + b"x" * len(tok))
    with pytest.raises(OSError):
        crossmem.read(os.getpid(), 8, np.empty(16, np.uint8))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(OSError):
        crossmem.read(child.pid, addr, np.empty(16, np.uint8))
    with pytest.raises(ValueError):
        crossmem.read(os.getpid(), addr, np.empty((4, 4), np.uint8)[:, ::2])
    import ctypes
    c = crossmem.CHUNK_BYTES
    m = mmap.mmap(-1, 3 * c)                                 # its middle chunk unmapped: one chunk of three fails
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    assert ctypes.CDLL(None).munmap(ctypes.c_void_p(base + c), ctypes.c_size_t(c)) == 0
    with pytest.raises(OSError):
        crossmem.read(os.getpid(), base, np.empty(3 * c, np.uint8))


def test_shm_fallback(client, dev, rng, monkeypatch):
    """dask's own transfer: with shared memory off, and where a worker can
    neither read the client's memory nor see its memory files (as on
    another host)."""
    import weakref

    from clkernels.host.distributed import transport
    x = uniform(rng, 20000, 3)
    keys = rng.random(1 << 18).astype(np.float32)
    offsets = np.array([0, 1000, 50000, len(keys)])
    want = (_pairs(*clkernels.self_join(x, 0.03, device=dev)), clkernels.segmented_sort(keys, offsets, device=dev),
            clkernels.pair_count(x, 0.05, device=dev))
    monkeypatch.setattr(transport, "_sees", weakref.WeakKeyDictionary())
    assert transport._local(client, os.path.join(transport.ROOT, "clkernels-seen-by-no-worker")) is False
    reads = weakref.WeakKeyDictionary()
    reads[client] = {w: False for w in client.nthreads()}
    monkeypatch.setattr(transport, "_reads", reads)
    for shm in (True, False):                            # the probes' answers (cached), then SHM off
        monkeypatch.setattr(transport, "SHM", shm)
        with transport.Transport(client) as T:
            assert T.dir is None and T.mode == "dask"
        i, j = clkernels.self_join(x, 0.03, client=client, slabs=1)
        assert not _mapped(i) and _pairs(i, j) == want[0]
        got = clkernels.segmented_sort(keys, offsets, client=client, ranges=1)
        assert not _mapped(got)
        _same(got, want[1])
        _same(clkernels.segmented_sort(keys, offsets, client=client, ranges=3), want[1])
        assert clkernels.pair_count(x, 0.05, client=client) == want[2]
    assert _shm_files() == []


def test_no_dask_without_client():
    code = ("import sys, numpy as np, clkernels\n"
            "x = np.random.default_rng(0).random((200, 3)).astype(np.float32)\n"
            "clkernels.pair_count(x, 0.2)\n"
            "bad = [m for m in ('dask', 'distributed') if m in sys.modules]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CLKERNELS_DEVICE=SPEC))
    assert r.returncode == 0, r.stderr[-2000:]

