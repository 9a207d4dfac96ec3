"""Scale-out on dask.distributed (issue 19), the machinery: a worker killed
mid-run changes nothing, the client's and the workers' memory transports
(cross-memory reads, their retries and fence, the memory-file fallback) keep
nothing after a call, and calls without ``client`` never import dask. The
cluster: tests/cluster.py."""

import mmap
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import clkernels
from cluster import SPEC, client, dev, own_client, pair_set, random_boxes, same_result  # noqa: F401 (fixtures)
from helpers import uniform

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


def _on_workers(client, fn):
    """``client.run(fn)`` once the cluster has its two workers again: a
    killed worker can stay listed for a moment after its replacement joined
    (a broadcast to it fails: "Address removed")."""
    deadline = time.time() + 60
    while True:
        try:
            got = client.run(fn)
            if len(got) == 2 or time.time() > deadline:
                return got
        except OSError:                 # distributed's CommClosedError
            if time.time() > deadline:
                raise
        time.sleep(0.1)


def _killing_a_worker(client, call):
    """``call()``'s result, one worker SIGKILLed while it runs; then both
    workers back, no memory file left. A call that ends before the kill
    could land (a fast device: the sizes are for CPU devices) skips, once
    its result was checked to exist and nothing leaked; an error raises."""
    out = {}

    def run_call():
        try:
            out["res"] = call()
        except BaseException as e:          # re-raised below
            out["err"] = e

    run = threading.Thread(target=run_call)
    run.start()
    deadline = time.time() + 60
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)                       # some tasks done, most still to run
    if not run.is_alive():
        run.join()
        if "err" in out:
            raise out["err"]
        assert _shm_files() == []
        pytest.skip("the run ended before the kill (a fast device): nothing was killed mid-run")
    pids = client.run(os.getpid)
    os.kill(pids[sorted(pids)[0]], signal.SIGKILL)
    run.join(120)
    client.wait_for_workers(2, timeout=60)      # the nanny restarted it, pinned to its device again
    assert sorted(_on_workers(client, lambda: os.environ.get("CLKERNELS_DEVICE")).values()) == [SPEC, SPEC]
    assert _shm_files() == []
    if "err" in out:
        raise out["err"]
    return out["res"]


def test_worker_killed_mid_run(own_client, dev, rng):
    client = own_client
    x = uniform(rng, 6000, 3)
    ref = clkernels.pair_count(x, 0.1, device=dev)
    assert _killing_a_worker(client, lambda: clkernels.pair_count(x, 0.1, client=client, block=300)) == ref


def test_worker_killed_mid_self_join(own_client, dev, rng):
    """Slab results held on the workers until they write them into the
    client's files: a killed worker's slabs rerun, the pairs and counts are
    the single call's, nothing leaks."""
    client = own_client
    x = uniform(rng, 300000, 3)
    want = clkernels.self_join(x, 0.012, device=dev)
    got = _killing_a_worker(client, lambda: clkernels.self_join(x, 0.012, client=client, slabs=6))
    assert len(got[0]) == len(want[0]) and pair_set(*got) == pair_set(*want)
    deg = _killing_a_worker(client, lambda: clkernels.self_join(x, 0.012, output="count", client=client, slabs=6))
    np.testing.assert_array_equal(deg, clkernels.self_join(x, 0.012, output="count", device=dev))


def test_worker_killed_mid_sort(own_client, dev, rng):
    """Runs whose sorted keys come back through memory files: a killed worker's runs rerun, nothing leaks."""
    client = own_client
    keys = rng.random(1 << 23).astype(np.float32)
    offsets = np.arange(0, len(keys) + 1, 1000)
    offsets[-1] = len(keys)                      # 24 runs of 1.4 MB: above transport.MIN_BYTES
    got = _killing_a_worker(client, lambda: clkernels.segmented_sort(keys, offsets, client=client, ranges=24))
    same_result(got, clkernels.segmented_sort(keys, offsets, device=dev))


def _shm_files():
    from clkernels.host.distributed import transport
    return sorted(f for f in os.listdir(transport.ROOT) if f.startswith("clkernels-"))


def _mapped(a):
    """Whether ``a`` is a view of a memory file's mapping (it came through shared memory)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


def _nothing_kept(client):
    """Whether no worker keeps inputs or results of an ended call, nor
    lends memory to one (their release is sent without a wait: allow it a
    moment)."""
    from clkernels.host.distributed import transport
    deadline = time.time() + 10
    while True:
        kept = _on_workers(client, transport._kept)
        if all(v == (0, 0, 0) for v in kept.values()) or time.time() > deadline:
            return all(v == (0, 0, 0) for v in kept.values())
        time.sleep(0.05)


def _skip_without_memory(client):
    from clkernels.host.distributed import transport
    if not transport._crossed(client):
        pytest.skip("the kernel forbids copies between these processes (Yama ptrace_scope, seccomp)")


@pytest.mark.parametrize("memory", [True, False])
def test_host_transport(client, dev, rng, monkeypatch, memory):
    """Workers on the client's host: inputs and large results cross by
    copies between the processes' memories (``memory``) or through memory
    files (results mapped, no copy), bit for bit -- pair columns read at
    each slab's offsets, counts placed by position -- and nothing stays
    behind -- no file, nothing kept on a worker -- after a task that fails
    too."""
    from clkernels.host.distributed import transport
    if memory:
        _skip_without_memory(client)
    monkeypatch.setattr(transport, "MEMORY", memory)
    with transport.Transport(client) as T:
        assert T.mode == ("memory" if memory else "files")
        assert (T.dir is not None and os.path.isdir(T.dir)) != memory
        [big] = T.gather([T.submit(np.arange, 1 << 18, out=True)])     # 2 MiB: above MIN_BYTES
        np.testing.assert_array_equal(big, np.arange(1 << 18))
        if memory:                                                     # held until the call ends
            assert sum(v[1] for v in client.run(transport._kept).values()) == 1
    assert _shm_files() == [] and _nothing_kept(client)
    x = uniform(rng, 60000, 3)
    i, j = clkernels.self_join(x, 0.05, client=client, slabs=1)
    assert _mapped(i) != memory and _mapped(j) != memory     # files: one slab, the worker's arrays mapped
    i0, j0 = clkernels.self_join(x, 0.05, device=dev)
    assert len(i0) > 3 * (transport.MIN_BYTES // 8)          # three slabs' columns cross as arrays
    assert i.dtype == i0.dtype and pair_set(i, j) == pair_set(i0, j0)
    i, j = clkernels.self_join(x, 0.05, client=client, slabs=3)
    assert pair_set(i, j) == pair_set(i0, j0)
    xc = uniform(rng, 400000, 3)                             # three slabs' counts cross as arrays
    deg = clkernels.self_join(xc, 0.01, output="count", device=dev)
    for slabs in (1, 3):                                     # all in place at once, and placed by position
        np.testing.assert_array_equal(clkernels.self_join(xc, 0.01, output="count", client=client, slabs=slabs),
                                      deg)
    keys = rng.random(1 << 19).astype(np.float32)
    offsets = np.arange(0, len(keys) + 1, 1000)
    offsets[-1] = len(keys)
    got = clkernels.segmented_sort(keys, offsets, client=client, ranges=1)
    assert _mapped(got) != memory and got.flags.writeable
    want = clkernels.segmented_sort(keys, offsets, device=dev)
    same_result(got, want)
    same_result(clkernels.segmented_sort(keys, offsets, client=client, ranges=3), want)   # rows at offsets
    q, b = random_boxes(rng, 20000), random_boxes(rng, 20000)
    assert clkernels.rect_join(q, b, client=client) == clkernels.rect_join(q, b, device=dev)
    assert _shm_files() == [] and _nothing_kept(client)
    with pytest.raises(TypeError):                        # every task fails on its worker
        clkernels.rect_join(q, b, output="pairs", client=client, no_such_option=1)
    assert _shm_files() == [] and _nothing_kept(client)


def test_memory_reads_retried(client, dev, rng, monkeypatch):
    """A worker's results that cannot be read (as when it died after its
    task) are asked for again -- dask recomputes a lost result -- and an
    input a task shares with the call's other tasks on its worker is
    read-only there."""
    from clkernels.host.distributed import transport
    _skip_without_memory(client)
    keys = rng.random(1 << 21).astype(np.float32)           # two runs of 4 MiB: read, not in dask's reply
    offsets = np.arange(0, len(keys) + 1, 1000)
    offsets[-1] = len(keys)
    want = clkernels.segmented_sort(keys, offsets, device=dev)
    x = uniform(rng, 60000, 3)
    pairs = pair_set(*clkernels.self_join(x, 0.05, device=dev))
    read = transport.Remote.read
    left = [0]

    def flaky(self, dst=None):
        if left[0]:
            left[0] -= 1
            raise ProcessLookupError(3, "No such process")
        return read(self, dst)
    monkeypatch.setattr(transport.Remote, "read", flaky)
    for fails in (1, transport.RETRIES):
        left[0] = fails
        same_result(clkernels.segmented_sort(keys, offsets, client=client, ranges=2), want)
        assert left[0] == 0
        left[0] = fails
        assert pair_set(*clkernels.self_join(x, 0.05, client=client, slabs=2)) == pairs
        assert left[0] == 0
    left[0] = transport.RETRIES + 1
    with pytest.raises(OSError):
        clkernels.segmented_sort(keys, offsets, client=client, ranges=2)
    monkeypatch.setattr(transport.Remote, "read", read)
    with transport.Transport(client) as T:
        [h] = T.put([keys])
        assert T.submit(lambda a: (a.flags.writeable, float(a.sum())), h).result() == (False, float(keys.sum()))
        with pytest.raises(TypeError):
            T.put([np.array([object()] * 3)])
    assert _nothing_kept(client)


def test_memory_fence(client, rng, monkeypatch, arena_state):
    """A worker that missed an ended call's release (one restarted after a
    crash while the message went out) keeps nothing of it: it reads the
    call's fence in the client's memory first; one that holds an ended
    call's arrays, or lends it memory, drops them when it next keeps
    something (a task that finds the fence gone, at once)."""
    import collections

    from clkernels.host.distributed import transport
    arena = arena_state
    _skip_without_memory(client)
    for name, fresh in (("_ended", collections.OrderedDict()), ("_held", {}), ("_inputs", {})):
        monkeypatch.setattr(transport, name, fresh)                   # this process as a worker
    a = rng.random(1000)
    with transport.Transport(client) as T:
        [h] = T.put([a])
        call = T.call
        assert transport._live(call)
        np.testing.assert_array_equal(transport._fetch(h), a)        # here, as on a worker
    assert not transport._live(call)
    monkeypatch.setattr(transport, "_ended", collections.OrderedDict())   # a worker the release missed
    assert transport._kept() == (1, 0, 0)                     # the input read above
    with pytest.raises(RuntimeError):
        transport._fetch(h)
    assert transport._kept() == (0, 0, 0)                     # dropped by the read that found the fence gone
    with pytest.raises(RuntimeError):
        transport._hold(call, a)
    assert transport._kept() == (0, 0, 0)
    with transport.Transport(client) as T1, transport.Transport(client) as T2:
        transport._hold(T1.call, a)
        transport._hold(T2.call, a)
        T1._nonce[0] = 0                                     # T1's client gone without a release
        transport._hold(T2.call, a)                          # the next keep drops what T1 left
        assert transport._kept() == (0, 2, 0)
    big = 1 << 21
    with transport.Transport(client, lend=True) as T:        # a task's lent memory, its call ended mid-task
        with arena.lending(T.call):
            r = transfer_empty(big)
            T._nonce[0] = 0
            with pytest.raises(RuntimeError):
                transport._hold(T.call, r)                   # finds the fence gone: the call's blocks go back...
            assert transport._kept()[2] == big
        assert transport._kept()[2] == 0                     # ...once the task ends
    with transport.Transport(client, lend=True) as T1, transport.Transport(client) as T2:
        with arena.lending(T1.call):
            transfer_empty(big)
        T1._nonce[0] = 0                                     # ended without a release, nothing held
        assert transport._kept()[2] == big
        transport._hold(T2.call, a)                          # the next keep sweeps the lent blocks too
        assert transport._kept() == (0, 1, 0)


def transfer_empty(nbytes):
    from clkernels.host.core.transfer import host_empty
    return host_empty((nbytes,), np.uint8)


def test_crossmem(rng):
    """Copies out of a process's memory: this one's (always allowed), in
    chunks on threads; an unmapped range or a process that is gone raises."""
    from clkernels.host.distributed import crossmem
    for n in (0, 1, 4097, (crossmem.CHUNK_BYTES >> 3) * 2 + 3):
        a = rng.integers(0, 1 << 62, n)
        np.testing.assert_array_equal(crossmem.read(os.getpid(), a.ctypes.data, np.empty_like(a)), a)
    assert crossmem.probe(*crossmem.token())
    pid, addr, tok = crossmem.token()
    assert not crossmem.probe(pid, addr, bytes(64 - len(tok)) + b"x" * len(tok))
    with pytest.raises(OSError):
        crossmem.read(os.getpid(), 8, np.empty(16, np.uint8))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(OSError):
        crossmem.read(child.pid, addr, np.empty(16, np.uint8))
    with pytest.raises(ValueError):
        crossmem.read(os.getpid(), addr, np.empty((4, 4), np.uint8)[:, ::2])
    import ctypes
    c = crossmem.CHUNK_BYTES
    m = mmap.mmap(-1, 3 * c)                                 # its middle chunk unmapped: one chunk of three fails
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    assert ctypes.CDLL(None).munmap(ctypes.c_void_p(base + c), ctypes.c_size_t(c)) == 0
    with pytest.raises(OSError):
        crossmem.read(os.getpid(), base, np.empty(3 * c, np.uint8))


def test_shm_fallback(client, dev, rng, monkeypatch):
    """dask's own transfer: with shared memory off, and where a worker can
    neither read the client's memory nor see its memory files (as on
    another host)."""
    import weakref

    from clkernels.host.distributed import transport
    x = uniform(rng, 20000, 3)
    keys = rng.random(1 << 18).astype(np.float32)
    offsets = np.array([0, 1000, 50000, len(keys)])
    want = (pair_set(*clkernels.self_join(x, 0.03, device=dev)), clkernels.segmented_sort(keys, offsets, device=dev),
            clkernels.pair_count(x, 0.05, device=dev))
    monkeypatch.setattr(transport, "_sees", weakref.WeakKeyDictionary())
    assert transport._local(client, os.path.join(transport.ROOT, "clkernels-seen-by-no-worker")) is False
    reads = weakref.WeakKeyDictionary()
    reads[client] = {w: False for w in client.nthreads()}
    monkeypatch.setattr(transport, "_reads", reads)
    for shm in (True, False):                            # the probes' answers (cached), then SHM off
        monkeypatch.setattr(transport, "SHM", shm)
        with transport.Transport(client) as T:
            assert T.dir is None and T.mode == "dask"
        i, j = clkernels.self_join(x, 0.03, client=client, slabs=1)
        assert not _mapped(i) and pair_set(i, j) == want[0]
        got = clkernels.segmented_sort(keys, offsets, client=client, ranges=1)
        assert not _mapped(got)
        same_result(got, want[1])
        same_result(clkernels.segmented_sort(keys, offsets, client=client, ranges=3), want[1])
        assert clkernels.pair_count(x, 0.05, client=client) == want[2]
    assert _shm_files() == []


def test_no_dask_without_client():
    code = ("import sys, numpy as np, clkernels\n"
            "x = np.random.default_rng(0).random((200, 3)).astype(np.float32)\n"
            "clkernels.pair_count(x, 0.2)\n"
            "bad = [m for m in ('dask', 'distributed') if m in sys.modules]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CLKERNELS_DEVICE=SPEC))
    assert r.returncode == 0, r.stderr[-2000:]
