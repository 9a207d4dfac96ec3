#!/usr/bin/env python3
"""Benchmarks of clkernels, timed with OpenCL profiling events.

    python examples/bench.py copy [--quick] [--json out.json] [--device nvidia]
    python examples/bench.py all --quick

Each workload is a subcommand; workload modules (examples/bench_<name>.py)
register themselves in WORKLOADS below. Our kernels are timed by profiling
events (warm-up, then the median of repeats); peers (numpy/scipy on the CPU,
torch or cupy on the GPU) are timed when installed. A tabulate table is
printed last.
"""

import argparse
import importlib
import json
import os
import sys

import numpy as np
import pyopencl.array as cla
from tabulate import tabulate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import clkernels  # noqa: E402
from benchlib import fmt_ms, median_call, median_torch, row, torch_cuda  # noqa: E402
from clkernels.host.core import timing
from clkernels.host import copy  # noqa: E402


def bench_copy(args, device):
    """Device-to-device copy bandwidth (bytes read + written per second)."""
    q = device.queue
    sizes = [1 << 24] if args.quick else [1 << 26, 1 << 28]      # bytes
    if args.size:
        sizes = [args.size]
    rows = []
    for nbytes in sizes:
        nbytes = min(nbytes, device.max_mem_alloc_size // 2) // 16 * 16
        src = cla.to_device(q, np.arange(nbytes // 4, dtype=np.uint32))
        dst = cla.empty_like(src)

        def launch():
            return copy.copy(q, src, dst)[1].all()
        times = timing.time_events(launch, warmup=2, repeats=args.repeats)
        med, cv = timing.summarize(times)
        assert (dst.get()[:: 4097] == src.get()[:: 4097]).all()
        params, source = copy.TUNABLE.resolve(device, {"size": nbytes})
        rows.append(row("copy", "clkernels copy_u4", nbytes, med, 2 * nbytes / med / 1e9, "GB/s",
                        device.name, f"wg {params['wg_size']} x{params['groups_per_cu']}/CU ({source}),"
                                     f" cv {cv:.1%}"))

        def enqueue_copy():
            return cla.cl.enqueue_copy(q, dst.data, src.data, byte_count=nbytes)
        times = timing.time_events(enqueue_copy, warmup=2, repeats=args.repeats)
        med, _ = timing.summarize(times)
        rows.append(row("copy", "clEnqueueCopyBuffer", nbytes, med, 2 * nbytes / med / 1e9, "GB/s",
                        device.name))
        torch = torch_cuda()
        if torch is not None:
            t = torch.empty(nbytes // 4, dtype=torch.int32, device="cuda")
            u = torch.empty_like(t)
            med = median_torch(torch, lambda: u.copy_(t), repeats=args.repeats)
            rows.append(row("copy", "torch copy_", nbytes, med, 2 * nbytes / med / 1e9, "GB/s",
                            torch.cuda.get_device_name()))
    return rows


def bench_transfer(args, device):
    """Host <-> device copy bandwidth: page-locked (the floor of numpy in/out),
    pageable numpy through the driver, and the library's staged transfers."""
    import pyopencl as cl

    from clkernels.host.core import transfer

    nbytes = (16 << 20) if args.quick else (256 << 20)
    q = device.queue
    host = np.random.default_rng(0).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    dbuf = cla.empty(q, host.size, np.uint32)
    pin = cl.Buffer(device.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, nbytes)
    parr, _ = cl.enqueue_map_buffer(q, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (host.size,), np.uint32)
    parr[:] = host
    rows = []
    for label, fn in (("pinned host-to-device", lambda: cl.enqueue_copy(q, dbuf.data, parr).wait()),
                      ("pinned device-to-host", lambda: cl.enqueue_copy(q, parr, dbuf.data).wait()),
                      ("pageable numpy host-to-device (driver)", lambda: cl.enqueue_copy(q, dbuf.data, host).wait()),
                      ("pageable numpy device-to-host (driver)", lambda: dbuf.get()),
                      ("clkernels upload (staged)", lambda: transfer.upload(device, host).finish()),
                      ("clkernels download (staged)", lambda: transfer.download(device, dbuf))):
        t = median_call(fn, warmup=1, repeats=args.repeats)
        rows.append(row("transfer", label, nbytes, t, nbytes / t / 1e9, "GB/s", device.name, "wall clock",
                        wall_numpy=t))
    return rows


def bench_small(args, device):
    """Small calls after warm-up: the host path's fixed cost (wall clock)."""
    rng = np.random.default_rng(0)
    x = rng.random((2000, 3)).astype(np.float32)
    xd = cla.to_device(device.queue, x)
    lens = rng.integers(0, 64, 1000)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    keys = rng.integers(0, 2**32, int(off[-1]), dtype=np.uint32)
    kd, od = cla.to_device(device.queue, keys), cla.to_device(device.queue, off)
    rows = []
    reps = max(args.repeats, 20)
    for label, fn, fnd in (
            ("pair_count 2,000 points r=0.1", lambda: clkernels.pair_count(x, 0.1, device=device),
             lambda: clkernels.pair_count(xd, 0.1, device=device)),
            ("pair_count 2,000 points r=0.1, method='allpairs'",
             lambda: clkernels.pair_count(x, 0.1, device=device, method="allpairs"),
             lambda: clkernels.pair_count(xd, 0.1, device=device, method="allpairs")),
            ("segmented_sort 1,000 segments", lambda: clkernels.segmented_sort(keys, off, device=device),
             lambda: clkernels.segmented_sort(kd, od, device=device).finish())):
        tn = median_call(fn, warmup=3, repeats=reps)
        td = median_call(fnd, warmup=3, repeats=reps)
        rows.append(row("small", label, 0, td, 1 / td, "calls/s", device.name, "wall clock (kernel ms = wall)",
                        wall_numpy=tn, wall_device=td))
    return rows


# name -> (help, function); workload modules (bench_<name>.py) export WORKLOADS likewise
WORKLOADS = {"copy": ("device bandwidth (read + write)", bench_copy),
             "transfer": ("host <-> device bandwidth: pinned, pageable, staged", bench_transfer),
             "small": ("small calls after warm-up (wall clock)", bench_small)}
for _mod in ("bench_twobody", "bench_grid", "bench_segsort", "bench_clustered", "bench_pairs", "bench_selfjoin",
             "bench_rectjoin", "bench_paircounts", "bench_scaleout", "bench_multigpu"):
    try:
        m = importlib.import_module(_mod)
    except ModuleNotFoundError as e:
        if e.name != _mod:
            raise
        continue
    WORKLOADS.update(m.WORKLOADS)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(WORKLOADS) + ["all"])
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    ap.add_argument("--json", metavar="PATH", help="write the result rows as JSON")
    ap.add_argument("--device", help="device spec (as CLKERNELS_DEVICE)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (median is reported)")
    ap.add_argument("--size", type=int, default=None, help="override the problem size")
    ap.add_argument("--variants", default=None, help="comma-separated subset of variants")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 9
    device = clkernels.Device(args.device) if args.device else clkernels.default_device()
    names = sorted(WORKLOADS) if args.workload == "all" else [args.workload]
    rows = []
    for name in names:
        print(f"# {name} on {device.name} ({device.platform_name})", file=sys.stderr)
        rows += WORKLOADS[name][1](args, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device.name, "platform": device.platform_name,
                       "driver": device.driver_version, "rows": rows}, f, indent=1)
    print(tabulate([[r["workload"], r["variant"], r["n"], f"{r['ms']:.3f}", fmt_ms(r.get("wall_device_ms")),
                     fmt_ms(r.get("wall_numpy_ms")), f"{r['rate']:.4g}", r["unit"], r["note"]] for r in rows],
                   headers=["workload", "variant", "n", "kernel ms", "wall ms (device arrays)",
                            "wall ms (numpy)", "rate (kernel)", "unit", "note"]))


if __name__ == "__main__":
    main()
