"""The autotuner: sweeps with injected failures, the cache file, lookups, the CLI.

Every test points CLKERNELS_TUNE_CACHE at its own tmp_path. The probe kernels
(``selftest.cl.mako:tune_probe``) have a variant that does not build, one that
is wrong on one element, and work-group sizes over the kernel's limit.
"""

import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest

import clkernels
from clkernels.host.core import build, tuning
from clkernels.host.core.launch import check_launch
from clkernels.host.core.tuning import Tunable, register

HERE = os.path.dirname(os.path.abspath(__file__))
N = 4096
#: the third work-group size is over every device's limit (Intel's CPU runtime allows 8192)
PROBE_SPACE = {"wg_size": lambda device: [64, 128, 2 * device.max_work_group_size],
               "variant": ["good", "broken", "wrong"], "items": [1, 2]}
#: (op, params) of every probe launch, to check that pruned ones never launch
LAUNCHES = []


def _probe_kernel(device, params):
    return build.kernel(device, "selftest.cl.mako", "tune_probe", "tune_probe",
                        {k: params[k] for k in ("wg_size", "variant", "items")})


def make_probe(op, with_kernels=True, default_variant="good", sizes=(N,)):
    """A test-only Tunable over the probe kernel."""

    def setup(device, problem):
        n = problem["size"]
        a = cla.to_device(device.queue, np.random.default_rng(n).integers(0, 2**32, n, dtype=np.uint32))
        return {"a": a, "out": cla.empty_like(a), "n": n}

    def launch(device, params, state):
        k = _probe_kernel(device, params)
        wg = params["wg_size"]
        if not with_kernels:
            check_launch(device, k, wg)
        LAUNCHES.append((op, dict(params)))
        state["out"].fill(np.uint32(0xDEADBEEF))
        n, items = state["n"], params["items"]
        groups = -(-(-(-n // items)) // wg)
        ev = k(device.queue, (groups * wg,), (wg,), state["a"].data, state["out"].data, np.uint32(n))
        return [ev], state["out"].get

    return Tunable(
        op=op, templates=["selftest.cl.mako"], space=PROBE_SPACE,
        default=lambda device, problem: {"wg_size": 32, "variant": default_variant, "items": 1},
        problems=lambda quick: [{"size": s, "dtype": "uint32", "dims": 1} for s in sizes],
        setup=setup, launch=launch,
        kernels=(lambda device, params: [(_probe_kernel(device, params), params["wg_size"])])
        if with_kernels else None)


# registered at import so that subprocesses can load them with --modules test_autotune
register(make_probe("selftest.probe_a", sizes=(N,)))
register(make_probe("selftest.probe_b", with_kernels=False, sizes=(N, 4 * N)))


@pytest.fixture
def cache_file(tmp_path, monkeypatch):
    path = str(tmp_path / "tuning.json")
    monkeypatch.setenv("CLKERNELS_TUNE_CACHE", path)
    tuning.invalidate()
    yield path
    tuning.invalidate()


def _env(path, device):
    env = dict(os.environ, CLKERNELS_TUNE_CACHE=path, CLKERNELS_DEVICE=device.name,
               PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYOPENCL_CTX", None)
    return env


def _fast(**kw):
    from clkernels.autotune.search import Settings

    return Settings(warmup=1, repeats=5, rounds=5, retimes=1, **kw)


def _reference(n):
    a = np.random.default_rng(n).integers(0, 2**32, n, dtype=np.uint32)
    return (a * np.uint32(2654435761) + np.uint32(12345)).astype(np.uint32)


@pytest.mark.parametrize("with_kernels", [True, False], ids=["kernels-hook", "check-in-launch"])
def test_sweep_records_failures_and_never_picks_them(device, cache_file, with_kernels):
    from clkernels.autotune import sweep

    op = f"selftest.inject_{int(with_kernels)}"
    probe = make_probe(op, with_kernels=with_kernels)
    LAUNCHES.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning expected from a clean sweep,
        # except a driver's chatty build log of pyopencl's own kernels (NVIDIA)
        warnings.filterwarnings("ignore", category=cl.CompilerWarning)
        reports = sweep.sweep_op(probe, device, budget=120, settings=_fast(), progress=False)
    assert len(reports) == 1
    rep = reports[0]
    assert len(rep.results) == 1 + 3 * 3 * 2  # default + the whole space
    by = {(r.params["wg_size"], r.params["variant"], r.params["items"]): r for r in rep.results}
    for (wg, variant, items), r in by.items():
        if variant == "broken":
            assert r.status == "build_error", (wg, variant, items, r.status, r.message)
        elif wg > device.max_work_group_size:
            assert r.status == "pruned", (wg, variant, items, r.status, r.message)
            assert "exceeds" in r.message
        elif variant == "wrong":
            assert r.status == "wrong", (wg, variant, items, r.status)
            assert r.median is None
        else:
            assert r.status == "ok", (wg, variant, items, r.status, r.message)
            assert r.median > 0 and len(r.times[0]) >= 5 or r.message.startswith("slow")
    # pruned configurations never reached the device
    assert all(p["wg_size"] <= device.max_work_group_size for _, p in LAUNCHES)
    assert all(p["variant"] != "broken" for _, p in LAUNCHES)
    w = rep.winner
    assert w.status == "ok" and w.params["variant"] == "good" and w.final is not None
    # the probe really computed the right thing with the winner
    state = probe.setup(device, {"size": N})
    probe.launch(device, w.params, state)
    np.testing.assert_array_equal(state["out"].get(), _reference(N))
    # the cache holds the winner and the recorded failures
    with open(cache_file) as f:
        data = json.load(f)
    (key, entry), = data["entries"].items()
    assert tuning.split_key(key)[4] == op
    assert entry["params"] == w.params
    statuses = {x["status"] for x in entry["failures"]}
    assert statuses == {"build_error", "pruned", "wrong"}
    assert entry["counts"]["ok"] == 5  # wg 64/128 x items 1/2 good, plus the default
    params, source = probe.resolve(device, {"size": N, "dtype": "uint32", "dims": 1})
    assert source == "tuned" and params == w.params


def test_default_failure_and_budget(device, cache_file):
    from clkernels.autotune import report, sweep

    bad = make_probe("selftest.bad_default", default_variant="broken")
    rep, = sweep.sweep_op(bad, device, budget=60, settings=_fast(), progress=False)
    assert rep.winner is None and "default configuration failed" in rep.note
    assert rep.default.status == "build_error"
    assert all(r.status == "skipped" for r in rep.results[1:])
    assert not os.path.exists(cache_file)  # nothing to write
    # a spent budget still times the default and writes it
    probe = make_probe("selftest.nobudget")
    rep, = sweep.sweep_op(probe, device, budget=0, settings=_fast(), progress=False)
    assert rep.winner is rep.default and rep.default.status == "ok"
    assert all(r.status == "skipped" for r in rep.results[1:])
    assert "nobudget" in open(cache_file).read()
    print(report.summary([rep]))


def test_quick_sweep_picked_up_by_a_fresh_process(device, cache_file):
    """The CLI tunes the real copy op; a new process's tuning_info sees the winner."""
    env = _env(cache_file, device)
    cmd = [sys.executable, "-m", "clkernels.autotune", "--ops", "copy", "--quick", "--budget", "15"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "copy" in p.stdout and "speedup" in p.stdout
    assert "[" in p.stderr and "done in" in p.stderr  # the progress bar
    with open(cache_file) as f:
        entries = json.load(f)["entries"]
    assert len(entries) == 1
    (key, entry), = entries.items()
    size = entry["problem"]["size"]
    code = ("import json, clkernels; from clkernels.host.core import tuning; "
            f"i = clkernels.tuning_info('copy', size={size}); "
            f"j = clkernels.tuning_info('copy', size={size * 8}); "
            "print(json.dumps([i['source'], i['params'], i['key'], j['source'], j['tuned_bucket'], "
            "tuning.stats['reads']]))")
    q = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr
    source, params, used, source2, bucket2, reads = json.loads(q.stdout.strip().splitlines()[-1])
    assert source == "tuned" and used == key
    assert params == {**entry["default_params"], **entry["params"]}
    assert source2 == "tuned" and bucket2 == tuning.size_bucket(size)  # nearest tuned bucket
    assert reads == 1
    # the tuned configuration copies correctly
    src = cla.to_device(device.queue, np.arange(size // 4, dtype=np.uint32))
    from clkernels.host.copy import copy

    np.testing.assert_array_equal(copy(device.queue, src)[0].get(), src.get())


def test_concurrent_sweeps_both_land(device, cache_file):
    env = _env(cache_file, device)
    base = [sys.executable, "-m", "clkernels.autotune", "--modules", "test_autotune", "--quick",
            "--budget", "20", "--no-progress"]
    procs = [subprocess.Popen(base + ["--ops", op], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for op in ("selftest.probe_a", "selftest.probe_b")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    with open(cache_file) as f:
        data = json.load(f)
    ops = sorted(tuning.split_key(k)[4] + "@" + tuning.split_key(k)[8] for k in data["entries"])
    b1, b2 = tuning.size_bucket(N), tuning.size_bucket(4 * N)
    assert ops == [f"selftest.probe_a@{b1}", f"selftest.probe_b@{b1}", f"selftest.probe_b@{b2}"]
    leftovers = [f for f in os.listdir(os.path.dirname(cache_file)) if f.endswith(".tmp")]
    assert not leftovers


def test_locked_merges_from_two_processes(cache_file):
    """Many small writes from two processes at once: none is lost."""
    code = ("import sys; from clkernels.autotune import cache\n"
            "tag = sys.argv[1]\n"
            "for i in range(25):\n"
            "    cache.update({f'v1|P|D|drv|op.{tag}|h|uint32|1|{i}': {'params': {'i': i}}})\n")
    env = dict(os.environ, CLKERNELS_TUNE_CACHE=cache_file)
    procs = [subprocess.Popen([sys.executable, "-c", code, tag], env=env) for tag in "ab"]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    with open(cache_file) as f:
        entries = json.load(f)["entries"]
    assert len(entries) == 50
    assert all(entries[f"v1|P|D|drv|op.{t}|h|uint32|1|{i}"]["params"] == {"i": i}
               for t in "ab" for i in range(25))


def _fake(device, op="selftest.fake", th="h0", bucket=12, driver=None, params=None):
    d = driver if driver is not None else device.driver_version
    key = "|".join(["v1", device.platform_name, device.name, d, op, th, "uint32", "1", str(bucket)])
    return key, {"params": params or {"wg_size": 64}}


def test_corrupt_cache_is_recovered(device, cache_file):
    from clkernels.autotune import cache

    with open(cache_file, "w") as f:
        f.write('{"schema": 1, "entries": {"v1|trunc')
    with pytest.warns(RuntimeWarning, match="unreadable tuning cache"):
        assert tuning.lookup(device, "selftest.fake", "h0", "uint32", 1, 4096) == ({}, "default")
    key, e = _fake(device)
    with pytest.warns(RuntimeWarning, match="corrupt"):
        cache.update({key: e})
    assert os.path.exists(cache_file + ".corrupt")
    assert tuning.lookup(device, "selftest.fake", "h0", "uint32", 1, 4096) == ({"wg_size": 64}, "tuned")
    # malformed entries inside a valid file are skipped, the rest still used
    with open(cache_file) as f:
        data = json.load(f)
    data["entries"]["not a key"] = {"params": {}}
    k2, _ = _fake(device, op="selftest.other")
    data["entries"][k2] = {"params": "not an object"}
    with open(cache_file, "w") as f:
        json.dump(data, f)
    time.sleep(tuning.RECHECK_S)        # a write by another hand is seen after this interval
    with pytest.warns(RuntimeWarning, match="malformed"):
        assert tuning.lookup(device, "selftest.fake", "h0", "uint32", 1, 4096)[1] == "tuned"
    assert tuning.lookup(device, "selftest.other", "h0", "uint32", 1, 4096) == ({}, "default")


def test_lookup_fallbacks_stale_and_memo(device, cache_file):
    from clkernels.autotune import cache

    entries = dict([
        _fake(device, bucket=12, params={"wg_size": 64}),
        _fake(device, bucket=20, params={"wg_size": 256}),
        _fake(device, op="selftest.olddrv", driver="0.0-other", params={"wg_size": 128}),
        _fake(device, op="selftest.stale", th="oldhash", params={"wg_size": 512}),
    ])
    cache.update(entries)
    lk = tuning.lookup
    assert lk(device, "selftest.fake", "h0", np.uint32, 1, 1 << 12) == ({"wg_size": 64}, "tuned")
    assert lk(device, "selftest.fake", "h0", "uint32", 1, 1 << 15) == ({"wg_size": 64}, "tuned")
    assert lk(device, "selftest.fake", "h0", "uint32", 1, 1 << 16) == ({"wg_size": 256}, "tuned")
    assert lk(device, "selftest.fake", "h0", "uint32", 1, 1 << 30) == ({"wg_size": 256}, "tuned")
    assert lk(device, "selftest.fake", "h0", "float32", 1, 1 << 12) == ({}, "default")
    assert lk(device, "selftest.olddrv", "h0", "uint32", 1, 1 << 12) == ({"wg_size": 128}, "fallback")
    with pytest.warns(RuntimeWarning, match="stale"):
        assert lk(device, "selftest.stale", "h0", "uint32", 1, 1 << 12) == ({}, "default")
    # memoized: no re-read while the file is unchanged, one re-read after a write
    reads = tuning.stats["reads"]
    t0 = time.perf_counter()
    for _ in range(2000):
        lk(device, "selftest.fake", "h0", "uint32", 1, 1 << 12)
    per_call = (time.perf_counter() - t0) / 2000
    print(f"lookup: {per_call * 1e6:.1f} us per call")
    assert tuning.stats["reads"] == reads
    cache.update(dict([_fake(device, bucket=12, params={"wg_size": 32})]))
    assert lk(device, "selftest.fake", "h0", "uint32", 1, 1 << 12) == ({"wg_size": 32}, "tuned")
    assert tuning.stats["reads"] == reads + 1


def test_tuning_info_sources(device, cache_file):
    from clkernels.autotune import cache
    from clkernels.host.copy import TUNABLE

    info = clkernels.tuning_info("copy", device=device, size=1 << 20)
    assert info["source"] == "default" and info["params"] == info["defaults"] and info["entry"] is None
    key = tuning.entry_key(device, "copy", TUNABLE.template_hash, "uint8", 1, 20)
    cache.update({key: {"params": {"wg_size": 64, "groups_per_cu": 4}, "speedup": 1.5}})
    info = clkernels.tuning_info("copy", device=device, size=1 << 20)
    assert info["source"] == "tuned" and info["params"] == {"wg_size": 64, "groups_per_cu": 4}
    assert info["key"] == key and info["entry"]["speedup"] == 1.5
    # parameters the op does not know (an older space) are dropped
    cache.update({key: {"params": {"wg_size": 64, "groups_per_cu": 4, "bogus": 1}}})
    assert clkernels.tuning_info("copy", device=device, size=1 << 20)["params"] == {
        "wg_size": 64, "groups_per_cu": 4}  # unknown keys dropped
    with pytest.raises(ValueError, match="unknown tunable operation"):
        clkernels.tuning_info("no.such.op", device=device)


def test_cli_show_export_import_clear_verify(device, cache_file, tmp_path, capsys):
    from clkernels.autotune import cache, cli, sweep

    sweep.sweep_op(tuning.REGISTRY["selftest.probe_a"], device, budget=20, quick=True,
                   settings=_fast(), progress=False)
    key = next(iter(cache.read()))
    assert cli.main(["--show", "--ops", "selftest"]) == 0
    out = capsys.readouterr().out
    assert "selftest.probe_a" in out and "current" in out
    exp = str(tmp_path / "export.json")
    assert cli.main(["--export", exp]) == 0
    assert cli.main(["--clear"]) == 0
    assert not os.path.exists(cache_file)
    assert cli.main(["--import", exp]) == 0
    assert key in cache.read()
    rc = cli.main(["--verify", "--ops", "selftest.probe_a", "--quick", "--device", device.name])
    out = capsys.readouterr().out
    assert "selftest.probe_a" in out and ("ok" in out or "SLOWER" in out)
    assert rc in (0, 1)
    assert cli.main(["--clear", "--ops", "selftest.probe_a"]) == 0
    assert key not in cache.read()
    with open(exp, "w") as f:
        f.write("[1, 2]")
    capsys.readouterr()
    assert cli.main(["--import", exp]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autotune: error:") and "not a clkernels tuning cache" in err
    assert len(err.strip().splitlines()) == 1
    assert cli.main(["--ops", "no_such_family"]) == 2


def test_choose_noise_and_hysteresis():
    from clkernels.autotune.runner import Result
    from clkernels.autotune.search import Settings
    from clkernels.autotune.sweep import choose

    s = Settings()

    def res(t, default=False):
        return Result({"t": t}, status="ok", median=t, final=t, final_cv=0.001, is_default=default)
    d, a, b = res(1.0, True), res(0.80), res(0.79)
    assert choose(d, [d, a, b], s) is b
    assert choose(d, [d, a, b], s, previous=a) is a       # within 2% of the fastest: kept
    c = res(0.70)
    assert choose(d, [d, a, c], s, previous=a) is c       # clearly beaten: replaced
    e = res(0.995)
    assert choose(d, [d, e], s) is d                      # gain within the noise: default
    assert choose(d, [d, e], s, previous=e) is d          # hysteresis never beats the noise rule
    assert choose(d, [d, b], s, previous=d) is b
    # a loaded machine's CVs (one descheduled repeat): a much faster winner still wins, a
    # gain within the capped noise does not
    noisy = Result({"t": 1}, status="ok", median=1.0, final=1.0, final_cv=0.97, is_default=True)
    assert choose(noisy, [noisy, res(0.05)], s) is not noisy
    assert choose(noisy, [noisy, res(0.6)], s) is noisy


def test_large_space_neighbours_first_and_combination(device):
    from clkernels.autotune import runner, search

    space = {f"p{i}": list(range(6)) for i in range(6)}   # 46656 points
    t = Tunable("selftest.big", ["selftest.cl.mako"], space,
                default=lambda dev, pr: {f"p{i}": 0 for i in range(6)},
                restrict=lambda p, dev: p["p5"] != 5)
    cfg = search.configurations(t, device, {"size": 1}, quick=False, settings=search.Settings(max_configs=64))
    assert len(cfg) == 64 and cfg[0] == {f"p{i}": 0 for i in range(6)}
    ndiff = [sum(v != 0 for v in p.values()) for p in cfg[1:]]
    assert ndiff[:29] == [1] * 29 and all(n > 1 for n in ndiff[29:])  # 6*5 - 1 restricted
    assert all(p["p5"] != 5 for p in cfg)
    assert len({tuple(sorted(p.items())) for p in cfg}) == 64
    # the combination of the best single-parameter changes
    d = runner.Result(dict(cfg[0]), status="ok", median=1.0, is_default=True)
    rs = [d] + [runner.Result(dict(p), status="ok", median=1.0 - 0.01 * sum(p.values()))
                for p in cfg[1:30]]
    combo = search.combined_best(t, device, d, rs)
    assert combo == {"p0": 5, "p1": 5, "p2": 5, "p3": 5, "p4": 5, "p5": 4}


def test_killed_writer_never_leaves_a_torn_file(cache_file):
    code = ("from clkernels.autotune import cache\n"
            "big = {'params': {'x': 'y' * 20000}}\n"
            "i = 0\n"
            "while True:\n"
            "    i += 1\n"
            "    cache.update({f'v1|P|D|drv|op|h|uint32|1|{i % 40}': dict(big, n=i)})\n")
    env = dict(os.environ, CLKERNELS_TUNE_CACHE=cache_file)
    p = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not os.path.exists(cache_file):
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        p.kill()
        p.wait()
    with open(cache_file) as f:
        entries = json.load(f)["entries"]   # parses: never torn
    assert entries and all(e["params"]["x"] == "y" * 20000 for e in entries.values())


# ---------------------------------------------------------------- successive halving, timeouts
COST_BEST = 11


def make_cost_op(op, sizes=(1 << 18,), slow_build=None, slow_run=None, sleep=0.6):
    """A synthetic op whose time depends on a parameter: ``cost`` c launches
    the probe kernel 1 + 3 |c - COST_BEST| times (same output every time);
    ``pad`` changes nothing. ``slow_build`` / ``slow_run``: parameters whose
    kernels hook / launch sleeps ``sleep`` seconds. Launches are recorded in
    LAUNCHES as (op, params, size)."""
    base = {"wg_size": 64, "variant": "good", "items": 1}

    def kernels(device, params):
        if slow_build is not None and params == slow_build:
            time.sleep(sleep)
        return [(_probe_kernel(device, base), 64)]

    def setup(device, problem):
        n = problem["size"]
        a = cla.to_device(device.queue, np.random.default_rng(n).integers(0, 2**32, n, dtype=np.uint32))
        return {"a": a, "out": cla.empty_like(a), "n": n}

    def launch(device, params, state):
        if slow_run is not None and params == slow_run:
            time.sleep(sleep)
        LAUNCHES.append((op, dict(params), state["n"]))
        k = _probe_kernel(device, base)
        state["out"].fill(np.uint32(0xDEADBEEF))
        n = state["n"]
        evs = [k(device.queue, (-(-n // 64) * 64,), (64,), state["a"].data, state["out"].data, np.uint32(n))
               for _ in range(1 + 3 * abs(params["cost"] - COST_BEST))]
        return evs, state["out"].get

    return Tunable(
        op=op, templates=["selftest.cl.mako"], space={"cost": list(range(16)), "pad": [0, 1, 2, 3]},
        default=lambda device, problem: {"cost": 0, "pad": 0},
        problems=lambda quick: [{"size": s, "dtype": "uint32", "dims": 1} for s in sizes],
        setup=setup, launch=launch, kernels=kernels)


def _halving(**kw):
    return _fast(eta=4, size_step=4, full_keep=4, max_rungs=3, proxy_min_size=1024, **kw)


def test_successive_halving_finds_the_best_and_counts_coverage(device, cache_file):
    from clkernels.autotune import report, search, sweep

    op = "selftest.halving"
    t = make_cost_op(op)
    LAUNCHES.clear()
    rep, = sweep.sweep_op(t, device, budget=120, settings=_halving(), progress=False)
    full = 1 << 18
    assert rep.rungs == [full // 16, full // 4, full]
    assert [(g.divisor, g.keep) for g in search.schedule(64, full, _halving())] == [(16, None), (4, 16), (1, 4)]
    # the best configuration is found, and only from full-size, interleaved times
    w = rep.winner
    assert w.params["cost"] == COST_BEST and w.at_full and w.final is not None
    assert rep.speedup > 2
    # every valid configuration timed at the proxy size, a quarter at the middle
    # size, the best few (and the default) at full size
    assert len(rep.results) == 64
    assert all(r.status == "ok" and r.at_proxy and r.proxy_median for r in rep.results), [
        (r.params, r.status, r.message, r.proxy_median) for r in rep.results if r.status != "ok" or not r.proxy_median]
    middle = [r for r in rep.results if r.rung >= 1 and not r.is_default]
    at_full = [r for r in rep.results if r.at_full and not r.is_default]
    assert len(middle) == 16 and len(at_full) == 4
    assert all(r.params["cost"] == COST_BEST for r in at_full)
    assert rep.default.at_full and rep.default.final is not None
    cov = rep.coverage()
    assert cov == {"valid": 64, "evaluated": 64, "proxy": 64, "full": 5, "rungs": rep.rungs}
    assert cov["proxy"] > cov["full"]
    # nothing ran at a size it was not promoted to
    ran = {}
    for o, p, n in LAUNCHES:
        if o == op:
            ran.setdefault(n, set()).add(search.freeze(p))
    assert len(ran[full // 16]) == 64 and len(ran[full // 4]) == 17 and len(ran[full]) == 5
    assert ran[full] == {search.freeze(r.params) for r in rep.results if r.at_full}
    # the coverage reaches the cache entry, the JSON report and both tables
    entry = json.load(open(cache_file))["entries"][rep.key]
    assert entry["coverage"] == cov
    assert report.report_json(device, [rep], 1.0)["ops"][op] == {
        "groups": 1, "seconds": pytest.approx(rep.seconds), "notes": [], "valid": 64, "evaluated": 64,
        "proxy": 64, "full": 5, "speedup": pytest.approx(rep.speedup)}
    text = report.summary([rep])
    assert "@proxy" in text and "64 (100%)" in text


def test_timeout_status_and_never_promoted(device, cache_file):
    from clkernels.autotune import sweep

    op = "selftest.timeout"
    slow_b, slow_r = {"cost": COST_BEST, "pad": 3}, {"cost": COST_BEST, "pad": 2}
    # the slow configurations sleep past the limit; the others must finish well inside it
    # on a loaded 2-core CI machine too (a 0.25 s limit failed there once: a good
    # configuration timed out and the default won)
    t = make_cost_op(op, slow_build=slow_b, slow_run=slow_r, sleep=1.5)
    LAUNCHES.clear()
    rep, = sweep.sweep_op(t, device, budget=120, settings=_halving(config_timeout=1.2), progress=False)
    by = {(r.params["cost"], r.params["pad"]): r for r in rep.results}
    b, r = by[(COST_BEST, 3)], by[(COST_BEST, 2)]
    assert b.status == "timeout" and "build" in b.message and "limit" in b.message
    assert r.status == "timeout" and "limit" in r.message
    for x in (b, r):
        assert x.rung == 0 and not x.at_full and x.median is None
    assert not any(p == slow_b for o, p, n in LAUNCHES if o == op)          # never launched at all
    assert all(n == rep.rungs[0] for o, p, n in LAUNCHES if o == op and p == slow_r)
    assert rep.winner.params["cost"] == COST_BEST and rep.winner.params["pad"] in (0, 1)
    assert rep.counts()["timeout"] == 2
    entry = json.load(open(cache_file))["entries"][rep.key]
    assert sorted(f["status"] for f in entry["failures"]) == ["timeout", "timeout"]


# ---------------------------------------------------------------- the command line


def _cli(args, env, cmd=("-m", "clkernels.autotune")):
    return subprocess.run([sys.executable, *cmd, *args], env=env, capture_output=True, text=True, timeout=120)


def test_cli_errors_are_one_line(device, cache_file, tmp_path):
    env = _env(cache_file, device)
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"reports": [')
    cases = {
        "unwritable cache": (["--cache", str(afile / "tuning.json"), "--ops", "copy", "--quick"], "afile"),
        "bad device": (["--device", "no-such-device-anywhere", "--list"], "no-such-device-anywhere"),
        "unreadable import": (["--import", str(tmp_path / "missing.json")], "missing.json"),
        "corrupt compare": (["--compare", str(corrupt)], "not JSON"),
        "missing compare": (["--compare", str(tmp_path / "nope.json")], "nope.json"),
        "bad argument": (["--budget", "soon"], "--budget"),
        "missing module": (["--modules", "no_such_module_xyz", "--list"], "no_such_module_xyz"),
    }
    for name, (args, needle) in cases.items():
        p = _cli(args, env)
        assert p.returncode == 2, (name, p.returncode, p.stderr)
        assert p.stderr.startswith("autotune: error:"), (name, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, (name, p.stderr)
        assert "Traceback" not in p.stderr and needle in p.stderr, (name, p.stderr)
    assert not os.path.exists(cache_file)


def test_version_and_the_clkernels_autotune_alias(device, cache_file, capsys):
    import clkernels.__main__ as top
    from clkernels.autotune import cli

    for main, argv in ((cli.main, ["--version"]), (top.main, ["--version"]),
                       (top.main, ["autotune", "--version"])):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        assert capsys.readouterr().out.strip() == f"clkernels {clkernels.__version__}" == "clkernels 0.1.0"
    env = _env(cache_file, device)
    for cmd in (("-m", "clkernels"), ("-m", "clkernels.autotune")):
        p = _cli(["--version"] if cmd[-1] == "clkernels.autotune" else ["autotune", "--version"], env, cmd)
        assert p.returncode == 0 and p.stdout.strip() == "clkernels 0.1.0", p.stderr
    # the alias runs the autotuner's commands, errors included
    assert top.main(["autotune", "--show"]) == 0
    assert "0 entries shown" in capsys.readouterr().out
    assert top.main(["autotune", "--ops", "no_such_family"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autotune: error: unknown operation") and len(err.strip().splitlines()) == 1
    p = _cli(["autotune", "--compare", "/no/such/report.json"], env, ("-m", "clkernels"))
    assert p.returncode == 2 and p.stderr.startswith("autotune: error:") and "Traceback" not in p.stderr


def test_prebuild_workers_give_the_same_verdicts(device, cache_file):
    """Builds in a worker process: the sweep records their verdicts (build
    errors, pruned work-group sizes) exactly as in-process builds."""
    from clkernels.autotune import prebuild, search, sweep

    probe = tuning.REGISTRY["selftest.probe_a"]
    configs = search.configurations(probe, device, {"size": N})
    LAUNCHES.clear()
    with prebuild.Prebuilder(device, 1, modules=["test_autotune"]) as pre:
        assert pre.pool is not None
        assert pre.submit(probe, configs) == len(configs)
        assert pre.submit(make_probe("selftest.unregistered"), configs) == 0   # not in the registry
        rep, = sweep.sweep_op(probe, device, budget=120, settings=_fast(), progress=False, prebuilt=pre)
        assert pre.used == len(configs)
    assert pre.pool is None
    for r in rep.results:
        wg, variant = r.params["wg_size"], r.params["variant"]
        want = ("build_error" if variant == "broken" else "pruned" if wg > device.max_work_group_size
                else "wrong" if variant == "wrong" else "ok")
        assert r.status == want, (r.params, r.status, r.message)
    assert all(p["variant"] != "broken" and p["wg_size"] <= device.max_work_group_size
               for op, p in LAUNCHES if op == probe.op)
    assert rep.winner.params["variant"] == "good"
