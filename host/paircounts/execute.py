"""Enqueue the pair counts (no decisions: the plan made them): the points as
float64 structure of arrays (:func:`clkernels.host.primitives.points.layout`),
the pair kernel into per-work-group partial histograms, the per-bin reduction."""

import dataclasses
import functools
import threading

import numpy as np
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.launch import check_launch, global_size
from ..core.transfer import kept, upload
from ..primitives.points import layout
from . import gridded
from .boxes import kernel_box
from .plan import TEMPLATE, fixed_point, half_image, sq_thresholds, table_words


def first_axis(edges):
    """The first axis's kernel parameters: the squared thresholds of the edges
    (:func:`.plan.sq_thresholds`), then the first and last edge; remembered
    for the last few edges (an RDF accumulated over frames)."""
    return _first_axis_of(edges.tobytes())


@functools.lru_cache(maxsize=32)
def _first_axis_of(raw):
    e = np.frombuffer(raw, np.float64)
    out = np.concatenate([sq_thresholds(e), e[[0, -1]]])
    out.setflags(write=False)               # shared by the calls that remember it
    return out


_kernels = {}


def kernels(device, plan, problem):
    """The built, launch-checked (pair kernel, reduce kernel) of (plan, problem)."""
    shape = dataclasses.replace(problem, nx=0, ny=0)         # what the kernel's source depends on
    key = (device, plan.wg_size, plan.gridded, shape, threading.get_ident())
    ks = _kernels.get(key)
    if ks is None:
        if len(_kernels) >= 256:
            _kernels.clear()
        prg = build(device, TEMPLATE, "paircounts", plan.params(problem))
        ks = (program_kernel(prg, "paircounts"), program_kernel(prg, "paircounts_reduce"))
        check_launch(device, ks[0], plan.wg_size)
        _kernels[key] = ks
    return ks


def run(queue, device, plan, problem, x, y, wx, wy, gx, gy, edges1, edges2, box, events, wait_for=None,
        wbound=None, scale=1.0, tables=None, bins=(None, None)):
    """Pair counts on ``queue``: ``x``, ``y`` (n, d) device arrays (y None for
    auto pairs), ``wx``/``wy`` float64 and ``gx``/``gy`` int32 device arrays
    (or None), ``edges1``/``edges2`` float64 numpy edges, ``box`` float64
    side lengths, a triclinic matrix (:mod:`.boxes`) or None, all already in
    the units of ``scale`` (a power of two the coordinates are multiplied by
    as they are laid out: :func:`.plan.separation_scale`); ``wbound``: the
    largest |w_i w_j| (the weight sums' fixed point). Returns device arrays (npairs uint64, sum of the
    separations float64 or None, sum of the pair weights float64 or None),
    per bin (bin = i1 * nb2 + i2), each auto pair once. ``tables``: a gridded
    plan's :class:`.gridded.Tables` (the points, weights and groups are taken
    in the grid's order on the device); ``bins``: the problem's bin tables
    (:func:`.plan.bin_tables`: one for each of ``tab1``, ``tab2``)."""
    p = problem
    kpair, kred = kernels(device, plan, p)
    nb = p.nbins
    wg = plan.wg_size
    sx, lev = layout(queue, x, np.float64, max(p.nx, 1), scale=scale, wait_for=wait_for)
    sy = sx if y is None else layout(queue, y, np.float64, max(p.ny, 1), scale=scale, wait_for=wait_for,
                                     events=lev)[0]
    if tables is not None:
        sx = gridded.sorted_by(queue, sx, p.nx, tables.perm_x)
        sy = sx if y is None else gridded.sorted_by(queue, sy, p.ny, tables.perm_y)
        px, py = tables.perm_x.with_queue(queue), tables.perm_y.with_queue(queue)
        wx, gx = (None if a is None else cla.take(a.with_queue(queue), px, queue=queue, wait_for=a.events)
                  for a in (wx, gx))
        wy, gy = (None if a is None else cla.take(a.with_queue(queue), py, queue=queue, wait_for=a.events)
                  for a in (wy, gy))
    for e in lev.all():
        events.add("layout", e)
    pool = device.pool
    ng = plan.ngroups
    part_n = pool.allocate(ng * nb * 8)
    part_d = pool.allocate(ng * nb * 16) if p.ravg else None         # double-double partials
    part_w = pool.allocate(ng * nb * 16) if p.weighted else None
    args = list(sx) + [np.uint32(p.nx)] + list(sy) + [np.uint32(p.ny)]
    waits = list(wait_for or [])
    if p.weighted:
        args += [wx.data, (wx if wy is None else wy).data]
        waits += list(wx.events) + ([] if wy is None else list(wy.events))
    if p.grouped:
        args += [gx.data, (gx if gy is None else gy).data]
        waits += list(gx.events) + ([] if gy is None else list(gy.events))
    keep = [kept(queue, first_axis(np.asarray(edges1, np.float64)))]
    if p.mode != "r":
        keep.append(kept(queue, edges2))
    if p.periodic:
        kb = kernel_box(box)
        if p.near:          # the comparisons' bounds after the sides
            kb = np.concatenate([kb, [half_image(v) for v in kb]])
        keep.append(kept(queue, kb))
    args += [a.data for a in keep]
    args.append(np.uint32(plan.chunk))
    if tables is not None:
        tabs = [upload(device, a, queue=queue, events=events) for a in (tables.gtab, tables.rtab)]
        args += [a.data for a in tabs]
        waits += [e for a in tabs for e in a.events]
    if p.tab1 or p.tab2:
        words, targs = table_words([t if on else None for t, on in zip(bins, (p.tab1, p.tab2))])
        keep.append(kept(queue, words))
        args += [keep[-1].data] + [np.uint32(v) for v in targs]
    if p.ravg:              # binned separations are at most the last edge
        args += [np.float64(f) for f in fixed_point(edges1[-1])]
    if p.weighted:
        if wbound is None:
            raise ValueError("weighted counts need wbound, the bound on |w_i w_j|")
        args += [np.float64(f) for f in fixed_point(wbound)]
    args += [part_n] + [b for b in (part_d, part_w) if b is not None]
    waits += lev.all() + [e for a in keep for e in a.events]
    ev = kpair(queue, (plan.groups_x * wg, plan.groups_y), (wg, 1), *args, wait_for=waits or None)
    events.add("kernel", ev)
    out_n = pool.allocate(nb * 8)
    out_d = pool.allocate(nb * 8) if p.ravg else None
    out_w = pool.allocate(nb * 8) if p.weighted else None
    rwg = min(64, wg)
    rargs = [part_n] + [b for b in (part_d, part_w) if b is not None] + [np.uint32(ng), out_n]
    rargs += [b for b in (out_d, out_w) if b is not None]
    events.add("reduce", kred(queue, (global_size(nb, rwg),), (rwg,), *rargs, wait_for=[ev]))
    return tuple(None if b is None else cla.Array(queue, (nb,), dt, data=b)
                 for b, dt in ((out_n, np.uint64), (out_d, np.float64), (out_w, np.float64)))
