"""Arrays between the client and the workers of its own host through shared
memory, past dask's comms.

dask moves numpy arrays between processes through its comms (TCP, by way of
the scheduler: about 0.4-0.5 GB/s here). A worker on the client's host can
instead read and write memory files under ``/dev/shm`` (tmpfs, where POSIX
``shm_open`` keeps its blocks on Linux): the sender writes an array into a
file once and sends a small :class:`Handle` (path, dtype, shape); the
receiver maps the file copy-on-write, without a copy (a writable array; its
writes stay private).

Each call opens one :class:`Transport`, whose files all lie in a directory
of its own, ``/dev/shm/clkernels-<random>``: the call's inputs, written by
the client and mapped by every task that reads them (a task rerun on
another worker after a worker died maps them again), and the results the
tasks write for the client, which it maps and unlinks at once (the mapping
keeps the pages while the array lives). Closing the transport (the end of
the call, an error included) removes the directory and everything in it; a
task that is still running then finds the directory gone and cannot leave a
file behind (a file cannot be created in a removed directory). A directory
rather than flat ``multiprocessing.shared_memory`` blocks gives that fence,
and nothing registers with multiprocessing's resource_tracker (which, shared
by a LocalCluster's processes, would unlink or report blocks handed from one
process to another). A killed client leaves its directory behind.

Files are used only when every worker sees the call's directory (asked once
per worker address and cached per client), so workers on other hosts (or
another ``/dev/shm``) get dask's own transfer: inputs scattered to every
worker, results gathered through dask; so does every call while ``SHM`` is
False. Calls whose results stay on the workers (``collect=False``) read
their inputs from files too and return once the workers hold the results
(:meth:`Transport.hold`): a worker lost after that loses its part, which dask
could not recompute from scattered inputs either (tried: "lost
dependencies"). A call's results for the client are written by the workers
into one file per column at their offsets (:meth:`Transport.columns`), or
placed by position into one file (:meth:`Transport.placed`), in parallel;
the client maps them.
"""

import concurrent.futures
import errno
import mmap
import os
import shutil
import uuid
import weakref

import numpy as np

from .common import concat

ROOT = "/dev/shm"
SHM = True            # False: every call uses dask's transfer
MIN_BYTES = 1 << 20   # smaller results ride in dask's reply (inputs always go by file: no scatter round trip)

_sees = weakref.WeakKeyDictionary()     # client -> {worker address: it sees the client's /dev/shm}


class Handle:
    """An array in the memory file ``path``: what crosses dask's comms instead."""

    __slots__ = ("path", "dtype", "shape")

    def __init__(self, path, dtype, shape):
        self.path, self.dtype, self.shape = path, dtype, shape


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


def _export(res, directory):
    """``res`` (an array or a tuple of them) with its large arrays written to files."""
    if isinstance(res, tuple):
        return tuple(_export(r, directory) for r in res)
    if isinstance(res, np.ndarray) and res.nbytes >= MIN_BYTES and res.dtype != object:
        return _write(directory, res)
    return res


def _load(res):
    """``res`` with its handles mapped, their files unlinked."""
    if isinstance(res, tuple):
        return tuple(_load(r) for r in res)
    return _map(res, unlink=True) if isinstance(res, Handle) else res


def _task(fn, out, *args):
    """A task on a worker: ``fn`` of the arguments with handles mapped;
    ``out``: the call's directory, where the result's large arrays go."""
    res = fn(*(_map(a) if isinstance(a, Handle) else a for a in args))
    return res if out is None else _export(res, out)


def _lengths(res):
    """(length, dtype) of each array of a task's tuple result."""
    return [(len(a), a.dtype.str) for a in res]


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
    thread on the GPU host; pwrite releases the GIL). An element of another
    length or dtype than planned (a task recomputed after a worker was lost,
    giving other results) raises rather than overwrite its neighbours."""
    files = {}
    for path, offset, k, m, dtype in plan:
        if len(res[k]) != m or res[k].dtype.str != dtype:
            raise RuntimeError(f"a task's result changed between its count and its write ({len(res[k])} "
                               f"{res[k].dtype} against {m} {dtype}): was it recomputed?")
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


class Transport:
    """One call's arrays between ``client`` and its workers: through memory
    files when every worker is on the client's host (``enabled``, ``SHM``),
    else through dask. Use it as a context manager: closing it removes the
    call's files."""

    def __init__(self, client, enabled=True):
        self.client = client
        self.dir = None
        if SHM and enabled and os.path.isdir(ROOT):
            d = os.path.join(ROOT, f"clkernels-{uuid.uuid4().hex}")
            os.mkdir(d, 0o700)
            if _local(client, d):
                self.dir = d
            else:
                os.rmdir(d)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Remove the call's directory, again while a late task adds a file to it."""
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
        worker: handles of files, or futures scattered to every worker (a
        worker that dies loses no data)."""
        if self.dir is None:
            # hash=False: a fresh key, so a repeated call never races the release of
            # an earlier call's copy of the same data
            return self.client.scatter(list(arrays), broadcast=True, hash=False)
        return [None if a is None else _write(self.dir, a) for a in arrays]

    def submit(self, fn, *args, out=False, slot=None):
        """A task ``fn(*args)`` (``pure=False``); ``out``: its result is for
        :meth:`gather` only (its large arrays are written to files);
        ``slot``: the task goes to the slot-th worker (modulo their number;
        another takes it if that one is gone), so tasks of equal work meant
        one a worker are not left to the scheduler (which may queue them all
        on the worker it finds first)."""
        kw = {}
        if slot is not None:
            workers = sorted(self.client.nthreads())
            kw = dict(workers=[workers[slot % len(workers)]], allow_other_workers=True)
        return self.client.submit(_task, fn, self.dir if out else None, *args, pure=False, **kw)

    def gather(self, futures):
        """The results of ``out`` tasks, as numpy."""
        return [_load(r) for r in self.client.gather(list(futures))]

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

    def columns(self, futures, width):
        """The results of tasks (not ``out``) -- tuples of arrays, ``width``
        columns in parts: element p * width + c is column c's part p -- as
        ``width`` numpy arrays, each its parts in task order. Through files:
        the results stay on their workers until each writes its parts at
        their offsets into one file per column (the workers in parallel; the
        client maps the files, no copy); else gathered through dask and
        concatenated here."""
        futures = list(futures)
        if self.dir is None:
            res = self.client.gather(futures)
            return tuple(concat([r[k] for r in res for k in range(c, len(r), width)]) for c in range(width))
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
                plan.append((c, at[c] * dtypes[c].itemsize, k, m, dt))
                at[c] += m
            plans.append(plan)
        paths = [self._file(at[c] * dtypes[c].itemsize) for c in range(width)]
        writes = [self.client.submit(_write_parts, f, [(paths[c], off, k, m, dt) for c, off, k, m, dt in plan],
                                     pure=False) for f, plan in zip(futures, plans)]
        self.client.gather(writes)
        return tuple(_map(Handle(paths[c], dtypes[c], (at[c],)), unlink=True) for c in range(width))

    def placed(self, futures, n, dtype):
        """One array of ``n`` values from tasks (not ``out``) whose results
        are (positions, values) (positions None: all n): each worker writes
        its values at their positions of one file (in parallel; the client
        maps it), else the results are gathered and placed here."""
        futures = list(futures)
        if self.dir is None or n == 0:
            out = np.empty(n, dtype)
            for pos, v in self.client.gather(futures):
                out[slice(None) if pos is None else pos] = v
            return out
        path = self._file(n * np.dtype(dtype).itemsize)
        self.client.gather([self.client.submit(_place, f, path, dtype, pure=False) for f in futures])
        return _map(Handle(path, np.dtype(dtype), (n,)), unlink=True)
