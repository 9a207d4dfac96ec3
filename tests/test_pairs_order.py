"""The pairs' order and the split's chunks (``host/primitives/pages.py``):
pairs sorted into (i, j) order on the device, chunk of rows by chunk of rows
while the chunks before come down; one dense page split in chunks; the
order's device memory; the estimate's kept sample of writers. Exact against
the float64 reference of test_pairs.py; the chunks are forced small
(``ORDER_PART``) so that CPU devices run them."""

import numpy as np
import pyopencl.array as cla
import pytest

from helpers import uniform
from test_pairs import reference

@pytest.mark.parametrize("method", ["pages", "scan"])
def test_dense_split_in_chunks(device, rng, method, monkeypatch):
    """One dense page of records (a grouped kernel's pool, a count-scan-write
    batch) split into the columns in chunks, each chunk's columns copied as
    soon as it is split: every pair once, self and cross, under ids too, in
    one batch and in several."""
    from clkernels.host.cellgrid.pairs import within
    from clkernels.host.primitives import pages

    monkeypatch.setattr(pages, "ORDER_PART", 16)
    X, Y = uniform(rng, 500, 3, np.float32), uniform(rng, 200, 3, np.float32)
    ix = rng.permutation(10 ** 6)[:len(X)].astype(np.int64)
    kw = dict(method=method, stage=4) if method == "pages" else dict(method=method)
    for Yv, r, ids in ((None, 0.12, None), (Y, 0.15, None), (None, 0.12, ix)):
        ri, rj, _ = reference(X, r, Yv)
        if ids is not None:
            ri, rj = np.minimum(ix[ri], ix[rj]), np.maximum(ix[ri], ix[rj])
        for extra in ({}, {"max_device_bytes": 24 * 300} if method == "scan" else {"npages": 2, "page": 64}):
            (i, j), ev = within(device.queue, X, Yv, r=r, ids=ids, **kw, **extra)
            assert sorted(zip(i.tolist(), j.tolist())) == sorted(zip(ri.tolist(), rj.tolist()))
            if not extra or method == "scan":       # (rounds that overlap the next one: one split)
                assert len(ev["drain"]) >= pages.ORDER_PARTS_MIN, len(ev["drain"])


def test_sampled_writers_kept(device):
    """The estimate's sample of writers: distinct, sorted, the same draw every
    call, kept read-only with its device copy per queue (drawn and uploaded
    once), another queue its own copy."""
    from clkernels.host.outputs.pairs import sampled_writers

    ids, wl = sampled_writers(device.queue, 5000, 300)
    assert ids.dtype == np.uint32 and len(ids) == 300 and np.all(np.diff(ids.astype(np.int64)) > 0)
    assert ids[-1] < 5000 and not ids.flags.writeable
    np.testing.assert_array_equal(wl.get(), ids)
    again = sampled_writers(device.queue, 5000, 300)
    assert again[0] is ids and again[1] is wl
    other = sampled_writers(device.side_queue, 5000, 300)
    assert other[1] is not wl and np.array_equal(other[0], ids)
    assert not np.array_equal(sampled_writers(device.queue, 5001, 300)[0], ids)


@pytest.mark.parametrize("layout", ["uniform", "few_rows", "dominant", "one_row"])
def test_order_chunks_memory(device, rng, layout, monkeypatch):
    """``split(order=)`` in chunks of rows: the exact (i, j) order however the
    keys spread over the rows; where a row is too long for chunks of at most
    1 / ORDER_CHUNK_SHARE of the keys, one sort of them all (the columns made
    after it); either way the device memory beyond the records stays within
    ``ORDERED_DEVICE_BYTES`` less the records' own 8 bytes (a tracking pool)."""
    import pyopencl.tools as cl_tools

    from clkernels.host.core.device import as_device
    from clkernels.host.core.launch import Events
    from clkernels.host.outputs.pairs import ORDERED_DEVICE_BYTES
    from clkernels.host.primitives import pages

    n, rows = 200000, 3000
    i = {"uniform": rng.integers(0, rows, n), "few_rows": rng.integers(0, 5, n), "one_row": np.full(n, 7),
         "dominant": np.where(rng.random(n) < 0.9, rows // 2, rng.integers(0, rows, n))}[layout]
    j = rng.integers(0, 2 ** 32 - 1, n)
    q = device.queue
    rec = cla.to_device(q, np.stack([i, j], 1).astype(np.uint32))
    fill, at = cla.to_device(q, np.array([n], np.uint32)), cla.to_device(q, np.array([0], np.uint32))
    real, peak = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(q)), [0]

    class Tracked:
        def __call__(self, nbytes):
            b = real.allocate(nbytes)
            peak[0] = max(peak[0], real.active_bytes)
            return b

        def free_held(self):
            real.free_held()

        def stop_holding(self):
            real.stop_holding()

    sorts, sort = [], pages._sort_placed
    monkeypatch.setattr(pages, "_sort_placed", lambda *a, **k: sorts.append(k.get("sync", True)) or sort(*a, **k))
    monkeypatch.setattr(pages, "ORDER_PART", 1024)
    # the chunks are taken where the columns come down in plain copies; on a GPU
    # these 1.6 MB columns would be staged, so plain copies are asked for here
    monkeypatch.setattr(pages, "direct", lambda dev, out: True)
    q.finish()
    monkeypatch.setattr(as_device(q), "_pool", Tracked())          # the Device the split resolves
    gi, gj = pages.split(q, rec, fill, at, n, n, n, Events(), order=rows)
    key = np.sort((i.astype(np.uint64) << np.uint64(32)) | j.astype(np.uint64))
    np.testing.assert_array_equal(gi, (key >> np.uint64(32)).astype(np.int64))
    np.testing.assert_array_equal(gj, (key & np.uint64(0xffffffff)).astype(np.int64))
    if layout == "uniform":
        assert len(sorts) >= pages.ORDER_PARTS_MIN and not any(sorts), sorts       # chunks, asynchronous
    else:
        assert sorts == [True], sorts                                              # one sort of all keys
    assert 8 * n < peak[0] <= (ORDERED_DEVICE_BYTES - 8) * n * 1.1 + (1 << 20), peak[0] / n     # (the pool's bins)


@pytest.mark.parametrize("method", ["pages", "scan"])
def test_ordered_on_the_device(device, rng, method, monkeypatch):
    """``within(order=True)`` (``pairs_within(sort=True)`` on GPUs): the records
    sorted on the device as (i, j) keys before they come down, in one round,
    over rounds of a pool that runs out or batches (each sorted, merged on the
    host), and with the chunks sorted on the host where the device's sort
    cannot take them; refused beside ``ids``."""
    from clkernels.host.cellgrid.pairs import within
    from clkernels.host.primitives import pages

    X, Y = uniform(rng, 500, 3, np.float32), uniform(rng, 200, 3, np.float32)
    small = dict(page=4, npages=3, stage=0) if method == "pages" else dict(max_device_bytes=24 * 150)
    for Yv, r in ((None, 0.12), (Y, 0.15)):
        ri, rj, _ = reference(X, r, Yv)
        assert len(ri) > 300
        for kw in ({}, small):
            (i, j), ev = within(device.queue, X, Yv, r=r, method=method, order=True, **kw)
            np.testing.assert_array_equal(i, ri)
            np.testing.assert_array_equal(j, rj)
            assert "order" in ev
    # chunks of rows sorted and downloaded one after another (three and more; rounds too)
    split, unkey = pages._ordered_parts, pages._unkey
    calls = []
    monkeypatch.setattr(pages, "_ordered_parts", lambda *a: calls.append(0) or split(*a))
    monkeypatch.setattr(pages, "_unkey", lambda *a: calls and calls.__setitem__(-1, calls[-1] + 1) or unkey(*a))
    rounds = dict(page=64, npages=2, stage=0) if method == "pages" else small        # rounds of 128 records
    for Yv, r in ((None, 0.12), (Y, 0.15)):
        ri, rj, _ = reference(X, r, Yv)
        for kw in ({}, rounds):
            monkeypatch.setattr(pages, "ORDER_PART", 4 if kw and method == "pages" else 37)
            calls.clear()
            (i, j), ev = within(device.queue, X, Yv, r=r, method=method, order=True, **kw)
            np.testing.assert_array_equal(i, ri)
            np.testing.assert_array_equal(j, rj)
            assert calls and max(calls) >= 3, calls          # chunks sorted (and split) one by one
    monkeypatch.setattr(pages, "orders_on_device", lambda dev, n: False)
    ri, rj, _ = reference(X, 0.12)
    # the host's sort where the device's cannot take the keys: rounds or batches, and one
    # dense page (a grouped pool, a whole batch), which the unordered split cuts in chunks
    for kw in (small, {"stage": 4} if method == "pages" else {}):
        (i, j), ev = within(device.queue, X, r=0.12, method=method, order=True, **kw)
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(j, rj)
        assert "order" not in ev
    with pytest.raises(ValueError, match="ids"):
        within(device.queue, X, r=0.12, order=True, ids=np.arange(len(X), dtype=np.int64))
