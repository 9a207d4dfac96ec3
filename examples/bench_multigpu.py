"""Multi-GPU scaling: `python examples/bench.py multigpu [--quick] [--size N] [--variants ...]`.

Every GPU of the host (``clkernels.devices()``; at least two for the
two-GPU rows), wall clock from numpy in to numpy out, one timed call after
a warm-up call that builds every kernel on every GPU (2^18 points: enough
block pairs that the plan is the large sizes' own, not a small problem's
narrower work-groups):

* ``direct``: ``pair_count(x, 0.5, method='allpairs')`` and
  ``distance_histogram(x, 256)`` of n 3-D float32 points in the unit cube
  (n = 2^22 and 2^24; ``--size`` one n; ``--quick`` 2^18) on the first GPU,
  then with ``device=[gpu0, gpu1, ...]`` (the block pairs spread over the
  GPUs); the results must be identical.
* ``dask``: a ``LocalCluster`` of one worker per GPU
  (:func:`clkernels.local_cluster`) against one of a single worker:
  ``distance_histogram`` (256 bins) of 2^22 points, and self-joins of 8M
  points of the self-join benchmark's exponential sets (scale 1/40, 2-D and
  6-D) at ~100 neighbours a point (the 2M-point sets' second eps scaled by
  4^(-1/d)), as counts (``output='count'``), as pairs (i < j) gathered on
  the client, and as pairs left on the workers (``collect=False``, timed
  until the workers hold them); pairs are compared by
  :func:`benchlib.pair_digest` (a sort of 5e8 pairs takes minutes);
  ``--quick`` 2^18 and 2^19 points.

--variants takes a subset of: direct, dask.
"""

import time

import numpy as np

import clkernels
import benchlib
from benchlib import row, same_result

#: 2M-point exponential sets' eps for ~100 neighbours (bench_selfjoin.SETS)
EXPO_EPS = {2: 0.000201289, 6: 0.00804812}


def _gpus():
    return [d for d in clkernels.devices() if d.is_gpu]


def _timed(fn):
    t0 = time.perf_counter()
    res = fn()
    return time.perf_counter() - t0, res


def _direct(args, gpus):
    rows = []
    sizes = [args.size] if args.size else ([1 << 18] if args.quick else [1 << 22, 1 << 24])
    rng = np.random.default_rng(7)
    small = rng.random((1 << 18, 3)).astype(np.float32)
    calls = {"pair_count r=0.5 allpairs": lambda x, dev: clkernels.pair_count(x, 0.5, method="allpairs", device=dev,
                                                                              progress=False),
             "distance_histogram 256 bins": lambda x, dev: clkernels.distance_histogram(x, 256, device=dev,
                                                                                        progress=False)}
    for fn in calls.values():                   # builds on every GPU and for both plans
        fn(small, gpus[0])
        fn(small, gpus)
    for n in sizes:
        x = rng.random((n, 3)).astype(np.float32)
        pairs = n * (n - 1) / 2
        for label, fn in calls.items():
            t1, r1 = _timed(lambda: fn(x, gpus[0]))
            rows.append(row("multigpu", f"{label}, 1 GPU", n, t1, pairs / t1, "pairs/s", gpus[0].name,
                            "wall clock from numpy (kernel ms = wall)", wall_numpy=t1))
            tk, rk = _timed(lambda: fn(x, gpus))
            same = "identical" if same_result(r1, rk) else "RESULT DIFFERS"
            rows.append(row("multigpu", f"{label}, {len(gpus)} GPUs", n, tk, pairs / tk, "pairs/s", gpus[0].name,
                            f"{t1 / tk:.2f}x of 1 GPU; {same}", wall_numpy=tk))
            print(rows[-2]["variant"], f"{t1:.3f} s", rows[-1]["variant"], f"{tk:.3f} s", same, flush=True)
    return rows


def _held(i, j):
    """The pairs of ``collect=False`` (dask arrays), once the workers hold them."""
    import dask
    from distributed import wait

    i, j = dask.persist(i, j)
    wait([i, j])
    return i, j


def _worker_digest(i, j, n):
    """:func:`benchlib.pair_digest` of dask arrays, each chunk's on its
    worker, summed on the client (the pairs never cross; each chunk's two
    per-point count arrays do). The workers import ``benchlib`` as the
    client does: a LocalCluster's worker processes start with its sys.path."""
    import dask

    parts = dask.compute(*[dask.delayed(benchlib.pair_digest)(a, b, n)
                           for a, b in zip(i.to_delayed().ravel(), j.to_delayed().ravel())])
    return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts),
            sum(p[3] for p in parts) % (1 << 64))


def _dask(args, gpus):
    from distributed import Client

    from clkernels.host.distributed import device_specs

    rng = np.random.default_rng(8)
    n_sdh = args.size or ((1 << 18) if args.quick else (1 << 22))
    n_sj = (1 << 19) if args.quick else 8 << 20
    x = rng.random((n_sdh, 3)).astype(np.float32)
    sets = {d: rng.exponential(scale=1 / 40, size=(n_sj, d)).astype(np.float32) for d in EXPO_EPS}
    eps = {d: EXPO_EPS[d] * ((2 << 20) / n_sj) ** (1 / d) for d in EXPO_EPS}
    # name: (call(client), check(result, client) -> comparable, work, unit, n)
    loads = {"distance_histogram 256 bins": (lambda c: clkernels.distance_histogram(x, 256, client=c),
                                             lambda r, c: r, n_sdh * (n_sdh - 1) / 2, "pairs/s", n_sdh)}
    for d in EXPO_EPS:
        def sj(c, d=d, **kw):
            return clkernels.self_join(sets[d], eps[d], client=c, **kw)

        label = f"self_join expo {d}-D eps={eps[d]:.4g}"
        loads[f"{label} output=count"] = (lambda c, sj=sj: sj(c, output="count"), lambda r, c: r,
                                          n_sj, "points/s", n_sj)
        loads[f"{label} output=pairs"] = (lambda c, sj=sj: sj(c, output="pairs"),
                                          lambda r, c: benchlib.pair_digest(r[0], r[1], n_sj), n_sj, "points/s", n_sj)
        loads[f"{label} output=pairs collect=False (held on the workers)"] = (
            lambda c, sj=sj: _held(*sj(c, output="pairs", collect=False)),
            lambda r, c: _worker_digest(r[0], r[1], n_sj), n_sj, "points/s", n_sj)
    specs = device_specs(gpus)
    res, walls = {}, {}
    for k in (1, len(specs)):
        with clkernels.local_cluster(specs[:k], dashboard_address=":0") as cluster, Client(cluster) as client:
            for name, (fn, check, _, _, _) in loads.items():
                fn(client)                          # warm-up: every worker builds its kernels
                walls[k, name], r = _timed(lambda: fn(client))
                got = check(r, client)
                del r
                res[name] = got if k == 1 else same_result(res[name], got)
                print(f"dask {k} worker(s): {name} {walls[k, name]:.3f} s", flush=True)
    rows = []
    k = len(specs)
    for name, (_, _, work, unit, n) in loads.items():
        t1, tk = walls[1, name], walls[k, name]
        note = "identical" if res[name] is True else "RESULT DIFFERS"
        if "pairs" in name:
            note = "the same pairs (count, degrees, 64-bit digest)" if res[name] is True else "RESULT DIFFERS"
        rows.append(row("multigpu", f"dask {name}, 1 worker", n, t1, work / t1, unit, gpus[0].name,
                        "wall clock from numpy (kernel ms = wall)", wall_numpy=t1))
        rows.append(row("multigpu", f"dask {name}, {k} workers", n, tk, work / tk, unit, gpus[0].name,
                        f"{t1 / tk:.2f}x of 1 worker; {note}", wall_numpy=tk))
    return rows


def bench_multigpu(args, device):
    gpus = _gpus()
    if len(gpus) < 2:
        print(f"# multigpu: {len(gpus)} GPU(s) found, two or more needed", flush=True)
        return []
    names = [v.strip() for v in args.variants.split(",")] if args.variants else ["direct", "dask"]
    rows = []
    if "direct" in names:
        rows += _direct(args, gpus)
    if "dask" in names:
        rows += _dask(args, gpus)
    return rows


WORKLOADS = {"multigpu": ("scaling over every GPU of the host: device= lists and a dask worker per GPU",
                          bench_multigpu)}
