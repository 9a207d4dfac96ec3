"""Progress of long calls (``progress=``): tqdm when it is installed, silent
otherwise, or forced on or off, or a callable."""

import sys


class _Lines:
    """A line on stderr at every further tenth of the work (no tqdm)."""

    def __init__(self, total, desc):
        self.total, self.desc, self.done, self.shown = total, desc, 0, -1

    def update(self, n):
        self.done += n
        if self.total is None:
            print(f"{self.desc}: {self.done}", file=sys.stderr, flush=True)
            return
        tenth = 10 * self.done // max(self.total, 1)
        if tenth > self.shown:
            self.shown = tenth
            print(f"{self.desc}: {100 * self.done // max(self.total, 1)}%", file=sys.stderr, flush=True)

    def close(self):
        pass


class _Call:
    def __init__(self, fn, total):
        self.fn, self.total, self.done = fn, total, 0

    def update(self, n):
        self.done += n
        self.fn(self.done, self.total)

    def close(self):
        pass


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def check(progress):
    """``progress`` if it is None, True, False or a callable, else ValueError
    (calls check it before they enqueue anything)."""
    if progress is None or isinstance(progress, bool) or callable(progress):
        return progress
    raise ValueError(f"progress must be None, True, False or a callable, got {progress!r}")


def bar(progress, total, desc, *, long=True, unit="block pairs"):
    """An object with ``update(units)`` and ``close()`` for ``total`` units of
    work, or None for no progress. ``progress``: None (a tqdm bar when tqdm is
    installed and the work is ``long``), True (always: tqdm, else a line on
    stderr per tenth), False (none), or a callable ``fn(done, total)``.
    ``total`` may be None (unknown: no tenths; a callable gets None)."""
    if progress is False or (progress is None and not long):
        return None
    if callable(progress) and progress is not True:
        return _Call(progress, total)
    check(progress)
    tqdm = _tqdm()
    if tqdm is not None:
        return tqdm(total=total, desc=desc, unit=unit, leave=False)
    return _Lines(total, desc) if progress else None
