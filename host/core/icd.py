"""OpenCL runtimes the ICD loader cannot see by itself.

* NVIDIA's driver ships ``libnvidia-opencl.so.1`` but, in containers, often no
  vendors file names it: :func:`find_unregistered_nvidia_icd` detects that and
  :func:`nvidia_icd_fix` prints the fix (``clkernels info`` shows it).
* pip's Intel CPU runtime (the ``clkernels[intel]`` extra) ships a vendors file
  naming a build machine's placeholder path: :func:`register_icds` names it in
  a vendors folder of ours at import, before any platform is listed.
"""

import glob
import os
import sys

#: where NVIDIA's OpenCL driver library usually lives
_NVIDIA_LIB_GLOBS = (
    "/usr/local/nvidia/lib64/libnvidia-opencl.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1",
    "/usr/lib64/libnvidia-opencl.so.1",
    "/usr/lib/libnvidia-opencl.so.1",
    "/usr/lib/aarch64-linux-gnu/libnvidia-opencl.so.1",
)



def intel_cpu_runtime():
    """Path of Intel's CPU OpenCL runtime installed in this Python (pip
    ``intel-opencl-rt``, the ``clkernels[intel]`` extra), or None. Its own
    vendors file names a build machine's placeholder path, so the ICD loader
    cannot find it without :func:`register_icds`."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        lib = os.path.join(prefix, "lib", "libintelocl.so")
        if os.path.exists(lib):
            return lib
    return None


def register_icds():
    """Register OpenCL runtimes that pip installed but no vendors file names
    (Intel's CPU runtime): a vendors folder of ours (in the user cache) names
    them, keeps the system's vendors files (/etc/OpenCL/vendors), and
    ``OCL_ICD_VENDORS`` points the loader at it. Runs at import, before any
    platform is listed; does nothing when ``OCL_ICD_VENDORS`` is set already
    (``clkernels info`` then says what to add) or ``CLKERNELS_NO_ICD_SETUP``
    is set. Returns the folder, or None."""
    lib = intel_cpu_runtime()
    if lib is None or os.environ.get("OCL_ICD_VENDORS") or os.environ.get("CLKERNELS_NO_ICD_SETUP"):
        return None
    try:
        import platformdirs

        folder = os.path.join(platformdirs.user_cache_dir("clkernels"), "opencl-vendors")
        os.makedirs(folder, exist_ok=True)
        icd = os.path.join(folder, "intel-cpu.icd")
        old = None
        if os.path.exists(icd):
            with open(icd) as f:
                old = f.read()
        if old != lib + "\n":
            with open(icd, "w") as f:
                f.write(lib + "\n")
        for f in glob.glob("/etc/OpenCL/vendors/*.icd"):
            dst = os.path.join(folder, os.path.basename(f))
            if not os.path.exists(dst):
                with open(f) as src, open(dst, "w") as out:
                    out.write(src.read())
    except OSError:
        return None
    os.environ["OCL_ICD_VENDORS"] = folder
    return folder


REGISTERED_ICDS = register_icds()




def find_unregistered_nvidia_icd():
    """Path of libnvidia-opencl.so.1 if present on disk but named by no ICD file.

    Returns None when the library is absent or already registered.
    """
    lib = next((p for g in _NVIDIA_LIB_GLOBS for p in glob.glob(g)), None)
    if lib is None:
        return None
    dirs = os.environ.get("OCL_ICD_VENDORS")
    dirs = [dirs] if dirs else ["/etc/OpenCL/vendors"]
    for d in dirs:
        files = [d] if os.path.isfile(d) else glob.glob(os.path.join(d, "*.icd"))
        for f in files:
            try:
                with open(f) as fh:
                    if "libnvidia-opencl" in fh.read():
                        return None
            except OSError:
                pass
    return lib


def nvidia_icd_fix(lib):
    """Shell lines that register NVIDIA's OpenCL library with the ICD loader."""
    return (
        "mkdir -p ~/.opencl-vendors\n"
        f"echo {lib} > ~/.opencl-vendors/nvidia.icd\n"
        "cp /etc/OpenCL/vendors/*.icd ~/.opencl-vendors/ 2>/dev/null  # keep the others (PoCL)\n"
        "export OCL_ICD_VENDORS=~/.opencl-vendors"
    )
