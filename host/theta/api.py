"""Nested-loop theta joins: ``theta_join``.

Two tables of numeric columns and one OpenCL C boolean expression over
``a.<column>`` and ``b.<column>``; every pair of rows (i of a, j of b) for
which it holds, as the 2-BS paper's NLJ case study computes them
(``clkernels/cl/theta.cl.mako``: tiles of b in local memory, a work-item per
row of a writing its pairs through the ``Pairs`` output, by default the atomic
page allocator).
"""

import collections.abc
import re

import numpy as np

from ..core import inputs
from ..core.errors import BuildError, DeviceCapabilityError
from ..core.launch import Events
from ..core.transfer import download, upload, zeros
from ..outputs.pairs import Pairs, collect, ordered
from . import execute
from .plan import CTYPES, GROUPED_MIN, MAX_ROWS, JoinPlan

#: writers sampled for the first pool's size (at least this many, or 1/256 of them)
SAMPLE_WRITERS = 1024

#: a column reference: a.<name> or b.<name> (not part of a longer name or member access)
_REF = re.compile(r"(?<![\w.])([ab])\s*\.\s*([A-Za-z_]\w*)", re.ASCII)
#: text a predicate may not contain: statements, blocks, the preprocessor, comments, line splices
_FORBIDDEN = (";", "{", "}", "#", "\\", "//", "/*", "*/", "__global", "__local", "__constant", "__private")
#: words it may not use (outside column references): address spaces, attributes, inline assembly
_FORBIDDEN_WORDS = re.compile(r"\b(global|local|constant|private|generic|__generic|__attribute__|__attribute|"
                              r"address_space|asm|__asm|__asm__)\b", re.ASCII)


def _table(t, name):
    """``{column: array}`` of a table (numpy arrays in native byte order, or
    device arrays) and its number of rows."""
    if isinstance(t, np.ndarray) and t.dtype.names is not None:
        if t.ndim != 1:
            raise ValueError(f"{name} must be a 1-D structured array, got shape {t.shape}")
        cols = {f: t[f] for f in t.dtype.names}
    elif isinstance(t, collections.abc.Mapping):
        cols = dict(t)
    else:
        raise TypeError(f"{name} must be a dict of 1-D arrays or a numpy structured array, "
                        f"got {type(t).__name__}")
    if not cols:
        raise ValueError(f"{name} has no columns")
    out, rows, first = {}, None, None
    for key, v in cols.items():
        if not isinstance(key, str):
            raise TypeError(f"{name}: column names must be strings, got {key!r}")
        if inputs.is_device_array(v):
            arr = v
            if not v.flags.c_contiguous or v.offset:
                raise ValueError(f"column {name}.{key} is a strided or offset device array view: "
                                 "pass a contiguous array")
        else:
            try:
                arr = np.asarray(v)
            except Exception:
                raise TypeError(f"column {name}.{key} must be a numeric array, got {type(v).__name__}") from None
        dt = arr.dtype
        if dt.fields is None and dt.kind in "iuf" and not dt.isnative and not inputs.is_device_array(arr):
            dt = dt.newbyteorder("=")
            arr = arr.astype(dt)
        if dt not in CTYPES:
            raise TypeError(f"column {name}.{key} has dtype {arr.dtype}; supported: int32, int64, uint32, "
                            "float32, float64")
        if arr.ndim != 1:
            raise ValueError(f"column {name}.{key} must be 1-D, got shape {arr.shape}")
        n = int(arr.shape[0])
        if rows is None:
            rows, first = n, key
        elif n != rows:
            raise ValueError(f"{name}: columns of unequal length ({first!r} has {rows} rows, {key!r} has {n})")
        out[key] = arr
    if rows > MAX_ROWS:
        raise ValueError(f"{name}: at most {MAX_ROWS} rows, got {rows}")
    return out, rows


def parse_predicate(predicate, acols, bcols):
    """(expression over ta_<name>/tb_<name>, a's columns read, b's columns
    read): the column references of ``predicate`` checked against the tables'
    column names and replaced by the kernel's values."""
    if not isinstance(predicate, str):
        raise TypeError(f"predicate must be a string of OpenCL C, got {type(predicate).__name__}")
    if not predicate.strip():
        raise ValueError("predicate is empty")
    for bad in _FORBIDDEN:
        if bad in predicate:
            raise ValueError(f"the predicate must be one OpenCL C expression without {bad!r}: {predicate!r}")
    word = _FORBIDDEN_WORDS.search(_REF.sub(" ", predicate))
    if word:
        raise ValueError(f"the predicate must not use {word.group(1)!r}: {predicate!r}")
    used = {"a": [], "b": []}
    tables = {"a": acols, "b": bcols}

    def sub(m):
        side, col = m.group(1), m.group(2)
        if col not in tables[side]:
            raise ValueError(f"the predicate reads {side}.{col}, but {side} has no column {col!r} "
                             f"(columns: {', '.join(map(repr, tables[side]))})")
        if col not in used[side]:
            used[side].append(col)
        return f"t{side}_{col}"

    expr = _REF.sub(sub, predicate)
    return expr, used["a"], used["b"]


def theta_join(a, b, predicate, *, device=None, method="pages", page=16, npages=None, max_device_bytes=None):
    """Every pair (row i of ``a``, row j of ``b``) for which ``predicate``
    holds: ``(i, j)`` int64 arrays sorted by (i, j), each pair once.

    ``a``, ``b``: dicts of equal-length 1-D arrays (numpy or
    ``pyopencl.array.Array``; int32, int64, uint32, float32 or float64), or
    numpy structured arrays (the fields are the columns). ``predicate``: one
    OpenCL C expression over ``a.<column>`` and ``b.<column>``, e.g.
    ``"fabs(a.t - b.t) <= 5 && a.k != b.k"``; each reference is a value of the
    column's own type (C's arithmetic rules apply: int32 sums wrap, float32
    stays float32). No statements, blocks, comments or address spaces.

    How the pairs are collected: ``method`` 'pages' (the atomic page
    allocator: one pass, a pool of ``npages`` pages of ``page`` pairs, or as
    many as a sampled estimate asks for; when it runs out the pages go to the
    host and the unfinished rows resume) or 'scan' (count, scan, write in
    batches); ``max_device_bytes`` bounds the output buffers on the device.
    Raises ValueError / TypeError for bad tables or predicates before anything
    is built, BuildError (with the log) when the predicate does not compile,
    DeviceCapabilityError for float64 columns on a device without fp64."""
    return theta_join_events(a, b, predicate, device=device, method=method, page=page, npages=npages,
                             max_device_bytes=max_device_bytes)[0]


def theta_join_events(a, b, predicate, *, device=None, method="pages", page=16, npages=None,
                      max_device_bytes=None):
    """:func:`theta_join` returning ``((i, j), (events, plan))``: the
    :class:`~clkernels.host.core.launch.Events` of every step by name (the
    passes by output: "paircount" -- the sample, or the count pass --,
    "pairs", "pairwrite"; "drain", "order", "download", ...) and the
    :class:`JoinPlan` (None for empty tables), for benchmarks."""
    A, na = _table(a, "a")
    B, nb = _table(b, "b")
    expr, ua, ub = parse_predicate(predicate, A, B)
    spec = Pairs(method, page, npages, max_device_bytes)
    spec.validate()
    dev = inputs.device_for(device, *A.values(), *B.values())
    inputs.check_context(dev, *A.values(), *B.values())
    acols = tuple((c, CTYPES[A[c].dtype]) for c in ua)
    bcols = tuple((c, CTYPES[B[c].dtype]) for c in ub)
    wide = [f"{s}.{c}" for s, cols in (("a", acols), ("b", bcols)) for c, t in cols if t == "double"]
    if wide and not dev.fp64:
        raise DeviceCapabilityError(f"float64 columns ({', '.join(wide)}) need double precision "
                                    f"(cl_khr_fp64), which {dev.name} lacks; pass float32 columns")
    events = Events()
    if na == 0 or nb == 0:
        return (np.empty(0, np.int64), np.empty(0, np.int64)), (events, None)
    plan = JoinPlan.resolve(dev, acols, bcols, expr)
    for output in (("pairs", "paircount") if spec.method == "pages" else ("paircount", "pairwrite")):
        _build(dev, plan, output, predicate)
    # GPUs: the records in (i, j) order on the device, before they come down
    i, j = _records(dev, plan, [A[c] for c, _ in acols], na, [B[c] for c, _ in bcols], nb, spec,
                    plan.order_on_device, events)
    return ((i, j) if plan.order_on_device else ordered(dev, [(i, j)], False)), (events, plan)


def _build(dev, plan, output, predicate):
    try:
        execute.kernel(dev, plan, output)
    except BuildError as e:
        types = ", ".join(f"{s}.{c}: {t}" for s, cols in (("a", plan.acols), ("b", plan.bcols)) for c, t in cols)
        raise BuildError(f"the predicate {predicate!r} does not compile as an OpenCL C expression"
                         f"{' (' + types + ')' if types else ''}:\n{e}",
                         log=e.log, source_path=e.source_path) from None


def _records(dev, plan, acols, na, bcols, nb, spec, order, events):
    q = dev.queue
    dcols = []
    for c in acols + bcols:
        if inputs.is_device_array(c):
            c.finish()
            dcols.append(c)
        else:
            dcols.append(upload(dev, c, events=events))
    da, db = dcols[:len(acols)], dcols[len(acols):]
    no_list = zeros(q, 1, np.uint32, events=events)      # the writer list when there is none

    parts, na_pad, plen = plan.layout(na, nb)
    nwriters = parts * na_pad
    grouped = []            # the pairs kernel's form, once the sample has spoken

    def launch(output, tail, nw, w0=0, wl=None):
        execute.join(q, dev, plan, output, da, na, db, nb, nw, w0, no_list if wl is None else wl,
                     wl is not None, tail, events, grouped=output == "pairs" and bool(grouped and grouped[0]))

    def estimate():
        live = parts * na             # writers with a row: k -> (k // na) * na_pad + k % na
        m = min(live, max(SAMPLE_WRITERS, live // 256))
        k = np.sort(np.random.default_rng(na).choice(live, m, replace=False))
        ids = ((k // na) * na_pad + k % na).astype(np.uint32)
        cnt = zeros(q, nwriters, np.uint32, events=events)
        launch("paircount", [cnt.data], m, 0, upload(dev, ids, events=events))
        est = int(download(dev, cnt, events=events)[ids].astype(np.int64).sum()) * live / m
        # pairs a writer per tile of B: past GROUPED_MIN the per-writer stages would spill
        grouped.append(est / live / -(-min(plen, nb) // plan.wg_size) > GROUPED_MIN)
        return est

    return collect(q, nwriters, spec,
                   launch_pages=lambda nw, wl, args: launch("pairs", args, nw, 0, wl),
                   launch_count=lambda w0, nw, wl, cnt: launch("paircount", [cnt.data], nw, w0, wl),
                   launch_write=lambda w0, nw, offs, out: launch("pairwrite", [offs.data, out.data], nw, w0),
                   estimate=estimate, events=events, order=na if order else None,
                   dense=lambda: bool(grouped and grouped[0] and plan.grouped_stage))
