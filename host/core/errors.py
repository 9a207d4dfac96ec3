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


def warn_user(message, category=UserWarning):
    """``warnings.warn`` attributed to the caller's first frame outside
    clkernels (the user's line, however deep the library's own calls)."""
    import os
    import sys
    import warnings

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))        # host/
    import clkernels
    roots = (here + os.sep, os.path.dirname(os.path.abspath(clkernels.__file__)) + os.sep)
    level, f = 2, sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(roots):
        level, f = level + 1, f.f_back
    warnings.warn(message, category, stacklevel=level)
