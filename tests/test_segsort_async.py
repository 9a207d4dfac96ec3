"""The segmented sort's async mode (segsort.sort(..., sync=False),
segmented_sort(..., asynchronous=True)): no host wait, results equal to numpy
per segment in every bin (the grid bin's too, with small bin limits forced),
bad offsets reported by SortEvents.check(); and the extended forms through
the device-array op segsort.sort."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest

import clkernels
from clkernels.host import segsort as S
from clkernels.host.segsort import plan as plan_module
from test_segsort import make_offsets, random_keys, reference_order

KEY_DTYPES = [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64]
#: small bins, so that small arrays reach every kind: the small sort (<= 16),
#: reg-sort (32, 64), the block bin (<= 1024) and the grid bin (> 1024:
#: tiles of 1024, merge rounds)
SMALL_BINS = {"reg_max": 64, "small_max": 16, "block_max": 1024}
LENS = [0, 1, 2, 3, 16, 17, 32, 33, 64, 65, 300, 1023, 1024, 1025, 0, 2048, 2049, 3000, 5000, 1]


def _uint(dt):
    return np.uint32 if np.dtype(dt).itemsize == 4 else np.uint64


def lengths(rng, nrand=60):
    lens = np.array(LENS + list(rng.integers(0, 200, nrand)), np.int64)
    rng.shuffle(lens)
    return lens


def check_sorted(keys, off, values, got_keys, got_values=None, descending=False):
    """Exact per segment: key bits in numpy's stable order, values following them."""
    order = reference_order(keys, off, descending)
    np.testing.assert_array_equal(got_keys.view(_uint(keys.dtype)), keys[order].view(_uint(keys.dtype)))
    if values is not None:
        np.testing.assert_array_equal(got_values, values[order])


def to_dev(q, *arrays):
    return [cla.to_device(q, a) for a in arrays]


@pytest.mark.parametrize("kdt", KEY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_async_key_types(device, kdt, rng):
    lens = lengths(rng)
    off = make_offsets(lens)
    n = int(off[-1])
    keys = random_keys(rng, kdt, n, dup=True)           # many ties: stability shows
    values = rng.permutation(n).astype(np.uint32 if np.dtype(kdt).itemsize == 4 else np.int64)
    dk, do, dv = to_dev(device.queue, keys, off, values)
    for descending in (False, True):
        (k, v), ev = S.sort(device, dk, do, dv, descending=descending, sync=False, **SMALL_BINS)
        assert isinstance(ev, S.SortEvents) and "layout" in ev and "grid_read" not in ev
        ev.wait()
        check_sorted(keys, off, values, k.get(), v.get(), descending)
    k, ev = S.sort(device, dk, do, sync=False, **SMALL_BINS)        # keys only
    check_sorted(keys, off, None, k.get())
    ev.check()


def test_async_launch_bounds(device, rng, monkeypatch):
    """Every bin launched from its bound, the small sort's bins too (small_max=0),
    a grid bin without long segments, and the plan's bounds; one work-group per
    compute unit (every kernel strides over several segments / tiles)."""
    plan = S.Plan.resolve(device, {"dtype": "uint32"}, **SMALL_BINS)
    assert plan.bin_bound(0, 100, 7) == 7 and plan.bin_bound(plan.grid_bin, 5000, 9) == 4
    cg, total, widths = plan.grid_bounds(5000, 9)
    assert (cg, total, widths) == (4, 8192, (1024, 2048, 4096))     # e.g. 1025 x 3 + 1925: 4 x 2048
    assert plan.grid_bounds(1024, 3) == (0, 0, ())
    for lens in (lengths(rng), rng.integers(0, 1000, 50)):        # (the second: no grid segment)
        off = make_offsets(lens)
        keys = random_keys(rng, np.float32, int(off[-1]))
        dk, do = to_dev(device.queue, keys, off)
        k, ev = S.sort(device, dk, do, sync=False, **{**SMALL_BINS, "small_max": 0})
        assert "hist" in ev and "small" not in ev
        check_sorted(keys, off, None, k.get())
    monkeypatch.setattr(plan_module, "ASYNC_GROUPS_PER_CU", 1)
    assert plan.async_cap(device) == device.compute_units
    lens = np.concatenate([lengths(rng, 300), np.full(20, 1500), [9000]])
    off = make_offsets(lens)
    keys = random_keys(rng, np.int32, int(off[-1]), dup=True)
    values = np.arange(keys.size, dtype=np.uint32)
    (k, v), ev = S.sort(device, *to_dev(device.queue, keys, off, values), sync=False, **SMALL_BINS)
    check_sorted(keys, off, values, k.get(), v.get())
    ev.check()


def test_async_empty(device):
    q = device.queue
    for off in ([0], [0, 0, 0, 0]):
        for kdt in (np.uint32, np.float64):
            k, ev = S.sort(device, cla.empty(q, 0, kdt), cla.to_device(q, np.array(off, np.int64)), sync=False)
            assert k.size == 0 and k.dtype == kdt
            ev.wait()
    # empty segments between others
    keys = np.array([3, 1, 2, 9, 8], np.int32)
    off = np.array([0, 0, 3, 3, 3, 5, 5])
    (k, v), ev = S.sort(device, *to_dev(q, keys, off, np.arange(5, dtype=np.uint32)), sync=False,
                        **SMALL_BINS)
    assert k.get().tolist() == [1, 2, 3, 8, 9] and v.get().tolist() == [1, 2, 0, 4, 3]
    k = clkernels.segmented_sort(cla.empty(q, 0, np.float32), cla.to_device(q, np.array([0])),
                                 asynchronous=True)
    assert isinstance(k, cla.Array) and k.size == 0


def test_no_host_wait(device, rng, monkeypatch):
    """The async calls enqueue everything and return: no event wait, no
    blocking transfer, no finish on the host; then the results are right."""
    q = device.queue
    lens = lengths(rng)
    off = make_offsets(lens)
    n = int(off[-1])
    keys = random_keys(rng, np.int64, n, dup=True)
    values = np.arange(n, dtype=np.float32)
    dk, do, dv = to_dev(q, keys, off, values)
    q.finish()
    copy = cl.enqueue_copy

    def no_wait(*a, **k):
        raise AssertionError("a host wait in async mode")

    def no_blocking_copy(*a, **k):
        if k.get("is_blocking", True):
            raise AssertionError("a blocking transfer in async mode")
        return copy(*a, **k)
    for mod, name in ((cl, "wait_for_events"), (cl.Event, "wait"), (cl.CommandQueue, "finish"),
                      (cl, "enqueue_copy")):
        monkeypatch.setattr(mod, name, no_blocking_copy if name == "enqueue_copy" else no_wait)
    (k, v), ev = S.sort(device, dk, do, dv, sync=False, **SMALL_BINS)
    k2 = clkernels.segmented_sort(dk, do, asynchronous=True, descending=True, device=device)
    # checks=False: no copy to the host at all (the order of pairs sorts so behind downloads)
    monkeypatch.setattr(cl, "enqueue_copy", no_wait)
    k3, ev3 = S.sort(device, dk, do, sync=False, checks=False, **SMALL_BINS)
    monkeypatch.undo()
    assert {"tile", "merge", "gather"} <= set(ev)
    assert isinstance(k2, cla.Array) and k2.events
    assert "read" in ev and "read" not in ev3
    ev.wait()
    ev3.wait()
    check_sorted(keys, off, values, k.get(), v.get())
    check_sorted(keys, off, None, k2.get(), descending=True)
    check_sorted(keys, off, None, k3.get())


def test_user_event_gate(device, rng):
    """Behind a user's event (set from another thread): the host waits for it
    first, then enqueues; the results are right."""
    import threading
    q = device.queue
    lens = lengths(rng)
    off = make_offsets(lens)
    keys = random_keys(rng, np.int64, int(off[-1]), dup=True)
    dk, do = to_dev(q, keys, off)
    q.finish()
    gate = cl.UserEvent(device.context)
    timer = threading.Timer(0.2, lambda: gate.set_status(cl.command_execution_status.COMPLETE))
    timer.start()
    k, ev = S.sort(device, dk, do, wait_for=[gate], sync=False, **SMALL_BINS)
    timer.join()
    ev.wait()
    check_sorted(keys, off, None, k.get())


@pytest.mark.parametrize("small_max", [0, 16])
def test_async_bad_offsets(device, small_max):
    """Bad device offsets: the async call returns; events.check() and
    events.wait() raise the sync call's ValueError (every time)."""
    q = device.queue
    n = 3000
    dk = cla.to_device(q, np.arange(n, dtype=np.uint32)[::-1].copy())
    ov = {**SMALL_BINS, "small_max": small_max}
    for bad, msg in (([0, 5, 3, n], "non-decreasing"), ([0, 5, n + 2], "non-decreasing|end at"),
                     ([2, 5, n], "start at 0"), ([0, 5, n - 1], "end at"),
                     ([0, n, 0, n, 0, n], "non-decreasing"),           # overlapping valid grid segments
                     ([0, 1500, 100, 2900, 0, n], "non-decreasing")):
        k, ev = S.sort(device, dk, cla.to_device(q, np.array(bad, np.int64)), sync=False, **ov)
        for _ in range(2):
            with pytest.raises(ValueError, match=msg):
                ev.check()
        with pytest.raises(ValueError, match=msg):
            ev.wait()
        with pytest.raises(ValueError, match=msg):          # the sync call says the same
            S.sort(device, dk, cla.to_device(q, np.array(bad, np.int64)), **ov)
    k, ev = S.sort(device, cla.empty(q, 0, np.uint32), cla.to_device(q, np.array([1])), sync=False)
    with pytest.raises(ValueError, match="start at 0"):
        ev.check()
    with pytest.raises(ValueError, match="device arrays"):
        clkernels.segmented_sort(np.zeros(3, np.uint32), np.array([0, 3]), asynchronous=True)
    with pytest.raises(ValueError, match="device arrays.*offsets"):      # numpy parts would be copied
        clkernels.segmented_sort(dk, np.array([0, n]), asynchronous=True)


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_sort_forms(device, sync, rng):
    """The extended forms through the device-array op: (result, SortEvents)."""
    q = device.queue
    lens = lengths(rng, 20)
    off = make_offsets(lens)
    n = int(off[-1])
    do = cla.to_device(q, off)
    # 8-bit keys, 2-byte values, indices
    keys = rng.integers(-5, 5, n).astype(np.int8)
    values = rng.integers(0, 2**16, n).astype(np.uint16)
    (k, v, idx), ev = S.sort(q, *to_dev(q, keys), do, cla.to_device(q, values), return_indices=True,
                             sync=sync, **SMALL_BINS)
    assert isinstance(ev, S.SortEvents)
    ev.wait()
    order = reference_order(keys.astype(np.int32), off)
    np.testing.assert_array_equal(k.get(), keys[order])
    np.testing.assert_array_equal(v.get(), values[order])
    seg = np.repeat(np.arange(len(lens)), lens)
    np.testing.assert_array_equal(idx.get(), order - off[seg])
    # float16 keys, 16-byte values, segment ids with num_segments, out=
    keys = rng.standard_normal(n).astype(np.float16)
    values = rng.integers(0, 2**32, (n, 4)).astype(np.uint32).view("V16").reshape(n)
    dk, dv = cla.to_device(q, keys), cla.to_device(q, values)
    ok, ovals = cla.empty_like(dk), cla.empty_like(dv)
    (k, v), ev = S.sort(q, dk, None, dv, segment_ids=cla.to_device(q, seg.astype(np.int32)),
                        num_segments=len(lens), out=(ok, ovals), descending=True, sync=sync)
    assert k is ok and v is ovals
    ev.wait()
    order = reference_order(keys.astype(np.float32), off, descending=True)
    np.testing.assert_array_equal(k.get().view(np.uint16), keys[order].view(np.uint16))
    np.testing.assert_array_equal(v.get(), values[order])
    # bad segment ids: raised by the call (sync) or by check() (async)
    bad = cla.to_device(q, seg[::-1].astype(np.int64).copy())
    if sync:
        with pytest.raises(ValueError, match="sorted"):
            S.sort(q, dk, segment_ids=bad, num_segments=len(lens))
    else:
        _, ev = S.sort(q, dk, segment_ids=bad, num_segments=len(lens), sync=False)
        with pytest.raises(ValueError, match="sorted"):
            ev.check()
    # gaps: device (begins, ends) in sync mode only
    begins, ends = np.array([10, 0, 700]), np.array([300, 5, 700 + min(2000, n - 700)])
    keys = random_keys(rng, np.float32, n)
    dk = cla.to_device(q, keys)
    gaps = (cla.to_device(q, begins), cla.to_device(q, ends))
    if sync:
        k, ev = S.sort(q, dk, gaps, **SMALL_BINS)
        want = keys.copy()
        for b, e in zip(begins, ends):
            want[b:e] = np.sort(keys[b:e], kind="stable")
        np.testing.assert_array_equal(k.get(), want)
    else:
        with pytest.raises(ValueError, match="begins, ends"):
            S.sort(q, dk, gaps, sync=False)
        with pytest.raises(ValueError, match="num_segments"):
            S.sort(q, dk, segment_ids=cla.to_device(q, seg), sync=False)
    with pytest.raises(TypeError, match="pyopencl.array.Array"):
        S.sort(q, dk, segment_ids=seg, num_segments=len(lens), sync=sync)
    with pytest.raises(TypeError, match="pyopencl.array.Array"):
        S.sort(q, dk, (begins, ends), sync=sync)


@pytest.mark.parametrize("kdt", [np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_sort_long(device, kdt, rng):
    """sort_long (one segment by the grid bin's kernels, the cell grid's keys):
    numpy's stable order of keys with many ties, values following, at lengths
    around the tile and the largest block; None where it does not apply."""
    plan = S.Plan.resolve(device, {"size": 1 << 16, "dtype": np.dtype(kdt), "dims": 32})
    big, T = plan.bounds[-1], plan.tile
    for n in (big + 1, 2 * T, 2 * T + 1, 5 * T - 3, 9000 + big):
        keys = rng.integers(0, max(n // 7, 2), n).astype(kdt)
        if kdt == np.uint64:
            keys = (keys << np.uint64(33)) | rng.integers(0, 3, n).astype(np.uint64)
        for vdt in (np.uint32, np.uint64):
            vals = rng.integers(0, 2 ** 32, n).astype(vdt)
            kd, vd = cla.to_device(device.queue, keys), cla.to_device(device.queue, vals)
            ev = clkernels.host.core.launch.Events()
            got = S.sort_long(device.queue, kd, vd, ev)
            assert got is not None and ev.all()
            order = np.argsort(keys, kind="stable")
            np.testing.assert_array_equal(got[0].get(), keys[order])
            np.testing.assert_array_equal(got[1].get(), vals[order])
            np.testing.assert_array_equal(kd.get(), keys)          # the input is left as it was
    short = cla.to_device(device.queue, np.arange(big, dtype=kdt))
    assert S.sort_long(device.queue, short, short.astype(np.uint32), clkernels.host.core.launch.Events()) is None
    f = cla.to_device(device.queue, np.zeros(big + 5, np.float32))
    assert S.sort_long(device.queue, f, f, clkernels.host.core.launch.Events()) is None
