"""Tuned-configuration lookup: the one function the host side reads tuning with.

The tuner (clkernels.autotune) writes the cache; operations call
:func:`lookup` and merge what it returns over their model-based defaults.
"""

import json
import math
import os
import threading
import warnings

SCHEMA = 1
_lock = threading.Lock()
_loaded = {"path": None, "mtime": None, "data": None}


def cache_path():
    """The tuning cache file (``CLKERNELS_TUNE_CACHE`` overrides the default)."""
    p = os.environ.get("CLKERNELS_TUNE_CACHE")
    if p:
        return p
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("clkernels"), "tuning.json")


def size_bucket(n):
    """log2 size bucket of a problem size (0 for n <= 1)."""
    return int(math.log2(n)) if n > 1 else 0


def entry_key(device, op, template_hash, dtype, dims, bucket, driver=True):
    parts = [f"v{SCHEMA}", device.platform_name, device.name,
             device.driver_version if driver else "*", op, template_hash,
             str(dtype), str(dims), str(bucket)]
    return "|".join(parts)


def load_cache():
    """The parsed cache (memoized on the file's mtime); {} if absent or corrupt."""
    path = cache_path()
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return {}
    with _lock:
        if _loaded["path"] == path and _loaded["mtime"] == mtime:
            return _loaded["data"]
    try:
        with open(path) as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError("unknown schema")
        entries = data.get("entries", {})
        if not isinstance(entries, dict):
            raise ValueError("entries is not an object")
    except (OSError, ValueError) as e:
        warnings.warn(f"ignoring unreadable tuning cache {path}: {e}", RuntimeWarning, stacklevel=3)
        entries = {}
    with _lock:
        _loaded.update(path=path, mtime=mtime, data=entries)
    return entries


def lookup(device, op, template_hash, dtype=None, dims=None, size=1):
    """(params, source) for an operation: source is 'tuned' (exact key),
    'fallback' (same device, another driver version) or 'default' ({})."""
    entries = load_cache()
    bucket = size_bucket(size)
    for driver, source in ((True, "tuned"), (False, "fallback")):
        if driver:
            e = entries.get(entry_key(device, op, template_hash, dtype, dims, bucket))
        else:
            prefix = entry_key(device, op, template_hash, dtype, dims, bucket, driver=False)
            e = next((v for k, v in entries.items()
                      if _same_but_driver(k, prefix)), None)
        if isinstance(e, dict) and isinstance(e.get("params"), dict):
            return dict(e["params"]), source
    return {}, "default"


def _same_but_driver(key, prefix):
    a, b = key.split("|"), prefix.split("|")
    return len(a) == len(b) and all(x == y for i, (x, y) in enumerate(zip(a, b)) if i != 3)


class Tunable:
    """An operation's tuning space, declared next to the operation.

    op         cache name, e.g. "twobody.sdh"
    templates  template files whose contents key the cache (hash)
    space      parameter name -> list of candidates
    restrict   (params, device) -> bool: cheap filter before building
    default    (device, problem) -> params: model-based defaults (always valid)
    problems   (quick) -> list of problem dicts, each with "size", "dtype", "dims"
    setup      (device, problem) -> state: inputs made on the device once
    launch     (device, params, state) -> (events, output): one run; ``output``
               is compared with the default configuration's output (numpy
               arrays / ints, compared exactly)
    problem_key (problem) -> (dtype, dims, size) used for lookup buckets
    """

    def __init__(self, op, templates, space, default, problems, setup, launch,
                 restrict=None):
        self.op = op
        self.templates = tuple(templates)
        self.space = dict(space)
        self.default = default
        self.problems = problems
        self.setup = setup
        self.launch = launch
        self.restrict = restrict or (lambda params, device: True)

    @property
    def template_hash(self):
        from .build import template_hash

        return template_hash(*self.templates)

    def resolve(self, device, problem):
        """(params, source): defaults overlaid with the cached winner, if any."""
        params = dict(self.default(device, problem))
        cached, source = lookup(device, self.op, self.template_hash, problem.get("dtype"),
                                problem.get("dims"), problem.get("size", 1))
        if cached and self.restrict({**params, **cached}, device):
            params.update(cached)
        else:
            source = "default"
        return params, source


#: op name -> Tunable; families register theirs at import
REGISTRY = {}


def register(tunable):
    REGISTRY[tunable.op] = tunable
    return tunable
