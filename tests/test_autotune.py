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
PROBE_SPACE = {"wg_size": [64, 128, 8192], "variant": ["good", "broken", "wrong"], "items": [1, 2]}
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


def _fast():
    from clkernels.autotune import Settings

    return Settings(warmup=1, repeats=5, rounds=5, retimes=1)


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
    from clkernels.autotune import sweep

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
    print(sweep.summary([rep]))


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
    with pytest.raises(ValueError, match="not a clkernels tuning cache"):
        cli.main(["--import", exp])
    assert cli.main(["--ops", "no_such_family"]) == 2


def test_choose_noise_and_hysteresis():
    from clkernels.autotune.sweep import Result, Settings, choose

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


def test_large_space_neighbours_first_and_combination(device):
    from clkernels.autotune import sweep

    space = {f"p{i}": list(range(6)) for i in range(6)}   # 46656 points
    t = Tunable("selftest.big", ["selftest.cl.mako"], space,
                default=lambda dev, pr: {f"p{i}": 0 for i in range(6)},
                restrict=lambda p, dev: p["p5"] != 5)
    cfg = sweep.configurations(t, device, {"size": 1}, quick=False, settings=sweep.Settings(max_configs=64))
    assert len(cfg) == 64 and cfg[0] == {f"p{i}": 0 for i in range(6)}
    ndiff = [sum(v != 0 for v in p.values()) for p in cfg[1:]]
    assert ndiff[:29] == [1] * 29 and all(n > 1 for n in ndiff[29:])  # 6*5 - 1 restricted
    assert all(p["p5"] != 5 for p in cfg)
    assert len({tuple(sorted(p.items())) for p in cfg}) == 64
    # the combination of the best single-parameter changes
    d = sweep.Result(dict(cfg[0]), status="ok", median=1.0, is_default=True)
    rs = [d] + [sweep.Result(dict(p), status="ok", median=1.0 - 0.01 * sum(p.values()))
                for p in cfg[1:30]]
    combo = sweep.combined_best(t, device, d, rs)
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
