"""Nested-loop theta joins: exact pair sets against numpy's evaluation of the
predicate on broadcast columns (np.nonzero: sorted by (i, j))."""

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from clkernels import BuildError, theta_join
from clkernels.host.theta import execute as theta_execute

BAND = "fabs(a.t - b.t) <= 5 && a.k != b.k"


def check(i, j, mask):
    """(i, j) are the true cells of mask, in (i, j) order, each once."""
    assert i.dtype == np.int64 and j.dtype == np.int64
    ri, rj = np.nonzero(mask)
    assert len(i) == len(ri)
    nb = mask.shape[1]
    assert len(np.unique(i * nb + j)) == len(i)          # every pair once
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(j, rj)


def band_tables(rng, na, nb, dtype, keys=5):
    a = {"t": (rng.random(na) * 100).astype(dtype), "k": rng.integers(0, keys, na).astype(np.int32)}
    b = {"t": (rng.random(nb) * 100).astype(dtype), "k": rng.integers(0, keys, nb).astype(np.int32)}
    return a, b


def band_mask(a, b):
    return (np.abs(a["t"][:, None] - b["t"][None, :]) <= 5) & (a["k"][:, None] != b["k"][None, :])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_band_join(device, rng, dtype):
    a, b = band_tables(rng, 1500, 1100, dtype)
    i, j = theta_join(a, b, BAND, device=device)
    check(i, j, band_mask(a, b))
    assert len(i) > 10000


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_equality_join(device, rng, dtype):
    a = {"k": rng.integers(-50, 50, 2000).astype(dtype), "v": rng.random(2000)}
    b = {"k": rng.integers(-50, 50, 700).astype(dtype)}
    if dtype == np.int64:       # keys beyond 32 bits
        a["k"] = a["k"] * (1 << 40) + 3
        b["k"] = b["k"] * (1 << 40) + 3
    i, j = theta_join(a, b, "a.k == b.k", device=device)
    check(i, j, a["k"][:, None] == b["k"][None, :])


def test_inequality_join(device, rng):
    a = {"x": rng.integers(0, 1 << 32, 400, dtype=np.uint64).astype(np.uint32)}
    b = {"y": rng.integers(0, 1 << 32, 300, dtype=np.uint64).astype(np.uint32)}
    i, j = theta_join(a, b, "a.x < b.y", device=device)
    check(i, j, a["x"][:, None] < b["y"][None, :])


def test_range_join(device, rng):
    lo = rng.random(900) * 90
    a = {"lo": lo, "hi": lo + rng.random(900) * 3}
    b = {"x": rng.random(1300) * 100, "w": rng.random(1300).astype(np.float32)}
    i, j = theta_join(a, b, "a.lo <= b.x && b.x < a.hi && b.w > 0.25f", device=device)
    check(i, j, (a["lo"][:, None] <= b["x"][None, :]) & (b["x"][None, :] < a["hi"][:, None])
          & (b["w"][None, :] > np.float32(0.25)))


def test_one_sided_and_constant_predicates(device, rng):
    a = {"x": rng.random(70).astype(np.float32)}
    b = {"y": rng.random(45).astype(np.float32)}
    i, j = theta_join(a, b, "a.x > 0.5f", device=device)
    check(i, j, np.broadcast_to((a["x"] > 0.5)[:, None], (70, 45)))
    i, j = theta_join(a, b, "b.y <= 0.5f", device=device)
    check(i, j, np.broadcast_to((b["y"] <= 0.5)[None, :], (70, 45)))
    i, j = theta_join(a, b, "1", device=device)
    check(i, j, np.ones((70, 45), bool))


def test_zero_results(device, rng):
    a, b = band_tables(rng, 600, 500, np.float32)
    for method in ("pages", "scan"):
        i, j = theta_join(a, b, "a.t > 1000", device=device, method=method)
        check(i, j, np.zeros((600, 500), bool))


@pytest.mark.parametrize("npages,nb", [(1, 70), (2, 70), (2, 700)])
def test_results_many_times_the_pool(device, rng, npages, nb):
    """Writers stop on a full pool and resume; B over several tiles (nb = 700):
    the staged records committed between tiles, stages spilling."""
    a, b = band_tables(rng, 90, nb, np.float32)
    mask = band_mask(a, b)
    assert mask.sum() > 40 * 4 * npages
    i, j = theta_join(a, b, BAND, device=device, page=4, npages=npages)
    check(i, j, mask)


def test_scan_tiny_device_buffer(device, rng):
    a, b = band_tables(rng, 300, 200, np.float32)
    mask = band_mask(a, b)
    i, j = theta_join(a, b, BAND, device=device, method="scan", max_device_bytes=64)
    check(i, j, mask)
    i2, j2 = theta_join(a, b, BAND, device=device, method="scan", max_device_bytes=1)
    check(i2, j2, mask)


@pytest.mark.parametrize("method", ["pages", "scan"])
def test_ordered_on_the_device(device, rng, method, monkeypatch):
    """The GPU plans' (i, j) order made on the device (forced here on any
    device): one round, rounds of a small pool, batches of a small buffer."""
    import dataclasses

    from clkernels.host.theta import plan as theta_plan
    from clkernels.host.theta import theta_join_events

    resolve = theta_plan.JoinPlan.resolve.__func__
    monkeypatch.setattr(theta_plan.JoinPlan, "resolve", classmethod(
        lambda cls, *a, **k: dataclasses.replace(resolve(cls, *a, **k), order_on_device=True)))
    a, b = band_tables(rng, 900, 700, np.float32)
    for kw in ({}, dict(npages=4) if method == "pages" else dict(max_device_bytes=40 * 3000)):
        (i, j), (ev, _) = theta_join_events(a, b, BAND, device=device, method=method, **kw)
        check(i, j, band_mask(a, b))
        assert "order" in ev                    # sorted on the device, not by the host's fallback
    i, j = theta_join(a, b, "a.t < b.t", device=device, method=method)          # dense: half of all pairs
    check(i, j, a["t"][:, None] < b["t"][None, :])


@pytest.mark.parametrize("method,grouped", [("pages", False), ("pages", True), ("scan", False)])
def test_parts_of_b_and_grouped_staging(device, rng, method, grouped, monkeypatch):
    """A short table A against B cut into parts (more writers than rows: the
    device's fill; forced here with 32-row tiles and a large ``min_writers``),
    the per-writer or the grouped stages (the 'pairs' kernel asked for them
    is the one that runs), a pool that starts at one page (the writers stop
    and resume from the redo list, whose work-groups mix parts) and batches
    of a small buffer: every pair once, in (i, j) order."""
    import dataclasses

    from clkernels.host.outputs import pairs as P
    from clkernels.host.theta import api as theta_api
    from clkernels.host.theta import plan as theta_plan

    resolve = theta_plan.JoinPlan.resolve.__func__
    monkeypatch.setattr(theta_plan.JoinPlan, "resolve", classmethod(
        lambda cls, *a, **k: dataclasses.replace(resolve(cls, *a, **dict(k, wg_size=32)), min_writers=10 ** 6)))
    monkeypatch.setattr(theta_api, "GROUPED_MIN", -1.0 if grouped else 1e30)
    ran = []
    join = theta_execute.join

    def spy(*args, **kw):
        if args[3] == "pairs":
            ran.append(bool(kw.get("grouped")))
        return join(*args, **kw)
    monkeypatch.setattr(theta_execute, "join", spy)
    a, b = band_tables(rng, 150, 1000, np.float32, keys=3)
    plan = theta_plan.JoinPlan.resolve(device, (("t", "float"), ("k", "int")), (("t", "float"), ("k", "int")), "1")
    parts, na_pad, plen = plan.layout(150, 1000)
    assert parts >= 6 and na_pad == 160 and plen % 32 == 0 and (parts - 1) * plen < 1000 <= parts * plen
    mask = band_mask(a, b)
    i, j = theta_join(a, b, BAND, device=device, method=method)
    check(i, j, mask)
    i, j = theta_join(a, b, "a.t < b.t", device=device, method=method)        # dense
    check(i, j, a["t"][:, None] < b["t"][None, :])
    if method == "pages":
        monkeypatch.setattr(P, "pool_pages", lambda spec, dev, estimate, writers, dense=False, ordered=False: 1)
        i, j = theta_join(a, b, BAND, device=device, method=method, page=4)
        assert set(ran) == {grouped}
    else:
        i, j = theta_join(a, b, BAND, device=device, method=method, max_device_bytes=24 * 500)
        assert not ran
    check(i, j, mask)


def test_pages_equals_scan(device, rng):
    a, b = band_tables(rng, 1200, 1000, np.float32, keys=3)
    out = [theta_join(a, b, BAND, device=device, method="pages"),
           theta_join(a, b, BAND, device=device, method="pages", page=1, npages=5000),
           theta_join(a, b, BAND, device=device, method="scan"),
           theta_join(a, b, BAND, device=device, method="scan", max_device_bytes=40000)]
    for i, j in out[1:]:
        np.testing.assert_array_equal(i, out[0][0])
        np.testing.assert_array_equal(j, out[0][1])
    check(*out[0], band_mask(a, b))


def test_structured_arrays(device, rng):
    a = np.zeros(800, dtype=[("id", np.int64), ("t", np.float32), ("k", np.int32)])
    b = np.zeros(600, dtype=[("t", np.float32), ("flag", np.uint32), ("k", np.int32)])
    for t in (a, b):
        t["t"] = rng.random(len(t)) * 100
        t["k"] = rng.integers(0, 5, len(t))
    i, j = theta_join(a, b, BAND, device=device)
    check(i, j, band_mask({"t": a["t"], "k": a["k"]}, {"t": b["t"], "k": b["k"]}))
    i2, j2 = theta_join(a, {"t": b["t"].copy(), "k": b["k"].copy()}, BAND, device=device)
    np.testing.assert_array_equal(i, i2)
    np.testing.assert_array_equal(j, j2)


def test_device_array_columns(device, rng):
    a, b = band_tables(rng, 500, 400, np.float32)
    q = device.queue
    da = {k: cla.to_device(q, v) for k, v in a.items()}
    i, j = theta_join(da, b, BAND, method="scan")
    check(i, j, band_mask(a, b))


def test_empty_tables(device, rng):
    a, b = band_tables(rng, 50, 40, np.float32)
    empty = {"t": np.empty(0, np.float32), "k": np.empty(0, np.int32)}
    for x, y in ((empty, b), (a, empty), (empty, empty)):
        for method in ("pages", "scan"):
            i, j = theta_join(x, y, BAND, device=device, method=method)
            assert i.dtype == np.int64 and j.dtype == np.int64 and len(i) == 0 and len(j) == 0
    e = np.zeros(0, dtype=[("t", np.float32), ("k", np.int32)])
    i, j = theta_join(e, b, BAND, device=device)
    assert len(i) == 0


def test_missing_column_before_any_build(device, rng, monkeypatch):
    a, b = band_tables(rng, 50, 40, np.float32)

    def no_build(*args, **kwargs):
        raise AssertionError("built a kernel")

    monkeypatch.setattr(theta_execute, "build", no_build)
    with pytest.raises(ValueError, match=r"b\.z.*'t', 'k'"):
        theta_join(a, b, "a.t < b.z", device=device)
    with pytest.raises(ValueError, match="a.kk"):
        theta_join(a, b, "a.kk == b.k", device=device)
    with pytest.raises(ValueError, match="no column"):       # checked before the device
        theta_join(a, b, "a.t < b.z", device=42)


def test_predicate_that_does_not_compile(device, rng):
    a, b = band_tables(rng, 50, 40, np.float32)
    for bad in ("a.t < < b.t", "a.t < b.t && no_such_function(a.k)", "a.t b.t"):
        with pytest.raises(BuildError) as e:
            theta_join(a, b, bad, device=device)
        assert bad in str(e.value)


def test_injection_rejected(device, rng, monkeypatch):
    a, b = band_tables(rng, 50, 40, np.float32)
    monkeypatch.setattr(theta_execute, "build", lambda *args, **kwargs: pytest.fail("built a kernel"))
    for bad in ("a.t < b.t; }", "a.t < b.t) { return 1; } int f(void) { return (1",
                "a.t < b.t\n#define X 1", "a.t < b.t /* x", "a.t < b.t // x", "a.t < \\\nb.t",
                "((__global uint *)0)[0] == 0", "((__local int *)0) == 0", "a.t < b.t}", "{a.t}",
                "((global uint *)0)[0] == 0", "__asm__(\"trap;\")",
                "((__attribute__((address_space(1))) uint *)0)[0] == 0"):
        with pytest.raises(ValueError):
            theta_join(a, b, bad, device=device)


def test_float64_needs_fp64(device, rng, monkeypatch):
    a, b = band_tables(rng, 50, 40, np.float64)
    monkeypatch.setattr(device, "fp64", False)
    with pytest.raises(clkernels.DeviceCapabilityError, match="a.t"):
        theta_join(a, b, BAND, device=device)


def test_bad_tables(device, rng):
    a, b = band_tables(rng, 50, 40, np.float32)
    with pytest.raises(TypeError, match="flag"):
        theta_join({**a, "flag": np.ones(50, bool)}, b, BAND, device=device)
    with pytest.raises(TypeError, match="small"):
        theta_join(a, {**b, "small": np.ones(40, np.int16)}, BAND, device=device)
    with pytest.raises(ValueError, match="unequal"):
        theta_join({**a, "x": np.ones(49, np.int32)}, b, BAND, device=device)
    with pytest.raises(ValueError, match="1-D"):
        theta_join({"t": np.ones((5, 2), np.float32)}, b, "a.t < b.t", device=device)
    with pytest.raises(TypeError):
        theta_join([1, 2, 3], b, BAND, device=device)
    with pytest.raises(ValueError):
        theta_join(a, b, BAND, device=device, method="hash")
    with pytest.raises(TypeError):
        theta_join(a, b, 5, device=device)


def test_big_endian_and_strided_columns(device, rng):
    a, b = band_tables(rng, 300, 260, np.float32)
    mask = band_mask(a, b)
    a2 = {"t": a["t"].astype(">f4"), "k": np.repeat(a["k"], 2)[::2]}
    i, j = theta_join(a2, b, BAND, device=device)
    check(i, j, mask)


def test_public_export():
    assert "theta_join" in clkernels.__all__ and clkernels.theta_join is theta_join


def test_strided_device_column_refused(device):
    """A strided or offset view of a device array is refused, not read as if
    contiguous."""
    d = cla.to_device(device.queue, np.arange(8, dtype=np.int32))
    b = {"y": np.array([4], np.int32)}
    for view in (d[::2], d[1:]):
        with pytest.raises(ValueError, match="strided or offset"):
            clkernels.theta_join({"x": view}, b, "a.x == b.y", device=device)
    i, j = clkernels.theta_join({"x": cla.to_device(device.queue, np.arange(8, dtype=np.int32)[::2].copy())}, b,
                                "a.x == b.y", device=device)
    assert i.tolist() == [2] and j.tolist() == [0]
