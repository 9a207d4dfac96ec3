"""Segmented sort over a cluster: ranges of whole segments.

The segments are cut into ``ranges`` runs of whole segments of about equal
element counts (numpy offsets; default one range per worker, two per worker
when there are several); each run is a task running
:func:`clkernels.segmented_sort` on its worker's device, and the sorted runs
are concatenated in order. Segments are independent, so the result equals
the single call's, bit for bit. A segment longer than a run's share is
sorted whole, on one worker (it is never split). Keys and values (numpy, or
dask arrays, which are computed) are scattered once to every worker (a
worker that dies loses no data). Offsets must be CSR (nseg + 1 entries);
the extended forms (``segment_ids``, (begins, ends), ``return_indices``,
``out``, ``asynchronous``) are single-device only.
"""

import numpy as np

from ..segsort import api as segsort_api
from .common import check_client, is_dask, split


def _sort_run(keys, values, offsets, s0, s1, kw):
    e0, e1 = int(offsets[s0]), int(offsets[s1])
    off = offsets[s0:s1 + 1] - e0
    v = None if values is None else values[e0:e1]
    return segsort_api.segmented_sort(keys[e0:e1], off, v, **kw)


def _runs(offsets, nruns):
    """[(s0, s1)]: runs of whole segments of about equal element counts."""
    nseg, total = len(offsets) - 1, int(offsets[-1])
    cuts = [int(t) for _, t in split(total, nruns)][:-1] if total else []
    b = np.unique(np.concatenate([[0], np.searchsorted(offsets, cuts, side="left"), [nseg]]))
    return [(int(a), int(c)) for a, c in zip(b[:-1], b[1:])] or [(0, nseg)]


def segmented_sort(client, keys, offsets=None, values=None, *, descending=False, stable=False, device=None,
                   segment_ids=None, num_segments=None, return_indices=False, out=None, asynchronous=False,
                   ranges=None):
    """:func:`clkernels.segmented_sort` over the workers of ``client`` (CSR
    ``offsets``), in ``ranges`` runs of whole segments."""
    workers = check_client(client, device)
    extended = dict(segment_ids=segment_ids, num_segments=num_segments, return_indices=return_indices,
                    out=out, asynchronous=asynchronous)
    for name, v in extended.items():
        if v is not None and v is not False:
            raise ValueError(f"{name}= is not supported with client=: the distributed sort takes CSR offsets")
    if offsets is None or isinstance(offsets, tuple):
        raise ValueError("client= needs CSR offsets (nseg + 1 entries from 0 to len(keys))")
    if ranges is not None and (isinstance(ranges, bool) or not isinstance(ranges, (int, np.integer)) or ranges < 1):
        raise ValueError(f"ranges must be a positive integer, got {ranges!r}")
    k = np.ascontiguousarray(keys.compute() if is_dask(keys) else keys)
    v = None if values is None else np.ascontiguousarray(values.compute() if is_dask(values) else values)
    off = np.asarray(offsets.compute() if is_dask(offsets) else offsets)
    if off.ndim != 1 or off.size < 1 or off.dtype.kind not in "iu":
        raise ValueError("offsets must be a 1-D integer array of nseg + 1 entries")
    off = off.astype(np.int64)
    if k.ndim != 1:
        raise ValueError(f"keys must be 1-D, got shape {k.shape}")
    if off[0] != 0 or off[-1] != len(k) or (np.diff(off) < 0).any():
        raise ValueError("offsets must be non-decreasing from 0 to len(keys)")
    if v is not None and v.shape[:1] != k.shape:
        raise ValueError(f"values must have len(keys) = {len(k)} rows, got shape {v.shape}")
    kf, vf, of = client.scatter([k, v, off], broadcast=True, hash=False)
    kw = dict(descending=descending, stable=stable)
    runs = _runs(off, ranges or (1 if workers == 1 else 2 * workers))
    parts = client.gather([client.submit(_sort_run, kf, vf, of, s0, s1, kw, pure=False) for s0, s1 in runs])
    if v is None:
        return np.concatenate(parts)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


__all__ = ["segmented_sort"]
