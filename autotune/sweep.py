"""The sweep: every configuration of an operation's space, built, checked, timed.

For each registered operation (:class:`clkernels.host.tuning.Tunable`) and each
group of its representative problems that share a cache entry (same dtype,
dims and log2 size bucket; e.g. one size under several length distributions):

1. enumerate the space (defaults overlaid with each point; ``restrict``
   filters; the default configuration always comes first, restricted or not).
   Large spaces: the one-parameter-at-a-time neighbours of the default first,
   then a deterministic sample; the combination of each parameter's best
   neighbour is added at the end;
2. per configuration: build and prune (``Tunable.kernels`` + ``check_launch``:
   a work-group size over the kernel's ``CL_KERNEL_WORK_GROUP_SIZE`` or too much
   local memory never launches), run once per problem and compare the output
   exactly with the default configuration's, then time with profiling events
   (warm-up, median of ``repeats`` >= 5; a coefficient of variation over
   ``cv_limit`` is re-timed up to ``retimes`` times; a configuration more than
   ``slow_factor`` times slower than the best so far is not re-timed); the time
   of a group is the geometric mean over its problems. Every failure is a
   typed :class:`Result` status (``build_error``, ``pruned``,
   ``launch_error``, ``wrong``, ``error``, ``skipped``) and the sweep goes on;
3. re-time the ``top`` fastest and the default interleaved (``rounds``
   rounds); the winner is the fastest unless it beats the default by less than
   the noise (max(``min_gain``, the measured CVs)): then the default stays;
4. write the winner to the cache at once (one entry per group, merged
   atomically under the cache lock), with the default's time, the speedup, the
   problems (for ``--verify``) and the recorded failures.

A time budget per operation bounds step 2 (split evenly over the groups left);
the default and the final re-time always run.
"""

import dataclasses
import datetime
import itertools
import random
import sys
import time

import numpy as np
import pyopencl as cl

from ..host.core import launch, timing, tuning
from ..host.core.device import as_device
from ..host.core.errors import BuildError
from . import cache

STATUSES = ("ok", "build_error", "pruned", "launch_error", "wrong", "error", "skipped")


@dataclasses.dataclass
class Settings:
    warmup: int = 2
    repeats: int = 7
    cv_limit: float = 0.05
    retimes: int = 2
    slow_factor: float = 3.0
    top: int = 3
    rounds: int = 7
    min_gain: float = 0.01
    max_configs: int = 256
    quick_configs: int = 16

    @classmethod
    def for_mode(cls, quick):
        return cls(warmup=1, repeats=5, rounds=5, retimes=1) if quick else cls()


@dataclasses.dataclass
class Result:
    """The outcome of one configuration on one problem group (times in seconds)."""
    params: dict
    status: str = "pending"
    median: float = None          # seconds (sweep timing)
    cv: float = None
    final: float = None           # seconds (interleaved re-time of the top ones)
    final_cv: float = None
    times: list = dataclasses.field(default_factory=list)
    message: str = ""
    is_default: bool = False
    per_problem: list = None      # medians per problem of the group

    @property
    def best_time(self):
        return self.final if self.final is not None else self.median


@dataclasses.dataclass
class ProblemReport:
    op: str
    problem: dict
    bucket: int
    results: list
    default: Result = None
    winner: Result = None
    entry: dict = None
    key: str = None
    note: str = ""
    seconds: float = 0.0
    problems: list = None         # the group of problems sharing this entry

    def counts(self):
        c = {}
        for r in self.results:
            c[r.status] = c.get(r.status, 0) + 1
        return c

    @property
    def speedup(self):
        if self.winner is None or self.default is None or not self.winner.best_time:
            return None
        return self.default.best_time / self.winner.best_time


class Progress:
    """A plain-text progress bar on stderr (a line per quarter when not a tty)."""

    def __init__(self, total, label, stream=None, enabled=True):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.monotonic()
        self._mark = -1
        self.detail = ""

    def step(self, n=1, detail=None):
        self.done = min(self.total, self.done + n)
        if detail is not None:
            self.detail = detail
        self._draw()

    def _draw(self, final=False):
        if not self.enabled:
            return
        frac = self.done / self.total
        bar = "#" * int(frac * 24)
        line = (f"{self.label:<22} [{bar:<24}] {self.done:>4}/{self.total:<4} "
                f"{time.monotonic() - self.t0:6.1f}s {self.detail}")
        if self.tty:
            self.stream.write("\r" + line[:118].ljust(118) + ("\n" if final else ""))
            self.stream.flush()
        else:
            mark = int(frac * 4)
            if final or mark > self._mark:
                self._mark = mark
                self.stream.write(line + "\n")
                self.stream.flush()

    def close(self, detail=None):
        if detail is not None:
            self.detail = detail
        self.done = self.total
        self._draw(final=True)


def fmt_params(params):
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "-"


def _freeze(params):
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def _allowed(tunable, device, p):
    try:
        return bool(tunable.restrict(p, device))
    except Exception:
        return False


def configurations(tunable, device, problem, quick=False, settings=None):
    """The configurations to try, the default first.

    When the whole space (defaults overlaid with each point, restricted,
    deduplicated) fits the limit (``quick_configs`` / ``max_configs``), all
    of it. Otherwise the one-parameter-at-a-time neighbours of the default
    first, then a deterministic random sample of the rest; the sweep adds the
    combination of the best value of each parameter at the end.
    """
    settings = settings or Settings()
    default = dict(tunable.default(device, problem))
    space = tunable.space_for(device)
    names = sorted(space)
    limit = settings.quick_configs if quick else settings.max_configs
    total = 1
    for n in names:
        total *= max(1, len(space[n]))
    seen, out = {_freeze(default)}, [default]

    def add(p):
        f = _freeze(p)
        if f not in seen and _allowed(tunable, device, p):
            seen.add(f)
            out.append(p)
    if total <= 4 * limit:
        for combo in itertools.product(*(space[n] for n in names)):
            add({**default, **dict(zip(names, combo))})
        rest = out[1:]
    else:
        for n in names:  # neighbours of the default, one parameter at a time
            for v in space[n]:
                add({**default, n: v})
        rng = random.Random(f"{tunable.op}|{problem.get('size')}")
        tries = 0
        while len(out) < 2 * limit and tries < 50 * limit:
            tries += 1
            add({**default, **{n: rng.choice(space[n]) for n in names if space[n]}})
        rest = out[1:]
    single = [p for p in rest if sum(p.get(k) != default.get(k) for k in names) <= 1]
    multi = [p for p in rest if sum(p.get(k) != default.get(k) for k in names) > 1]
    rest = single + multi  # neighbours first: a budget cut keeps the most informative
    if len(rest) >= limit:
        rng = random.Random(f"{tunable.op}|{problem.get('size')}|sample")
        if len(single) >= limit - 1:
            keep = sorted(rng.sample(range(len(single)), limit - 1))
            rest = [single[i] for i in keep]
        else:
            keep = sorted(rng.sample(range(len(multi)), limit - 1 - len(single)))
            rest = single + [multi[i] for i in keep]
    return [default] + rest


def combined_best(tunable, device, default, results):
    """The default with each parameter set to its best value among the timed
    one-parameter neighbours (None if that adds nothing)."""
    best = {}
    for r in results:
        if r.status != "ok" or r.is_default or r.median is None:
            continue
        diff = [k for k in r.params if r.params.get(k) != default.params.get(k)]
        if len(diff) == 1 and r.median < default.median and (
                diff[0] not in best or r.median < best[diff[0]][1]):
            best[diff[0]] = (r.params[diff[0]], r.median)
    if len(best) < 2:
        return None
    p = {**default.params, **{k: v for k, (v, _) in best.items()}}
    tried = {_freeze(r.params) for r in results}
    if _freeze(p) in tried or not _allowed(tunable, device, p):
        return None
    return p


def _resolve_output(out):
    if callable(out):
        out = out()
    return _host(out)


def _host(x):
    if hasattr(x, "get") and hasattr(x, "queue") and hasattr(x, "dtype"):  # pyopencl Array
        return x.get()
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v) for v in x)
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    return x


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


def _cl_error_text(e):
    code = getattr(e, "code", None)
    name = getattr(e, "routine", "") or ""
    return f"{type(e).__name__} {name} {code if code is not None else ''}: {e}".strip()


def _classify(e):
    """(status, message) of an exception raised while building or launching."""
    if isinstance(e, BuildError):
        return "build_error", str(e).splitlines()[0][:300]
    if isinstance(e, launch.LaunchConfigError):
        return "pruned", str(e)
    if isinstance(e, (cl.Error, cl.MemoryError, cl.LogicError, cl.RuntimeError)):
        return "launch_error", _cl_error_text(e)[:300]
    return "error", f"{type(e).__name__}: {e}"[:300]


def _prune(tunable, device, params):
    """Build the configuration's kernels and check they can launch (or raise)."""
    if tunable.kernels is None:
        return
    for item in tunable.kernels(device, params):
        k, wg = item[0], item[1]
        local = item[2] if len(item) > 2 else 0
        launch.check_launch(device, k, wg, local)


def _geomean(xs):
    return float(np.exp(np.mean(np.log(np.maximum(np.asarray(xs, dtype=float), 1e-12)))))


class _Runner:
    """Runs configurations on a group of problems that share one cache entry
    (same op, dtype, dims and size bucket): a configuration must be right on
    every problem, and its time is the geometric mean over them."""

    def __init__(self, tunable, device, states, settings):
        self.t, self.device, self.states, self.s = tunable, device, list(states), settings

    def events(self, params, i):
        return lambda: self.t.launch(self.device, params, self.states[i])[0]

    def check(self, r, references):
        """Prune, run once per problem, compare; sets r.status on failure.
        Returns the outputs (one per problem) or None."""
        outs = []
        try:
            _prune(self.t, self.device, r.params)
        except launch.LaunchConfigError as e:
            r.status, r.message = "pruned", str(e)
            return None
        except Exception as e:  # the kernels hook builds: anything else is a build failure
            r.status, r.message = "build_error", (str(e).splitlines() or [""])[0][:300]
            if not isinstance(e, BuildError):
                r.message = f"{type(e).__name__}: {r.message}"
            return None
        try:
            for i, state in enumerate(self.states):
                events, out = self.t.launch(self.device, r.params, state)
                timing.event_seconds(events)
                out = _resolve_output(out)
                if references is not None and not same_output(out, references[i]):
                    r.status = "wrong"
                    r.message = "output differs from the default configuration's" + (
                        f" (problem {i})" if len(self.states) > 1 else "")
                    return None
                outs.append(out)
        except Exception as e:  # recorded, never raised: the sweep goes on
            r.status, r.message = _classify(e)
            return None
        return outs

    def _time_one(self, launch, best):
        first = timing.time_events(launch, warmup=self.s.warmup, repeats=1)
        if best is not None and first[0] > self.s.slow_factor * best:
            return first, first[0], 0.0, True
        times = first + timing.time_events(launch, warmup=0, repeats=self.s.repeats - 1)
        med, cv = timing.summarize(times)
        for _ in range(self.s.retimes):
            if cv <= self.s.cv_limit:
                break
            again = timing.time_events(launch, warmup=1, repeats=self.s.repeats)
            m2, c2 = timing.summarize(again)
            if c2 < cv:
                times, med, cv = again, m2, c2
        return times, med, cv, False

    def time(self, r, best):
        """Time ``r`` on every problem; ``best`` is the per-problem best so far."""
        try:
            meds, cvs, slow = [], [], False
            for i in range(len(self.states)):
                times, med, cv, slow = self._time_one(self.events(r.params, i), best and best[i])
                r.times.append(times)
                meds.append(med)
                cvs.append(cv)
                if slow:
                    break
            r.per_problem = meds
            r.median, r.cv = _geomean(meds), max(cvs)
            if slow:
                r.message = "slow: not re-timed"
                r.per_problem = None
            elif r.cv > self.s.cv_limit:
                r.message = f"noisy (cv {r.cv:.1%})"
            r.status = "ok"
        except Exception as e:
            r.status, r.message = _classify(e)

    def interleaved(self, results):
        """Re-time ``results`` round-robin on each problem (rotating the order each round)."""
        finals = {id(r): [] for r in results}
        cvs = {id(r): [] for r in results}
        for i in range(len(self.states)):
            samples = {id(r): [] for r in results}
            for r in results:
                timing.event_seconds(self.events(r.params, i)())
            for k in range(self.s.rounds):
                order = results[k % len(results):] + results[:k % len(results)]
                for r in order:
                    samples[id(r)].append(timing.event_seconds(self.events(r.params, i)()))
            for r in results:
                med, cv = timing.summarize(samples[id(r)])
                finals[id(r)].append(med)
                cvs[id(r)].append(cv)
        for r in results:
            r.final, r.final_cv = _geomean(finals[id(r)]), max(cvs[id(r)])


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def choose(default, ok, settings, previous=None):
    """The winner among re-timed results: the fastest, unless its gain over the
    default is within the noise (then the default). Hysteresis for stable
    reruns: the ``previous`` winner (from the cache) is kept while it is
    within the noise (at least 2%) of the fastest."""
    best = min(ok, key=lambda r: r.best_time)
    noise = max(settings.min_gain, default.final_cv or 0.0, best.final_cv or 0.0)
    if best is not default and best.best_time >= default.best_time * (1.0 - noise):
        best = default
    if previous is not None and previous in ok and previous is not best:
        pnoise = max(0.02, previous.final_cv or 0.0, best.final_cv or 0.0)
        if previous.best_time <= best.best_time * (1.0 + pnoise) and (
                previous is default or previous.best_time < default.best_time * (1.0 - noise)):
            return previous
    return best


def sweep_problem(tunable, device, problem, deadline, quick=False, settings=None,
                  progress=None, configs=None, previous=None):
    """Tune ``tunable`` on one problem, or on a list of problems that share a
    cache entry; returns a :class:`ProblemReport` (no cache write).
    ``previous``: the parameters cached for this entry by an earlier sweep
    (always re-timed; kept when still within the noise of the fastest)."""
    problems = list(problem) if isinstance(problem, (list, tuple)) else [problem]
    settings = settings or Settings.for_mode(quick)
    t0 = time.monotonic()
    first = problems[0]
    bucket = tuning.size_bucket(first.get("size", 1))
    configs = configs if configs is not None else configurations(tunable, device, first, quick, settings)
    results = [Result(dict(p), is_default=(i == 0)) for i, p in enumerate(configs)]
    rep = ProblemReport(tunable.op, first, bucket, results, default=results[0], problems=problems)
    try:
        states = [tunable.setup(device, p) for p in problems]
    except Exception as e:
        for r in results:
            r.status, r.message = "error", f"setup failed: {type(e).__name__}: {e}"[:300]
        rep.note = f"setup failed: {type(e).__name__}: {e}"
        progress and progress.step(len(results))
        return rep
    run = _Runner(tunable, device, states, settings)
    default = results[0]
    reference = run.check(default, None)
    if default.status == "pending":
        run.time(default, None)
    progress and progress.step(1)
    if default.status != "ok":
        rep.note = f"default configuration failed ({default.status}: {default.message})"
        for r in results[1:]:
            r.status, r.message = "skipped", "the default configuration failed"
        progress and progress.step(len(results) - 1)
        return rep
    best = list(default.per_problem)
    for r in results[1:]:
        if time.monotonic() > deadline:
            r.status, r.message = "skipped", "time budget spent"
            progress and progress.step(1)
            continue
        run.check(r, reference)
        if r.status == "pending":
            run.time(r, best)
            if r.status == "ok" and r.per_problem:
                best = [min(a, b) for a, b in zip(best, r.per_problem)]
        progress and progress.step(1, detail=f"best {_geomean(best) * 1e3:.4g} ms")
    extras = [(combined_best(tunable, device, default, results),
               "combination of the best single-parameter changes")]
    prev = None
    if previous is not None:
        want = _freeze({**default.params, **previous})
        prev = next((r for r in results if _freeze(r.params) == want), None)
        if prev is None and _allowed(tunable, device, {**default.params, **previous}):
            extras.append(({**default.params, **previous}, "the previous winner"))
    for params, why in extras:
        if params is None or any(_freeze(r.params) == _freeze(params) for r in results):
            continue
        r = Result(params, message=why)
        results.append(r)
        if why == "the previous winner":
            prev = r
        run.check(r, reference)
        if r.status == "pending":
            run.time(r, best)
    ok = sorted((r for r in results if r.status == "ok"), key=lambda r: r.median)
    top = ok[:settings.top]
    if default not in top:
        top.append(default)
    if prev is not None and prev.status == "ok" and prev not in top:
        top.append(prev)
    try:
        run.interleaved(top)
        rep.winner = choose(default, top, settings, prev if prev is not None and prev.status == "ok"
                            else None)
    except Exception as e:  # a launch that worked before failed now: keep the default
        rep.note = f"re-time failed ({_classify(e)[1]}); keeping the default"
        default.final = default.final if default.final is not None else default.median
        rep.winner = default
    rep.seconds = time.monotonic() - t0
    return rep


def make_entry(tunable, device, rep, quick):
    """The cache key and entry of a finished problem report."""
    space = tunable.space_for(device)
    w, d = rep.winner, rep.default
    failures = [{"params": {k: r.params.get(k) for k in space}, "status": r.status, "message": r.message}
                for r in rep.results if r.status not in ("ok", "skipped")]
    entry = {
        "params": _jsonable({k: w.params[k] for k in space if k in w.params}),
        "default_params": _jsonable({k: d.params[k] for k in space if k in d.params}),
        "time_s": w.best_time, "default_time_s": d.best_time, "speedup": rep.speedup,
        "cv": w.final_cv, "op": tunable.op, "platform": device.platform_name, "device": device.name,
        "driver": device.driver_version, "template_hash": tunable.template_hash,
        "problem": _jsonable(rep.problem), "problems": _jsonable(rep.problems or [rep.problem]),
        "bucket": rep.bucket, "counts": rep.counts(),
        "failures": failures[:20], "quick": bool(quick), "seconds": round(rep.seconds, 3),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    problem = {**tunable.problem_defaults, **rep.problem}
    key = tuning.entry_key(device, tunable.op, tunable.template_hash, problem.get("dtype"),
                           problem.get("dims"), rep.bucket)
    return key, entry


def sweep_op(tunable, device=None, quick=False, budget=None, settings=None, write=True,
             progress=True, stream=None):
    """Tune one operation on every representative problem; returns the reports.

    ``budget`` (seconds, default 60; 20 with ``quick``) bounds the sweep of the
    configurations; each finished problem is written to the cache at once
    (unless ``write`` is false).
    """
    device = as_device(device)
    settings = settings or Settings.for_mode(quick)
    budget = budget if budget is not None else (20.0 if quick else 60.0)
    start = time.monotonic()
    try:
        problems = tunable.problems_for(quick, device)
    except Exception as e:
        rep = ProblemReport(tunable.op, {}, 0, [], note=f"problems() failed: {type(e).__name__}: {e}")
        return [rep]
    groups = {}
    for p in problems:  # problems that share a cache entry are tuned together
        q = {**tunable.problem_defaults, **p}
        k = (tuning.dtype_name(q.get("dtype")), str(q.get("dims")), tuning.size_bucket(q.get("size", 1)))
        groups.setdefault(k, []).append(p)
    plans = []
    for group in groups.values():
        try:
            plans.append((group, configurations(tunable, device, group[0], quick, settings), None))
        except Exception as e:
            plans.append((group, None, f"enumerating the space failed: {type(e).__name__}: {e}"))
    bar = Progress(sum(len(c or ()) for _, c, _ in plans), tunable.op, stream=stream, enabled=progress)
    reports = []
    for i, (group, configs, err) in enumerate(plans):
        bucket = tuning.size_bucket(group[0].get("size", 1))
        if err:
            reports.append(ProblemReport(tunable.op, group[0], bucket, [], note=err, problems=group))
            continue
        left = budget - (time.monotonic() - start)
        deadline = time.monotonic() + max(0.0, left) / (len(plans) - i)
        bar.detail = f"size 2^{bucket}"
        q = {**tunable.problem_defaults, **group[0]}
        old = cache.read(warn=False).get(tuning.entry_key(
            device, tunable.op, tunable.template_hash, q.get("dtype"), q.get("dims"), bucket))
        rep = sweep_problem(tunable, device, group, deadline, quick, settings, bar, configs,
                            previous=old["params"] if old else None)
        if rep.winner is not None:
            rep.key, rep.entry = make_entry(tunable, device, rep, quick)
            if write:
                cache.update({rep.key: rep.entry})
        reports.append(rep)
    bar.close(detail=f"done in {time.monotonic() - start:.1f}s")
    return reports


def default_budget(n_ops, quick=False):
    """Seconds per operation when none is given: 130 s over all of them,
    clamped to 10..60 s each (a third of that with ``quick``). The default
    and the final re-time run outside the budget."""
    b = min(60.0, max(10.0, 130.0 / max(n_ops, 1)))
    return b / 3 if quick else b


def run(device=None, ops=None, quick=False, budget=None, settings=None, write=True,
        progress=True, stream=None):
    """Tune the selected operations (default: all registered) on ``device``."""
    device = as_device(device)
    tuning.load_families(benchmarks=True)
    selected = tuning.select_ops(ops)
    budget = budget if budget is not None else default_budget(len(selected), quick)
    reports = []
    for t in selected:
        reports.extend(sweep_op(t, device, quick, budget, settings, write, progress, stream))
    return reports


def summary(reports):
    """A tabulate table: operation, size bucket, best configuration, time, speedup."""
    from tabulate import tabulate

    rows = []
    for r in reports:
        c = r.counts()
        tried = f"{c.get('ok', 0)}/{len(r.results)}"
        bad = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k not in ("ok",))
        if r.winner is None:
            rows.append([r.op, f"2^{r.bucket}", "-", "-", "-", "-", tried, r.note or bad])
            continue
        w = r.winner
        changed = {k: v for k, v in w.params.items() if r.default.params.get(k) != v}
        best = "(default)" if w is r.default else fmt_params(changed)
        rows.append([r.op, f"2^{r.bucket}", best, f"{w.best_time * 1e3:.4g}",
                     f"{r.default.best_time * 1e3:.4g}", f"{r.speedup:.2f}x", tried,
                     "; ".join(x for x in (bad, r.note) if x)])
    return tabulate(rows, headers=["op", "size", "best config (vs default)", "ms", "default ms",
                                   "speedup", "ok/tried", "notes"])
