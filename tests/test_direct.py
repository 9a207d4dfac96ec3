"""The direct small-count kernel (method='direct', and 'auto' for one radius
over at most plan.DIRECT_MAX_PAIRS pairs): exact against the float64
reference, ties included; bad values raise; coordinates beyond float64's
unscaled range fall back to the scaled path."""

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from clkernels.host import twobody
from clkernels.host.twobody import plan
from helpers import count, distances, lattice

pytestmark = pytest.mark.direct


def _steps(events):
    return set(events)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["self", "cross", "box"])
def test_exact(device, rng, dtype, kind):
    x = (rng.random((300, 3)) * 2 - 1).astype(dtype)
    y = (rng.random((170, 3)) * 2 - 1).astype(dtype) if kind == "cross" else None
    box = [2.0, 2.0, 3.0] if kind == "box" else None
    d = distances(x, y, box)
    for r in (float(np.sort(d)[len(d) // 20]), float(np.max(d)) if box is None else 0.99):
        assert clkernels.pair_count(x, r, y=y, box=box, device=device, method="direct") == count(d, r)
    # ties: on a lattice every distance is the sqrt of an integer, r on one of them
    L = lattice(6, 3, dtype=dtype) * dtype(0.5)
    dl = distances(L)
    for r in (0.5, float(np.sqrt(np.float64(0.5))), 1.5):
        res, ev = twobody.count(device.queue, cla.to_device(device.queue, L), r=r)
        assert res == count(dl, r)
        assert _steps(ev) == {"upload", "kernel", "read"}      # no bounds, no layout: auto took it


def test_auto_choice(device, rng, monkeypatch):
    x = rng.random((200, 2)).astype(np.float32)
    xd = cla.to_device(device.queue, x)
    ref = count(distances(x), 0.1)
    res, ev = twobody.count(device.queue, xd, r=0.1)
    assert res == ref and "bounds" not in _steps(ev)
    monkeypatch.setattr(plan, "DIRECT_MAX_PAIRS", 200 * 199 // 2 - 1)      # one pair too many
    res, ev = twobody.count(device.queue, xd, r=0.1)
    assert res == ref and "bounds" in _steps(ev)
    res, ev = twobody.count(device.queue, xd, r=[0.05, 0.1])     # radii: not direct
    assert list(res) == [count(distances(x), 0.05), ref] and "bounds" in _steps(ev)


@pytest.mark.parametrize("where", ["x", "y"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_bad_values_raise(device, rng, where, bad):
    x, y = rng.random((50, 3)), rng.random((40, 3))
    (x if where == "x" else y)[7, 2] = bad
    with pytest.raises(ValueError, match=f"{where} contain NaN or inf"):
        clkernels.pair_count(x, 0.2, y=y, device=device)
    with pytest.raises(ValueError, match=f"{where} contain NaN or inf"):
        clkernels.pair_count(cla.to_device(device.queue, x), 0.2, y=cla.to_device(device.queue, y),
                             device=device, method="direct")


def test_every_point_checked(device, rng):
    # y far longer than x (and the other way): the last rows are checked too
    for nx, ny in ((10, 300), (300, 10)):
        x, y = rng.random((nx, 3)), rng.random((ny, 3))
        for bad in (np.nan, np.inf):
            for name, arr in (("x", x), ("y", y)):
                a = arr.copy()
                a[-1, 0] = bad
                kw = dict(y=a) if name == "y" else dict(y=y)
                with pytest.raises(ValueError, match=f"{name} contain NaN or inf"):
                    clkernels.pair_count(a if name == "x" else x, 0.2, device=device, **kw)
        assert clkernels.pair_count(x, 0.2, y=y, device=device, method="direct") == count(distances(x, y), 0.2)


def test_beyond_unscaled_range(device, rng):
    # float64 coordinates past 2^499: squared differences could overflow, the
    # scaled path decides (its result is the scaled evaluation's)
    u = rng.random((120, 3))
    x = 2.0 ** 510 * (1 + u * 2.0 ** -20)        # differences ~2^490
    r = 0.3 * 2.0 ** 490                          # below 2^500: the rule alone would allow it
    got = clkernels.pair_count(x, r, device=device, method="direct")
    assert got == clkernels.pair_count(x, r, device=device, method="allpairs")
    assert got == count(distances(x * 2.0 ** -490), 0.3)
    # r so small that the scaled path scales: not direct, by the same rule
    with pytest.raises(ValueError, match="method='direct' does not apply"):
        clkernels.pair_count(u * 1e-300, 1e-200, device=device, method="direct")
    with pytest.raises(ValueError, match="method='direct' does not apply"):
        clkernels.pair_count(u, 0.0, device=device, method="direct")     # float64, r = 0
    xf = u.astype(np.float32)
    xf[3] = xf[4]
    assert clkernels.pair_count(xf, 0.0, device=device, method="direct") == count(distances(xf), 0.0)


def test_refusals(device, rng):
    x = rng.random((20, 3))
    for kw in (dict(r=[0.1, 0.2]), dict(r=0.1, images="all", box=[1, 1, 1]), dict(r=0.1, variant="naive")):
        r = kw.pop("r")
        with pytest.raises(ValueError, match="method='direct' does not apply"):
            clkernels.pair_count(x, r, device=device, method="direct", **kw)
    with pytest.raises(ValueError, match="applies to pair_count with one radius"):
        clkernels.distance_histogram(x, 4, device=device, method="direct")
