"""Enqueue the segmented sort (no decisions: the plan made them).

Three phases, with the one read of the bin counts between the first two:

1. :func:`count_bins` (sync) and :func:`binning`: zero the control words
   (unless an earlier sort on the queue left them zeroed:
   :func:`~..core.transfer.prepare_zeroed`), the histogram (``bin_hist``, or
   the small sort in async mode), the small sort, ``bin_scatter``, the read
   of the counts (sync: on a second queue after ``bin_hist``, overlapping
   the small sort);
2. :func:`bins`: one launch per non-empty bin the small sort does not take;
3. the grid bin: :func:`read_grid` (its segments' ids and extents),
   :func:`grid_layout` (the packed buffer's layout on the host) and
   :func:`grid_tables`, then :func:`grid` (tile sort, merge rounds, gather).

Async mode waits for nothing: :func:`bins` launches every bin from upper
bounds on its count (the kernels read the real counts and stride over them),
:func:`grid_device_tables` lays the grid bin out on the device, and
:func:`grid` launches for bounds on its size and rounds.

Steps of the :class:`~clkernels.host.core.launch.Events`: "fill", "small",
"hist", "scatter", "read", "reg", "block" (bins in bin order), "grid_read",
"tables" (async: "layout"), "tile", "merge", "gather", "fix" (bare float keys).
"""

import dataclasses

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core import transfer
from ..core.transfer import fill_words
from ..core.build import build, program_kernel
from ..core.launch import check_launch, global_size, groups


class Programs:
    """The built programs of a plan on one device (kernel objects come from
    :func:`program_kernel`: one per thread)."""

    def __init__(self, device, plan, stride=False):
        self.plan = plan
        self.binning = build(device, *plan.binning_source(device))
        self.small = build(device, *plan.small_source(count=stride)) if plan.nsmall else None
        self.reg = tuple(None if i < plan.nsmall else build(device, *plan.reg_source(b, stride))
                         for i, b in enumerate(plan.reg_bins))
        self.block = tuple(build(device, *plan.block_source(b, stride)) for b in plan.block_bins)
        self.grid = build(device, *plan.grid_source())
        self.fix = None             # float keys' fix-up, built at the first bare float sort
        for kernel, wg, local in self.launches():
            check_launch(device, kernel, wg, local)

    def launches(self):
        """(kernel, work-group size, 0) of every kernel the plan may launch."""
        p = self.plan
        out = [(program_kernel(self.binning, n), p.bin_wg, 0) for n in ("bin_hist", "bin_scatter")]
        if self.small is not None:
            out.append((program_kernel(self.small, "smallsort"), p.reg_wg, 0))
        out += [(program_kernel(prg, "regsort"), p.reg_wg, 0) for prg in self.reg if prg is not None]
        for prg, b in zip(self.block, p.block_bins):
            out += [(program_kernel(prg, n), b.wg, 0) for n in ("block_sort", "tile_sort")]
        out += [(program_kernel(self.grid, n), p.merge_wg, 0)
                for n in ("grid_layout", "grid_merge", "grid_gather")]
        return out


_programs = {}


def programs(device, plan, stride=False):
    """The :class:`Programs` of ``plan`` on ``device`` (built and checked
    once); ``stride``: the async mode's bin kernels (see :meth:`Plan.reg_source`)."""
    key = (device.context.int_ptr, id(plan), stride)
    got = _programs.get(key)
    if got is None or got.plan is not plan:
        got = _programs[key] = Programs(device, plan, stride)
    return got


@dataclasses.dataclass
class Buffers:
    """The buffers and scalar arguments of one sort (keys and values as
    unsigned words of their width; ``vals``/``ovals`` stand in for absent
    values with ``vbytes`` 0). ``keys`` may be set after :func:`binning`
    where the plan has no small sort."""
    off: cl.Buffer
    ctl: cl.Buffer
    seg_ids: cl.Buffer
    okeys: cl.Buffer
    ovals: cl.Buffer
    nseg: np.uint32
    n: np.uint64
    mode: np.uint32
    vbytes: np.uint32
    keys: cl.Buffer = None
    vals: cl.Buffer = None

    def vargs(self):
        return (self.vals, self.ovals, self.vbytes)


def _fill_count(queue, plan, prg, off, nseg, n, ctl, events, wait_for, zeroed, count):
    """Zero ``ctl`` (unless ``zeroed``: :func:`~..core.transfer.take_zeroed`)
    and, with ``count``, count the bins (``bin_hist``); the first command
    waits for ``wait_for``. Returns (the count's event or None, the wait list
    left for the next command)."""
    if not zeroed:
        fill_words(queue, ctl, plan.ctl_words, events=events, step="fill", wait_for=wait_for)
        wait_for = None
    if not count:
        return None, wait_for
    k = program_kernel(prg.binning, "bin_hist")
    return events.add("hist", k(queue, (global_size(int(nseg), plan.bin_wg),), (plan.bin_wg,), off, nseg, n, ctl,
                                wait_for=wait_for)), None


def count_bins(queue, plan, prg, off, nseg, n, ctl, host, side, events, wait_for=None, zeroed=False):
    """The sync path's first commands, enqueued before the call sets up the
    rest: zero ``ctl`` (unless ``zeroed``), count the bins (``bin_hist``) and
    read the counts and the error flags (the first ``nbins + 1`` words, final
    after the count: the small sort and the scatter write the words after
    them, and on invalid offsets set the flags' same bits again) into the
    page-locked ``host`` array on the ``side`` queue as soon as the count is
    done, so the host has them while the small sort runs. The first command
    waits for ``wait_for``. Returns (the read's event, the count's event),
    flushed."""
    counted, _ = _fill_count(queue, plan, prg, off, nseg, n, ctl, events, wait_for, zeroed, True)
    queue.flush()
    read = events.add("read", cl.enqueue_copy(side, host[:plan.nbins + 1], ctl, is_blocking=False,
                                              wait_for=[counted]))
    side.flush()
    return read, counted


def binning(queue, plan, prg, buf, host, events, wait_for=None, scatter=True, counted=None, zeroed=False):
    """Sort the small sort's bins and scatter the other bins' segment ids.
    ``counted``: the event of :func:`count_bins` (the sync path); else (async
    mode) first zero ``ctl`` (unless ``zeroed``), let the small sort count
    the bins on its way (``bin_hist`` without a small sort), and read the
    control words into ``host`` (any host array, or no read for None) behind
    the kernels. The first command waits for ``wait_for``. Returns (the
    read's event or None, the last kernel's event), flushed."""
    nseg = int(buf.nseg)
    small = prg.small is not None and scatter
    last = counted
    if counted is None:
        last, wait_for = _fill_count(queue, plan, prg, buf.off, buf.nseg, buf.n, buf.ctl, events, wait_for,
                                     zeroed, not small)
    if small:
        k = program_kernel(prg.small, "smallsort")
        last = events.add("small", k(queue, (global_size(nseg, plan.reg_wg),), (plan.reg_wg,), buf.keys,
                                     *buf.vargs(), buf.mode, buf.off, buf.nseg, buf.n, buf.ctl, buf.okeys,
                                     wait_for=wait_for))
        wait_for = None
    if scatter:
        k = program_kernel(prg.binning, "bin_scatter")
        last = events.add("scatter", k(queue, (global_size(nseg, plan.bin_wg),), (plan.bin_wg,), buf.off,
                                       buf.nseg, buf.n, buf.ctl, buf.seg_ids, wait_for=wait_for))
    queue.flush()
    if host is None or counted is not None:
        return None, last
    read = events.add("read", cl.enqueue_copy(queue, host[:plan.nbins + 1], buf.ctl, is_blocking=False))
    queue.flush()
    return read, last


def bins(queue, plan, prg, buf, counts, events, cap=None):
    """Launch every bin of a non-zero count but the small sort's and the grid
    bin. ``counts``: the bins' segment counts as read, or (async mode, with
    ``cap`` the most work-groups of a launch) upper bounds on them; the
    kernels read the real counts from ``ctl`` and stride over them. Returns
    the last event (None when nothing was launched)."""
    last = None
    for i, b in enumerate(plan.reg_bins):
        c = int(counts[i])
        if c and i >= plan.nsmall:
            k = program_kernel(prg.reg[i], "regsort")
            g = _capped(groups(c * b.m, plan.reg_wg), cap)
            last = events.add("reg", k(queue, (g * plan.reg_wg,), (plan.reg_wg,),
                                       buf.keys, *buf.vargs(), buf.mode, buf.off, buf.seg_ids, buf.ctl,
                                       np.uint32(i), buf.okeys))
    for j, b in enumerate(plan.block_bins):
        i = len(plan.reg_bins) + j
        c = int(counts[i])
        if c:
            k = program_kernel(prg.block[j], "block_sort")
            last = events.add("block", k(queue, (_capped(c, cap) * b.wg,), (b.wg,), buf.keys, *buf.vargs(),
                                         buf.mode, buf.off, buf.seg_ids, buf.ctl, np.uint32(i), buf.okeys))
    queue.flush()
    return last


def floatfix(queue, plan, prg, buf, device, events):
    """Bare float keys: put back -0.0 and NaN payloads (in input order) in
    the segments that hold any, where a sort kernel found any (the kernels
    do nothing otherwise). Returns the last event."""
    if prg.fix is None:
        prg.fix = build(device, *plan.floatfix_source())
        for name in ("floatfix_short", "floatfix_long"):
            check_launch(device, program_kernel(prg.fix, name), plan.bin_wg)
    nseg = int(buf.nseg)
    k = program_kernel(prg.fix, "floatfix_short")
    events.add("fix", k(queue, (global_size(nseg, plan.bin_wg),), (plan.bin_wg,), buf.keys, buf.mode, buf.off,
                        buf.nseg, buf.n, buf.ctl, buf.okeys))
    k = program_kernel(prg.fix, "floatfix_long")
    g = max(1, min(nseg, 8 * device.compute_units))
    ev = events.add("fix", k(queue, (g * plan.bin_wg,), (plan.bin_wg,), buf.keys, buf.mode, buf.off, buf.seg_ids,
                             buf.n, buf.ctl, buf.okeys))
    queue.flush()
    return ev


def _capped(g, cap):
    return g if cap is None else min(g, cap)


def read_grid(queue, off, seg_ids, first, count, allocator, events):
    """Enqueue the reads of the grid bin's segment ids (``seg_ids[first:first
    + count]``) and their starts and ends (``off``: the uint64 offsets array);
    returns (ids, starts, ends) host arrays, valid once the "grid_read"
    events are complete."""
    ids = seg_ids[first:first + count]
    out = []
    for src in (off, off[1:]):
        ext = cla.empty(queue, count, np.uint64, allocator=allocator)
        cla.take(src, ids, out=ext, queue=queue)
        h = np.empty(count, np.uint64)
        events.add("grid_read", cl.enqueue_copy(queue, h, ext.data, is_blocking=False, wait_for=ext.events))
        out.append(h)
    h_ids = np.empty(count, np.uint32)
    events.add("grid_read", cl.enqueue_copy(queue, h_ids, seg_ids.base_data, src_offset=4 * first,
                                            is_blocking=False))
    return h_ids, out[0], out[1]


@dataclasses.dataclass(frozen=True, eq=False)
class GridLayout:
    """Where the grid bin's long segments go: segment j (from ``gstart[j]``,
    ``glen[j]`` elements) padded to a multiple of the tile at ``pstart[j]`` of
    a packed buffer of ``total`` elements, merged in rounds of run
    ``widths``; ``hdr`` = [segments, total, longest padded segment] as the
    kernels read it."""
    pstart: np.ndarray        # uint64, count + 1
    gstart: np.ndarray        # uint64 per segment
    glen: np.ndarray          # uint32 per segment
    hdr: np.ndarray           # uint64, 3
    total: int
    widths: tuple


def grid_layout(plan, ids, starts, ends):
    """The :class:`GridLayout` of the grid bin's segments (ids, starts, ends
    as read from the device), in input order for locality."""
    T = plan.tile
    order = np.argsort(ids, kind="stable")
    starts = starts[order].astype(np.int64)
    lens = ends[order].astype(np.int64) - starts
    padded = -(-lens // T) * T
    pstart = np.zeros(len(lens) + 1, np.uint64)
    np.cumsum(padded, out=pstart[1:])
    total, maxlen = int(pstart[-1]), int(padded.max())
    widths, w = [], T
    while w < maxlen:
        widths.append(w)
        w *= 2
    return GridLayout(pstart, starts.astype(np.uint64), lens.astype(np.uint32),
                      np.array([len(lens), total, maxlen], np.uint64), total, tuple(widths))


def grid_tables(device, queue, layout, allocator, events):
    """Upload the host's :class:`GridLayout`: the tables (pstart, gstart, glen,
    hdr) the grid kernels read."""
    return tuple(transfer.upload(device, getattr(layout, name), queue=queue, allocator=allocator,
                                 events=events, step="tables").data
                 for name in ("pstart", "gstart", "glen", "hdr"))


def grid_device_tables(queue, plan, prg, buf, cg, allocator, events):
    """Async mode: the grid bin's tables (pstart, gstart, glen, hdr), sized for
    at most ``cg`` segments, written on the device by ``grid_layout`` from the
    bin's count and segment ids (an empty layout for invalid offsets)."""
    tab = (allocator(8 * (cg + 1)), allocator(8 * cg), allocator(4 * cg), allocator(8 * 3))
    k = program_kernel(prg.grid, "grid_layout")
    events.add("layout", k(queue, (plan.merge_wg,), (plan.merge_wg,), buf.off, buf.seg_ids, buf.ctl,
                           np.uint32(plan.nbins), np.uint32(cg), *tab))
    return tab


def grid(queue, plan, prg, buf, tables, total, widths, allocator, events, cap=None):
    """The grid bin from its ``tables`` (:func:`grid_tables` or
    :func:`grid_device_tables`): sort the tiles into a packed buffer, merge in
    rounds of ``widths``, gather. ``total`` (the packed elements) and the
    widths are the layout's, or bounds on them (async mode, with ``cap``:
    the kernels read the layout and stride over it). Returns the last event."""
    pstart, gstart, glen, hdr = tables
    packed = [allocator(total * plan.elem_bytes) for _ in range(2)]
    b = plan.block_bins[-1]
    k = program_kernel(prg.block[-1], "tile_sort")
    events.add("tile", k(queue, (_capped(total // plan.tile, cap) * b.wg,), (b.wg,), buf.keys, buf.mode,
                         pstart, gstart, glen, hdr, packed[0], buf.ctl))
    K, mw = plan.merge_k, plan.merge_wg
    gsz = _capped(total // (K * mw), cap) * mw          # K * mw divides the tile, hence the total
    merge = program_kernel(prg.grid, "grid_merge")
    src = 0
    for w in widths:
        events.add("merge", merge(queue, (gsz,), (mw,), packed[src], packed[1 - src], pstart, hdr,
                                  np.uint64(w)))
        src = 1 - src
    gather = program_kernel(prg.grid, "grid_gather")
    last = events.add("gather", gather(queue, (_capped(groups(total, mw), cap) * mw,), (mw,), *packed,
                                       pstart, hdr, gstart, glen, buf.keys, *buf.vargs(), buf.mode,
                                       buf.okeys))
    queue.flush()
    return last
