"""Tuned-configuration lookup: the one module the host side reads tuning with.

The tuner (:mod:`clkernels.autotune`) writes the cache; operations declare a
:class:`Tunable` next to themselves, :func:`register` it at import, and call
:meth:`Tunable.resolve` (cheap, memoized) to get their parameters. The host side
never imports the tuner.

Cache file (``cache_path()``; ``CLKERNELS_TUNE_CACHE`` overrides)::

    {"schema": 1, "entries": {KEY: ENTRY, ...}}

KEY is :func:`entry_key`: ``v1|platform|device|driver|op|template hash|dtype|
dims|size bucket``. ENTRY is ``{"params": {...}, ...}``; the tuner adds
metadata (times, speedup, the problem it was tuned on, when). A change of the
templates changes the hash, so entries made for other sources stop matching
(they are "stale": ignored, with one warning per operation).

Lookup order (:func:`lookup`): the exact key -> the same key with the nearest
tuned size bucket (same driver; source still ``"tuned"``) -> the same device
under another driver version (``"fallback"``) -> ``({}, "default")``: the
operation's model-based defaults. The parsed cache is memoized on the file's
(inode, mtime, size) and each answer per key, so a call costs a ``stat`` and a
dict lookup (a few microseconds).

Launch configuration errors. A configuration the kernel cannot launch (its
work-group size exceeds the kernel's ``CL_KERNEL_WORK_GROUP_SIZE``, or its local
memory the device's) is pruned by the sweep, never timed or chosen. An
operation states which kernels and work-group sizes a configuration launches in
one of two ways:

* ``Tunable(kernels=...)``: ``kernels(device, params) -> [(kernel, wg_size) or
  (kernel, wg_size, dynamic_local_bytes), ...]``; it builds (a ``BuildError``
  there is recorded as a build failure) and the sweep checks each kernel with
  :func:`check_launch` before anything is launched;
* or inside ``launch``, call :func:`check_launch` (or raise
  :class:`LaunchConfigError` yourself) before enqueueing; the sweep records the
  configuration as pruned.

Operations may call :func:`check_launch` in their normal path too: it gives a
clear error instead of ``CL_INVALID_WORK_GROUP_SIZE``.
"""

import functools
import json
import math
import os
import threading
import time
import warnings


SCHEMA = 1
_lock = threading.Lock()
_loaded = {"path": None, "stamp": None, "data": None, "index": None, "answers": None, "checked": 0.0}
#: seconds between looks at the cache file (see :func:`_state`)
RECHECK_S = 0.05
#: counters the tests read: how often the file was parsed
stats = {"reads": 0}
_warned = set()

#: modules whose import registers the library's Tunables (missing ones are
#: skipped); :func:`load_families` also imports every other clkernels.host module
FAMILY_MODULES = ("clkernels.host.copy", "clkernels.host.twobody", "clkernels.host.cellgrid",
                  "clkernels.host.segsort", "clkernels.host.rectjoin")


def cache_path():
    """The tuning cache file (``CLKERNELS_TUNE_CACHE`` overrides the default)."""
    p = os.environ.get("CLKERNELS_TUNE_CACHE")
    if p:
        return p
    return _default_cache_path()


@functools.lru_cache(maxsize=1)
def _default_cache_path():
    # platformdirs takes ~0.1 ms a call: looked up once (every call resolves a plan)
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("clkernels"), "tuning.json")


def generation():
    """A value that changes whenever the tuning cache file (or its path) does:
    memoized plans are keyed on it."""
    _state()
    return _loaded["path"], _loaded["stamp"]


def size_bucket(n):
    """log2 size bucket of a problem size (0 for n <= 1)."""
    return int(math.log2(n)) if n > 1 else 0


def dtype_name(dtype):
    """Canonical text of a dtype for keys ('float32'); None stays 'None'."""
    try:
        return _dtype_name(dtype)
    except TypeError:                   # unhashable
        return _dtype_name.__wrapped__(dtype)


@functools.lru_cache(maxsize=256)
def _dtype_name(dtype):
    if dtype is None:
        return "None"
    try:
        import numpy as np

        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def key_field(s):
    """The text of ``s`` as a field of a cache key ('|' separates fields)."""
    return str(s).replace("|", "/")


_clean = key_field


def entry_key(device, op, template_hash, dtype, dims, bucket, driver=True):
    """Cache key; ``driver=False`` puts ``*`` in the driver field (a pattern)."""
    parts = [f"v{SCHEMA}", _clean(device.platform_name), _clean(device.name),
             _clean(device.driver_version) if driver else "*", _clean(op), str(template_hash),
             dtype_name(dtype), _clean(dims), str(bucket)]
    return "|".join(parts)


def split_key(key):
    """The 9 fields of a key, or None if it is not one of this schema."""
    parts = key.split("|") if isinstance(key, str) else []
    if len(parts) != 9 or parts[0] != f"v{SCHEMA}":
        return None
    try:
        int(parts[8])
    except ValueError:
        return None
    return parts


def _warn_once(tag, msg):
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


def valid_entry(e):
    return isinstance(e, dict) and isinstance(e.get("params"), dict)


def read_file(path):
    """(entries, error) of a cache file: ({}, None) if absent; error is text."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as e:
        return {}, f"{type(e).__name__}: {e}"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return {}, f"unknown schema {data.get('schema') if isinstance(data, dict) else None!r}"
    entries = data.get("entries", {})
    if not isinstance(entries, dict):
        return {}, "entries is not an object"
    return entries, None


def _build_index(entries, path):
    """(platform, device, op, hash, dtype, dims) -> driver -> bucket -> entry."""
    index, bad = {}, 0
    for k, e in entries.items():
        parts = split_key(k)
        if parts is None or not valid_entry(e):
            bad += 1
            continue
        _, plat, dev, drv, op, th, dt, dims, b = parts
        index.setdefault((plat, dev, op, th, dt, dims), {}).setdefault(drv, {})[int(b)] = e
    if bad:
        warnings.warn(f"ignoring {bad} malformed entr{'y' if bad == 1 else 'ies'} in the tuning "
                      f"cache {path}", RuntimeWarning, stacklevel=4)
    return index


def _state():
    """The memoized (entries, index, answers) for the current cache file. The
    file is looked at (``os.stat``) at most every :data:`RECHECK_S` seconds
    for the same path: every call of the library resolves a plan, and a stat
    (raising where there is no file) cost 10-20 us on a GPU host. Writers in
    this process (the tuner, :mod:`autotune.cache`) call :func:`invalidate`;
    a cache written by another process is seen within that interval."""
    path = cache_path()
    now = time.monotonic()
    with _lock:
        if _loaded["path"] == path and _loaded["data"] is not None and now - _loaded["checked"] < RECHECK_S:
            return _loaded["data"], _loaded["index"], _loaded["answers"]
    try:
        st = os.stat(path)
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    with _lock:
        if _loaded["path"] == path and _loaded["stamp"] == stamp and _loaded["data"] is not None:
            _loaded["checked"] = now
            return _loaded["data"], _loaded["index"], _loaded["answers"]
    entries, err = ({}, None) if stamp is None else read_file(path)
    if stamp is not None:
        stats["reads"] += 1
    if err:
        warnings.warn(f"ignoring unreadable tuning cache {path}: {err}; run 'autotune' to rebuild it",
                      RuntimeWarning, stacklevel=4)
    index, answers = _build_index(entries, path), {}
    with _lock:
        _loaded.update(path=path, stamp=stamp, data=entries, index=index, answers=answers, checked=now)
    return entries, index, answers


def state_token():
    """An object that stays the same while the loaded cache does (a new one
    after the file changes or :func:`invalidate`): memos of lookups keep it
    to know they still hold."""
    return _state()[2]


def invalidate():
    """Forget the memoized cache (the tuner calls this after writing)."""
    with _lock:
        _loaded.update(path=None, stamp=None, data=None, index=None, answers=None, checked=0.0)


def _nearest(buckets, bucket):
    """The entry of the bucket nearest ``bucket`` (ties -> the larger one)."""
    b = min(buckets, key=lambda x: (abs(x - bucket), -x))
    return b, buckets[b]


def lookup_entry(device, op, template_hash, dtype=None, dims=None, size=1):
    """(entry or None, source, key used or None) -- see :func:`lookup`."""
    _, index, answers = _state()
    bucket = size_bucket(size)
    akey = (device.platform_name, device.name, device.driver_version, op, template_hash,
            dtype_name(dtype), str(dims), bucket)
    hit = answers.get(akey)
    if hit is not None:
        return hit
    plat, dev, drv = _clean(device.platform_name), _clean(device.name), _clean(device.driver_version)
    ikey = (plat, dev, _clean(op), str(template_hash), dtype_name(dtype), _clean(dims))
    drivers = index.get(ikey)
    ans = (None, "default", None)
    if drivers:
        if drv in drivers:
            b, e = _nearest(drivers[drv], bucket)
            ans = (e, "tuned", "|".join((f"v{SCHEMA}", plat, dev, drv) + ikey[2:] + (str(b),)))
        else:
            best = None
            for d, buckets in sorted(drivers.items()):
                b, e = _nearest(buckets, bucket)
                if best is None or (abs(b - bucket), -b) < (abs(best[1] - bucket), -best[1]):
                    best = (d, b, e)
            d, b, e = best
            ans = (e, "fallback", "|".join((f"v{SCHEMA}", plat, dev, d) + ikey[2:] + (str(b),)))
    elif any(k[:3] == (plat, dev, _clean(op)) and k[3] != str(template_hash) for k in index):
        _warn_once(("stale", op, dev),
                   f"the tuning cache holds entries for {op} on {device.name} made for other "
                   f"templates (stale; ignored): rerun 'autotune --ops {op.split('.')[0]}'")
    answers[akey] = ans
    return ans


def lookup(device, op, template_hash, dtype=None, dims=None, size=1):
    """(params, source) for an operation: source is 'tuned' (this device and
    driver; the nearest tuned size bucket), 'fallback' (same device, another
    driver version) or 'default' ({})."""
    e, source, _ = lookup_entry(device, op, template_hash, dtype, dims, size)
    if e is None:
        return {}, "default"
    return dict(e["params"]), source


class Tunable:
    """An operation's tuning space, declared next to its plan.

    op         cache name, e.g. "twobody.count" (``autotune --ops twobody``
               selects every op named "twobody" or "twobody.*")
    templates  template files whose contents key the cache (hash)
    space      parameter name -> list of candidates, or a callable
               (device) -> list (e.g. work-group sizes from the device limits,
               see :func:`clkernels.host.core.launch.wg_candidates`)
    default    (device, problem) -> params: model-based defaults (always valid);
               every swept configuration is the defaults overlaid with one
               point of the space
    restrict   (params, device) -> bool: the plan's validation (a cheap check
               before building); also applied to cached parameters by
               :meth:`resolve`, where a failing (or raising) entry is ignored
               with one warning
    problem_defaults  optional dict merged under every problem given to
               :meth:`resolve` (e.g. {"dtype": "uint8", "dims": 1} for an op
               whose dtype is fixed, so ``tuning_info(op, size=n)`` finds it)

    The tuner's side is attached by the family's ``tune.py`` (imported only by
    :mod:`clkernels.autotune`) through :meth:`benchmark`:

    problems   (quick) or (quick, device) -> list of problem dicts, each with
               "size" (the bucket is log2 of it), "dtype", "dims" and whatever
               else setup needs; JSON-able values (the cache stores the problem
               so that ``autotune --verify`` can re-create it)
    setup      (device, problem) -> state: inputs made on the device once
    launch     (device, params, state) -> (events, output): one run; ``events``
               a list of events or an :class:`~.launch.Events`; ``output``
               (numpy arrays / numbers / tuples / dicts of them, or a
               zero-argument callable returning one, called only when the
               sweep checks it) is compared exactly with the default
               configuration's output, so it must not depend on the
               configuration. Raise :class:`~.launch.LaunchConfigError` (e.g.
               via ``check_launch``) for a configuration that cannot launch.
    kernels    optional (device, params) -> [(kernel, wg_size[, local_bytes])]:
               builds the configuration and names what it launches, so the
               sweep prunes unlaunchable configurations before any launch;
               an exception there (BuildError, a template's ValueError) is
               recorded as the configuration's build failure
    """

    def __init__(self, op, templates, space, default, restrict=None, problem_defaults=None, *,
                 problems=None, setup=None, launch=None, kernels=None):
        self.op = op
        self.templates = tuple(templates)
        self.space = dict(space)
        self.default = default
        self.restrict = restrict or (lambda params, device: True)
        self.problem_defaults = dict(problem_defaults or {})
        self.problems = self.setup = self.launch = self.kernels = None
        if problems is not None:
            self.benchmark(problems, setup, launch, kernels)

    def benchmark(self, problems, setup, launch, kernels=None):
        """Attach the tuner's side (see the class docstring); returns self."""
        self.problems, self.setup, self.launch, self.kernels = problems, setup, launch, kernels
        return self

    @property
    def has_benchmark(self):
        return self.launch is not None

    @property
    def template_hash(self):
        from .build import template_hash

        return template_hash(*self.templates)

    def space_for(self, device):
        """The space with callables evaluated for ``device``."""
        return {k: list(v(device) if callable(v) else v) for k, v in self.space.items()}

    def problems_for(self, quick, device):
        """The representative problems (calls ``problems(quick[, device])``)."""
        import inspect

        try:
            n = len(inspect.signature(self.problems).parameters)
        except (TypeError, ValueError):
            n = 1
        return list(self.problems(quick, device) if n >= 2 else self.problems(quick))

    def resolve_info(self, device, problem):
        """(params, source, entry, key): :meth:`resolve` with the cache entry used."""
        if self.problem_defaults:
            problem = {**self.problem_defaults, **problem}
        params = dict(self.default(device, problem))
        entry, source, key = lookup_entry(device, self.op, self.template_hash, problem.get("dtype"),
                                          problem.get("dims"), problem.get("size", 1))
        if entry is None:
            return params, "default", None, None
        cached = {k: v for k, v in entry["params"].items() if k in self.space}
        merged = {**params, **cached}
        try:
            ok = bool(self.restrict(merged, device))
        except Exception:      # a malformed entry (wrong types, ...) is as invalid as a failing one
            ok = False
        if not ok:
            _warn_once(("restrict", self.op, key),
                       f"ignoring the cached configuration {cached} of {self.op}: "
                       f"it does not satisfy the operation's restrictions")
            return params, "default", None, None
        return merged, source, entry, key

    def resolve(self, device, problem):
        """(params, source): defaults overlaid with the cached winner, if any."""
        params, source, _, _ = self.resolve_info(device, problem)
        return params, source


#: op name -> Tunable; families register theirs at import
REGISTRY = {}


def register(tunable):
    REGISTRY[tunable.op] = tunable
    return tunable


def load_families(extra=(), benchmarks=False):
    """Import the library's families (``FAMILY_MODULES``, the ``extra`` ones and
    those named in ``CLKERNELS_TUNE_MODULES``, comma-separated) so that their
    Tunables register; with ``benchmarks`` also each family's ``tune`` module
    (the tuner's side: problems, setup, launch). A missing module is skipped;
    one that fails to import is skipped with a warning. Returns {module:
    error text} of the failures."""
    import importlib
    import importlib.util

    env = [m.strip() for m in os.environ.get("CLKERNELS_TUNE_MODULES", "").split(",") if m.strip()]
    names = list(dict.fromkeys((*FAMILY_MODULES, *extra, *env)))
    if benchmarks:
        names += [f"{m}.tune" for m in FAMILY_MODULES]
    failed = {}
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except (ImportError, ValueError):
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # a broken family must not take the tuner down
            failed[name] = f"{type(e).__name__}: {e}"
            warnings.warn(f"could not import {name} (its operations are not tuned): {failed[name]}",
                          RuntimeWarning, stacklevel=2)
    return failed


def select_ops(names=None):
    """Registered Tunables whose op is a name in ``names`` or starts with name + '.'."""
    if not names:
        return [REGISTRY[k] for k in sorted(REGISTRY)]
    out = []
    for k in sorted(REGISTRY):
        if any(k == n or k.startswith(n + ".") for n in names):
            out.append(REGISTRY[k])
    return out


def tuning_info(op, device=None, **problem):
    """Which configuration a call of ``op`` on ``device`` with ``problem``
    (``size=``, ``dtype=``, ``dims=``, ...) uses, and where it came from.

    Returns a dict: ``op``, ``device``, ``params``, ``source`` ('tuned' |
    'fallback' | 'default'), ``defaults`` (the model-based parameters),
    ``bucket`` (of the call) and ``tuned_bucket`` (of the entry used), ``key``,
    ``cache`` (file path), and ``entry`` (the tuner's record: times, speedup,
    when) or None.
    """
    from .device import as_device

    dev = as_device(device)
    if op not in REGISTRY:
        load_families()
    if op not in REGISTRY:
        known = ", ".join(sorted(REGISTRY)) or "none"
        raise ValueError(f"unknown tunable operation {op!r} (registered: {known})")
    t = REGISTRY[op]
    problem = {**t.problem_defaults, **problem}
    problem.setdefault("size", 1)
    params, source, entry, key = t.resolve_info(dev, problem)
    return {
        "op": op, "device": dev.name, "driver": dev.driver_version, "params": params,
        "source": source, "defaults": dict(t.default(dev, problem)),
        "bucket": size_bucket(problem["size"]),
        "tuned_bucket": int(key.rsplit("|", 1)[1]) if key else None,
        "key": key, "cache": cache_path(),
        "entry": {k: v for k, v in entry.items() if k != "params"} if entry else None,
    }
