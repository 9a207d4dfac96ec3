"""Sub-group primitives and atomics of common.cl.mako against numpy."""

import numpy as np
import pyopencl.array as cla
import pytest

from clkernels.host.core import build


def _sg_size(device, backend, wg):
    s = device.sg_size_for(backend, wg)
    return s


@pytest.mark.parametrize("wg", [32, 64, 256])
def test_subgroup_primitives(device, sg_backend, wg, rng):
    if wg > device.max_work_group_size:
        pytest.skip("work-group too large for device")
    q = device.queue
    n = wg * 13
    a = rng.integers(0, 2**32, n, dtype=np.uint32)
    lanes = rng.integers(0, 2**32, n, dtype=np.uint32)
    masks = rng.integers(0, 2**32, n, dtype=np.uint32)
    f = rng.standard_normal(n).astype(np.float32)
    w = rng.integers(0, 2**63, n, dtype=np.uint64) >> np.uint64(4)
    prg = build.build(device, "selftest.cl.mako", "subgroups", dict(wg_size=wg, sg_backend=sg_backend))
    ins = [cla.to_device(q, x) for x in (a, lanes, masks, f, w)]
    outs = {k: cla.empty(q, n, dt) for k, dt in [
        ("shuffle", np.uint32), ("xor", np.uint32), ("bcast", np.uint32), ("sum", np.uint32),
        ("fsum", np.float32), ("wsum", np.uint64), ("wshuffle", np.uint64), ("max", np.uint32),
        ("ballot", np.uint32), ("lane", np.uint32), ("size", np.uint32), ("scan", np.uint32)]}
    for o in outs.values():
        o.fill(0xAB)  # poison: an unwritten lane fails
    prg.sg_check(q, (n,), (wg,), *[x.data for x in ins], *[o.data for o in outs.values()])
    got = {k: o.get() for k, o in outs.items()}

    sg = int(got["size"][0])
    expect_sg = _sg_size(device, sg_backend, wg)
    if expect_sg is not None:
        assert sg == expect_sg
    assert (got["size"] == sg).all() and wg % sg == 0
    lid = np.arange(n) % wg
    base = (np.arange(n) // sg) * sg            # first global index of each sub-group
    lane = lid % sg
    sgid = lid // sg
    np.testing.assert_array_equal(got["lane"], lane)
    np.testing.assert_array_equal(got["shuffle"], a[base + lanes % sg])
    np.testing.assert_array_equal(got["xor"], a[base + (lane ^ (masks % sg))])
    np.testing.assert_array_equal(got["bcast"], a[base + (sgid * 7 + 3) % sg])
    np.testing.assert_array_equal(got["wshuffle"], w[base + lanes % sg])
    groups = n // sg
    sums = a.reshape(groups, sg).astype(np.uint64).sum(1) % 2**32
    np.testing.assert_array_equal(got["sum"], np.repeat(sums, sg).astype(np.uint32))
    np.testing.assert_array_equal(got["wsum"], np.repeat(w.reshape(groups, sg).sum(1), sg))
    np.testing.assert_array_equal(got["max"], np.repeat(a.reshape(groups, sg).max(1), sg))
    scans = np.cumsum(a.reshape(groups, sg).astype(np.uint64), axis=1) % 2**32    # inclusive
    np.testing.assert_array_equal(got["scan"], scans.reshape(-1).astype(np.uint32))
    fs = f.reshape(groups, sg).astype(np.float64).sum(1)
    np.testing.assert_allclose(got["fsum"], np.repeat(fs, sg), rtol=1e-5, atol=1e-4 * np.sqrt(sg))
    # ballot: bits of lanes 0..31 (every lane where the sub-group is <= 32 wide)
    low = (a & 1).reshape(groups, sg)[:, :32].astype(np.uint64)
    bits = (low << np.arange(low.shape[1], dtype=np.uint64)).sum(1)
    np.testing.assert_array_equal(got["ballot"], np.repeat(bits, sg).astype(np.uint32))
    np.testing.assert_array_equal(np.array([bin(int(x)).count("1") for x in got["ballot"][::sg]]),
                                  low.sum(1))


@pytest.mark.parametrize("int64_atomics", [True, False], ids=["int64", "two-word"])
def test_atomics_under_contention(device, int64_atomics, rng):
    if int64_atomics and not device.int64_atomics:
        pytest.skip("device lacks cl_khr_int64_base_atomics")
    q = device.queue
    wg = min(256, device.max_work_group_size)
    n = wg * 64 - 17                 # ragged last group
    a = rng.integers(0, 2**20, n, dtype=np.uint32)
    w = rng.integers(2**31, 2**33, n, dtype=np.uint64)   # total passes 2^32 many times
    f = rng.integers(-64, 64, n).astype(np.float32)   # small integers: float sum is exact
    ext = device.int64_extended_atomics and int64_atomics
    params = dict(wg_size=wg, int64_atomics=int64_atomics, int64_extended_atomics=ext)
    prg = build.build(device, "selftest.cl.mako", "atomics", params)
    g32 = cla.zeros(q, 4, np.uint32)
    g64 = cla.zeros(q, 2, np.uint64)
    gf = cla.zeros(q, 1, np.float32)
    extra = []
    if ext:
        g64max = cla.zeros(q, 1, np.uint64)
        extra = [g64max.data]
    da, dw, df = (cla.to_device(q, x) for x in (a, w, f))
    gsize = -(-n // wg) * wg
    prg.atomics_check(q, (gsize,), (wg,), da.data, dw.data, df.data, np.uint32(n),
                      g32.data, g64.data, gf.data, *extra)
    r32, r64 = g32.get(), g64.get()
    total32 = int(a.astype(np.uint64).sum()) % 2**32
    assert int(r32[0]) == total32
    assert int(r32[1]) == n
    assert int(r32[2]) == int(a.max())
    assert int(r32[3]) == total32
    total64 = int(w.sum())
    assert total64 > 2**32
    assert int(r64[0]) == total64
    assert int(r64[1]) == total64
    assert float(gf.get()[0]) == float(f.astype(np.float64).sum())
    if ext:
        assert int(g64max.get()[0]) == int(w.max())


@pytest.mark.parametrize("nwords", [1, 63, 64, 65, 5000])
def test_fill_words(device, nwords):
    """fill_words sets exactly the first nwords words, to any 32-bit value."""
    from clkernels.host.core.transfer import fill_words

    q = device.queue
    for value in (0, 0xFFFFFFFF, 0x12345678):
        a = cla.to_device(q, np.full(nwords + 3, 7, np.uint32))
        fill_words(q, a.data, nwords, value)
        got = a.get()
        assert (got[:nwords] == value).all() and (got[nwords:] == 7).all()


def test_kept_parameters(device):
    """kept: one device copy per queue and contents (a repeated call uploads nothing),
    the right bytes, other contents or dtypes their own copy, at most KEPT_MAX kept."""
    import pyopencl as cl

    from clkernels.host.core import transfer

    q = device.queue
    a = np.arange(7, dtype=np.float64) * 0.5
    k1 = transfer.kept(q, a)
    assert transfer.kept(q, a.copy()) is k1
    np.testing.assert_array_equal(k1.get(), a)
    assert transfer.kept(q, a.astype(np.float32)) is not k1
    b = a.copy()
    b[3] += 1e-12
    kb = transfer.kept(q, b)
    assert kb is not k1 and kb.get()[3] == b[3]
    q2 = cl.CommandQueue(device.context, device.cl_device)
    assert transfer.kept(q2, a) is not k1
    for i in range(transfer.KEPT_MAX + 5):
        transfer.kept(q, np.array([i], np.uint32))
    assert len(transfer._kept) <= transfer.KEPT_MAX


def test_runs_longest(device, rng):
    """runs: the runs of sorted keys, and the longest one's length on the device."""
    from clkernels.host.primitives import runs

    q = device.queue
    for n, hi in ((1, 3), (1000, 40), (70000, 9)):
        keys = np.sort(rng.integers(0, hi, n).astype(np.uint64))
        r, _ = runs(q, cla.to_device(q, keys), n)
        vals, first, counts = np.unique(keys, return_index=True, return_counts=True)
        assert r.count == len(vals)
        np.testing.assert_array_equal(r.keys.get(), vals)
        np.testing.assert_array_equal(r.start.get(), first)
        np.testing.assert_array_equal(r.length.get(), counts)
        assert r.longest_length(q) == counts.max()


def test_image_count(device, rng):
    """clk_image_count (the pair counts' minimum image without a division) is
    numpy's rint(d / L) for every double, at and a few ulps around the
    half-integers where a product with 1 / L and the division can round apart,
    at huge and tiny ratios, inf and NaN."""
    if not device.fp64:
        pytest.skip("needs cl_khr_fp64")
    L = np.concatenate([rng.uniform(0.1, 10.0, 3000), 10.0 ** rng.uniform(-300, 300, 1000),
                        [0.7, 1.0 / 3.0, 1e-300, 3e300, 1.7e308, 2.0 ** 1023 * 1.5, 1e-308, 5e-310]])
    k = rng.integers(-5, 5, L.size) + 0.5                   # half-integers
    with np.errstate(over="ignore", invalid="ignore"):       # past 1e308: inf ratios, inf - inf
        d = k * L
        ulps = rng.integers(-6, 7, (6, L.size))
        d = np.concatenate([d + u * np.spacing(d) for u in ulps]
                           + [d, rng.uniform(-3, 3, L.size) * L, L * 2.0 ** 60, L * 2.0 ** -80])
    L = np.tile(L, d.size // L.size)
    d = np.concatenate([d, [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-320]])
    L = np.concatenate([L, [1.0, 1.0, 1.0, 1e-300, 1.0, 1.0]])
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.rint(d / L)
    q = device.queue
    prg = build.build(device, "selftest.cl.mako", "image_count", {})
    out = cla.empty(q, d.size, np.float64)
    prg.image_count_check(q, (d.size,), None, cla.to_device(q, d).data, cla.to_device(q, L).data,
                          np.uint32(d.size), out.data)
    np.testing.assert_array_equal(out.get(), want)
