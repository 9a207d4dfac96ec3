"""The ``Pairs`` output: every record (i, j) a pair kernel's writers produce,
whatever their number, by one of two methods.

* ``'pages'`` -- the atomic page allocator (``host/primitives/pages.py``, the
  2-BS paper's direct output buffer): one pass; when the pool runs out the
  writers that stopped are run again from a redo list, skipping the records
  they had placed, after the filled pages were drained to the host and the
  pool recycled. Nothing is lost or repeated, whatever the pool (one page
  works); each round's records go to the host (through page-locked staging).
* ``'scan'`` -- count, scan, write (the shape of PyOpenCL's
  ``ListOfListsBuilder``): a count pass per writer, the offsets (an int64
  cumulative sum on the host), then write passes over batches of writers
  whose records fit the device buffer.

A kernel takes part by implementing the writer protocol of
``clkernels/cl/pages.cl.mako`` (``PAGE_WRITER``/``PAGE_EMIT``/``page_end``)
for 'pages', and per-writer counts and offset writes for 'scan'; the family
passes launch functions (see :func:`collect`).
"""

import collections
import dataclasses
import threading

import numpy as np
import pyopencl.array as cla

from ..core.progress import bar
from ..core.transfer import download, host_empty, small, upload, zeros
from ..primitives.pages import MAX_SLOTS, RECORD_BYTES, PagePool, orders_on_device, pair_keys, split, unkey

#: device bytes per record in flight: the record (two uint32) and its two int64 columns after the drain
DEVICE_BYTES = RECORD_BYTES + 16
#: the same where the records are ordered on the device (``collect(order=)``): their uint64 keys
#: and the sort's output beside them (measured on PoCL: 42 bytes a record at the peak against
#: 33 unordered, with the pool's slack)
ORDERED_DEVICE_BYTES = DEVICE_BYTES + 16

METHODS = ("pages", "scan")
#: records a writer may keep in local memory (its own stage, or its share of its group's buffer; 0: none,
#: the paper's writers)
STAGES = (0, 2, 4, 8, 16)


@dataclasses.dataclass(frozen=True)
class Pairs:
    """How pair records are collected: ``method`` ('pages' | 'scan'),
    ``page`` records per page, ``npages`` in the pool (None: from the sampled
    estimate, doubled after a round that ran out), ``max_device_bytes``: the
    bound on the output buffers on the device (the pool or the scan method's
    batch, and the int64 columns records are drained into: 24 bytes a
    record), ``stage``: records a writer may keep in local memory, its
    work-group (or its sub-group, sharing one buffer: grouped staging, the
    pool then dense) placing them in runs with one atomic each (0: every
    writer takes its own pages, as the paper's; None: the family decides,
    e.g. from the sampled estimate; kernels that support it:
    ``pages.cl.mako``)."""
    method: str = "pages"
    page: int = 16
    npages: int = None
    max_device_bytes: int = None
    stage: int = 0

    def validate(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.stage is not None and (isinstance(self.stage, bool) or self.stage not in STAGES):
            raise ValueError(f"stage must be None or one of {STAGES}, got {self.stage!r}")
        if self.stage and self.method != "pages":
            raise ValueError("stage applies to method='pages' only")
        for name in ("page", "npages", "max_device_bytes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.method == "pages" and self.max_device_bytes is not None and \
                self.max_device_bytes < DEVICE_BYTES * self.page:
            raise ValueError(f"max_device_bytes ({self.max_device_bytes}) holds less than one page "
                             f"of {self.page} records of {DEVICE_BYTES} bytes")
        if self.method == "pages" and self.npages is not None:
            if self.npages * self.page > MAX_SLOTS:
                raise ValueError(f"a pool of {self.npages} pages of {self.page} records exceeds "
                                 f"{MAX_SLOTS} records")
            if self.max_device_bytes is not None and \
                    self.npages * self.page * DEVICE_BYTES > self.max_device_bytes:
                raise ValueError(f"npages = {self.npages} pages of {self.page} records exceed "
                                 f"max_device_bytes ({self.max_device_bytes})")


def device_ids(dev, ids, n, m, events):
    """The ``ids`` of a pair op (``cellgrid.pairs.within``: one int64 array,
    or one for x's n points and one for y's m; numpy or device) as two int64
    device arrays for :func:`collect` (None: None)."""
    if ids is None:
        return None
    if isinstance(ids, (tuple, list)):
        a, b = ids
    else:
        a = b = ids
    out = []
    for v, k in ((a, n), (b, m)):
        if not isinstance(v, cla.Array):
            v = np.ascontiguousarray(v)
        if v.dtype != np.int64 or v.shape != (k,):
            raise ValueError(f"ids must be int64 arrays of the points' lengths ({k}), got {v.dtype} {v.shape}")
        out.append(v if isinstance(v, cla.Array) else upload(dev, v, events=events))
    return out


#: the sampled writers' device copies kept (least recently used dropped)
SAMPLES_KEPT = 16
_samples = collections.OrderedDict()
_samples_lock = threading.Lock()


def sampled_writers(queue, n, m):
    """(ids, device copy): ``m`` distinct writers of ``n``, sorted, uint32 --
    the sample a family's estimate of its output runs -- drawn with a seed of
    ``n`` (the same every call) and kept per queue with their device copy, so
    a repeated call draws and uploads nothing again (drawing 1% of 2^20
    writers without replacement costs ~0.4 ms of host time on a CI core).
    Read-only, on the host and for kernels."""
    key = (queue.int_ptr, int(n), int(m))
    with _samples_lock:
        got = _samples.get(key)
        if got is not None:
            _samples.move_to_end(key)
            return got
    ids = np.sort(np.random.default_rng(n).choice(n, m, replace=False)).astype(np.uint32)
    ids.setflags(write=False)
    got = (ids, small(queue, ids))
    with _samples_lock:
        _samples[key] = got             # entries hold their queue: its pointer stays theirs
        while len(_samples) > SAMPLES_KEPT:
            _samples.popitem(last=False)
    return got


def max_records(spec, device, ordered=False):
    """Records the device buffers may hold at once: ``max_device_bytes``
    (default: a quarter of the device's memory) over 24 bytes a record (40
    where they are ``ordered`` on the device), within one allocation and the
    uint32 offsets."""
    cap = (spec.max_device_bytes or device.global_mem_size // 4) // (ORDERED_DEVICE_BYTES if ordered else
                                                                      DEVICE_BYTES)
    return max(1, min(cap, device.max_mem_alloc_size // 8, MAX_SLOTS))


def pool_pages(spec, device, estimate, writers, dense=False, ordered=False):
    """Pages of the first pool: the estimated records plus half a page per
    writer with output (its last page is partly filled; none where the pool
    fills ``dense``ly), 25% over, within :func:`max_records`."""
    if spec.npages is not None:
        return int(spec.npages)
    want = 1.25 * (estimate + (0 if dense else 0.5 * spec.page * min(writers, max(estimate, 1))))
    return max(int(min(want, max_records(spec, device, ordered)) // spec.page), 1)


def collect(queue, nwriters, spec, *, launch_pages, launch_count, launch_write, estimate, events,
            progress=None, ids=None, dense=False, order=None):
    """All records as two int64 numpy arrays (i, j) (in no particular order;
    ``order``, the number of rows, every i below it: in (i, j) order, each
    round or batch sorted on the device as :func:`..primitives.pages.split`
    does, the sorted runs merged on the host where there are several; not
    with ``ids``).

    ``launch_pages(nw, wl, page_args)``: one pass of the 'pairs' kernel over
    nw writers (``wl``: the device list of writer ids, or None for writers
    0..nw-1); ``launch_count(w0, nw, wl, cnt)``: records per writer into
    ``cnt`` (uint32, indexed by writer id); ``launch_write(w0, nw, offs, out)``:
    writers [w0, w0 + nw) write their records at ``offs[w - w0]`` (uint64) of
    ``out``. ``estimate()``: the expected number of records (pages only).
    ``dense``: whether ``launch_pages``'s kernel fills the pool densely (a
    callable, asked after ``estimate``: see :class:`PagePool`).
    ``progress(records_so_far)`` is called after every round or batch
    (True: a bar of the records so far, as :func:`..core.progress.bar`;
    None or False: nothing). ``ids``: records mapped to global ids on the
    device, see :func:`..primitives.pages.split`."""
    from ..core.device import as_device

    device = as_device(queue)
    if nwriters == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    shown = None
    if progress is True:
        shown, seen = bar(True, None, "clkernels pairs", unit="pairs"), [0]

        def progress(got):
            shown.update(got - seen[0])
            seen[0] = got
    elif progress is False:
        progress = None
    try:
        if spec.method == "pages":
            return _pages(queue, device, nwriters, spec, launch_pages, estimate, events, progress, ids, dense,
                          order)
        return _scan(queue, device, nwriters, spec, launch_count, launch_write, events, progress, ids, order)
    finally:
        if shown is not None:
            shown.close()


def _pages(queue, device, nwriters, spec, launch, estimate, events, progress, ids, dense, order):
    guess = estimate() if spec.npages is None else 0
    dense = dense() if callable(dense) else dense
    ordered = order is not None
    pool = PagePool(queue, spec.page, pool_pages(spec, device, guess, nwriters, dense, ordered=ordered), nwriters,
                    events=events, dense=dense)
    chunks, got = [], 0
    pool.reset()
    launch(nwriters, None, pool.args())

    def next_round(stopped):
        # the writers that stopped, again: enqueued behind the drain's copy out of
        # the pages, so it runs while the last round's records come down
        wl = pool.worklist()
        pool.next_round()
        if spec.npages is None:             # the estimate was short: a larger pool next round
            pool.grow(min(2 * pool.npages, max(1, max_records(spec, device, ordered) // spec.page)))
        pool.reset()
        launch(stopped, wl, pool.args())

    while True:
        used, stopped = pool.read_ctl()
        if stopped and used == 0:
            raise RuntimeError("the page pool made no progress (no page was handed out)")
        part = pool.drain(used, overlap=(lambda s=stopped: next_round(s)) if stopped else None, ids=ids,
                          order=order)
        chunks.append(part)
        got += len(part[0])
        if progress is not None:
            progress(got)
        if stopped == 0:
            break
    if len(chunks) == 1:
        return chunks[0]
    if order is not None:
        return _merge(chunks)
    return tuple(np.concatenate([c[k] for c in chunks], out=host_empty(got, np.int64)) for k in range(2))


def _scan(queue, device, nwriters, spec, launch_count, launch_write, events, progress, ids, order):
    cnt = zeros(queue, nwriters, np.uint32, events=events)
    launch_count(0, nwriters, None, cnt)
    counts = download(device, cnt, events=events).astype(np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1])
    i, j = host_empty(total, np.int64), host_empty(total, np.int64)
    if total == 0:
        if progress is not None:
            progress(0)
        return i, j
    cap = max(max_records(spec, device, order is not None), int(counts.max()))   # one writer's records fit a batch
    cap = min(cap, total)
    out = cla.empty(queue, (cap, 2), np.uint32, allocator=device.pool)
    w0, done, batches = 0, 0, 0
    while w0 < nwriters:
        # the writers [w0, w1) whose records fit: ends[w1 - 1] - done <= cap
        w1 = int(np.searchsorted(ends, done + cap, side="right"))
        w1 = max(w1, w0 + 1)
        offs = upload(device, np.concatenate([[0], ends[w0:w1 - 1] - done]).astype(np.uint64), events=events)
        launch_write(w0, w1 - w0, offs, out)
        m = int(ends[w1 - 1]) - done
        fill, at = small(queue, np.array([m], np.uint32)), small(queue, np.array([0], np.uint32))
        split(queue, out, fill, at, m, m, m, events, out=(i[done:done + m], j[done:done + m]), ids=ids,
              order=order)      # one page
        done += m
        w0 = w1
        batches += 1
        if progress is not None:
            progress(done)
    if order is not None and batches > 1:
        return _merge([(i, j)])
    return i, j


def _merge(parts):
    """(i, j) int64 arrays in (i, j) order from ``parts``, each a pair of
    columns made of runs already in that order: numpy's stable sort of the
    pairs' keys (a timsort: it merges the runs)."""
    key = pair_keys(parts)
    key.sort(kind="stable")
    return unkey(key)


def ordered(dev, parts, on_device):
    """The distinct pairs of ``parts`` (a list of (i, j) integer arrays, each
    index below 2^31) as (i, j) int64 numpy arrays in (i, j) order: one uint64
    key i << 32 | j a pair (:func:`..primitives.pages.pair_keys`), sorted by
    the segmented sort on ``dev`` where ``on_device`` (the callers' plans:
    GPUs) and it takes the keys, else by numpy (faster on CPU devices); the
    keys are distinct, so any sort is exact. (One device pass's records are
    better ordered by :func:`collect`'s ``order``: on the device before they
    come down.)"""
    from ..segsort import segmented_sort

    key = pair_keys(parts)
    if on_device and key.size > 1 and orders_on_device(dev, key.size):
        key = segmented_sort(key, np.array([0, key.size], np.int64), device=dev)
    else:
        key.sort()
    return unkey(key)
