"""Binned pair counts in the manner of Corrfunc (``paircounts``: modes r,
rp-pi and s-mu, weights, exclusions, periodic boxes), the correlation
function estimators built on them, and an MDAnalysis-style accumulating
radial distribution function (:class:`RDF`); see :mod:`.api`."""

from .api import count, paircounts
from .estimators import rr_analytic, xi_landy_szalay, xi_natural
from .plan import MODES, Plan, Problem
from .rdf import RDF

__all__ = ["paircounts", "count", "xi_landy_szalay", "xi_natural", "rr_analytic", "RDF", "Plan", "Problem",
           "MODES"]
