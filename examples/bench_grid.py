"""Benchmark workload: cell-list grid pair counts and histograms (host/cellgrid).

3-D uniform points in the unit box, r = 0.05 (and 0.02 on a GPU: fewer points
per cell; together they show where the 'point' and 'cell' variants cross) for
the 2-point count, and a 64-bin histogram over [0, r]. Rows: the grid build, each pair variant on the
built grid, build + count together, the all-pairs kernels
(``clkernels.pair_count(method='allpairs')``) and scipy's cKDTree on the CPU.
Our kernels are timed by device time between profiling markers (or the
call's own events: the first start to the last end); the rate is effective
pairs per second, n(n-1)/2 over the time, so it compares with all pairs
directly. The public call (``clkernels.pair_count(x, r)``, which picks the
grid) is also timed as wall clock from numpy and from device arrays.
"""

import numpy as np
import pyopencl as cl

import clkernels  # noqa: F401
import pyopencl.array as cla

from benchlib import median_call, median_wall, row
from clkernels.host import cellgrid as G
from clkernels.host import twobody as tb
from clkernels.host.core import timing

NBINS = 64


def _device_time(device, fn, warmup, repeats):
    q = device.queue

    def launch():
        a = cl.enqueue_marker(q)
        fn()
        return [a, cl.enqueue_marker(q)]

    return timing.summarize(timing.time_events(launch, warmup, repeats))[0]


def bench_grid(args, device):
    sizes = [args.size] if args.size else ([20000] if args.quick or not device.is_gpu
                                           else [2 ** 17, 2 ** 19, 2 ** 20])
    want = set(args.variants.split(",")) if args.variants else None
    radii = [0.05] if args.quick or not device.is_gpu else [0.02, 0.05]
    rows = []
    rng = np.random.default_rng(0)
    for n, R in [(n, r) for n in sizes for r in radii]:
        edges = np.linspace(0, R, NBINS + 1)
        x = rng.random((n, 3)).astype(np.float32)
        pairs = n * (n - 1) / 2
        rep, wu = args.repeats, 1
        g = G.Grid(x, R, device=device)
        xd = cla.to_device(device.queue, x)
        ref = None

        def add(variant, sec, note=""):
            rows.append(row("grid", f"{variant} r={R:g}", n, sec, pairs / sec, "eff pairs/s", device.name,
                            note))

        if want is None or "build" in want:
            add("grid build", _device_time(device, lambda: G.Grid(xd, R, device=device), wu, rep),
                f"{g.num_cells} cells, {n / g.num_cells:.1f} pts/cell")
        for v in G.VARIANTS:
            if want is None or v in want:
                c = G.grid_pair_count(g, R, variant=v)
                ref = c if ref is None else ref
                if c != ref:
                    raise AssertionError(f"variant {v}: {c} pairs, expected {ref}")
                add(f"count {v}", _device_time(device, lambda: G.grid_pair_count(g, R, variant=v), wu, rep),
                    f"{c} pairs <= r")
                add(f"hist{NBINS} {v}",
                    _device_time(device, lambda: G.grid_histogram(g, edges, variant=v), wu, rep))
        if want is None or "total" in want:
            ev_times = timing.time_events(lambda: tb.count(device.queue, xd, r=R)[1], wu, rep)
            wall_dev = median_call(lambda: tb.count(device.queue, xd, r=R), repeats=rep)
            wall_np = median_call(lambda: clkernels.pair_count(x, R, device=device), repeats=rep)
            sec = timing.summarize(ev_times)[0]
            rows.append(row("grid", f"pair_count auto (cells) r={R:g}", n, sec, pairs / sec, "eff pairs/s",
                            device.name, f"variant {G.choose_variant(device, g)}; events first to last",
                            wall_numpy=wall_np, wall_device=wall_dev))
        if (want is None or "allpairs" in want) and hasattr(clkernels, "pair_count"):
            try:
                c = clkernels.pair_count(x, R, device=device, method="allpairs")
                if ref is not None and c != ref:
                    raise AssertionError(f"all pairs: {c} pairs, grid {ref}")
                sec = _device_time(device, lambda: clkernels.pair_count(x, R, device=device,
                                                                        method="allpairs"),
                                   0, max(1, min(rep, 3)))
                add("all-pairs count", sec, "clkernels.pair_count(method='allpairs')")
            except TypeError:
                pass
        if want is None or "scipy" in want:
            try:
                from scipy.spatial import cKDTree
            except ImportError:
                cKDTree = None
            if cKDTree is not None:
                xd = x.astype(np.float64)

                def kd():
                    t = cKDTree(xd)
                    return len(t.query_pairs(R, output_type="ndarray"))

                sec = median_wall(kd, 0, 3)
                rows.append(row("grid", f"scipy cKDTree query_pairs r={R:g} (CPU)", n, sec, pairs / sec,
                                "eff pairs/s", "CPU", "build + query"))
    return rows


WORKLOADS = {"grid": ("cell-list grid: build, pair counts, histograms (r = 0.05)", bench_grid)}
