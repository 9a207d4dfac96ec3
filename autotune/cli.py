"""The ``autotune`` command (also ``python -m clkernels.autotune``).

    autotune                        tune every operation on the default device
    autotune --ops twobody,copy     only these (an op name or a family prefix)
    autotune --quick                fewer sizes and candidates
    autotune --budget 30            seconds per operation (default 130 s / #ops, 10..60)
    autotune --device nvidia        a device spec (name substring or platform:device)
    autotune --list                 the registered operations and their spaces
    autotune --show                 the cache's entries (with --device/--ops: those)
    autotune --verify               re-time the cached winners against the defaults
    autotune --clear                delete the cache (with --device/--ops: those entries)
    autotune --export FILE          write the cache (or the selected entries) to FILE
    autotune --import FILE          merge FILE's entries into the cache
    autotune --json run1.json       also write the sweep's summary as JSON
    autotune --compare r1.json,r2.json,r3.json   winner stability over runs, targets
"""

import argparse
import sys
import time

from ..host.core import tuning
from ..host.core.device import Device, as_device
from . import cache, sweep


def _parser():
    p = argparse.ArgumentParser(
        prog="autotune", description="Tune clkernels' operations for an OpenCL device and cache the winners.",
        epilog=f"cache file: {tuning.cache_path()} (CLKERNELS_TUNE_CACHE overrides)")
    p.add_argument("--device", help="device spec: a name substring or platform:device index")
    p.add_argument("--ops", help="comma-separated operations or families (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer problem sizes and candidates")
    p.add_argument("--budget", type=float,
                   help="seconds per operation (default: 130 s over all operations, 10..60 s each; "
                        "a third of that with --quick)")
    p.add_argument("--modules", help="extra comma-separated modules that register Tunables")
    act = p.add_mutually_exclusive_group()
    act.add_argument("--list", action="store_true", help="list the registered operations and spaces")
    act.add_argument("--show", action="store_true", help="show the cached entries")
    act.add_argument("--verify", action="store_true", help="re-time cached winners against the defaults")
    act.add_argument("--clear", action="store_true", help="delete the cache or the selected entries")
    act.add_argument("--export", metavar="FILE", help="write the (selected) entries to FILE")
    act.add_argument("--import", dest="import_", metavar="FILE", help="merge FILE's entries into the cache")
    act.add_argument("--compare", metavar="A.json,B.json,...",
                     help="compare the --json reports of several runs (winner stability, targets)")
    p.add_argument("--json", metavar="FILE", help="also write the sweep's summary to FILE")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def _ops(args):
    return [o.strip() for o in args.ops.split(",") if o.strip()] if args.ops else None


def _matches(args, device_name):
    ops = _ops(args)

    def pred(key, e):
        parts = tuning.split_key(key)
        if parts is None:
            return False
        if device_name is not None and parts[2] != tuning._clean(device_name):
            return False
        return not ops or any(parts[4] == o or parts[4].startswith(o + ".") for o in ops)
    return pred


def _show(args, device_name):
    from tabulate import tabulate

    pred = _matches(args, device_name)
    rows = []
    for k, e in sorted(cache.read().items()):
        if not pred(k, e):
            continue
        _, plat, dev, drv, op, th, dt, dims, b = tuning.split_key(k)
        t = tuning.REGISTRY.get(op)
        state = "?" if t is None else ("current" if t.template_hash == th else "stale")
        sp = e.get("speedup")
        rows.append([op, dev, drv, dt, dims, f"2^{b}", sweep.fmt_params(e["params"]),
                     f"{e['time_s'] * 1e3:.4g}" if isinstance(e.get("time_s"), (int, float)) else "-",
                     f"{sp:.2f}x" if isinstance(sp, (int, float)) else "-", state, e.get("created", "")])
    print(f"cache: {tuning.cache_path()} ({len(rows)} entries shown)")
    if rows:
        print(tabulate(rows, headers=["op", "device", "driver", "dtype", "dims", "size", "params", "ms",
                                      "speedup", "templates", "created"]))
    return 0


def _verify(args, device):
    """Re-time each cached winner of ``device`` against the defaults, interleaved."""
    from tabulate import tabulate

    settings = sweep.Settings.for_mode(args.quick)
    pred = _matches(args, device.name)
    rows, bad = [], 0
    for k, e in sorted(cache.read().items()):
        parts = tuning.split_key(k)
        if not pred(k, e) or parts[3] != tuning._clean(device.driver_version):
            continue
        t = tuning.REGISTRY.get(parts[4])
        problems = e.get("problems") or [e.get("problem")]
        if t is None or t.template_hash != parts[5] or not all(isinstance(p, dict) for p in problems):
            continue
        default = sweep.Result(dict(t.default(device, problems[0])), is_default=True)
        winner = sweep.Result({**default.params, **e["params"]})
        try:
            states = [t.setup(device, p) for p in problems]
            run = sweep._Runner(t, device, states, settings)
            ref = run.check(default, None)
            run.check(winner, ref)
            if winner.status == "pending":
                run.interleaved([default, winner])
        except Exception as ex:
            winner.status, winner.message = sweep._classify(ex)
        if winner.status not in ("pending", "ok"):
            bad += 1
            rows.append([t.op, f"2^{parts[8]}", sweep.fmt_params(e["params"]), "-", "-", "-", "-",
                         f"FAILED {winner.status}: {winner.message}"])
            continue
        sp = default.final / winner.final
        noise = max(0.02, default.final_cv or 0, winner.final_cv or 0)
        changed = {k: v for k, v in winner.params.items() if default.params.get(k) != v}
        if not changed:
            verdict = "ok (the default)"
        else:
            verdict = "ok" if winner.final <= default.final * (1 + noise) else "SLOWER than default"
            bad += verdict != "ok"
        was = e.get("speedup")
        rows.append([t.op, f"2^{parts[8]}", sweep.fmt_params(changed) if changed else "(default)",
                     f"{default.final * 1e3:.4g}",
                     f"{winner.final * 1e3:.4g}", f"{sp:.2f}x",
                     f"{was:.2f}x" if isinstance(was, (int, float)) else "-", verdict])
    print(f"verify on {device.name} ({device.driver_version}); cache {tuning.cache_path()}")
    if rows:
        print(tabulate(rows, headers=["op", "size", "cached winner (vs default)", "default ms", "winner ms",
                                      "speedup now", "when tuned", "verdict"]))
    else:
        print("no current cached entries for this device")
    return 1 if bad else 0


def _list(device):
    from tabulate import tabulate

    rows = []
    for t in tuning.select_ops(None):
        space = t.space_for(device)
        rows.append([t.op, ", ".join(t.templates), t.template_hash,
                     "; ".join(f"{k}: {v}" for k, v in sorted(space.items())),
                     ", ".join(f"2^{tuning.size_bucket(p.get('size', 1))}"
                               for p in t.problems_for(False, device))])
    print(tabulate(rows, headers=["op", "templates", "hash", "space", "sizes"]))
    return 0


def main(argv=None):
    args = _parser().parse_args(argv)
    mods = [m.strip() for m in (args.modules or "").split(",") if m.strip()]
    tuning.load_families(mods, benchmarks=True)
    ops = _ops(args)
    if ops:
        unknown = [o for o in ops if not tuning.select_ops([o])]
        if unknown and not (args.show or args.clear or args.export or args.import_):
            known = ", ".join(sorted(tuning.REGISTRY)) or "none"
            print(f"autotune: unknown operation(s) {', '.join(unknown)} (registered: {known})",
                  file=sys.stderr)
            return 2
    if args.compare:
        return _compare([x for x in args.compare.split(",") if x])
    if args.import_:
        n = cache.import_(args.import_)
        print(f"imported {n} entries from {args.import_} into {tuning.cache_path()}")
        return 0
    device_name = Device(args.device).name if args.device else None
    if args.show:
        return _show(args, device_name)
    if args.export:
        pred = _matches(args, device_name)
        n = cache.export(args.export, pred)
        print(f"exported {n} entries to {args.export}")
        return 0
    if args.clear:
        if device_name is None and not ops:
            cache.clear()
            print(f"deleted {tuning.cache_path()}")
        else:
            n = cache.remove(_matches(args, device_name))
            print(f"removed {n} entries from {tuning.cache_path()}")
        return 0
    device = as_device(args.device)
    if args.list:
        return _list(device)
    if args.verify:
        return _verify(args, device)
    selected = tuning.select_ops(ops)
    if not selected:
        print("autotune: no operations registered", file=sys.stderr)
        return 2
    print(f"tuning {len(selected)} operation(s) on {device.name} ({device.platform_name}, driver "
          f"{device.driver_version}){' [quick]' if args.quick else ''}", file=sys.stderr)
    t0 = time.monotonic()
    budget = args.budget if args.budget is not None else sweep.default_budget(len(selected), args.quick)
    reports = []
    for t in selected:
        reports.extend(sweep.sweep_op(t, device, quick=args.quick, budget=budget,
                                      progress=not args.no_progress))
    print(sweep.summary(reports))
    print(f"cache: {tuning.cache_path()}")
    if args.json:
        _write_json(args.json, device, reports, time.monotonic() - t0)
    return 0


def _write_json(path, device, reports, seconds):
    import json

    rows = []
    for r in reports:
        w = r.winner
        rows.append({
            "op": r.op, "bucket": r.bucket, "note": r.note, "counts": r.counts(),
            "winner": sweep._jsonable(w.params) if w else None,
            "winner_is_default": bool(w is not None and w is r.default),
            "time_s": w.best_time if w else None,
            "default_time_s": r.default.best_time if w else None,
            "speedup": r.speedup, "seconds": r.seconds})
    with open(path, "w") as f:
        json.dump({"device": device.name, "driver": device.driver_version, "seconds": seconds,
                   "reports": rows}, f, indent=1)


def _compare(files):
    """Winner stability over runs (same winner, or its time within 2%) and the
    issue's targets (never slower than default, >= 10% faster on a third)."""
    import json

    from tabulate import tabulate

    runs = []
    for fn in files:
        with open(fn) as f:
            runs.append(json.load(f))
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
    print(tabulate(rows, headers=["op", "size", "distinct winners", "speedup spread", "speedups",
                                  "verdict"]))
    print(f"runs: {len(runs)}; wall seconds: " + ", ".join(f"{r['seconds']:.0f}" for r in runs))
    print(f"stable: {stable}/{len(keys)}; >= 10% faster than default in every run: {fast}/{len(keys)}; "
          f"slower than default (< 0.98x) in some run: {slower}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
