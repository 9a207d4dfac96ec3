"""Scale-out benchmark: `python examples/bench.py scaleout [--quick] [--size N] [--variants ...]`.

The same workloads three ways, by wall clock from numpy in to numpy out
(median of repeats after a warm-up, which also builds the workers'
kernels): a direct call on the device, and ``client=`` calls on a
LocalCluster (:func:`clkernels.local_cluster`) of 1 and of 2 worker
processes on that same device. The direct call and the 1-worker call are
timed in alternation, repeat by repeat, so that a load that comes and goes
on the machine weighs on both alike. Notes give the dask path's overhead on
one worker against the direct call (target: within 10%) and the speed-up of
2 workers over 1; every dask result is checked equal to the direct one.

Workloads (n: --size, default 2^16; --quick 2^13; 3-D uniform float32
points in the unit cube, 2-D boxes), sized so that a direct call on this
2-core machine's CPU device takes a few hundred ms or more (work worth
sending to a cluster):

* pair_count at r = 0.05 of 4 n points, distance_histogram (64 bins,
  default range) of n points;
* self_join at eps = 0.02 of 16 n points;
* rect_join (count) of 8 n query boxes against 8 n data boxes;
* segmented_sort of 256 n float32 keys in segments of 1..2048 keys.

A first row times dask's fixed cost: a round trip of a task that does
nothing, on the 1-worker cluster (the overhead a call of any size pays).

--variants takes a comma-separated subset of workload names.
"""

import statistics
import time

import numpy as np

import clkernels
from benchlib import median_call, pair_digest, row, same_result

WORKLOAD_NAMES = ("pair_count", "distance_histogram", "self_join", "rect_join", "segmented_sort")


def _boxes(rng, n):
    lo = rng.random((n, 2)).astype(np.float32)
    return np.concatenate([lo, lo + 0.01 * rng.random((n, 2)).astype(np.float32)], axis=1)


def _workloads(n, rng):
    """name -> (call(**kw), work items, unit)."""
    x = rng.random((n, 3)).astype(np.float32)
    xc = rng.random((4 * n, 3)).astype(np.float32)
    xs = rng.random((16 * n, 3)).astype(np.float32)
    q, b = _boxes(rng, 8 * n), _boxes(rng, 8 * n)
    sizes = rng.integers(1, 2049, max(1, 256 * n // 1024))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.random(int(offsets[-1])).astype(np.float32)

    def sort(**kw):
        return clkernels.segmented_sort(keys, offsets, **kw)
    return {
        "pair_count": (lambda **kw: clkernels.pair_count(xc, 0.05, **kw), 4 * n, "points/s"),
        "distance_histogram": (lambda **kw: clkernels.distance_histogram(x, 64, **kw), n * (n - 1) / 2, "pairs/s"),
        "self_join": (lambda **kw: clkernels.self_join(xs, 0.02, **kw), 16 * n, "points/s"),
        "rect_join": (lambda **kw: clkernels.rect_join(q, b, **kw), 8 * n, "queries/s"),
        "segmented_sort": (sort, len(keys), "keys/s"),
    }


def _canon(name, res, n):
    """self_join pairs (of n points) come in no particular order: compare
    their order-free digest (:func:`benchlib.pair_digest`)."""
    if name == "self_join":
        return pair_digest(res[0], res[1], n)
    return res


def _nothing():
    return None


def _alternating(fns, repeats):
    """Median wall seconds of each of ``fns``, called in turn each repeat (after a warm-up of each)."""
    for fn in fns:
        fn()
    ts = [[] for _ in fns]
    for _ in range(repeats):
        for t, fn in zip(ts, fns):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in ts]


def bench_scaleout(args, device):
    from distributed import Client

    from clkernels.host.distributed import device_specs

    names = [v.strip() for v in args.variants.split(",")] if args.variants else list(WORKLOAD_NAMES)
    n = args.size or ((1 << 13) if args.quick else (1 << 16))
    reps = args.repeats
    spec = device_specs([device])[0]
    loads = _workloads(n, np.random.default_rng(0))
    direct, ref = {}, {}
    for name in names:
        ref[name] = _canon(name, loads[name][0](device=device), loads[name][1])
    walls = {1: {}, 2: {}}
    agree = {name: True for name in names}
    rows = []
    for workers in (1, 2):
        with clkernels.local_cluster([spec] * workers, dashboard_address=":0") as cluster, Client(cluster) as client:
            if workers == 1:
                t = median_call(lambda: client.submit(_nothing, pure=False).result(), repeats=max(reps, 10))
                rows.append(row("scaleout", "dask round trip of an empty task (1 worker)", 0, t, 1 / t, "tasks/s",
                                device.name, "the fixed cost every client= call pays at least once"))
            for name in names:
                fn = loads[name][0]
                agree[name] &= same_result(_canon(name, fn(client=client), loads[name][1]), ref[name])
                if workers == 1:
                    direct[name], walls[1][name] = _alternating(
                        [lambda: fn(device=device), lambda: fn(client=client)], reps)
                else:
                    walls[workers][name] = median_call(lambda: fn(client=client), repeats=reps)
    for name in names:
        work, unit = loads[name][1], loads[name][2]
        t0, t1, t2 = direct[name], walls[1][name], walls[2][name]
        same = "" if agree[name] else " RESULT DIFFERS"
        rows.append(row("scaleout", f"{name} direct", n, t0, work / t0, unit, device.name, same.strip(),
                        wall_numpy=t0))
        rows.append(row("scaleout", f"{name} dask 1 worker", n, t1, work / t1, unit, device.name,
                        f"overhead {t1 / t0 - 1:+.1%} vs direct" + same, wall_numpy=t1))
        rows.append(row("scaleout", f"{name} dask 2 workers", n, t2, work / t2, unit, device.name,
                        f"{t1 / t2:.2f}x of 1 worker" + same, wall_numpy=t2))
    return rows


WORKLOADS = {"scaleout": ("dask.distributed: direct call vs LocalCluster of 1 and 2 workers on the device",
                          bench_scaleout)}
