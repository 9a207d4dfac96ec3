## Binned pair counts in the manner of Corrfunc's theory routines (host/paircounts):
## for every pair (i of x, j of y) its separation in double precision, binned
## in one or two dimensions; per bin the number of pairs, and optionally the
## sum of the binned separation (ravg) and of the pair weight w_i * w_j.
##
## Exactness: every distance is the float64 evaluation of the host's reference
## (numpy): d_k = x_ik - y_jk, in a periodic box d_k -= L_k * rint(d_k / L_k),
## s = d_0 * d_0 + d_1 * d_1 + ... in order, no contraction into fused
## multiply-adds, then a correctly rounded sqrt (and division for mu). Bins
## follow numpy.histogram: [e_k, e_k+1), the last one closed, the comparisons
## with the float64 edges themselves.
##
## Work decomposition: a work-group takes WG_SIZE anchors (x, one per
## work-item) and a chunk of partners (y) staged through local memory a tile
## of WG_SIZE at a time; get_group_id(1) selects the chunk. Each work-group
## keeps its histogram in local memory (32-bit counts: the host keeps
## WG_SIZE * chunk below 2^32; double sums by compare-and-swap) and writes it
## to its own slice of the partial buffers; 'reduce' sums the slices per bin
## in group order.
##
## Parameters:
##   dims      1..8; mode 'r' (d over all axes), 'rppi' (rp over the first
##             dims - 1 axes, pi = |d_last|), 'smu' (s over all axes,
##             mu = |d_last| / s, 0 when s == 0)
##   periodic  minimum image in the box (the host checks reach <= L / 2)
##   triclinic the box is a lower-triangular cell (a_x, b_x, b_y, c_x, c_y, c_z;
##             dims 3): the minimum image by host/paircounts/boxes.py's
##             sequence (reach below half the shortest perpendicular width)
##   auto      y is x: only j > i (the host doubles for ordered pairs)
##   weighted, ravg, grouped   sums of w_i w_j, of the binned separation; skip
##             pairs whose group ids are equal
##   nb1, nb2  bins of the first (r, rp, s) and second (pi, mu; 1 in mode 'r') axis
##   uniform1, uniform2   the axis's edges are (nearly) uniform: the bin is guessed
##             from the width and corrected against the edges, else binary search
##   wg_size   work-items per group = partners per tile
<%namespace name="common" file="common.cl.mako"/>

<%def name="paircounts(dims, mode, periodic, auto, weighted, ravg, grouped, nb1, nb2, uniform1, uniform2, wg_size, triclinic=False)">
<%
    if mode not in ("r", "rppi", "smu"):
        raise ValueError("mode must be 'r', 'rppi' or 'smu', got %r" % (mode,))
    if mode != "r" and dims < 2:
        raise ValueError("mode %r needs at least 2 dimensions" % (mode,))
    if triclinic and not (periodic and dims == 3):
        raise ValueError("a triclinic box needs periodic, 3 dimensions")
    ortho = periodic and not triclinic
    two = mode != "r"
    ks = range(dims)
    rk = range(dims - 1) if mode == "rppi" else ks
    last = dims - 1
    def bin_call(axis, v):
        if (uniform1, uniform2)[axis - 1]:
            return "find_bin_uniform(e%d, NB%d, %s, scale%d)" % (axis, axis, v, axis)
        return "find_bin(e%d, NB%d, %s)" % (axis, axis, v)
%>
${common.prelude(real='double', wg_size=wg_size)}
#pragma OPENCL FP_CONTRACT OFF
#define NB1 ${nb1}
#define NB2 ${nb2}
#define NB (NB1 * NB2)

// numpy.histogram's bin of v over nb strictly increasing edges e: [e_k, e_k+1),
// the last one closed; -1 outside (and for NaN)
inline int find_bin(__local const double *e, const int nb, const double v)
{
    if (!(v >= e[0] && v <= e[nb])) return -1;
    if (v == e[nb]) return nb - 1;
    int lo = 0, hi = nb;                        // e[lo] <= v < e[hi]
    while (hi - lo > 1) {
        const int m = (lo + hi) >> 1;
        if (e[m] <= v) lo = m; else hi = m;
    }
    return lo;
}

// The same bin for (nearly) uniform edges: a guess from the bin width, then
// corrected by the comparisons with the edges themselves (exact for any edges).
inline int find_bin_uniform(__local const double *e, const int nb, const double v, const double scale)
{
    if (!(v >= e[0] && v <= e[nb])) return -1;
    int k = clamp((int)((v - e[0]) * scale), 0, nb - 1);
    while (k > 0 && v < e[k]) --k;
    while (k < nb - 1 && v >= e[k + 1]) ++k;
    return k;
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void paircounts(
%for k in ks:
    __global const double *x${k},
%endfor
    const uint nx,
%for k in ks:
    __global const double *y${k},
%endfor
    const uint ny,
%if weighted:
    __global const double *wx, __global const double *wy,
%endif
%if grouped:
    __global const int *gx, __global const int *gy,
%endif
    __global const double *edges1,
%if two:
    __global const double *edges2,
%endif
%if periodic:
    __global const double *box,
%endif
    const uint chunk,
    __global ulong *part_n
%if ravg:
    , __global double *part_d
%endif
%if weighted:
    , __global double *part_w
%endif
    )
{
    __local uint hn[NB];
%if ravg:
    __local double hd[NB];
%endif
%if weighted:
    __local double hw[NB];
    __local double tw[WG_SIZE];
%endif
%if grouped:
    __local int tg[WG_SIZE];
%endif
    __local double e1[NB1 + 1];
%if two:
    __local double e2[NB2 + 1];
%endif
%for k in ks:
    __local double t${k}[WG_SIZE];
%endfor
    const uint lid = get_local_id(0);
    const uint first = get_group_id(0) * WG_SIZE;
    const uint i = first + lid;
    const int active = i < nx;
    for (uint b = lid; b < NB; b += WG_SIZE) {
        hn[b] = 0u;
%if ravg:
        hd[b] = 0.0;
%endif
%if weighted:
        hw[b] = 0.0;
%endif
    }
    for (uint b = lid; b <= NB1; b += WG_SIZE) e1[b] = edges1[b];
%if two:
    for (uint b = lid; b <= NB2; b += WG_SIZE) e2[b] = edges2[b];
%endif
%if uniform1:
    const double scale1 = NB1 / (edges1[NB1] - edges1[0]);
%endif
%if two and uniform2:
    const double scale2 = NB2 / (edges2[NB2] - edges2[0]);
%endif
%for k in ks:
    const double a${k} = active ? x${k}[i] : 0.0;
%if ortho:
    const double L${k} = box[${k}];
%endif
%endfor
%if triclinic:
    const double Tax = box[0], Tbx = box[1], Tby = box[2], Tcx = box[3], Tcy = box[4], Tcz = box[5];
%endif
%if weighted:
    const double wi = active ? wx[i] : 0.0;
%endif
%if grouped:
    const int gi = active ? gx[i] : 0;
%endif
    const uint j1 = min((uint)((get_group_id(1) + 1) * chunk), ny);
%if auto:
    const uint j0 = max((uint)(get_group_id(1) * chunk), first + 1u);   // partners j > i only
%else:
    const uint j0 = get_group_id(1) * chunk;
%endif
    for (uint t = j0; t < j1; t += WG_SIZE) {
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint jl = t + lid;
        if (jl < j1) {
%for k in ks:
            t${k}[lid] = y${k}[jl];
%endfor
%if weighted:
            tw[lid] = wy[jl];
%endif
%if grouped:
            tg[lid] = gy[jl];
%endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint m = min((uint)WG_SIZE, j1 - t);
        if (!active) continue;
        for (uint u = 0; u < m; ++u) {
%if auto:
            if (t + u <= i) continue;
%endif
%if grouped:
            if (tg[u] == gi) continue;
%endif
%for k in ks:
            double d${k} = a${k} - t${k}[u];
%if ortho:
            d${k} = d${k} - L${k} * rint(d${k} / L${k});
%endif
%endfor
%if triclinic:
            {   // along c, then b, then a (boxes.py)
                double nt = rint(d2 / Tcz);
                d0 = d0 - nt * Tcx; d1 = d1 - nt * Tcy; d2 = d2 - nt * Tcz;
                nt = rint(d1 / Tby);
                d0 = d0 - nt * Tbx; d1 = d1 - nt * Tby;
                nt = rint(d0 / Tax);
                d0 = d0 - nt * Tax;
            }
%endif
            double s = d${rk[0]} * d${rk[0]};
%for k in rk[1:]:
            s = s + d${k} * d${k};
%endfor
            const double v1 = sqrt(s);
            int b = ${bin_call(1, "v1")};
            if (b < 0) continue;
%if mode == "rppi":
            const int b2 = ${bin_call(2, "fabs(d%d)" % last)};
%elif mode == "smu":
            const int b2 = ${bin_call(2, "(v1 > 0.0 ? fabs(d%d) / v1 : 0.0)" % last)};
%endif
%if two:
            if (b2 < 0) continue;
            b = b * NB2 + b2;
%endif
            atomic_inc(&hn[b]);
%if ravg:
            atomic_add_f64_l(&hd[b], v1);
%endif
%if weighted:
            atomic_add_f64_l(&hw[b], wi * tw[u]);
%endif
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const size_t g = (size_t)get_group_id(1) * get_num_groups(0) + get_group_id(0);
    for (uint b = lid; b < NB; b += WG_SIZE) {
        part_n[g * NB + b] = hn[b];
%if ravg:
        part_d[g * NB + b] = hd[b];
%endif
%if weighted:
        part_w[g * NB + b] = hw[b];
%endif
    }
}

// One work-item per bin: the sums over the ngroups partial histograms, in group order.
__kernel void paircounts_reduce(__global const ulong *part_n,
%if ravg:
                                __global const double *part_d,
%endif
%if weighted:
                                __global const double *part_w,
%endif
                                const uint ngroups, __global ulong *out_n
%if ravg:
                                , __global double *out_d
%endif
%if weighted:
                                , __global double *out_w
%endif
                                )
{
    const uint b = get_global_id(0);
    if (b >= NB) return;
    ulong n = 0;
%if ravg:
    double sd = 0.0;
%endif
%if weighted:
    double sw = 0.0;
%endif
    for (uint g = 0; g < ngroups; ++g) {
        n += part_n[(size_t)g * NB + b];
%if ravg:
        sd += part_d[(size_t)g * NB + b];
%endif
%if weighted:
        sw += part_w[(size_t)g * NB + b];
%endif
    }
    out_n[b] = n;
%if ravg:
    out_d[b] = sd;
%endif
%if weighted:
    out_w[b] = sw;
%endif
}
</%def>
