"""Segmented sort over a cluster: ranges of whole segments.

The segments are cut into ``ranges`` runs of whole segments of about equal
element counts (numpy offsets; default one range per worker, two per worker
when there are several); each run is a task running
:func:`clkernels.segmented_sort` on its worker's device, and the sorted runs
are concatenated in order. Segments are independent, so the result equals
the single call's, bit for bit. A segment longer than a run's share is
split into pieces of that share, sorted as segments of their own across the
workers, and merged on the client by a stable sort of the sorted pieces
(numpy's timsort merges runs; the stable order of the whole segment is
unique, so the merged segment equals the single call's). Keys and values
(numpy, or dask arrays, which are computed) are put once for every worker
(a worker that dies loses no data); workers on the client's host read a
run's keys and values (straight into their device's memory where they may
read the client's memory) and return the sorted runs past dask's comms
(:mod:`.transport`). Every
offsets form of the single call: CSR, ``segment_ids`` (turned into CSR on
the client) and ``(begins, ends)`` with gaps (the segments packed in order,
sorted, and written back into a copy: elements outside every segment stay);
``return_indices`` (the runs sort each element's index within its segment
as the value; values are then gathered through it on the client) and numpy
``out=``. ``asynchronous`` is for device arrays on one device.
"""

import numpy as np

from ..segsort import api as segsort_api
from ..segsort import forms
from .common import check_client, concat, is_dask, split
from .transport import Transport


def _sort_run(keys, values, offsets, kw):
    """One run of whole segments: its keys and values (device arrays where
    the worker read them into its device) and its rows of the offsets."""
    return segsort_api.segmented_sort(keys, offsets - offsets[0], values, **kw)


def _runs(offsets, nruns):
    """[(s0, s1)]: runs of whole segments of about equal element counts."""
    nseg, total = len(offsets) - 1, int(offsets[-1])
    cuts = [int(t) for _, t in split(total, nruns)][:-1] if total else []
    b = np.unique(np.concatenate([[0], np.searchsorted(offsets, cuts, side="left"), [nseg]]))
    return [(int(a), int(c)) for a, c in zip(b[:-1], b[1:])] or [(0, nseg)]


def _merge(ks, cs, a, b, descending):
    """Merge the sorted pieces of the segment [a, b) in place (keys ks, carried
    values cs): a stable sort of the piecewise-sorted run (numpy's timsort
    merges the runs), ascending with NaN last, descending by the negated (or
    bit-inverted) keys so NaN stays last and ties keep input order."""
    seg = ks[a:b]
    if descending:
        key = ~seg if seg.dtype.kind in "iu" else -seg
    else:
        key = seg
    p = np.argsort(key, kind="stable")
    ks[a:b] = seg[p]
    if cs is not None:
        cs[a:b] = cs[a:b][p]


def _host(a):
    return None if a is None else np.asarray(a.compute() if is_dask(a) else a)


def _segments(k, offsets, segment_ids, num_segments):
    """(CSR offsets of the segments packed in order, packed -> original
    positions or None) of any offsets form, checked on the host."""
    n = len(k)
    if segment_ids is not None:
        if offsets is not None:
            raise ValueError("give offsets or segment_ids, not both")
        ids = forms._array("segment_ids", _host(segment_ids), integer=True)
        return forms._host_ids(ids, n, forms._check_num_segments(num_segments))[0], None
    if num_segments is not None:
        raise ValueError("num_segments applies with segment_ids")
    if offsets is None:
        raise ValueError("offsets (CSR, or (begins, ends)) or segment_ids is required")
    if forms._is_gap_pair(offsets):
        b, e = (forms._array(nm, _host(a), integer=True) for nm, a in zip(("begins", "ends"), offsets))
        if b.shape != e.shape:
            raise ValueError(f"offsets=(begins, ends): begins and ends differ in length ({b.size} and {e.size})")
        return forms._host_gaps(b, e, n)
    off = _host(offsets)
    if off.ndim != 1 or off.size < 1 or off.dtype.kind not in "iu":
        raise ValueError("offsets must be a 1-D integer array of nseg + 1 entries")
    off = off.astype(np.int64)
    if off[0] != 0 or off[-1] != n or (np.diff(off) < 0).any():
        raise ValueError("offsets must be non-decreasing from 0 to len(keys)")
    return off, None


def segmented_sort(client, keys, offsets=None, values=None, *, descending=False, stable=False, device=None,
                   segment_ids=None, num_segments=None, return_indices=False, out=None, asynchronous=False,
                   ranges=None):
    """:func:`clkernels.segmented_sort` over the workers of ``client``, in
    ``ranges`` runs of whole segments; every offsets form, ``return_indices``
    and ``out=`` (numpy) as the single call."""
    workers = check_client(client, device)
    if asynchronous:
        raise ValueError("asynchronous=True is for device arrays on one device, not with client=")
    if ranges is not None and (isinstance(ranges, bool) or not isinstance(ranges, (int, np.integer)) or ranges < 1):
        raise ValueError(f"ranges must be a positive integer, got {ranges!r}")
    k = np.ascontiguousarray(_host(keys))
    if k.ndim != 1:
        raise ValueError(f"keys must be 1-D, got shape {k.shape}")
    forms._check_keys(k)
    v = None if values is None else np.ascontiguousarray(_host(values))
    if v is not None:
        if v.shape[:1] != k.shape:
            raise ValueError(f"values must have len(keys) = {len(k)} rows, got shape {v.shape}")
        forms._check_values(v, len(k))
    outs = forms._check_out(out, k, v)
    off, gidx = _segments(k, offsets, segment_ids, num_segments)
    kp = k if gidx is None else k[gidx]
    starts = np.repeat(off[:-1], np.diff(off)) if return_indices else None
    carry = (np.arange(len(kp), dtype=np.int64) - starts) if return_indices else (
        v if gidx is None or v is None else v[gidx])
    nruns = ranges or (1 if workers == 1 else 2 * workers)
    share = max(1, -(-len(kp) // nruns))
    lens = np.diff(off)
    long = np.flatnonzero(lens > share)           # split into pieces of a run's share, merged below
    voff = off if not len(long) else np.union1d(off, np.concatenate(
        [np.arange(off[i] + share, off[i + 1], share) for i in long]))
    kw = dict(descending=descending, stable=stable)
    with Transport(client, lend=True) as T:
        kf, cf, of = T.put([kp, carry, voff])
        futs = []
        for s0, s1 in _runs(voff, nruns):
            e0, e1 = int(voff[s0]), int(voff[s1])
            futs.append(T.submit(_sort_run, T.rows(kf, e0, e1, device=True), T.rows(cf, e0, e1, device=True),
                                 T.rows(of, s0, s1 + 1), kw, out=True))
        parts = T.gather(futs)
    if carry is None:
        ks, cs = concat(parts), None
    else:
        ks, cs = concat([p[0] for p in parts]), concat([p[1] for p in parts])
    for i in long:
        _merge(ks, cs, int(off[i]), int(off[i + 1]), descending)
    li = None
    if return_indices:
        li = cs
        vp = None if v is None else (v if gidx is None else v[gidx])
        cs = None if vp is None else vp[starts + li]
    if gidx is not None:                     # back into a copy: elements outside every segment stay
        full = k.copy()
        full[gidx] = ks
        ks = full
        if cs is not None:
            full = v.copy()
            full[gidx] = cs
            cs = full
        if li is not None:
            full = np.full(len(k), -1, np.int64)
            full[gidx] = li
            li = full
    res = [ks] + ([] if v is None else [cs])
    if outs is not None:
        for dst, src in zip(outs, res):
            dst[...] = src
        res = [o for o in outs if o is not None]
    if li is not None:
        res.append(li)
    return res[0] if len(res) == 1 else tuple(res)


__all__ = ["segmented_sort"]
