"""clkernels: fast OpenCL kernels for pairwise and irregular data work.

The public API: devices, and one function per workload family.
"""

from .host.device import Device, default_device, devices
from .host.errors import BuildError, ClkernelsError, DeviceCapabilityError, NoDeviceError

__version__ = "0.1.0"

__all__ = [
    "Device", "default_device", "devices",
    "ClkernelsError", "NoDeviceError", "DeviceCapabilityError", "BuildError",
]
