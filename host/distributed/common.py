"""What every decomposition shares: the client's workers, inputs as blocks
of rows the workers read, exact tree sums of integer partials, and
results left on the workers as dask arrays."""

import operator

import numpy as np


def check_client(client, device=None):
    """The number of workers of ``client`` (a ``dask.distributed.Client``)."""
    from distributed import Client

    if not isinstance(client, Client):
        raise TypeError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
    if device is not None:
        raise ValueError("device= and client= exclude each other: each worker uses its own device "
                         "(clkernels.local_cluster(devices=...))")
    n = len(client.nthreads())
    if n == 0:
        raise ValueError("the client's cluster has no workers")
    return n


def is_dask(a):
    from dask.array import Array

    return isinstance(a, Array)


def split(n, parts):
    """``parts`` near-equal [lo, hi) ranges of range(n) (fewer when n is small)."""
    parts = max(1, min(int(parts), n)) if n else 1
    e = np.linspace(0, n, parts + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(e[:-1], e[1:])]


class Blocks:
    """A point (or box) set the workers read as row blocks:
    ``parts[k] = (ref, lo, hi)``, rows lo:hi of the array ``ref`` (a future,
    a :class:`~.transport.Remote` or a :class:`~.transport.Handle`) stands for. numpy inputs are checked
    here (``check(x, name)`` returns the checked array) and put once for
    every worker (:meth:`.Transport.put`: a worker that dies loses no data),
    cut into ``nblocks`` ranges; dask arrays keep their row chunks
    (``rows``: rechunk to that many rows a block), each computed on the
    workers (with the lineage dask keeps, so a lost chunk is recomputed)."""

    def __init__(self, transport, x, name, nblocks, rows, check):
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1):
            raise ValueError(f"block must be a positive number of rows, got {rows!r}")
        if is_dask(x):
            if x.ndim == 1:
                x = x.reshape(-1, 1)
            if x.ndim != 2:
                raise ValueError(f"{name} must be an (n, d) array, got shape {x.shape}")
            x = x.rechunk({0: rows, 1: -1} if rows else {1: -1})
            futs = transport.client.compute(list(x.to_delayed().ravel()))
            self.parts = [(f, 0, int(s)) for f, s in zip(futs, x.chunks[0])]
            self.d = int(x.shape[1])
        else:
            a = check(x, name)
            self.d = int(a.shape[1])
            [f] = transport.put([a])
            ranges = split(len(a), -(-len(a) // rows) if rows else nblocks)
            self.parts = [(f, lo, hi) for lo, hi in ranges]


def add(*parts):
    """Exact int64 sum of integer partials (scalars or arrays)."""
    return np.sum(np.stack([np.asarray(p, np.int64) for p in parts]), axis=0, dtype=np.int64)


def tree_sum(client, futures, fan=8):
    """The int64 sum of ``futures``' results, added on the workers in a tree
    of fan-in ``fan``; returns the numpy result."""
    futures = list(futures)
    while len(futures) > 1:
        futures = [client.submit(add, *futures[k:k + fan], pure=False) if len(futures[k:k + fan]) > 1
                   else futures[k] for k in range(0, len(futures), fan)]
    return futures[0].result()


def concat(parts):
    """``np.concatenate(parts)``; one part as it is (no copy)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def column(futures, k, dtype, offsets=None, lengths=None):
    """Element ``k`` of each task's tuple result (``k`` None: the result
    itself; plus ``offsets[t]`` for task t), as one 1-D dask array, chunk t
    of ``lengths[t]`` elements (None: unknown), that stays on the workers
    (``.compute()`` or ``.persist()`` it, or reduce it there)."""
    import dask
    import dask.array as da

    parts = []
    for t, f in enumerate(futures):
        v = dask.delayed(np.asarray)(f) if k is None else dask.delayed(operator.getitem)(f, k)
        if offsets is not None:
            v = dask.delayed(operator.add)(v, int(offsets[t]))
        parts.append(da.from_delayed(v, shape=(np.nan if lengths is None else lengths[t],), dtype=dtype))
    return da.concatenate(parts) if parts else da.empty(0, dtype=dtype)


def check_collect(collect, sort=False):
    if not isinstance(collect, (bool, np.bool_)):
        raise TypeError(f"collect must be True or False, got {collect!r}")
    if not collect and sort:
        raise ValueError("sort=True needs collect=True (the pairs sorted on the client)")
