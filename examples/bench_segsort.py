"""Benchmark workload: segmented sort of (uint32 key, uint32 value) pairs.

    python examples/bench.py segsort [--quick] [--size N] [--variants uniform16,powerlaw1.0]

2^26 pairs (--quick: 2^18); classes: uniform segment lengths L in {16, 64,
256, 1024, 4096} and power-law lengths (P(l) ~ l^-alpha, alpha in {0.5, 1.0,
1.5}, 1 <= l <= 2000, as in the seed). One row per class with three times:
kernel time by events of the device-array op ``segsort.sort``, from the
first command's start to the last one's end (the fill of the bin counts,
the small sort, binning, the read of the counts, the other bin kernels and
the host's wait for the read between them); the wall clock of that op from
device arrays until its results are complete (its events waited for); and
the wall clock of ``segmented_sort`` from numpy in to numpy out (uploads and
downloads through page-locked staging included). Then a row for the async
mode (``sync=False``: no host wait; its kernel time by events and its wall
clock from device arrays until complete). Then rows for the keys alone
(no values: uint32 keys, float32 keys, and float32 keys with one NaN of
x86's bits, which the fix-up of float keys' bits must find; their rates
against the pairs' row). Then one row per bin kernel
(its own event time; the rate is the pairs of that bin per second; the
small-sort kernel covers every bin up to small_max). Peers on a CUDA GPU: torch batched sort
(uniform lengths: sort a (nseg, L) view along dim 1 and gather the values)
and torch sort of a combined (segment << 32 | key) int64 key (every class);
on a CPU device numpy's argsort of that combined key.
"""

import numpy as np
import pyopencl.array as cla

from benchlib import median_call, median_torch, median_wall, row, torch_cuda
from clkernels.host import segsort as S
from clkernels.host.core import timing
from clkernels.host.segsort.tune import powerlaw_lengths

UNIFORM = (16, 64, 256, 1024, 4096)
ALPHAS = (0.5, 1.0, 1.5)


def _classes(n, rng):
    out = []
    for L in UNIFORM:
        out.append((f"uniform{L}", np.full(max(1, n // L), L, np.int64)))
    for a in ALPHAS:
        out.append((f"powerlaw{a}", powerlaw_lengths(rng, n, a, 2000).astype(np.int64)))
    return out


def _bin_label(plan, b):
    if b == plan.grid_bin:
        return f"grid >{plan.bounds[-1]}"
    bn = plan.bins[b]
    lo = plan.bounds[b - 1] + 1 if b else 0
    if isinstance(bn, S.RegBin):
        return f"reg {lo}-{bn.P} k={bn.k} m={bn.m}"
    return f"block {lo}-{bn.P} k={bn.k} wg={bn.wg}"


def _seconds(events):
    return sum((e.profile.end - e.profile.start) * 1e-9 for e in events)


def bench_segsort(args, device):
    n = args.size or (1 << 18 if args.quick else 1 << 26)
    rng = np.random.default_rng(0)
    want = set(args.variants.split(",")) if args.variants else None
    q = device.queue
    torch = torch_cuda()
    rows = []
    for name, lens in _classes(n, rng):
        if want is not None and name not in want:
            continue
        off = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=off[1:])
        nn = int(off[-1])
        keys = rng.integers(0, 2**32, nn, dtype=np.uint32)
        vals = np.arange(nn, dtype=np.uint32)
        dk, dv, do = (cla.to_device(q, x) for x in (keys, vals, off))
        last = {}

        def launch():
            last["out"], last["ev"] = S.sort(device, dk, do, dv)
            return last["ev"]

        def device_call():                      # device arrays in, results complete
            S.sort(device, dk, do, dv)[1].wait()

        def async_launch():
            return S.sort(device, dk, do, dv, sync=False)[1]

        def async_call():                       # the same without a host wait until the end
            async_launch().wait()

        warm = 1 if args.quick else 2
        times = timing.time_events(launch, warmup=warm, repeats=args.repeats)
        med, cv = timing.summarize(times)
        ev = last["ev"]
        ok, ov = (x.get() for x in last["out"])
        wall_dev = median_wall(device_call, warmup=warm, repeats=args.repeats)
        async_med, _ = timing.summarize(timing.time_events(async_launch, warmup=warm, repeats=args.repeats))
        wall_async = median_wall(async_call, warmup=warm, repeats=args.repeats)
        wall_np = median_call(lambda: S.segmented_sort(keys, off, vals, device=device), warmup=warm,
                              repeats=args.repeats)
        # spot check: the first and a middle segment against numpy
        for s in (0, len(lens) // 2):
            a, b = off[s], off[s + 1]
            o = np.argsort(keys[a:b], kind="stable")
            assert (ok[a:b] == keys[a:b][o]).all() and (ov[a:b] == vals[a:b][o]).all(), name
        plan = S.Plan.resolve(device, {"size": nn, "dtype": "uint32", "dims": 32})
        rows.append(row("segsort", f"clkernels {name}", nn, med, nn / med, "pairs/s", device.name,
                        f"{len(lens)} segs, cv {cv:.1%}, params {plan.source}",
                        wall_numpy=wall_np, wall_device=wall_dev))
        rows.append(row("segsort", f"  {name} async (sync=False)", nn, async_med, nn / async_med, "pairs/s",
                        device.name, "no host wait: bins launched from bounds", wall_device=wall_async))
        # keys only (no values: half the bytes moved); the rate against the pairs' row
        ko = {}

        def keys_launch():
            ko["out"], ev_k = S.sort(device, dk, do)
            return ev_k
        kmed, _ = timing.summarize(timing.time_events(keys_launch, warmup=warm, repeats=args.repeats))
        wall_keys = median_wall(lambda: S.sort(device, dk, do)[1].wait(), warmup=warm, repeats=args.repeats)
        kk = ko["out"].get()
        for s in (0, len(lens) // 2):
            a, b = off[s], off[s + 1]
            assert (kk[a:b] == np.sort(keys[a:b])).all(), name
        rows.append(row("segsort", f"  {name} keys only", nn, kmed, nn / kmed, "keys/s", device.name,
                        f"{med / kmed:.2f}x the pairs' rate", wall_device=wall_keys))
        # float32 keys only (finite, no -0.0: the fix-up launches and finds nothing to do)
        fkeys = ((keys >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32)
        dfk = cla.to_device(q, fkeys)
        fmed, _ = timing.summarize(timing.time_events(lambda: S.sort(device, dfk, do)[1], warmup=warm,
                                                      repeats=args.repeats))
        fk = S.sort(device, dfk, do)[0].get()
        for s in (0, len(lens) // 2):
            a, b = off[s], off[s + 1]
            assert (fk[a:b] == np.sort(fkeys[a:b])).all(), name
        rows.append(row("segsort", f"  {name} float32 keys only", nn, fmed, nn / fmed, "keys/s", device.name,
                        f"{med / fmed:.2f}x the pairs' rate"))
        # the same with one computed NaN (x86's 0/0 bits): the fix-up reads every segment, rewrites one
        fkeys.view(np.uint32)[nn // 2] = 0xFFC00000
        dfk = cla.to_device(q, fkeys)
        nmed, _ = timing.summarize(timing.time_events(lambda: S.sort(device, dfk, do)[1], warmup=warm,
                                                      repeats=args.repeats))
        rows.append(row("segsort", f"  {name} float32 keys only, one computed NaN", nn, nmed, nn / nmed, "keys/s",
                        device.name, f"{med / nmed:.2f}x the pairs' rate"))
        # per bin kernel (last repeat's events, by step; the bins in bin order)
        bins = np.searchsorted(np.array(plan.bounds + [np.inf]), lens, side="left")
        sizes = np.bincount(bins, weights=lens, minlength=plan.nbins)
        if plan.nsmall:                 # one kernel for every bin up to small_max (and the histogram)
            t = _seconds(ev["small"])
            small = bins < plan.nsmall
            sz = lens[small].sum()
            rows.append(row("segsort", f"  {name} small sort 0-{plan.bounds[plan.nsmall - 1]}", int(sz), t,
                            sz / t, "pairs/s", device.name, f"{int(small.sum())} segs"))
        nreg = len(plan.reg_bins)
        for step, first, last_bin in (("reg", plan.nsmall, nreg), ("block", nreg, plan.grid_bin)):
            used = [b for b in range(first, last_bin) if (bins == b).any()]
            for b, e in zip(used, ev.get(step, [])):
                t = _seconds([e])
                rows.append(row("segsort", f"  {name} bin {_bin_label(plan, b)}", int(sizes[b]), t,
                                sizes[b] / t, "pairs/s", device.name, f"{int((bins == b).sum())} segs"))
        if (bins == plan.grid_bin).any():
            ge = ev.all("tile", "merge", "gather")
            t = _seconds(ge)
            sz = sizes[plan.grid_bin]
            rows.append(row("segsort", f"  {name} bin {_bin_label(plan, plan.grid_bin)}", int(sz), t,
                            sz / t, "pairs/s", device.name, f"{len(ge)} kernels"))
        bt = _seconds(ev.all("hist", "scatter"))
        rows.append(row("segsort", f"  {name} binning (histogram, scatter)",
                        len(lens), bt, len(lens) / bt, "segs/s", device.name))
        if not device.is_gpu:
            seg = np.repeat(np.arange(len(lens), dtype=np.uint64), lens)
            comb = (seg << np.uint64(32)) | keys.astype(np.uint64)

            def np_sort():
                o = np.argsort(comb, kind="stable")
                return keys[o], vals[o]
            t = median_wall(np_sort, repeats=max(1, min(3, args.repeats)))
            rows.append(row("segsort", f"numpy argsort seg<<32|key {name}", nn, t, nn / t, "pairs/s", "CPU"))
        if torch is not None:
            tk = torch.from_numpy(keys.astype(np.int64)).cuda()
            tv = torch.from_numpy(vals.astype(np.int32)).cuda()
            if name.startswith("uniform"):
                L = int(lens[0])
                k2, v2 = tk.view(-1, L).int(), tv.view(-1, L)

                def batched():
                    s, i = torch.sort(k2, dim=1)
                    return s, torch.gather(v2, 1, i)
                t = median_torch(torch, batched, repeats=args.repeats)
                rows.append(row("segsort", f"torch batched sort {name}", nn, t, nn / t, "pairs/s",
                                torch.cuda.get_device_name()))
            seg = torch.from_numpy(np.repeat(np.arange(len(lens), dtype=np.int64), lens)).cuda()
            comb = (seg << 32) | tk

            def combined():
                s, i = torch.sort(comb)
                return s, tv[i]
            t = median_torch(torch, combined, repeats=args.repeats)
            rows.append(row("segsort", f"torch sort seg<<32|key {name}", nn, t, nn / t, "pairs/s",
                            torch.cuda.get_device_name()))
    return rows


WORKLOADS = {"segsort": ("segmented sort of uint32 pairs: uniform and power-law lengths", bench_segsort)}
