"""The atomic page allocator's pool on the device (``pages.cl.mako``; the
2-BS paper's direct output buffer, Algorithm 5).

:class:`PagePool` owns the pool (``npages`` pages of ``page`` records of two
uint32), the per-page fills, the control words (``ctl[0]`` = the next free
page, ``ctl[1]`` = the writers that stopped) and the redo list; kernels take
:meth:`PagePool.args` and use the ``page_defs`` of the template. After a
launch :meth:`PagePool.drain` copies the filled records densely (a scan of
the fills and one copy kernel) and downloads them; :meth:`PagePool.reset`
recycles every page for the next round."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import kernel
from ..core.launch import global_size
from ..core.transfer import download, zero_words
from .scan import exclusive_scan

TEMPLATE = "pages.cl.mako"
RECORD_BYTES = 8                  # (i, j) as two uint32
MAX_SLOTS = 1 << 31               # records in one pool (uint32 offsets with room)


class PagePool:
    """A pool of ``npages`` pages of ``page`` records, and the writer
    bookkeeping of ``nwriters`` writers (their placed-record counts and the
    redo list), on ``queue``'s device."""

    def __init__(self, queue, page, npages, nwriters, *, events):
        from ..core.device import as_device

        if page < 1 or npages < 1:
            raise ValueError(f"page ({page}) and npages ({npages}) must be positive")
        if page * npages > MAX_SLOTS:
            raise ValueError(f"a pool of {npages} pages of {page} records exceeds {MAX_SLOTS} records")
        self.device = dev = as_device(queue)
        self.queue, self.page, self.npages, self.events = queue, int(page), int(npages), events
        a = dev.pool
        self.pool = cla.empty(queue, (self.npages * self.page, 2), np.uint32, allocator=a)
        self.fills = cla.empty(queue, self.npages, np.uint32, allocator=a)
        self.offs = cla.empty(queue, self.npages + 1, np.uint32, allocator=a)
        self.ctl = cla.empty(queue, 2, np.uint32, allocator=a)
        n = max(int(nwriters), 1)
        self.done = cla.empty(queue, n, np.uint32, allocator=a)
        self.redo = [cla.empty(queue, n, np.uint32, allocator=a) for _ in range(2)]
        self.round = 0

    @property
    def nbytes(self):
        return self.pool.nbytes

    def reset(self):
        """Every page free again (GP and the stopped count to zero)."""
        zero_words(self.queue, self.ctl.data, 2, events=self.events, step="zero")

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
        """(pages handed out, capped at npages; writers that stopped): one small read."""
        h = self.device.staging(2)
        self.events.add("read", cl.enqueue_copy(self.queue, h, self.ctl.data, is_blocking=True))
        return min(int(h[0]), self.npages), int(h[1])

    def drain(self, used):
        """The records of pages [0, used) as a dense (m, 2) uint32 numpy array."""
        if used == 0:
            return np.empty((0, 2), np.uint32)
        q, dev = self.queue, self.device
        self.events.add("drain", cl.enqueue_copy(q, self.offs.data, self.fills.data, byte_count=4 * used))
        total, _ = exclusive_scan(q, self.offs, used, events=self.events)
        dense = cla.empty(q, (max(total, 1), 2), np.uint32, allocator=dev.pool)
        k = kernel(dev, TEMPLATE, "compact", "pages_compact", {"sg_backend": "local"})
        slots = used * self.page
        self.events.add("drain", k(q, (global_size(slots, 64),), (64,), self.pool.data, self.fills.data,
                                   self.offs.data, np.uint64(slots), np.uint32(self.page), dense.data))
        return download(dev, dense[:total], events=self.events)

    def next_round(self):
        self.round += 1
