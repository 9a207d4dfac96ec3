"""Launch helpers: launch-configuration checks, work-group arithmetic, named events.

Every operation of the library follows one execution contract::

    op(queue, *device_arrays, wait_for=None, allocator=None) -> (result, Events)

:class:`Events` maps step names ("upload", "bounds", "kernel", "reduce",
"read", ...) to the OpenCL events enqueued for that step, in order; the
benchmark and the tuner read device time by step, never by position.
"""

import pyopencl as cl

from .errors import ClkernelsError


class LaunchConfigError(ClkernelsError):
    """A configuration the kernel cannot launch on this device (the sweep prunes it)."""


def check_launch(device, kernel, wg_size, local_bytes=0):
    """Raise :class:`LaunchConfigError` if ``kernel`` cannot run work-groups of
    ``wg_size`` (the kernel's CL_KERNEL_WORK_GROUP_SIZE, its compiled
    reqd_work_group_size) or needs more local memory than the device has."""
    info = cl.kernel_work_group_info
    d = device.cl_device
    limit = kernel.get_work_group_info(info.WORK_GROUP_SIZE, d)
    if wg_size > min(limit, device.max_work_group_size):
        raise LaunchConfigError(f"work-group size {wg_size} exceeds the kernel's limit "
                                f"{min(limit, device.max_work_group_size)} on {device.name}")
    try:
        reqd = kernel.get_work_group_info(info.COMPILE_WORK_GROUP_SIZE, d)
    except cl.Error:
        reqd = None
    if reqd and reqd[0] and reqd[0] != wg_size:
        raise LaunchConfigError(f"work-group size {wg_size} differs from the kernel's "
                                f"reqd_work_group_size {reqd[0]}")
    local = kernel.get_work_group_info(info.LOCAL_MEM_SIZE, d) + int(local_bytes)
    if local > device.local_mem_size:
        raise LaunchConfigError(f"the kernel needs {local} bytes of local memory; "
                                f"{device.name} has {device.local_mem_size}")


def check_wg_size(device, wg):
    """ValueError unless ``wg`` is a power of two the device can launch."""
    if isinstance(wg, bool) or wg < 1 or wg & (wg - 1) or wg > device.max_work_group_size:
        raise ValueError(f"wg_size must be a power of two <= {device.max_work_group_size}, got {wg}")


def wg_candidates(device, lo=32, hi=1024):
    """Powers of two from ``lo`` to min(``hi``, the device's max work-group size)."""
    out, w = [], lo
    while w <= min(hi, device.max_work_group_size):
        out.append(w)
        w *= 2
    return out


def pow2_floor(n):
    """The largest power of two <= n (n >= 1)."""
    return 1 << (int(n).bit_length() - 1)


def groups(n, wg):
    """Work-groups of ``wg`` work-items that cover ``n`` items (at least one)."""
    return max(1, -(-int(n) // int(wg)))


def global_size(n, wg):
    """``n`` rounded up to a multiple of ``wg`` (at least ``wg``)."""
    return groups(n, wg) * int(wg)


class Events(dict):
    """Step name -> list of events, in enqueue order (a dict keeps insertion
    order; the staged copies' steps as the copy threads enqueued them).

    ``add(step, event)`` records one (None is ignored) and returns it;
    ``all()`` lists every event; ``seconds(*steps)`` is the device time from
    the first start to the last end of the named steps (all when none named),
    waiting for them first.
    """

    def add(self, step, event):
        if event is not None:
            self.setdefault(step, []).append(event)
        return event

    def all(self, *steps):
        names = steps or tuple(self)
        return [e for s in names for e in self.get(s, ())]

    def wait(self):
        evs = self.all()
        if evs:
            cl.wait_for_events(evs)
        return self

    def seconds(self, *steps):
        from .timing import event_seconds

        evs = self.all(*steps)
        return event_seconds(evs) if evs else 0.0

    def __repr__(self):
        return "Events(" + ", ".join(f"{k}: {len(v)}" for k, v in self.items()) + ")"
