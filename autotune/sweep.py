"""The sweep: every candidate configuration of an operation, built, checked,
timed on proxies, the best few at full size.

For each registered operation (:class:`clkernels.host.core.tuning.Tunable`)
its representative problems are grouped by cache entry (same dtype, dims and
log2 size bucket; e.g. one size under several length distributions). Per group:

1. the candidates (:func:`~clkernels.autotune.search.configurations`: the
   default first, restricted by the plan's validation) and the
   successive-halving schedule (:func:`~clkernels.autotune.search.schedule`):
   rungs of growing size, the last the full size;
2. first rung: every candidate is built and pruned, run once per problem and
   checked EXACTLY against the default configuration's output on the same
   problem, then timed with profiling events (see
   :mod:`clkernels.autotune.runner`); the groups of an op take turns, so each
   configuration is built once and run on every group's proxy while its
   program is fresh (builds are memoized per parameters: the proxy and
   full-size runs share them). Then the combination of the best
   single-parameter changes and the previous winner join;
3. each later rung re-checks and times the fastest ``1/eta`` of the last one
   (at least ``full_keep``; the default always, as the reference; the
   previous winner always) at a larger size; a configuration that failed or
   timed out at a smaller size is never tried at a larger one;
4. at full size the ``top`` fastest, the default and the previous winner are
   re-timed interleaved (``rounds`` rounds); the winner is the fastest unless
   it beats the default by less than the noise (max(``min_gain``, the measured
   CVs), at most ``MAX_NOISE``): then the default stays; the previous winner is kept while it is
   within the noise (at least 2%) of the fastest (hysteresis, :func:`choose`).
   The winner is only ever chosen from these full-size, interleaved times;
5. the winner goes to the cache at once (one entry per group, merged
   atomically under the cache lock, :mod:`clkernels.autotune.cache`), with the
   default's time, the speedup, the problems (for ``--verify``), the coverage
   and the recorded failures.

Every failure is a typed status (``build_error``, ``pruned``,
``launch_error``, ``wrong``, ``error``, ``timeout``, ``skipped``) and the sweep
goes on. The time budget of an op bounds the first rung and the later ones:
the default runs at the first and the full size before the other candidates,
and the cost of the later rungs and of the final re-time estimated from its
two times is reserved (the first rung gets at least ``MIN_FIRST_SHARE`` of
the budget); the default, the previous winner, the ``top`` fastest at each
later rung and the final re-time always run. :func:`run` shares the total
budget by candidate count and hands the unused part of an op's share on to
the next ops (an overrun never shortens their shares); builds run ahead in
worker processes where there are spare cores
(:mod:`clkernels.autotune.prebuild`), and then ops with a ``kernels`` hook
(built by the workers while the sweep works on the others) go last.
"""

import dataclasses
import datetime
import time

from ..host.core import tuning
from ..host.core.device import as_device
from . import cache, search
from .prebuild import Prebuilder, default_jobs
from .report import ProblemReport, Progress, jsonable
from .runner import Result, Runner, classify, geomean
from .search import Settings

MIN_FIRST_SHARE = 0.3   # of an op's budget, for the first rung at least
#: the noise a winner must beat the default by is at most this: the CVs of a
#: loaded machine's repeats reach 0.3-0.8 (one descheduled repeat), which would
#: keep a default 30x slower by its best time
MAX_NOISE = 0.5


def choose(default, ok, settings, previous=None):
    """The winner among re-timed results: the fastest, unless its gain over the
    default is within the noise (the measured CVs, at most MAX_NOISE; then the
    default). Hysteresis for stable reruns: the ``previous`` winner (from the
    cache) is kept while it is within the noise (at least 2%) of the fastest."""
    best = min(ok, key=lambda r: r.best_time)
    noise = min(MAX_NOISE, max(settings.min_gain, default.final_cv or 0.0, best.final_cv or 0.0))
    if best is not default and best.best_time >= default.best_time * (1.0 - noise):
        best = default
    if previous is not None and previous in ok and previous is not best:
        pnoise = max(0.02, previous.final_cv or 0.0, best.final_cv or 0.0)
        if previous.best_time <= best.best_time * (1.0 + pnoise) and (
                previous is default or previous.best_time < default.best_time * (1.0 - noise)):
            return previous
    return best


class Group:
    """One cache entry's sweep: its problems, candidates, rungs and results."""

    def __init__(self, tunable, device, problems, configs, settings, prebuilt=None, previous=None):
        self.t, self.device, self.s, self.prebuilt = tunable, device, settings, prebuilt
        self.problems = list(problems)
        first = self.problems[0]
        self.results = [Result(dict(p), is_default=(i == 0)) for i, p in enumerate(configs)]
        self.default = self.results[0]
        self.rungs = search.schedule(len(self.results), first.get("size", 1), settings)
        self.report = ProblemReport(tunable.op, first, tuning.size_bucket(first.get("size", 1)),
                                    self.results, default=self.default, problems=self.problems)
        self._sizes()
        self.previous = None
        if previous is not None:
            want = {**self.default.params, **previous}
            self.previous = next((r for r in self.results if search.freeze(r.params) == search.freeze(want)),
                                 None)
            if self.previous is None and search.is_allowed(tunable, device, want):
                self.previous = self.add(want, "the previous winner")
        self._runners, self._refs, self._best, self._dflt = {}, {}, {}, {}
        self.failed = False

    def _sizes(self):
        self.report.rungs = [search.proxy_problem(self.problems[0], g.divisor).get("size") for g in self.rungs]

    def add(self, params, why):
        r = Result(dict(params), message=why)
        self.results.append(r)
        return r

    def _runner(self, k):
        if k not in self._runners:
            states = [self.t.setup(self.device, search.proxy_problem(p, self.rungs[k].divisor))
                      for p in self.problems]
            self._runners[k] = Runner(self.t, self.device, states, self.s, self.prebuilt,
                                      proxy=not self.rungs[k].is_full)
        return self._runners[k]

    def release(self, k):
        self._runners.pop(k, None)
        self._refs.pop(k, None)

    def start(self, k=0):
        """Set up rung ``k`` and run the default there (the reference); False
        (with the group failed) when either fails."""
        if k in self._refs:
            return True
        d = self.default
        try:
            run = self._runner(k)
        except Exception as e:
            msg = f"setup failed: {type(e).__name__}: {e}"[:300]
            self.report.note = msg
            d.fail("error", msg)
            return self._fail_all()
        d.status = "pending"
        ref = run.check(d, None)
        if d.status == "pending":
            run.time(d, None)
        self._mark(d, k)
        if d.status != "ok":
            self.report.note = f"default configuration failed ({d.status}: {d.message})"
            return self._fail_all()
        if k == 0 and not self.rungs[0].is_full and d.median < self.s.proxy_min_time:
            self.release(0)             # too fast to time: the next size is the first rung
            self.rungs = [search.Rung(self.rungs[1].divisor)] + self.rungs[2:]
            self._sizes()
            d.at_proxy, d.proxy_median = len(self.rungs) > 1, None
            return self.start(0)
        self._refs[k], self._best[k] = ref, list(d.per_problem)
        self._dflt[k] = (d.median, d.cv, d.times, d.per_problem)
        return True

    def reserve(self):
        """Estimated seconds of the later rungs and the final re-time, from the
        default's times at the first and the full size (interpolated
        geometrically between them); 0 before both ran."""
        last = len(self.rungs) - 1
        if last == 0 or 0 not in self._dflt or last not in self._dflt:
            return 0.0
        t0, tf, n = self._dflt[0][0], self._dflt[last][0], len(self.problems)
        total = 0.0
        for k in range(1, last + 1):
            tk = t0 * (tf / t0) ** (k / last)
            total += self.rungs[k].keep * n * (2 + self.s.warmup + self.s.samples(tk)) * (tk + 2e-3)
        rounds = max(3, min(self.s.rounds, int(4 * self.s.time_cap / ((self.s.top + 2) * tf))))
        return total + (self.s.top + 2) * (rounds + 1) * n * (tf + 2e-3)

    def _fail_all(self):
        self.failed = True
        for r in self.results[1:]:
            if r.status == "pending":
                r.fail("skipped", "the default configuration failed")
        return False

    def _mark(self, r, k):
        rung = self.rungs[k]
        r.rung = max(r.rung, k) if r.is_default else k
        r.size = self.report.rungs[k]
        r.at_full = r.at_full or rung.is_full
        r.at_proxy = r.at_proxy or not rung.is_full
        if k == 0 and not rung.is_full and r.status == "ok":
            r.proxy_median = r.median

    def evaluate(self, r, k):
        """Check and time ``r`` at rung ``k`` (the default ran there first)."""
        if r.is_default:
            return self.start(k)
        if not self.start(k):
            return False
        run = self._runner(k)
        r.status = "pending"
        run.check(r, self._refs[k])
        if r.status == "pending":   # no cut-off at proxy sizes: their ranking decides promotions
            run.time(r, self._best[k] if self.rungs[k].is_full else None)
            if r.status == "ok" and r.per_problem:
                self._best[k] = [min(a, b) for a, b in zip(self._best[k], r.per_problem)]
        self._mark(r, k)
        return r.status == "ok"

    def default_time(self, k):
        """The default's time at rung ``k`` (None before it ran there)."""
        return self._dflt[k][0] if k in self._dflt else None

    def ranked(self, k):
        """Results timed OK at rung ``k``, fastest first (those cut off as slow
        after one sample rank by it: they are behind every other one)."""
        return sorted((r for r in self.results if r.status == "ok" and r.rung == k),
                      key=lambda r: (r.message.startswith("slow"), r.median))

    def detail(self, k):
        """Progress text: the size of rung ``k`` and the best time there."""
        best = self._best.get(k)
        return f"size {self.report.rungs[k]} best {geomean(best) * 1e3:.4g} ms" if best else ""

    def finish(self):
        """The interleaved full-size re-time and the choice; fills the report."""
        k = len(self.rungs) - 1
        d, rep = self.default, self.report
        d.median, d.cv, d.times, d.per_problem = self._dflt[k]   # its full-size times
        d.size = rep.rungs[k]
        ok = [r for r in self.ranked(k) if not r.is_default]
        top = ok[:self.s.top] + [d]
        prev = self.previous if self.previous is not None and self.previous.status == "ok" \
            and self.previous.at_full else None
        if prev is not None and prev not in top:
            top.append(prev)
        try:
            self._runner(k).interleaved(top)
            rep.winner = choose(d, top, self.s, prev)
        except Exception as e:  # a launch that worked before failed now: keep the default
            rep.note = f"re-time failed ({classify(e)[1]}); keeping the default"
            d.final = d.final if d.final is not None else d.median
            rep.winner = d
        for j in list(self._runners):
            self.release(j)


def plan_op(tunable, device, quick=False, settings=None):
    """(groups, error): the op's problems grouped by cache entry, each with its
    candidate configurations, or an error text."""
    settings = settings or Settings.for_mode(quick)
    try:
        problems = tunable.problems_for(quick, device)
    except Exception as e:
        return [], f"problems() failed: {type(e).__name__}: {e}"
    groups = {}
    for p in problems:  # problems that share a cache entry are tuned together
        q = {**tunable.problem_defaults, **p}
        k = (tuning.dtype_name(q.get("dtype")), str(q.get("dims")), tuning.size_bucket(q.get("size", 1)))
        groups.setdefault(k, []).append(p)
    out = []
    for group in groups.values():
        try:
            out.append((group, search.configurations(tunable, device, group[0], quick, settings), None))
        except Exception as e:
            out.append((group, None, f"enumerating the space failed: {type(e).__name__}: {e}"))
    return out, None


def _entry_key(tunable, device, problem, bucket):
    q = {**tunable.problem_defaults, **problem}
    return tuning.entry_key(device, tunable.op, tunable.template_hash, q.get("dtype"), q.get("dims"), bucket)


def sweep_op(tunable, device=None, quick=False, budget=None, settings=None, write=True,
             progress=True, stream=None, plan=None, prebuilt=None):
    """Tune one operation on every representative problem; returns the reports
    (one :class:`~clkernels.autotune.report.ProblemReport` per cache entry).

    ``budget`` (seconds, default 60; 20 with ``quick``) bounds the sweep of the
    candidates (see the module docstring); each finished group is written to
    the cache at once (unless ``write`` is false). ``plan``: the result of
    :func:`plan_op`; ``prebuilt``: a :class:`~clkernels.autotune.prebuild.Prebuilder`.
    """
    device = as_device(device)
    settings = settings or Settings.for_mode(quick)
    budget = budget if budget is not None else (20.0 if quick else 60.0)
    start = time.monotonic()
    groups, err = plan if plan is not None else plan_op(tunable, device, quick, settings)
    if err:
        return [ProblemReport(tunable.op, {}, 0, [], note=err)]
    old = cache.read(warn=False)
    reports, live = [], []
    for problems, configs, gerr in groups:
        bucket = tuning.size_bucket(problems[0].get("size", 1))
        if gerr:
            reports.append(ProblemReport(tunable.op, problems[0], bucket, [], note=gerr, problems=problems))
            continue
        prev = old.get(_entry_key(tunable, device, problems[0], bucket))
        g = Group(tunable, device, problems, configs, settings, prebuilt, prev["params"] if prev else None)
        live.append(g)
        reports.append(g.report)
    planned = sum(len(g.results) + sum(r.keep or 0 for r in g.rungs[1:]) for g in live)
    bar = Progress(planned, tunable.op, stream=stream, enabled=progress)

    # rung 0: the groups take turns, candidate by candidate (one build, every group)
    for g in live:
        g.start(0)
        bar.step(1)
    for g in live:                   # the default at full size: the cost of the later rungs
        if not g.failed:
            g.start(len(g.rungs) - 1)
    reserve = sum(g.reserve() for g in live if not g.failed)
    # the budget counts from here: the defaults (and the problems' setup) run
    # outside it, as the module says; counted from the start, an op whose setup
    # and defaults took its whole share (the cell grid's pair listing) had
    # evaluated one candidate
    begin = time.monotonic()
    deadline0 = begin + max(budget * MIN_FIRST_SHARE, budget - reserve)
    deadline = begin + budget
    for i in range(1, max((len(g.results) for g in live), default=0)):
        for g in live:
            if i >= len(g.results) or g.failed:
                continue
            r = g.results[i]
            if time.monotonic() > deadline0 and r is not g.previous:
                r.fail("skipped", "time budget spent")
            else:
                g.evaluate(r, 0)
            bar.step(1, detail=g.detail(0))
    for g in live:
        if g.failed:
            continue
        d0 = dataclasses.replace(g.default, median=g.default_time(0))
        combo = search.combined_best(tunable, device, d0, [r for r in g.results if r.rung == 0])
        if combo is not None and not any(search.freeze(r.params) == search.freeze(combo) for r in g.results):
            g.evaluate(g.add(combo, "combination of the best single-parameter changes"), 0)
        if g.previous is not None and g.previous.status == "pending":
            g.evaluate(g.previous, 0)

    # later rungs: the fastest fraction, at growing sizes; then the full-size re-time
    for g in live:
        if not g.failed:
            for k in range(1, len(g.rungs)):
                ranked = [r for r in g.ranked(k - 1) if not r.is_default]
                keep = ranked[:g.rungs[k].keep]
                if g.previous is not None and g.previous.status == "ok" and g.previous not in keep \
                        and not g.previous.is_default:
                    keep.append(g.previous)
                if not g.start(k):
                    break
                for j, r in enumerate(keep):
                    if time.monotonic() > deadline and j >= settings.top and r is not g.previous:
                        r.message = "not promoted: time budget spent"
                        continue
                    g.evaluate(r, k)
                    bar.step(1, detail=g.detail(k))
                g.release(k - 1)
        if not g.failed:
            g.finish()
        g.report.seconds = time.monotonic() - start
        if g.report.winner is not None:
            g.report.key, g.report.entry = make_entry(tunable, device, g.report, quick)
            if write:
                cache.update({g.report.key: g.report.entry})
    bar.close(detail=f"done in {time.monotonic() - start:.1f}s")
    return reports


def sweep_problem(tunable, device, problem, deadline, quick=False, settings=None):
    """Tune ``tunable`` on one problem (or a list sharing a cache entry) with
    a deadline (``time.monotonic()`` seconds); returns its report (no cache write)."""
    problems = list(problem) if isinstance(problem, (list, tuple)) else [problem]
    settings = settings or Settings.for_mode(quick)
    configs = search.configurations(tunable, device, problems[0], quick, settings)
    rep, = sweep_op(tunable, device, quick, max(0.0, deadline - time.monotonic()), settings, write=False,
                    progress=False, plan=([(problems, configs, None)], None))
    return rep


def make_entry(tunable, device, rep, quick):
    """The cache key and entry of a finished problem report."""
    space = tunable.space_for(device)
    w, d = rep.winner, rep.default
    failures = [{"params": {k: r.params.get(k) for k in space}, "status": r.status, "message": r.message}
                for r in rep.results if r.failed]
    entry = {
        "params": jsonable({k: w.params[k] for k in space if k in w.params}),
        "default_params": jsonable({k: d.params[k] for k in space if k in d.params}),
        "time_s": w.best_time, "default_time_s": d.best_time, "speedup": rep.speedup,
        "cv": w.final_cv, "op": tunable.op, "platform": device.platform_name, "device": device.name,
        "driver": device.driver_version, "template_hash": tunable.template_hash,
        "problem": jsonable(rep.problem), "problems": jsonable(rep.problems or [rep.problem]),
        "bucket": rep.bucket, "counts": rep.counts(), "coverage": rep.coverage(),
        "failures": failures[:20], "quick": bool(quick), "seconds": round(rep.seconds, 3),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    return _entry_key(tunable, device, rep.problem, rep.bucket), entry


def interleave(lists):
    """The items of ``lists`` taken in turns (the first of each, the second
    of each, ...): the order in which the first rung meets configurations."""
    return [x[i] for i in range(max(map(len, lists), default=0)) for x in lists if i < len(x)]


def default_budget(n_ops, quick=False):
    """Seconds per operation when none is given: 130 s over all of them,
    clamped to 10..60 s each (a third of that with ``quick``). The default,
    the guaranteed promotions and the final re-time run outside the budget."""
    b = min(60.0, max(10.0, 130.0 / max(n_ops, 1)))
    return b / 3 if quick else b


def run(device=None, ops=None, quick=False, budget=None, settings=None, write=True,
        progress=True, stream=None, jobs=None, modules=(), selected=None):
    """Tune the selected operations (default: every registered one with a
    benchmark) on ``device``; returns the reports.

    ``budget``: seconds per op on average (default :func:`default_budget`);
    each op's share of the total is proportional to its number of distinct
    candidates (at least 10 s, a third with ``quick``, or ``budget`` if less),
    plus what the ops before it left unused. ``jobs``: prebuild
    workers (default :func:`~clkernels.autotune.prebuild.default_jobs`; 0: none).
    """
    device = as_device(device)
    settings = settings or Settings.for_mode(quick)
    if selected is None:
        tuning.load_families(modules, benchmarks=True)
        selected = [t for t in tuning.select_ops(ops) if t.has_benchmark]
    per_op = budget if budget is not None else default_budget(len(selected), quick)
    jobs = default_jobs(device) if jobs is None else jobs
    plans = [(t, plan_op(t, device, quick, settings)) for t in selected]
    if jobs:                         # ops built by a launch first: the workers run ahead of the sweep
        plans.sort(key=lambda tp: tp[0].kernels is not None)
    weight = {t.op: max(1, len({search.freeze(c) for _, cs, _ in p[0] for c in cs or ()})) for t, p in plans}
    total, carry, reports = per_op * len(plans), 0.0, []
    with Prebuilder(device, jobs, modules) as pre:
        for t, (groups, _) in plans:     # queued in the order the sweep needs them
            cs = [g for g in groups if g[1]]
            if cs:
                pre.submit(t, interleave([c for _, c, _ in cs]), cs[0][0][0])
        # proportional to the candidates, but never below the documented 10 s
        # (a third with --quick): an op of 12 candidates got 1.9 s of 130 and
        # had evaluated one when its setup and the default had run
        floor = min(per_op, 10.0 / (3 if quick else 1))
        for t, plan in plans:
            share = max(floor, total * weight[t.op] / sum(weight.values())) + carry
            t0 = time.monotonic()
            reports.extend(sweep_op(t, device, quick, share, settings, write, progress, stream,
                                    plan=plan, prebuilt=pre if pre.pool is not None else None))
            carry = max(0.0, share - (time.monotonic() - t0))
    return reports
