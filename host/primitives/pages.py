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
from ..core.transfer import direct, download, enqueue_download, fill_words, host_empty, small
from .scan import exclusive_scan

TEMPLATE = "pages.cl.mako"
RECORD_BYTES = 8                  # (i, j) as two uint32
KEYS_RUN = 16                     # keys a work-item of keys_rows / keys_scatter takes (a template parameter)
MAX_SLOTS = 1 << 31               # records in one pool (uint32 offsets with room)
#: the device order's chunk of records (split's order=: sorted and downloaded chunk by chunk,
#: see order_parts), the fewest and the most chunks, and the largest share of the keys one
#: chunk may hold (1 / ORDER_CHUNK_SHARE: its sort's buffers within the order's memory)
ORDER_PART, ORDER_PARTS_MIN, ORDER_PARTS_MAX, ORDER_CHUNK_SHARE = 1 << 24, 16, 64, 10


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


def split(queue, records, fills, offs, slots, page, total, events, out=None, overlap=None, ids=None,
          order=None):
    """The ``total`` records of ``records`` (pages of ``page`` slots, ``fills``
    each, at ``offs``) as two int64 numpy arrays (``out``: a pair of them to
    fill), split on the device. ``ids``: two int64 device arrays (ids_a,
    ids_b): a record (a, b) comes out as (min, max) of (ids_a[a], ids_b[b])
    (the global ids of a subset's points). ``order`` (not with ``ids``): the
    number of rows (every i is below it): the records in (i, j) order, as
    uint64 keys i << 32 | j placed in their row's segment (a count per row,
    its scan, a scatter) and the segments sorted by the segmented sort, on
    the device where :func:`orders_on_device` says it can.
    ``overlap``: called once the split is enqueued (it may enqueue more work
    on ``queue``, e.g. the next round into the same pages); the columns then
    come down on the device's side queue (an order in chunks: on its copy
    queue, enqueued before), while that work runs."""
    from ..core.device import as_device

    if order is not None and ids is not None:
        raise ValueError("order= sorts the raw (i, j) records: not with ids=")
    if order is not None and not 0 < order < (1 << 32) - 1:
        raise ValueError(f"order= takes the number of rows, 1 to 2^32 - 2, got {order}")
    dev = as_device(queue)
    params = {"sg_backend": "local", "mapped": ids is not None, "keys_run": KEYS_RUN}
    grid = (global_size(slots, 64),), (64,)
    head = (records.data, fills.data, offs.data, np.uint64(slots), np.uint32(page))
    host_order = order is not None and total > 1 and not orders_on_device(dev, total)
    i, j = out if out is not None else (host_empty(total, np.int64), host_empty(total, np.int64))
    if order is not None and total > 1 and not host_order:
        params["keyed"] = True
        ck = cla.empty(queue, total, np.uint64, allocator=dev.pool)
        events.add("drain", kernel(dev, TEMPLATE, "compact", "pages_compact", params)(queue, *grid, *head, ck.data))
        held = [ck]             # the only reference: the unsorted keys go back to the pool once placed
        del ck
        # in chunks where the columns come down in plain copies (a kept, registered result;
        # the staging lanes' host copies would not keep pace with more than one at a time)
        parts = order_parts(total) if direct(dev, i) and direct(dev, j) else 1
        if parts > 1:
            return _ordered_parts(queue, dev, held, order, parts, events, (i, j), overlap)
        ck = _sorted_keys(queue, dev, held, order, events)
        ci, cj = (cla.empty(queue, total, np.int64, allocator=dev.pool) for _ in range(2))
        ev = _unkey(queue, dev, ck, total, 0, ci, cj, events)
        del ck
    else:
        ci, cj = (cla.empty(queue, max(total, 1), np.int64, allocator=dev.pool) for _ in range(2))
        k = kernel(dev, TEMPLATE, "compact", "pages_compact", params)
        mapped = [] if ids is None else [ids[0].data, ids[1].data]
        if overlap is None and not host_order and total > 1 and page == slots and direct(dev, i) and direct(dev, j):
            # one dense page (slot s is record s): split in chunks, each chunk's columns
            # copied on the copy queue as soon as its split is done, none waited for singly
            def split_chunk(s0, s1):
                ev = events.add("drain", k(queue, (global_size(s1 - s0, 64),), (64,), records.data, fills.data,
                                           offs.data, np.uint64(s1), np.uint32(page), ci.data, cj.data, *mapped,
                                           global_offset=(s0,)))
                queue.flush()
                return s0, s1, ev

            cut = [total * c // order_parts(total) for c in range(order_parts(total) + 1)]
            return _down_in_chunks(dev, (ci, cj), (i, j), (split_chunk(s0, s1) for s0, s1 in zip(cut[:-1], cut[1:])),
                                   events)
        ev = events.add("drain", k(queue, *grid, *head, ci.data, cj.data, *mapped))
    down = None
    if overlap is not None:
        queue.flush()
        overlap()
        down = dev.side_queue
    if total:
        download(dev, ci[:total], out=i, queue=down, wait_for=[ev], events=events)
        download(dev, cj[:total], out=j, queue=down, wait_for=[ev], events=events)
    if host_order:
        key = pair_keys([(i, j)])
        key.sort()
        unkey(key, out=(i, j))
    return i, j


def pair_keys(parts):
    """One uint64 key i << 32 | j a pair of ``parts`` (a list of (i, j)
    integer arrays, indices below 2^32), concatenated: the (i, j) order is
    the keys' order."""
    if not parts:
        return np.empty(0, np.uint64)
    return np.concatenate([(np.asarray(a).astype(np.uint64) << np.uint64(32)) | np.asarray(b).astype(np.uint64)
                           for a, b in parts])


def unkey(key, out=None):
    """(i, j) int64 arrays (``out``: a pair to fill) of :func:`pair_keys`'
    keys: the halves split by a view (a divmod cost 0.37 s for 12M pairs on
    a 2-core host)."""
    half = key.view(np.uint32).reshape(-1, 2)
    lo, hi = (0, 1) if np.little_endian else (1, 0)
    if out is None:
        return half[:, hi].astype(np.int64), half[:, lo].astype(np.int64)
    out[0][...] = half[:, hi]
    out[1][...] = half[:, lo]
    return out


def order_parts(total):
    """How many chunks of rows :func:`split`'s ``order`` asks for, to sort and
    download one after another (each chunk's download overlapping the next
    chunk's sort; likewise the chunks of one dense page split without an
    order): one below 2 * ORDER_PART records, else at least ORDER_PARTS_MIN.
    The columns are made before the sort then, and a chunk's asynchronous
    sort takes up to ~80 bytes a key (its copy, its output, two packed
    buffers for rows longer than a block); chunks of at most
    ``total / ORDER_CHUNK_SHARE`` keys keep that within
    ``outputs.pairs.ORDERED_DEVICE_BYTES`` a record, and where rows are too
    long to cut so (:func:`_ordered_parts`) the order is one sort."""
    if total < 2 * ORDER_PART:
        return 1
    return min(max(ORDER_PARTS_MIN, -(-total // ORDER_PART)), ORDER_PARTS_MAX)


def _unkey(queue, dev, keys, n, base, ci, cj, events):
    """Sorted keys ``keys[:n]`` split into the columns' elements [base, base + n)."""
    params = {"sg_backend": "local", "mapped": False, "keyed": True, "keys_run": KEYS_RUN}
    return events.add("drain", kernel(dev, TEMPLATE, "compact", "pages_unkey", params)(
        queue, (global_size(n, 64),), (64,), keys.data, np.uint64(n), np.uint64(base), ci.data, cj.data))


def _ordered_parts(queue, dev, held, rows, parts, events, out, overlap):
    """:func:`split`'s ``order`` in chunks of rows of about equal records: the
    keys ``held[0]`` placed in their rows' segments once, then each chunk's
    segments sorted and split into the columns while the chunks before come
    down into ``out`` (the host columns (i, j), each a direct download:
    :func:`~..core.transfer.direct`). The download, ~5x the sort's time at
    the DMA rate, then hides all but the first chunk's sort. Where a chunk
    (a whole row at least) would hold more than 1 / ORDER_CHUNK_SHARE of the
    keys, its sort's buffers would not fit the order's memory beside the
    columns: the keys are then sorted at once and the columns made after,
    as without chunks (their copies still on the copy queue)."""
    params = {"sg_backend": "local", "mapped": False, "keyed": True, "keys_run": KEYS_RUN}
    total = held[0].size
    placed, offsets, cuts = rows_placed(queue, dev, held.pop(), rows, events, parts)
    chunks = [(int(r0), int(k0), int(r1), int(k1)) for (r0, k0), (r1, k1) in zip(cuts[:-1], cuts[1:]) if k1 > k0]
    if max(k1 - k0 for _, k0, _, k1 in chunks) * ORDER_CHUNK_SHARE > total:
        got = _sort_placed(queue, placed, offsets, events)
        del placed, offsets
        ci, cj = (cla.empty(queue, total, np.int64, allocator=dev.pool) for _ in range(2))
        pieces = [(0, total, _unkey(queue, dev, got, total, 0, ci, cj, events))]
        del got
    else:
        ci, cj = (cla.empty(queue, total, np.int64, allocator=dev.pool) for _ in range(2))
        rebase = kernel(dev, TEMPLATE, "compact", "rows_rebase", params)

        def sort_chunk(r0, k0, r1, k1):
            offs = cla.empty(queue, r1 - r0 + 1, np.uint64, allocator=dev.pool)
            events.add("order", rebase(queue, (global_size(r1 - r0 + 1, 64),), (64,), offsets.data, np.uint32(r0),
                                       np.uint32(r1 - r0), offs.data))
            # asynchronous and without checks: nothing of the sort copies to the host (such a
            # copy would wait behind the chunks' downloads in the device's copy engine)
            got = _sort_placed(queue, placed[k0:k1], offs, events, sync=False, checks=False)
            ev = _unkey(queue, dev, got, k1 - k0, k0, ci, cj, events)
            queue.flush()           # on the device while the host enqueues the next chunk
            return ev

        pieces = ((k0, k1, sort_chunk(r0, k0, r1, k1)) for r0, k0, r1, k1 in chunks)

    def after():
        # the next round (overlap) after the last chunk's sort, beside the copies; the
        # placed keys, sorted, back to the pool for it
        nonlocal placed, offsets
        placed = offsets = None
        if overlap is not None:
            queue.flush()
            overlap()

    return _down_in_chunks(dev, (ci, cj), out, pieces, events, after)


def _down_in_chunks(dev, cols, out, pieces, events, after=None):
    """The host columns ``out`` filled from the device columns ``cols`` piece
    by piece: ``pieces`` yields (k0, k1, event) as each piece's elements
    [k0, k1) are enqueued (a chunk's split or sort), and the piece's copies
    are enqueued behind its event on the device's copy queue at once (each
    ``out`` column a direct download, :func:`~..core.transfer.direct`): the
    device moves them back to back, none waiting for the host to enqueue the
    next piece (the side queue, the sorts' small reads, stays free).
    ``after()`` runs once every piece is enqueued; then every copy is waited
    for -- also when an error is raised, so no copy still reads ``cols`` or
    writes ``out``. Returns ``out``."""
    cq, downs = dev.copy_queue, []
    try:
        for k0, k1, ev in pieces:
            for col, host in zip(cols, out):
                downs.append(enqueue_download(dev, col[k0:k1], host[k0:k1], queue=cq, wait_for=[ev], events=events))
            cq.flush()
        if after is not None:
            after()
    finally:
        if downs:
            cl.wait_for_events(downs)
    return out


def _sorted_keys(queue, dev, held, rows, events):
    """The keys ``held[0]`` (uint64 device array, i << 32 | j, every i below
    ``rows``) sorted on the device: each placed in its row's segment
    (:func:`rows_placed`; the list's reference then dropped -- the caller
    holds no other --, so the pool can hand that memory to the sort), the
    segments sorted by the segmented sort (the commands under the "order"
    step)."""
    placed, offsets = rows_placed(queue, dev, held.pop(), rows, events)
    return _sort_placed(queue, placed, offsets, events)


def _sort_placed(queue, placed, offsets, events, **kw):
    """The segments ``offsets`` of ``placed`` sorted by the segmented sort
    (``kw``: its sync/checks), its commands under the "order" step."""
    from ..segsort import sort as device_sort

    got, ev = device_sort(queue, placed, offsets, **kw)
    for evs in ev.values():
        for e in evs:
            events.add("order", e)
    return got


def rows_placed(queue, dev, keys, rows, events, parts=None):
    """(placed, offsets): ``keys`` (uint64 device array, i << 32 | j, every i
    below ``rows``) counted per row, the counts scanned into the rows' uint32
    offsets (rows + 1 of them) and each key placed in its row's segment
    (in no particular order within it); the commands under the "order" step.
    ``parts``: also the cuts of the rows into that many chunks of about equal
    keys, read while the keys are placed: (placed, offsets, cuts), cuts a
    (parts + 1, 2) uint32 array of (first row, its offset), the last the end."""
    from ..core.launch import Events

    n = keys.size
    runs = -(-n // KEYS_RUN)          # KEYS_RUN keys a work-item (a work-group's block of them)
    grid = (global_size(runs, 64),), (64,)
    params = {"sg_backend": "local", "mapped": False, "keyed": True, "keys_run": KEYS_RUN}
    offsets = cla.empty(queue, rows + 1, np.uint32, allocator=dev.pool)
    fill_words(queue, offsets.data, rows + 1, events=events, step="order")
    events.add("order", kernel(dev, TEMPLATE, "compact", "keys_rows", params)(
        queue, *grid, keys.data, np.uint64(n), offsets.data))
    scanned = Events()
    exclusive_scan(queue, offsets, rows + 1, events=scanned, read_total=False)
    for evs in scanned.values():
        for e in evs:
            events.add("order", e)
    read = None
    if parts is not None:
        cuts = cla.empty(queue, 2 * (parts + 1), np.uint32, allocator=dev.pool)
        events.add("order", kernel(dev, TEMPLATE, "compact", "rows_split", params)(
            queue, (global_size(parts + 1, 64),), (64,), offsets.data, np.uint32(rows), np.uint32(parts),
            cuts.data))
        host = np.empty((parts + 1, 2), np.uint32)
        read = events.add("order", cl.enqueue_copy(queue, host, cuts.data, is_blocking=False))
    cur = cla.empty(queue, rows, np.uint32, allocator=dev.pool)
    events.add("order", kernel(dev, TEMPLATE, "compact", "rows_cursor", params)(
        queue, (global_size(rows, 64),), (64,), offsets.data, np.uint32(rows), cur.data))
    placed = cla.empty(queue, n, np.uint64, allocator=dev.pool)
    events.add("order", kernel(dev, TEMPLATE, "compact", "keys_scatter", params)(
        queue, *grid, keys.data, np.uint64(n), cur.data, placed.data))
    if read is None:
        return placed, offsets
    queue.flush()
    read.wait()
    return placed, offsets, host


def orders_on_device(device, n):
    """Whether :func:`split`'s ``order`` can sort ``n`` records on ``device``:
    the segmented sort's plan for n uint64 keys (64-bit tiles need the local
    memory GPUs have, not the 32 KiB of a simulator). Beside the pool's
    records the order takes the keys twice and the sort's buffers, then the
    columns: ``outputs.pairs.ORDERED_DEVICE_BYTES`` a record in all."""
    from ..segsort import Plan as SortPlan

    if n <= 1:
        return True
    try:
        SortPlan.resolve(device, {"size": int(n), "dtype": "uint64", "dims": 0})
    except ValueError:
        return False
    return True


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

    def drain(self, used, overlap=None, ids=None, order=None):
        """The records of pages [0, used) (records [0, used) where dense) as
        int64 numpy arrays (i, j). ``overlap``, ``ids``, ``order``: see :func:`split`
        (the pages are free for ``overlap``: every command it enqueues on the
        queue runs after the split)."""
        if used == 0:
            if overlap is not None:
                overlap()
            return np.empty(0, np.int64), np.empty(0, np.int64)
        q = self.queue
        if self.dense:          # one page of `used` records
            fill, at = small(q, np.array([used], np.uint32)), small(q, np.array([0], np.uint32))
            return split(q, self.pool, fill, at, used, used, used, self.events, overlap=overlap, ids=ids,
                         order=order)
        self.events.add("drain", cl.enqueue_copy(q, self.offs.data, self.fills.data, byte_count=4 * used))
        total, _ = exclusive_scan(q, self.offs, used, events=self.events)
        return split(q, self.pool, self.fills, self.offs, used * self.page, self.page, total, self.events,
                     overlap=overlap, ids=ids, order=order)

    def next_round(self):
        self.round += 1
