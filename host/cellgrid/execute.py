"""Enqueue the grid's kernels: cell keys, the gather of kernel coordinates in
cell order, and the pair kernels (no decisions: the plans made them)."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.launch import Events, global_size, groups, pow2_floor
from ..core.transfer import kept, zeroed_buffer, zeros
from ..primitives import exclusive_scan, padded_length, sort_pairs
from ..primitives.pages import stage_fit
from . import bins
from . import plan as plan_mod
from .plan import BITONIC_MAX_POINTS, CELLS_WG, JOIN_TEMPLATE, TEMPLATE, WL_BUCKETS


def _real(dtype):
    return "double" if np.dtype(dtype) == np.float64 else "float"


def _wide(device):
    return np.float64 if device.fp64 else np.float32


def key_length(device, n):
    """Length of the key arrays of n points: the bitonic sort's padded power of
    two up to ``BITONIC_MAX_POINTS``, n beyond (see :func:`sort`)."""
    return padded_length(device, max(n, 1)) if n <= BITONIC_MAX_POINTS else n


def sort(queue, device, kk, vv, n, events):
    """The first n pairs of (``kk`` uint64 keys, ``vv`` uint32 ascending
    indices), of :func:`key_length`, in (key, index) order: the bitonic
    primitive in place (padding sorts last) or, beyond ``BITONIC_MAX_POINTS``,
    the segmented sort's kernels for one long segment (stable, without a host
    wait: :func:`~..segsort.sort_long`).
    Returns (keys, indices) device arrays."""
    if n <= BITONIC_MAX_POINTS:
        sort_pairs(queue, kk, vv, events=events)
        return kk, vv
    from ..segsort import sort as segsort, sort_long

    ev = Events()
    got = sort_long(queue, kk[:n], vv[:n], ev)
    if got is None:
        offs = kept(queue, np.array([0, n], np.int64))
        got, ev = segsort(queue, kk[:n], offs, vv[:n], sync=False)
    for evs in ev.values():
        for e in evs:
            events.add("sort", e)
    return got


def keys(queue, device, x, n, n2, geom, events, xorder=False):
    """Cell keys (uint64) and indices (uint32) of the n points, padded to n2;
    ``xorder`` (cell ids below 2^32): keys cell << 32 | the point's place in
    its cell along dimension 0 (:func:`key_cells` makes them cell ids after
    the sort)."""
    d = x.shape[1]
    prg = build(device, TEMPLATE, "build", dict(orig=_real(x.dtype), real=_real(x.dtype), dim=d,
                                                periodic=geom.box is not None, xorder=xorder))
    wide = _wide(device)
    g = list(geom.lo) + list(geom.width) + (list(geom.box) if geom.box is not None else [1.0] * d)
    gd = kept(queue, np.asarray(g, wide))
    ig = kept(queue, np.array(list(geom.ncell) + list(geom.stride), np.uint64))
    kk = cla.empty(queue, n2, np.uint64, allocator=device.pool)
    vv = cla.empty(queue, n2, np.uint32, allocator=device.pool)
    events.add("keys", program_kernel(prg, "grid_keys")(
        queue, (global_size(n2, 64),), (64,), x.data, np.uint32(n), np.uint32(n2), gd.data, ig.data,
        kk.data, vv.data))
    return kk, vv, ig


def key_cells(queue, device, x, kk, n, geom, events):
    """The sorted ``xorder`` keys of :func:`keys` turned into cell ids, in place."""
    prg = build(device, TEMPLATE, "build", dict(orig=_real(x.dtype), real=_real(x.dtype), dim=x.shape[1],
                                                periodic=geom.box is not None, xorder=True))
    events.add("keys", program_kernel(prg, "grid_key_cells")(queue, (global_size(n, 64),), (64,), kk.data,
                                                             np.uint32(n)))


def gather(queue, device, x, perm, scaling, box, events):
    """Kernel coordinates (d, n) of the points in sorted order."""
    n, d = x.shape
    prg = build(device, TEMPLATE, "build", dict(orig=_real(x.dtype), real=_real(scaling.real), dim=d,
                                                periodic=box is not None))
    wide = _wide(device)
    out = cla.empty(queue, (d, n), scaling.real, allocator=device.pool)
    sh = scaling.shift or (0.0,) * d
    args = []
    for k in range(d):
        args.append(wide(sh[k]))
        if box is not None:
            args.append(wide(box[k]))
    events.add("gather", program_kernel(prg, "grid_gather")(
        queue, (global_size(n, 64),), (64,), x.data, np.uint32(n), perm.data, *args,
        wide(scaling.scale), out.data))
    return out


def pairs(queue, device, plan, a, b, output, tail, exact_args, events, nbins=0, guess="search", band_room=0,
          table=None):
    """One pair kernel over grids ``a`` and ``b`` (b is a for self pairs);
    ``tail`` the output's arguments before the output buffer (a histogram's
    with its bin table's, ``table``: a :class:`.bins.BinTable` or None), ``exact_args``
    (X0, pa, Y0, pb, xp: device arrays) or None: then the kernel lists up to
    ``band_room`` band pairs and :func:`band_pass` decides them (a pass that
    found more runs again with room for all, or, past :func:`.plan.band_list_max`,
    with the band pairs decided in double in the kernel's loop). Returns the
    uint64 output (count or bins)."""
    cross = b is not a
    exact = exact_args is not None
    params = dict(real=_real(a.scaling.real), orig=_real(a.orig.dtype), dim=a.d, periodic=a.geom.box is not None,
                  wg_size=plan.wg_size, variant=plan.variant, output=output, hist_local=plan.hist_local,
                  local64=plan.local64, exact=exact, guess=guess, by_cell=plan.by_cell,
                  table=None if table is None else (bins.TABLE_OUT, bins.TABLE_EDGE),
                  window=a.xorder and b.xorder and (plan.variant == "row" and a.geom.box is None
                                                    or plan.variant == "cell" and (a.geom.box is None or plan.by_cell)))
    tie = []
    if params["window"]:
        # points whose places in a cell tie in the sort key (one 32-bit step, or the
        # rounding of the place's t = (x - lo) / width, up to m0 cells, in the keys' type)
        # keep their index order: the spread of a tie in kernel units, four times over
        wide_eps = float(np.finfo(_wide(device)).eps)
        step = 2.0 ** -32 + 2.0 * int(a.geom.ncell[0]) * wide_eps
        tie = [a.scaling.real.type(4.0 * a.geom.width[0] * a.scaling.scale * step)]
    item = a.scaling.real.itemsize
    local = []
    if output == "hist" and plan.hist_local:
        local = [cl.LocalMemory((nbins + 1) * item), cl.LocalMemory((nbins + 1) * item)]
        if table is not None:
            local.append(cl.LocalMemory(table.entries.nbytes))
        local.append(cl.LocalMemory(nbins * (8 if plan.local64 else 4) * plan.hist_local))
    kbox = a.kbox if a.kbox is not None else a.igeom      # unused when not periodic
    args = [a.coords.data, np.uint32(a.n), a.point_cell.data, a.cell_ids.data, a.cell_start.data,
            a.cell_count.data, np.uint32(a.num_cells), b.coords.data, np.uint32(b.n), b.cell_ids.data,
            b.cell_start.data, b.cell_count.data, np.uint32(b.num_cells), kbox.data, a.igeom.data,
            np.uint32(cross)] + tie
    if plan.variant == "cell":
        gsz, lsz = (a.num_cells * plan.wg_size, plan.chunks, plan.parts), (plan.wg_size, 1, 1)
    else:
        gsz, lsz = (global_size(a.n, plan.wg_size),), (plan.wg_size,)
    most = plan_mod.band_list_max(device)
    cap = max(min(int(band_room), most), 1)
    loop = False            # band pairs decided in the kernel's loop (more than band_list_max)
    while True:
        k = program_kernel(build(device, TEMPLATE, "pairs", dict(params, band_loop=loop)),
                           "grid_pairs_" + plan.variant)
        # raw buffers: no Array objects (tens of microseconds each on the host)
        h = np.empty(1 if output == "count" else nbins, np.uint64)
        out = zeroed_buffer(queue, h.nbytes, events=events)
        listed = []
        if exact and not loop:
            bl_n = zeroed_buffer(queue, 8, events=events)
            listed = [bl_n, device.pool(4 * cap), device.pool(4 * cap), np.uint32(cap)]
        events.add("pairs", k(queue, gsz, lsz, *(args + [e.data for e in exact_args or []] + listed + list(tail) + local
                                                 + [out])))
        if not listed:
            events.add("read", cl.enqueue_copy(queue, h, out, is_blocking=True))
            return h
        band_pass(queue, device, exact_args, listed, output, nbins, a.d, a.geom.box is not None, out, events)
        n_listed = np.empty(2, np.uint32)
        events.add("read", cl.enqueue_copy(queue, n_listed, bl_n, is_blocking=False))
        events.add("read", cl.enqueue_copy(queue, h, out, is_blocking=True))
        need = int(n_listed[0]) + (int(n_listed[1]) << 32)     # a count past 2^32 noted, not kept
        if need <= cap:
            return h
        # again (this pass's output discarded): with room for every band pair, or
        # deciding them in the loop where the room would exceed band_list_max
        if need > most:
            loop = True
        else:
            cap = min(1 << (need - 1).bit_length(), most)


def band_pass(queue, device, exact_args, listed, output, nbins, d, periodic, out, events):
    """Decide the band pairs a count or histogram kernel listed (``listed``:
    its count word, index columns and capacity) in double and add them to
    ``out`` (outputs.cl.mako's band_list), in a few work-groups that stride
    over the list the device counted (no host wait)."""
    X0, _, Y0, _, xp = exact_args
    wg = 64
    prg = build(device, "outputs.cl.mako", "band_list",
                dict(orig=_real(X0.dtype), dims=d, box=periodic, wg_size=wg, output=output))
    groups = max(1, min(4 * device.compute_units, -(-int(listed[3]) // wg)))
    events.add("band", program_kernel(prg, "band_list")(
        queue, (groups * wg,), (wg,), X0.data, Y0.data, xp.data, *listed, np.uint32(nbins), out))


def pair_records(queue, device, plan, a, b, output, head, tail, nw, w0, wl, events, stage=0, row_parts=False):
    """One pass of a pair-output kernel ('pairs' | 'paircount' | 'pairwrite';
    plan.variant 'point' or 'row') over the writers [w0, w0 + nw) of grid
    ``a`` (or the nw writers listed in ``wl``); ``head``: (pa, pb) or the exact
    arguments (X0, pa, Y0, pb, xp); ``tail``: the output's arguments;
    ``stage``: the records a 'pairs' writer stages in its group's buffer
    (grouped staging, as the caller fitted it to the local memory:
    ``stage_fit(..., grouped=True)``; 0: the paper's writers); ``row_parts``
    ('paircount', 'row'; the counts zeroed): a writer's stencil rows on
    3^(d-1) work-items, one each (the sample of the pool's estimate: its
    time is its longest work-item's)."""
    cross = b is not a
    params = dict(real=_real(a.scaling.real), orig=_real(a.orig.dtype), dim=a.d, periodic=a.geom.box is not None,
                  wg_size=plan.wg_size, variant=plan.variant, output=output, hist_local=False,
                  local64=False, exact=len(head) == 5, band_loop=False, table=None, window=False,
                  stage=stage if output == "pairs" else 0,
                  row_parts=bool(row_parts))
    k = program_kernel(build(device, TEMPLATE, "pairs", params), "grid_pairs_" + plan.variant)
    kbox = a.kbox if a.kbox is not None else a.igeom      # unused when not periodic
    args = [a.coords.data, np.uint32(a.n), a.point_cell.data, a.cell_ids.data, a.cell_start.data,
            a.cell_count.data, np.uint32(a.num_cells), b.coords.data, np.uint32(b.n), b.cell_ids.data,
            b.cell_start.data, b.cell_count.data, np.uint32(b.num_cells), kbox.data, a.igeom.data,
            np.uint32(cross)]
    args += list(head) + list(tail[:2]) + [np.uint32(nw), np.uint32(w0),
                                           (wl if wl is not None else a.perm).data,
                                           np.uint32(wl is not None)] + list(tail[2:])
    items = nw * 3 ** (a.d - 1) if row_parts else nw
    events.add("pairs", k(queue, (global_size(items, plan.wg_size),), (plan.wg_size,), *args))


def join_cells(queue, device, a, order, table, events):
    """What the self-join kernels read beside grid ``a``, on the device: the
    points' order (``order``: None for 'cell'; 'input', the papers'
    GPUCALCGLOBAL, work-item g on the caller's point g: the inverse of
    ``a.perm``; 'sortbywl' / 'workqueue': the sorted positions in descending
    order of their cell neighbourhood's size to within an eighth of an octave,
    ties in cell order, by a stable counting sort of the cells) and, with
    ``table``, every cell's row table (the ranges of its neighbour stencil rows,
    so the kernels search no row). Returns (order uint32 (n,) or None, table
    uint32 (ncells * (3^(d-1) - 1), 2) or None); events under 'order'."""
    wg = pow2_floor(min(CELLS_WG, device.max_work_group_size))
    prg = build(device, JOIN_TEMPLATE, "workload", dict(dim=a.d, wg_size=wg, buckets=WL_BUCKETS))
    nc = max(a.num_cells, 1)
    ranked = order in ("sortbywl", "workqueue")
    ordered = None
    if order == "input":
        ordered = cla.empty(queue, max(a.n, 1), np.uint32, allocator=device.pool)
        events.add("order", program_kernel(prg, "sj_input_order")(
            queue, (global_size(a.n, wg),), (wg,), a.perm.data, np.uint32(a.n), ordered.data))
        ordered = ordered[:a.n]
    if not (ranked or table):
        return ordered, None
    width = 3 ** (a.d - 1) - 1
    rtab = cla.empty(queue, (max(nc * width, 1), 2), np.uint32, allocator=device.pool) if table else None
    ng = groups(nc, wg)
    cb = cla.empty(queue, nc, np.uint32, allocator=device.pool) if ranked else a.perm
    gh = cla.empty(queue, WL_BUCKETS * ng, np.uint32, allocator=device.pool) if ranked else a.perm
    events.add("order", program_kernel(prg, "sj_cells")(
        queue, (ng * wg,), (wg,), a.cell_ids.data, a.cell_start.data, a.cell_count.data,
        np.uint32(a.num_cells), a.igeom.data, np.uint32(ranked), cb.data, gh.data, np.uint32(table),
        (rtab if table else a.perm).data))
    if not ranked:
        return ordered, rtab
    sev = Events()
    exclusive_scan(queue, gh, events=sev, read_total=False)
    for e in sev.all():
        events.add("order", e)
    first = cla.empty(queue, nc, np.uint32, allocator=device.pool)
    events.add("order", program_kernel(prg, "sj_order_cells")(
        queue, (ng * wg,), (wg,), a.cell_count.data, np.uint32(a.num_cells), cb.data, gh.data, first.data))
    ordered = cla.empty(queue, max(a.n, 1), np.uint32, allocator=device.pool)
    events.add("order", program_kernel(prg, "sj_order_scatter")(
        queue, (global_size(a.n, wg),), (wg,), a.point_cell.data, a.cell_start.data, np.uint32(a.n), first.data,
        ordered.data))
    return ordered[:a.n], rtab


def join_records(queue, device, plan, a, output, head, tail, nw, w0, wl, order, rtab, events, stage=0):
    """One pass of a self-join kernel (``plan``: a JoinPlan, not its 'row'
    case) over grid ``a``: the writers [w0, w0 + nw) or the nw listed in
    ``wl``; every writer (w0 = 0, nw = n * k, no list) in the plan's order
    (``order``: the SORTBYWL or input order's positions, None in cell order;
    ``rtab``: the cells' row table, None to search the rows: :func:`join_cells`).
    ``head``: pa or the exact arguments (X0, pa, xp); ``tail``: thr, band, then
    the output's arguments; ``stage``: the records a 'pairs' writer keeps in
    its own stage (``pages.cl.mako``'s per-writer staging; fewer where the
    work-group's local memory would not hold them)."""
    split = plan.split if plan.k > 1 else "candidates"
    # the rows' ranges shared by a point's lanes (uint4) where they search
    shared = 16 * plan.wg_size if plan.k > 1 and split == "candidates" and rtab is None else 0
    params = dict(real=_real(a.scaling.real), orig=_real(a.orig.dtype), dim=a.d, wg_size=plan.wg_size,
                  kernel=plan.kernel, k=plan.k, split=split, output=output, exact=len(head) == 3,
                  stage=stage_fit(device, plan.wg_size, stage, shared) if output == "pairs" else 0,
                  table=rtab is not None)
    k = program_kernel(build(device, JOIN_TEMPLATE, "join", params), "sj_" + plan.kernel)
    every = wl is None and w0 == 0 and nw == a.n * plan.k
    ordered = every and order is not None
    queued = ordered and plan.order == "workqueue"
    counter = zeros(queue, 1, np.uint32, events=events) if queued else None
    dummy = wl if wl is not None else a.perm
    args = [a.coords.data, np.uint32(a.n), a.point_cell.data, a.cell_ids.data, a.cell_start.data,
            a.cell_count.data, np.uint32(a.num_cells), a.igeom.data, (a.perm if rtab is None else rtab).data]
    args += list(head) + list(tail[:2]) + [np.uint32(nw), np.uint32(w0), dummy.data, np.uint32(wl is not None),
                                           (order if ordered else a.perm).data, np.uint32(ordered),
                                           (counter if queued else a.perm).data, np.uint32(queued)]
    args += list(tail[2:])
    events.add("pairs", k(queue, (global_size(nw, plan.wg_size),), (plan.wg_size,), *args))
