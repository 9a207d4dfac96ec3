"""clkernels.host.core: what every family stands on, importing nothing above it.

device (selection, facts, every device-dependent decision), build (templates
rendered and built once), errors, launch (launch checks, work-group
arithmetic, named :class:`~.launch.Events`), inputs (one set of input rules),
transfer (numpy <-> device through page-locked staging), timing, tuning (the
tuned-configuration lookup and the :class:`~.tuning.Tunable` declaration).
"""
