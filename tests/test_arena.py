"""A dask worker's kept host memory (issue 19: the one-worker overhead), and
the host-side pieces it rests on: the library's result arrays from
``transfer.host_empty``, device arrays filled from another source a piece at
a time (``transfer.upload_with``), and spread copies out of another
process's memory. In-process: this process stands for a worker."""

import os
import threading

import numpy as np
import pytest

import clkernels
from clkernels.host.core import transfer

pytest.importorskip("distributed")
from clkernels.host.distributed import crossmem  # noqa: E402

MB = 1 << 20


def test_lent_blocks_come_back_for_the_next_call(arena_state):
    a = arena_state.empty("c1", (3 * MB // 8,), np.int64)
    assert a.shape == (3 * MB // 8,) and a.dtype == np.int64 and a.flags.c_contiguous and a.flags.writeable
    assert arena_state.kept() == (0, 4 * MB)                # a block of whole 2 MiB pieces, lent
    a[:] = 7
    addr = a.ctypes.data
    small = arena_state.empty("c1", (100,), np.float32)     # below MIN_BYTES: numpy's own
    assert small.base is None and arena_state.kept() == (0, 4 * MB)
    b = arena_state.empty("c2", (MB,), np.uint8)            # another call's, while c1 holds its block
    assert not np.shares_memory(a, b)
    arena_state.release("c1")
    assert arena_state.kept() == (4 * MB, 2 * MB)
    c = arena_state.empty("c3", (2 * MB,), np.uint8)         # the kept block again: the smallest that holds it
    assert c.ctypes.data == addr and arena_state.kept() == (0, 6 * MB)
    arena_state.release("c2")
    arena_state.release("c3")
    assert arena_state.kept() == (6 * MB, 0)


def test_a_running_task_keeps_its_blocks_past_the_end(arena_state):
    with arena_state.lending("c"):
        a = transfer.host_empty((MB,), np.uint8)       # the library's result arrays come from the call
        assert arena_state.kept() == (0, 2 * MB)
        arena_state.release("c")                             # the call ends while its task still runs
        assert arena_state.kept() == (0, 2 * MB)
        a[:] = 1
    assert arena_state.kept() == (2 * MB, 0)
    with arena_state.lending("c"):                           # a late task of the ended call lends nothing
        b = transfer.host_empty((MB,), np.uint8)
        assert b.base is None and arena_state.kept() == (2 * MB, 0)
    assert transfer.host_empty((MB,), np.uint8).base is None and arena_state.kept() == (2 * MB, 0)
    with pytest.raises(ZeroDivisionError):             # a task that fails gives its blocks back at the end
        with arena_state.lending("d"):
            transfer.host_empty((MB,), np.uint8)       # the kept block
            transfer.host_empty((MB,), np.uint8)       # and a new one
            arena_state.release("d")
            assert arena_state.kept() == (0, 4 * MB)
            1 / 0
    assert arena_state.kept() == (4 * MB, 0) and not arena_state._running


def test_kept_bytes_are_bounded(arena_state, monkeypatch):
    monkeypatch.setattr(arena_state, "KEEP_BYTES", 5 * MB)
    for k in range(4):
        arena_state.empty(k, (MB,), np.uint8)
    for k in range(4):
        arena_state.release(k)
    assert arena_state.kept() == (4 * MB, 0)                 # the oldest dropped past 5 MiB
    arena_state.limit(None)                                  # no dask memory limit: unchanged
    assert arena_state.KEEP_BYTES == 5 * MB
    arena_state.limit(8 * MB)                                # a quarter of the worker's limit
    assert arena_state.KEEP_BYTES == 2 * MB and arena_state.kept() == (2 * MB, 0)
    arena_state.trim()
    assert arena_state.kept() == (0, 0)


def test_kept_and_lent_within_the_bound(arena_state, monkeypatch):
    """Before a new block is made, the oldest kept blocks go until kept and
    lent fit KEEP_BYTES (kept blocks that fit no request of a call must not
    grow the worker past it)."""
    monkeypatch.setattr(arena_state, "KEEP_BYTES", 10 * MB)
    for k, m in enumerate((2, 4)):
        arena_state.empty(k, (m * MB,), np.uint8)
        arena_state.release(k)
    assert arena_state.kept() == (6 * MB, 0)
    arena_state.empty("c", (3 * MB,), np.uint8)              # takes the 4 MiB block
    assert arena_state.kept() == (2 * MB, 4 * MB)
    arena_state.empty("c", (6 * MB,), np.uint8)              # none fits: 2 + 4 + 6 > 10, the 2 MiB block goes
    assert arena_state.kept() == (0, 10 * MB)


def test_small_arrays_leave_large_blocks(arena_state):
    arena_state.empty("a", (32 * MB,), np.uint8)
    arena_state.release("a")
    b = arena_state.empty("b", (MB,), np.uint8)              # a new block: the 32 MiB one waits for its kind
    assert arena_state.kept() == (32 * MB, 2 * MB)
    c = arena_state.empty("b", (20 * MB,), np.uint8)         # less than twice: taken
    assert arena_state.kept() == (0, 34 * MB) and not np.shares_memory(b, c)


def test_release_trims_above_dask_target(arena_state, monkeypatch):
    """A worker above dask's memory target gives back what it kept (dask
    cannot spill it; a paused worker would run no further task)."""
    import asyncio
    from types import SimpleNamespace

    import psutil

    from clkernels.host.distributed import transport
    arena_state.empty("a", (MB,), np.uint8)
    arena_state.release("a")
    worker = SimpleNamespace(memory_manager=SimpleNamespace(memory_limit=None, memory_target_fraction=0.6),
                             monitor=SimpleNamespace(get_process_memory=lambda: psutil.Process().memory_info().rss))
    assert not transport._over_target(worker)          # no limit
    worker.memory_manager.memory_limit = MB
    worker.memory_manager.memory_target_fraction = False
    assert not transport._over_target(worker)          # no target, no spill fraction
    worker.memory_manager.memory_target_fraction = 0.6
    worker.memory_manager.memory_limit = 1 << 50
    asyncio.run(transport._release("b", dask_worker=worker))
    assert arena_state.kept() == (2 * MB, 0)
    worker.memory_manager.memory_limit = MB            # this process is far above 0.6 MiB
    assert transport._over_target(worker)
    asyncio.run(transport._release("b", dask_worker=worker))
    assert arena_state.kept() == (0, 0)


@pytest.mark.parametrize("staged", [False, True])
@pytest.mark.parametrize("n", [0, 5, 3 * MB + 17])
def test_upload_with(rng, monkeypatch, staged, n):
    """A device array filled a piece at a time from a host source: into the
    mapped buffer (devices that share host memory) or through the staging
    chunks (forced here on the CPU device, in pieces of 1 MiB)."""
    dev = clkernels.Device(os.environ.get("CLKERNELS_TEST_DEVICES", "").split(",")[0].strip() or None)
    monkeypatch.setattr(dev, "staged_io", staged)
    monkeypatch.setattr(transfer, "CHUNK_BYTES", MB)
    src = rng.integers(0, 255, n, dtype=np.uint8)
    seen = []

    def fill(dst, off):
        seen.append((off, dst.size))
        dst[...] = src[off:off + dst.size]
    a = transfer.upload_with(dev, (n // 4,), np.float32, fill)
    assert a.shape == (n // 4,)
    np.testing.assert_array_equal(a.get().view(np.uint8), src[:n // 4 * 4])
    covered = sorted(seen)
    assert sum(m for _, m in covered) == n // 4 * 4 and all(o1 + m1 == o2 for (o1, m1), (o2, _) in
                                                           zip(covered, covered[1:]))
    if staged and n > MB:
        assert len(seen) == -(-(n // 4 * 4) // MB)


@pytest.fixture
def lanes_of(monkeypatch):
    """A Device with the staging lanes forced (as on GPUs) in chunks of 1000
    bytes, ``lanes`` copy threads (an executor of their own, shut down after)."""
    def make(lanes):
        dev = clkernels.Device(os.environ.get("CLKERNELS_TEST_DEVICES", "").split(",")[0].strip() or None)
        monkeypatch.setattr(dev, "staged_io", True)
        monkeypatch.setattr(transfer, "LANES", lanes)
        monkeypatch.setattr(transfer, "_executor", None)
        monkeypatch.setattr(transfer, "CHUNK_BYTES", 1000)
        monkeypatch.setattr(transfer, "SMALL_BYTES", 64)
        return dev
    yield make
    if transfer._executor is not None:
        transfer._executor.shutdown()


@pytest.mark.parametrize("lanes", [1, 3, 8])
def test_staged_lanes(rng, lanes_of, lanes):
    """Uploads and downloads through the staging lanes: chunks that divide
    neither the array nor its elements, more chunks than lanes, fewer, one; a
    download of an array at an offset; a strided one is refused."""
    dev = lanes_of(lanes)
    for n in (17, 250, 251, 2 * lanes * 250 + 3, 20011):
        src = rng.integers(0, 1 << 62, n)
        a = transfer.upload(dev, src)
        np.testing.assert_array_equal(a.get(), src)
        np.testing.assert_array_equal(transfer.download(dev, a), src)
        np.testing.assert_array_equal(transfer.download(dev, a[5:]), src[5:])
    with pytest.raises(ValueError, match="contiguous"):
        transfer.download(dev, a[1::2])


def test_staged_lanes_threads(lanes_of):
    """Four threads uploading and downloading at once, on the device's queue
    and its side queue (each thread its own staging chunks, one executor)."""
    dev = lanes_of(3)
    bad = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(15):
            src = r.integers(0, 1 << 62, int(r.integers(10, 20000)))
            a = transfer.upload(dev, src)
            b = transfer.upload(dev, src[::-1].copy(), queue=dev.side_queue)
            if not (np.array_equal(transfer.download(dev, a, queue=dev.side_queue), src)
                    and np.array_equal(transfer.download(dev, b), src[::-1])
                    and np.array_equal(transfer.download(dev, a[3:]), src[3:])):
                bad.append(seed)
    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_staged_fill_that_transfers(lanes_of):
    """A fill that itself uploads (inside a lane) takes the plain copy, not
    the lanes (whose threads and staging chunks its own lane holds)."""
    dev = lanes_of(2)
    inner = np.arange(500, dtype=np.int64)                 # 4000 bytes: staged outside a lane

    def fill(dst, off):
        got = transfer.upload(dev, inner).get()
        dst[...] = got.view(np.uint8)[:dst.size] if off == 0 else 7
    got = []
    t = threading.Thread(target=lambda: got.append(transfer.upload_with(dev, (5000,), np.uint8, fill)),
                         daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "upload_with hangs: a lane waits for lanes queued behind it"
    a = got[0]
    want = np.full(5000, 7, np.uint8)
    want[:1000] = inner.view(np.uint8)[:1000]
    np.testing.assert_array_equal(a.get(), want)


def test_staged_lane_error(lanes_of):
    """A fill that raises in one lane raises from upload_with, once every
    lane has stopped."""
    dev = lanes_of(4)
    filled = []

    def fill(dst, off):
        if off == 5000:
            raise OSError("gone")
        dst[...] = 1
        filled.append(off)
    with pytest.raises(OSError, match="gone"):
        transfer.upload_with(dev, (10000,), np.uint8, fill)
    n = len(filled)
    assert 5000 not in filled and n >= 1
    transfer._pool().submit(lambda: None).result()
    assert len(filled) == n                             # nothing filled after the raise


@pytest.mark.parametrize("n", [0, 1, 4097, (crossmem.MIN_SPREAD_BYTES >> 3) * 5 + 3,
                               (crossmem.CHUNK_BYTES >> 3) * 2 + 1])
def test_spread_reads(rng, n):
    """A copy out of a process's memory spread over the threads equals the source."""
    a = rng.integers(0, 1 << 62, n)
    dst = np.zeros_like(a)
    np.testing.assert_array_equal(crossmem.read(os.getpid(), a.ctypes.data, dst, spread=True), a)


@pytest.fixture
def hostmem_state(monkeypatch):
    """The result cache empty before and after, bound to 64 MiB (a worker
    run in this process may have lowered the bound for good)."""
    from clkernels.host.core import hostmem
    monkeypatch.setattr(hostmem, "KEEP_BYTES", 64 << 20)
    hostmem.trim()
    yield hostmem
    hostmem.trim()


def test_dropped_results_are_kept(hostmem_state, monkeypatch):
    """A large result's block is kept once every array viewing it is gone and
    the next result of about its size takes it; small results are numpy's;
    the bound frees the oldest; trim frees all."""
    hm = hostmem_state
    monkeypatch.setattr(hm, "KEEP_BYTES", 5 * hm.MIN_BYTES)
    n = hm.MIN_BYTES // 8
    assert transfer.host_empty(n - 1, np.int64).base is None            # below MIN_BYTES
    a = transfer.host_empty((n, 1), np.int64)
    assert isinstance(a.base, hm.Lease) and a.flags.writeable and a.flags.c_contiguous
    a[:] = 7
    view, addr = a[5:], a.ctypes.data
    del a
    assert hm.kept() == 0                                               # a view still holds it
    b = transfer.host_empty(n, np.int64)
    assert b.ctypes.data != addr
    del view
    assert hm.kept() > 0
    assert not hm.warm(b) and not hm.warm(np.zeros(3))
    c = transfer.host_empty(n, np.float64)                              # fits: taken again
    assert c.ctypes.data == addr and hm.kept() == 0 and hm.warm(c) and hm.warm(c[3:].reshape(-1, 1))
    del b, c
    big = [transfer.host_empty(3 * n, np.int64) for _ in range(2)]       # 6 MIN_BYTES: the bound drops one
    del big
    assert 0 < hm.kept() <= 5 * hm.MIN_BYTES
    hm.trim()
    assert hm.kept() == 0
    monkeypatch.setattr(hm, "KEEP_BYTES", 0)
    assert transfer.host_empty(n, np.int64).base is None                # no cache


def test_downloads_in_kept_memory(hostmem_state, rng):
    """Downloads into kept blocks are the device's data, call after call."""
    dev = clkernels.Device(os.environ.get("CLKERNELS_TEST_DEVICES", "").split(",")[0].strip() or None)
    n = hostmem_state.MIN_BYTES // 4 + 3
    for _ in range(3):
        src = rng.integers(0, 1 << 30, n, dtype=np.int32)
        got = transfer.download(dev, transfer.upload(dev, src))
        assert isinstance(got.base, hostmem_state.Lease)
        np.testing.assert_array_equal(got, src)
        del got


class _Reg:
    """A stand-in registration: counts its releases."""

    def __init__(self, log):
        self.log = log

    def release(self):
        self.log.append("released")


def test_kept_blocks_registered_once(hostmem_state):
    """Only blocks kept from an earlier result are registered, once, under one
    key; a refused registration is not asked again; freeing a kept block
    releases its registration."""
    hm, log = hostmem_state, []

    def make(block):
        log.append(("made", block.nbytes))
        return _Reg(log)

    def refuse(block):
        log.append("refused")
        raise RuntimeError("no")

    n = hm.MIN_BYTES // 8
    a, other = transfer.host_empty(n, np.int64), transfer.host_empty(2 * n, np.int64)
    assert not hm.register(a, 1, make) and log == []                   # fresh memory: not registered
    assert not hm.register(np.zeros(n), 1, make) and log == []         # not the cache's
    del a, other
    b = transfer.host_empty(n, np.int64)
    assert hm.warm(b)
    assert hm.register(b[7:], 1, make) and hm.register(b, 1, make) and log == [("made", hm.MIN_BYTES)]
    assert hm.register(b, 1, None) and not hm.register(b, 2, None)
    assert hm.register(b, 2, make) and log[1:] == ["released", ("made", hm.MIN_BYTES)]   # one key at a time
    assert not hm.register(b, 1, None) and hm.register(b, 2, None)
    del log[1:3]
    c = transfer.host_empty(2 * n, np.int64)
    assert not hm.register(c, 1, None) and log == [("made", hm.MIN_BYTES)]   # asked only: nothing made
    assert not hm.register(c, 1, refuse) and not hm.register(c, 1, refuse) and log[1:] == ["refused"]
    del b, c
    d = transfer.host_empty(n, np.int64)                                # the same block, still registered
    assert hm.register(d, 2, make) and len(log) == 2
    del d
    hm.trim()
    assert log[2:] == ["released"] and hm._regs == {}
    e = transfer.host_empty(n, np.int64)
    del e
    f = transfer.host_empty(n, np.int64)
    assert hm.register(f, 1, make)
    del f
    hm.limit(0)                                                         # the bound's release path
    assert log[-1] == "released" and hm._regs == {}


def test_downloads_into_registered_memory(hostmem_state, rng, monkeypatch):
    """With the device's driver said to pin registered memory, downloads into
    kept blocks take one plain copy into them and are the device's data, call
    after call (the copy path NVIDIA's GPUs take, run on the test device)."""
    dev = clkernels.Device(os.environ.get("CLKERNELS_TEST_DEVICES", "").split(",")[0].strip() or None)
    monkeypatch.setattr(dev, "staged_io", True)
    monkeypatch.setattr(dev, "registers_host", True)
    lanes = transfer._lanes
    n = hostmem_state.MIN_BYTES // 4 + 3
    for k in range(3):
        src = rng.integers(0, 1 << 30, n, dtype=np.int32)
        d = transfer.upload(dev, src)
        if k:                               # registered: no staging lane may run
            monkeypatch.setattr(transfer, "_lanes", lambda *a: pytest.fail("staged"))
        got = transfer.download(dev, d[1:])
        regs = list(hostmem_state._regs.values())
        assert (len(regs) == 1 and regs[0][1] is not None) == (k > 0)
        np.testing.assert_array_equal(got, src[1:])
        back = transfer.upload(dev, got[2:])                      # fed back: from the registered block
        np.testing.assert_array_equal(back.get(), src[3:])
        monkeypatch.setattr(transfer, "_lanes", lanes)
        del got, back
    hostmem_state.trim()
    assert hostmem_state._regs == {}


def test_result_freed_inside_the_cache_lock(hostmem_state):
    """A result collected by the GC while the cache's lock is held (a cycle
    collected inside it) comes back later instead of deadlocking."""
    import gc

    hm = hostmem_state
    a = transfer.host_empty(hm.MIN_BYTES // 8, np.int64)
    cycle = [a]
    cycle.append(cycle)
    del a, cycle
    with hm._lock:
        gc.collect()
    assert hm.kept() == hm.MIN_BYTES
