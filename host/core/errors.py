"""Exceptions raised by clkernels."""


class ClkernelsError(RuntimeError):
    """Base class of the library's runtime errors."""


class NoDeviceError(ClkernelsError):
    """No OpenCL platform or device could be found or matched."""


class DeviceCapabilityError(ClkernelsError):
    """The device lacks something a kernel needs (an extension, fp64, ...)."""


class BuildError(ClkernelsError):
    """An OpenCL program failed to build; carries the log and the source path."""

    def __init__(self, message, log="", source_path=None):
        super().__init__(message)
        self.log = log
        self.source_path = source_path
