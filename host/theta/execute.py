"""Enqueue the theta join kernel (no decisions: the plan made them)."""

import numpy as np

from ..core.build import build, program_kernel
from ..core.launch import global_size
from .plan import TEMPLATE


def kernel(device, plan, output):
    """The built 'theta_join' kernel for ``output`` ('pairs' | 'paircount' |
    'pairwrite'); raises BuildError when the predicate does not compile."""
    return program_kernel(build(device, TEMPLATE, "join", plan.params(output)), "theta_join")


def join(queue, device, plan, output, acols, na, bcols, nb, nw, w0, wl, wl_on, tail, events):
    """One pass over the writers (rows of A) [w0, w0 + nw), or the nw ids in
    ``wl`` when ``wl_on``; ``acols``/``bcols``: the device columns in the
    plan's order; ``tail``: the output's arguments."""
    k = kernel(device, plan, output)
    args = [c.data for c in acols] + [np.uint32(na)] + [c.data for c in bcols]
    args += [np.uint32(nb), np.uint32(nw), np.uint32(w0), wl.data, np.uint32(bool(wl_on))] + list(tail)
    events.add("join", k(queue, (global_size(nw, plan.wg_size),), (plan.wg_size,), *args))
