"""Two-body statistics benchmark: `python examples/bench.py twobody [--quick] [--variants ...]`.

3-D uniform float32 points in the unit cube, n in {2^17, 2^19, 2^20} (--quick:
2^14 on a GPU, 2^11 on a CPU device; --size overrides). Two statistics:

* SDH: 256 uniform bins over the full range [0, sqrt(3)];
* 2-point count at r = 0.25 (about 6% of the pairs).

Every pairwise-stage variant and output stage is timed by OpenCL profiling
events (the pair kernels and reductions), beside the wall clock of the whole
call from device arrays (bounds, layout, kernels, the result read) and, for
the planner's choice, from numpy (upload included). Every row is exact unless
marked. Rate: n (n - 1) / 2 pairs per second of kernel time. Peers: torch cdist + bincount / count on the GPU (chunks of rows,
n <= 2^19), scipy pdist + numpy.histogram on the CPU (n <= 2^14).
--variants takes a comma-separated list of labels (or prefixes), e.g.
"count-regshm,sdh-local" or "torch".
"""

import math

import numpy as np

import pyopencl.array as cla

import clkernels
from benchlib import median_call, median_torch, median_wall, row, torch_cuda
from clkernels.host.core import timing
from clkernels.host import twobody as tb

#: issue-bound floors on an H100/H200 SXM (examples/PERFORMANCE.md): 8 instructions per
#: counted pair, 11 per histogrammed pair, at ~3.1e13 lane-instructions/s
FLOOR = {"count": 3.1e13 / 8, "hist": 3.1e13 / 11}
R = 0.25
BINS = 256
RANGE = (0.0, math.sqrt(3.0))

# label -> options (None values: the planner's choice); every row is exact unless it says so
COUNT_VARIANTS = {
    "count-auto": {},
    "count-auto-inexact": dict(exact=False),
    "count-diff-form": dict(form="diff"),
    "count-naive": dict(variant="naive", ppw=1),
    "count-readonly": dict(variant="readonly", ppw=1),
    "count-readonly-vec4": dict(variant="readonly", ppw=1, vec=4),
    "count-lrshm": dict(variant="lrshm", ppw=1),
    "count-regshm": dict(variant="regshm", ppw=1),
    "count-regshm-ppw8": dict(variant="regshm", ppw=8),
    "count-regshm-ppw8-diff": dict(variant="regshm", ppw=8, form="diff"),
    "count-shuffle-ppw4": dict(variant="shuffle", ppw=4),
    "count-diag-triangle": dict(variant="regshm", ppw=1, diag="triangle"),
}
SDH_VARIANTS = {
    "sdh-auto": {},
    "sdh-auto-inexact": dict(exact=False),
    "sdh-global": dict(variant="regshm", ppw=1, output="global"),
    "sdh-local-1copy-ppw4": dict(variant="regshm", ppw=4, output="local", copies=1),
    "sdh-local-32copies": dict(variant="regshm", ppw=1, output="local", copies=32),
    "sdh-local-atomicflush": dict(variant="regshm", ppw=1, output="local", flush="atomic"),
    "sdh-readonly-local": dict(variant="readonly", ppw=1, output="local"),
    "sdh-lrshm-local": dict(variant="lrshm", ppw=1, output="local"),
    "sdh-shuffle-local": dict(variant="shuffle", ppw=1, output="local"),
    "sdh-regshm-ppw2-local": dict(variant="regshm", ppw=2, output="local"),
    "sdh-regshm-ppw8-local": dict(variant="regshm", ppw=8, output="local"),
}


def _selected(label, filt):
    if not filt:
        return True
    return any(label == f or label.startswith(f) for f in filt)


def _sizes(args, device):
    if args.size:
        return [args.size]
    if args.quick:
        return [1 << 14] if device.is_gpu else [1 << 11]
    return [1 << 17, 1 << 19, 1 << 20]


def _run_op(device, stat, xd, opts):
    kw = dict(opts)
    if stat == "count":
        return tb.count(device.queue, xd, r=R, method="allpairs", **kw)
    return tb.histogram(device.queue, xd, bins=BINS, method="allpairs", **kw)


def bench_twobody(args, device):
    filt = [f.strip() for f in args.variants.split(",")] if args.variants else None
    rows = []
    rng = np.random.default_rng(0)
    torch = torch_cuda()
    for n in _sizes(args, device):
        X = rng.random((n, 3)).astype(np.float32)
        xd = cla.to_device(device.queue, X)
        pairs = n * (n - 1) / 2
        reps = args.repeats if n < (1 << 19) else min(args.repeats, 3)
        ref = {}
        for stat, table in (("count", COUNT_VARIANTS), ("hist", SDH_VARIANTS)):
            for label, opts in table.items():
                if not _selected(label, filt):
                    continue
                if opts.get("output") == "global" and n > (1 << 17) and not args.size:
                    continue     # global atomics: ~10x slower; timed at the smallest size only
                try:
                    out = {}

                    def launch():
                        res, ev = _run_op(device, stat, xd, opts)
                        out["res"] = res
                        return ev.all("kernel", "reduce")
                    times = timing.time_events(launch, warmup=1, repeats=reps)
                    wall_dev = median_call(lambda: _run_op(device, stat, xd, opts), repeats=reps)
                    wall_np = None
                    if label.endswith("-auto"):
                        fn = clkernels.pair_count if stat == "count" else clkernels.distance_histogram
                        arg = R if stat == "count" else BINS
                        wall_np = median_call(lambda: fn(X, arg, device=device, method="allpairs"),
                                              repeats=reps)
                except Exception as e:           # a variant that cannot run here: say so
                    rows.append(row("twobody", label, n, float("nan"), float("nan"), "pairs/s",
                                    device.name, f"failed: {type(e).__name__}: {str(e)[:80]}"))
                    continue
                med, cv = timing.summarize(times)
                res = out["res"]
                key = int(res) if stat == "count" else tuple(np.asarray(res[0]).tolist())
                exact = opts.get("exact", True)
                agree = (not exact) or ref.setdefault(stat, key) == key
                note = f"cv {cv:.1%}" + ("" if agree else " RESULT DIFFERS") + ("" if exact else " inexact")
                if device.is_gpu and device.compute_units >= 100:      # H100/H200-class
                    note += f" {pairs / med / FLOOR[stat]:.0%} of floor"
                rows.append(row("twobody", label, n, med, pairs / med, "pairs/s", device.name, note,
                                wall_numpy=wall_np, wall_device=wall_dev))
        if torch is not None and n <= (1 << 19) and _selected("torch", filt):
            rows += _torch_peers(torch, X, n, pairs, reps)
        if n <= (1 << 14) and _selected("scipy", filt):
            from scipy.spatial.distance import pdist

            def sdh():
                return np.histogram(pdist(X), BINS, RANGE)
            med = median_wall(sdh, warmup=1, repeats=3)
            rows.append(row("twobody", "scipy pdist+np.histogram (CPU)", n, med, pairs / med, "pairs/s", "CPU"))
            med = median_wall(lambda: int((pdist(X) <= R).sum()), warmup=1, repeats=3)
            rows.append(row("twobody", "scipy pdist count (CPU)", n, med, pairs / med, "pairs/s", "CPU"))
    return rows


def _torch_peers(torch, X, n, pairs, reps):
    x = torch.from_numpy(X).cuda()
    chunk = max(1, min(n, (1 << 30) // n))        # rows per cdist: ~4 GB of distances
    scale = BINS / (RANGE[1] - RANGE[0])

    def sdh():
        h = torch.zeros(BINS + 1, dtype=torch.int64, device="cuda")
        for i in range(0, n, chunk):
            d = torch.cdist(x[i:i + chunk], x)
            b = (d * scale).long().clamp_(max=BINS - 1).ravel()
            h += torch.bincount(b, minlength=BINS + 1)
        return h

    def count():
        c = torch.zeros((), dtype=torch.int64, device="cuda")
        for i in range(0, n, chunk):
            c += (torch.cdist(x[i:i + chunk], x) < R).sum()
        return c
    name = torch.cuda.get_device_name()
    rows = []
    med = median_torch(torch, sdh, warmup=1, repeats=max(1, min(reps, 3)))
    rows.append(row("twobody", "torch cdist+bincount (all n^2)", n, med, pairs / med, "pairs/s", name))
    med = median_torch(torch, count, warmup=1, repeats=max(1, min(reps, 3)))
    rows.append(row("twobody", "torch cdist count (all n^2)", n, med, pairs / med, "pairs/s", name))
    return rows


WORKLOADS = {"twobody": ("two-body statistics: SDH (256 bins) and 2-point count, every variant",
                         bench_twobody)}
