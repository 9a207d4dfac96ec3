"""Writing the tuning cache: atomic, merged under a lock, corruption-tolerant.

Every write takes an exclusive ``flock`` on ``<cache>.lock``, re-reads the
file, applies the change, writes a temporary file in the same directory,
``fsync``s it and ``os.replace``s it over the cache. Two sweeps writing at the
same time therefore both land, and a killed sweep leaves either the old or the
new file, never a torn one. A corrupt file is moved aside to
``<cache>.corrupt`` (with a warning) and replaced by a fresh one.

Reading for lookups is :mod:`clkernels.host.tuning`'s business; this module is
only imported by the tuner.
"""

import contextlib
import json
import os
import tempfile
import warnings

from ..host.core import tuning

try:
    import fcntl
except ImportError:  # not POSIX: writes stay atomic, concurrent merges are not locked
    fcntl = None


@contextlib.contextmanager
def locked(path=None):
    """Hold the cache's lock file exclusively (blocks until it is free)."""
    path = path or tuning.cache_path()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".lock", "a+") as f:
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def check_writable(path=None, lock=True):
    """Raise OSError now, before a long sweep, if ``path`` (default: the
    cache) cannot be written: its directory is created if missing and, with
    ``lock``, the lock file is opened."""
    path = os.path.abspath(path or tuning.cache_path())
    d = os.path.dirname(path)
    if lock:
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise OSError(e.errno, f"cannot create the directory of the tuning cache ({e.strerror})",
                          d) from None
        with open(path + ".lock", "a+"):
            pass
    elif not os.path.isdir(d):
        raise FileNotFoundError(2, "No such directory", d)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise PermissionError(13, "Permission denied", path)


def read(path=None, warn=True, move_corrupt=False):
    """The valid entries of the cache file ({} if absent or corrupt).

    Malformed entries (bad key or no ``params`` object) are dropped with a
    warning; a corrupt file is reported and, with ``move_corrupt``, moved aside.
    """
    path = path or tuning.cache_path()
    entries, err = tuning.read_file(path)
    if err:
        if warn:
            warnings.warn(f"the tuning cache {path} is corrupt ({err}); starting a fresh one"
                          + (f" (the old file is kept as {path}.corrupt)" if move_corrupt else ""),
                          RuntimeWarning, stacklevel=3)
        if move_corrupt:
            with contextlib.suppress(OSError):
                os.replace(path, path + ".corrupt")
        return {}
    good = {k: e for k, e in entries.items() if tuning.split_key(k) and tuning.valid_entry(e)}
    if warn and len(good) != len(entries):
        n = len(entries) - len(good)
        warnings.warn(f"dropping {n} malformed entr{'y' if n == 1 else 'ies'} of the tuning cache {path}",
                      RuntimeWarning, stacklevel=3)
    return good


def _write(path, entries):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"schema": tuning.SCHEMA, "entries": entries}, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    tuning.invalidate()
    _sweep_temp_files(d, os.path.basename(path))


def _sweep_temp_files(d, base, age=3600):
    """Remove temporary files that killed writers left behind (older than ``age`` s)."""
    import time

    now = time.time()
    with contextlib.suppress(OSError):
        for name in os.listdir(d):
            if name.startswith("." + base + ".") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    f = os.path.join(d, name)
                    if now - os.stat(f).st_mtime > age:
                        os.unlink(f)


def modify(change, path=None):
    """Apply ``change(entries) -> entries`` to the cache atomically, under the lock."""
    path = path or tuning.cache_path()
    with locked(path):
        entries = read(path, move_corrupt=True)
        new = change(dict(entries))
        _write(path, new)
    return new


def update(new_entries, path=None):
    """Merge ``{key: entry}`` into the cache (entries replace same-key ones)."""
    bad = [k for k, e in new_entries.items() if not (tuning.split_key(k) and tuning.valid_entry(e))]
    if bad:
        raise ValueError(f"not tuning cache entries: {bad[:3]}")
    return modify(lambda entries: {**entries, **new_entries}, path)


def remove(predicate, path=None):
    """Drop the entries for which ``predicate(key, entry)`` is true; returns how many."""
    gone = []

    def change(entries):
        keep = {}
        for k, e in entries.items():
            (gone.append(k) if predicate(k, e) else keep.__setitem__(k, e))
        return keep
    modify(change, path)
    return len(gone)


def clear(path=None):
    """Delete the whole cache file."""
    path = path or tuning.cache_path()
    with locked(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    tuning.invalidate()


def export(dest, predicate=None, path=None):
    """Write the (selected) entries to the file ``dest``; returns how many."""
    entries = read(path)
    if predicate is not None:
        entries = {k: e for k, e in entries.items() if predicate(k, e)}
    _write_plain(dest, entries)
    return len(entries)


def _write_plain(dest, entries):
    d = os.path.dirname(os.path.abspath(dest))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(dest) + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"schema": tuning.SCHEMA, "entries": entries}, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, dest)


def import_(src, path=None):
    """Merge the valid entries of the file ``src`` into the cache; returns how many.

    Raises ValueError if ``src`` is not a tuning cache file of this schema.
    """
    entries, err = tuning.read_file(src)
    if err:
        raise ValueError(f"{src} is not a clkernels tuning cache: {err}")
    if not os.path.exists(src):
        raise ValueError(f"{src} does not exist")
    good = {k: e for k, e in entries.items() if tuning.split_key(k) and tuning.valid_entry(e)}
    if len(good) != len(entries):
        warnings.warn(f"skipping {len(entries) - len(good)} malformed entries of {src}",
                      RuntimeWarning, stacklevel=2)
    if good:
        update(good, path)
    return len(good)
