#!/usr/bin/env python3
"""SpGEMM C = A @ B (scipy CSR) with the rows' products sorted by segmented_sort.

The expansion step (every a_ik * b_kj, tagged with its row i and column j) is
done with numpy; the products of each row of C form one segment, sorted by
column with ``clkernels.segmented_sort`` (keys: column, values: product); equal
columns are then summed (a segmented reduction in numpy) to give C in CSR,
compared with scipy's A @ B.

    python examples/spgemm.py [--n 20000] [--density 2e-4] [--device pocl]
"""

import argparse
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import clkernels  # noqa: E402


def expand(A, B):
    """(row offsets of C's expanded products, columns, products), row-major."""
    A, B = A.tocsr(), B.tocsr()
    arow = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    blen = np.diff(B.indptr)[A.indices]                      # products per nonzero of A
    nprod = int(blen.sum())
    # for each nonzero of A, the range of B's row k
    start = np.repeat(B.indptr[A.indices], blen)
    within = np.arange(nprod) - np.repeat(np.cumsum(blen) - blen, blen)
    bidx = start + within
    cols = B.indices[bidx].astype(np.uint32)
    vals = np.repeat(A.data, blen) * B.data[bidx]
    row_counts = np.bincount(np.repeat(arow, blen), minlength=A.shape[0])
    off = np.zeros(A.shape[0] + 1, np.int64)
    np.cumsum(row_counts, out=off[1:])
    return off, cols, vals


def spgemm(A, B, device=None):
    off, cols, vals = expand(A, B)
    scols, svals = clkernels.segmented_sort(cols, off, vals, device=device)
    # sum runs of equal (row, column)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(off))
    new = np.ones(scols.size, bool)
    new[1:] = (scols[1:] != scols[:-1]) | (rows[1:] != rows[:-1])
    starts = np.flatnonzero(new)
    data = np.add.reduceat(svals, starts) if starts.size else svals[:0]
    indices = scols[starts].astype(np.int32)
    indptr = np.zeros(A.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows[starts], minlength=A.shape[0]), out=indptr[1:])
    return sp.csr_matrix((data, indices, indptr), shape=(A.shape[0], B.shape[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--density", type=float, default=2e-4)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    dev = clkernels.Device(args.device) if args.device else clkernels.default_device()
    rng = np.random.default_rng(0)
    # a random matrix and a 2-D Poisson (5-point Laplacian) matrix
    cases = {"random": sp.random(args.n, args.n, density=args.density, format="csr", random_state=rng,
                                 dtype=np.float64)}
    m = int(np.sqrt(args.n))
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    cases["laplace2d"] = (sp.kron(sp.identity(m), T) + sp.kron(T, sp.identity(m))).tocsr()
    for name, A in cases.items():
        B = A.T.tocsr() if name == "random" else A
        t0 = time.perf_counter()
        C = spgemm(A, B, device=dev)
        t1 = time.perf_counter()
        R = (A @ B).tocsr()
        t2 = time.perf_counter()
        R.sort_indices()
        R.eliminate_zeros()
        C.eliminate_zeros()
        same = (C.shape == R.shape and np.array_equal(C.indptr, R.indptr)
                and np.array_equal(C.indices, R.indices) and np.allclose(C.data, R.data, rtol=1e-12))
        print(f"{name}: A {A.shape} nnz {A.nnz}, C nnz {C.nnz}; clkernels {t1 - t0:.3f}s "
              f"(incl. numpy expansion), scipy {t2 - t1:.3f}s; matches scipy: {same}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
