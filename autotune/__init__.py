"""clkernels.autotune: per-device sweeps of kernel parameters, cached.

``autotune`` (console script), ``clkernels autotune`` or ``python -m
clkernels.autotune`` runs the sweeps; operations read the results through
:mod:`clkernels.host.core.tuning` (they never import this package).

Modules by role: :mod:`~clkernels.autotune.search` (which configurations, the
successive-halving schedule), :mod:`~clkernels.autotune.runner` (build, check,
time one configuration), :mod:`~clkernels.autotune.prebuild` (builds in worker
processes), :mod:`~clkernels.autotune.sweep` (orchestration per op and problem
group: the method), :mod:`~clkernels.autotune.report` (progress, tables, JSON),
:mod:`~clkernels.autotune.cache` (the file's guarantees) and
:mod:`~clkernels.autotune.cli`.
"""

from ..host.core.launch import LaunchConfigError, check_launch
from ..host.core.tuning import Tunable, register, tuning_info
from .report import ProblemReport, summary
from .runner import STATUSES, Result
from .search import Settings
from .sweep import run, sweep_op, sweep_problem

__all__ = ["run", "sweep_op", "sweep_problem", "summary", "Result", "ProblemReport", "Settings",
           "STATUSES", "Tunable", "register", "check_launch", "LaunchConfigError", "tuning_info"]
