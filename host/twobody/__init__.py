"""Two-body statistics: pair counts, distance histograms, RDF and user-defined
statistics (the 2-BS paper); see :mod:`.api` for the rules."""

from .api import (Count, Histogram, Sum, TwoBody, angular_pair_count, count, distance_histogram,
                  histogram, kde_sum, pair_count, rdf, shell_volumes)
from .plan import TUNABLES, Plan, Problem

__all__ = ["Count", "Histogram", "Sum", "TwoBody", "pair_count", "distance_histogram", "rdf",
           "angular_pair_count", "kde_sum", "shell_volumes", "count", "histogram", "Plan", "Problem",
           "TUNABLES"]
