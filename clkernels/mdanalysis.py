"""MDAnalysis adapters (the ``clkernels[md]`` extra): ``InterRDF``, a drop-in
for ``MDAnalysis.analysis.rdf.InterRDF`` running its frames on an OpenCL
device. Importing this module does not import MDAnalysis."""

from .host.paircounts.mdanalysis import InterRDF

__all__ = ["InterRDF"]
