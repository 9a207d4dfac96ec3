"""clkernels.paircounts, the estimators and RDF against numpy float64 brute force
(computed here, independently: every pair's separation in double, binned by
numpy.histogramdd, whose bins are [lo, hi) with the last one closed)."""

import math

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from helpers import clustered, lattice, ties, uniform


# ------------------------------------------------------------------ references
def separations(X, Y=None, box=None, mode="r", ordered=True):
    """(v1, v2, i, j) for every counted pair: v1 = r / rp / s, v2 = pi / mu (None
    in mode r), i, j its indices. Auto pairs: i != j (ordered) or i < j."""
    X = np.asarray(X, np.float64)
    Yv = X if Y is None else np.asarray(Y, np.float64)
    d = X.shape[1]
    diff = [X[:, None, k] - Yv[None, :, k] for k in range(d)]
    if box is not None:
        L = np.broadcast_to(np.asarray(box, np.float64), (d,))
        diff = [dk - L[k] * np.round(dk / L[k]) for k, dk in enumerate(diff)]
    axes = range(d - 1) if mode == "rppi" else range(d)
    s = np.zeros(diff[0].shape)
    for k in axes:
        s = s + diff[k] * diff[k]
    v1 = np.sqrt(s)
    v2 = None
    if mode == "rppi":
        v2 = np.abs(diff[-1])
    elif mode == "smu":
        with np.errstate(invalid="ignore", divide="ignore"):
            v2 = np.where(v1 > 0, np.abs(diff[-1]) / np.where(v1 > 0, v1, 1.0), 0.0)
    i, j = np.indices(v1.shape)
    keep = np.ones(v1.shape, bool) if Y is not None else (i != j if ordered else i < j)
    return v1[keep], None if v2 is None else v2[keep], i[keep], j[keep]


def reference(X, edges, Y=None, box=None, mode="r", e2=None, ordered=True, wx=None, wy=None, gx=None,
              gy=None):
    """(npairs, sum of v1, sum of w_i w_j) per bin, rows as paircounts orders them."""
    v1, v2, i, j = separations(X, Y, box, mode, ordered)
    if gx is not None:
        gyv = gx if gy is None else gy
        keep = np.asarray(gx)[i] != np.asarray(gyv)[j]
        v1, i, j = v1[keep], i[keep], j[keep]
        v2 = None if v2 is None else v2[keep]
    sample = v1[:, None] if v2 is None else np.stack([v1, v2], 1)
    bins = [edges] if v2 is None else [edges, e2]
    n = np.histogramdd(sample, bins)[0].ravel().astype(np.uint64)
    s = np.histogramdd(sample, bins, weights=v1)[0].ravel()
    w = None
    if wx is not None:
        wyv = wx if wy is None else wy
        pw = np.asarray(wx, np.float64)[i] * np.asarray(wyv, np.float64)[j]
        w = np.histogramdd(sample, bins, weights=pw)[0].ravel()
    return n, s, w


def tie_edges(rng, v, lo, hi, k=6):
    """Strictly increasing edges starting at lo: k reference separations (exact
    ties) within (lo, hi), and hi."""
    t = ties(v, k, rng, lo, hi)
    return np.unique(np.concatenate([[lo], t[t < hi], [hi]]))


def points(kind, rng, n, d, dtype):
    if kind == "uniform":
        return uniform(rng, n, d, dtype)
    if kind == "clustered":
        return clustered(rng, n, d, dtype)
    side = {1: 40, 2: 9, 3: 5, 4: 3}[d]
    return lattice(side, d, dtype=dtype)


def check(res, n, s=None, w=None, rel=1e-12):
    np.testing.assert_array_equal(res["npairs"], n)
    with np.errstate(invalid="ignore", divide="ignore"):
        if s is not None:
            np.testing.assert_allclose(res["ravg"], np.where(n > 0, s / np.maximum(n, 1), 0.0), rtol=rel, atol=0)
        if w is not None:
            np.testing.assert_allclose(res["weightavg"], np.where(n > 0, w / np.maximum(n, 1), 0.0), rtol=rel,
                                       atol=0)


# ------------------------------------------------------------------- mode 'r'
@pytest.mark.parametrize("d", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["uniform", "lattice", "clustered"])
def test_r_exact(device, rng, d, kind):
    dtype = np.float32 if d % 2 else np.float64
    X = points(kind, rng, 150, d, dtype)
    Y = points(kind, rng, 90, d, dtype) if kind != "lattice" else X[::3] + dtype(0.5)
    # every (auto/cross, open/periodic) kernel variant in 3-D; two of them elsewhere (build time)
    combos = [(c, p) for c in (False, True) for p in (False, True)] if d == 3 else [(False, True), (True, False)]
    for cross, periodic in combos:
        yy = Y if cross else None
        if periodic:
            L = np.ceil(np.max(np.abs(np.concatenate([X, Y])), axis=0).astype(np.float64) + 1)
            box = L
            hi = 0.5 * float(L.min())
        else:
            box = None
            hi = float(separations(X, yy)[0].max())
        v = separations(X, yy, box)[0]
        edges = tie_edges(rng, v, 0.0, hi)
        res = clkernels.paircounts(X, edges, y=yy, box=box, device=device)
        n, _, _ = reference(X, edges, yy, box)
        check(res, n)
        if not cross:
            once = clkernels.paircounts(X, edges, box=box, ordered=False, device=device)
            np.testing.assert_array_equal(once["npairs"], reference(X, edges, None, box, ordered=False)[0])
            np.testing.assert_array_equal(2 * once["npairs"], res["npairs"])
        np.testing.assert_array_equal(res["rmin"], edges[:-1])
        np.testing.assert_array_equal(res["rmax"], edges[1:])
        assert res["npairs"].dtype == np.uint64
        assert not res["ravg"].any() and not res["weightavg"].any()
        if kind == "lattice" and d == 3:      # uniform edges (the width-guess path) with exact ties
            top = np.floor(hi)
            ue = np.linspace(0.0, top, int(top) * 2 + 1)
            res = clkernels.paircounts(X, ue, y=yy, box=box, device=device)
            check(res, reference(X, ue, yy, box)[0])


@pytest.mark.parametrize("cross", [False, True])
def test_r_weights_ravg(device, rng, cross):
    X = clustered(rng, 300, 3, np.float64)
    wx = rng.random(300) + 0.5
    Y = uniform(rng, 200, 3, np.float64) if cross else None
    wy = rng.random(200) + 0.5 if cross else None
    edges = np.linspace(0.0, 0.8, 33)
    res = clkernels.paircounts(X, edges, y=Y, weights=wx, y_weights=wy, ravg=True, device=device)
    check(res, *reference(X, edges, Y, wx=wx, wy=wy))
    # negative weights are allowed: numpy's weights= applied to pairs
    wn = rng.standard_normal(300)
    res = clkernels.paircounts(X, edges, weights=wn, device=device)
    n, _, w = reference(X, edges, wx=wn)
    np.testing.assert_array_equal(res["npairs"], n)
    np.testing.assert_allclose(res["npairs"] * res["weightavg"], w, rtol=1e-12, atol=1e-12 * np.abs(w).max())


@pytest.mark.parametrize("scale", [1.0, 2.0 ** -480, 2.0 ** 480])
def test_double_kernel_ties(device, rng, scale):
    """The double kernel (weights force it) bins squared separations against
    the edges' exact squared thresholds: edges on lattice separations (ties:
    square roots of integers), uniform and not, open and closed ends, at
    scales whose squares leave float32's range (and approach double's)."""
    from clkernels.host.paircounts.plan import nearly_geometric, nearly_uniform

    assert nearly_geometric(np.sqrt(2.0 ** np.arange(6))) and not nearly_uniform(np.sqrt(2.0 ** np.arange(6)))
    X = lattice(5, 3, dtype=np.float64) * scale
    w = np.ones(len(X))
    v = separations(X)[0]
    for edges in (tie_edges(rng, v, 0.0, float(v.max())), np.linspace(0.0, 4.0, 9) * scale,
                  np.sqrt(np.array([1.0, 2.0, 3.0, 5.0, 8.0])) * scale,
                  np.sqrt(2.0 ** np.arange(6)) * scale):                   # geometric: the log guess
        res = clkernels.paircounts(X, edges, weights=w, device=device)
        n, _, ws = reference(X, edges, wx=w)
        np.testing.assert_array_equal(res["npairs"], n)
        np.testing.assert_array_equal(res["npairs"] * res["weightavg"], ws)      # unit weights: exact


def test_weights_overflow_raise(device, rng):
    X = uniform(rng, 20, 3, np.float64)
    with pytest.raises(ValueError, match="pair weights overflow float64"):
        clkernels.paircounts(X, [0.0, 0.5, 1.0], weights=np.full(20, 1e160), device=device)


def test_r_partner_chunks(device, rng):
    """Enough points that partners split into chunks (several work-groups per anchor block)."""
    from clkernels.host.paircounts import Plan, Problem

    n, m = 1100, 700
    prob = Problem(dims=3, mode="r", periodic=True, auto=True, weighted=True, ravg=True, grouped=False,
                   nb1=16, nb2=1, uniform1=True, uniform2=False, nx=n, ny=n)
    assert Plan.resolve(device, prob).groups_y > 1
    X = uniform(rng, n, 3, np.float64)
    Y = uniform(rng, m, 3, np.float64)
    w, wy = rng.random(n), rng.random(m)
    edges = np.linspace(0.0, 0.5, 17)
    res = clkernels.paircounts(X, edges, box=1.0, weights=w, ravg=True, device=device)
    check(res, *reference(X, edges, box=1.0, wx=w))
    res = clkernels.paircounts(X, edges, y=Y, box=1.0, weights=w, y_weights=wy, ravg=True, device=device)
    check(res, *reference(X, edges, Y, box=1.0, wx=w, wy=wy))



@pytest.mark.parametrize("mode", ["r", "rppi", "smu"])
def test_partners_in_fours_and_the_rest(device, rng, mode):
    """The double kernel takes a tile's partners four at a time, then one at a time:
    every remainder of 4 for auto pairs (j > i decided per partner) and cross, with
    weights, ravg and exclusions (each call on that kernel: unweighted counts in r
    without ravg take the two-body path), against numpy (bins from tables and the near
    image on: periodic box)."""
    edges = np.geomspace(0.02, 0.5, 9)
    e2 = {"r": None, "rppi": np.linspace(0.0, 0.5, 6), "smu": np.linspace(0.0, 1.0, 5)}[mode]
    kw = dict(box=1.0, mode=mode, **{"r": {}, "rppi": dict(pimax=0.5, npi=5), "smu": dict(nmu=4)}[mode])
    for n, m in [(1, 1), (2, 3), (5, 4), (7, 9), (8, 6), (13, 10), (20, 11), (34, 11)]:
        X, Y = uniform(rng, n, 3, np.float64), uniform(rng, m, 3, np.float64)
        w, wy = rng.random(n) + 0.5, rng.random(m) + 0.5
        g = rng.integers(0, 3, n).astype(np.int32)
        res = clkernels.paircounts(X, edges, weights=w, ravg=True, device=device, **kw)
        check(res, *reference(X, edges, box=1.0, mode=mode, e2=e2, wx=w))
        res = clkernels.paircounts(X, edges, y=Y, weights=w, y_weights=wy, device=device, **kw)
        ref = reference(X, edges, Y, box=1.0, mode=mode, e2=e2, wx=w, wy=wy)
        check(res, ref[0], w=ref[2])
        res = clkernels.paircounts(X, edges, groups=g, ravg=True, device=device, **kw)
        check(res, *reference(X, edges, box=1.0, mode=mode, e2=e2, gx=g)[:2])

def fsum_bins(X, edges, Y=None, wx=None, wy=None):
    """(npairs, fsum of the binned values, fsum of their |values|) per bin of
    mode 'r' (ordered auto pairs): the pair weights w_i w_j, or the separations."""
    v1, _, i, j = separations(X, Y)
    k = np.searchsorted(edges, v1, side="right") - 1
    k[v1 == edges[-1]] = len(edges) - 2
    keep = (k >= 0) & (k < len(edges) - 1)
    v = v1 if wx is None else wx[i] * (wx if wy is None else wy)[j]
    k, v = k[keep], v[keep]
    rows = [v[k == b] for b in range(len(edges) - 1)]
    return (np.array([len(r) for r in rows], np.uint64), np.array([math.fsum(r) for r in rows]),
            np.array([math.fsum(np.abs(r)) for r in rows]))


def check_sums(res, field, n, s, a, rel=1e-12):
    """Exact counts, and npairs * field within rel * (sum of |values|) of the sum s."""
    np.testing.assert_array_equal(res["npairs"], n)
    assert np.all(np.abs(res["npairs"] * res[field] - s) <= rel * a)


@pytest.mark.parametrize("cross", [False, True])
def test_r_weights_wide_range(device, rng, cross):
    """Weights log-uniform over 1e-3..1e3 with random signs (products over 12
    decades): the fixed-point sums against math.fsum."""
    def weights(n):
        return np.exp(rng.uniform(np.log(1e-3), np.log(1e3), n)) * rng.choice([-1.0, 1.0], n)

    X = uniform(rng, 200, 3, np.float64)
    Y = uniform(rng, 150, 3, np.float64) if cross else None
    wx, wy = weights(200), (weights(150) if cross else None)
    edges = np.linspace(0.0, 0.9, 10)
    res = clkernels.paircounts(X, edges, y=Y, weights=wx, y_weights=wy, ordered=False, device=device)
    n, s, a = fsum_bins(X, edges, Y, wx, wy)
    if not cross:       # ordered=False: each pair once
        n, s, a = n // np.uint64(2), s / 2, a / 2
    check_sums(res, "weightavg", n, s, a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("box", [None, 1.0])
def test_distance_histogram_weights(device, rng, dtype, cross, box):
    """distance_histogram(weights=): numpy.histogram's weighted sums of w_i w_j over
    the float64 distances (unordered self pairs, or every cross pair), each bin
    within 1e-12 of its sum of |w_i w_j| (math.fsum) plus the fixed point's
    documented absolute bound (paircounts.cl.mako: 2^-62 of the largest
    product a pair, which a bin of products 2^22 below the largest one
    reaches: weights spread over e^+-3 times normal deviates), periodic or
    open, the default range or given edges, numpy or device arrays."""
    X = clustered(rng, 260, 3, dtype)
    Y = uniform(rng, 170, 3, dtype) if cross else None
    wx = rng.standard_normal(260) * np.exp(rng.uniform(-3, 3, 260))
    wy = rng.random(170) + 0.25 if cross else None
    for bins in (12, np.array([0.0, 0.05, 0.1, 0.2, 0.3, 0.45])):
        h, e = clkernels.distance_histogram(X, bins, y=Y, weights=wx, y_weights=wy, box=box, device=device)
        assert h.dtype == np.float64 and e.dtype == np.float64 and h.shape == (len(e) - 1,)
        if np.ndim(bins) == 0:       # numpy's default range: 0 .. the largest distance (half the box)
            ref_e = clkernels.distance_histogram(X, bins, y=Y, box=box, device=device)[1]
            np.testing.assert_array_equal(e, ref_e)
        v1, _, i, j = separations(X, Y, box)
        if Y is None:
            v1, i, j = v1[i < j], i[i < j], j[i < j]
        pw = wx[i] * (wx if wy is None else wy)[j]
        k = np.searchsorted(e, v1, side="right") - 1
        k[v1 == e[-1]] = len(e) - 2
        keep = (k >= 0) & (k < len(e) - 1)
        k, pw = k[keep], pw[keep]
        s = np.array([math.fsum(pw[k == b]) for b in range(len(e) - 1)])
        a = np.array([math.fsum(np.abs(pw[k == b])) for b in range(len(e) - 1)])
        top = np.sort(np.abs(wx))[-2:]             # the kernel's bound on |w_i w_j|
        wb = top[0] * top[1] if wy is None else top[1] * np.abs(wy).max()
        fixed = np.bincount(k, minlength=len(e) - 1) * 2.0 ** -62 * wb
        assert np.all(np.abs(h - s) <= 1e-12 * a + fixed), (h, s)
        np.testing.assert_allclose(h, np.histogram(v1, e, weights=wx[i] * (wx if wy is None else wy)[j])[0],
                                   rtol=1e-9, atol=1e-12 * a.max())
    q = device.queue
    hd, _ = clkernels.distance_histogram(cla.to_device(q, X), e, y=None if Y is None else cla.to_device(q, Y),
                                         weights=cla.to_device(q, wx),
                                         y_weights=None if wy is None else cla.to_device(q, wy), box=box)
    np.testing.assert_array_equal(hd, h)


def test_distance_histogram_weights_rules(device, rng):
    X = uniform(rng, 50, 3, np.float64)
    w = rng.random(50)
    for kw, match in ((dict(exact=False), "exact=False"), (dict(method="cells"), "method='cells'"),
                      (dict(images="all", box=1.0), "images='all'"), (dict(ppw=2), r"kernel options \(ppw\)"),
                      (dict(range=(-1.0, 0.0)), "the last > 0"),
                      (dict(bins=[0.0, 0.5, 0.5, 1.0]), "strictly increasing")):
        kw = {"bins": 4, **kw}
        with pytest.raises(ValueError, match=match):
            clkernels.distance_histogram(X, weights=w, device=device, **kw)
    with pytest.raises(ValueError, match="y_weights needs weights"):
        clkernels.distance_histogram(X, 4, y=X, y_weights=w, device=device)
    with pytest.raises(ValueError, match="cross counts need both"):
        clkernels.distance_histogram(X, 4, y=X, weights=w, device=device)
    with pytest.raises(ValueError, match=r"weights must have shape \(50,\)"):
        clkernels.distance_histogram(X, 4, weights=w[:-1], device=device)
    h, e = clkernels.distance_histogram(X[:1], 4, range=(0, 1), weights=w[:1], device=device)
    np.testing.assert_array_equal(h, np.zeros(4))
    # no pairs, or only coincident ones: numpy's default range (-0.5, 0.5), as without weights
    for pts, wts in ((X[:0], w[:0]), (X[:1], w[:1]), (np.ones((3, 2)), w[:3])):
        h, e = clkernels.distance_histogram(pts, 4, weights=wts, device=device)
        e0 = clkernels.distance_histogram(pts, 4, device=device)[1]
        np.testing.assert_array_equal(e, e0)
        want = np.zeros(4)
        if len(pts) == 3:               # d = 0 for every pair: the bin holding 0
            want[np.searchsorted(e, 0.0, side="right") - 1] = w[0] * w[1] + w[0] * w[2] + w[1] * w[2]
        np.testing.assert_allclose(h, want, rtol=1e-14)
    # a range below 0: the bins under 0 stay empty
    h, e = clkernels.distance_histogram(X, 6, range=(-0.6, 1.2), weights=w, device=device)
    i, j = np.triu_indices(len(X), 1)
    d = np.sqrt(((X[i] - X[j]) ** 2).sum(1))
    np.testing.assert_allclose(h, np.histogram(d, e, weights=w[i] * w[j])[0], rtol=1e-12, atol=1e-13)


def test_weights_dominant_and_extreme_scales(device):
    """Pair weights where one |w| dominates (the fixed point follows the largest
    product a pair forms, not max|w|^2), weights at 1e-150 and 1e-155 (sums near
    and below 1e-300), and coordinates and edges at 1e-300 and 1e200: the
    weighted and ravg paths (the double kernel, scaled by a power of two) agree
    with the unweighted two-body path and with a float64 evaluation done at a
    representable scale."""
    x = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.2, 0.0]])
    i, j = np.triu_indices(3, 1)
    d = np.sqrt(((x[i] - x[j]) ** 2).sum(1))
    for w, nb in ((np.array([1e10, 1e-10, 1e-10]), 4), (np.array([1e160, 1e-160, 1.0]), 2),
                  (np.array([1.0, 2.0, 3.0]) * 1e-150, 2), (np.array([1.0, 2.0, 3.0]) * 1e-155, 2)):
        h, e = clkernels.distance_histogram(x, nb, (0.0, 0.4), weights=w, device=device)
        pw = w[i] * w[j]
        want = np.histogram(d, e, weights=pw)[0]
        n = np.histogram(d, e)[0]
        # each pair within 2^-62 of the largest pair weight (1, 1e160, 6e-300, 6e-310: not max|w|^2)
        assert np.all(np.abs(h - want) <= 2.0 ** -61 * np.abs(pw).max() * n + 1e-12 * np.abs(want)), (h, want)
        assert h.max() > 0
    w = np.ones(400)
    w[0] = 1e20
    X = np.random.default_rng(5).random((400, 3))
    h, e = clkernels.distance_histogram(X, 5, weights=w, device=device)
    i, j = np.triu_indices(400, 1)
    d = np.sqrt(((X[i] - X[j]) ** 2).sum(1))
    np.testing.assert_allclose(h, np.histogram(d, e, weights=w[i] * w[j])[0], rtol=1e-12)
    for s in (1e-300, 1e200):
        edges = np.array([0.0, 0.15, 0.3]) * s
        plain = clkernels.distance_histogram(x * s, edges, device=device)[0]
        np.testing.assert_array_equal(plain, [1, 2])
        hw = clkernels.distance_histogram(x * s, edges, weights=np.ones(3), device=device)[0]
        np.testing.assert_array_equal(hw, [1.0, 2.0])
        res = clkernels.paircounts(x * s, edges, ordered=False, ravg=True, device=device)
        np.testing.assert_array_equal(res["npairs"], [1, 2])
        np.testing.assert_allclose(res["ravg"] / s, [0.1, (0.2 + np.sqrt(0.05)) / 2], rtol=1e-15)
        res = clkernels.paircounts(x * s, edges, box=1.0 * s, ordered=False, device=device, weights=np.ones(3))
        np.testing.assert_array_equal(res["npairs"], [1, 2])
    # edges spanning 2^560 (their exponents are centred, not the largest brought to 1), a box far
    # beyond the edges (it only caps the scale), tiny edges in a huge box
    p = np.array([[0.0, 0.0, 0.0], [2.0 ** -459, 0.0, 0.0]])
    e = np.array([0.0, 2.0 ** -460, 2.0 ** 100])
    np.testing.assert_array_equal(clkernels.distance_histogram(p, e, device=device)[0], [0, 1])
    np.testing.assert_array_equal(clkernels.distance_histogram(p, e, weights=np.ones(2), device=device)[0], [0, 1])
    q = np.array([[0.0, 0.0, 0.0], [1.2, 0.0, 0.0]])
    res = clkernels.paircounts(q, [0.0, 1.0, 2.0], box=2.0 ** 600, ravg=True, ordered=False, device=device)
    np.testing.assert_array_equal(res["npairs"], [0, 1])
    assert res["ravg"][1] == 1.2
    r = np.array([[0.0, 0.0, 0.0], [0.5e-200, 0.0, 0.0], [1.5e-200, 0.0, 0.0]])
    res = clkernels.paircounts(r, [0.0, 1e-200, 2e-200], box=1e200, ravg=True, ordered=False, device=device)
    np.testing.assert_array_equal(res["npairs"], [1, 2])
    # weights whose products reach float64's top: finite sums, inf where numpy's are
    w = np.full(3, 1.5 * 2.0 ** 511)
    h = clkernels.distance_histogram(x, 2, (0.0, 0.4), weights=w, device=device)[0]
    assert h[0] == w[0] * w[0] and h[1] == np.inf
    h = clkernels.distance_histogram(x, [0.0, 0.15, 0.4], y=x[:1] + 0.01, weights=np.full(3, 1e154),
                                     y_weights=np.full(1, 1e154), device=device)[0]
    np.testing.assert_array_equal(h, [np.inf, 1e154 * 1e154])     # two pairs of 1e308 overflow, one does not


def test_weights_largest_on_the_device(device, rng):
    """The largest |w| (and the next, for auto pairs) of device weights found on
    the device -- ties at the top, signs, zeros, subnormals, one or two
    weights -- as the host finds them; NaN or inf there raises; device and host
    weights give the same sums."""
    from clkernels.host.paircounts.api import _largest

    q = device.queue
    cases = [np.array([5.0, -5.0, 1.0]), np.array([-7.0, 3.0, 2.0, 3.0]), np.zeros(4), np.array([2.5]),
             np.array([1e-310, -3e-310, 2e-310]), np.array([1e10, 1e-10, 1e-10]), rng.standard_normal(1000),
             np.array([4.0, 4.0]), np.array([-1.0, 0.5])]
    for w in cases:
        for k in (1, 2):
            assert _largest(cla.to_device(q, w), "weights", k) == _largest(w, "weights", k), (w, k)
    assert _largest(np.array([3.0, -4.0, 4.0]), "weights", 2) == [4.0, 4.0]
    assert _largest(np.array([3.0, -4.0, 1.0]), "weights", 2) == [4.0, 3.0]
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="weights contain NaN or inf"):
            _largest(cla.to_device(q, np.array([1.0, bad])), "weights", 2)
    X = rng.random((300, 3))
    w = np.where(rng.random(300) < 0.5, 1e8, 1e-8) * rng.random(300)
    edges = [0.0, 0.2, 0.5, 1.0]
    host = clkernels.paircounts(X, edges, weights=w, ravg=True, device=device)
    dev = clkernels.paircounts(cla.to_device(q, X), edges, weights=cla.to_device(q, w), ravg=True, device=device)
    np.testing.assert_array_equal(host["npairs"], dev["npairs"])
    np.testing.assert_array_equal(host["weightavg"], dev["weightavg"])


def test_r_weights_many_flushes(device, rng, monkeypatch):
    """All pairs in one bin, all partners in one chunk: with 32 work-items (a
    multiple of every sub-group size) a work-group flushes its limb sums after
    each of 10 tiles; with 256, two tiles of 2^16 equal extreme products each (q = 2^62 - 2^9: limbs 0xFE00,
    0xFFFF, 0xFFFF, 2^14 - 1, or -2^14 negated) would wrap the 32-bit limb
    sums without the flush between them. Sums exact or to 1e-12."""
    import dataclasses

    from clkernels.host.paircounts import Plan, Problem, api

    def one_chunk(wg):
        def resolve(cls, dev, prob):
            p = Plan.resolve(dev, prob, wg_size=wg)
            return dataclasses.replace(p, chunk=p.groups_y * p.chunk, groups_y=1)
        return type("OneChunk", (Plan,), {"resolve": classmethod(resolve)})

    X = uniform(rng, 300, 3, np.float64) * 0.1
    w = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), 300)) * rng.choice([-1.0, 1.0], 300)
    edges = np.array([0.0, 1.0])
    monkeypatch.setattr(api, "Plan", one_chunk(32))
    res = clkernels.paircounts(X, edges, weights=w, device=device)
    check_sums(res, "weightavg", *fsum_bins(X, edges, wx=w))
    monkeypatch.setattr(api, "Plan", one_chunk(256))
    p = np.nextafter(4.0, 0.0)                                  # 4 - 2^-51: 2^60 p = 2^62 - 2^9
    Y = uniform(rng, 512, 3, np.float64) * 0.1
    for sign in (1.0, -1.0):
        res = clkernels.paircounts(X[:256], edges, y=Y, weights=np.full(256, sign * p), y_weights=np.ones(512),
                                   device=device)
        assert res["npairs"][0] == 1 << 17 and res["weightavg"][0] == sign * p
    if device.max_work_group_size >= 512:
        prob = Problem(dims=3, mode="r", periodic=False, auto=True, weighted=True, ravg=False, grouped=False,
                       nb1=1, nb2=1, uniform1=True, uniform2=False, nx=300, ny=300)
        with pytest.raises(ValueError, match="exceeds 256"):
            Plan.resolve(device, prob, wg_size=512)


def test_r_ravg_scale(device, rng):
    """ravg's fixed point from the last edge E (E 2^s just below 2^62, s < 0
    for E = 1e150, s > 0 for 1e-150), pairs at exactly E included."""
    from clkernels.host.paircounts.plan import fixed_point

    top = np.nextafter(2.0, 0.0)
    assert fixed_point(top) == (2.0 ** 61, 2.0 ** -61) and fixed_point(0.0) == (1.0, 1.0)
    assert fixed_point(1e300 * 1e300)[0] == 2.0 ** -962
    for E in (top, 1e150, 1e-150):
        X = np.sort(rng.uniform(0.0, E, 150))[:, None]
        X[0], X[-1] = 0.0, E                          # the pair (0, E) at exactly the last edge
        edges = np.linspace(0.0, E, 9)
        res = clkernels.paircounts(X, edges, ravg=True, ordered=False, device=device)
        n, s, a = fsum_bins(X, edges)
        check_sums(res, "ravg", n // np.uint64(2), s / 2, a / 2)
        assert res["npairs"][-1] > 0

def test_r_device_arrays(device, rng):
    X = uniform(rng, 257, 3, np.float32)
    Y = uniform(rng, 100, 3, np.float32)
    w, wy = rng.random(257), rng.random(100)
    edges = np.linspace(0.05, 0.6, 12)
    host = clkernels.paircounts(X, edges, y=Y, weights=w, y_weights=wy, ravg=True, device=device)
    q = device.queue
    dev = clkernels.paircounts(cla.to_device(q, X), edges, y=cla.to_device(q, Y), weights=cla.to_device(q, w),
                               y_weights=cla.to_device(q, wy), ravg=True)
    np.testing.assert_array_equal(dev["npairs"], host["npairs"])
    np.testing.assert_allclose(dev["ravg"], host["ravg"], rtol=1e-13)
    np.testing.assert_allclose(dev["weightavg"], host["weightavg"], rtol=1e-13)
    res, events = clkernels.host.paircounts.count(q, cla.to_device(q, X), edges, y=cla.to_device(q, Y))
    np.testing.assert_array_equal(res["npairs"], host["npairs"])
    bad = cla.to_device(q, np.r_[w[:-1], np.inf])
    with pytest.raises(ValueError, match="weights contain NaN"):
        clkernels.paircounts(cla.to_device(q, X), edges, weights=bad)
    with pytest.raises(ValueError, match="x contain NaN"):
        clkernels.paircounts(cla.to_device(q, np.r_[X[1:], [[np.nan] * 3]]), edges)
    assert events.seconds("kernel") > 0


def test_groups(device, rng):
    X = uniform(rng, 200, 3, np.float64)
    Y = uniform(rng, 120, 3, np.float64)
    gx = rng.integers(0, 15, 200)
    gy = rng.integers(0, 15, 120)
    edges = np.linspace(0.0, 0.5, 9)
    res = clkernels.paircounts(X, edges, groups=gx, box=1.0, device=device)
    check(res, reference(X, edges, box=1.0, gx=gx)[0])
    res = clkernels.paircounts(X, edges, y=Y, groups=gx, y_groups=gy, device=device)
    check(res, reference(X, edges, Y, gx=gx, gy=gy)[0])


def test_group_pairs(rng):
    """The listed exclusions against a brute-force mask (sorted and shuffled ids)."""
    from clkernels.host.outputs.pairlist import group_pairs

    for gx in (rng.integers(0, 6, 40), np.arange(30) // 3, np.zeros(7, int), np.arange(9)):
        i, j = group_pairs(gx)
        a, b = np.nonzero((gx[:, None] == gx[None, :]) & np.triu(np.ones((len(gx),) * 2, bool), 1))
        got = sorted(zip(np.minimum(i, j).tolist(), np.maximum(i, j).tolist()))
        assert got == sorted(zip(a.tolist(), b.tolist()))
        gy = rng.integers(-2, 6, 25)
        i, j = group_pairs(gx, gy)
        a, b = np.nonzero(gx[:, None] == gy[None, :])
        assert sorted(zip(i.tolist(), j.tolist())) == sorted(zip(a.tolist(), b.tolist()))
    assert group_pairs(np.zeros(100, int), limit=100) is None       # 4,950 pairs
    assert group_pairs(np.zeros(10, int), np.zeros(11, int), limit=109) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["allpairs", "cells", "kernel"])
def test_exclusions_exact(device, rng, monkeypatch, dtype, path):
    """Exclusions at exact ties: all pairs counted by the two-body histogram
    (all-pairs or cell grid) minus the excluded pairs' exact histogram, or
    skipped in the paircounts kernel (``kernel``: too many to list)."""
    from clkernels.host.paircounts import api
    from clkernels.host.twobody import api as tb

    if path == "kernel":
        monkeypatch.setattr(api, "_excluded", lambda *a, **k: None)
    else:
        monkeypatch.setattr(tb, "_method", lambda *a, **k: path)
    X = lattice(5, 3, dtype=dtype) + dtype(0.25)       # spacing 1, a periodic lattice in a box of 5
    Y = X[::4] + dtype(0.5)
    gx, gy = rng.integers(0, 8, len(X)), rng.integers(0, 8, len(Y))
    for box in (None, 5.0):
        hi = 2.5 if box else 4.0
        edges = tie_edges(rng, separations(X, None, box)[0], 0.0, hi)
        res = clkernels.paircounts(X, edges, groups=gx, box=box, device=device)
        check(res, reference(X, edges, box=box, gx=gx)[0])
        res = clkernels.paircounts(X, edges, groups=np.arange(len(X)) // 5, box=box, ordered=False,
                                   device=device)
        check(res, reference(X, edges, box=box, gx=np.arange(len(X)) // 5, ordered=False)[0])
        res = clkernels.paircounts(X, edges, y=Y, groups=gx, y_groups=gy, box=box, device=device)
        check(res, reference(X, edges, Y, box=box, gx=gx, gy=gy)[0])


# ---------------------------------------------------------------- estimators
def test_estimators_by_hand():
    dd = np.array([10.0, 40.0, 0.0])
    dr = np.array([20.0, 50.0, 5.0])
    rr = np.array([30.0, 60.0, 0.0])
    nd, nr = 5, 10
    DD, DR, RR = dd[:2] / 20, dr[:2] / 50, rr[:2] / 90
    ls = clkernels.xi_landy_szalay(dd, dr, rr, nd, nr)
    np.testing.assert_allclose(ls[:2], (DD - 2 * DR + RR) / RR, rtol=1e-15)
    assert np.isnan(ls[2])
    nat = clkernels.xi_natural(dd, rr, nd, nr)
    np.testing.assert_allclose(nat[:2], DD / RR - 1, rtol=1e-15)
    # unordered counts: half the pairs
    np.testing.assert_allclose(clkernels.xi_natural(dd / 2, rr / 2, nd, nr, ordered=False)[:2], nat[:2])
    # structured results: npairs, weighted npairs * weightavg
    st = np.zeros(3, [("npairs", np.uint64), ("weightavg", np.float64)])
    st["npairs"] = [10, 40, 0]
    np.testing.assert_allclose(clkernels.xi_natural(st, rr, nd, nr)[:2], nat[:2])
    st["weightavg"] = [2.0, 0.5, 0.0]
    np.testing.assert_allclose(clkernels.xi_natural(st, rr, nd, nr)[:2], (np.array([20, 20]) / 20) / RR - 1)
    with pytest.raises(ValueError, match="same number of bins"):
        clkernels.xi_natural(dd, rr[:2], nd, nr)
    with pytest.raises(ValueError, match="nd = 1 gives n"):        # no auto pairs to normalise by
        clkernels.xi_landy_szalay(dd, dr, rr, 1, nr)
    with pytest.raises(ValueError, match="nr = 1 gives n"):
        clkernels.xi_natural(dd, rr, nd, 1)


def test_rr_analytic():
    e = np.array([0.0, 1.0, 2.5])
    L = np.array([8.0, 9.0, 10.0])
    n = 100
    rr = clkernels.rr_analytic(e, n, L)
    np.testing.assert_allclose(rr, n * (n - 1) / 720.0 * 4 / 3 * np.pi * np.diff(e ** 3), rtol=1e-14)
    np.testing.assert_allclose(clkernels.rr_analytic(e, n, L, ordered=False), rr / 2, rtol=1e-14)
    rp = clkernels.rr_analytic(e, n, L, mode="rppi", pimax=3.0)
    want = n * (n - 1) / 720.0 * np.outer(np.pi * np.diff(e ** 2), 2 * np.ones(3)).ravel()
    np.testing.assert_allclose(rp, want, rtol=1e-14)
    smu = clkernels.rr_analytic(e, n, L, mode="smu", nmu=4)
    np.testing.assert_allclose(smu, np.repeat(rr, 4) / 4, rtol=1e-14)
    with pytest.raises(ValueError, match="half"):
        clkernels.rr_analytic([0.0, 5.0], n, L)


def test_xi_uniform_near_zero(device, rng):
    """Uniform data against the analytic RR of its box: xi ~ 0."""
    X = rng.random((600, 3)) * 10
    e = np.linspace(1.0, 4.0, 4)
    dd = clkernels.paircounts(X, e, box=10.0, device=device)
    rr = clkernels.rr_analytic(e, 600, 10.0)
    xi = clkernels.xi_natural(dd, rr, 600, 600)
    assert np.all(np.abs(xi) < 0.1)


# ------------------------------------------------------------------------ RDF
def interrdf_norm(count, edges, frames, npairs, volumes, norm):
    """MDAnalysis InterRDF._conclude, written out."""
    out = float(frames)
    if norm in ("rdf", "density"):
        out = out * 4 / 3 * np.pi * np.diff(np.power(edges, 3))
    if norm == "rdf":
        out = out * npairs / (np.sum(volumes) / frames)
    return count / out


@pytest.mark.parametrize("norm", ["rdf", "density", "none"])
def test_rdf_frames(device, rng, norm):
    n = 120
    rdf = clkernels.RDF(bins=20, range=(0.0, 4.0), norm=norm, device=device)
    total = np.zeros(20, np.int64)
    vols = []
    edges = np.linspace(0.0, 4.0, 21)
    for f, box in enumerate(([9.0, 9.5, 10.0], [9.2, 9.5, 10.1, 90, 90, 90], np.diag([9.1, 9.6, 10.0]))):
        L = np.diag(box) if np.ndim(box) == 2 else np.asarray(box[:3])
        X = rng.random((n, 3)) * L
        rdf.accumulate(X, box)
        total += reference(X, edges, box=L)[0].astype(np.int64)
        vols.append(np.prod(L))
    np.testing.assert_array_equal(rdf.count, total)
    assert rdf.frames == 3
    np.testing.assert_allclose(rdf.bins, 0.5 * (edges[1:] + edges[:-1]))
    np.testing.assert_allclose(rdf.rdf, interrdf_norm(total, edges, 3, n * (n - 1), vols, norm), rtol=1e-13)
    np.testing.assert_allclose(rdf.cdf(), np.cumsum(total) / 3, rtol=1e-15)


def test_rdf_run_progress(device, rng):
    """RDF.run over frames (a list and a generator) equals accumulate per frame;
    a progress callable sees every frame."""
    boxes = [[9.0, 9.5, 10.0], [9.2, 9.5, 10.1], [9.1, 9.6, 10.0]]
    frames = [(rng.random((80, 3)) * np.asarray(b), b) for b in boxes]
    one = clkernels.RDF(12, (0.0, 4.0), exclusion_block=(4, 4), device=device)
    for x, b in frames:
        one.accumulate(x, b)
    seen = []
    run = clkernels.RDF(12, (0.0, 4.0), exclusion_block=(4, 4), device=device)
    assert run.run(frames, progress=lambda done, total: seen.append((done, total))) is run
    np.testing.assert_array_equal(run.count, one.count)
    np.testing.assert_array_equal(run.rdf, one.rdf)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    seen.clear()
    gen = clkernels.RDF(12, (0.0, 4.0), exclusion_block=(4, 4), device=device)
    gen.run((f for f in frames), progress=lambda done, total: seen.append((done, total)))
    np.testing.assert_array_equal(gen.count, one.count)
    assert seen == [(1, None), (2, None), (3, None)]
    with pytest.raises(TypeError, match="every frame"):
        clkernels.RDF(12, (0.0, 4.0), device=device).run([frames[0][0]])


def test_rdf_exclusions(device, rng):
    n, L = 150, np.array([8.0, 8.0, 8.0])
    X = rng.random((n, 3)) * L
    Y = rng.random((90, 3)) * L
    edges = np.linspace(0.0, 4.0, 11)
    # exclusion_block within one set: blocks of 3 (molecules)
    r = clkernels.RDF(10, (0.0, 4.0), exclusion_block=(3, 3), device=device).accumulate(X, L)
    g = np.arange(n) // 3
    np.testing.assert_array_equal(r.count, reference(X, edges, box=L, gx=g)[0])
    np.testing.assert_allclose(r.rdf, interrdf_norm(r.count, edges, 1, n * n - 3 * 3 * n / 3, [512.0], "rdf"),
                               rtol=1e-13)
    # cross with exclusion_block (nA, nB), as InterRDF masks pairs (i // nA == j // nB)
    r = clkernels.RDF(10, (0.0, 4.0), exclusion_block=(5, 3), device=device).accumulate(X, L, y=Y)
    v1, _, i, j = separations(X, Y, L)
    keep = (i // 5) != (j // 3)
    np.testing.assert_array_equal(r.count, np.histogram(v1[keep], edges)[0])
    np.testing.assert_allclose(r.rdf, interrdf_norm(r.count, edges, 1, keep.size - (~keep).sum(), [512.0], "rdf"),
                               rtol=1e-13)
    # groups= ids
    gx, gy = rng.integers(0, 10, n), rng.integers(0, 10, 90)
    r = clkernels.RDF(10, (0.0, 4.0), groups=(gx, gy), device=device).accumulate(X, L, y=Y)
    keep = gx[i] != gy[j]
    np.testing.assert_array_equal(r.count, np.histogram(v1[keep], edges)[0])
    np.testing.assert_allclose(r.rdf, interrdf_norm(r.count, edges, 1, keep.sum(), [512.0], "rdf"), rtol=1e-13)


# ------------------------------------------------------------ triclinic cells
def cell(dims):
    """Box vectors (rows a, b, c) of MDAnalysis dimensions, computed here."""
    A, B, C = dims[:3]
    al, be, ga = np.deg2rad(dims[3:])
    cy = (np.cos(al) - np.cos(be) * np.cos(ga)) / np.sin(ga)
    return np.array([[A, 0, 0], [B * np.cos(ga), B * np.sin(ga), 0],
                     [C * np.cos(be), C * cy, C * np.sqrt(1 - np.cos(be) ** 2 - cy ** 2)]])


def triclinic_reference(X, Y, H, edges, ordered_auto):
    """Counts by an explicit search: for every pair the shortest of the 7^3
    images d + i a + j b + k c (|i|, |j|, |k| <= 3) of d = x - y, float64."""
    auto = Y is None
    Yv = X if auto else Y
    d = np.asarray(X, np.float64)[:, None, :] - np.asarray(Yv, np.float64)[None, :, :]
    shifts = np.array([(i, j, k) for i in range(-3, 4) for j in range(-3, 4) for k in range(-3, 4)]) @ H
    best = np.full(d.shape[:2], np.inf)
    for s in shifts:
        e = d + s
        best = np.minimum(best, np.sqrt(e[..., 0] * e[..., 0] + e[..., 1] * e[..., 1] + e[..., 2] * e[..., 2]))
    if auto:
        i, j = np.indices(best.shape)
        best = best[i != j] if ordered_auto else best[i < j]
    return np.histogram(best.ravel(), edges)[0].astype(np.uint64)


def widths(H):
    v = abs(np.linalg.det(H))
    a, b, c = H
    return np.array([v / np.linalg.norm(np.cross(b, c)), v / np.linalg.norm(np.cross(c, a)),
                     v / np.linalg.norm(np.cross(a, b))])


@pytest.mark.parametrize("dims", [[10.0, 11.0, 12.0, 70.0, 80.0, 65.0],      # skewed, all angles
                                  [9.0, 9.0, 9.0, 60.0, 60.0, 90.0],         # a rhombic dodecahedron
                                  [10.0, 10.0, 10.0, 90.0, 90.0, 120.0]])    # hexagonal
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_triclinic(device, rng, dims, dtype):
    H = cell(np.asarray(dims))
    X = (rng.random((160, 3)) @ H * 2.5 - 0.7 * H.sum(0)).astype(dtype)    # spread over several cells
    Y = (rng.random((70, 3)) @ H).astype(dtype)
    hi = 0.499 * widths(H).min()
    edges = np.linspace(0.0, hi, 12)
    res = clkernels.paircounts(X, edges, box=dims, device=device)
    np.testing.assert_array_equal(res["npairs"], triclinic_reference(X, None, H, edges, True))
    res = clkernels.paircounts(X, edges, y=Y, box=H, device=device)          # the matrix form
    np.testing.assert_array_equal(res["npairs"], triclinic_reference(X, Y, H, edges, False))
    g = rng.integers(0, 9, len(X))
    res = clkernels.paircounts(X, edges, box=dims, groups=g, ordered=False, device=device)
    v = X.astype(np.float64)
    d = v[:, None, :] - v[None, :, :]
    iu = np.triu_indices(len(X), 1)
    keep = g[iu[0]] != g[iu[1]]
    # the same search over the kept pairs only
    sub = d[iu][keep]
    shifts = np.array([(i, j, k) for i in range(-3, 4) for j in range(-3, 4) for k in range(-3, 4)]) @ H
    best = np.min([np.sqrt(((sub + s) ** 2).sum(-1)) for s in shifts], axis=0)
    np.testing.assert_array_equal(res["npairs"], np.histogram(best, edges)[0])
    rdf = clkernels.RDF(11, (0.0, hi), device=device).accumulate(X, dims)
    np.testing.assert_array_equal(rdf.count, triclinic_reference(X, None, H, np.linspace(0, hi, 12), True))
    np.testing.assert_allclose(rdf.volume, np.linalg.det(H), rtol=1e-12)


def test_triclinic_errors(device):
    X = np.zeros((4, 3))
    B = np.array([[10.0, 0, 0], [3, 10, 0], [2, 3, 4]])           # widths 9.26, 8, 4: edges must stay below 2
    with pytest.raises(ValueError, match="not below half"):
        clkernels.paircounts(np.array([[0.0, 0, 0], [2, 3, 6]]), [0.0, 1.0, 2.0], box=B, device=device)
    res = clkernels.paircounts(np.array([[0.0, 0, 0], [2, 3, 6]]), [0.0, 1.0, 1.999], box=B, ordered=False,
                               device=device)
    np.testing.assert_array_equal(res["npairs"], [0, 0])                # the image is at 2.0: beyond
    with pytest.raises(ValueError, match="lower triangular"):
        clkernels.paircounts(X, [0.0, 1.0], box=[[10, 1, 0], [0, 10, 0], [0, 0, 10]], device=device)
    with pytest.raises(ValueError, match="perpendicular width"):
        clkernels.paircounts(X, [0.0, 4.4], box=[9.0, 9.0, 9.0, 60.0, 60.0, 90.0], device=device)
    with pytest.raises(ValueError, match="triclinic cells take mode='r'"):
        clkernels.paircounts(X, [0.0, 1.0], box=[9.0, 9.0, 9.0, 60.0, 60.0, 90.0], mode="rppi", pimax=2.0,
                             device=device)
    with pytest.raises(ValueError, match="angles"):
        clkernels.paircounts(X, [0.0, 1.0], box=[9.0, 9.0, 9.0, 60.0, 60.0, 180.0], device=device)
    with pytest.raises(ValueError, match="positive volume"):
        clkernels.paircounts(X, [0.0, 1.0], box=[9.0, 9.0, 9.0, 10.0, 120.0, 90.0], device=device)


def test_rdf_empty_frames(device):
    """Empty frames (and empty y) with exclusions count nothing and keep N."""
    r = clkernels.RDF(10, (0.0, 1.0), exclusion_block=(1, 1), device=device)
    r.accumulate(np.empty((0, 3)), [3, 3, 3], y=np.empty((0, 3)))
    assert r.count.sum() == 0 and r.frames == 1
    r = clkernels.RDF(10, (0.0, 1.0), groups=(np.arange(4), np.empty(0, int)), device=device)
    r.accumulate(np.random.default_rng(0).random((4, 3)), [3, 3, 3], y=np.empty((0, 3)))
    assert r.count.sum() == 0


def test_rdf_bad_boxes():
    r = clkernels.RDF(10, (0.0, 4.0))
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="lower triangular"):
        r.accumulate(X, [[10, 1, 0], [0, 10, 0], [0, 0, 10]])
    with pytest.raises(ValueError, match="half"):
        r.accumulate(X, [6, 10, 10])
    with pytest.raises(ValueError, match="norm"):
        clkernels.RDF(norm="gofr")
    with pytest.raises(ValueError, match=r"\(k, k\)"):
        clkernels.RDF(10, (0.0, 4.0), exclusion_block=(2, 3)).accumulate(X, [10, 10, 10])
    # a frame without its box: refused before anything is counted
    r = clkernels.RDF(10, (0.0, 4.0))
    r.accumulate(X + np.arange(4)[:, None], [10, 10, 10])
    before = (r.frames, r.count.copy(), r.volume)
    with pytest.raises(ValueError, match="box is required"):
        r.accumulate(X, None)
    assert (r.frames, r.volume) == (before[0], before[2]) and np.array_equal(r.count, before[1])
    with pytest.raises(ValueError, match="range must start at 0"):
        clkernels.RDF(10, (-1.0, 4.0))


# --------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("kwargs, match", [
    (dict(edges=[0.0, np.nan]), "edges must be finite"),
    (dict(edges=[0.0, 0.5, 0.5]), "edges must increase"),
    (dict(edges=[0.5, 0.2]), "edges must increase"),
    (dict(edges=[-0.1, 0.2]), "edges must be >= 0"),
    (dict(mode="xyz"), "mode must be"),
    (dict(mode="rppi"), "needs pimax"),
    (dict(mode="rppi", pimax=0.0), "pimax must be > 0"),
    (dict(mode="rppi", pimax=-1.0), "pimax must be > 0"),
    (dict(mode="rppi", pimax=0.5), "npi"),
    (dict(mode="smu"), "needs nmu"),
    (dict(mode="smu", nmu=0), "nmu must be a positive"),
    (dict(pimax=1.0), "pimax and npi apply"),
    (dict(weights=np.ones(5)), "weights must have shape"),
    (dict(weights=np.r_[np.ones(9), np.nan]), "weights must be finite"),
    (dict(y_weights=np.ones(10)), "y_weights needs y"),
    (dict(box=0.8), "half the shortest box side"),
    (dict(box=[1.0, 1.0]), "box must be"),
    (dict(groups=np.ones(3, int)), "groups must have shape"),
])
def test_bad_arguments(kwargs, match):
    X = np.random.default_rng(0).random((10, 3))
    kw = dict(edges=[0.0, 0.5])
    kw.update(kwargs)
    edges = kw.pop("edges")
    with pytest.raises(ValueError, match=match):
        clkernels.paircounts(X, edges, **kw)


def test_bad_points():
    X = np.random.default_rng(0).random((10, 3))
    with pytest.raises(ValueError, match="x contain NaN"):
        clkernels.paircounts(np.r_[X, [[np.nan, 0, 0]]], [0.0, 1.0])
    with pytest.raises(ValueError, match="dimensions"):
        clkernels.paircounts(X, [0.0, 1.0], y=X[:, :2])
    with pytest.raises(ValueError, match="x must be an"):
        clkernels.paircounts(np.zeros((2, 2, 2)), [0.0, 1.0])
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        clkernels.paircounts(X[:, :1], [0.0, 1.0], mode="smu", nmu=3)
    with pytest.raises(ValueError, match="cross counts need both"):
        clkernels.paircounts(X, [0.0, 1.0], y=X, weights=np.ones(10))


def test_empty(device):
    e = [0.0, 0.5, 1.0]
    for X in (np.zeros((0, 3)), np.zeros((1, 3))):
        res = clkernels.paircounts(X, e, device=device)
        assert res["npairs"].tolist() == [0, 0]
