"""clkernels.paircounts' 2-D modes (rp-pi, s-mu) and the double kernel's guessed
bins against numpy float64 brute force (the references of test_paircounts.py)."""

import dataclasses

import numpy as np
import pytest

import clkernels
from test_paircounts import check, points, reference, separations, tie_edges
from test_paircounts_grid import forced  # noqa: F401 (a fixture)
from helpers import lattice, uniform


# ------------------------------------------------------------- 2-D modes
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("mode", ["rppi", "smu"])
def test_2d_modes(device, rng, d, mode):
    for kind, dtype in (("lattice", np.float32), ("clustered", np.float64)):
        X = points(kind, rng, 160, d, dtype)
        X = X if kind == "lattice" else X * dtype(4)
        Y = uniform(rng, 70, d, dtype) * dtype(4)
        combos = ((False, None), (True, None), (False, np.full(d, 9.0)), (True, np.full(d, 9.0)))
        for cross, box in (combos if d == 3 else combos[1:3]):
            yy = Y if cross else None
            v1, v2, _, _ = separations(X, yy, box, mode)
            hi = 4.5 if box is not None else float(v1.max())
            edges = tie_edges(rng, v1, 0.0, hi, k=5)
            if mode == "rppi":
                pimax = float(max(1.0, np.floor(min(hi, 4.0))))
                kw = dict(pimax=pimax)
                e2 = np.linspace(0.0, pimax, int(pimax) + 1)
            else:
                kw = dict(nmu=7)
                e2 = np.linspace(0.0, 1.0, 8)
            w = rng.random(len(X))
            wy = rng.random(len(Y)) if cross else None
            res = clkernels.paircounts(X, edges, y=yy, box=box, mode=mode, weights=w, y_weights=wy, ravg=True,
                                       device=device, **kw)
            check(res, *reference(X, edges, yy, box, mode, e2, wx=w, wy=wy))
            field = "pimax" if mode == "rppi" else "mumax"
            np.testing.assert_array_equal(res[field], np.tile(e2[1:], len(edges) - 1))
            np.testing.assert_array_equal(res["rmin"], np.repeat(edges[:-1], len(e2) - 1))


@pytest.mark.parametrize("box", [None, 6.0])
def test_guessed_bins_at_ties(device, rng, box):
    """The double kernel's guessed bins -- log2 for geometric first-axis edges,
    the square root for uniform ones, the width for uniform pi bins -- at exact
    ties and an ulp off them (the guess then lands one bin high or low):
    lattice separations sqrt(k) meet the edges 1, 2, 4 and sqrt(2) (squared
    thresholds), |dz| every integer pi edge."""
    g = np.arange(6, dtype=np.float64)
    X = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)[rng.permutation(216)[:150]]
    up = np.nextafter(np.geomspace(0.5, 8.0, 5), np.inf)        # an ulp above the ties: the guess overshoots
    lin = np.linspace(0.0, 3.0, 7)
    for edges in (np.geomspace(0.5, 8.0, 5), up, np.geomspace(2.0 ** -0.5, 2.0 ** 1.5, 5), lin,
                  np.r_[0.0, np.nextafter(lin[1:], np.inf)]):
        hi = 3.0 if box else None
        e = edges[edges <= (hi or np.inf)] if box else edges
        res = clkernels.paircounts(X, e, box=box, ravg=True, device=device)
        check(res, *reference(X, e, None, box)[:2])
        for pimax in (3.0, np.nextafter(3.0, 0.0)):           # pi edges at and an ulp off the integers
            res = clkernels.paircounts(X, e, box=box, mode="rppi", pimax=pimax, npi=3, device=device)
            check(res, reference(X, e, None, box, "rppi", np.linspace(0.0, pimax, 4))[0])


def test_edges_past_double_squares(device):
    """Positive edges whose squares no scaling keeps within double's normal
    range (a first edge of the smallest subnormal beside edges near 1: the
    counts were all 0) raise; spans of 2^1000 and 2^1019 are counted exactly."""
    X = np.arange(12.0).reshape(4, 3)
    e = np.nextafter(np.linspace(0.0, 3.0, 7), np.inf)
    with pytest.raises(ValueError, match="normal range"):
        clkernels.paircounts(X, e, ravg=True, device=device)
    with pytest.raises(ValueError, match="normal range"):
        clkernels.paircounts(X, [0.0, 1.0, 2.0, 3.0], mode="rppi", pimax=5e-324 * 2, npi=1, device=device)
    for p in (0, 19):                       # edges 2^-1000 .. 1.9 * 2^p: a span of 2^(p + 1000)
        Y = np.array([[0.0, 0, 0], [1.5 * 2.0 ** -1000, 0, 0], [0.5, 0, 0], [1.8 * 2.0 ** p, 0, 0]])
        edges = np.array([0.0, 2.0 ** -1000, 1.0, 1.9 * 2.0 ** p])
        # numpy's squares underflow at 2^-2000: the reference at 2^490 times the scale
        # (the documented counts: double with a wider exponent range)
        check(clkernels.paircounts(Y, edges, ravg=True, device=device),
              reference(Y * 2.0 ** 490, edges * 2.0 ** 490)[0])


def test_guesses_off_by_several(device, rng):
    """Nearly geometric edges whose ratio drifts within the log guess's
    tolerance, and nearly uniform ones: guesses several bins low or high,
    corrected both ways (random separations against numpy)."""
    X = rng.uniform(0.0, 4.0, (400, 3))
    r = np.log(2.0) / 10 * (1 + 0.9e-3 * np.sign(np.arange(60) - 29.5))
    geo = np.exp(np.r_[np.log(0.05), np.log(0.05) + np.cumsum(r)])
    geo = geo[geo < 7]
    uni = np.r_[0.0, np.cumsum(np.full(400, 0.01) * (1 + 0.9e-6 * np.where(np.arange(400) < 200, 1, -1)))]
    for edges in (geo, geo[::-1].copy()[::-1], uni):
        check(clkernels.paircounts(X, edges, ravg=True, device=device), reference(X, edges)[0])
        res = clkernels.paircounts(X, [0.0, 1.0, 3.0], mode="rppi", pimax=float(uni[-1]), npi=400, device=device)
        e2 = np.linspace(0.0, float(uni[-1]), 401)
        check(res, reference(X, np.array([0.0, 1.0, 3.0]), None, None, "rppi", e2)[0])


def test_rppi_npi_and_mu_edges(device, rng):
    X = lattice(5, 3, dtype=np.float64)
    res = clkernels.paircounts(X, [0.0, 1.0, 2.0, 3.0], mode="rppi", pimax=2.0, npi=4, device=device)
    check(res, reference(X, np.array([0.0, 1.0, 2.0, 3.0]), mode="rppi", e2=np.linspace(0, 2.0, 5))[0])
    # pairs along the line of sight have mu == 1: in the last, closed bin
    res = clkernels.paircounts(X, [0.5, 1.5], mode="smu", nmu=2, device=device)
    assert res["npairs"][1] == reference(X, np.array([0.5, 1.5]), mode="smu", e2=np.linspace(0, 1, 3))[0][1]


# ------------------------------------------------- bin tables, near images
def test_half_image():
    """plan.half_image's P: for |d| < 1.5 L, rint(d / L) is 1 exactly when d > P
    and -1 when d < -P, at the ulps around +-P and +-L/2 and for sides whose
    halves do not divide exactly."""
    from clkernels.host.paircounts.plan import half_image

    rng = np.random.default_rng(5)
    for L in [1.0, 0.1, 3.0, 7.3, 1e-300, 1e300, 2.0 ** -1070 * 3] + list(rng.random(20) * 10):
        P = half_image(L)
        ds = [P, -P, 0.5 * L, -0.5 * L]
        ds += [np.nextafter(v, s) for v in list(ds) for s in (np.inf, -np.inf)]
        ds += list(rng.uniform(-1.49, 1.49, 50) * L)
        for d in ds:
            d = np.float64(d)
            if abs(d) >= 1.5 * L:
                continue
            assert np.rint(d / np.float64(L)) == int(d > P) - int(d < -P), (L, d, P)


@pytest.fixture
def launches(monkeypatch):
    """(work-group size, Problem) of every pair-count launch (a spy on execute.run)."""
    from clkernels.host.paircounts import execute

    seen, run = [], execute.run

    def spy(*a, **k):
        seen.append((a[2].wg_size, a[3]))
        return run(*a, **k)

    monkeypatch.setattr(execute, "run", spy)
    return seen


def test_bin_tables_and_near_images(device, rng, launches):
    """The first axis's and pi's bin tables and the minimum image from two
    comparisons ('near': coordinates within 1.4 box lengths; unwrapped ones
    take the image count) at ties: lattice separations meet the edges, pi
    edges and half the box exactly; weighted r and rp-pi against numpy, and a
    spy checks that each path ran."""
    L = 6.0
    g = np.arange(6, dtype=np.float64)          # spacing 1 in a box of 6: differences of 3 = L / 2
    X = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)[rng.permutation(216)[:160]]
    far = X + L * rng.integers(-2, 3, X.shape)
    w = rng.random(len(X))
    for pts in (X, far, X[:, :2]):
        box = L
        for e in (np.geomspace(0.5, 3.0, 6), np.sqrt([0.0, 1, 2, 3, 5, 8, 9]), np.linspace(0.0, 3.0, 7)):
            res = clkernels.paircounts(pts, e, box=box, weights=w, device=device)
            n, _, ws = reference(pts, e, None, box, wx=w)
            check(res, n, None, ws)
            for pimax, npi in ((3.0, 3), (np.nextafter(3.0, 0.0), 6)):
                res = clkernels.paircounts(pts, e, box=box, mode="rppi", pimax=pimax, npi=npi, device=device)
                check(res, reference(pts, e, None, box, "rppi", np.linspace(0.0, pimax, npi + 1))[0])
    seen = [p for _, p in launches]
    assert any(p.near for p in seen) and any(p.periodic and not p.near for p in seen)
    assert any(p.tab1 for p in seen) and any(p.tab2 for p in seen)


def test_bin_tables_yield_local_memory(device, rng, monkeypatch, launches):
    """Bin tables never cost a call or a smaller work-group: with a 48 KiB local
    memory (NVIDIA's) 1250 rp-pi bins with weights and ravg fit without the
    tables, so the tables are dropped (the pi table first) and the counts stay
    numpy's; few bins keep both tables."""
    from clkernels.host.paircounts import plan

    monkeypatch.setattr(device, "local_mem_size", 49152)
    X = rng.random((300, 3)) * 100.0
    w = rng.random(300)
    e = np.linspace(0.0, 20.0, 26)
    res = clkernels.paircounts(X, e, box=100.0, mode="rppi", pimax=40.0, npi=50, weights=w, ravg=True,
                               device=device)
    n, s, ws = reference(X, e, None, 100.0, "rppi", np.linspace(0.0, 40.0, 51), wx=w)
    check(res, n, s, ws)
    wg, p = launches[-1]
    bare = dataclasses.replace(p, tab1=False, tab2=False)
    assert wg == plan.Plan.default_wg(device, bare)
    assert plan.local_bytes(p, wg) <= 49152 and not p.tab2
    res = clkernels.paircounts(X, np.geomspace(0.5, 20.0, 8), box=100.0, mode="rppi", pimax=40.0, npi=8,
                               device=device)
    check(res, reference(X, np.geomspace(0.5, 20.0, 8), None, 100.0, "rppi", np.linspace(0.0, 40.0, 9))[0])
    assert launches[-1][1].tab1 and launches[-1][1].tab2


@pytest.mark.parametrize("grid", [False, True])
def test_near_images_cross_and_unequal_sides(device, rng, request, launches, grid):
    """The comparisons' image (coordinates within 1.4 box lengths) for cross
    sets in a box of unequal sides, over all pairs and over the cell grid
    (forced at this size: test_paircounts_grid's fixture), points at half a
    side apart exactly; against numpy."""
    built = request.getfixturevalue("forced") if grid else []
    L = np.array([6.0, 4.5, 7.3])
    g = [np.arange(0.0, s, s / 4) for s in L]        # quarters: differences of exactly half a side
    A = np.stack(np.meshgrid(*g, indexing="ij"), -1).reshape(-1, 3)
    X = np.concatenate([A, rng.random((150, 3)) * L])
    Y = np.concatenate([A[::2], rng.random((90, 3)) * L * 1.3 - 0.15 * L])       # within 1.4 L of X
    e = np.geomspace(0.3, 2.2, 7)
    for yy in (None, Y):
        res = clkernels.paircounts(X, e, y=yy, box=L, mode="rppi", pimax=3.0, npi=6, device=device)
        check(res, reference(X, e, yy, L, "rppi", np.linspace(0.0, 3.0, 7))[0])
        w = rng.random(len(X))
        wy = None if yy is None else rng.random(len(yy))
        res = clkernels.paircounts(X, e, y=yy, box=L, weights=w, y_weights=wy, device=device)
        n, _, ws = reference(X, e, yy, L, wx=w, wy=wy)
        check(res, n, None, ws)
    assert all(p.near for _, p in launches) and len(launches) == 4 and len(built) == (4 if grid else 0)
