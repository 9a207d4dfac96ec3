"""Enqueue the rectangle join's kernels (no decisions: the plan made them)."""

import numpy as np
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.launch import global_size
from ..core.transfer import download, upload, zeros
from ..primitives.scan import exclusive_scan
from ..primitives.sort import padded_length, sort_pairs
from .plan import SWEEP_TEMPLATE, TEMPLATE

#: work-group size of the element-wise kernels (layout, grid and sweep builds)
SIMPLE_WG = 64


def layout(queue, device, real, dims, src, n, events):
    """The SoA columns of ``n`` boxes from the (n, 2d) device array ``src``
    and the check flags (1: a value not finite, 2: lo > hi), both device arrays."""
    prg = build(device, TEMPLATE, "layout", dict(real=real, dims=dims, wg_size=SIMPLE_WG))
    dst = cla.empty(queue, 2 * dims * max(n, 1), src.dtype, allocator=device.pool)
    flags = zeros(queue, 1, np.uint32, events=events)
    events.add("layout", program_kernel(prg, "rj_layout")(queue, (global_size(n, SIMPLE_WG),), (SIMPLE_WG,),
                                                          src.data, np.uint32(n), dst.data, flags.data))
    return dst, flags


def gather(queue, device, real, dims, src, n, ids, events):
    """The SoA columns of the boxes ``ids`` (a numpy uint32 array) of the SoA
    device columns ``src`` of n boxes."""
    m = len(ids)
    prg = build(device, TEMPLATE, "layout", dict(real=real, dims=dims, wg_size=SIMPLE_WG))
    dev_ids = upload(device, ids.astype(np.uint32), events=events)
    dst = cla.empty(queue, 2 * dims * max(m, 1), src.dtype, allocator=device.pool)
    events.add("gather", program_kernel(prg, "rj_gather")(queue, (global_size(m, SIMPLE_WG),), (SIMPLE_WG,),
                                                          src.data, np.uint32(n), dev_ids.data, np.uint32(m),
                                                          dst.data))
    return dst


def kernel(device, plan, output):
    """The built join kernel of the plan for the kernel ``output``."""
    if plan.method == "brute":
        return program_kernel(build(device, TEMPLATE, "brute", plan.params(output)), "rj_brute")
    if plan.method == "sweep":
        return program_kernel(build(device, SWEEP_TEMPLATE, "sweep_join", plan.params(output)), "rj_sweep")
    return program_kernel(build(device, TEMPLATE, "grid_join", plan.params(output)), "rj_grid")


class Grid:
    """The data boxes listed per cell: the dense cell table [cs, ce) (NC + 1
    cells, the last the overflow list) into ``vals``, built as the plan's
    ``grid_build`` says: 'scatter' (a counting sort: per-cell counts, the
    scan, an atomic scatter) or 'sort' (the (cell, box) pairs sorted by the
    shared sort primitive, boxes in increasing order inside a cell)."""

    def __init__(self, queue, device, plan, b, nb, events):
        g = plan.geometry
        prg = build(device, TEMPLATE, "grid_build", dict(real=plan.real, dims=plan.dims, wg_size=SIMPLE_WG))
        gsz, lsz = (global_size(nb, SIMPLE_WG),), (SIMPLE_WG,)
        geo = plan.geom_args() + [np.uint32(plan.cap)]
        self.nc = g.ncells
        if plan.grid_build == "scatter":
            cnt = zeros(queue, self.nc + 1, np.uint32, events=events)
            events.add("grid", program_kernel(prg, "rj_cell_hist")(queue, gsz, lsz, b.data, np.uint32(nb), *geo,
                                                                    np.uint32(self.nc), cnt.data))
            total, _ = exclusive_scan(queue, cnt, self.nc + 1, events=events)
            if total >= (1 << 32) - 1:
                raise ValueError(f"the grid lists {total} entries, more than 2^32 - 1; use method='brute'")
            self.cs = cnt
            self.ce = cnt.copy()
            self.vals = cla.empty(queue, max(total, 1), np.uint32, allocator=device.pool)
            events.add("grid", program_kernel(prg, "rj_cell_scatter")(queue, gsz, lsz, b.data, np.uint32(nb),
                                                                       *geo, np.uint32(self.nc), self.ce.data,
                                                                       self.vals.data))
            self._entry_boxes(queue, device, prg, b, nb, total, plan, events)
            return
        offs = cla.empty(queue, max(nb, 1), np.uint32, allocator=device.pool)
        events.add("grid", program_kernel(prg, "rj_cell_count")(queue, gsz, lsz, b.data, np.uint32(nb), *geo,
                                                                 offs.data))
        total, _ = exclusive_scan(queue, offs, nb, events=events)
        n2 = padded_length(device, total)
        keys = cla.empty(queue, n2, np.uint64, allocator=device.pool)
        self.vals = cla.empty(queue, n2, np.uint32, allocator=device.pool)
        events.add("grid", program_kernel(prg, "rj_cell_fill")(queue, gsz, lsz, b.data, np.uint32(nb), *geo,
                                                                np.uint32(self.nc), offs.data, keys.data,
                                                                self.vals.data))
        events.add("grid", program_kernel(prg, "rj_cell_pad")(queue, (global_size(n2 - total, SIMPLE_WG),), lsz,
                                                               np.uint32(total), np.uint32(n2), keys.data,
                                                               self.vals.data))
        sort_pairs(queue, keys, self.vals, events=events)
        self.cs = zeros(queue, self.nc + 1, np.uint32, events=events)
        self.ce = zeros(queue, self.nc + 1, np.uint32, events=events)
        events.add("grid", program_kernel(prg, "rj_cell_bounds")(queue, (global_size(total, SIMPLE_WG),), lsz,
                                                                  keys.data, np.uint32(total), self.cs.data,
                                                                  self.ce.data))
        self._entry_boxes(queue, device, prg, b, nb, total, plan, events)

    def _entry_boxes(self, queue, device, prg, b, nb, total, plan, events):
        """The entries' boxes in list order (``sbox``: rows of 2d values)."""
        self.entries = total
        self.sbox = cla.empty(queue, max(total, 1) * 2 * plan.dims, b.dtype, allocator=device.pool)
        events.add("grid", program_kernel(prg, "rj_entry_boxes")(queue, (global_size(total, SIMPLE_WG),),
                                                                  (SIMPLE_WG,), b.data, np.uint32(nb),
                                                                  self.vals.data, np.uint32(total),
                                                                  self.sbox.data))

    def big_queries(self, queue, device, plan, q, nq, events):
        """Sorted numpy ids of the query boxes over more than ``plan.qcap``
        cells (the grid join leaves them to brute force)."""
        prg = build(device, TEMPLATE, "grid_build", dict(real=plan.real, dims=plan.dims, wg_size=SIMPLE_WG))
        n = zeros(queue, 1, np.uint32, events=events)
        ids = cla.empty(queue, max(nq, 1), np.uint32, allocator=device.pool)
        events.add("grid", program_kernel(prg, "rj_big_queries")(
            queue, (global_size(nq, SIMPLE_WG),), (SIMPLE_WG,), q.data, np.uint32(nq), *plan.geom_args(),
            np.uint32(plan.qcap), n.data, ids.data))
        m = int(download(device, n, events=events)[0])
        if m == 0:
            return np.empty(0, np.uint32)
        return np.sort(download(device, ids[:m], events=events))


class Sweep:
    """The data boxes sorted for the sweep: narrow boxes (lo_0 + W >= hi_0)
    by lo_0 at sorted positions [0, nn), the wide ones after them (``nn``: a
    one-element device array, read by the join); ``vals``: the box ids in
    sorted order, ``srow``: their boxes as rows of 2d values. The (key, box)
    pairs go through the shared sort (host/primitives), so equal keys keep
    box order and the order is deterministic."""

    def __init__(self, queue, device, plan, b, nb, events):
        prg = build(device, SWEEP_TEMPLATE, "sweep_build", dict(real=plan.real, dims=plan.dims, wg_size=SIMPLE_WG))
        n2 = padded_length(device, nb)
        keys = cla.empty(queue, n2, np.uint64, allocator=device.pool)
        self.vals = cla.empty(queue, n2, np.uint32, allocator=device.pool)
        self.nn = zeros(queue, 1, np.uint32, events=events)
        events.add("sweep", program_kernel(prg, "rj_sweep_keys")(
            queue, (global_size(n2, SIMPLE_WG),), (SIMPLE_WG,), b.data, np.uint32(nb), plan.width_arg(),
            np.uint32(n2), keys.data, self.vals.data, self.nn.data))
        sort_pairs(queue, keys, self.vals, events=events)
        self.srow = cla.empty(queue, max(nb, 1) * 2 * plan.dims, b.dtype, allocator=device.pool)
        events.add("sweep", program_kernel(prg, "rj_sweep_rows")(
            queue, (global_size(nb, SIMPLE_WG),), (SIMPLE_WG,), b.data, np.uint32(nb), self.vals.data,
            self.srow.data))


def join(queue, device, plan, output, q, nq, b, nb, index, nw, w0, wl, wl_on, tail, events):
    """One pass over the writers [w0, w0 + nw), or the nw ids in ``wl`` when
    ``wl_on`` (query boxes, or (query, part) for a split brute force: see
    ``RectPlan.brute_layout``); ``q``/``b``: the SoA device columns; ``index``:
    the :class:`Grid` or :class:`Sweep` of the plan's method (None for brute
    force); ``tail``: the output's arguments."""
    k = kernel(device, plan, output)
    if plan.method == "sweep":
        args = [q.data, np.uint32(nq), index.srow.data, index.vals.data, index.nn.data, np.uint32(nb),
                plan.width_arg()]
    else:
        args = [q.data, np.uint32(nq), b.data, np.uint32(nb)]
    if plan.method == "grid":
        args += plan.geom_args() + [np.uint32(index.nc), index.cs.data, index.ce.data, index.vals.data,
                                    index.sbox.data]
    elif plan.method == "brute":
        nqp, chunk, _ = plan.brute_layout(nq, nb)
        args += [np.uint32(nqp), np.uint32(chunk)]
    args += [np.uint32(nw), np.uint32(w0), wl.data, np.uint32(bool(wl_on))] + list(tail)
    w = plan.wg_size
    events.add("join", k(queue, (global_size(nw, w),), (w,), *args))
