"""``self_join(x, eps, *, output='pairs', symmetric=False, include_self=False, ...)``

All pairs of points of one set within eps (d <= eps, Euclidean), as the
data-mining users of ``scipy.spatial.cKDTree.query_pairs`` and sklearn's
``radius_neighbors_graph`` need them, over the cell grid (cells of side eps,
non-empty cells only, 64-bit ids, binary search of the neighbour cells):
one work-item per point against the neighbour cells with a greater linear id
and the later points of its own cell -- the LID-UNICOMP access pattern of the
second self-join paper with k = 1, every pair evaluated once, the three
cells of a stencil row read as one range (the grid's 'row' kernel) -- and
exact at eps as the two-body counts (a float64 evaluation of the distances from the given
coordinates, pair for pair). Outputs:

* ``'pairs'``: (i, j) int64 with i < j (both directions with ``symmetric``;
  (i, i) too with ``include_self``), in no particular order;
* ``'csr'``: (indptr, indices), every point's neighbours ascending, both
  directions (as ``radius_neighbors_graph`` holds them), int32 when they fit
  (as scipy.sparse keeps them), built on the device: per-point counts, a
  scan, a write pass into both rows, a segmented sort of every row (at most
  2^31 entries: ``'pairs'`` streams larger results);
* ``'sparse'``: the same as a ``scipy.sparse.csr_matrix`` of ones (float64);
* ``'count'``: neighbours per point (int64), never materialising a pair.

Kernels (``kernel=``, the cell access patterns of the self-join papers, all
exact and giving the same results): 'lidunicomp' (the default, above),
'unicomp' (the odd-coordinate pattern: each pair of adjacent cells evaluated
once, by the cell odd in the highest dimension where they differ) and
'gpucalcglobal' (the papers' baseline: all 3^d adjacent cells, every
distance computed twice, each point keeping the pairs its output needs);
``k`` work-items per point (1, 2, 4, 8, 16, 32) split a point's candidates
(in d <= 3 every kernel reads each cell's neighbour rows from a table built
once a call; beyond, a point's k lanes share its neighbour-row searches, k
rows at a time);
``order``: 'cell' (the grid's order), 'sortbywl' (points by their cell
neighbourhood's size, descending to within an eighth of an octave, ties in
cell order, computed on the device), 'workqueue'
(that order handed out by a global atomic counter) or 'input' (the caller's
order: work-item g takes point g, as the papers' GPUCALCGLOBAL, Algorithm 1
of the load-imbalance paper; the grid's cell order is the library's
improvement on it). The default
(lidunicomp, k = 1, cell order) is the grid's 'row' kernel; per-point counts
(``output='count'``) take the tuned choice (``autotune --ops selfjoin``), by
default GPUCALCGLOBAL on GPUs (measured faster there: no atomics on the
partners' counts).

The pairs are collected by the ``Pairs`` output (the atomic page allocator:
results larger than the device go to host memory round by round, nothing is
lost); ``method``, ``page``, ``max_device_bytes`` and ``progress`` are those
of :func:`clkernels.pairs_within`. d = 1..8 over the grid; d = 9..64 by the
tiled all-pairs join (``tiled.py``: anchor blocks against partner tiles in
local memory, only the pairs i < j, exact as the grid; its CSR is built on
the host with numpy from the pairs; ``kernel``, ``k`` and ``order`` are grid
options and raise ValueError there).
"""

import functools

import numpy as np

from ..cellgrid import JoinPlan
from ..cellgrid.pairs import csr, degrees, within
from ..core import inputs
from ..core.progress import check as check_progress
from . import tiled

OUTPUTS = ("pairs", "csr", "sparse", "count")
MAX_DIMS = tiled.MAX_DIMS


def pair_forms(i, j, n, symmetric, include_self, xp=np):
    """The pairs i < j of ``n`` points as asked for: both directions
    (``symmetric``) and (k, k) for every point (``include_self``); ``xp``:
    numpy or dask.array."""
    if symmetric:
        i, j = xp.concatenate([i, j]), xp.concatenate([j, i])
    if include_self:
        k = xp.arange(n, dtype=np.int64)
        i, j = xp.concatenate([i, k]), xp.concatenate([j, k])
    return i, j


def self_join(x, eps, *, output="pairs", symmetric=False, include_self=False, device=None, exact=True,
              method=None, page=None, max_device_bytes=None, progress=None, kernel=None, k=None, order=None,
              client=None, slabs=None, collect=True):
    """All pairs of points of ``x`` ((n, d) float32/float64, numpy or
    ``pyopencl.array.Array``) at distance d <= ``eps`` (> 0); see the module
    docstring for the outputs. ``client``: a ``dask.distributed.Client``:
    ``slabs`` slabs along axis 0 over its workers (every output: 'csr' and
    'sparse' made from the gathered pairs on the client; ``collect=False``:
    pairs as dask arrays left on the workers),
    see :mod:`clkernels.host.distributed.slabs`."""
    if client is not None:
        from .. import distributed
        return distributed.self_join(client, x, eps, output=output, symmetric=symmetric, include_self=include_self,
                                     device=device, exact=exact, method=method, page=page,
                                     max_device_bytes=max_device_bytes, progress=progress, kernel=kernel, k=k,
                                     order=order, slabs=slabs, collect=collect)
    if slabs is not None or collect is not True:
        raise ValueError("slabs= and collect= apply with client= only")
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    X = inputs.points(x, "x", max_dims=MAX_DIMS)
    eps = inputs.scalar(eps, "eps", positive=True)
    check_progress(progress)
    dev = inputs.device_for(device, X.array)
    n = X.n
    if X.d > tiled.GRID_DIMS:
        tiled.reject_grid_options(X.d, kernel=kernel, k=k, order=order)
        degrees_, csr_, within_ = tiled.degrees, tiled.csr, tiled.within
    else:
        join = JoinPlan.resolve(dev, n, kernel, k, order, dims=X.d, output=output)
        degrees_, csr_, within_ = (functools.partial(f, join=join) for f in (degrees, csr, within))
    if output == "count":
        deg, _ = degrees_(dev.queue, X.array, r=eps, exact=exact)
        return deg + 1 if include_self else deg
    if output in ("csr", "sparse"):
        (indptr, indices), _ = csr_(dev.queue, X.array, r=eps, exact=exact, include_self=include_self)
    else:
        (i, j), _ = within_(dev.queue, X.array, r=eps, exact=exact, method=method, page=page,
                            max_device_bytes=max_device_bytes, progress=progress)
    if output == "pairs":
        return pair_forms(i, j, n, symmetric, include_self)
    return _csr_form(indptr, indices, n, output)


def _csr_form(indptr, indices, n, output):
    if output == "csr":
        return indptr, indices
    try:
        from scipy.sparse import csr_matrix
    except ImportError as e:
        raise ImportError("output='sparse' needs scipy; output='csr' gives (indptr, indices)") from e
    return csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))


def csr_output(rows, cols, n, output="csr"):
    """The 'csr' or 'sparse' output of n points from the entries (rows[k],
    cols[k]) (every pair in both directions, self entries too when asked),
    built on the host: rows ascending, each row's columns ascending, int32
    as the device path gives them (more than 2^31 - 1 entries raise)."""
    if len(rows) >= 2 ** 31:
        raise ValueError(f"{len(rows)} CSR entries: more than 2^31 - 1 (use output='pairs')")
    o = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return _csr_form(indptr.astype(np.int32), np.asarray(cols)[o].astype(np.int32), n, output)
