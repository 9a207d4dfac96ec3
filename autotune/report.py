"""What a sweep tells: the progress bar, the per-group reports, the summary
tables (per cache entry and per op, with how much of the valid space was
evaluated), the JSON report and the comparison of several JSON reports."""

import dataclasses
import json
import sys
import time

import numpy as np

from .search import freeze


def fmt_params(params):
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "-"


def jsonable(v):
    """``v`` with numpy scalars, dtypes and other objects made JSON-able."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


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
        if detail:
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


@dataclasses.dataclass
class ProblemReport:
    """The sweep of one cache entry (an op's problem group)."""
    op: str
    problem: dict
    bucket: int
    results: list
    default: object = None
    winner: object = None
    entry: dict = None
    key: str = None
    note: str = ""
    seconds: float = 0.0
    problems: list = None         # the group of problems sharing this entry
    rungs: list = None            # the schedule's sizes (of the first problem), the full one last

    def counts(self):
        """Configurations per final status."""
        c = {}
        for r in self.results:
            c[r.status] = c.get(r.status, 0) + 1
        return c

    def coverage(self):
        """How much of the candidate list was evaluated: ``valid`` (the
        candidates: restricted configurations of the space, or its sample for
        large spaces, plus the extras), ``evaluated`` (built or run at some
        size: any status but skipped), ``proxy`` (evaluated at a size below
        full), ``full`` (evaluated at full size) and ``rungs`` (the sizes)."""
        return {"valid": len(self.results),
                "evaluated": sum(1 for r in self.results if r.at_proxy or r.at_full),
                "proxy": sum(1 for r in self.results if r.at_proxy),
                "full": sum(1 for r in self.results if r.at_full),
                "rungs": list(self.rungs or [])}

    @property
    def speedup(self):
        if self.winner is None or self.default is None or not self.winner.best_time:
            return None
        return self.default.best_time / self.winner.best_time


def op_totals(reports):
    """Per op: groups, distinct valid / evaluated / proxy / full
    configurations over its groups, the geometric-mean speedup of the winners
    over the defaults, and seconds."""
    out = {}
    for r in reports:
        o = out.setdefault(r.op, {"groups": 0, "sets": ({}, set(), set(), set()), "speedups": [],
                                  "seconds": 0.0, "notes": []})
        o["groups"] += 1
        o["seconds"] = max(o["seconds"], r.seconds)
        valid, ev, px, fu = o["sets"]
        for x in r.results:
            f = freeze(x.params)
            valid[f] = True
            if x.at_proxy or x.at_full:
                ev.add(f)
            if x.at_proxy:
                px.add(f)
            if x.at_full:
                fu.add(f)
        if r.speedup:
            o["speedups"].append(r.speedup)
        if r.note:
            o["notes"].append(r.note)
    for o in out.values():
        valid, ev, px, fu = o.pop("sets")
        sp = o.pop("speedups")
        o.update(valid=len(valid), evaluated=len(ev), proxy=len(px), full=len(fu),
                 speedup=float(np.exp(np.mean(np.log(sp)))) if sp else None)
    return out


def summary(reports):
    """Two tabulate tables: per cache entry (best configuration, times,
    speedup, coverage) and per op (coverage over its groups, speedup)."""
    from tabulate import tabulate

    rows = []
    for r in reports:
        c, cov = r.counts(), r.coverage()
        bad = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "ok")
        sizes = "/".join(str(s) for s in cov["rungs"]) or "-"
        cells = [cov["valid"], cov["proxy"], cov["full"], sizes]
        if r.winner is None:
            rows.append([r.op, f"2^{r.bucket}", "-", "-", "-", "-", *cells, r.note or bad])
            continue
        w = r.winner
        changed = {k: v for k, v in w.params.items() if r.default.params.get(k) != v}
        best = "(default)" if w is r.default else fmt_params(changed)
        rows.append([r.op, f"2^{r.bucket}", best, f"{w.best_time * 1e3:.4g}",
                     f"{r.default.best_time * 1e3:.4g}", f"{r.speedup:.2f}x", *cells,
                     "; ".join(x for x in (bad, r.note) if x)])
    text = tabulate(rows, headers=["op", "size", "best config (vs default)", "ms", "default ms", "speedup",
                                   "valid", "@proxy", "@full", "sizes", "notes"])
    ops = []
    for op, o in op_totals(reports).items():
        share = f"{o['evaluated'] / o['valid']:.0%}" if o["valid"] else "-"
        ops.append([op, o["groups"], o["valid"], f"{o['evaluated']} ({share})", o["proxy"], o["full"],
                    f"{o['speedup']:.2f}x" if o["speedup"] else "-", f"{o['seconds']:.1f}"])
    return text + "\n\n" + tabulate(ops, headers=["op", "groups", "valid configs", "evaluated",
                                                  "@proxy", "@full", "speedup (geomean)", "seconds"])


def report_json(device, reports, seconds):
    """The JSON report of a sweep (``autotune --json``)."""
    rows = []
    for r in reports:
        w = r.winner
        rows.append({
            "op": r.op, "bucket": r.bucket, "note": r.note, "counts": r.counts(), "coverage": r.coverage(),
            "winner": jsonable(w.params) if w else None,
            "winner_is_default": bool(w is not None and w is r.default),
            "time_s": w.best_time if w else None,
            "default_time_s": r.default.best_time if w else None,
            "speedup": r.speedup, "seconds": r.seconds})
    return {"device": device.name, "driver": device.driver_version, "seconds": seconds,
            "ops": op_totals(reports), "reports": rows}


def write_json(path, device, reports, seconds):
    with open(path, "w") as f:
        json.dump(report_json(device, reports, seconds), f, indent=1)


def load_report(path):
    """A JSON report written by ``--json`` (ValueError when it is not one)."""
    with open(path) as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path} is not JSON: {e}") from None
    ok = isinstance(data, dict) and isinstance(data.get("reports"), list) and all(
        isinstance(r, dict) and {"op", "bucket", "winner", "speedup"} <= set(r) for r in data["reports"])
    if not ok:
        raise ValueError(f"{path} is not an autotune --json report")
    return data


def compare(files):
    """Winner stability over runs (same winner, or its speedup over the
    default within 2%) and the targets (never slower than the default, >= 10%
    faster on a third). Returns the text."""
    from tabulate import tabulate

    runs = [load_report(fn) for fn in files]
    keys = sorted({(r["op"], r["bucket"]) for run in runs for r in run["reports"]})
    rows, stable, fast, slower = [], 0, 0, 0
    for op, b in keys:
        got = [next((r for r in run["reports"] if (r["op"], r["bucket"]) == (op, b)), None) for run in runs]
        got = [g for g in got if g and g["winner"] is not None]
        if not got:
            rows.append([op, f"2^{b}", "-", "-", "-", "no result"])
            continue
        winners = {json.dumps(g["winner"], sort_keys=True) for g in got}
        # winners differ: stable if their speedups over the default (measured in
        # the same run, so machine drift cancels) are within 2% of each other
        sp = [g["speedup"] or 1.0 for g in got]
        spread = max(sp) / min(sp) - 1
        ok = len(winners) == 1 or spread <= 0.02
        stable += ok
        fast += min(sp) >= 1.10
        slower += min(sp) < 0.98
        rows.append([op, f"2^{b}", len(winners), f"{spread:.1%}", " ".join(f"{x:.2f}x" for x in sp),
                     "stable" if ok else "FLIPS"])
    return "\n".join([
        tabulate(rows, headers=["op", "size", "distinct winners", "speedup spread", "speedups", "verdict"]),
        f"runs: {len(runs)}; wall seconds: " + ", ".join(f"{r.get('seconds', 0):.0f}" for r in runs),
        f"stable: {stable}/{len(keys)}; >= 10% faster than default in every run: {fast}/{len(keys)}; "
        f"slower than default (< 0.98x) in some run: {slower}"])
