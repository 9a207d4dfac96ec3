## Output stages shared by the pair kernels (host/outputs): the exact
## decision of pairs near a threshold, and the reduction of per-group histograms.
##
## Exactness. The pair kernels compute squared distances in their own
## precision from kernel coordinates; a pair whose value lies within the
## host's proven rounding band of a threshold (r or a bin edge) is decided
## here instead, from the ORIGINAL coordinates (the user's (n, D) array, ORIG =
## float or double), exactly as a float64 evaluation does it:
##     dx_k = x_ik * xs - y_jk * xs            (xs: 1, or a power of two for
##                                               float64 inputs near overflow)
##     dx_k -= L_k * rint(dx_k / L_k)          (periodic: minimum image)
##     dx_k += m_k * L_k                       (images='all': image m)
##     s = ((dx_0 * dx_0 + dx_1 * dx_1) + ...) sequentially, no fused multiply-add
##     d = sqrt(s)                             (correctly rounded)
## i.e. numpy's and scipy's (pdist/cdist) order for d < 8; then d <= r, or the
## bin by numpy.histogram's rule (searchsorted on the edges, the last bin closed).
##
## xp (global double array): xp[0] = xs, xp[1 .. D] = the box (times xs), then
## the thresholds times xs: r (count), the K radii (radii), or the nb + 1 edges.
<%namespace name="common" file="common.cl.mako"/>

## ------------------------------------------------ exact evaluation (double)
<%def name="exact_defs(orig, dims, box, images)">
#pragma OPENCL FP_CONTRACT OFF
typedef ${orig} ORIG;
// the float64 evaluation of the squared distance between X[i] and Y[j] (image m when given)
inline double exact_sq(__global const ORIG *X, const ulong i, __global const ORIG *Y, const ulong j,
                       __global const double *xp${", const int *m" if images == "all" else ""})
{
    const double xs = xp[0];
    double s = 0.0;
%for k in range(dims):
    {
        double dk = (double)X[i * ${dims} + ${k}] * xs - (double)Y[j * ${dims} + ${k}] * xs;
%if box:
        const double L = xp[${1 + k}];
        const double n = rint(dk / L);
        const double nl = L * n;
        dk = dk - nl;
%if images == "all":
        const double ml = (double)m[${k}] * L;
        dk = dk + ml;
%endif
%endif
        const double sq = dk * dk;
        s = s + sq;
    }
%endfor
    return s;
}
#pragma OPENCL FP_CONTRACT ON

// the float64 evaluation of the distance between X[i] and Y[j] (image m when given)
NOINLINE double exact_dist(__global const ORIG *X, const ulong i, __global const ORIG *Y, const ulong j,
                         __global const double *xp${", const int *m" if images == "all" else ""})
{
    return sqrt(exact_sq(X, i, Y, j, xp${", m" if images == "all" else ""}));
}

// 1 if the exact distance is <= r (xp[D + 1])
NOINLINE uint exact_within(__global const ORIG *X, const ulong i, __global const ORIG *Y, const ulong j,
                         __global const double *xp${", const int *m" if images == "all" else ""})
{
    return exact_dist(X, i, Y, j, xp${", m" if images == "all" else ""}) <= xp[${dims + 1}] ? 1u : 0u;
}

// the bin of the exact distance: numpy.histogram over the nb + 1 edges at
// xp[D + 1 ..] (closed 'left': [e_b, e_b+1), the last bin closed) or the first
// of the nb radii with d <= r (closed 'right'); 0xffffffff outside every bin
NOINLINE uint exact_bin(__global const ORIG *X, const ulong i, __global const ORIG *Y, const ulong j,
                      __global const double *xp, const uint nb, const int right${", const int *m" if images == "all" else ""})
{
    const double d = exact_dist(X, i, Y, j, xp${", m" if images == "all" else ""});
    __global const double *e = xp + ${dims + 1};
    if (right) {                        // first b with d <= e[b]
        uint lo = 0, hi = nb;
        while (lo < hi) { uint mid = (lo + hi) >> 1; if (e[mid] < d) lo = mid + 1; else hi = mid; }
        return lo < nb ? lo : 0xffffffffu;
    }
    if (!(d >= e[0] && d <= e[nb])) return 0xffffffffu;
    if (d == e[nb]) return nb - 1;      // the last bin is closed
    uint lo = 0, hi = nb;               // the largest b with e[b] <= d
    while (hi - lo > 1) { uint mid = (lo + hi) >> 1; if (e[mid] <= d) lo = mid; else hi = mid; }
    return lo;
}
</%def>

## ------------------------------------------- per-group histograms reduced
## Sums per-group histograms part[g * nbins + b] (g < ngroups) into hist
## (ulong, accumulated). Every slot of part is written by its group first.
<%def name="hist_reduce(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void hist_reduce(__global const uint *part, const uint ngroups, const uint nbins, const uint per,
                 volatile __global ulong *hist)
{
    const uint b = get_global_id(0);
    const uint g0 = get_global_id(1) * per;
    if (b < nbins) {
        ulong s = 0;
        const uint g1 = min(ngroups, g0 + per);
        for (uint g = g0; g < g1; ++g) s += part[(size_t)g * nbins + b];
        if (s != 0) atomic_add_u64_g(hist + b, s);
    }
}
</%def>

## ------------------------------------------- a histogram of listed pairs
## The exact bins of the pairs (X[pi[k]], Y[pj[k]]), k < np, added to hist
## (uint): the same float64 evaluation and bin rule as every band decision
## above, so a statistic minus the histogram of some of its pairs is the
## statistic without them, exactly (exclusions: host/outputs/pairlist.py).
<%def name="pair_list_hist(orig, dims, box, wg_size)">
${common.prelude(real='double', wg_size=wg_size)}
${exact_defs(orig, dims, box, "nearest")}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void pair_list_hist(__global const ORIG *X, __global const ORIG *Y, __global const double *xp,
                    __global const uint *pi, __global const uint *pj, const uint np, const uint nb,
                    volatile __global uint *hist)
{
    const uint k = get_global_id(0);
    if (k >= np) return;
    const uint b = exact_bin(X, pi[k], Y, pj[k], xp, nb, 0);
    if (b != 0xffffffffu) atomic_inc(hist + b);
}
</%def>

## ------------------------------------------- band pairs listed by a pair kernel
## A count or histogram kernel lists the (original) indices of its band pairs
## (bl_i[k], bl_j[k]), k < bl_n[0] (as many as fit: cap), instead of deciding
## them in its loop, where a call to the double path costs registers and
## divergence on every candidate; this pass decides them by the same rule
## and adds them to the kernel's (ulong) count or bins. The host runs the
## pair kernel again when bl_n[0] > cap or bl_n[1] notes a count past 2^32:
## with room for all, or beyond host/cellgrid/plan.py's band_list_max with
## the band pairs decided in the kernel's loop (nothing is lost).
<%def name="band_list(orig, dims, box, wg_size, output)">
${common.prelude(real='double', wg_size=wg_size)}
${exact_defs(orig, dims, box, "nearest")}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void band_list(__global const ORIG *X, __global const ORIG *Y, __global const double *xp,
               __global const uint *bl_n, __global const uint *bl_i, __global const uint *bl_j,
               const uint cap, const uint nb, volatile __global ulong *out)
{
    const uint np = min(bl_n[0], cap);
    for (uint k = get_global_id(0); k < np; k += get_global_size(0)) {
%if output == 'count':
        if (exact_within(X, bl_i[k], Y, bl_j[k], xp)) atomic_add_u64_g(out, 1UL);
%else:
        const uint b = exact_bin(X, bl_i[k], Y, bl_j[k], xp, nb, 0);
        if (b != 0xffffffffu) atomic_add_u64_g(out + b, 1UL);
%endif
    }
}
</%def>
