"""clkernels.segmented_sort and the device-array op segsort.sort against numpy
per-segment sorting; plans, their validation and the tuning cache."""

import dataclasses
import warnings

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools as cl_tools
import pytest

import clkernels
from clkernels.autotune import cache
from clkernels.host import segsort as S
from clkernels.host.core import transfer, tuning
from clkernels.host.core.device import Device
from clkernels.host.core.launch import Events
from clkernels.host.segsort.tune import powerlaw_lengths

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


def sort_on_device(device, keys, off, values, **overrides):
    """segsort.sort on device copies of numpy inputs; numpy results."""
    q = device.queue
    (k, v), events = S.sort(device, *(cla.to_device(q, x) for x in (keys, off, values)), **overrides)
    assert isinstance(events, Events)
    return k.get(), v.get()


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


@pytest.mark.parametrize("kdt", KEY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_keys_only_bare(device, kdt, rng):
    """Keys without values sort as bare keys (no index): every bin, the grid
    bin included, with keys at the extremes that tie with the padding (the
    maximum mapped key) in both orders, bit for bit; float keys with -0.0 and
    NaN payloads put back in input order, and without them (no fix-up
    needed); key/value sorts keep (key, index) elements."""
    dt = np.dtype(kdt)
    assert S.Plan.resolve(device, {"dtype": dt.name, "dims": 0}).bare
    assert not S.Plan.resolve(device, {"dtype": dt.name, "dims": 32}).bare
    lens = np.concatenate([mixed_lengths(rng, 100), [3000, 9000, 20_000]])
    off = make_offsets(lens)
    n = int(off[-1])
    if dt.kind == "f":
        clean = rng.standard_normal(n).astype(dt)
        clean[rng.integers(0, n, n // 10)] = np.array([0.0, np.nan, np.inf, -np.inf], dt)[rng.integers(0, 4, n // 10)]
        keys = random_keys(rng, dt, n, dup=True)                  # -0.0, NaN payloads, ties
        u = keys.view(_uint(dt))
        u[rng.integers(0, n, n // 8)] = np.array([0.0, -0.0], dt).view(_uint(dt))[rng.integers(0, 2, n // 8)]
        # one computed NaN (x86's 0/0: the sign bit set) in the longest segment, one -0.0 in a short one
        one = clean.copy()
        one.view(_uint(dt))[int(off[-2]) + 5] = np.array([np.nan], dt).view(_uint(dt))[0] | (_uint(dt)(1) << _uint(dt)(dt.itemsize * 8 - 1))
        one[int(off[np.argmax(lens == 3)]) + 1] = -0.0
        cases = [clean, keys, one]
    else:
        info = np.iinfo(dt)
        keys = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        pos = rng.integers(0, n, n // 3)
        keys[pos] = np.array([info.min, info.max, info.max - 1, 0], dt)[rng.integers(0, 4, pos.size)]
        cases = [keys]
    for k in cases:
        for descending in (False, True):
            got = clkernels.segmented_sort(k, off, descending=descending, device=device)
            check(k, off, None, got, descending, True)
            dk, do = cla.to_device(device.queue, k), cla.to_device(device.queue, off)
            out, ev = S.sort(device, dk, do, descending=descending, sync=False)
            ev.wait()
            check(k, off, None, out.get(), descending, True)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5])
def test_powerlaw(device, alpha, rng):
    lens = powerlaw_lengths(rng, 60000, alpha, 2000)
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


@pytest.mark.slow
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
    base = S.TUNABLE.default(device, {"dtype": "uint32"})
    sg = S.Plan.resolve(device, {"dtype": "uint32"}).sg
    emulated = device.sg_backend == "local"    # barrier-heavy code compiles slowly on PoCL
    alt = [
        {**{f"k{P}": min(P, 16) for P in S.REG_SIZES if P <= base["reg_max"] and P // min(P, 16) <= sg},
         "block_k": 4, "merge_k": 4, "block_max": 2048, "reg_write": "striped", "small_max": 0},
        # sub-group shuffles (emulated by barriers on PoCL: small networks only, to keep the
        # compile time of the barrier-heavy code down there)
        {**{f"k{P}": max(1, P // sg) for P in S.REG_SIZES if P <= 64}, "reg_max": 64,
         "block_k": 2, "block_max": 1024, "merge_k": 16, "merge_wg": 64, "reg_wg": 64,
         "reg_write": "transpose", "xchg": "shuffle", "small_max": 4 if emulated else 16},
        {**{f"k{P}": max(min(P, 2), P // sg) if P < 64 else P // sg for P in S.REG_SIZES if P <= base["reg_max"]},
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
    assert S.TUNABLE.restrict(params, device), params
    lens = mixed_lengths(rng, 150)
    off = make_offsets(lens)
    n = int(off[-1])
    for kdt in ((np.float64,), (np.int32,), (np.float32,), (np.uint64,))[variant]:
        keys = random_keys(rng, kdt, n, dup=True)
        values = np.arange(n, dtype=np.uint32)
        plan = S.Plan.resolve(device, {"size": n, "dtype": np.dtype(kdt).name}, **params)   # validated
        assert plan.source == "forced" and plan.reg_write == params["reg_write"]
        got = sort_on_device(device, keys, off, values, **params)
        check(keys, off, values, got, False, True)


def test_local_memory_fit(device, rng, monkeypatch):
    """A configuration whose reg-sort arrays fit 32-bit keys but not 64-bit ones
    (k * reg_wg 16-byte elements over 48 KiB) runs with fewer work-items."""
    base = S.TUNABLE.default(device, {"dtype": "uint64"})
    params = {**base, "reg_wg": 256, "reg_max": 64, "k64": 16, "small_max": 0,
              "reg_write": "striped", "block_max": 1024}
    for P in S.REG_SIZES:
        if P > 64:
            params.pop(f"k{P}", None)
    assume = 48 * 1024
    monkeypatch.setattr(device, "local_mem_size", min(device.local_mem_size, assume))
    p32 = S.Plan.resolve(device, {"dtype": "uint32"}, **params)
    p64 = S.Plan.resolve(device, {"dtype": "uint64"}, **params)
    assert p32.reg_wg == 256 and p32.reg_local_bytes() <= assume
    assert dataclasses.replace(p64, reg_wg=256).reg_local_bytes() > assume
    assert p64.reg_wg < 256 and p64.reg_local_bytes() <= assume
    off, keys, values = random_case(rng, rng.integers(33, 65, 3000), np.uint64)
    got = sort_on_device(device, keys, off, values, **params)
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
    # middle entries out of range, negative, or past int64 as uint64: refused on the host
    for bad in (np.array([0, 2**40, 10]), np.array([0, -3, 10], np.int32),
                np.array([0, 2**63 + 5, 10], np.uint64), np.array([0, 4, 3, 3, 10], np.int16)):
        with pytest.raises(ValueError, match="non-decreasing"):
            ss(k, bad, device=device)
    big = np.array([0, 3, 3, 10], ">i8")                      # non-native order: converted, not its bits
    np.testing.assert_array_equal(ss(k[::-1].copy(), big, device=device),
                                  np.concatenate([np.sort(k[::-1][:3]), np.sort(k[::-1][3:])]))
    with pytest.raises(ValueError, match="at least one"):
        ss(k, np.array([], np.int64), device=device)
    with pytest.raises(ValueError, match="at least one"):               # [] is a float64 array to numpy
        ss(k, [], device=device)
    with pytest.raises(TypeError, match="values must be numbers"):      # object: 8 bytes, not numbers
        ss(k, np.array([0, 10]), np.array([None] * 10, object), device=device)
    with pytest.raises(ValueError, match="values has 9"):
        ss(k, np.array([0, 10]), np.arange(9, dtype=np.uint32), device=device)
    with pytest.raises(TypeError, match="keys dtype"):       # float16/8/16-bit keys: test_segsort_forms
        ss(k.astype(np.complex64), np.array([0, 10]), device=device)
    with pytest.raises(TypeError, match="keys dtype"):
        ss(k.astype(np.bool_), np.array([0, 10]), device=device)
    with pytest.raises(TypeError, match="1 to 16 bytes"):
        ss(k, np.array([0, 10]), np.zeros(10, "V17"), device=device)
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
    no_small = {"small_max": 0}
    for bad, msg in (([0, 5, 3, 10], "non-decreasing"), ([0, 5, 12], "non-decreasing|end at"),
                     ([2, 5, 10], "start at 0"), ([0, 5, 9], "end at")):
        with pytest.raises(ValueError, match=msg):
            ss(dk, cla.to_device(q, np.array(bad, np.int64)), device=device)
        with pytest.raises(ValueError, match=msg):
            S.sort(device, dk, cla.to_device(q, np.array(bad, np.int64)), **no_small)
    # an entry out of range is that alone, not also a segment of 2**32 or more
    with pytest.raises(ValueError, match="non-decreasing") as e:
        ss(dk, cla.to_device(q, np.array([0, 2**40, 10], np.int64)), device=device)
    assert "2**32" not in str(e.value)


def test_tunable(device):
    """The registered Tunable resolves to valid defaults, names every kernel it
    launches, and its launch gives the sorted output."""
    tuning.load_families(benchmarks=True)      # the tuner's side (tune.py)
    t = tuning.REGISTRY["segsort"]
    assert t is S.TUNABLE and t.has_benchmark
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
    assert isinstance(ev, Events) and ev.seconds() > 0
    k, v = out()          # the output is read back only when asked for (Tunable contract)
    off, keys = state["off"].get(), state["keys"].get()
    order = reference_order(keys, off)
    np.testing.assert_array_equal(k, keys[order])
    np.testing.assert_array_equal(v, state["vals"].get()[order])


BAD_PARAMS = [{"bin_wg": 3}, {"bin_wg": 48}, {"bin_wg": 16}, {"bin_wg": 1 << 20}, {"bin_wg": True},
              {"bin_wg": 256.0}, {"reg_wg": 100}, {"reg_wg": "128"}, {"reg_wg": None}, {"reg_wg": 0},
              {"merge_wg": 96}, {"merge_wg": 1}, {"merge_k": 3}, {"merge_k": 0}, {"merge_k": -8},
              {"k16": 3}, {"k16": 0}, {"k16": 32}, {"k64": 1}, {"block_k": 5}, {"block_k": 32},
              {"block_k": 0}, {"block_max": 3000}, {"reg_max": 100}, {"small_max": 20},
              {"reg_write": "sideways"}, {"xchg": 1}]


def test_plan_validation(device):
    """A plan is frozen, memoized, its bins are named bindings. Every value
    that could crash or mis-launch a kernel fails validation: Plan.resolve
    raises, the Tunable's restriction says no."""
    plan = S.Plan.resolve(device, {"size": 1 << 16, "dtype": "float64", "dims": 64})
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.reg_wg = 3
    assert plan is S.Plan.resolve(device, {"size": 1 << 16, "dtype": "float64", "dims": 64})
    assert plan.key_bits == 64 and plan.bounds == [b.P for b in plan.bins] and plan.nbins == len(plan.bins) + 1
    assert all(isinstance(b, S.RegBin) and b.k * b.m == b.P and b.m <= plan.sg for b in plan.reg_bins)
    assert all(isinstance(b, S.BlockBin) and b.P % b.k == 0 and b.wg == b.P // b.k for b in plan.block_bins)
    assert plan.tile == plan.block_bins[-1].P and plan.merge_k * plan.merge_wg <= plan.tile
    plan.validate(device)
    problem = {"size": 1 << 12, "dtype": "uint32", "dims": 32}
    base = S.TUNABLE.default(device, problem)
    for bad in BAD_PARAMS:
        with pytest.raises((ValueError, TypeError)):
            S.Plan.resolve(device, problem, **bad)
        assert not S.TUNABLE.restrict({**base, **bad}, device), bad
    with pytest.raises(TypeError, match="unknown"):
        S.Plan.resolve(device, problem, bogus=1)


def test_cached_entries(device, rng, tmp_path, monkeypatch):
    """A cached configuration that fails validation (one that would crash, one
    of a wrong type) is ignored with one RuntimeWarning and the sort is right;
    a valid one is used."""
    path = str(tmp_path / "tuning.json")
    monkeypatch.setenv("CLKERNELS_TUNE_CACHE", path)
    lens = mixed_lengths(rng, 100)
    for kdt, entry, valid in ((np.int32, {"bin_wg": 3}, False), (np.uint64, {"small_max": 0}, True),
                              (np.float32, {"reg_wg": "many", "small_max": 0}, False)):
        off, keys, values = random_case(rng, lens, kdt)
        dt = np.dtype(kdt).name
        key = tuning.entry_key(device, "segsort", S.TUNABLE.template_hash, dt, 32, tuning.size_bucket(keys.size))
        cache.update({key: {"params": entry}}, path=path)
        tuning.invalidate()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                got = clkernels.segmented_sort(keys, off, values, device=device)
                check(keys, off, values, got, False, True)
            plan = S.Plan.resolve(device, {"size": keys.size, "dtype": dt, "dims": 32})
        msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(msgs) == (0 if valid else 1) and all("ignoring the cached configuration" in m for m in msgs)
        assert (plan.source, plan.nsmall == 0) == (("tuned", True) if valid else ("default", False))
    tuning.invalidate()


def test_prezeroed_control_words(device, rng):
    """A sort leaves its queue's next control words zero-filled behind its
    last command: the next sort there starts without a fill; sorts on two
    queues of one context, alternating, and a sort after one that raised stay
    exact."""
    off, keys, values = random_case(rng, mixed_lengths(rng, 60), np.uint32)
    q2 = cl.CommandQueue(device.context, device.cl_device)
    other = Device(queue=q2)
    for dev in (device, other, device, other):
        (k, v), ev = S.sort(dev, *(cla.to_device(dev.queue, x) for x in (keys, off, values)))
        (k2, v2), ev2 = S.sort(dev, *(cla.to_device(dev.queue, x) for x in (keys, off, values)))
        assert "fill" not in ev2 and "hist" in ev2          # the first command counts the bins
        check(keys, off, values, (k.get(), v.get()), False, True)
        check(keys, off, values, (k2.get(), v2.get()), False, True)
    bad = off.copy()
    bad[3] = bad[4] + 1                                     # offsets that decrease
    with pytest.raises(ValueError, match="non-decreasing"):
        S.sort(device, *(cla.to_device(device.queue, x) for x in (keys, bad, values)))
    (k, v), ev = S.sort(device, *(cla.to_device(device.queue, x) for x in (keys, off, values)))
    check(keys, off, values, (k.get(), v.get()), False, True)


def test_sort_op(device, rng):
    """The device-array op: named events, wait lists, the caller's allocator,
    device arrays in and out (numpy inputs refused)."""
    q = device.queue                    # below: every kind of bin, the grid's too
    lens = np.concatenate([mixed_lengths(rng, 60), [300, 700, 9000, 0, 5]])
    off, keys, values = random_case(rng, lens, np.float32)
    dk, do, dv = (cla.to_device(q, x) for x in (keys, off, values))
    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(q))
    sizes = []
    alloc = lambda nbytes: sizes.append(nbytes) or pool.allocate(nbytes)     # noqa: E731
    marker = cl.enqueue_marker(q)
    (ok, ov), ev = S.sort(q, dk, do, dv, wait_for=[marker], allocator=alloc)
    assert isinstance(ok, cla.Array) and isinstance(ov, cla.Array) and isinstance(ev, Events)
    plan = S.Plan.resolve(device, {"size": keys.size, "dtype": "float32", "dims": 32})
    assert {"fill", "scatter", "read", "block", "tile", "gather"} <= set(ev)
    # the sync op counts the bins first (its read overlaps the small sort)
    assert ("small" in ev) == (plan.nsmall > 0) and "hist" in ev
    assert ("reg" in ev) == (plan.nsmall < len(plan.reg_bins))
    # the counts and the flag word, read once (on the side queue)
    assert len(ev["read"]) == 1 and ev.seconds() > 0 and ev.seconds("tile", "merge", "gather") > 0
    # the outputs' events are the sort's last kernels on the call's queue, not the side read
    assert all(e.command_queue == q for e in ok.events + ov.events)
    off4, keys4, _ = random_case(rng, np.full(100, 4), np.float32)       # the small sort alone
    k4, _ = S.sort(q, cla.to_device(q, keys4), cla.to_device(q, off4))
    assert k4.events and all(e.command_queue == q for e in k4.events)
    check(keys4, off4, None, k4.get(), False, False)
    assert len(sizes) >= 4          # outputs and temporaries came from the allocator
    cl.wait_for_events(ev.all())
    check(keys, off, values, (ok.get(), ov.get()), False, True)
    ok, ev = S.sort(q, dk, do, descending=True)
    assert isinstance(ok, cla.Array)
    check(keys, off, None, ok.get(), True, False)
    with pytest.raises(TypeError, match="pyopencl.array.Array"):
        S.sort(q, keys, do)


def test_staged_transfers(device, rng, monkeypatch):
    """numpy in and out through the page-locked staging chunks (as on GPUs),
    with chunks that divide neither the arrays nor their elements."""
    monkeypatch.setattr(device, "staged_io", True)
    monkeypatch.setattr(transfer, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(transfer, "SMALL_BYTES", 64)
    staged = []
    pinned = device.pinned_chunks
    monkeypatch.setattr(device, "pinned_chunks", lambda count, nbytes: staged.append(nbytes) or pinned(count, nbytes))
    lens = mixed_lengths(rng, 100)
    if lens.sum() % 125 == 0:                          # n * 8, n * 4: no multiples of 1000
        lens[0] += 1
    off, keys, values = random_case(rng, lens, np.float64)
    assert (keys.nbytes % 1000) and (values.nbytes % 1000)
    got = clkernels.segmented_sort(keys, off, values, device=device)
    check(keys, off, values, got, False, True)
    assert len(staged) >= 5 and set(staged) == {1000}   # 3 uploads, 2 downloads
