"""The ``autotune`` command (also ``clkernels autotune`` and ``python -m clkernels.autotune``).

    autotune                        tune every operation with a benchmark on the default device
    autotune --ops twobody,copy     only these (an op name or a family prefix)
    autotune --quick                fewer sizes and candidates
    autotune --budget 30            seconds per operation on average (default 130 s / #ops, 10..60)
    autotune --config-timeout 60    seconds one configuration may spend at one size (build + runs)
    autotune --jobs 8               build processes ahead of the sweep (default: GPUs 8, CPUs 0)
    autotune --device nvidia        a device spec (name substring or platform:device)
    autotune --cache FILE           the cache file (default: CLKERNELS_TUNE_CACHE or the user cache)
    autotune --list                 the registered operations and their spaces
    autotune --show                 the cache's entries (with --device/--ops: those)
    autotune --verify               re-time the cached winners against the defaults
    autotune --clear                delete the cache (with --device/--ops: those entries)
    autotune --export FILE          write the cache (or the selected entries) to FILE
    autotune --import FILE          merge FILE's entries into the cache
    autotune --json run1.json       also write the sweep's report as JSON
    autotune --compare r1.json,r2.json,r3.json   winner stability over runs, targets
    autotune --version              print the version

Errors (no device, an unwritable cache, unreadable files, bad arguments) are
one line ``autotune: error: ...`` on stderr and exit status 2.
"""

import argparse
import contextlib
import importlib.util
import os
import sys
import time
import warnings

import pyopencl as cl

from .. import __version__
from ..host.core import tuning
from ..host.core.device import Device, as_device
from ..host.core.errors import ClkernelsError
from . import cache, report, search, sweep
from .runner import Result, Runner, classify


class CliError(Exception):
    """A command that cannot be carried out (printed as one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CliError(f"{message} (see 'autotune --help')")


def build_parser(prog="autotune"):
    p = _Parser(
        prog=prog, description="Tune clkernels' operations for an OpenCL device and cache the winners.",
        epilog="cache file: CLKERNELS_TUNE_CACHE or the user cache directory (--cache overrides)")
    p.add_argument("--version", action="version", version=f"clkernels {__version__}")
    p.add_argument("--device", help="device spec: a name substring or platform:device index")
    p.add_argument("--ops", help="comma-separated operations or families (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer problem sizes and candidates")
    p.add_argument("--budget", type=float,
                   help="seconds per operation on average (default: 130 s over all operations, "
                        "10..60 s each; a third of that with --quick)")
    p.add_argument("--config-timeout", type=float, default=search.Settings.config_timeout, metavar="S",
                   help="seconds one configuration may spend at one size, build and runs (checked "
                        "between steps; default %(default)g; 0: no limit)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="processes that build configurations ahead of the sweep (default: "
                        "8 or the spare cores on a GPU, 0 on a CPU device)")
    p.add_argument("--cache", metavar="FILE", help="the tuning cache file (overrides CLKERNELS_TUNE_CACHE)")
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
    p.add_argument("--json", metavar="FILE", help="also write the sweep's report to FILE")
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
        if device_name is not None and parts[2] != tuning.key_field(device_name):
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
        rows.append([op, dev, drv, dt, dims, f"2^{b}", report.fmt_params(e["params"]),
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

    settings = search.Settings.for_mode(args.quick, config_timeout=args.config_timeout)
    pred = _matches(args, device.name)
    rows, bad = [], 0
    for k, e in sorted(cache.read().items()):
        parts = tuning.split_key(k)
        if not pred(k, e) or parts[3] != tuning.key_field(device.driver_version):
            continue
        t = tuning.REGISTRY.get(parts[4])
        problems = e.get("problems") or [e.get("problem")]
        if t is None or not t.has_benchmark or t.template_hash != parts[5] \
                or not all(isinstance(p, dict) for p in problems):
            continue
        default = Result(dict(t.default(device, problems[0])), is_default=True)
        winner = Result({**default.params, **e["params"]})
        try:
            run = Runner(t, device, [t.setup(device, p) for p in problems], settings)
            ref = run.check(default, None)
            run.check(winner, ref)
            if winner.status == "pending":
                run.interleaved([default, winner])
        except Exception as ex:
            winner.status, winner.message = classify(ex)
        if winner.status not in ("pending", "ok"):
            bad += 1
            rows.append([t.op, f"2^{parts[8]}", report.fmt_params(e["params"]), "-", "-", "-", "-",
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
        rows.append([t.op, f"2^{parts[8]}", report.fmt_params(changed) if changed else "(default)",
                     f"{default.final * 1e3:.4g}", f"{winner.final * 1e3:.4g}", f"{sp:.2f}x",
                     f"{was:.2f}x" if isinstance(was, (int, float)) else "-", verdict])
    print(f"verify on {device.name} ({device.driver_version}); cache {tuning.cache_path()}")
    if rows:
        print(tabulate(rows, headers=["op", "size", "cached winner (vs default)", "default ms", "winner ms",
                                      "speedup now", "when tuned", "verdict"]))
    else:
        print("no current cached entries for this device")
    return 1 if bad else 0


def _list(device, ops):
    from tabulate import tabulate

    rows = []
    for t in tuning.select_ops(ops):
        space = t.space_for(device)
        try:
            sizes = ", ".join(f"2^{tuning.size_bucket(p.get('size', 1))}"
                              for p in t.problems_for(False, device)) if t.has_benchmark else "-"
        except Exception as e:
            sizes = f"problems() failed: {type(e).__name__}"
        rows.append([t.op, ", ".join(t.templates), t.template_hash, search.space_points(t, device),
                     "; ".join(f"{k}: {v}" for k, v in sorted(space.items())), sizes,
                     "yes" if t.has_benchmark else "no"])
    print(tabulate(rows, headers=["op", "templates", "hash", "points", "space", "sizes", "benchmark"]))
    return 0


def _load(args):
    """Import the families (and --modules): an explicitly named module that is
    missing or fails is an error; a family that fails is a warning."""
    mods = [m.strip() for m in (args.modules or "").split(",") if m.strip()]
    for m in mods:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise CliError(f"--modules: no module named {m!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        failed = tuning.load_families(mods, benchmarks=True)
    for m, err in failed.items():
        if m in mods:
            raise CliError(f"--modules: importing {m} failed: {err}")
        print(f"autotune: warning: could not import {m} (its operations are not tuned): {err}",
              file=sys.stderr)
    return mods


def _tune(args, device, mods):
    ops = _ops(args)
    chosen = tuning.select_ops(ops)
    selected = [t for t in chosen if t.has_benchmark]
    for t in chosen:
        if not t.has_benchmark:
            print(f"autotune: skipping {t.op} (no benchmark attached)", file=sys.stderr)
    if not selected:
        raise CliError("no operations with a benchmark to tune")
    cache.check_writable()
    if args.json:
        cache.check_writable(args.json, lock=False)
    print(f"tuning {len(selected)} operation(s) on {device.name} ({device.platform_name}, driver "
          f"{device.driver_version}){' [quick]' if args.quick else ''}", file=sys.stderr)
    t0 = time.monotonic()
    settings = search.Settings.for_mode(args.quick, config_timeout=args.config_timeout)
    reports = sweep.run(device, quick=args.quick, budget=args.budget, settings=settings,
                        progress=not args.no_progress, jobs=args.jobs, modules=mods, selected=selected)
    print(report.summary(reports))
    print(f"cache: {tuning.cache_path()}")
    if args.json:
        report.write_json(args.json, device, reports, time.monotonic() - t0)
    return 0


def _dispatch(args):
    if args.compare:
        print(report.compare([x for x in args.compare.split(",") if x]))
        return 0
    mods = _load(args)
    ops = _ops(args)
    if ops:
        unknown = [o for o in ops if not tuning.select_ops([o])]
        if unknown and not (args.show or args.clear or args.export or args.import_):
            known = ", ".join(sorted(tuning.REGISTRY)) or "none"
            raise CliError(f"unknown operation(s) {', '.join(unknown)} (registered: {known})")
    if args.import_:
        n = cache.import_(args.import_)
        print(f"imported {n} entries from {args.import_} into {tuning.cache_path()}")
        return 0
    device_name = Device(args.device).name if args.device else None
    if args.show:
        return _show(args, device_name)
    if args.export:
        n = cache.export(args.export, _matches(args, device_name))
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
        return _list(device, ops)
    if args.verify:
        return _verify(args, device)
    return _tune(args, device, mods)


def _one_line(e):
    if isinstance(e, OSError) and e.strerror:
        text = f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"autotune: warning: {' '.join(str(message).split())}", file=sys.stderr)


@contextlib.contextmanager
def _cache_override(path):
    old = os.environ.get("CLKERNELS_TUNE_CACHE")
    if path:
        os.environ["CLKERNELS_TUNE_CACHE"] = os.path.abspath(path)
        tuning.invalidate()
    try:
        yield
    finally:
        if path:
            if old is None:
                os.environ.pop("CLKERNELS_TUNE_CACHE", None)
            else:
                os.environ["CLKERNELS_TUNE_CACHE"] = old
            tuning.invalidate()


def main(argv=None, prog="autotune"):
    """Run the command; returns the exit status (0; 1: --verify found a
    winner slower than the default; 2: an error, printed as one line)."""
    # NVIDIA's compute cache (where prebuild workers leave the programs they
    # built) evicts past CUDA_CACHE_MAXSIZE; a sweep builds a few hundred MB
    os.environ.setdefault("CUDA_CACHE_MAXSIZE", str(1 << 32))
    try:
        args = build_parser(prog).parse_args(argv)
        with _cache_override(args.cache), warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return _dispatch(args)
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return 130
    except (CliError, OSError, ValueError, KeyError, cl.Error, ClkernelsError) as e:
        print(f"autotune: error: {_one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
