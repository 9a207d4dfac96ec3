"""Rectangle joins over a cluster: tiles of query boxes against the data.

The data boxes are put once for every worker (read from the client's
memory or memory files by the workers of its host, else scattered to every
worker: :mod:`.transport`);
the queries are cut into ``tiles`` row ranges (numpy; default one per worker,
two per worker when there are several) or keep their row chunks (dask
arrays). Each tile is a task running :func:`clkernels.rect_join` on its
worker's device; counts are added exactly (int64), per-query counts and
pairs are concatenated in query order (pairs with the tile's query offset,
so they stay sorted by (i, j) as the single call sorts them). Results are
numpy arrays on the client (per-query counts and pairs come back past
dask's comms from the client's host: :mod:`.transport`).
"""

import numpy as np

from ..rectjoin import api as rect_api
from ..rectjoin.plan import OUTPUTS
from .common import Blocks, check_client, check_collect, column, concat, is_dask, tree_sum
from .transport import Transport


def _boxes(x, name):
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError(f"{name} must be an (n, 2d) array of boxes [lo_1..lo_d, hi_1..hi_d], got shape {a.shape}")
    return np.ascontiguousarray(a)


def _tile(q, lo, hi, data, kw):
    res = rect_api.rect_join(q[lo:hi], data, **kw)
    return np.asarray(res, np.int64) if kw["output"] != "pairs" else res


def rect_join(client, queries, data, *, output="count", device=None, tiles=None, collect=True, **options):
    """:func:`clkernels.rect_join` over the workers of ``client`` (the
    other keywords are the single call's, applied to every tile).
    ``collect=False``: per-query counts and pairs as dask arrays left on the
    workers."""
    workers = check_client(client, device)
    check_collect(collect)
    if not isinstance(output, str) or output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if tiles is not None and (isinstance(tiles, bool) or not isinstance(tiles, (int, np.integer)) or tiles < 1):
        raise ValueError(f"tiles must be a positive integer, got {tiles!r}")
    with Transport(client, collect or output == "count", lend=collect or output == "count") as T:
        Q = Blocks(T, queries, "queries", tiles or (1 if workers == 1 else 2 * workers), None, _boxes)
        [bf] = T.put([_boxes(data.compute() if is_dask(data) else data, "data")])
        kw = dict(options, output=output)
        futs = [T.submit(_tile, f, lo, hi, bf, kw, out=output != "count") for f, lo, hi in Q.parts]
        if output == "count":
            return int(tree_sum(client, futs))
        offsets = np.cumsum([0] + [hi - lo for _, lo, hi in Q.parts])
        if not collect:
            if output == "per_query":
                return column(futs, None, np.int64, lengths=np.diff(offsets))
            return column(futs, 0, np.int64, offsets), column(futs, 1, np.int64)
        parts = T.gather(futs)
    if output == "per_query":
        return concat(parts)
    return (np.concatenate([i + off for (i, _), off in zip(parts, offsets)]),
            np.concatenate([j for _, j in parts]))


__all__ = ["rect_join"]
