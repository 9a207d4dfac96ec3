"""clkernels.segmented_sort against numpy per-segment sorting."""

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels
from clkernels.host.segsort import api as S
from clkernels.host.core.device import Device

KEY_DTYPES = [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64]


# ---------------------------------------------------------------- reference
def reference_order(keys, offsets, descending=False):
    """Stable per-segment order (numpy's float order: NaN last either way,
    -0.0 == 0.0), computed from ranks (np.unique), not from bit tricks."""
    n = keys.size
    seg = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    isnan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(n, bool)
    _, rank = np.unique(keys, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    if descending:
        rank = -rank
    return np.lexsort((np.arange(n), rank, isnan, seg))


def make_offsets(lens):
    off = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return off


def random_keys(rng, dtype, n, dup=False):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        k = rng.standard_normal(n).astype(dt) * dt.type(1000)
        if dup:
            k = np.round(k / 100).astype(dt)
        specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf,
                             np.finfo(dt).max, -np.finfo(dt).max, np.finfo(dt).tiny], dt)
        pos = rng.integers(0, n, max(1, n // 20)) if n else np.zeros(0, int)
        k[pos] = specials[rng.integers(0, len(specials), pos.size)]
        # a NaN with a payload and the sign bit set
        if n:
            k.view(_uint(dt))[rng.integers(0, n)] = (~_uint(dt)(0)) ^ _uint(dt)(1)
        return k
    info = np.iinfo(dt)
    if dup:
        k = rng.integers(-3 if dt.kind == "i" else 0, 4, n).astype(dt)
    else:
        k = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    pos = rng.integers(0, n, max(1, n // 20)) if n else np.zeros(0, int)
    k[pos] = np.array([info.min, info.max, 0], dt)[rng.integers(0, 3, pos.size)]
    return k


def _uint(dt):
    return np.uint32 if np.dtype(dt).itemsize == 4 else np.uint64


def check(keys, offsets, values, got, descending, stable):
    order = reference_order(keys, offsets, descending)
    rk = keys[order]
    gk = got[0] if values is not None else got
    assert gk.dtype == keys.dtype and gk.shape == keys.shape
    if stable:
        # exact, bits included (-0.0 vs 0.0 and NaN payloads stay in input order)
        np.testing.assert_array_equal(gk.view(_uint(keys.dtype)), rk.view(_uint(keys.dtype)))
        if values is not None:
            np.testing.assert_array_equal(got[1], values[order])
        return
    np.testing.assert_array_equal(gk, rk)     # NaN == NaN here; -0.0 == 0.0
    if values is not None:
        gv = got[1]
        assert gv.dtype == values.dtype
        seg = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        kb = gk.view(_uint(keys.dtype))
        # multiset of (key bits, value) per segment
        a = np.lexsort((gv.view(_uint(values.dtype)), kb, seg))
        rkb = keys.view(_uint(keys.dtype))
        b = np.lexsort((values.view(_uint(values.dtype)), rkb, seg))
        np.testing.assert_array_equal(kb[a], rkb[b])
        np.testing.assert_array_equal(gv[a].view(_uint(values.dtype)), values[b].view(_uint(values.dtype)))


EDGE_LENS = [0, 1, 2, 31, 32, 33, 511, 512, 513, 0, 3, 1023, 1024, 1025, 2049, 4095, 4096, 4097, 9000]


def random_case(rng, lens, kdt):
    """Offsets of ``lens``, random keys of dtype ``kdt``, values 0..n-1 (uint32)."""
    off = make_offsets(lens)
    n = int(off[-1])
    return off, random_keys(rng, kdt, n), np.arange(n, dtype=np.uint32)


def mixed_lengths(rng, nrand=300):
    lens = list(EDGE_LENS) + list(rng.integers(0, 700, nrand))
    rng.shuffle(lens)
    return np.array(lens, np.int64)


# -------------------------------------------------------------------- tests
@pytest.mark.parametrize("kdt", KEY_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_key_types(device, kdt, descending, rng):
    lens = mixed_lengths(rng, 200)
    off = make_offsets(lens)
    keys = random_keys(rng, kdt, int(off[-1]), dup=bool(rng.integers(0, 2)))
    vdt = [np.uint32, np.float32, np.int64, np.float64][rng.integers(0, 4)]
    values = rng.permutation(int(off[-1])).astype(vdt)
    got = clkernels.segmented_sort(keys, off, values, descending=descending, stable=True, device=device)
    check(keys, off, values, got, descending, True)
    got = clkernels.segmented_sort(keys, off, values, descending=descending, device=device)
    check(keys, off, values, got, descending, False)
    got = clkernels.segmented_sort(keys, off, descending=descending, device=device)
    check(keys, off, None, got, descending, False)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5])
def test_powerlaw(device, alpha, rng):
    lens = S.powerlaw_lengths(rng, 60000, alpha, 2000)
    off = make_offsets(lens)
    n = int(off[-1])
    keys = rng.integers(0, 2**32, n, dtype=np.uint32)
    values = np.arange(n, dtype=np.uint32)
    got = clkernels.segmented_sort(keys, off, values, device=device)
    check(keys, off, values, got, False, True)


def test_duplicates_only(device, rng):
    lens = mixed_lengths(rng, 50)
    off = make_offsets(lens)
    n = int(off[-1])
    keys = np.full(n, 7, np.int32)
    values = np.arange(n, dtype=np.int32)
    got = clkernels.segmented_sort(keys, off, values, stable=True, device=device)
    check(keys, off, values, got, False, True)
    keys = np.full(n, np.nan, np.float32)
    got = clkernels.segmented_sort(keys, off, values, descending=True, stable=True, device=device)
    check(keys, off, values, got, True, True)


def test_long_segments(device, rng):
    """Grid bin: a few long segments (tiles + global merge rounds)."""
    lens = np.array([100_000, 5, 70_001, 0, 40_000, 8193, 12_288], np.int64)
    off = make_offsets(lens)
    n = int(off[-1])
    keys = rng.standard_normal(n).astype(np.float32)
    keys[rng.integers(0, n, 100)] = np.nan
    values = np.arange(n, dtype=np.uint64)
    got = clkernels.segmented_sort(keys, off, values, stable=True, device=device)
    check(keys, off, values, got, False, True)
    k64 = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    got = clkernels.segmented_sort(k64, off, values, descending=True, stable=True, device=device)
    check(k64, off, values, got, True, True)


def test_one_huge_segment(device, rng):
    """One segment of 2M: a plain sort (tiles, then ~9 global merge rounds)."""
    n = 2_000_000
    keys = rng.integers(0, 2**32, n, dtype=np.uint32)
    values = rng.integers(0, 2**32, n, dtype=np.uint32)
    off = np.array([0, n], np.int64)
    k, v = clkernels.segmented_sort(keys, off, values, device=device)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(k, keys[order])
    np.testing.assert_array_equal(v, values[order])


def test_device_arrays(device, rng):
    q = device.queue
    lens = mixed_lengths(rng, 100)
    off = make_offsets(lens)
    n = int(off[-1])
    keys = rng.integers(-1000, 1000, n).astype(np.int64)
    values = np.arange(n, dtype=np.float32)
    dk, dv, do = (cla.to_device(q, x) for x in (keys, values, off.astype(np.int32)))
    ok, ov = clkernels.segmented_sort(dk, do, dv, stable=True)
    assert isinstance(ok, cla.Array) and isinstance(ov, cla.Array)
    check(keys, off, values, (ok.get(), ov.get()), False, True)
    ok = clkernels.segmented_sort(dk, do, descending=True, device=device)
    assert isinstance(ok, cla.Array)
    check(keys, off, None, ok.get(), True, False)
    np.testing.assert_array_equal(dk.get(), keys)      # inputs untouched
    # a sliced device array (non-zero offset into its buffer)
    m = n - 5
    ok = clkernels.segmented_sort(dk[5:], cla.to_device(q, np.array([0, m // 3, m], np.int64)))
    check(keys[5:], np.array([0, m // 3, m]), None, ok.get(), False, True)


@pytest.mark.parametrize("variant", range(4))  # 1: shuffles (exchanges, transpose); 0, 2: local memory
def test_parameter_variants(device, variant, rng):
    """Non-default bindings, write modes, block sizes, merge widths and small-sort
    ranges (0: every reg bin launched from the bin counts) give the same sort."""
    base = S.default_params(device, {"dtype": "uint32"})
    sg = S._sg(device)
    emulated = device.sg_backend == "local"    # barrier-heavy code compiles slowly on PoCL
    alt = [
        {**{f"k{P}": min(P, 16) for P in S.REG_SIZES if P <= base["reg_max"] and P // min(P, 16) <= sg},
         "block_k": 4, "merge_k": 4, "block_max": 2048, "reg_write": "striped", "small_max": 0},
        # sub-group shuffles (emulated by barriers on PoCL: small networks only, to keep the
        # compile time of the barrier-heavy code down there)
        {**{f"k{P}": max(1, P // sg) for P in S.REG_SIZES if P <= 64}, "reg_max": 64,
         "block_k": 2, "block_max": 1024, "merge_k": 16, "merge_wg": 64, "reg_wg": 64,
         "reg_write": "transpose", "xchg": "shuffle", "small_max": 4 if emulated else 16},
        {**{f"k{P}": min(P, 2) if P < 64 else P // sg for P in S.REG_SIZES if P <= base["reg_max"]},
         "reg_max": 256 if sg >= 16 else base["reg_max"], "block_max": 4096, "reg_wg": 256,
         "reg_write": "striped", "xchg": "scratch", "small_max": 0 if sg < 16 else 16 if emulated else 256},
        # in-register transpose with k > m, k == m and k < m (shuffles only in the write-out)
        {"k1": 1, "k2": 2, "k4": 2, "k8": 4, "k16": 4, "k32": 4, "k64": 16, "reg_max": 64,
         "reg_write": "transpose", "xchg": "scratch", "block_max": 1024, "small_max": 16},
    ][variant]
    params = {**base, **alt}
    for P in S.REG_SIZES:
        if P > params["reg_max"]:
            params.pop(f"k{P}", None)
    assert S._restrict(params, device), params
    lens = mixed_lengths(rng, 150)
    off = make_offsets(lens)
    n = int(off[-1])
    for kdt in ((np.float64,), (np.int32,), (np.float32,), (np.uint64,))[variant]:
        keys = random_keys(rng, kdt, n, dup=True)
        values = np.arange(n, dtype=np.uint32)
        got = S.run(keys, off, values, device=device, params=params)
        check(keys, off, values, got, False, True)


def test_local_memory_fit(device, rng, monkeypatch):
    """A configuration whose reg-sort arrays fit 32-bit keys but not 64-bit ones
    (k * reg_wg 16-byte elements over 48 KiB) runs with fewer work-items."""
    base = S.default_params(device, {"dtype": "uint64"})
    params = {**base, "reg_wg": 256, "reg_max": 64, "k64": 16, "small_max": 0,
              "reg_write": "striped", "block_max": 1024}
    for P in S.REG_SIZES:
        if P > 64:
            params.pop(f"k{P}", None)
    assume = 48 * 1024
    monkeypatch.setattr(device, "local_mem_size", min(device.local_mem_size, assume))
    assert S._reg_lmem(params, [64], 8) <= assume < S._reg_lmem(params, [64], 16)
    plan = S._plan(device, np.dtype(np.uint64), 32, 1, params)
    assert plan.reg_wg < 256 and S._reg_lmem(dict(params, reg_wg=plan.reg_wg), [64], 16) <= assume
    off, keys, values = random_case(rng, rng.integers(33, 65, 3000), np.uint64)
    got = S.run(keys, off, values, device=device, params=params)
    check(keys, off, values, got, False, True)


def test_sg_backends(device, sg_backend, rng):
    dev = Device(device.cl_device, sg_backend=sg_backend)
    off, keys, values = random_case(rng, mixed_lengths(rng, 100), np.float64)
    got = clkernels.segmented_sort(keys, off, values, descending=True, device=dev)
    check(keys, off, values, got, True, True)


def test_empty_and_trivial(device):
    k = clkernels.segmented_sort(np.zeros(0, np.float32), np.array([0]), device=device)
    assert k.size == 0 and k.dtype == np.float32
    k, v = clkernels.segmented_sort(np.array([3, 1, 2], np.uint32), np.array([0, 3]),
                                    np.array([0, 1, 2], np.int32), device=device)
    assert k.tolist() == [1, 2, 3] and v.tolist() == [1, 2, 0]
    k = clkernels.segmented_sort(np.array([3, 1, 2], np.uint32), np.array([0, 0, 1, 1, 3, 3]),
                                 device=device)
    assert k.tolist() == [3, 1, 2]


def test_bad_inputs(device):
    k = np.arange(10, dtype=np.uint32)
    ss = clkernels.segmented_sort
    with pytest.raises(ValueError, match="non-decreasing"):
        ss(k, np.array([0, 5, 3, 10]), device=device)
    with pytest.raises(ValueError, match="offsets\\[-1\\]"):
        ss(k, np.array([0, 5, 11]), device=device)
    with pytest.raises(ValueError, match="offsets\\[0\\]"):
        ss(k, np.array([1, 5, 10]), device=device)
    with pytest.raises(ValueError, match="at least one"):
        ss(k, np.array([], np.int64), device=device)
    with pytest.raises(ValueError, match="values has 9"):
        ss(k, np.array([0, 10]), np.arange(9, dtype=np.uint32), device=device)
    with pytest.raises(TypeError, match="keys dtype"):
        ss(k.astype(np.float16), np.array([0, 10]), device=device)
    with pytest.raises(TypeError, match="keys dtype"):
        ss(k.astype(np.uint8), np.array([0, 10]), device=device)
    with pytest.raises(TypeError, match="4- or 8-byte"):
        ss(k, np.array([0, 10]), np.arange(10, dtype=np.uint16), device=device)
    with pytest.raises(TypeError, match="integer"):
        ss(k, np.array([0.0, 10.0]), device=device)
    with pytest.raises(ValueError, match="one-dimensional"):
        ss(k.reshape(2, 5), np.array([0, 10]), device=device)
    with pytest.raises(TypeError):
        ss("abc", np.array([0, 10]), device=device)
    # device offsets are checked on the device, by the histogram kernel (the small
    # sort, or bin_hist without one), before the longer bins are sorted
    q = device.queue
    dk = cla.to_device(q, k)
    no_small = dict(S.default_params(device, {"dtype": "float64"}), small_max=0)
    for bad, msg in (([0, 5, 3, 10], "non-decreasing"), ([0, 5, 12], "non-decreasing|end at"),
                     ([2, 5, 10], "start at 0"), ([0, 5, 9], "end at")):
        with pytest.raises(ValueError, match=msg):
            ss(dk, cla.to_device(q, np.array(bad, np.int64)), device=device)
        with pytest.raises(ValueError, match=msg):
            S.run(dk, cla.to_device(q, np.array(bad, np.int64)), device=device, params=no_small)


def test_tunable(device):
    """The registered Tunable resolves to valid defaults, names every kernel it
    launches, and its launch gives the sorted output."""
    from clkernels.host.core.tuning import REGISTRY

    t = REGISTRY["segsort"]
    params, source = t.resolve(device, {"size": 1 << 12, "dtype": "uint32", "dims": 32})
    assert t.restrict(params, device)
    assert all(k in t.space or k in params for k in t.space)
    names = {k.function_name for k, *_ in t.kernels(device, params)}
    want = {"bin_hist", "bin_scatter", "block_sort", "tile_sort", "grid_merge"}
    want |= {"smallsort"} if params["small_max"] else set()
    want |= {"regsort"} if params["reg_max"] > params["small_max"] else set()
    assert want <= names
    prob = t.problems(True)[0]
    state = t.setup(device, {**prob, "size": 1 << 14})
    ev, out = t.launch(device, params, state)
    k, v = out()          # the output is read back only when asked for (Tunable contract)
    off, keys = state["off"].get(), state["keys"].get()
    order = reference_order(keys, off)
    np.testing.assert_array_equal(k, keys[order])
    np.testing.assert_array_equal(v, state["vals"].get()[order])
