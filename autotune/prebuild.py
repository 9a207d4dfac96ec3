"""Building configurations ahead of the sweep, in worker processes.

On a GPU most of a sweep's time is spent compiling (measured on an H100 with
NVIDIA's driver: about 1 s per segmented-sort configuration, while running one
at the proxy size takes well under 1 ms). A :class:`Prebuilder` runs the
``kernels`` hook of each configuration of ops that have one in a pool of
worker processes (each with its own context on the same device) while the
sweep works on other ops. The worker's build fills the driver's own program
cache (NVIDIA's compute cache, PoCL's kernel cache: pyopencl defers to them),
so the sweep's own build of the same source is a cache hit; a configuration
the worker found unbuildable or unlaunchable is recorded from the worker's
verdict without building it again.

Only ops registered under their name (``tuning.REGISTRY``) are prebuilt; the
workers import the same modules as the sweep (the families, ``--modules``,
``CLKERNELS_TUNE_MODULES``). An op without a ``kernels`` hook is built by one
launch of the configuration on a tiny problem (``TINY``): its kernels run on
the device for microseconds beside the sweep's timed runs (a small source of
noise; the sweep times medians and the final choice is an interleaved
re-time), and the sweep takes no verdict from it (only the warm cache). A worker's start is
recorded, so the sweep waits for a running build no longer than the
configuration's time limit (then records ``timeout``; unlike an in-process
build, the sweep goes on while the worker keeps compiling). Closing the
prebuilder terminates the workers.
"""

import multiprocessing
import os
import queue as queue_mod
import time
import warnings

from ..host.core import tuning
from .search import freeze, proxy_problem

#: the size of the problem that builds ops without a kernels hook by a launch
TINY = 1024

_worker = {}


def device_spec(device):
    """The "platform:device" index spec of ``device`` (for the workers)."""
    import pyopencl as cl

    for pi, p in enumerate(cl.get_platforms()):
        try:
            devs = p.get_devices()
        except cl.Error:
            continue
        for di, d in enumerate(devs):
            if d.int_ptr == device.cl_device.int_ptr:
                return f"{pi}:{di}"
    return None


def default_jobs(device):
    """Workers by default: none on a CPU device (its runs use every core);
    on others one per spare core, at most 8."""
    cores = os.cpu_count() or 1
    if not getattr(device, "is_gpu", False) or cores < 4:
        return 0
    return min(8, cores - 2)


def _init(spec, modules, started):
    warnings.simplefilter("ignore")
    from ..host.core.device import Device

    tuning.load_families(modules, benchmarks=True)
    _worker.update(device=Device(spec), started=started)


def _build(op, key, params, problem):
    from ..host.core import timing
    from .runner import build_verdict

    _worker["started"].put((op, key, time.monotonic()))
    t = tuning.REGISTRY.get(op)
    if t is None:
        return "unknown", "", 0.0
    device, t0 = _worker["device"], time.monotonic()
    if t.kernels is not None:
        status, message = build_verdict(t, device, params)
        return status, message, time.monotonic() - t0
    try:                                 # no hook: one launch on a tiny problem builds
        skey = (op, freeze(problem))
        if skey not in _worker:
            _worker[skey] = t.setup(device, problem)
        timing.event_seconds(t.launch(device, params, _worker[skey])[0])
    except Exception:                    # the sweep finds out for itself
        pass
    return "unknown", "", time.monotonic() - t0


class Prebuilder:
    """A pool of ``jobs`` build workers for ``device`` (see the module docstring)."""

    def __init__(self, device, jobs, modules=()):
        spec = device_spec(device)
        self.jobs = jobs if spec is not None else 0
        self._pending, self._started = {}, {}
        self.used = 0                              # verdicts handed to the sweep
        self.pool = None
        if self.jobs > 0:
            ctx = multiprocessing.get_context("spawn")
            self._queue = ctx.Queue()
            self.pool = ctx.Pool(self.jobs, _init, (spec, tuple(modules), self._queue))

    def submit(self, tunable, configs, problem=None):
        """Queue the builds of ``configs`` (parameter dicts) of ``tunable``, in
        order. Without a ``kernels`` hook a configuration is built by one
        launch on ``problem`` scaled down to about ``TINY`` (no verdict:
        the sweep still builds it, from the driver's cache)."""
        if self.pool is None or tuning.REGISTRY.get(tunable.op) is not tunable:
            return 0
        if tunable.kernels is None:
            if not problem or "size" not in problem:
                return 0
            problem = proxy_problem(problem, max(1, int(problem["size"]) // TINY))
        n = 0
        for p in configs:
            key = freeze(p)
            if (tunable.op, key) not in self._pending:
                self._pending[(tunable.op, key)] = self.pool.apply_async(
                    _build, (tunable.op, key, dict(p), problem))
                n += 1
        return n

    def _drain(self):
        while True:
            try:
                op, key, t = self._queue.get_nowait()
            except (queue_mod.Empty, OSError, EOFError):
                return
            self._started[(op, key)] = t

    def verdict(self, tunable, params, limit):
        """(status, message, build seconds) from the worker that built ``params``,
        waiting for it (at most ``limit`` seconds after its start); None when it
        was not submitted, was not started in time, or the worker failed."""
        ar = self._pending.get((tunable.op, freeze(params)))
        if ar is None:
            return None
        key = (tunable.op, freeze(params))
        limit = limit or 1e9
        waited = time.monotonic()
        while not ar.ready():
            self._drain()
            start = self._started.get(key)
            now = time.monotonic()
            if start is None and now - waited > limit:
                return None                       # never started: build it in-process
            if start is not None and now - start > limit:
                return "timeout", (f"the build ran over the {limit:g} s limit in a prebuild worker "
                                   "(still compiling there)"), now - start
            ar.wait(0.05)
        self._pending.pop(key, None)              # later sizes build in-process (memoized)
        try:
            status, message, seconds = ar.get()
        except Exception:                         # a worker failed: build it in-process
            return None
        if status == "unknown":
            return None
        self.used += 1
        return status, message, seconds

    def close(self):
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
