"""The atomic page allocator's pool on the device (``pages.cl.mako``; the
2-BS paper's direct output buffer, Algorithm 5).

:class:`PagePool` owns the pool (``npages`` pages of ``page`` records of two
uint32), the per-page fills, the control words (``ctl[0]`` = the next free
page -- the next free record in a dense pool, which grouped staging fills
from its start --, ``ctl[1]`` = the writers that stopped) and the redo list;
kernels take :meth:`PagePool.args` and use the ``page_defs`` of the
template. After a launch :meth:`PagePool.drain` copies the filled records
densely into two int64 columns (a scan of the fills and one copy kernel; a
dense pool's first records as one page) and downloads them
(on the device's side queue while the next round, enqueued behind the copy,
already fills the recycled pages); :meth:`PagePool.reset` recycles every page
for the next round."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import kernel
from ..core.launch import global_size
from ..core.transfer import download, fill_words, host_empty, small
from .scan import exclusive_scan

TEMPLATE = "pages.cl.mako"
RECORD_BYTES = 8                  # (i, j) as two uint32
MAX_SLOTS = 1 << 31               # records in one pool (uint32 offsets with room)


def stage_fit(device, wg, stage, extra=0, grouped=False):
    """The staged records per writer of a 'pairs' kernel (``Pairs.stage``)
    halved until the work-group's staging fits the device's local memory
    with 1 KiB to spare (``PAGE_STAGE_LOCALS``: 8 bytes a record; the counts'
    scan, the sub-group totals and the `local` back end's shuffle scratch, 4
    bytes a work-item each; ``grouped``, ``PAGE_GROUP_LOCALS``: 10 bytes a
    record with its lane, a group's two words and the `local` back end's
    ballot scratch, 4 bytes a work-item), beside ``extra`` bytes the kernel
    holds."""
    per = (lambda s: 10 * s + 5) if grouped else (lambda s: 8 * s + 12)
    while stage and wg * per(stage) + 1024 + extra > device.local_mem_size:
        stage //= 2
    return stage


def split(queue, records, fills, offs, slots, page, total, events, out=None, overlap=None, ids=None):
    """The ``total`` records of ``records`` (pages of ``page`` slots, ``fills``
    each, at ``offs``) as two int64 numpy arrays (``out``: a pair of them to
    fill), split on the device. ``ids``: two int64 device arrays (ids_a,
    ids_b): a record (a, b) comes out as (min, max) of (ids_a[a], ids_b[b])
    (the global ids of a subset's points). ``overlap``: called once the split is
    enqueued (it may enqueue more work on ``queue``, e.g. the next round into
    the same pages); the columns then come down on the device's side queue,
    while that work runs."""
    from ..core.device import as_device

    dev = as_device(queue)
    ci, cj = (cla.empty(queue, max(total, 1), np.int64, allocator=dev.pool) for _ in range(2))
    k = kernel(dev, TEMPLATE, "compact", "pages_compact", {"sg_backend": "local", "mapped": ids is not None})
    ev = events.add("drain", k(queue, (global_size(slots, 64),), (64,), records.data, fills.data, offs.data,
                               np.uint64(slots), np.uint32(page), ci.data, cj.data,
                               *([] if ids is None else [ids[0].data, ids[1].data])))
    down = None
    if overlap is not None:
        queue.flush()
        overlap()
        down = dev.side_queue
    i, j = out if out is not None else (host_empty(total, np.int64), host_empty(total, np.int64))
    if total:
        download(dev, ci[:total], out=i, queue=down, wait_for=[ev], events=events)
        download(dev, cj[:total], out=j, queue=down, wait_for=[ev], events=events)
    return i, j


class PagePool:
    """A pool of ``npages`` pages of ``page`` records, and the writer
    bookkeeping of ``nwriters`` writers (their placed-record counts and the
    redo list), on ``queue``'s device. ``dense``: the kernel takes runs of
    records, not pages (``pages.cl.mako``'s grouped staging: ctl[0] counts
    records and the pool fills from its start; no page fills)."""

    def __init__(self, queue, page, npages, nwriters, *, events, dense=False):
        from ..core.device import as_device

        if page < 1 or npages < 1:
            raise ValueError(f"page ({page}) and npages ({npages}) must be positive")
        if page * npages > MAX_SLOTS:
            raise ValueError(f"a pool of {npages} pages of {page} records exceeds {MAX_SLOTS} records")
        self.device = dev = as_device(queue)
        self.queue, self.page, self.npages, self.events = queue, int(page), int(npages), events
        self.dense = bool(dense)
        a = dev.pool
        self._alloc(self.npages)
        self.ctl = cla.empty(queue, 2, np.uint32, allocator=a)
        n = max(int(nwriters), 1)
        self.done = cla.empty(queue, n, np.uint32, allocator=a)
        self.redo = [cla.empty(queue, n, np.uint32, allocator=a) for _ in range(2)]
        self.round = 0

    def _alloc(self, npages):
        a, q = self.device.pool, self.queue
        self.npages = int(npages)
        self.pool = cla.empty(q, (self.npages * self.page, 2), np.uint32, allocator=a)
        self.fills = cla.empty(q, self.npages, np.uint32, allocator=a)
        self.offs = cla.empty(q, self.npages, np.uint32, allocator=a)

    def grow(self, npages):
        """A larger pool (after a drain: the old pages' records are gone)."""
        if npages > self.npages:
            self._alloc(npages)

    @property
    def nbytes(self):
        return self.pool.nbytes

    def reset(self):
        """Every page free again (GP and the stopped count to zero)."""
        fill_words(self.queue, self.ctl.data, 2, events=self.events, step="zero")

    def args(self):
        """The kernel arguments of the ``page_defs`` protocol, in order:
        pool, ctl, npages, page, fills, done, redo (this round's list of
        writers that stop)."""
        return [self.pool.data, self.ctl.data, np.uint32(self.npages), np.uint32(self.page),
                self.fills.data, self.done.data, self.redo[self.round % 2].data]

    def worklist(self):
        """The writers that stopped in the last round (their list, for the next)."""
        return self.redo[self.round % 2]

    def read_ctl(self):
        """(pages handed out, capped at npages -- records, capped at the pool's,
        where dense; writers that stopped): one small read."""
        h = self.device.staging(2)
        self.events.add("read", cl.enqueue_copy(self.queue, h, self.ctl.data, is_blocking=True))
        return min(int(h[0]), self.npages * (self.page if self.dense else 1)), int(h[1])

    def drain(self, used, overlap=None, ids=None):
        """The records of pages [0, used) (records [0, used) where dense) as
        int64 numpy arrays (i, j). ``overlap``, ``ids``: see :func:`split`
        (the pages are free for ``overlap``: every command it enqueues on the
        queue runs after the split)."""
        if used == 0:
            if overlap is not None:
                overlap()
            return np.empty(0, np.int64), np.empty(0, np.int64)
        q = self.queue
        if self.dense:          # one page of `used` records
            fill, at = small(q, np.array([used], np.uint32)), small(q, np.array([0], np.uint32))
            return split(q, self.pool, fill, at, used, used, used, self.events, overlap=overlap, ids=ids)
        self.events.add("drain", cl.enqueue_copy(q, self.offs.data, self.fills.data, byte_count=4 * used))
        total, _ = exclusive_scan(q, self.offs, used, events=self.events)
        return split(q, self.pool, self.fills, self.offs, used * self.page, self.page, total, self.events,
                     overlap=overlap, ids=ids)

    def next_round(self):
        self.round += 1
