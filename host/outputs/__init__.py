"""Outputs of pair kernels: what users ask for (:class:`Count`,
:class:`Histogram`, :class:`Sum`, the 2-BS paper's Type-I and Type-II
outputs) and the output stages that own a call's device buffers, kernel
arguments and combine step (:class:`CountStage`, :class:`HistStage`,
:class:`SumStage`); :mod:`.exact` holds the scaling and rounding bands of
exact results. A stage is made per call from host values; ``start`` makes
one device's buffers, ``args`` gives a launch's output arguments, ``after``
enqueues per-launch work (the histogram reduction), ``finish`` reads every
device's buffers once and combines them.
"""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import program_kernel, build
from ..core.launch import global_size, pow2_floor
from ..core.transfer import kept, small_buffer, zeroed_buffer, zeros


class Count:
    """Type-I output: the number of pairs whose value ``d`` satisfies
    ``predicate``, an OpenCL C expression over ``d`` (the pair's distance) and
    the run-time parameter ``t`` (default: ``d <= t``)."""

    kind = "count"

    def __init__(self, predicate=None):
        if predicate is not None and (not isinstance(predicate, str) or not predicate.strip()):
            raise TypeError("predicate must be an OpenCL C expression string")
        self.predicate = predicate


class Histogram:
    """Type-II output: a histogram of ``d`` like numpy.histogram (bins
    [e_i, e_i+1), the last one closed). ``bins``: an int (uniform over
    ``range``) or increasing edges."""

    kind = "hist"

    def __init__(self, bins, range=None):
        self.bins = bins
        self.range = range


class Sum:
    """Type-I output: the sum over pairs of ``weight``, an OpenCL C expression
    over ``d`` and ``t`` (accumulated in the input precision per work-item and
    per work-group, in float64 on the host: not exact)."""

    kind = "sum"

    def __init__(self, weight):
        if not isinstance(weight, str) or not weight.strip():
            raise TypeError("weight must be a non-empty OpenCL C expression string")
        self.weight = weight


class _State:
    """One device's buffers of a stage (raw pool buffers); ``keep`` holds the
    events of non-blocking parameter copies until the stage is done."""

    def __init__(self, device, queue):
        self.device, self.queue, self.keep = device, queue, []


def _xp_buffer(st, xp, allocator):
    return None if xp is None else small_buffer(st.queue, np.asarray(xp, np.float64), st.keep,
                                                allocator=allocator)


class CountStage:
    """A count: ``t`` (threshold in kernel units, squared for the built-in
    distance) and its ``band``; ``xp`` the exact path's double parameters."""
    out = "count"

    def __init__(self, real, t, band=0.0, xp=None):
        self.real, self.t, self.band, self.xp = np.dtype(real), t, band, xp

    def start(self, device, queue, allocator, launches, events):
        st = _State(device, queue)
        st.total = zeroed_buffer(queue, 8, allocator=allocator, events=events)
        st.xp = _xp_buffer(st, self.xp, allocator)
        return st

    def args(self, st, index, launch):
        r = self.real.type
        return [r(self.t), r(self.band)] + ([st.xp] if st.xp is not None else []) + [st.total]

    def after(self, st, launch, events):
        pass

    def finish(self, states, events):
        total = 0
        for st in states:
            h = np.empty(1, np.uint64)
            events.add("read", cl.enqueue_copy(st.queue, h, st.total, is_blocking=True))
            total += int(h[0])
        return total


class HistStage:
    """A histogram of ``nbins`` bins: ``values`` are the kernel's scalar
    arguments (scale, s_lo, s_hi, lo, hi, offs), ``edges``/``bands`` the
    arrays a search bins with (kernel units), ``mode`` 'local' or 'global',
    ``flush`` 'reduce' (per-group histograms and a reduction kernel) or 'atomic'."""
    out = "hist"

    def __init__(self, real, nbins, mode, flush, values, edges, bands=None, xp=None):
        self.real, self.nbins, self.mode, self.flush = np.dtype(real), int(nbins), mode, flush
        self.values, self.edges, self.bands, self.xp = values, edges, bands, xp

    @property
    def reduce(self):
        return self.mode == "local" and self.flush == "reduce"

    def start(self, device, queue, allocator, launches, events):
        st = _State(device, queue)
        nb = self.nbins
        st.hist = zeros(queue, nb, np.uint64, allocator=allocator, events=events)
        e = np.zeros(nb + 1, self.real) if self.edges is None else np.asarray(self.edges, self.real)
        st.edges = kept(queue, e, allocator=allocator)
        b = np.zeros(nb + 1, self.real) if self.bands is None else np.asarray(self.bands, self.real)
        st.bands = kept(queue, b, allocator=allocator)
        st.xp = _xp_buffer(st, self.xp, allocator)
        if self.reduce:
            gmax = max((L.gx * L.gy for L in launches), default=1)
            # every slot a reduction reads is written by its group first (Oclgrind checks it)
            st.part = cla.empty(queue, nb * gmax, np.uint32, allocator=allocator)
            st.rwg = pow2_floor(min(64, device.max_work_group_size))
            st.rk = program_kernel(build(device, "outputs.cl.mako", "hist_reduce", dict(wg_size=st.rwg)),
                                   "hist_reduce")
        return st

    def args(self, st, index, launch):
        r = self.real.type
        a = [r(0), r(0)] + [r(v) for v in self.values] + [st.edges.data, st.bands.data]
        if st.xp is not None:
            a.append(st.xp)
        a.append(st.part.data if self.reduce else st.hist.data)
        return a

    def after(self, st, launch, events):
        if self.reduce:
            ng, per, nb = launch.gx * launch.gy, 64, self.nbins
            events.add("reduce", st.rk(st.queue, (global_size(nb, st.rwg), -(-ng // per)), (st.rwg, 1),
                                       st.part.data, np.uint32(ng), np.uint32(nb), np.uint32(per),
                                       st.hist.data))

    def finish(self, states, events):
        res = np.zeros(self.nbins, np.uint64)
        for st in states:
            h = np.empty(self.nbins, np.uint64)
            events.add("read", cl.enqueue_copy(st.queue, h, st.hist.data, is_blocking=True))
            res += h
        return res


class SumStage:
    """A float sum (not exact): per-group partials of every launch in one
    buffer, read once at the end and summed in float64."""
    out = "sum"

    def __init__(self, real, t):
        self.real, self.t = np.dtype(real), t

    def start(self, device, queue, allocator, launches, events):
        st = _State(device, queue)
        sizes = [L.gx * L.gy for L in launches]
        st.base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # every group of every launch writes its partial sum
        st.partials = cla.empty(queue, max(int(st.base[-1]), 1), self.real, allocator=allocator)
        return st

    def args(self, st, index, launch):
        r = self.real.type
        return [r(self.t), r(0), np.uint64(st.base[index]), st.partials.data]

    def after(self, st, launch, events):
        pass

    def finish(self, states, events):
        total = 0.0
        for st in states:
            h = np.empty(st.partials.size, self.real)
            events.add("read", cl.enqueue_copy(st.queue, h, st.partials.data, is_blocking=True))
            total += float(np.sum(h, dtype=np.float64))
        return total


__all__ = ["Count", "Histogram", "Sum", "CountStage", "HistStage", "SumStage"]
