"""OpenCL devices: selection, facts, and every device-dependent decision.

This is the one module that looks at vendor names and extension strings; the
rest of the library asks a :class:`Device` for facts (``sg_backend``,
``int64_atomics``, ``local_mem_size`` ...) and never inspects the vendor itself.
"""

import os
import threading

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

from .errors import DeviceCapabilityError, NoDeviceError
from .icd import find_unregistered_nvidia_icd, nvidia_icd_fix   # importing icd registers pip's runtimes

SG_BACKENDS = ("khr", "nv", "local")

NO_PLATFORM_HELP = (
    "no OpenCL platform found. For a CPU device run "
    "'pip install \"clkernels[pocl]\"' (PoCL); for an NVIDIA GPU install the "
    "driver's OpenCL ICD (see 'python -m clkernels info')"
)


def _platforms():
    try:
        return cl.get_platforms()
    except cl.Error:
        return []


class Device:
    """An OpenCL device with its context and an in-order profiling queue.

    ``Device()`` picks the default device (``CLKERNELS_DEVICE``, else
    ``PYOPENCL_CTX``, else the first GPU, else the first CPU).
    ``Device("nvidia")`` or ``Device("0:1")`` selects by name substring or
    ``platform:device`` index; ``Device(cl_device)`` wraps a pyopencl device;
    ``Device(queue=q)`` / ``Device(context=ctx)`` wraps the user's own objects.
    ``sg_backend`` forces the sub-group back end (``khr``, ``nv``, ``local``).
    """

    def __init__(self, device=None, *, context=None, queue=None, sg_backend=None):
        if queue is not None:
            context = queue.context
            if device is None:
                device = queue.device          # (a context may hold several devices)
        if context is not None and device is None:
            device = context.devices[0]
        if device is None or isinstance(device, str):
            device = select_cl_device(device)
        if isinstance(device, Device):
            device = device.cl_device
        if not isinstance(device, cl.Device):
            raise TypeError(f"expected a device spec string or pyopencl.Device, got {type(device).__name__}")
        self.cl_device = device
        self._context = context
        self._queue = queue
        self._side_queue = None
        self._copy_queue = None
        self._pool = None
        self._staging = threading.local()
        self._lock = threading.Lock()
        self._read_facts(device)
        if sg_backend is not None:
            if sg_backend not in self.sg_backends:
                raise DeviceCapabilityError(
                    f"sub-group back end {sg_backend!r} is not available on {self.name} "
                    f"(available: {', '.join(self.sg_backends)})")
            self.sg_backend = sg_backend

    # -- facts ---------------------------------------------------------------
    def _read_facts(self, d):
        self.name = d.name.strip()
        self.platform_name = d.platform.name.strip()
        self.vendor = d.vendor.strip()
        self.driver_version = d.driver_version.strip()
        self.version = d.version.strip()
        self.is_gpu = bool(d.type & cl.device_type.GPU)
        self.compute_units = d.max_compute_units
        self.max_work_group_size = d.max_work_group_size
        self.local_mem_size = d.local_mem_size
        self.global_mem_size = d.global_mem_size
        self.max_mem_alloc_size = d.max_mem_alloc_size
        self.extensions = frozenset(d.extensions.split())
        self.fp64 = "cl_khr_fp64" in self.extensions or d.double_fp_config != 0
        self.int64_atomics = "cl_khr_int64_base_atomics" in self.extensions
        self.int64_extended_atomics = "cl_khr_int64_extended_atomics" in self.extensions
        self.is_nvidia = "nvidia" in (self.vendor + self.platform_name).lower()
        self.is_pocl = "portable computing language" in self.platform_name.lower()
        #: a simulator (Oclgrind): every work-item is interpreted, so no measurement kernels
        self.is_simulator = "oclgrind" in self.platform_name.lower()
        # sub-groups: the cl_khr_subgroups extension (OpenCL 2.x), or the OpenCL C 3.0
        # optional feature __opencl_c_subgroups (Intel's CPU runtime reports only the
        # feature); the feature needs programs built as OpenCL C 3.0
        features = set()
        major = self.version.split()[1].split(".")[0] if len(self.version.split()) > 1 else "1"
        if major.isdigit() and int(major) >= 3:       # CL_DEVICE_OPENCL_C_FEATURES is OpenCL 3.0
            try:
                features = {f.name for f in d.opencl_c_features}
            except (cl.Error, AttributeError, cl.LogicError):
                pass
        self.subgroup_extension = "cl_khr_subgroups" in self.extensions
        sg_feature = "__opencl_c_subgroups" in features
        #: extra build options every program gets
        self.build_options = ("-cl-std=CL3.0",) if sg_feature and not self.subgroup_extension else ()
        backends = []
        if (self.subgroup_extension or sg_feature) and "cl_khr_subgroup_shuffle" in self.extensions:
            backends.append("khr")
        #: inline PTX builds (NVIDIA's GPU compiler): the ``nv`` sub-group back end and
        #: the pair kernels' square root without subnormal scaling (:attr:`fast_sqrt`)
        self.ptx = self.is_nvidia and self.is_gpu
        if self.ptx:
            backends.append("nv")
        backends.append("local")
        self.sg_backends = tuple(backends)
        self.sg_backend = backends[0]
        self.sg_ballot = "cl_khr_subgroup_ballot" in self.extensions
        #: hardware sub-group (warp) width where the back end fixes it
        self.warp_size = 32 if self.is_nvidia and self.is_gpu else None
        #: local memory and resident work-items per compute unit (occupancy models);
        #: Hopper SMs: 228 KiB shared memory, 2048 threads. Elsewhere: one work-group's worth.
        nv_gpu = self.is_nvidia and self.is_gpu
        self.local_mem_per_cu = 228 * 1024 if nv_gpu else self.local_mem_size
        self.max_threads_per_cu = 2048 if nv_gpu else self.max_work_group_size
        #: numpy <-> device copies go through page-locked staging chunks (GPUs: the
        #: driver's own staging of pageable memory runs at 6-8 GB/s on an H100, pinned
        #: DMA at 51-54 GB/s); a CPU device shares host memory: plain copies
        self.staged_io = self.is_gpu
        #: a USE_HOST_PTR buffer over host memory pins that memory where it is
        #: (NVIDIA's GPU driver: measured on an H100, no device memory taken), and
        #: copies into it then run at the page-locked rate: the kept result blocks
        #: are registered so (:func:`.hostmem.register`). Other drivers may
        #: mirror such a buffer in device memory: not registered there.
        self.registers_host = self.staged_io and nv_gpu

    def sg_size_for(self, backend, wg_size):
        """Sub-group size a kernel of work-group size ``wg_size`` sees.

        ``nv`` is the warp (32); ``local`` emulates 32 lanes (or the whole
        work-group when smaller); ``khr`` is the device's choice at run time
        (None here).
        """
        if backend == "nv":
            return 32
        if backend == "local":
            return min(32, wg_size)
        return None

    def template_facts(self):
        """Parameters every template render gets from the device."""
        return {
            "sg_backend": self.sg_backend,
            "sg_ballot": self.sg_ballot,
            "sg_extension": self.subgroup_extension,
            "int64_atomics": self.int64_atomics,
            "int64_extended_atomics": self.int64_extended_atomics,
            "fp64": self.fp64,
            "ptx": self.ptx,
        }

    def check_dtype(self, dtype):
        """Raise if the device cannot compute in ``dtype`` (float64 needs fp64)."""
        if np.dtype(dtype) == np.float64 and not self.fp64:
            raise DeviceCapabilityError(
                f"{self.name} has no double precision (cl_khr_fp64); pass float32 data")

    def default_wg_size(self):
        """A work-group size that suits most simple kernels on this device."""
        return min(256, self.max_work_group_size)

    @property
    def preferred_wg_multiple(self):
        """CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE of a trivial kernel (cached)."""
        if getattr(self, "_pref_multiple", None) is None:
            from .build import kernel

            k = kernel(self, "common.cl.mako", "probe", "clk_probe", {"sg_backend": "local"})
            self._pref_multiple = k.get_work_group_info(
                cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, self.cl_device)
        return self._pref_multiple

    @property
    def fast_sqrt(self):
        """(OpenCL function, bound in ulp) of the float square root the pair
        kernels bin distances with: ``native_sqrt`` -- or, where inline PTX
        builds, ``clk_sqrt_ftz`` (``sqrt.approx.ftz.f32``: the same root
        without the subnormal scaling NVIDIA's ``native_sqrt`` brings, three
        instructions a pair; subnormal inputs give 0, which the exact bands
        allow for) -- with its error measured here once (every mantissa of two
        binades, against the correctly rounded root in double), or ``sqrt``
        with the OpenCL specification's 3 ulp where the device has no fp64, is
        a simulator (2^24 work-items interpreted one by one) or the fast root
        is worse than 4 ulp."""
        if getattr(self, "_fast_sqrt", None) is None:
            result = ("sqrt", 3.0)
            if self.fp64 and not self.is_simulator:
                from .build import kernel
                from .transfer import zeros

                fn = "clk_sqrt_ftz" if self.ptx else "native_sqrt"
                k = kernel(self, "common.cl.mako", "sqrt_probe", "clk_sqrt_probe",
                           {"sg_backend": "local", "sqrt_fn": fn})

                err = zeros(self.queue, 1, np.uint32)
                k(self.queue, (1 << 24,), None, err.data)
                ulp = int(err.get()[0]) / 16.0
                if ulp <= 4.0:
                    result = (fn, ulp)
            self._fast_sqrt = result
        return self._fast_sqrt

    @property
    def key(self):
        """(platform, device name, driver version): the device's identity across
        processes (the fields the tuning cache keys on)."""
        return (self.platform_name, self.name, self.driver_version)

    # -- OpenCL objects ------------------------------------------------------
    @property
    def context(self):
        return self._once("_context", lambda: cl.Context([self.cl_device]))

    @property
    def queue(self):
        ctx = self.context
        return self._once("_queue", lambda: self._profiling_queue(ctx))

    @property
    def side_queue(self):
        """A second in-order profiling queue, made once: uploads, small reads and
        kernels that overlap the work of ``queue``."""
        ctx = self.context
        return self._once("_side_queue", lambda: self._profiling_queue(ctx))

    @property
    def copy_queue(self):
        """A third in-order profiling queue, made once: downloads of a result's
        chunks that run while ``side_queue`` serves the small reads of the work
        still being enqueued (a read there would wait behind them)."""
        ctx = self.context
        return self._once("_copy_queue", lambda: self._profiling_queue(ctx))

    def _profiling_queue(self, ctx):
        return cl.CommandQueue(ctx, self.cl_device, properties=cl.command_queue_properties.PROFILING_ENABLE)

    def _once(self, attr, make):
        """``self.<attr>``, made by ``make()`` on first use (thread-safe; ``make``
        must not take the lock itself)."""
        value = getattr(self, attr)
        if value is not None:           # made: no lock needed to read it
            return value
        with self._lock:
            value = getattr(self, attr)
            if value is None:
                value = make()
                setattr(self, attr, value)
            return value

    @property
    def pool(self):
        """A memory pool (``pyopencl.tools.MemoryPool``) for arrays used on
        ``queue``, made once: buffers the library frees, and outputs the caller
        drops, are kept and reused. NVIDIA's driver stalls the host for
        0.2-0.4 ms on the first use of a fresh 256 MiB buffer (measured on an
        H100), longer than many whole sorts. ``pool.free_held()`` returns the
        kept memory to the driver. The pool does not track other queues: an
        array from it used on another queue must be finished there before it
        is dropped (it may be handed out again at once)."""
        q = self.queue
        return self._once("_pool", lambda: cl_tools.MemoryPool(cl_tools.ImmediateAllocator(q)))

    def staging(self, nwords):
        """A uint32 host array of at least ``nwords`` words (this thread's own,
        reused), mapped from an ALLOC_HOST_PTR buffer: page-locked on GPU
        drivers, so a read into it is one DMA copy, where a read into pageable
        numpy memory is staged by the driver (ordinary memory on PoCL)."""
        arr = getattr(self._staging, "arr", None)
        if arr is None or arr.size < nwords:
            size = max(nwords, 1024)
            buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, 4 * size)
            arr, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                           0, (size,), np.uint32, is_blocking=True)
            self._staging.arr = arr
        return arr[:nwords]

    def pinned_chunks(self, count, nbytes):
        """This thread's ``count`` page-locked staging chunks of ``nbytes`` each
        (made once, reused): a list of ``[uint8 host array, pending event or
        None]`` for chunked numpy <-> device transfers (:mod:`.transfer`)."""
        chunks = getattr(self._staging, "chunks", None)
        if chunks is None or len(chunks) < count or chunks[0][0].size < nbytes:
            chunks = []
            for _ in range(count):
                buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, nbytes)
                arr, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                               0, (nbytes,), np.uint8, is_blocking=True)
                chunks.append([arr, None])
            self._staging.chunks = chunks
        return chunks[:count]

    def __repr__(self):
        return f"<clkernels.Device {self.platform_name} | {self.name} sg={self.sg_backend}>"


def common_fast_sqrt(devices):
    """(function, ulp) of the square root kernels built from one source for
    every one of ``devices`` bin with: their common :attr:`Device.fast_sqrt`
    with the largest measured error, else ``sqrt`` with the OpenCL
    specification's 3 ulp."""
    roots = [d.fast_sqrt for d in devices]
    if len({fn for fn, _ in roots}) == 1:
        return roots[0][0], max(ulp for _, ulp in roots)
    return "sqrt", 3.0


def _all_cl_devices():
    """(platform index, device index, platform, device) of every device. A
    runtime named by two vendors files shows up as two equal platforms: the
    second is skipped whole. Devices of one platform are never merged: two
    GPUs of one model share every name and version (one H100 and another)."""
    out, seen = [], set()
    for pi, p in enumerate(_platforms()):
        try:
            devs = p.get_devices()
        except cl.Error:
            devs = []
        ident = (p.name, p.vendor, p.version, tuple((d.name, d.driver_version) for d in devs))
        if ident in seen:
            continue
        seen.add(ident)
        out.extend((pi, di, p, d) for di, d in enumerate(devs))
    return out


def _parse_spec(spec, found):
    spec = spec.strip()
    parts = spec.split(":")
    if all(x.strip().isdigit() for x in parts) and 1 <= len(parts) <= 2:
        pi = int(parts[0])
        di = int(parts[1]) if len(parts) == 2 and parts[1].strip() else 0
        for fpi, fdi, _, d in found:
            if fpi == pi and fdi == di:
                return d
        return None
    low = spec.lower()
    for _, _, p, d in found:
        text = f"{p.name} {d.name} {d.vendor}".lower()
        if "portable computing language" in text:
            text += " pocl"
        if low in text:
            return d
    return None


def select_cl_device(spec=None):
    """The pyopencl device for ``spec``, or the default device when None."""
    found = _all_cl_devices()
    if not found:
        hint = NO_PLATFORM_HELP
        lib = find_unregistered_nvidia_icd()
        if lib:
            hint += (f". NVIDIA's OpenCL library {lib} is present but not registered; fix:\n"
                     + nvidia_icd_fix(lib))
        raise NoDeviceError(hint)
    listing = "; ".join(f"{pi}:{di} {p.name.strip()} | {d.name.strip()}" for pi, di, p, d in found)
    sources = [("argument", spec)] if spec is not None else [
        ("CLKERNELS_DEVICE", os.environ.get("CLKERNELS_DEVICE")),
        ("PYOPENCL_CTX", os.environ.get("PYOPENCL_CTX")),
    ]
    for origin, s in sources:
        if s:
            d = _parse_spec(s, found)
            if d is None:
                raise NoDeviceError(f"no OpenCL device matches {origin}={s!r}; found: {listing}")
            return d
    for want in (cl.device_type.GPU, cl.device_type.CPU):
        for _, _, _, d in found:
            if d.type & want:
                return d
    return found[0][3]


_default = None
_default_lock = threading.Lock()


def default_device():
    """The process-wide default :class:`Device` (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Device()
        return _default


def as_device(device):
    """Accept None, a spec string, a pyopencl Device/Queue/Context or a Device;
    anything else is a TypeError that names ``device=``."""
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    if not isinstance(device, (str, cl.Device, cl.CommandQueue, cl.Context)):
        raise TypeError("device= must be a clkernels.Device, a spec string such as 'nvidia' or '0:1', "
                        f"or a pyopencl Device/CommandQueue/Context; got {type(device).__name__}")
    return _cached_device(device)


#: Devices made by as_device, one per spec string, pyopencl device, queue or
#: context (each call would otherwise read the device's facts again and give
#: the per-Device caches -- copy queues, plans -- a new key). A Device holds its
#: queue/context, so their int_ptr cannot be reused while cached.
_by_spec = {}


def _cached_device(spec):
    if isinstance(spec, cl.CommandQueue):
        key, make = ("queue", spec.int_ptr), lambda: Device(queue=spec)
    elif isinstance(spec, cl.Context):
        key, make = ("context", spec.int_ptr), lambda: Device(context=spec)
    else:
        key = spec if isinstance(spec, str) else spec.int_ptr
        make = lambda: Device(spec)   # noqa: E731
    with _default_lock:
        if key not in _by_spec:
            _by_spec[key] = make()
        return _by_spec[key]


def devices():
    """Every OpenCL device on the machine, as :class:`Device` objects.

    Contexts are created lazily, so listing is cheap.
    """
    return [Device(d) for _, _, _, d in _all_cl_devices()]

