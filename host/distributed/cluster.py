"""One dask worker per OpenCL device: :class:`DevicePlugin` pins
``CLKERNELS_DEVICE`` in each worker process before clkernels picks its
device, and :func:`local_cluster` starts a ``LocalCluster`` of one worker
process (one thread) per device, as dask-cuda's ``LocalCUDACluster`` does
for CUDA GPUs. Workers are long-lived processes: each builds its kernels
once (clkernels caches built programs per process) and reuses them for
every task it runs."""

import os

import pyopencl as cl
from distributed import LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

from ..core.device import _all_cl_devices, default_device

ENV = "CLKERNELS_DEVICE"


class DevicePlugin(WorkerPlugin):
    """Sets ``CLKERNELS_DEVICE`` in a worker to ``specs[name % len(specs)]``
    (``name``: the worker's integer name, as ``LocalCluster`` numbers its
    workers; a worker with another name gets ``specs[0]``). It must run
    before the worker's first clkernels call picks the default device: pass
    it to the workers (``LocalCluster(plugins={DevicePlugin(specs)})``, as
    :func:`local_cluster` does) or register it before the first task
    (``client.register_plugin``). A restarted worker keeps its name and so
    its device."""

    name = "clkernels-device"

    def __init__(self, specs):
        specs = [str(s) for s in specs]
        if not specs:
            raise ValueError("DevicePlugin needs at least one device spec")
        self.specs = specs

    def setup(self, worker):
        try:
            k = int(worker.name)
        except (TypeError, ValueError):
            k = 0
        os.environ[ENV] = self.specs[k % len(self.specs)]


def device_specs(devices=None):
    """Device specs (as ``CLKERNELS_DEVICE`` takes them), one per worker:
    ``devices`` as given (specs or :class:`~clkernels.Device` objects; a spec
    may repeat to run several workers on one device), or every GPU of the
    host, or else the default device."""
    if devices is None:
        gpus = [f"{pi}:{di}" for pi, di, _, d in _all_cl_devices() if d.type & cl.device_type.GPU]
        return gpus or [os.environ.get(ENV) or _spec(default_device())]
    if isinstance(devices, str) or not hasattr(devices, "__iter__"):
        devices = [devices]
    specs = [d if isinstance(d, str) else _spec(d) for d in devices]
    if not specs:
        raise ValueError("devices= is empty")
    return specs


def _spec(dev):
    """'platform:device' indices of a :class:`~clkernels.Device`."""
    for pi, di, _, d in _all_cl_devices():
        if d == dev.cl_device:
            return f"{pi}:{di}"
    raise ValueError(f"device {dev.name} is not among this host's OpenCL devices")


def local_cluster(devices=None, **kwargs):
    """A ``dask.distributed.LocalCluster`` with one worker process per OpenCL
    device (``nthreads=1``), each pinned to its device by
    :class:`DevicePlugin`. ``devices``: see :func:`device_specs` (e.g.
    ``["pocl", "pocl"]``: two workers on the PoCL CPU device). Other keywords
    go to ``LocalCluster`` (``dashboard_address``, ``memory_limit``, ...).
    Use it as ``Client(local_cluster())`` and pass the client as ``client=``."""
    specs = device_specs(devices)
    for k in ("n_workers", "threads_per_worker", "processes"):
        if k in kwargs:
            raise ValueError(f"local_cluster sets {k} itself (one worker process, one thread, per device)")
    plugins = set(kwargs.pop("plugins", ())) | {DevicePlugin(specs)}
    return LocalCluster(n_workers=len(specs), threads_per_worker=1, processes=True, plugins=plugins,
                        **kwargs)
