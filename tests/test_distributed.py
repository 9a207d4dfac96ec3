"""Scale-out on dask.distributed (issue 19), the operations: a LocalCluster
of 2 worker processes (one thread each) pinned to one CPU device
(tests/cluster.py); every distributed call equals the single-device call on
that device exactly. Killed workers, the transports between the client and
the workers and calls without ``client``: test_distributed_transport.py.

Few kernel configurations (float32 3-D points, float32 2-D boxes, float32
keys), so the workers' cold builds stay few."""

import os

import numpy as np
import pytest

import clkernels
from cluster import SPEC, client, dev, pair_set, random_boxes, same_result  # noqa: F401 (fixtures)
from helpers import lattice, uniform

da = pytest.importorskip("dask.array")


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


def test_pairs_within(client, dev, rng):
    x = uniform(rng, 2000, 3)
    y = uniform(rng, 800, 3)
    i, j, d = clkernels.pairs_within(x, 0.08, client=client, sort=True, return_distances=True)
    i0, j0, d0 = clkernels.pairs_within(x, 0.08, device=dev, sort=True, return_distances=True)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(j, j0)
    np.testing.assert_array_equal(d, d0)
    i, j = clkernels.pairs_within(x, 0.08, y=y, client=client, slabs=5)
    assert pair_set(i, j) == pair_set(*clkernels.pairs_within(x, 0.08, y=y, device=dev))
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
        assert pair_set(*got) == pair_set(*clkernels.pairs_within(x, r, y=y, box=box, device=dev))
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
        assert pair_set(*got) == pair_set(*clkernels.self_join(x, 0.08, device=dev, **kw))
    i, j = clkernels.self_join(x, 0.08, client=client, symmetric=True, collect=False)
    assert isinstance(i, da.Array)
    assert pair_set(i.compute(), j.compute()) == pair_set(*clkernels.self_join(x, 0.08, device=dev, symmetric=True))
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
        assert pair_set(*clkernels.self_join(g, 1.0, client=client, slabs=slabs)) == \
            pair_set(*clkernels.self_join(g, 1.0, device=dev))
        np.testing.assert_array_equal(clkernels.self_join(g, 1.0, output="count", client=client, slabs=slabs),
                                      clkernels.self_join(g, 1.0, output="count", device=dev))


@pytest.mark.parametrize("d, eps", [(2, 0.004), (6, 0.03), (10, 0.05)])
def test_self_join_slabs_exponential(client, dev, rng, d, eps):
    """Skewed points (most pairs in the first slabs, halos as wide as slabs in
    6-D), the grid's kernels and the tiled d > 8 join: the slabs' pairs --
    own points' with the grid, with the halo ahead, mapped to global ids on
    the device -- equal the single call's, in every output."""
    x = rng.exponential(0.025, (3000, d)).astype(np.float32)
    want = pair_set(*clkernels.self_join(x, eps, device=dev))
    assert len(want) > len(x)
    for slabs in (2, 5):
        assert pair_set(*clkernels.self_join(x, eps, client=client, slabs=slabs)) == want
    i, j = clkernels.self_join(x, eps, client=client, collect=False)
    assert pair_set(i.compute(), j.compute()) == want
    np.testing.assert_array_equal(clkernels.self_join(x, eps, output="count", client=client, slabs=3),
                                  clkernels.self_join(x, eps, output="count", device=dev))
    if d <= 8:
        kw = dict(kernel="unicomp", k=2)
        assert pair_set(*clkernels.self_join(x, eps, client=client, slabs=3, **kw)) == want
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
def test_slab_bounds_balance_pairs(device, rng, dims, monkeypatch):
    """With the sample the whole set (n <= SAMPLE), the cuts split the
    estimated work -- POINT_WEIGHT a point plus half its neighbours, counted
    here by numpy in float64 -- into equal shares, up to a point's weight;
    and they are the cuts of numpy's counts exactly, on every device: each
    slab's task computes them on its own device, and tasks on different
    devices must agree (a cut that differed would lose or double pairs)."""
    from clkernels.host.distributed import slabs as S

    monkeypatch.setattr(S.inputs, "device_for", lambda *a, **k: device)

    n, ns = 3000, 4
    x = rng.exponential(0.025, (n, dims)).astype(np.float32)
    r = 0.01 if dims == 2 else 0.05
    x[::7, 0] = x[3::7, 0]                         # ties in the first coordinate
    x64 = x.astype(np.float64)
    deg = np.zeros(n, np.int64)
    for a in range(0, n, 500):
        dd = np.sqrt(((x64[a:a + 500, None, :] - x64[None, :, :]) ** 2).sum(-1))
        deg[a:a + 500] = (dd <= r).sum(1) - 1
    assert deg.sum() > 10 * n                      # the pairs weigh more than the points
    q = S._bounds(x, n, r, ns)
    assert q.shape == (ns - 1,) and (np.diff(q) >= 0).all()
    o = np.argsort(x64[:, 0], kind="stable")
    c = np.cumsum(S.POINT_WEIGHT + deg[o] * 0.5)
    want = x64[o, 0][np.searchsorted(c, c[-1] * np.arange(1, ns) / ns, side="left")]
    np.testing.assert_array_equal(q, want)
    w = S.POINT_WEIGHT + 0.5 * deg
    share = [w[(x64[:, 0] >= lo) & (x64[:, 0] < hi)].sum() for lo, hi in S._edges(q)]
    assert abs(sum(share) - w.sum()) < 1e-6 * w.sum()
    assert max(abs(v - w.sum() / ns) for v in share) <= 2 * w.max()


def test_slab_ranges_count_the_sample_once(device, rng, monkeypatch):
    """Each slab task derives its range from the cuts of the same sample; a
    worker's tasks of one call (one array) count it once, another array or
    radius counts again, and the ranges tile the axis."""
    from clkernels.host.distributed import slabs as S

    monkeypatch.setattr(S.inputs, "device_for", lambda *a, **k: device)
    monkeypatch.setattr(S, "_last_cuts", None)
    calls = []
    bounds = S._bounds
    monkeypatch.setattr(S, "_bounds", lambda *a: calls.append(a[1:]) or bounds(*a))
    x = rng.exponential(0.025, (4000, 2)).astype(np.float32)
    ranges = [S._slab_range(x, (k, 3), 0.01) for k in range(3)]
    assert len(calls) == 1
    assert ranges == S._edges(bounds(S._sample(x, len(x)), len(x), 0.01, 3))
    assert ranges[0][0] == -np.inf and ranges[-1][1] == np.inf
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    S._slab_range(x, (0, 3), 0.02)
    S._slab_range(x.copy(), (0, 3), 0.02)
    assert len(calls) == 3
    assert S._slab_range(x, (0, 1), 0.01) == (-np.inf, np.inf) and len(calls) == 3


def test_rect_join(client, dev, rng):
    q, b = random_boxes(rng, 900), random_boxes(rng, 1200)
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
            same_result(clkernels.segmented_sort(keys, off, vals, client=client, ranges=4, **args),
                  clkernels.segmented_sort(keys, off, vals, device=dev, **args))
    # segments with gaps, in any order: the elements outside stay
    b = np.array([500, 20, 900, 300, 1400])
    e = np.array([700, 250, 905, 300, 2000])
    for extra in ({}, dict(return_indices=True)):
        same_result(clkernels.segmented_sort(keys, (b, e), vals, client=client, ranges=3, **extra),
              clkernels.segmented_sort(keys, (b, e), vals, device=dev, **extra))
        same_result(clkernels.segmented_sort(keys, (b, e), client=client, **extra),
              clkernels.segmented_sort(keys, (b, e), device=dev, **extra))
    # one segment far longer than a run's share: split over the workers and merged
    big = np.concatenate([[0, 30], [30 + 5000], [5000 + 30 + 40]])
    kb = rng.integers(0, 20, int(big[-1])).astype(np.float32)
    kb[rng.random(len(kb)) < 0.02] = np.nan
    kb[rng.random(len(kb)) < 0.05] = -0.0
    vb = np.arange(len(kb), dtype=np.int64)
    for extra in ({}, dict(descending=True), dict(return_indices=True), dict(descending=True, return_indices=True)):
        same_result(clkernels.segmented_sort(kb, big, vb, client=client, ranges=6, **extra),
              clkernels.segmented_sort(kb, big, vb, device=dev, **extra))
    ki = rng.integers(-(2 ** 31), 2 ** 31, 4000, dtype=np.int64).astype(np.int32)
    ki[:3] = -(2 ** 31)                                            # the most negative key, descending
    same_result(clkernels.segmented_sort(ki, np.array([0, 4000]), client=client, ranges=5, descending=True),
          clkernels.segmented_sort(ki, np.array([0, 4000]), device=dev, descending=True))
    ko, vo = np.empty_like(keys), np.empty_like(vals)             # out=
    res = clkernels.segmented_sort(keys, offsets, vals, out=(ko, vo), client=client)
    assert res[0] is ko and res[1] is vo
    same_result(res, clkernels.segmented_sort(keys, offsets, vals, device=dev))
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
        clkernels.rect_join(random_boxes(rng, 5), random_boxes(rng, 5), tiles=2)
    with pytest.raises(TypeError, match="dask.distributed.Client"):
        clkernels.pair_count(x, 0.1, client="tcp://127.0.0.1:8786")
