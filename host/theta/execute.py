"""Enqueue the theta join kernel (no decisions: the plan made them)."""

import numpy as np

from ..core.build import build, program_kernel
from ..core.launch import global_size
from .plan import TEMPLATE


def kernel(device, plan, output, grouped=False):
    """The built 'theta_join' kernel for ``output`` ('pairs' | 'paircount' |
    'pairwrite'; ``grouped``: see :meth:`.plan.JoinPlan.params`); raises
    BuildError when the predicate does not compile."""
    return program_kernel(build(device, TEMPLATE, "join", plan.params(output, grouped)), "theta_join")


def join(queue, device, plan, output, acols, na, bcols, nb, nw, w0, wl, wl_on, tail, events, grouped=False):
    """One pass over the writers [w0, w0 + nw), or the nw ids in ``wl`` when
    ``wl_on`` (:meth:`.plan.JoinPlan.layout`: rows of A against parts of
    B); ``acols``/``bcols``: the device columns in the plan's order;
    ``tail``: the output's arguments."""
    k = kernel(device, plan, output, grouped)
    _, na_pad, plen = plan.layout(na, nb)
    args = [c.data for c in acols] + [np.uint32(na)] + [c.data for c in bcols]
    args += [np.uint32(nb), np.uint32(na_pad), np.uint32(plen), np.uint32(nw), np.uint32(w0), wl.data,
             np.uint32(bool(wl_on))] + list(tail)
    wg = plan.grouped_wg if plan.is_grouped(output, grouped) else plan.wg_size
    events.add(output, k(queue, (global_size(nw, wg),), (wg,), *args))
