"""clkernels.paircounts' float32 path (host/paircounts/fast.py): unweighted and
weighted counts in r and rp-pi from float32 separations, the pairs within the
proven band of an edge decided in double -- against numpy float64 brute force
(test_paircounts.py's references), at ties, with the bands widened so that most
pairs take the double decision, from unwrapped periodic coordinates, over the
cell grid, and where float32 cannot hold the problem (the double kernel then)."""

import numpy as np
import pytest

import clkernels
from clkernels.host.paircounts import fast, gridded
from helpers import clustered, lattice, uniform
from test_paircounts import check, reference, separations, tie_edges


@pytest.fixture
def stages(monkeypatch):
    """The stages fast.make gave (None: the double kernel), in call order."""
    got, make = [], fast.make

    def spy(*a, **k):
        s = make(*a, **k)
        got.append(s)
        return s

    monkeypatch.setattr(fast, "make", spy)
    return got


def _rppi(X, e, Y=None, box=None, pimax=4.0, npi=8, **kw):
    return clkernels.paircounts(X, e, y=Y, box=box, mode="rppi", pimax=pimax, npi=npi, **kw)


@pytest.mark.parametrize("mode", ["r", "rppi"])
@pytest.mark.parametrize("box", [None, 9.0])
def test_fast_ties(device, rng, stages, mode, box):
    """Lattice points (separations sqrt(k), |dz| integers) with edges on exact
    ties and an ulp off them, self and cross, weighted and not: every count is
    numpy's, and the float32 path ran."""
    X = lattice(6, 3, dtype=np.float64)[rng.permutation(216)[:170]]
    Y = lattice(4, 3, dtype=np.float32).astype(np.float64) + 0.5
    for yy in (None, Y):
        v = separations(X, yy, box, mode)[0]
        hi = 4.5 if box is not None else float(v.max())
        for e in (tie_edges(rng, v, 0.0, hi, k=7), np.nextafter(tie_edges(rng, v, 0.5, hi, k=5), np.inf),
                  np.sqrt(np.arange(1.0, 12.0))):
            e = e[e <= hi]
            w = rng.random(len(X))
            wy = None if yy is None else rng.random(len(yy))
            for pimax in (3.0, np.nextafter(3.0, 0.0)):
                kw = dict(pimax=pimax, npi=3, mode="rppi") if mode == "rppi" else {}
                e2 = np.linspace(0.0, pimax, 4) if mode == "rppi" else None
                res = clkernels.paircounts(X, e, y=yy, box=box, device=device, **kw)
                check(res, reference(X, e, yy, box, mode, e2)[0])
                res = clkernels.paircounts(X, e, y=yy, box=box, weights=w, y_weights=wy, device=device, **kw)
                n, _, ws = reference(X, e, yy, box, mode, e2, wx=w, wy=wy)
                check(res, n, None, ws)
                if mode == "r":
                    break
    assert stages and all(s is not None for s in stages)


def test_fast_wide_bands(device, rng, stages, monkeypatch):
    """Bands widened to a fifth of the squared thresholds and to 0.05 of pi:
    most pairs are decided in double inside the kernel, the rest from float32;
    the counts stay numpy's (random, clustered and unwrapped periodic points)."""
    monkeypatch.setattr(fast, "squared_band", lambda sc, t: 0.2 * t)
    monkeypatch.setattr(fast, "pi_band", lambda sc, p: 0.05 * p)
    e = np.geomspace(0.1, 4.0, 9)
    for X, box in ((uniform(rng, 300, 3, np.float64) * 8, None), (clustered(rng, 300, 3, np.float64) * 8, None),
                   (uniform(rng, 300, 3, np.float64) * 9 + 9 * rng.integers(-3, 4, (300, 3)), 9.0)):
        check(_rppi(X, e, box=box, device=device), reference(X, e, None, box, "rppi", np.linspace(0, 4.0, 9))[0])
        check(clkernels.paircounts(X, e, box=box, weights=np.ones(len(X)), device=device),
              reference(X, e, None, box)[0])
    assert len(stages) == 6 and all(s is not None for s in stages)


@pytest.mark.parametrize("box", [None, 7.0])
def test_fast_bins_guessed_and_tabled(device, rng, stages, box):
    """The first axis's bins from a table (few log bins), from the root guess
    (256 uniform bins: no table), from a search (irregular edges) and the pi
    axis with and without its table (4 and 300 bins); cross pairs, float32
    points."""
    X = (uniform(rng, 260, 3, np.float32) * np.float32(7)).astype(np.float32)
    Y = (uniform(rng, 170, 3, np.float32) * np.float32(7)).astype(np.float32)
    top = 3.5 if box else 6.0
    irregular = np.cumsum(np.r_[0.0, rng.random(30)])
    for e in (np.geomspace(0.2, top, 14), np.linspace(0.0, top, 257), irregular * top / irregular[-1]):
        res = clkernels.paircounts(X, e, y=Y, box=box, weights=np.ones(len(X)), y_weights=np.ones(len(Y)),
                                   device=device)
        check(res, reference(X, e, Y, box)[0])
        for npi in ((4, 300) if len(e) < 20 else (4,)):
            res = _rppi(X, e, Y, box, pimax=3.0, npi=npi, device=device)
            check(res, reference(X, e, Y, box, "rppi", np.linspace(0.0, 3.0, npi + 1))[0])
    kinds = {(s.tab1, s.tab2, s.guess1) for s in stages}
    assert None not in stages
    assert (True, False, "search") in kinds or (True, False, "log") in kinds       # 14 log bins, tabled
    assert any(not t1 and g == "uniform" for t1, _, g in kinds)                    # 256 uniform bins
    assert any(t2 for _, t2, _ in kinds) and any(not t2 for _, t2, _ in kinds)


def test_fast_over_the_grid(device, rng, stages, monkeypatch):
    """The float32 path over the cell grid's partner ranges (grid forced at
    test sizes): rp-pi and weighted r, self and cross, periodic and open."""
    monkeypatch.setattr(gridded, "MIN_PAIRS", {"gpu": 1, "cpu": 1})
    monkeypatch.setattr(gridded, "OCCUPANCY", 2)
    monkeypatch.setattr(gridded, "MAX_FRACTION", 1.0)
    built, build = [], gridded.build
    monkeypatch.setattr(gridded, "build", lambda *a, **k: built.append(build(*a, **k)) or built[-1])
    X = clustered(rng, 900, 3, np.float64) * 20
    Y = uniform(rng, 400, 3, np.float64) * 20
    e = np.geomspace(0.3, 2.5, 6)
    for box in (None, 20.0):
        for yy in (None, Y):
            check(_rppi(X, e, yy, box, pimax=2.0, npi=4, device=device),
                  reference(X, e, yy, box, "rppi", np.linspace(0.0, 2.0, 5))[0])
            w = rng.random(len(X))
            wy = None if yy is None else rng.random(len(yy))
            res = clkernels.paircounts(X, e, y=yy, box=box, weights=w, y_weights=wy, device=device)
            n, _, ws = reference(X, e, yy, box, wx=w, wy=wy)
            check(res, n, None, ws)
    assert len(built) == 8 and len(stages) == 8 and None not in stages


def test_fast_declined(device, rng, stages):
    """Where float32 cannot hold the problem -- coordinates far from their
    separations (1e9 away, edges ~1), edges beyond 1e18, ravg and s-mu -- the
    double kernel counts (stage None or not asked), exactly."""
    X = uniform(rng, 120, 3, np.float64) * 4 + 1e9
    e = np.geomspace(0.1, 4.0, 6)
    check(_rppi(X, e, device=device), reference(X, e, None, None, "rppi", np.linspace(0.0, 4.0, 9))[0])
    assert stages[-1] is None
    Z = uniform(rng, 120, 3, np.float64) * 4e19
    ez = np.geomspace(1e18, 4e19, 5)
    check(clkernels.paircounts(Z, ez, weights=np.ones(len(Z)), device=device), reference(Z, ez)[0])
    assert stages[-1] is None
    k = len(stages)
    check(clkernels.paircounts(X - 1e9, e, ravg=True, device=device), *reference(X - 1e9, e)[:2])
    clkernels.paircounts(X - 1e9, e, mode="smu", nmu=4, device=device)
    assert len(stages) == k


def test_fast_matches_double_kernel(device, rng, monkeypatch):
    """The float32 path and the double kernel give identical counts and
    weight sums on a clustered periodic catalog (rp-pi, weighted r)."""
    X = clustered(rng, 1500, 3, np.float64) * 30
    w = rng.random(len(X)) + 0.5
    e = np.geomspace(0.2, 10.0, 12)
    kw = dict(box=30.0, weights=w)
    runs = []
    for on in (True, False):
        monkeypatch.setattr(fast, "ENABLED", on)
        runs.append((_rppi(X, e, pimax=10.0, npi=10, device=device, **kw),
                     clkernels.paircounts(X, e, device=device, **kw)))
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a["npairs"], b["npairs"])
        np.testing.assert_array_equal(a["weightavg"], b["weightavg"])
