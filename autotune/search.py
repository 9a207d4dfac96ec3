"""Which configurations to try, and at which sizes.

* :func:`configurations`: the candidate list of one problem group (the default
  first; the whole restricted space when it fits the limit, else the
  one-parameter neighbours of the default and a deterministic sample);
* :func:`combined_best`: the default with each parameter at its best
  single-parameter value (one more candidate after the first rung);
* :func:`schedule` and :func:`proxy_problem`: the successive-halving rungs.
  Every candidate is timed on a PROXY of the group's problems (the same
  problems with ``size`` divided by ``size_step`` per rung below full size);
  each rung keeps the fastest ``1/eta`` (at least ``full_keep``) for the next,
  larger size; the last rung is the full size. A proxy on which the default
  runs too fast to time (``proxy_min_time``) is skipped. The winner is chosen only among
  configurations timed at full size (see :mod:`clkernels.autotune.sweep`).
"""

import dataclasses
import itertools
import math
import random


@dataclasses.dataclass
class Settings:
    """Knobs of a sweep (times in seconds)."""
    warmup: int = 2
    repeats: int = 7
    cv_limit: float = 0.05
    retimes: int = 2
    slow_factor: float = 3.0
    top: int = 3                 # re-timed interleaved with the default at full size
    rounds: int = 7
    min_gain: float = 0.01
    max_configs: int = 256
    quick_configs: int = 16
    eta: int = 4                 # each rung keeps 1/eta of the last one's candidates
    size_step: int = 4           # each rung below full size divides "size" by this
    max_rungs: int = 4           # rungs in all, the full size included
    full_keep: int = 6           # at least this many reach the full size
    proxy_min_size: int = 1024   # no proxy rung below this size
    proxy_min_time: float = 20e-6  # a proxy rung where the default runs faster is dropped
    config_timeout: float = 60.0  # per configuration and rung: build + runs
    time_cap: float = 1.0        # long runs: fewer samples (at least 3) past this many seconds

    def samples(self, seconds):
        """Timing samples for a run of ``seconds``: ``repeats``, fewer (at least
        3) when they would take more than ``time_cap``."""
        return max(3, min(self.repeats, int(self.time_cap / max(seconds, 1e-9))))

    @classmethod
    def for_mode(cls, quick, **overrides):
        base = cls(warmup=1, repeats=5, rounds=5, retimes=1) if quick else cls()
        return dataclasses.replace(base, **overrides)


def freeze(params):
    """A hashable, order-free form of a parameter dict."""
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def is_allowed(tunable, device, params):
    """The op's restriction (its plan's validation); raising counts as no."""
    try:
        return bool(tunable.restrict(params, device))
    except Exception:
        return False


def space_points(tunable, device):
    """How many points the op's space has (before restriction)."""
    return math.prod(max(1, len(v)) for v in tunable.space_for(device).values())


def configurations(tunable, device, problem, quick=False, settings=None):
    """The configurations to try, the default first.

    When the whole space (defaults overlaid with each point, restricted,
    deduplicated) fits the limit (``quick_configs`` / ``max_configs``), all
    of it. Otherwise the one-parameter-at-a-time neighbours of the default
    first, then a deterministic random sample of the rest (a cut keeps the
    neighbours first: they are the most informative). The sample depends on
    the op only, so the groups of an op share candidates (and builds).
    """
    settings = settings or Settings()
    default = dict(tunable.default(device, problem))
    space = tunable.space_for(device)
    names = sorted(space)
    limit = settings.quick_configs if quick else settings.max_configs
    total = math.prod(max(1, len(space[n])) for n in names)
    seen, out = {freeze(default)}, [default]

    def add(p):
        f = freeze(p)
        if f not in seen and is_allowed(tunable, device, p):
            seen.add(f)
            out.append(p)
    if total <= 4 * limit:
        for combo in itertools.product(*(space[n] for n in names)):
            add({**default, **dict(zip(names, combo))})
    else:
        for n in names:  # neighbours of the default, one parameter at a time
            for v in space[n]:
                add({**default, n: v})
        rng = random.Random(tunable.op)   # one sample for every group: builds are shared
        tries = 0
        while len(out) < 2 * limit and tries < 50 * limit:
            tries += 1
            add({**default, **{n: rng.choice(space[n]) for n in names if space[n]}})
    rest = out[1:]
    single = [p for p in rest if sum(p.get(k) != default.get(k) for k in names) <= 1]
    multi = [p for p in rest if sum(p.get(k) != default.get(k) for k in names) > 1]
    rest = single + multi
    if len(rest) >= limit:
        rng = random.Random(f"{tunable.op}|sample")
        if len(single) >= limit - 1:
            keep = sorted(rng.sample(range(len(single)), limit - 1))
            rest = [single[i] for i in keep]
        else:
            keep = sorted(rng.sample(range(len(multi)), limit - 1 - len(single)))
            rest = single + [multi[i] for i in keep]
    return [default] + rest


def combined_best(tunable, device, default, results):
    """The default with each parameter set to its best value among the timed
    one-parameter neighbours (None if that adds nothing). ``results`` are
    :class:`~clkernels.autotune.runner.Result` s timed on the same problems
    as ``default``."""
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
    tried = {freeze(r.params) for r in results}
    if freeze(p) in tried or not is_allowed(tunable, device, p):
        return None
    return p


@dataclasses.dataclass(frozen=True)
class Rung:
    """One size of the schedule: ``divisor`` of the full size (1 = full) and
    how many candidates it times (``keep``: None = all of them)."""
    divisor: int
    keep: int = None

    @property
    def is_full(self):
        return self.divisor == 1


def schedule(n_candidates, size, settings):
    """The successive-halving rungs for ``n_candidates`` on a problem of
    ``size``, smallest first; the last is the full size.

    As many proxy rungs as it takes to bring ``n_candidates`` down to
    ``full_keep`` by factors of ``eta`` (at most ``max_rungs`` rungs in all),
    each ``size_step`` times smaller than the next, none under
    ``proxy_min_size``. A small candidate list or problem: one rung, the full
    size (every candidate timed there). The sweep also drops a proxy rung on
    which the default configuration runs in less than ``proxy_min_time``
    (too short to time: launch overhead would rank the candidates).
    """
    eta, step, keep = max(2, settings.eta), max(2, settings.size_step), max(1, settings.full_keep)
    n = max(1, n_candidates)
    halvings = 0
    while math.ceil(n / eta ** halvings) > keep and halvings + 1 < settings.max_rungs:
        halvings += 1
    size = int(size or 1)
    while halvings and size // step ** halvings < settings.proxy_min_size:
        halvings -= 1
    return [Rung(step ** (halvings - r), None if r == 0 else max(keep, math.ceil(n / eta ** r)))
            for r in range(halvings + 1)]


def proxy_problem(problem, divisor):
    """``problem`` with its ``size`` divided by ``divisor`` (a multiple of 64
    where it is at least 64, so that byte sizes stay aligned)."""
    if divisor == 1 or "size" not in problem:
        return dict(problem)
    s = max(1, int(problem["size"]) // divisor)
    if s >= 64:
        s -= s % 64
    return {**problem, "size": s}
