"""Enqueue a two-body statistic: no decisions here, the plan made them.

Per device: the point sets' original coordinates (device-resident, or host
chunks uploaded as needed) are laid out chunk by chunk as kernel
coordinates (:func:`clkernels.host.primitives.points.layout`): one L slot and
two R slots, so a streamed pass keeps three chunks resident; then each launch
of the plan (``Plan.launches``) is enqueued with the output stage's
arguments, and the stage's per-launch work after it. Launches are spread
round-robin over the devices.
"""

import threading

import numpy as np
import pyopencl as cl

from ..core.build import build, program_kernel
from ..core.launch import check_launch
from ..core.progress import bar
from ..core.transfer import upload
from ..primitives.points import layout
from .plan import DIRECT_BLOCK, TEMPLATE

#: launches from which a call shows a tqdm bar by itself (when tqdm is installed)
LONG = 8


class Source:
    """A point set's original coordinates for one device: ``array`` (device,
    AoS) holds them all, or ``host`` (numpy) is uploaded a chunk at a time."""

    def __init__(self, n, array=None, host=None):
        self.n, self.array, self.host = n, array, host

    def chunk(self, device, queue, ci, size, events):
        """(device array, offset of chunk ``ci`` in it, its length)."""
        lo = ci * size
        m = min(size, self.n - lo)
        if self.array is not None:
            return self.array, lo, m
        return upload(device, self.host[lo:lo + m], queue=queue, events=events, step="upload"), 0, m


class _Slot:
    def __init__(self):
        self.ci, self.soa, self.orig, self.off = None, None, None, 0


_kernels = {}


def pair_kernel(device, plan, problem):
    """The built, launch-checked pair kernel of (plan, problem) on ``device``
    (memoized: rendering parameters and build-cache keys cost ~0.1 ms)."""
    key = (device, plan, problem, threading.get_ident())
    k = _kernels.get(key)
    if k is None:
        if len(_kernels) >= 256:        # problems carry their sizes: calls of many sizes would grow it
            _kernels.clear()
        params = plan.render_params(problem, device)
        k = program_kernel(build(device, TEMPLATE, "pairs_kernel", params), "pairs")
        check_launch(device, k, plan.wg_size)
        _kernels[key] = k
    return k


def run(devices, plan, problem, scaling, stage, events, box=None, progress=None):
    """Enqueue every launch; ``devices``: [(Device, queue, (Source L, Source R or None))].
    Returns the stage's combined raw result. ``progress``: see
    :func:`..core.progress.bar` (the launches' block pairs, as they complete;
    automatic for calls of at least LONG launches)."""
    self_join = problem.nr is None
    launches = plan.launches(problem.nl, problem.nl if self_join else problem.nr, self_join)
    if not launches:
        return None
    kernels = [pair_kernel(dev, plan, problem) for dev, _, _ in devices]   # build all first
    per = [launches[i::len(devices)] for i in range(len(devices))]
    states, done, feeds = [], [], []
    for (dev, q, (srcL, srcR)), k, mine in zip(devices, kernels, per):
        if not mine:
            continue
        st = stage.start(dev, q, dev.pool, mine, events)
        states.append(st)
        feeds.append((q, _enqueue(dev, q, k, plan, problem, scaling, srcL, srcR, mine, stage, st, events, box,
                                  done)))
    # one launch a device in turn, each queue flushed as it is fed: a driver that
    # blocks an enqueue on a full queue then holds back no other device
    while feeds:
        for f in list(feeds):
            if next(f[1], None) is None:
                feeds.remove(f)
            f[0].flush()
    shown = bar(progress, sum(la.gx * la.gy for la in launches), "clkernels " + problem.op,
                long=len(launches) >= LONG)
    if shown is not None:
        for ev, units in done:
            ev.wait()
            shown.update(units)
        shown.close()
    return stage.finish(states, events)


def _enqueue(dev, q, k, plan, problem, scaling, srcL, srcR, launches, stage, st, events, box, done):
    """A generator that enqueues ``launches`` on one device, one per step."""
    real = np.dtype(problem.real)
    C = plan.chunk
    kbox = None if box is None else np.asarray(box, np.float64) * scaling.scale
    box_args = []
    if kbox is not None:
        for L in kbox:
            box_args += [real.type(L), real.type(1.0 / L)]
    L, R = _Slot(), [_Slot(), _Slot()]
    rnext = 0

    def fill(slot, src, ci):
        arr, off, m = src.chunk(dev, q, ci, C, events)
        slot.soa, _ = layout(q, arr, real, C, shift=scaling.shift, scale=scaling.scale, box=box,
                             offset=off, n=m, out=slot.soa, events=events)
        slot.ci, slot.orig, slot.off = ci, arr, off

    for idx, la in enumerate(launches):
        if L.ci != la.li:
            fill(L, srcL, la.li)
        if la.same:
            Rs = L
        else:
            Rs = next((s for s in R if s.ci == la.rj), None)
            if Rs is None:
                Rs = R[rnext]
                rnext ^= 1
                fill(Rs, srcR or srcL, la.rj)
        nl = min(C, srcL.n - la.li * C)
        nr = min(C, (srcR or srcL).n - la.rj * C)
        args = list(L.soa) + list(Rs.soa) + box_args + [
            np.uint64(nl), np.uint64(nr), np.uint64(la.l0), np.uint64(la.r0), np.int32(la.same)]
        if problem.exact:
            args += [L.orig.data, Rs.orig.data, np.uint64(L.off), np.uint64(Rs.off)]
        args += stage.args(st, idx, la)
        ev = k(q, (la.gx * plan.wg_size, la.gy), (plan.wg_size, 1), *args)
        events.add("kernel", ev)
        done.append((ev, la.gx * la.gy))
        stage.after(st, la, events)
        yield idx


_direct = {}


def direct_count(device, queue, X, Y, r, box, limit, events, wait_for=None):
    """Enqueue the direct count (plan.DIRECT_MAX_PAIRS) of the device arrays
    ``X`` (and ``Y``; None: pairs i < j of X) within ``r``, periodic in
    ``box`` (side lengths or None), flagging coordinates of magnitude >=
    ``limit``. Returns (count, flags) after one blocking read (flags: 1 X or 2
    Y holds NaN/inf, 4 a coordinate reaches ``limit``: the count is then not
    the library's)."""
    nx, dims = X.shape
    ny = nx if Y is None else Y.shape[0]
    orig = "float" if X.dtype == np.float32 else "double"
    wg = 64 if device.max_work_group_size >= 64 else device.max_work_group_size
    key = (device, orig, dims, box is not None, wg, threading.get_ident())
    k = _direct.get(key)
    if k is None:
        k = program_kernel(build(device, TEMPLATE, "direct_count",
                                 dict(orig=orig, dims=dims, box=box is not None, wg_size=wg, jb=DIRECT_BLOCK)),
                           "direct_count")
        check_launch(device, k, wg)
        _direct[key] = k
    # one upload: [count, flags] zeroed, then the exact path's parameters
    # (outputs.cl.mako: xs = 1, the box, r)
    head = np.zeros(2 + 1 + dims + 1, np.float64)
    head[2] = 1.0
    if box is not None:
        head[3:3 + dims] = box
    head[3 + dims] = r
    buf = device.pool.allocate(head.nbytes)
    waits = list(wait_for or []) + list(X.events) + ([] if Y is None else list(Y.events))
    events.add("upload", cl.enqueue_copy(queue, buf, head, is_blocking=False, wait_for=waits or None))
    gy = -(-ny // DIRECT_BLOCK)
    rows = max(nx, ny)                  # every point of x and y is checked for NaN/inf once
    events.add("kernel", k(queue, (-(-rows // wg) * wg, gy), (wg, 1), X.data, np.uint32(nx),
                           (X if Y is None else Y).data, np.uint32(ny), np.int32(Y is None),
                           np.float64(limit), buf))
    out = np.empty(2, np.uint64)
    events.add("read", cl.enqueue_copy(queue, out, buf, is_blocking=True))
    return int(out[0]), int(out[1])
