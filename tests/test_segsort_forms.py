"""clkernels.segmented_sort's extended forms (host/segsort/forms.py) against numpy
per segment: 8/16-bit and float16 keys, values of 1..16 bytes, return_indices,
segment_ids, out=, begin/end offsets with gaps; numpy and device inputs; bad inputs."""

import numpy as np
import pyopencl.array as cla
import pytest

import clkernels

SMALL_KEYS = [np.int8, np.uint8, np.int16, np.uint16, np.float16]
STRUCT16 = np.dtype([("a", np.int64), ("b", np.float32), ("c", np.uint16), ("d", np.int8), ("e", np.uint8)])
XYZ = np.dtype([("x", np.float32), ("y", np.float32), ("z", np.float32)])       # 12 bytes: 3 words of 4


# ---------------------------------------------------------------- reference
def reference_order(keys, begins, ends, descending=False):
    """Per segment [begins[s], ends[s]): the stable order of numpy (NaN last either
    way, -0.0 == 0.0) from ranks, as original positions; positions outside
    every segment map to themselves. Also the within-segment indices (-1 outside)."""
    n = keys.size
    order = np.arange(n)
    local = np.full(n, -1, np.int64)
    _, rank = np.unique(keys, return_inverse=True)      # NaNs collapse to one rank; -0.0 == 0.0
    rank = rank.reshape(-1).astype(np.int64)
    if descending:
        rank = -rank
    isnan = np.isnan(keys.astype(np.float64)) if keys.dtype.kind == "f" else np.zeros(n, bool)
    for b, e in zip(begins, ends):
        o = np.lexsort((np.arange(e - b), rank[b:e], isnan[b:e]))
        order[b:e] = b + o
        local[b:e] = o
    return order, local


def csr(lens):
    off = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return off


def lengths(rng, nseg=60, hi=120):
    lens = list(rng.integers(0, hi, nseg)) + [0, 1, 2, 0, 700, 1500]
    rng.shuffle(lens)
    return np.array(lens, np.int64)


def small_keys(rng, dtype, n):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        k = np.round(rng.standard_normal(n) * 4).astype(dt)          # many ties
        specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 65504, -65504, 6e-8], dt)
        pos = rng.integers(0, n, n // 10)
        k[pos] = specials[rng.integers(0, specials.size, pos.size)]
        bits = k.view(np.uint16)
        bits[rng.integers(0, n, 5)] = 0xFFFF                             # NaN, payload, sign bit
        bits[rng.integers(0, n, 5)] = 0x7C01                             # signalling-style NaN payload
        return k
    info = np.iinfo(dt)
    k = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    k[rng.integers(0, n, n // 3)] = np.array([info.min, info.max, 0, 1], dt)[rng.integers(0, 4, n // 3)]
    return k


def as_bytes(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(a.size, a.dtype.itemsize)


def assert_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(as_bytes(got), as_bytes(want))


def random_values(rng, dtype, n):
    dt = np.dtype(dtype)
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    v = raw.view(dt) if dt.fields is None and dt.kind not in "fc" else np.zeros(n, dt)
    if dt == XYZ:
        v = rng.standard_normal((n, 3)).astype(np.float32).view(XYZ)[:, 0]
    elif dt.fields is not None:
        v["a"] = rng.integers(-2**62, 2**62, n)
        v["b"] = rng.standard_normal(n)
        v["c"] = np.arange(n) % 65536
        v["d"] = rng.integers(-128, 128, n)
        v["e"] = np.arange(n) % 256
    elif dt.kind in "fc":
        v = (rng.standard_normal(n) + (1j * rng.standard_normal(n) if dt.kind == "c" else 0)).astype(dt)
    return v


# -------------------------------------------------------------------- tests
@pytest.mark.parametrize("kdt", SMALL_KEYS, ids=lambda d: np.dtype(d).name)
def test_small_key_types(device, kdt, rng):
    """8/16-bit and float16 keys, both orders: keys exact (bits), values and
    indices following them, stable on ties."""
    off = csr(lengths(rng))
    n = int(off[-1])
    keys = small_keys(rng, kdt, n)
    values = rng.permutation(n).astype(np.uint32)
    for descending in (False, True):
        order, local = reference_order(keys, off[:-1], off[1:], descending)
        k, v, idx = clkernels.segmented_sort(keys, off, values, descending=descending, return_indices=True,
                                             device=device)
        assert_bits(k, keys[order])
        assert_bits(v, values[order])
        np.testing.assert_array_equal(idx, local)
        assert idx.dtype == np.int64
    k = clkernels.segmented_sort(keys, off, device=device)
    assert_bits(k, keys[reference_order(keys, off[:-1], off[1:])[0]])


ODD_VALUES = ["V3", "S5", "V6", "V7", "V9", "V10", "V11", XYZ, "V13", "V14", "V15"]


@pytest.mark.parametrize("vdt", [np.uint8, np.bool_, np.int16, np.float16, np.float64, np.complex128,
                                 STRUCT16] + ODD_VALUES,
                         ids=["uint8", "bool", "int16", "float16", "float64", "complex128", "struct16"]
                         + [np.dtype(d).str for d in ODD_VALUES])
def test_value_sizes(device, vdt, rng):
    off = csr(lengths(rng, 40))
    n = int(off[-1])
    keys = rng.integers(0, 20, n).astype(np.float32)          # ties: values show stability
    keys[rng.integers(0, n, 20)] = np.nan
    values = random_values(rng, vdt, n)
    order, _ = reference_order(keys, off[:-1], off[1:], True)
    k, v = clkernels.segmented_sort(keys, off, values, descending=True, device=device)
    assert_bits(k, keys[order])
    assert_bits(v, values[order])


@pytest.mark.parametrize("kdt", [np.float64, np.uint32, np.int64], ids=lambda d: np.dtype(d).name)
def test_return_indices(device, kdt, rng):
    """The within-segment argsort; with and without values; numpy and device arrays."""
    off = csr(lengths(rng, 50))
    n = int(off[-1])
    keys = rng.integers(0, 30, n).astype(kdt)
    if np.dtype(kdt).kind == "f":
        keys[rng.integers(0, n, 30)] = np.nan
        keys[rng.integers(0, n, 30)] = -0.0
    order, local = reference_order(keys, off[:-1], off[1:])
    k, idx = clkernels.segmented_sort(keys, off, return_indices=True, device=device)
    assert_bits(k, keys[order])
    np.testing.assert_array_equal(idx, local)
    # the argsort users build: keys[begin + idx] is the sorted segment
    seg = np.repeat(np.arange(off.size - 1), np.diff(off))
    assert_bits(keys[off[seg] + idx], k)
    q = device.queue
    values = np.arange(n, dtype=np.int64)
    dk, dv, didx = clkernels.segmented_sort(cla.to_device(q, keys), cla.to_device(q, off.astype(np.int32)),
                                            cla.to_device(q, values), return_indices=True)
    assert all(isinstance(a, cla.Array) for a in (dk, dv, didx))
    assert_bits(dk.get(), keys[order])
    np.testing.assert_array_equal(dv.get(), order)
    np.testing.assert_array_equal(didx.get(), local)


@pytest.mark.parametrize("where", ["numpy", "device"])
def test_segment_ids(device, where, rng):
    """Sorted segment ids (PyG's batch) with empty segments (leading, inner,
    trailing: num_segments beyond max id + 1) give the same as CSR offsets."""
    lens = lengths(rng, 40)
    lens[0] = 0
    off = csr(lens)
    n = int(off[-1])
    nseg = lens.size + 3
    ids = np.repeat(np.arange(lens.size), lens).astype([np.int64, np.int32, np.uint16][rng.integers(0, 3)])
    keys = small_keys(rng, np.int16, n)
    values = np.arange(n, dtype=np.uint16)
    order, local = reference_order(keys, off[:-1], off[1:], True)
    q = device.queue
    dev = (lambda a: cla.to_device(q, a)) if where == "device" else (lambda a: a)
    get = (lambda a: a.get()) if where == "device" else (lambda a: a)
    for ns in (None, nseg):
        k, v, idx = clkernels.segmented_sort(dev(keys), values=dev(values), segment_ids=dev(ids),
                                             num_segments=ns, descending=True, return_indices=True, device=device)
        assert_bits(get(k), keys[order])
        assert_bits(get(v), values[order])
        np.testing.assert_array_equal(get(idx), local)
    # native keys and 4-byte values: the plain sort underneath
    k32 = rng.integers(0, 50, n).astype(np.uint32)
    o32, _ = reference_order(k32, off[:-1], off[1:])
    k, v = clkernels.segmented_sort(dev(k32), values=dev(values.astype(np.float32)), segment_ids=dev(ids),
                                    device=device)
    assert_bits(get(k), k32[o32])
    np.testing.assert_array_equal(get(v), o32.astype(np.float32))
    # no elements at all, some segments
    k = clkernels.segmented_sort(dev(np.zeros(0, np.int8)), segment_ids=dev(np.zeros(0, np.int64)),
                                 num_segments=4, device=device)
    assert get(k).size == 0 and get(k).dtype == np.int8


@pytest.mark.parametrize("where", ["numpy", "device"])
def test_out(device, where, rng):
    off = csr(lengths(rng, 30))
    n = int(off[-1])
    keys = small_keys(rng, np.float16, n)
    values = random_values(rng, np.complex128, n)
    order, _ = reference_order(keys, off[:-1], off[1:])
    q = device.queue
    if where == "numpy":
        ok, ov = np.full(n, 7, np.float16), np.zeros(n, np.complex128)
        dk, dv, do = keys, values, off
    else:
        ok, ov = cla.zeros(q, n, np.float16), cla.zeros(q, n, np.complex128)
        dk, dv, do = cla.to_device(q, keys), cla.to_device(q, values), cla.to_device(q, off)
    rk, rv = clkernels.segmented_sort(dk, do, dv, out=(ok, ov), device=device)
    assert rk is ok and rv is ov
    get = (lambda a: a.get()) if where == "device" else (lambda a: a)
    assert_bits(get(ok), keys[order])
    assert_bits(get(ov), values[order])
    # keys only, native dtype (plain sort underneath), into a device slice / numpy array
    k32 = rng.standard_normal(n).astype(np.float32)
    o32, _ = reference_order(k32, off[:-1], off[1:])
    if where == "numpy":
        ok = np.empty(n, np.float32)
        r = clkernels.segmented_sort(k32, off, out=ok, device=device)
        assert r is ok
        assert_bits(ok, k32[o32])
    else:
        big = cla.zeros(q, n + 8, np.float32)
        ok = big[8:]
        r = clkernels.segmented_sort(cla.to_device(q, k32), do, out=ok, device=device)
        assert r is ok
        got = big.get()
        assert_bits(got[8:], k32[o32])
        assert (got[:8] == 0).all()


def test_long_segments_and_slices(device, rng):
    """Segments beyond the block bins (tiles + global merge) with float16 keys and
    1-byte values; device inputs that are slices; in place (out=keys)."""
    lens = np.array([20000, 3, 9000, 0, 5000], np.int64)
    off = csr(lens)
    n = int(off[-1])
    keys = small_keys(rng, np.float16, n)
    values = rng.integers(0, 256, n).astype(np.uint8)
    order, local = reference_order(keys, off[:-1], off[1:], True)
    q = device.queue
    dk = cla.to_device(q, np.concatenate([np.zeros(3, np.float16), keys]))[3:]
    dv = cla.to_device(q, np.concatenate([np.zeros(5, np.uint8), values]))[5:]
    k, v, idx = clkernels.segmented_sort(dk, off, dv, descending=True, return_indices=True)
    assert_bits(k.get(), keys[order])
    assert_bits(v.get(), values[order])
    np.testing.assert_array_equal(idx.get(), local)
    inplace = keys.copy()
    assert clkernels.segmented_sort(inplace, off, out=inplace, descending=True, device=device) is inplace
    assert_bits(inplace, keys[order])


def random_gaps(rng, n, nseg):
    """Non-overlapping [begin, end) pairs in random order, some empty, gaps between."""
    cuts = np.sort(rng.choice(np.arange(n + 1), 2 * nseg, replace=True))
    b, e = cuts[0::2].copy(), cuts[1::2].copy()
    keep = rng.random(nseg) < 0.85                      # some ranges left out: gaps
    b, e = b[keep], e[keep]
    b = np.concatenate([b, [0, n]])                     # empty segments at the ends
    e = np.concatenate([e, [0, n]])
    p = rng.permutation(b.size)
    return b[p], e[p]


@pytest.mark.parametrize("where", ["numpy", "device"])
@pytest.mark.parametrize("vdt", [STRUCT16, XYZ, "V7"], ids=["struct16", "xyz12", "V7"])
def test_gaps(device, where, vdt, rng):
    """offsets=(begins, ends): each segment sorted, the rest untouched (values of
    16 bytes, 12 as three 4-byte words, 7 as seven bytes)."""
    n = 3000
    begins, ends = random_gaps(rng, n, 50)
    keys = small_keys(rng, np.uint8, n)
    values = random_values(rng, vdt, n)
    order, local = reference_order(keys, begins, ends)
    q = device.queue
    dev = (lambda a: cla.to_device(q, a)) if where == "device" else (lambda a: a)
    get = (lambda a: a.get()) if where == "device" else (lambda a: a)
    k, v, idx = clkernels.segmented_sort(dev(keys), (dev(begins), dev(ends.astype(np.int32))), dev(values),
                                         return_indices=True, device=device)
    assert_bits(get(k), keys[order])
    assert_bits(get(v), values[order])
    np.testing.assert_array_equal(get(idx), local)
    k64 = rng.integers(-5, 5, n).astype(np.int64)
    order, _ = reference_order(k64, begins, ends, True)
    k = clkernels.segmented_sort(dev(k64), (dev(begins), dev(ends)), descending=True, device=device)
    assert_bits(get(k), k64[order])


def test_float16_specials(device):
    """float16 order is numpy's: -inf < ... < -0.0 == 0.0 < ... < inf < NaN (NaNs
    keep their input order and bits, either direction)."""
    bits = np.array([0x7E00, 0x8000, 0x0000, 0xFFFF, 0x3C00, 0xFC00, 0x7C00, 0x0001, 0x8001, 0x7C01, 0x0000,
                     0x8000], np.uint16)
    keys = bits.view(np.float16)
    off = np.array([0, keys.size])
    for descending in (False, True):
        k, idx = clkernels.segmented_sort(keys, off, descending=descending, return_indices=True, device=device)
        order, local = reference_order(keys, [0], [keys.size], descending)
        assert_bits(k, keys[order])
        np.testing.assert_array_equal(idx, local)
    k = clkernels.segmented_sort(keys, off, device=device)
    assert k.view(np.uint16).tolist() == [0xFC00, 0x8001, 0x8000, 0x0000, 0x0000, 0x8000, 0x0001, 0x3C00,
                                          0x7C00, 0x7E00, 0xFFFF, 0x7C01]


def test_bad_inputs(device):
    ss = clkernels.segmented_sort
    k = np.arange(10, dtype=np.int8)
    off = np.array([0, 4, 10])
    with pytest.raises(ValueError, match="exactly one of offsets and segment_ids"):
        ss(k, device=device)
    with pytest.raises(ValueError, match="exactly one of offsets and segment_ids"):
        ss(k, off, segment_ids=np.zeros(10, np.int64), device=device)
    with pytest.raises(ValueError, match="num_segments"):
        ss(k, off, num_segments=3, device=device)
    with pytest.raises(ValueError, match="segment_ids must be sorted"):
        ss(k, segment_ids=np.array([0, 0, 1, 0, 1, 1, 1, 2, 2, 2]), device=device)
    with pytest.raises(ValueError, match="segment_ids must be non-negative"):
        ss(k, segment_ids=np.array([-1] + [0] * 9), device=device)
    with pytest.raises(ValueError, match="segment_ids must be < num_segments"):
        ss(k, segment_ids=np.arange(10), num_segments=5, device=device)
    with pytest.raises(ValueError, match="segment_ids has 9"):
        ss(k, segment_ids=np.zeros(9, np.int64), device=device)
    with pytest.raises(TypeError, match="segment_ids must be an integer"):
        ss(k, segment_ids=np.zeros(10), device=device)
    with pytest.raises(TypeError, match="num_segments must be an integer"):
        ss(k, segment_ids=np.zeros(10, np.int64), num_segments=2.0, device=device)
    q = device.queue
    dk = cla.to_device(q, k)
    with pytest.raises(ValueError, match="segment_ids must be sorted"):
        ss(dk, segment_ids=cla.to_device(q, np.array([0, 0, 1, 0, 1, 1, 1, 2, 2, 2])))
    with pytest.raises(ValueError, match="segment_ids must be in"):
        ss(dk, segment_ids=cla.to_device(q, np.arange(10, dtype=np.int32)), num_segments=5)
    # begin/end pairs
    b, e = np.array([0, 5]), np.array([3, 9])
    for bb, ee, msg in (([0, 5], [3], "begins has 2 entries but ends has 1"),
                        ([4, 5], [3, 9], "begin > end"),
                        ([0, 5], [3, 11], "out of range|within"),
                        ([-1, 5], [3, 9], "out of range|within"),
                        ([0, 2], [3, 9], "overlap"),
                        ([5, 0, 8], [9, 6, 8], "overlap")):
        with pytest.raises(ValueError, match=msg):
            ss(k, (np.array(bb), np.array(ee)), device=device)
        if len(bb) == len(ee):
            with pytest.raises(ValueError, match=msg):
                ss(dk, (cla.to_device(q, np.array(bb)), cla.to_device(q, np.array(ee))))
    with pytest.raises(TypeError, match="must both be numpy or both device"):
        ss(dk, (cla.to_device(q, b), e))
    with pytest.raises(TypeError, match="begins must be an integer"):
        ss(k, (b.astype(np.float64), e), device=device)
    # out=
    with pytest.raises(TypeError, match="out must have dtype int8"):
        ss(k, off, out=np.empty(10, np.uint8), device=device)
    with pytest.raises(ValueError, match="out must have shape"):
        ss(k, off, out=np.empty(11, np.int8), device=device)
    with pytest.raises(TypeError, match="numpy array for numpy keys"):
        ss(k, off, out=cla.empty(q, 10, np.int8), device=device)
    with pytest.raises(TypeError, match="pyopencl.array.Array for device inputs"):
        ss(dk, cla.to_device(q, off), out=np.empty(10, np.int8))
    with pytest.raises(TypeError, match="\\(keys, values\\) tuple"):
        ss(k, off, np.arange(10), out=np.empty(10, np.int8), device=device)
    with pytest.raises(TypeError, match="out\\[1\\] must have dtype int64"):
        ss(k, off, np.arange(10, dtype=np.int64), out=(np.empty(10, np.int8), np.empty(10, np.int32)),
           device=device)
    with pytest.raises(ValueError, match="writeable"):
        ro = np.empty(10, np.int8)
        ro.flags.writeable = False
        ss(k, off, out=ro, device=device)
    # dtypes
    with pytest.raises(TypeError, match="keys dtype"):
        ss(k.astype(np.complex64), off, return_indices=True, device=device)
    with pytest.raises(TypeError, match="1 to 16 bytes"):
        ss(k, off, np.zeros(10, "V17"), device=device)
    with pytest.raises(TypeError, match="Python objects"):
        ss(k, off, np.zeros(10, object), device=device)
    with pytest.raises(ValueError, match="values has 9"):
        ss(k, off, np.zeros(9, np.uint8), device=device)
    with pytest.raises(ValueError, match="offsets\\[-1\\]"):
        ss(k, np.array([0, 11]), return_indices=True, device=device)
