"""Arrays between the client and the workers of its own host past dask's
comms: copies between the processes' memories, or memory files.

dask moves numpy arrays between processes through its comms (TCP, by way of
the scheduler: about 0.4-0.5 GB/s here). Workers on the client's host take
one of two ways instead, decided per call (``mode``):

* **memory** (where the client and every worker may read each other's
  memory: :mod:`.crossmem`, asked once per worker address and cached per
  client; ``MEMORY``): an array crosses as a :class:`Remote` (pid, address,
  dtype, shape) and the reader copies it out of the owner's memory in one
  copy, into memory of its own. The client's inputs stay in its memory for
  the whole call; a worker reads each once for all the call's tasks it runs
  (read-only there: the tasks share it; a task rerun on another worker
  after a worker died reads it again), or a task reads only its rows of one
  (:meth:`Transport.rows`), with ``device`` straight into its device's
  memory (the buffer mapped where the device shares host memory, page-locked
  staging chunks elsewhere: no copy on the worker's host). The large arrays
  a task makes for a call whose results the client reads before it ends
  (``lend``) take memory the worker kept from its earlier calls
  (:mod:`.arena`). Large results stay on their worker,
  held until the call ends, and the client reads them: into fresh arrays
  (:meth:`Transport.gather`), into one array a column at each task's
  offsets (:meth:`Transport.columns`), or placed by position
  (:meth:`Transport.placed`). A read that fails (the worker was lost after
  its task) asks dask for the result again, which recomputes it. Closing
  the transport tells every worker to drop what it keeps for the call (its
  run on the workers not awaited) and clears the call's fence, a nonce in the
  client's memory that a worker reads before it keeps anything for the call,
  so that a late task -- on a worker restarted after the message went out,
  too -- keeps nothing, and a worker drops what it keeps for calls whose
  fence is gone (a client that died, a message lost) when it next keeps
  something. Each worker holds a private copy of the inputs for the call
  (memory files shared their pages), and held results are outside dask's
  memory accounting (not spilled).
  On the CI machine 64 MiB cross in ~11 ms this way, against ~35 ms to write
  a fresh memory file (tmpfs allocates 4 KiB pages) and ~9 ms to unlink it.
* **files** under ``/dev/shm`` (tmpfs, where POSIX ``shm_open`` keeps its
  blocks on Linux): the sender writes an array into a file once and sends a
  small :class:`Handle` (path, dtype, shape); the receiver maps the file
  copy-on-write, without a copy (a writable array; its writes stay
  private). The call's files all lie in a directory of its own,
  ``/dev/shm/clkernels-<random>``: its inputs, written by the client and
  mapped by every task that reads them, and the results the tasks write for
  the client, which it maps and unlinks at once (the mapping keeps the
  pages while the array lives); results for :meth:`Transport.columns` are
  written by the workers at their offsets into one file per column, those
  for :meth:`Transport.placed` at their positions of one file, in
  parallel. Closing the transport removes the directory and everything in
  it; a task still running then finds the directory gone and cannot leave a
  file behind. A directory rather than flat
  ``multiprocessing.shared_memory`` blocks gives that fence, and nothing
  registers with multiprocessing's resource_tracker (which, shared by a
  LocalCluster's processes, would unlink or report blocks handed from one
  process to another). A killed client leaves its directory behind. Files
  are used only when every worker sees the call's directory (asked once per
  worker address and cached per client).

Workers on other hosts get dask's own transfer: inputs scattered to every
worker, results gathered through dask; so does every call while ``SHM`` is
False. Calls whose results stay on the workers (``collect=False``) read
their inputs as above too and return once the workers hold the results
(:meth:`Transport.hold`): a worker lost after that loses its part, which dask
could not recompute from scattered inputs either (tried: "lost
dependencies").
"""

import collections
import concurrent.futures
import contextlib
import errno
import mmap
import os
import shutil
import threading
import uuid
import weakref

import numpy as np
import pyopencl.array as cla

from ..core import hostmem
from ..core.device import as_device, default_device
from ..core.transfer import download, host_empty, upload_with
from . import arena, crossmem
from .common import concat

ROOT = "/dev/shm"
SHM = True            # False: every call uses dask's transfer
MEMORY = True         # False: memory files even where the processes may read each other's memory
MIN_BYTES = 1 << 20   # smaller results ride in dask's reply (inputs never do: no scatter round trip)
RETRIES = 3           # reads of a worker's results, each after dask recomputed them (the worker was lost)
_ROWS = "clkernels.rows"  # marks (_ROWS, future, lo, hi): rows of a scattered input, sliced in the task

_sees = weakref.WeakKeyDictionary()     # client -> {worker address: it sees the client's /dev/shm}
_reads = weakref.WeakKeyDictionary()    # client -> {worker address: client and worker read each other's memory}

# worker side of the memory mode: the client's inputs, read once for all of
# a call's tasks on the worker; results held until the call ends; the calls
# ended (a late task of one keeps nothing)
_lock = threading.Lock()
_inputs = {}                        # (call, k) -> _Input
_held = {}                          # call -> [arrays]
_ended = collections.OrderedDict()  # call -> None, the last ENDED_KEEP
ENDED_KEEP = 4096


class Handle:
    """An array in the memory file ``path`` (``rows``: (lo, hi), those rows
    of it): what crosses dask's comms instead."""

    __slots__ = ("path", "dtype", "shape", "rows")

    def __init__(self, path, dtype, shape, rows=None):
        self.path, self.dtype, self.shape, self.rows = path, dtype, shape, rows


class Remote:
    """An array at ``addr`` in the memory of process ``pid`` of this host
    (the client's input, a worker's result), read with one copy
    (:mod:`.crossmem`): what crosses dask's comms instead. ``key`` (call,
    k): the call's k-th input, which a worker reads once for all its tasks
    of the call (k from 1; the call: its client's pid, the address and
    value of its fence, :func:`_live`). ``part``: rows of such an input for
    one task, read by that task alone, ``"host"`` into host memory or
    ``"device"`` into its device's (:meth:`Transport.rows`)."""

    __slots__ = ("pid", "addr", "dtype", "shape", "key", "part")

    def __init__(self, pid, addr, dtype, shape, key=None, part=None):
        self.pid, self.addr, self.dtype, self.shape, self.key, self.part = pid, addr, dtype, shape, key, part

    def __len__(self):
        return self.shape[0]

    def rows(self, lo, hi, device=False):
        """Rows lo:hi of this input, for one task (into its device's memory with ``device``)."""
        step = int(np.prod(self.shape[1:], dtype=np.int64)) * np.dtype(self.dtype).itemsize
        return Remote(self.pid, self.addr + lo * step, self.dtype, (hi - lo,) + tuple(self.shape[1:]), self.key,
                      "device" if device else "host")

    def read(self, dst=None):
        """The array, read into ``dst`` (C-contiguous, of its size) or a new one."""
        if dst is None:
            dst = host_empty(self.shape, self.dtype)
        elif dst.dtype != self.dtype or dst.size != int(np.prod(self.shape)):
            raise ValueError(f"a read of {self.shape} {self.dtype} into {dst.shape} {dst.dtype}")
        crossmem.read(self.pid, self.addr, dst, spread=hostmem.warm(dst))    # threads only into touched memory
        return dst


class Sink:
    """Where a task's large results go: files in the call's directory
    ``dir``, or held in the worker's memory for the call ``call``."""

    __slots__ = ("dir", "call")

    def __init__(self, dir=None, call=None):
        self.dir, self.call = dir, call


class _Input:
    __slots__ = ("lock", "array")

    def __init__(self):
        self.lock, self.array = threading.Lock(), None


def _live(call):
    """Whether the call ``call`` -- (client pid, address, nonce) -- is still
    running: its client holds the nonce at that address until the call
    ends. A worker that joined after the call's release was sent (one
    restarted after a crash) learns it here, before it keeps anything."""
    pid, addr, nonce = call
    word = np.empty(1, np.uint64)
    try:
        crossmem.read(pid, addr, word)
    except OSError:
        return False
    return int(word[0]) == nonce


def _sweep():
    """Drop what this worker keeps or lends for calls no longer running
    (their client ended them or died, and their release never came); under
    _lock."""
    for call in {k[0] for k in _inputs} | set(_held) | arena.calls():
        if not _live(call):
            _drop(call)


def _drop(call):
    _ended[call] = None
    while len(_ended) > ENDED_KEEP:
        _ended.popitem(last=False)
    _held.pop(call, None)
    for k in [k for k in _inputs if k[0] == call]:
        del _inputs[k]
    arena.release(call)


def _fetch(h):
    """The client's input ``h`` (a :class:`Remote`) on this worker: read
    once for the call's tasks here, read-only (the tasks share it). The
    call's fence is read again after the copy: the client clears it before
    it frees its inputs, so a copy followed by a live fence saw them whole."""
    call = h.key[0]
    if not _live(call):
        raise _gone(call)
    ended = RuntimeError("the call this input belongs to has ended")
    with _lock:
        if call in _ended:
            raise ended
        slot = _inputs.get(h.key)
        if slot is None:
            _sweep()                   # may find this call ended since the check above
            if call in _ended:
                raise ended
            slot = _inputs[h.key] = _Input()
    with slot.lock:
        if slot.array is None:
            a = h.read(host_empty(h.shape, h.dtype))    # lent memory in a lending call's task
            if not _live(call):
                raise _gone(call)
            a.flags.writeable = False
            slot.array = a
        return slot.array


def _part(h):
    """The rows ``h`` (a part :class:`Remote`) of the client's input, read
    for this task alone: into the worker's device memory (a device array:
    the buffer mapped where the device shares host memory, else page-locked
    staging chunks, :func:`..core.transfer.upload_with`) or into host
    memory; the call's fence read before and after the copy, as
    :func:`_fetch` does."""
    call = h.key[0]
    if not _live(call):
        raise _gone(call)
    if h.part == "device":
        # the Device a call on the array resolves from its queue: one pool and staging set for the task
        a = upload_with(as_device(default_device().queue), h.shape, h.dtype,
                        lambda dst, off: crossmem.read(h.pid, h.addr + off, dst, spread=True))
    else:
        a = h.read(host_empty(h.shape, h.dtype))
    if not _live(call):
        raise _gone(call)
    return a


def _gone(call):
    """The error for a task that found the call ``call`` ended (its fence
    cleared), which this worker drops now."""
    with _lock:
        _drop(call)
    return RuntimeError("the call this input belongs to has ended")


def _hold(call, a):
    """``a`` kept on this worker until the call ``call`` ends: its
    :class:`Remote` (a call that has ended raises: nothing to keep)."""
    a = np.ascontiguousarray(a)
    live = _live(call)
    with _lock:
        if call in _ended or not live:
            _drop(call)
            raise RuntimeError("the call this result belongs to has ended")
        _sweep()                       # may find this call ended since the check above
        if call in _ended:
            raise RuntimeError("the call this result belongs to has ended")
        _held.setdefault(call, []).append(a)
    return Remote(os.getpid(), a.ctypes.data, a.dtype, a.shape)


async def _release(call, dask_worker=None):
    """On a worker (its event loop: ``client.run(..., wait=False)``): drop
    what the call ``call`` kept here; a late task of it keeps nothing (nor
    does one on a worker this message missed: :func:`_live`). A worker
    above dask's memory target gives back the memory it kept for later
    calls (:func:`.arena.trim`: dask cannot spill it, and a worker paused
    above its pause threshold would not run another task)."""
    with _lock:
        _drop(call)
    if dask_worker is not None and _over_target(dask_worker):
        arena.trim()


def _over_target(worker):
    """Whether ``worker``'s process uses more of its memory limit than dask
    aims at (its target fraction, else its spill fraction; neither: no)."""
    mm = getattr(worker, "memory_manager", None)
    limit = getattr(mm, "memory_limit", None)
    frac = getattr(mm, "memory_target_fraction", None) or getattr(mm, "memory_spill_fraction", None)
    return bool(limit and frac) and worker.monitor.get_process_memory() > frac * limit


async def _send_release(client, call):
    """On ``client``'s event loop: the release of ``call`` to every worker
    (each on its own: one lost with its comm does not keep the others'
    message). A client closing meanwhile is no error: a worker drops what
    it keeps for a call whose fence is gone when it next keeps something."""
    try:
        await client.run(_release, call, wait=False, on_error="return", asynchronous=True)
    except Exception:
        pass


def _kept():
    """(inputs, results, bytes of kept memory lent) this worker keeps for
    calls: none once they ended."""
    with _lock:
        return len(_inputs), sum(len(v) for v in _held.values()), arena.kept()[1]


def _probe(pid, addr, expected):
    """On a worker: whether it reads the client's token; then its own token for the client to read."""
    return crossmem.token() if crossmem.probe(pid, addr, expected) else None


def _write(directory, a):
    """Array ``a`` written to a new file in ``directory``: its handle."""
    a = np.ascontiguousarray(a)
    path = os.path.join(directory, uuid.uuid4().hex)
    with open(path, "xb") as f:
        f.write(a.reshape(-1).view(np.uint8).data)
    return Handle(path, a.dtype, a.shape)


def _map(h, unlink=False):
    """The array of ``h``, mapped copy-on-write (``unlink``: the file unlinked once mapped)."""
    with open(h.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
    if unlink:
        os.unlink(h.path)
    return np.frombuffer(m, h.dtype).reshape(h.shape) if size else np.empty(h.shape, h.dtype)


def _export(res, sink):
    """``res`` (an array or a tuple of them) with its large arrays written
    to files or held for the client (``sink``, a :class:`Sink`)."""
    if isinstance(res, tuple):
        return tuple(_export(r, sink) for r in res)
    if isinstance(res, cla.Array):        # a task on device inputs: downloaded (into lent memory)
        res = download(as_device(res.queue), res)
    if isinstance(res, np.ndarray) and res.nbytes >= MIN_BYTES and not res.dtype.hasobject:
        return _write(sink.dir, res) if sink.call is None else _hold(sink.call, res)
    return res


def _load(res):
    """``res`` with its handles mapped (their files unlinked) or read."""
    if isinstance(res, tuple):
        return tuple(_load(r) for r in res)
    if isinstance(res, Handle):
        return _map(res, unlink=True)
    return res.read() if isinstance(res, Remote) else res


def _arg(a):
    if isinstance(a, tuple) and len(a) == 4 and isinstance(a[0], str) and a[0] == _ROWS:   # rows, dask's transfer
        return a[1][a[2]:a[3]]
    if isinstance(a, Handle):
        return _map(a) if a.rows is None else _map(a)[a.rows[0]:a.rows[1]]
    if isinstance(a, Remote):
        return _fetch(a) if a.part is None else _part(a)
    return a


def _task(fn, sink, lend, *args):
    """A task on a worker: ``fn`` of the arguments with handles mapped or
    read; ``sink``: where the result's large arrays go (a :class:`Sink`);
    ``lend``: the call whose kept memory the task's large arrays (inputs
    read, results made) take (:mod:`.arena`), or None."""
    if lend is not None:
        arena.limit(_memory_limit())
    with arena.lending(lend) if lend is not None else contextlib.nullcontext():
        res = fn(*(_arg(a) for a in args))
        return res if sink is None else _export(res, sink)


def _memory_limit():
    """This dask worker's memory limit in bytes (None: none, or not in a worker)."""
    try:
        from distributed import get_worker

        return get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):
        return None


def _lengths(res):
    """(length, dtype) of each array of a task's tuple result."""
    return [(len(a), a.dtype.str) for a in res]


def _check_planned(a, m, dtype):
    """A task's result element ``a`` has the planned length ``m`` and
    dtype: a task recomputed after a worker was lost, giving other results,
    raises rather than overwrite its neighbours."""
    if len(a) != m or a.dtype.str != dtype:
        raise RuntimeError(f"a task's result changed between its count and its transfer ({len(a)} {a.dtype} "
                           f"against {m} {dtype}): was it recomputed?")


def _pwrite(fd, a, offset):
    """Array ``a`` into the open file ``fd`` at byte ``offset`` (writes of
    at most 1 GiB each: Linux caps one write near 2 GiB)."""
    b = memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    done = 0
    while done < len(b):
        done += os.pwrite(fd, b[done:done + (1 << 30)], offset + done)


def _write_parts(res, plan):
    """Each (path, byte offset, element, length, dtype) of ``plan``: element
    of the task's result ``res`` written into the file ``path`` at that
    offset; the files in parallel threads (writes to one file take its inode
    lock in turn: one writer a file runs at tmpfs's full rate, ~3.5 GB/s a
    thread on the GPU host; pwrite releases the GIL); each element checked
    against the plan first (:func:`_check_planned`)."""
    files = {}
    for path, offset, k, m, dtype in plan:
        _check_planned(res[k], m, dtype)
        files.setdefault(path, []).append((offset, k))

    def write(path):
        fd = os.open(path, os.O_WRONLY)
        try:
            for offset, k in files[path]:
                _pwrite(fd, res[k], offset)
        finally:
            os.close(fd)

    if len(files) == 1:
        write(next(iter(files)))
        return
    with concurrent.futures.ThreadPoolExecutor(len(files)) as pool:
        list(pool.map(write, files))


def _place(res, path, dtype):
    """A task's (positions, values) written at those positions of the
    n-value file ``path`` (positions None: all of it)."""
    pos, v = res
    if len(v) == 0:
        return
    m = np.memmap(path, dtype=dtype, mode="r+")
    if pos is None:
        m[:] = v
    else:
        m[pos] = v
    del m


def _local(client, directory):
    """Whether every worker of ``client`` sees ``directory``."""
    seen = _sees.setdefault(client, {})
    workers = list(client.nthreads())
    new = [w for w in workers if w not in seen]
    if new:
        got = client.run(os.path.isdir, directory, workers=new, on_error="return")
        seen.update((w, v) for w, v in got.items() if isinstance(v, bool))
    return all(seen.get(w, False) for w in workers)


def _crossed(client):
    """Whether ``client`` and every one of its workers read each other's
    memory (:mod:`.crossmem`; asked once per worker address)."""
    seen = _reads.setdefault(client, {})
    workers = list(client.nthreads())
    new = [w for w in workers if w not in seen]
    if new:
        got = client.run(_probe, *crossmem.token(), workers=new, on_error="return")
        for w, v in got.items():            # an error (a worker starting) is asked again next call
            if v is None or isinstance(v, tuple):
                seen[w] = v is not None and crossmem.probe(*v)
    return all(seen.get(w, False) for w in workers)


class Transport:
    """One call's arrays between ``client`` and its workers: read from each
    other's memory, or through memory files, when every worker is on the
    client's host (``enabled``, ``SHM``; ``MEMORY``), else through dask. Use
    it as a context manager: closing it drops what the workers keep for the
    call and removes its files. ``mode``: "memory", "files" or "dask".
    ``lend``: every large array its tasks make on a worker is dropped when
    the call ends (its results are read by the client before: no
    ``collect=False``), so in the memory mode they take the worker's kept
    memory (:mod:`.arena`)."""

    def __init__(self, client, enabled=True, lend=False):
        self.client = client
        self.dir = None
        self.call = None
        self.lend = lend
        self._inputs = []
        self._nonce = None
        self._workers = None
        if not (SHM and enabled):
            return
        if MEMORY and _crossed(client):
            # the call's name, and the fence its workers read: (pid, address, nonce)
            self._nonce = np.frombuffer(os.urandom(8), np.uint64).copy() | np.uint64(1)
            self.call = (os.getpid(), self._nonce.ctypes.data, int(self._nonce[0]))
        elif os.path.isdir(ROOT):
            d = os.path.join(ROOT, f"clkernels-{uuid.uuid4().hex}")
            os.mkdir(d, 0o700)
            if _local(client, d):
                self.dir = d
            else:
                os.rmdir(d)

    @property
    def mode(self):
        return "memory" if self.call is not None else "files" if self.dir is not None else "dask"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Drop what the workers keep for the call (inputs read, results
        held); remove the call's directory, again while a late task adds a
        file to it."""
        if self.call is not None:
            call, self.call = self.call, None
            self._nonce[0] = 0               # ended, for a worker that misses the release below
            if self.client.status == "running":      # sent from its event loop: the call does not wait
                self.client.loop.add_callback(_send_release, self.client, call)
            self._inputs = []
            self._nonce = None
        d, self.dir = self.dir, None
        while d is not None:
            try:
                shutil.rmtree(d)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno == errno.ENOTEMPTY:
                    continue
                raise
            return

    def put(self, arrays):
        """Inputs (arrays or None) for the tasks, each readable by every
        worker for the whole call: in this process's memory (kept until the
        call ends), files, or futures scattered to every worker (a worker
        that dies loses no data)."""
        if self.call is not None:
            out = []
            for a in arrays:
                if a is not None:
                    a = np.ascontiguousarray(a)
                    if a.dtype.hasobject:
                        raise TypeError(f"an array of {a.dtype} (Python objects) cannot cross processes")
                    self._inputs.append(a)
                    a = Remote(os.getpid(), a.ctypes.data, a.dtype, a.shape, (self.call, len(self._inputs)))
                out.append(a)
            return out
        if self.dir is None:
            # hash=False: a fresh key, so a repeated call never races the release of
            # an earlier call's copy of the same data
            arrays = list(arrays)
            given = [a for a in arrays if a is not None]
            futs = iter(self.client.scatter(given, broadcast=True, hash=False) if given else [])
            return [None if a is None else next(futs) for a in arrays]
        return [None if a is None else _write(self.dir, a) for a in arrays]

    def rows(self, ref, lo, hi, device=False):
        """Rows lo:hi of an input of :meth:`put` (``ref``), for one task: in
        the memory mode read by that task alone, with ``device`` straight into
        its device's memory (a device array: no copy on the worker's host);
        otherwise those rows of the mapped file or of the scattered array
        (numpy)."""
        if ref is None:
            return None
        if isinstance(ref, Remote):
            return ref.rows(lo, hi, device)
        if isinstance(ref, Handle):
            return Handle(ref.path, ref.dtype, ref.shape, (lo, hi))
        return (_ROWS, ref, lo, hi)      # dask gives the task its worker's copy of ``ref``; sliced there

    def _sink(self):
        return None if self.mode == "dask" else Sink(self.dir, self.call)

    def submit(self, fn, *args, out=False, slot=None):
        """A task ``fn(*args)`` (``pure=False``); ``out``: its result is for
        :meth:`gather` only (its large arrays are written to files or held
        for the client); ``slot``: the task goes to the slot-th worker
        (modulo their number; another takes it if that one is gone), so
        tasks of equal work meant one a worker are not left to the
        scheduler (which may queue them all on the worker it finds first)."""
        kw = {}
        if slot is not None:
            if self._workers is None:            # asked once a call, not once a task
                self._workers = sorted(self.client.nthreads())
            kw = dict(workers=[self._workers[slot % len(self._workers)]], allow_other_workers=True)
        lend = self.call if self.lend else None
        return self.client.submit(_task, fn, self._sink() if out else None, lend, *args, pure=False, **kw)

    def _read(self, futures, results, fill):
        """``fill(t, result)`` for each task's result (with :class:`Remote`
        parts); where a read fails (the worker that held it was lost),
        ``results[t]`` is asked again -- dask recomputes a lost result -- up
        to ``RETRIES`` times."""
        for t, f in enumerate(futures):
            res = results[t]
            for attempt in range(RETRIES + 1):
                try:
                    fill(t, res)
                    break
                except OSError:
                    if attempt == RETRIES:
                        raise
                    res = self.client.gather(f)

    def gather(self, futures):
        """The results of ``out`` tasks, as numpy."""
        futures = list(futures)
        res = self.client.gather(futures)
        if self.mode != "memory":
            return [_load(r) for r in res]
        out = [None] * len(futures)

        def fill(t, r):
            out[t] = _load(r)
        self._read(futures, res, fill)
        return out

    def hold(self, futures):
        """Wait until the tasks' results are on their workers (they outlive
        the call; its files do not); a failed task raises."""
        from distributed import wait

        futures = list(futures)
        wait(futures)
        for f in futures:
            if f.status == "error":
                f.result()

    def _file(self, nbytes):
        path = os.path.join(self.dir, uuid.uuid4().hex)
        with open(path, "xb") as f:
            f.truncate(nbytes)
        return path

    def _exposed(self, futures):
        """Futures of the tasks' results with their large arrays held for the client to read."""
        return [self.client.submit(_export, f, self._sink(), pure=False) for f in futures]

    def columns(self, futures, width):
        """The results of tasks (not ``out``) -- tuples of arrays, ``width``
        columns in parts: element p * width + c is column c's part p -- as
        ``width`` numpy arrays, each its parts in task order. Read from the
        workers' memory into one array a column; through files, the results
        stay on their workers until each writes its parts at their offsets
        into one file per column (the workers in parallel; the client maps
        the files, no copy); else gathered through dask and concatenated
        here."""
        futures = list(futures)
        if self.mode == "dask":
            res = self.client.gather(futures)
            return tuple(concat([r[k] for r in res for k in range(c, len(r), width)]) for c in range(width))
        if self.mode == "memory":
            exposed = self._exposed(futures)
            got = self.client.gather(exposed)
            lens = [[(len(a), a.dtype.str) for a in r] for r in got]
        else:
            lens = self.client.gather(self.client.map(_lengths, futures, pure=False))
        dtypes = [np.dtype(lens[0][c][1]) if lens else np.dtype(np.int64) for c in range(width)]
        at = [0] * width
        plans = []
        for t in lens:
            plan = []
            for k, (m, dt) in enumerate(t):
                c = k % width
                if np.dtype(dt) != dtypes[c]:
                    raise RuntimeError(f"column {c} comes as {dtypes[c]} and {np.dtype(dt)} from the tasks")
                plan.append((c, at[c], k, m, dt))
                at[c] += m
            plans.append(plan)
        if self.mode == "memory":
            cols = [host_empty(at[c], dtypes[c]) for c in range(width)]

            def fill(t, r):
                for c, off, k, m, dt in plans[t]:
                    _check_planned(r[k], m, dt)
                    dst = cols[c][off:off + m]
                    if isinstance(r[k], Remote):
                        r[k].read(dst)
                    else:
                        dst[...] = r[k]
            self._read(exposed, got, fill)
            return tuple(cols)
        paths = [self._file(at[c] * dtypes[c].itemsize) for c in range(width)]
        writes = [self.client.submit(_write_parts, f, [(paths[c], off * dtypes[c].itemsize, k, m, dt)
                                                        for c, off, k, m, dt in plan], pure=False)
                  for f, plan in zip(futures, plans)]
        self.client.gather(writes)
        return tuple(_map(Handle(paths[c], dtypes[c], (at[c],)), unlink=True) for c in range(width))

    def placed(self, futures, n, dtype):
        """One array of ``n`` values from tasks (not ``out``) whose results
        are (positions, values) (positions None: all n): read from the
        workers' memory and placed here; through files, each worker writes
        its values at their positions of one file (in parallel; the client
        maps it); else the results are gathered and placed here."""
        futures = list(futures)
        if self.mode == "files" and n:
            path = self._file(n * np.dtype(dtype).itemsize)
            self.client.gather([self.client.submit(_place, f, path, dtype, pure=False) for f in futures])
            return _map(Handle(path, np.dtype(dtype), (n,)), unlink=True)
        out = np.empty(n, dtype)

        def fill(t, r):
            pos, v = r
            if pos is None and isinstance(v, Remote) and v.dtype == out.dtype and len(v) == n:
                v.read(out)                      # all n values: straight into place
                return
            pos, v = _load(r)
            out[slice(None) if pos is None else pos] = v
        if self.mode == "memory":
            exposed = self._exposed(futures)
            self._read(exposed, self.client.gather(exposed), fill)
        else:
            for t, r in enumerate(self.client.gather(futures)):
                fill(t, r)
        return out
