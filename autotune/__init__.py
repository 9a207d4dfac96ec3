"""clkernels.autotune: per-device sweeps of kernel parameters, cached.

``autotune`` (console script) or ``python -m clkernels.autotune`` runs the
sweeps; operations read the results through :mod:`clkernels.host.tuning`
(they never import this package). See :mod:`clkernels.autotune.sweep` for the
method and :mod:`clkernels.autotune.cache` for the file's guarantees.
"""

from ..host.core.launch import LaunchConfigError, check_launch
from ..host.core.tuning import Tunable, register, tuning_info
from .sweep import Result, ProblemReport, Settings, run, summary, sweep_op, sweep_problem

__all__ = ["run", "sweep_op", "sweep_problem", "summary", "Result", "ProblemReport", "Settings",
           "Tunable", "register", "check_launch", "LaunchConfigError", "tuning_info"]
