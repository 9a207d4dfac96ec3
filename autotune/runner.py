"""Running configurations: build and prune, run and check, time.

A :class:`Runner` works on one list of problem states (a problem group at one
size of the schedule). For a :class:`Result` it

1. builds and prunes (``Tunable.kernels`` + ``check_launch``: a work-group size
   over the kernel's ``CL_KERNEL_WORK_GROUP_SIZE`` or too much local memory
   never launches);
2. runs once per problem and compares the output exactly with the default
   configuration's output on the same problem (:func:`same_output`);
3. times with OpenCL profiling events: warm-up, median of ``repeats`` >= 5
   (at least 3 for runs so long that more would pass ``time_cap``; at most
   ``PROXY_SAMPLES`` at proxy sizes, where the times only rank); a
   coefficient of variation over ``cv_limit`` is re-timed up to ``retimes``
   times; a configuration more than ``slow_factor`` times slower than the best
   so far (in both of its first two samples) is not timed further; the time
   over several problems is their geometric mean.

Every failure is a typed status (``build_error``, ``pruned``, ``launch_error``,
``wrong``, ``error``, ``timeout``) and the sweep goes on.

The per-configuration time limit (``Settings.config_timeout``): the time spent
on one configuration at one size -- its build (when not built yet) and its
runs -- is checked after every build, every run and every timing sample; past
the limit the configuration gets the ``timeout`` status and the sweep does not
try it at larger sizes. The check happens BETWEEN those steps: a build or a
kernel run that is under way (one C call into the OpenCL driver) cannot be
interrupted in-process, so one step can overrun the limit by its own length
(a 300 s build is noticed after 300 s, not after 60 s). When a configuration's
build ran in a prebuild worker (:mod:`clkernels.autotune.prebuild`), the
worker's build time counts against the limit, and the sweep waits for that
worker no longer than the limit.
"""

import dataclasses
import time

import numpy as np
import pyopencl as cl

from ..host.core import launch as launch_mod
from ..host.core import timing
from ..host.core.errors import BuildError

#: timing samples per configuration at proxy sizes (at most)
PROXY_SAMPLES = 5
#: every status a configuration can end with ("pending" while it runs)
STATUSES = ("ok", "build_error", "pruned", "launch_error", "wrong", "error", "timeout", "skipped")


@dataclasses.dataclass
class Result:
    """The outcome of one configuration on one problem group (times in seconds).

    ``median``, ``cv``, ``times`` and ``per_problem`` belong to the largest
    size the configuration was timed at (``size``: of the group's first
    problem; ``at_full``: the full size); ``proxy_median`` is its time at the
    first (smallest) size of the schedule; ``final`` and ``final_cv`` come from
    the interleaved re-time at full size."""
    params: dict
    status: str = "pending"
    median: float = None
    cv: float = None
    final: float = None
    final_cv: float = None
    times: list = dataclasses.field(default_factory=list)
    message: str = ""
    is_default: bool = False
    per_problem: list = None
    size: int = None
    rung: int = -1                # index of the largest schedule size it reached (-1: none)
    at_full: bool = False
    at_proxy: bool = False        # evaluated at a proxy (smaller) size
    proxy_median: float = None
    seconds: float = 0.0          # time spent on it (builds, runs)

    @property
    def best_time(self):
        return self.final if self.final is not None else self.median

    @property
    def failed(self):
        return self.status not in ("ok", "pending", "skipped")

    def fail(self, status, message):
        self.status, self.message = status, message
        return self


class ConfigTimeout(Exception):
    """A configuration spent more than its time limit (raised between steps)."""


def cl_error_text(e):
    code = getattr(e, "code", None)
    name = getattr(e, "routine", "") or ""
    return f"{type(e).__name__} {name} {code if code is not None else ''}: {e}".strip()


def classify(e):
    """(status, message) of an exception raised while building or launching."""
    if isinstance(e, ConfigTimeout):
        return "timeout", str(e)
    if isinstance(e, BuildError):
        return "build_error", (str(e).splitlines() or [""])[0][:300]
    if isinstance(e, launch_mod.LaunchConfigError):
        return "pruned", str(e)
    if isinstance(e, (cl.Error, cl.MemoryError, cl.LogicError, cl.RuntimeError)):
        return "launch_error", cl_error_text(e)[:300]
    return "error", f"{type(e).__name__}: {e}"[:300]


def to_host(x):
    """Outputs as host values: pyopencl arrays fetched, containers walked."""
    if hasattr(x, "get") and hasattr(x, "queue") and hasattr(x, "dtype"):  # pyopencl Array
        return x.get()
    if isinstance(x, (list, tuple)):
        return type(x)(to_host(v) for v in x)
    if isinstance(x, dict):
        return {k: to_host(v) for k, v in x.items()}
    return x


def resolve_output(out):
    """A launch's output on the host (a callable output is called first)."""
    return to_host(out() if callable(out) else out)


def same_output(a, b):
    """Exact equality of outputs (arrays: shape, dtype and every element; NaNs
    compare equal to NaNs)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_output(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_output(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def geomean(xs):
    return float(np.exp(np.mean(np.log(np.maximum(np.asarray(xs, dtype=float), 1e-12)))))


def prune(tunable, device, params):
    """Build the configuration's kernels and check they can launch (or raise
    :class:`~clkernels.host.core.launch.LaunchConfigError`)."""
    if tunable.kernels is None:
        return
    for item in tunable.kernels(device, params):
        k, wg = item[0], item[1]
        local = item[2] if len(item) > 2 else 0
        launch_mod.check_launch(device, k, wg, local)


def build_verdict(tunable, device, params):
    """("ok", "") or the (status, message) of a configuration that cannot run:
    ``pruned`` (cannot launch) or ``build_error`` (anything the kernels hook
    raised: a BuildError, a template's ValueError...)."""
    try:
        prune(tunable, device, params)
    except launch_mod.LaunchConfigError as e:
        return "pruned", str(e)
    except Exception as e:
        msg = (str(e).splitlines() or [""])[0][:300]
        return "build_error", msg if isinstance(e, BuildError) else f"{type(e).__name__}: {msg}"
    return "ok", ""


class Runner:
    """Runs configurations on a group of problem states that share one cache
    entry (same op, dtype, dims and size bucket), at one size: a configuration
    must be right on every problem, and its time is the geometric mean over
    them. ``prebuilt``: an optional :class:`~clkernels.autotune.prebuild.Prebuilder`
    whose verdicts replace in-process builds."""

    def __init__(self, tunable, device, states, settings, prebuilt=None, proxy=False):
        self.t, self.device, self.states, self.s = tunable, device, list(states), settings
        self.prebuilt, self.proxy = prebuilt, proxy
        self._t0 = None

    def _launcher(self, params, i):
        return lambda: self.t.launch(self.device, params, self.states[i])[0]

    def _tick(self, what):
        """Raise ConfigTimeout once the configuration has used up its limit."""
        limit = self.s.config_timeout
        if limit and self._t0 is not None:
            spent = time.monotonic() - self._t0
            if spent > limit:
                raise ConfigTimeout(f"{what} took the configuration past its {limit:g} s limit "
                                    f"({spent:.1f} s)")

    def _build(self, r):
        if self.prebuilt is not None:
            verdict = self.prebuilt.verdict(self.t, r.params, self.s.config_timeout)
            if verdict is not None:
                status, message, seconds = verdict
                r.seconds += seconds
                if status == "timeout" or (self.s.config_timeout and seconds > self.s.config_timeout):
                    raise ConfigTimeout(message or f"the build took {seconds:.1f} s in a prebuild worker "
                                        f"(limit {self.s.config_timeout:g} s)")
                if status != "ok":
                    r.fail(status, message)
                    return False
        status, message = build_verdict(self.t, self.device, r.params)
        if status != "ok":
            r.fail(status, message)
            return False
        self._tick("the build")
        return True

    def check(self, r, references):
        """Prune, run once per problem, compare with ``references`` (None: the
        default itself); sets ``r.status`` on failure. Returns the outputs (one
        per problem) or None. Starts the configuration's clock."""
        self._t0 = time.monotonic()
        outs = []
        try:
            if not self._build(r):
                return None
            for i, state in enumerate(self.states):
                events, out = self.t.launch(self.device, r.params, state)
                timing.event_seconds(events)
                self._tick("the check run")
                out = resolve_output(out)
                if references is not None and not same_output(out, references[i]):
                    r.fail("wrong", "output differs from the default configuration's"
                           + (f" (problem {i})" if len(self.states) > 1 else ""))
                    return None
                outs.append(out)
        except Exception as e:  # recorded, never raised: the sweep goes on
            r.fail(*classify(e))
            return None
        finally:
            r.seconds += time.monotonic() - self._t0
        return outs

    def _samples(self, launch, warmup, repeats):
        for _ in range(warmup):
            timing.event_seconds(launch())
            self._tick("warm-up runs")
        out = []
        for _ in range(repeats):
            out.append(timing.event_seconds(launch()))
            self._tick("timing runs")
        return out

    def _time_one(self, launch, best):
        first = self._samples(launch, self.s.warmup, 1)
        if best is not None and first[0] > self.s.slow_factor * best:
            first += self._samples(launch, 0, 1)  # one outlier must not cut a configuration
            if min(first) > self.s.slow_factor * best:
                return first, min(first), 0.0, True
        n = self.s.samples(min(first))
        if self.proxy:                  # a ranking for promotion: fewer samples do
            n = min(n, PROXY_SAMPLES)
        times = first + self._samples(launch, 0, n - len(first))
        med, cv = timing.summarize(times)
        for _ in range(self.s.retimes):
            if cv <= self.s.cv_limit:
                break
            again = self._samples(launch, 1, n)
            m2, c2 = timing.summarize(again)
            if c2 < cv:
                times, med, cv = again, m2, c2
        return times, med, cv, False

    def time(self, r, best):
        """Time ``r`` on every problem (after :meth:`check`); ``best`` is the
        per-problem best time so far at this size (or None)."""
        t0 = time.monotonic()
        if self._t0 is None:
            self._t0 = t0
        try:
            meds, cvs, slow, times = [], [], False, []
            for i in range(len(self.states)):
                ts, med, cv, slow = self._time_one(self._launcher(r.params, i), best and best[i])
                times.append(ts)
                meds.append(med)
                cvs.append(cv)
                if slow:
                    break
            r.times, r.per_problem = times, meds
            r.median, r.cv = geomean(meds), max(cvs)
            if r.message.startswith(("slow", "noisy")):     # from a smaller size
                r.message = ""
            if slow:
                r.message = "slow: not re-timed"
                r.per_problem = None
            elif r.cv > self.s.cv_limit:
                r.message = f"noisy (cv {r.cv:.1%})"
            r.status = "ok"
        except Exception as e:
            r.fail(*classify(e))
        finally:
            r.seconds += time.monotonic() - t0
            self._t0 = None

    def interleaved(self, results):
        """Re-time ``results`` round-robin on each problem (rotating the order
        each round; ``rounds``, at least 3 when a round is long); sets
        ``final`` and ``final_cv``."""
        finals = {id(r): [] for r in results}
        cvs = {id(r): [] for r in results}
        for i in range(len(self.states)):
            samples = {id(r): [] for r in results}
            once = sum(timing.event_seconds(self._launcher(r.params, i)()) for r in results)
            rounds = max(3, min(self.s.rounds, int(4 * self.s.time_cap / max(once, 1e-9))))
            for k in range(rounds):
                order = results[k % len(results):] + results[:k % len(results)]
                for r in order:
                    samples[id(r)].append(timing.event_seconds(self._launcher(r.params, i)()))
            for r in results:
                med, cv = timing.summarize(samples[id(r)])
                finals[id(r)].append(med)
                cvs[id(r)].append(cv)
        for r in results:
            r.final, r.final_cv = geomean(finals[id(r)]), max(cvs[id(r)])
