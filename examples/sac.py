#!/usr/bin/env python3
"""Suffix-array construction by prefix doubling with segmented_sort (the seed's SAC).

Manber-Myers prefix doubling: after round h every bucket holds the suffixes
that share their first h characters; round 2h sorts each bucket of more than
one suffix by the rank of the suffix h characters further on -- one
``clkernels.segmented_sort`` over all buckets (keys: that rank, values: the
suffix start) -- then splits the buckets where the key changes (numpy).
Stops when every bucket is a single suffix.

The text is real English prose: the CPython standard library's LICENSE file
(or, failing that, the source of the ``textwrap`` module), repeated to
``--size`` bytes. The result is checked against a plain Python suffix array
(``sorted(range(n), key=lambda i: text[i:])``) on the first ``--check``
bytes, and on the whole text by comparing each adjacent pair of suffixes.

    python examples/sac.py [--size 2000000] [--check 6000] [--device pocl]
"""

import argparse
import os
import sys
import sysconfig
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import clkernels  # noqa: E402


def real_text():
    for p in (os.path.join(sysconfig.get_paths()["stdlib"], "LICENSE.txt"),
              os.path.join(sys.base_prefix, "LICENSE.txt"),
              os.path.join(sys.base_prefix, "lib", "python%d.%d" % sys.version_info[:2], "LICENSE.txt")):
        if os.path.exists(p):
            with open(p, "rb") as f:
                return f.read(), p
    import textwrap

    with open(textwrap.__file__, "rb") as f:
        return f.read(), textwrap.__file__


def suffix_array(text, device=None, stats=None):
    """Suffix array of a bytes object (int64 array of suffix starts)."""
    n = len(text)
    s = np.frombuffer(text, np.uint8).astype(np.uint32)
    # round 1: one segment, sorted by the first character
    sa = clkernels.segmented_sort(s, np.array([0, n]), np.arange(n, dtype=np.uint32), device=device)[1]
    sa = sa.astype(np.int64)
    first = s[sa]
    head = np.ones(n, bool)
    head[1:] = first[1:] != first[:-1]                  # bucket heads (position in sa)
    h, rounds = 1, 1
    while not head.all():
        bstart = np.maximum.accumulate(np.where(head, np.arange(n), 0))   # bucket start of each position
        rank = np.empty(n, np.int64)
        rank[sa] = bstart                                # rank of a suffix: its bucket's start
        # key of suffix i: rank of suffix i + h (0 beyond the end, ranks shifted by one)
        nxt = sa + h
        key = np.zeros(n, np.uint32)
        inside = nxt < n
        key[inside] = (rank[nxt[inside]] + 1).astype(np.uint32)
        heads = np.flatnonzero(head)
        off = np.append(heads, n).astype(np.int64)
        skey, ssa = clkernels.segmented_sort(key, off, sa.astype(np.uint32), device=device)
        sa = ssa.astype(np.int64)
        newhead = head.copy()
        newhead[1:] |= skey[1:] != skey[:-1]
        head = newhead
        h *= 2
        rounds += 1
    if stats is not None:
        stats["rounds"] = rounds
    return sa


def suffix_less(text, x, y):
    """text[x:] < text[y:] without copying whole suffixes (windows grow 4x)."""
    w = 32
    while True:
        a, b = text[x:x + w], text[y:y + w]
        if a != b:
            return a < b
        w *= 4


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=2_000_000, help="bytes of text (the file repeated)")
    ap.add_argument("--check", type=int, default=6000, help="prefix checked against plain Python")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    dev = clkernels.Device(args.device) if args.device else clkernels.default_device()
    base, path = real_text()
    # a light edit per copy keeps the repeats from being identical (as in real corpora)
    parts, total, i = [], 0, 0
    while total < args.size:
        part = base if i == 0 else base.replace(b"the", b"th%d" % i, i % 7 + 1)
        parts.append(part)
        total += len(part)
        i += 1
    text = b"".join(parts)[:args.size]
    print(f"text: {path} ({len(base)} bytes) -> {len(text)} bytes; device {dev.name}")

    small = text[:args.check]
    t0 = time.perf_counter()
    ref = sorted(range(len(small)), key=lambda j: small[j:])
    t1 = time.perf_counter()
    got = suffix_array(small, dev)
    t2 = time.perf_counter()
    ok_small = np.array_equal(got, np.array(ref))
    print(f"{len(small)} bytes: plain Python {t1 - t0:.3f}s, clkernels {t2 - t1:.3f}s; equal: {ok_small}")

    st = {}
    t0 = time.perf_counter()
    sa = suffix_array(text, dev, st)
    t1 = time.perf_counter()
    perm = np.array_equal(np.sort(sa), np.arange(len(text)))
    ordered = all(suffix_less(text, x, y) for x, y in zip(sa[:-1].tolist(), sa[1:].tolist()))
    print(f"{len(text)} bytes: clkernels {t1 - t0:.3f}s in {st['rounds']} rounds; permutation: {perm}, "
          f"adjacent suffixes ordered: {ordered}")
    if not (ok_small and perm and ordered):
        sys.exit(1)


if __name__ == "__main__":
    main()
