"""Shared helpers of examples/bench.py and its workload modules.

Our kernels are timed with OpenCL profiling events (clkernels.host.timing);
peers are timed with CUDA events (torch/cupy) or perf_counter (CPU), always
as the median of repeats after warm-up.
"""

import statistics
import time

import numpy as np


def same_result(a, b):
    """Results equal element for element (tuples of arrays compared in turn)."""
    import numpy as np

    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_result(u, v) for u, v in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b))


def pair_digest(i, j, n, chunk=1 << 24):
    """An order-free digest of the pairs (i[k], j[k]) of n points, for
    comparing results of ~1e9 pairs without sorting them (np.lexsort of 5e8
    pairs takes minutes): their number, every point's count as first and as
    second index (exact), and the wrapping 64-bit sum of a splitmix64 mix of
    each pair's key i * n + j (two different multisets with equal counts
    agreeing there by chance: ~2^-64)."""
    import numpy as np

    i, j = np.asarray(i), np.asarray(j)
    total = np.uint64(0)
    with np.errstate(over="ignore"):
        for a in range(0, len(i), chunk):
            z = i[a:a + chunk].astype(np.uint64) * np.uint64(n) + j[a:a + chunk].astype(np.uint64)
            z += np.uint64(0x9E3779B97F4A7C15)
            z ^= z >> np.uint64(30)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(27)
            z *= np.uint64(0x94D049BB133111EB)
            z ^= z >> np.uint64(31)
            total += z.sum(dtype=np.uint64)
    return len(i), np.bincount(i, minlength=n), np.bincount(j, minlength=n), int(total)


def median_wall(fn, warmup=1, repeats=5):
    """Median seconds of a CPU call (peers such as numpy/scipy)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def torch_cuda():
    """torch if it is installed and sees a CUDA GPU, else None."""
    try:
        import torch
    except Exception:
        return None
    return torch if torch.cuda.is_available() else None


def median_torch(torch, fn, warmup=2, repeats=7):
    """Median seconds of a GPU call in torch, by CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(ts)


def pinned_d2h_rate(device, nbytes=256 << 20, repeats=5):
    """Bytes/s of one device-to-host copy into page-locked memory (a mapped
    ALLOC_HOST_PTR buffer): the bus's ceiling for results coming to the host."""
    import pyopencl as cl

    q, mf = device.queue, cl.mem_flags
    src = cl.Buffer(device.context, mf.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(q, src, np.uint8(1), 0, nbytes)
    pin = cl.Buffer(device.context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, nbytes)
    host, _ = cl.enqueue_map_buffer(q, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (nbytes,), np.uint8,
                                    is_blocking=True)
    sec = median_wall(lambda: cl.enqueue_copy(q, host, src, is_blocking=True), warmup=1, repeats=repeats)
    del host
    return nbytes / sec


_STORE_SRC = """
__kernel void store_u4(__global uint4 *p, const ulong n)
{
    for (size_t i = get_global_id(0); i < n; i += get_global_size(0))
        p[i] = (uint4)((uint)i, 1u, 2u, 3u);
}
"""


def write_rate(device, nbytes=1 << 30, repeats=5):
    """Bytes/s the device writes its own memory: the faster of
    ``clEnqueueFillBuffer`` and a grid-stride kernel of 16-byte stores over
    ``nbytes`` (profiling events, medians after a warm-up; NVIDIA's fill runs
    at about half its kernel's rate): the ceiling for records a kernel writes."""
    import pyopencl as cl

    q = device.queue
    buf = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, nbytes)
    store = cl.Program(device.context, _STORE_SRC).build().store_u4
    n = nbytes // 16
    wg = 256
    groups = min(-(-n // wg), device.compute_units * 32)
    best = 0.0
    for enqueue in (lambda k: cl.enqueue_fill_buffer(q, buf, np.uint32(k), 0, nbytes),
                    lambda k: store(q, (groups * wg,), (wg,), buf, np.uint64(n))):
        times = []
        for k in range(repeats + 1):
            ev = enqueue(k)
            ev.wait()
            if k:
                times.append((ev.profile.end - ev.profile.start) * 1e-9)
        best = max(best, nbytes / float(np.median(times)))
    buf.release()
    return best


def median_call(fn, warmup=1, repeats=5):
    """Median wall seconds of a library call that returns host results (so it
    has finished when it returns): what a user sees."""
    return median_wall(fn, warmup=warmup, repeats=repeats)


def row(workload, variant, n, seconds, rate, unit, device, note="", wall_numpy=None, wall_device=None):
    """One result row (what the table prints and the JSON holds).

    ``seconds``: device time by OpenCL profiling events (or the peer's own
    timer); ``wall_numpy`` / ``wall_device``: the wall clock of the whole call
    from numpy in to numpy out, and from device arrays in to the result, when
    measured. ``rate`` is per second of ``seconds``."""
    return {"workload": workload, "variant": variant, "n": n, "ms": seconds * 1e3,
            "wall_numpy_ms": None if wall_numpy is None else wall_numpy * 1e3,
            "wall_device_ms": None if wall_device is None else wall_device * 1e3,
            "rate": rate, "unit": unit, "device": device, "note": note}


def fmt_ms(v):
    return "-" if v is None else f"{v:.3f}"
