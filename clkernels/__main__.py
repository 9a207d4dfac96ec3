"""The ``clkernels`` command.

    clkernels info                  the OpenCL devices and the facts the library uses
    clkernels autotune [...]        the autotuner (the same as the ``autotune`` command)
    clkernels --version
"""

import argparse
import sys

from tabulate import tabulate

from .host.core import device as dev
from .host.core import icd


def info(out=sys.stdout):
    found = dev.devices()
    lib = icd.find_unregistered_nvidia_icd()
    if not found:
        print(dev.NO_PLATFORM_HELP, file=out)
    else:
        try:
            default = dev.select_cl_device()
        except dev.NoDeviceError as e:
            default = None
            print(f"warning: {e}", file=out)
        rows = []
        for d in found:
            try:
                mult = d.preferred_wg_multiple
            except Exception as e:  # a device that cannot build still gets listed
                mult = f"error: {type(e).__name__}"
            rows.append([
                "*" if default is not None and d.cl_device == default else "",
                d.platform_name, d.name, "GPU" if d.is_gpu else "CPU", d.compute_units,
                d.max_work_group_size, mult, f"{d.local_mem_size // 1024} KiB",
                f"{d.global_mem_size / 2**30:.1f} GiB", "yes" if d.fp64 else "no",
                "yes" if d.int64_atomics else "two-word", d.sg_backend,
                ",".join(d.sg_backends), d.driver_version])
        print(tabulate(rows, headers=["default", "platform", "device", "type", "CUs", "max wg",
                                      "wg multiple", "local mem", "global mem", "fp64",
                                      "int64 atomics", "sub-groups", "back ends", "driver"]), file=out)
        print("\nchoose with CLKERNELS_DEVICE=<platform:device index or name substring>, "
              "e.g. CLKERNELS_DEVICE=nvidia or CLKERNELS_DEVICE=0:1", file=out)
    if lib:
        print(f"\nNVIDIA's OpenCL library {lib} is on this machine, but no ICD vendors file names it, "
              "so the GPU is invisible to OpenCL. Fix:\n" + icd.nvidia_icd_fix(lib), file=out)
    intel = icd.intel_cpu_runtime()
    if intel and icd.REGISTERED_ICDS:
        print(f"\nIntel's CPU OpenCL runtime ({intel}, pip package intel-opencl-rt) is registered "
              f"through {icd.REGISTERED_ICDS} (OCL_ICD_VENDORS, set by clkernels at import).", file=out)
    elif intel and not any("intel" in d.platform_name.lower() for d in found):
        print(f"\nIntel's CPU OpenCL runtime {intel} is installed, but OCL_ICD_VENDORS is set, so clkernels "
              f"did not register it: add a file naming it to that folder, e.g.\n"
              f"echo {intel} > \"$OCL_ICD_VENDORS/intel-cpu.icd\"", file=out)
    return 0 if found else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["autotune"]:        # everything after it belongs to the autotuner
        from .autotune.cli import main as autotune_main

        return autotune_main(argv[1:], prog="clkernels autotune")
    from . import __version__

    ap = argparse.ArgumentParser(prog="clkernels", description="clkernels command line")
    ap.add_argument("--version", action="version", version=f"clkernels {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="list OpenCL devices and the facts clkernels decides by")
    sub.add_parser("autotune", help="tune the operations for a device (see 'clkernels autotune --help')")
    args = ap.parse_args(argv)
    if args.cmd == "info":
        return info()
    return 2


if __name__ == "__main__":
    sys.exit(main())
