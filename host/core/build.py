"""Render Mako templates from ``clkernels/cl`` and build them, memoized.

``build(device, "twobody.cl.mako", "sdh", params)`` renders the ``<%def>``
named ``sdh`` with ``strict_undefined=True`` and ``params`` (merged over the
device's template facts), builds it for the device's context, and memoizes the
program per (context, template, def, parameters, options). pyopencl's on-disk
binary cache makes rebuilds in a new process cheap.
"""

import functools
import hashlib
import os
import re
import tempfile
import threading
import warnings

import numpy as np
import pyopencl as cl
from mako.lookup import TemplateLookup

import clkernels  # the package (imported before its host side) locates the templates

from .errors import BuildError

CL_DIR = os.path.join(os.path.dirname(os.path.abspath(clkernels.__file__)), "cl")

_lookup = TemplateLookup(directories=[CL_DIR], strict_undefined=True, input_encoding="utf-8")
_programs = {}
_lock = threading.Lock()


def _freeze(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def render(template, defname, params):
    """Source text of ``<%def name=defname>`` in ``template`` with ``params``."""
    try:
        tmpl = _lookup.get_template(template)
        return tmpl.get_def(defname).render(**params)
    except (NameError, TypeError) as e:  # a missing parameter or def argument
        raise BuildError(f"rendering {template}:{defname} failed: {e}") from e


@functools.lru_cache(maxsize=None)
def template_hash(*templates):
    """Hash of the template files (plus common.cl.mako) for cache keys."""
    h = hashlib.sha256()
    for name in sorted(set(templates) | {"common.cl.mako"}):
        with open(os.path.join(CL_DIR, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def _save_source(src):
    d = os.path.join(tempfile.gettempdir(), "clkernels-build")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, hashlib.sha256(src.encode()).hexdigest()[:16] + ".cl")
    with open(path, "w") as f:
        f.write(src)
    return path


def build(device, template, defname, params=None, options=()):
    """Build (once) and return the pyopencl Program for a template def."""
    full = dict(device.template_facts())
    full.update(params or {})
    options = tuple(device.build_options) + tuple(options)
    key = (device.context.int_ptr, template, defname, _freeze(full), options)
    with _lock:
        prg = _programs.get(key)
    if prg is not None:
        return prg
    src = render(template, defname, full)
    try:
        with warnings.catch_warnings():  # warnings in the log are not errors
            warnings.simplefilter("ignore", cl.CompilerWarning)
            prg = cl.Program(device.context, src).build(options=["-cl-kernel-arg-info", *options],
                                                        devices=[device.cl_device])
    except cl.Error as e:
        path = _save_source(src)
        log = str(e)
        raise BuildError(
            f"building {template}:{defname} for {device.name} failed; rendered source saved to {path}"
            f" (the log's line numbers refer to it)\n{log}", log=log, source_path=path) from None
    _typedefs[id(prg)] = (prg, _scalar_typedefs(src))
    with _lock:
        _programs[key] = prg
    return prg


#: id(program) -> (program, {typedef name: builtin scalar type}) of its rendered source
_typedefs = {}
_TYPEDEF = re.compile(r"^\s*typedef\s+((?:unsigned\s+)?[a-z]+)\s+([A-Za-z_]\w*)\s*;", re.M)


def _scalar_typedefs(src):
    """The typedefs of built-in scalar types in ``src`` (``typedef float REAL;``),
    so kernels whose scalar arguments use them still get declared types."""
    out = {}
    for base, name in _TYPEDEF.findall(src):
        base = " ".join(base.split()).replace("unsigned ", "u")
        if base in _SCALARS:
            out[name] = base
    return out


_kernels = {}

_SCALARS = {"char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
            "int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
            "float": np.float32, "double": np.float64}


def make_kernel(prg, name):
    """``cl.Kernel(prg, name)`` with its scalar argument types declared (from the
    kernel's argument info, typedef'd names such as ``REAL`` through the
    program's rendered source): pyopencl then packs scalars on a fast path,
    where undeclared numpy scalars cost about 8 us each per launch (measured
    on PoCL and NVIDIA; the two-body pair kernel's enqueue took 165 us on an
    H100), several times the launch itself."""
    k = cl.Kernel(prg, name)
    aliases = _typedefs.get(id(prg), (None, {}))[1]
    dtypes = []
    try:
        for i in range(k.num_args):
            if k.get_arg_info(i, cl.kernel_arg_info.ADDRESS_QUALIFIER) != \
                    cl.kernel_arg_address_qualifier.PRIVATE:
                dtypes.append(None)
                continue
            name_ = " ".join(k.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME).split()).replace("unsigned ", "u")
            dt = _SCALARS.get(aliases.get(name_, name_))
            if dt is None:          # a vector or struct argument: leave pyopencl's generic path
                return k
            dtypes.append(dt)
    except cl.Error:                # no argument info from this implementation
        return k
    k.set_scalar_arg_dtypes(dtypes)
    return k


def program_kernel(prg, name):
    """The ``cl.Kernel`` called ``name`` of a built program, memoized per thread
    (``prg.name`` re-creates the kernel on every access; setting arguments and
    enqueueing is not atomic, so threads do not share one kernel object)."""
    key = (id(prg), name, threading.get_ident())
    k = _kernels.get(key)
    if k is None:
        with _lock:
            k = _kernels.get(key)
            if k is None:
                k = _kernels[key] = (prg, make_kernel(prg, name))   # prg kept: id() stays unique
    return k[1]


_fast = {}


def kernel(device, template, defname, name, params=None, options=()):
    """The ``cl.Kernel`` called ``name`` from the built program (memoized, see
    :func:`program_kernel`; parameters of plain hashable values skip the
    build cache's key, which costs ~10 us a lookup)."""
    try:
        key = (device, template, defname, name, tuple(sorted((params or {}).items())), tuple(options),
               threading.get_ident())
        k = _fast.get(key)
    except TypeError:                   # unhashable parameters: the build cache's key
        return program_kernel(build(device, template, defname, params, options), name)
    if k is None:
        if len(_fast) >= 4096:          # Device objects made per call would grow it
            _fast.clear()
        k = _fast[key] = program_kernel(build(device, template, defname, params, options), name)
    return k
