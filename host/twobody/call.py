"""One two-body call from inputs to result: the point sets on the device(s),
their bounds (one device reduction and one small read), the scaling and the
plan, then the launches (:mod:`.execute`). :mod:`.api` builds on it."""

import math

import numpy as np

from ..core import inputs
from ..core.device import as_device
from ..core.errors import DeviceCapabilityError, warn_user
from ..core.launch import Events
from ..core.transfer import upload
from ..outputs.exact import Scaling, choose_scaling, representable
from ..primitives.points import Bounds, bounds as device_bounds
from . import execute
from .plan import Problem, Plan, expected_fraction
from .stats import CountStat, images_per_dim

IMAGES = ("nearest", "all")


# ------------------------------------------------------------------ devices
def _devices(device, *arrays):
    """[Device, ...] of a call (``device`` may be a list)."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("device= list is empty")
        devs = [as_device(d) for d in device]
        if len({d.cl_device.int_ptr for d in devs}) < len(devs):
            warn_user("device= names one device more than once (" + ", ".join(d.name for d in devs)
                      + "): they share its time")
    else:
        devs = [inputs.device_for(device, *arrays)]
    inputs.check_context(devs[0], *arrays)
    return devs


def options_dict(options):
    opts = dict(options.pop("plan", None) or {})
    opts.update({k: v for k, v in options.items() if v is not None})
    return opts


# -------------------------------------------------------------- the engine
class Call:
    """One call: inputs on the device, bounds, then the plan and the launches
    (``run(stat, exact, options)`` returns the statistic's raw result)."""

    def __init__(self, x, y, device, *, box=None, images="nearest", queue=None, events=None,
                 wait_for=None):
        self.X, self.Y = inputs.point_pair(x, y)
        self.devs = _devices(device, self.X.array, None if self.Y is None else self.Y.array)
        self.dev = self.devs[0]
        for d in self.devs:
            d.check_dtype(self.X.dtype)
        self.q = queue or self.dev.queue
        self.box = inputs.box(box, self.X.d)
        if images not in IMAGES:
            raise ValueError(f"images must be one of {IMAGES}, got {images!r}")
        if images == "all" and self.box is None:
            raise ValueError("images='all' needs a periodic box")
        self.images = images
        self.events = Events() if events is None else events
        self.wait_for = wait_for
        self._orig = {}
        self._bounds = False

    @property
    def empty(self):
        X, Y = self.X, self.Y
        return X.n == 0 or (Y is None and X.n < 2) or (Y is not None and Y.n == 0)

    def original(self, dev, P):
        """The device array of P's original coordinates on ``dev`` (uploaded once)."""
        key = (id(dev), id(P))
        if key not in self._orig:
            if P.on_device and dev is self.dev:
                self._orig[key] = P.array
            else:
                host = P.array.get() if P.on_device else P.array   # another device's context
                q = self.q if dev is self.dev else dev.queue
                self._orig[key] = upload(dev, host, queue=q, events=self.events, wait_for=self.wait_for)
        return self._orig[key]

    def bounds(self):
        """Bounds of x and y together (None without points), computed once on the device."""
        if self._bounds is False:
            bs = []
            for P, name in ((self.X, "x"), (self.Y, "y")):
                if P is not None and P.n:
                    bs.append(device_bounds(self.q, self.original(self.dev, P), name=name,
                                            events=self.events) if self.resident
                              else _streamed_bounds(self, P, name))
            self._bounds = Bounds.union(*bs)
        return self._bounds

    def max_distance(self):
        """The largest pair distance there can be (float64): the half-box
        diagonal (minimum images), or the bounding box's diagonal."""
        if self.box is not None:
            return float(np.sqrt(np.sum((0.5 * self.box) ** 2)))
        b = self.bounds()
        return 0.0 if b is None else b.diagonal

    def default_range(self):
        """numpy.histogram's default range, for pair distances: 0 .. the largest
        distance (widened by a relative 1e-6 so the farthest pair stays
        inside); with a box 0 .. half its shortest side (beyond it the
        minimum image misses images)."""
        if self.box is not None:
            return (0.0, 0.5 * float(np.min(self.box)))
        maxd = self.max_distance()
        if not math.isfinite(maxd):
            raise ValueError("the largest pair distance overflows float64: give range=(lo, hi)")
        return (0.0, maxd * (1 + 1e-6))

    def check_reach(self, reach, what):
        if self.box is not None and self.images == "nearest" and reach > 0.5 * float(np.min(self.box)):
            raise ValueError(f"{what} = {reach:g} exceeds half the shortest box side "
                             f"({0.5 * float(np.min(self.box)):g}): the minimum image misses other "
                             "images within it; pass images='all' to count every periodic image")

    def fraction(self, r):
        b = self.bounds()
        if b is None:
            return 1.0
        return expected_fraction(r, b.extent, self.box)

    def run(self, stat, exact, options, progress=None):
        """The stat's raw result over all pairs (``progress``: :func:`..core.progress.bar`'s)."""
        X, Y = self.X, self.Y
        builtin = stat.builtin          # the built-in distance: scaled coordinates, exactness
        b = self.bounds()
        if builtin and not exact and b is not None and stat.thresholds():
            # the format cannot hold both the coordinates and the thresholds (their
            # ratio passes ~2^100 in float32): the fast path alone would be wrong,
            # so such inputs are decided exactly anyway
            exact = not representable(X.dtype, b, self.box, stat.thresholds())
        exact = exact and stat.out != "sum"
        if builtin and exact and not self.dev.fp64:
            raise _no_fp64(self.dev)
        nimg = ()
        if self.images == "all":
            nimg = images_per_dim(self.box, max(stat.thresholds() or [0.0]))
        sc = (choose_scaling(X.dtype, X.d, b, box=self.box, thresholds=stat.thresholds()) if builtin
              else Scaling(X.dtype, X.d, 1.0))
        fields = stat.fields(exact, X.dtype.name, sc)
        if self.images == "all":
            fields["fullrange"] = False       # image distances exceed the minimum-image maximum
        if isinstance(stat, CountStat) and stat.dot_ok(sc, exact) and self.box is None:
            sc = choose_scaling(X.dtype, X.d, b, thresholds=stat.thresholds(), center=True)
            fields["dot_ok"] = True
        problem = Problem(dims=X.d, real=X.dtype.name, nl=X.n, nr=None if Y is None else Y.n,
                          box=self.box is not None, images=self.images, nimg=nimg, **fields)
        plan = Plan.resolve(self.dev, problem, devices=self.devs, **options)
        if plan.form != "dot" and sc.shift is not None:     # the dot form was not taken
            sc = choose_scaling(X.dtype, X.d, b, box=self.box, thresholds=stat.thresholds())
        stage = stat.stage(sc, problem, plan, self.box)
        devices = [(d, self.q if d is self.dev else d.queue, (self.source(d, X), self.source(d, Y)))
                   for d in self.devs]
        return execute.run(devices, plan, problem, sc, stage, self.events, self.box, progress)

    # ------------------------------------------------- data larger than devices
    @property
    def resident(self):
        """Whether the original coordinates live on every device (else numpy
        inputs stream through in chunks: at most a quarter of the smallest
        device's memory for the points)."""
        nbytes = sum(P.array.nbytes for P in (self.X, self.Y) if P is not None)
        return any(P is not None and P.on_device for P in (self.X, self.Y)) or \
            nbytes <= min(d.global_mem_size for d in self.devs) // 4

    def source(self, dev, P):
        if P is None:
            return None
        if self.resident:
            return execute.Source(P.n, array=self.original(dev, P))
        return execute.Source(P.n, host=P.array)


def _streamed_bounds(call, P, name):
    """Bounds of a numpy point set too large for the device, a chunk at a time."""
    step = max(1, (call.dev.global_mem_size // 16) // max(P.array.itemsize * P.d, 1))
    bs = []
    for lo in range(0, P.n, step):
        part = upload(call.dev, P.array[lo:lo + step], queue=call.q, events=call.events)
        bs.append(device_bounds(call.q, part, name=name, events=call.events))
    return Bounds.union(*bs)


def _no_fp64(device):
    return DeviceCapabilityError(f"exact results are decided in double precision, which {device.name} "
                                 "lacks (cl_khr_fp64); pass exact=False")
