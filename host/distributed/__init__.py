"""Scale-out on dask.distributed (the ``clkernels[dask]`` extra).

Each worker process owns one OpenCL device (:func:`local_cluster`,
:class:`DevicePlugin`); the public calls take ``client=`` and spread their
work over the workers as tiles of the library's own calls, so the results
equal the single-device call's (:mod:`.twobody`, :mod:`.slabs`,
:mod:`.rectjoin`, :mod:`.segsort`). Tasks are pure functions of their
inputs, which every worker can read for the whole call (on the client's
host straight out of the client's memory, or memory files:
:mod:`.transport`; else copies dask keeps on every worker)
or dask can recompute: a worker that dies mid-run loses nothing (dask reruns
its tasks elsewhere), and progress shows in dask's own diagnostics
(``distributed.progress``, the dashboard). Results left on the workers
(``collect=False``) are returned once the workers hold them; a worker lost
after the call loses its part (dask cannot recompute it without the call's
inputs).
Imported only when a call is given ``client=``.
"""

from .cluster import DevicePlugin, device_specs, local_cluster
from .rectjoin import rect_join
from .segsort import segmented_sort
from .slabs import pairs_within, self_join
from .twobody import distance_histogram, pair_count, points_shape

__all__ = ["DevicePlugin", "device_specs", "local_cluster", "pair_count", "distance_histogram",
           "points_shape", "pairs_within", "self_join", "rect_join", "segmented_sort"]
