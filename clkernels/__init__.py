"""clkernels: fast OpenCL kernels for pairwise and irregular data work.

The public API: devices, and one function per workload family (numpy in,
numpy out; ``pyopencl.array.Array`` in, results computed where the data are).
"""

from .host.cellgrid import Grid, grid_histogram, grid_pair_count, pairs_within
from .host.core.device import Device, default_device, devices
from .host.core.errors import BuildError, ClkernelsError, DeviceCapabilityError, NoDeviceError
from .host.core.tuning import tuning_info
from .host.paircounts import RDF, paircounts, rr_analytic, xi_landy_szalay, xi_natural
from .host.rectjoin import rect_join
from .host.segsort import segmented_sort
from .host.selfjoin import self_join
from .host.theta import theta_join
from .host.twobody import (Count, Histogram, Sum, TwoBody, angular_pair_count, distance_histogram,
                           kde_sum, pair_count, rdf)

__version__ = "0.1.0"


def __getattr__(name):
    """``local_cluster`` and ``DevicePlugin`` (scale-out on dask.distributed,
    the ``clkernels[dask]`` extra) import dask on first use only."""
    if name in ("local_cluster", "DevicePlugin"):
        from .host import distributed
        return getattr(distributed, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Device", "default_device", "devices",
    "ClkernelsError", "NoDeviceError", "DeviceCapabilityError", "BuildError",
    "tuning_info",
    "segmented_sort", "self_join",
    "theta_join",
    "rect_join",
    "Grid", "grid_pair_count", "grid_histogram", "pairs_within",
    "pair_count", "distance_histogram", "rdf", "TwoBody", "Count", "Histogram", "Sum",
    "angular_pair_count", "kde_sum",
    "paircounts", "xi_landy_szalay", "xi_natural", "rr_analytic", "RDF",
]   # local_cluster and DevicePlugin (module __getattr__) stay out: `import *` must not import dask
