## Binned pair counts in the manner of Corrfunc's theory routines (host/paircounts):
## for every pair (i of x, j of y) its separation in double precision, binned
## in one or two dimensions; per bin the number of pairs, and optionally the
## sum of the binned separation (ravg) and of the pair weight w_i * w_j.
##
## Exactness: every distance is the float64 evaluation of the host's reference
## (numpy): d_k = x_ik - y_jk, in a periodic box d_k -= L_k * rint(d_k / L_k)
## (the image count rint(d_k / L_k) from a product with 1 / L_k where that
## gives the same integer, common.cl.mako's clk_image_count),
## s = d_0 * d_0 + d_1 * d_1 + ... in order, no contraction into fused
## multiply-adds, then a correctly rounded sqrt (and division for mu). Bins
## follow numpy.histogram: [e_k, e_k+1), the last one closed, the comparisons
## with the float64 edges themselves -- on the first axis as comparisons of s
## with the edges' exact squared thresholds (find_bin_sq: the same bins, no
## square root; it is taken only for ravg and mu).
##
## Work decomposition: a work-group takes WG_SIZE anchors (x, one per
## work-item) and a chunk of partners (y) staged through local memory a tile
## of WG_SIZE at a time; get_group_id(1) selects the chunk. A work-item takes
## its tile's partners ILP (4) at a time: their separations and table codes
## first, then their bins and sums, so the reads and arithmetic of four pairs
## overlap where one pair's chain of dependent steps would wait (H200: rp-pi
## 1.10x, examples/PERFORMANCE.md). Each work-group
## keeps its histogram in local memory (32-bit counts: the host keeps
## WG_SIZE * chunk below 2^32; sums in fixed point, below) and writes it to
## its own slice of the partial buffers; 'reduce' sums the slices per bin in
## group order.
##
## Gridded (the host's cell grid, host/paircounts/gridded.py): x and y in the
## grid's cell order; work-group g takes the anchors [gtab[4g], gtab[4g + 1])
## and the partner ranges rtab[gtab[4g + 2] .. gtab[4g + 3]) (pairs (j0, j1)
## of sorted positions: the neighbour cells of the anchors' cells, at most
## ``chunk`` partners in all), each staged a tile at a time as above. Every
## pair within reach of the last edges is in some anchor's ranges once; auto
## pairs keep j > i in the sorted order. The pairs evaluated and their bins are
## the all-pairs kernel's.
##
## Sums (ravg, weighted) in fixed point, with 32-bit local atomics only: the
## host picks a scale 2^s per sum (host/paircounts/plan.py fixed_point) with
## |v| * 2^s < 2^62 for every value v the kernel adds (v1 <= the last edge
## of the first axis; w_i w_j <= max|w_x| max|w_y|, rounding being
## monotonic). A pair adds q = rint(v * 2^s) (the scaling is exact: one
## rounding) as four 16-bit limbs, each to its own 32-bit local sum per bin:
## q = l3 2^48 + l2 2^32 + l1 2^16 + l0, l0..l2 in [0, 2^16), l3 = q >> 48
## in [-2^14, 2^14) as |q| < 2^62. A tile adds at most WG_SIZE^2 <= 2^16
## pairs to a bin (WG_SIZE <= 256), so a limb sum stays within
## 2^16 (2^16 - 1) < 2^32 (unsigned) and 2^16 2^14 = 2^30 < 2^31 (signed):
## after every tile the owner of a bin (b = lid, lid + WG_SIZE, ...) adds the
## four sums, times 2^(16k - s) (exact), into its private double-double
## (TwoSum) and zeroes them; the partials are double-doubles and 'reduce'
## sums them in double-double.
##
## Precision: each pair's value is rounded once, by at most 2^-(s+1) <=
## 2^-62 max|v| (max|v| the host's bound; s is capped at 1022, so for a bound
## below 2^-960 the error is at most 2^-1023); the integer sums are exact;
## TwoSum is exact and only lo rounds: N double-double additions (4 per
## flush, 2 per group in 'reduce'; terms below (1 + 2^-14) max|v| per pair)
## add at most N^2 2^-105 npairs max|v| (2^-65 npairs max|v| for N = 2^20).
## So before the final rounding of the result to double (half an ulp of the
## result) a bin's absolute error is at most about npairs 2^-62 max|v|:
## relative to the bin's sum of |v|, 2^-62 max|v| / (the bin's min|v|)
## (2.2e-13 when they span 1e6). The sums are reproducible run to run.
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
##   log1      the first axis's edges are (nearly) geometric: the guess from log2(s)
##   wg_size   work-items per group = partners per tile (<= 256 with ravg or weights)
##   gridded   the anchors and partner ranges of each work-group from the host's tables
##   tab1, tab2  the axis's bin from a table of the value's high bits (the high word of the
##             double; host/cellgrid/bins.py bin_table over the thresholds, no band):
##             a bin, TABLE_OUT, TABLE_EDGE + k (one threshold in the span: one comparison)
##             or TABLE_AMBIG (the guess or search); the same bins, fewer instructions
##   near      periodic, every |x_ik - y_jk| below 1.4 L_k: rint(d / L) is -1, 0 or 1, which
##             comparisons with the host's P_k (the largest d with fl(d / L_k) <= 1/2)
##             give without a rounding or a division: the same image (host/paircounts/plan.py
##             half_image)
<%namespace name="common" file="common.cl.mako"/>

<%def name="paircounts(dims, mode, periodic, auto, weighted, ravg, grouped, nb1, nb2, uniform1, uniform2, wg_size, triclinic=False, log1=False, gridded=False, tab1=False, tab2=False, near=False, codes=(254, 128, 255))">
<%
    if mode not in ("r", "rppi", "smu"):
        raise ValueError("mode must be 'r', 'rppi' or 'smu', got %r" % (mode,))
    if mode != "r" and dims < 2:
        raise ValueError("mode %r needs at least 2 dimensions" % (mode,))
    if triclinic and not (periodic and dims == 3):
        raise ValueError("a triclinic box needs periodic, 3 dimensions")
    ortho = periodic and not triclinic
    fixed = ravg or weighted
    if fixed and wg_size > 256:
        raise ValueError("fixed-point sums flush every tile of wg_size^2 <= 2^16 pairs: wg_size <= 256, got %d"
                         % wg_size)
    sums = [n for n, on in (("d", ravg), ("w", weighted)) if on]
    two = mode != "r"
    ks = range(dims)
    rk = range(dims - 1) if mode == "rppi" else ks
    last = dims - 1
    def bin_call(axis, v):
        if axis == 1:               # the first axis: s against squared thresholds (below)
            if uniform1:
                return "find_bin_sq_uniform(e1, NB1, %s, t1lo, t1hi, lo1, scale1)" % v
            if log1:
                return "find_bin_sq_log(e1, NB1, %s, t1lo, t1hi, lo1, scale1)" % v
            return "find_bin_sq(e1, NB1, %s)" % v
        if uniform2:
            return "find_bin_uniform(e2, NB2, %s, e2lo, e2hi, scale2)" % v
        return "find_bin(e2, NB2, %s)" % v
    need_sqrt = ravg or mode == "smu"
    if tab2 and mode != "rppi":
        raise ValueError("tab2: the pi axis of mode 'rppi'")
    if near and not ortho:
        raise ValueError("near: an orthorhombic periodic box")
    TABW = 1024                 # words of one table (bins.TABLE_MAX one-byte entries)
    ILP = 4                     # partners whose separations (and table reads) precede their binning
%>
<%def name="pair_value(p, u)">\
## partner ${u}'s separation (suffix _p): its differences, squared sum and table codes
%for k in ks:
            double d${k}_${p} = a${k} - t${k}[${u}];
%if near:
            // less L rint(d / L)
            d${k}_${p} = d${k}_${p} - (d${k}_${p} > P${k} ? L${k} : (d${k}_${p} < -P${k} ? -L${k} : 0.0));
%elif ortho:
            d${k}_${p} = d${k}_${p} - L${k} * clk_image_count(d${k}_${p}, L${k}, iL${k});
%endif
%endfor
%if triclinic:
            {   // along c, then b, then a (boxes.py)
                double nt = clk_image_count(d2_${p}, Tcz, iTcz);
                d0_${p} = d0_${p} - nt * Tcx; d1_${p} = d1_${p} - nt * Tcy; d2_${p} = d2_${p} - nt * Tcz;
                nt = clk_image_count(d1_${p}, Tby, iTby);
                d0_${p} = d0_${p} - nt * Tbx; d1_${p} = d1_${p} - nt * Tby;
                nt = clk_image_count(d0_${p}, Tax, iTax);
                d0_${p} = d0_${p} - nt * Tax;
            }
%endif
            double s_${p} = d${rk[0]}_${p} * d${rk[0]}_${p};
%for k in rk[1:]:
            s_${p} = s_${p} + d${k}_${p} * d${k}_${p};
%endfor
%if tab1:
            const uint c1_${p} = table_code(btab1, s_${p}, sh1, base1, n1);
%endif
%if mode == "rppi":
            const double pv_${p} = fabs(d${last}_${p});
%if tab2:
            const uint c2_${p} = table_code(btab2, pv_${p}, sh2, base2, n2);
%endif
%endif
</%def>\
<%def name="pair_use(p, u)">\
## partner ${u}'s bins and sums from pair_value's values (break: the pair is not counted)
            do {
%if auto:
                if (t + ${u} <= i) break;                  // partners j > i only
%endif
%if grouped:
                if (tg[${u}] == gi) break;
%endif
%if tab1:
                int b = coded_bin(c1_${p}, e1, NB1, s_${p});
                if (b == -2) b = ${bin_call(1, "s_%d" % p)};
%else:
                int b = ${bin_call(1, "s_%d" % p)};
%endif
                if (b < 0) break;
%if need_sqrt:
                const double v1 = sqrt(s_${p});
%endif
%if mode == "rppi" and tab2:
                int b2 = coded_bin(c2_${p}, e2, NB2, pv_${p});
                if (b2 == -2) b2 = ${bin_call(2, "pv_%d" % p)};
%elif mode == "rppi":
                const int b2 = ${bin_call(2, "pv_%d" % p)};
%elif mode == "smu":
                const int b2 = ${bin_call(2, "(v1 > 0.0 ? fabs(d%d_%d) / v1 : 0.0)" % (last, p))};
%endif
%if two:
                if (b2 < 0) break;
                b = b * NB2 + b2;
%endif
                atomic_inc(&hn[b]);
%if ravg:
                fixed_add(dlimb, dtop, b, v1, dq);
%endif
%if weighted:
                fixed_add(wlimb, wtop, b, wi * tw[${u}], wq);
%endif
            } while (0);
</%def>\
${common.prelude(real='double', wg_size=wg_size)}
#pragma OPENCL FP_CONTRACT OFF
#define NB1 ${nb1}
#define NB2 ${nb2}
#define NB (NB1 * NB2)
#define BPO ((NB + WG_SIZE - 1) / WG_SIZE)     // bins per work-item: b = lid + r * WG_SIZE, r < BPO

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

// k corrected to the bin of v over e (e[0] <= v <= e[nb] known): down while v is below
// e[k], else up while v reaches e[k + 1] -- two loads and compares where k was right.
inline int fix_guess(__local const double *e, const int nb, const double v, int k)
{
    if (v < e[k]) {
        do --k; while (k > 0 && v < e[k]);
    } else if (k < nb - 1 && v >= e[k + 1]) {
        do ++k; while (k < nb - 1 && v >= e[k + 1]);
    }
    return k;
}

// The same bin for (nearly) uniform edges: a guess from the bin width (its floor by
// the 1.5 * 2^52 magic number after taking 1/2: no conversion instruction), then
// corrected by comparisons with the edges themselves (exact for any edges; a step only
// where the guess missed). lo, hi: e[0], e[nb] in registers.
inline int find_bin_uniform(__local const double *e, const int nb, const double v, const double lo,
                            const double hi, const double scale)
{
    if (!(v >= lo && v <= hi)) return -1;
    const double g = ((v - lo) * scale - 0.5) + 6755399441055744.0;   // 0 <= guess <= nb (1 + eps)
    return fix_guess(e, nb, v, min((int)(as_ulong(g) - 0x4338000000000000UL), nb - 1));
}

// The first axis's bin from the squared separation s, without its square root:
// t[k] (k < nb) is the least double s with sqrt(s) >= e_k (correctly rounded),
// t[nb] the largest with sqrt(s) <= e_nb (host/paircounts/plan.py
// sq_thresholds), so t[k] <= s < t[k+1] exactly when e_k <= sqrt(s) < e_k+1:
// numpy.histogram's bin of sqrt(s), the last closed; -1 outside (and for NaN).
inline int find_bin_sq(__local const double *t, const int nb, const double s)
{
    if (!(s >= t[0] && s <= t[nb])) return -1;
    int lo = 0, hi = nb;                        // t[lo] <= s, and s < t[hi] for hi < nb
    while (hi - lo > 1) {
        const int m = (lo + hi) >> 1;
        if (t[m] <= s) lo = m; else hi = m;
    }
    return lo;
}

// The same for (nearly) uniform edges from lo with nb / width = scale: a guess
// from a float square root, corrected by the exact comparisons. tlo, thi: t[0], t[nb].
inline int find_bin_sq_uniform(__local const double *t, const int nb, const double s, const double tlo,
                               const double thi, const float lo, const float scale)
{
    if (!(s >= tlo && s <= thi)) return -1;
    const int k = clamp(convert_int_sat((native_sqrt((float)s) - lo) * scale), 0, nb - 1);   // inf: INT_MAX
    return fix_guess(t, nb, s, k);
}

// The same for (nearly) geometric edges (log bins): the guess from log2(s),
// with lo = log2(e_0^2) and scale = nb / log2(e_nb^2 / e_0^2).
inline int find_bin_sq_log(__local const double *t, const int nb, const double s, const double tlo,
                           const double thi, const float lo, const float scale)
{
    if (!(s >= tlo && s <= thi)) return -1;
    const int k = clamp(convert_int_sat((native_log2((float)s) - lo) * scale), 0, nb - 1);   // 0: INT_MIN
    return fix_guess(t, nb, s, k);
}
%if periodic and not near or triclinic:

${common.image_count()}
%endif
%if tab1 or tab2:

#define TABLE_OUT ${codes[0]}u
#define TABLE_EDGE ${codes[1]}u
#define TABLE_AMBIG ${codes[2]}u

// The table entry of v >= 0: its double's high word shifted by sh, from base, n entries
inline uint table_code(__local const uchar *tab, const double v, const uint sh, const uint base, const uint n)
{
    return tab[min(max(as_uint2(v).y >> sh, base) - base, n - 1u)];
}

// The bin of v over the thresholds e[0..nb] from its table code c: the bin, -1 (outside:
// TABLE_OUT, or a span's one threshold at an end of the range), the bin next to the span's
// one threshold, or -2 (TABLE_AMBIG: the caller's guess). The decisions are
// numpy.histogram's (e[k] <= v < e[k + 1], the last closed), as the guess's.
inline int coded_bin(const uint c, __local const double *e, const int nb, const double v)
{
    if (c < (uint)nb) return (int)c;
    if (c == TABLE_OUT) return -1;
    if (c == TABLE_AMBIG) return -2;
    if (!(v >= e[0] && v <= e[nb])) return -1;
    const int k = (int)(c - TABLE_EDGE);
    return min(k + (v >= e[k + 1] ? 1 : 0), nb - 1);
}
%endif
%if fixed:

// (hi, lo) += b, exactly up to the rounding of lo (TwoSum)
inline void dd_add(double *hi, double *lo, const double b)
{
    const double s = *hi + b;
    const double bb = s - *hi;
    *lo += (*hi - (s - bb)) + (b - bb);
    *hi = s;
}

// Bin b's fixed-point sums += rint(v * q) (|v * q| < 2^62): limbs l0..l2 in
// limb[k * NB + b], the signed top limb in top[b].
inline void fixed_add(volatile __local uint *limb, volatile __local int *top, const int b, const double v,
                      const double q)
{
    const ulong u = as_ulong(convert_long_rte(v * q));
    const uint l0 = (uint)u & 0xFFFFu, l1 = (uint)(u >> 16) & 0xFFFFu, l2 = (uint)(u >> 32) & 0xFFFFu;
    const int l3 = (int)(u >> 48) - (int)((u >> 47) & 0x10000UL);     // q >> 48, sign-extended
    if (l0) atomic_add(&limb[b], l0);
    if (l1) atomic_add(&limb[NB + b], l1);
    if (l2) atomic_add(&limb[2 * NB + b], l2);
    if (l3) atomic_add(&top[b], l3);
}

// Bin b's limb sums, times 2^(16k) unit (unit = 2^-s: exact), into (hi, lo); then zeroed.
inline void fixed_flush(volatile __local uint *limb, volatile __local int *top, const uint b, const double unit,
                        double *hi, double *lo)
{
    const uint a0 = limb[b], a1 = limb[NB + b], a2 = limb[2 * NB + b];
    const int a3 = top[b];
    if (!(a0 | a1 | a2 | (uint)a3)) return;
    dd_add(hi, lo, (double)a3 * (unit * 281474976710656.0));
    dd_add(hi, lo, (double)a2 * (unit * 4294967296.0));
    dd_add(hi, lo, (double)a1 * (unit * 65536.0));
    dd_add(hi, lo, (double)a0 * unit);
    limb[b] = 0u; limb[NB + b] = 0u; limb[2 * NB + b] = 0u; top[b] = 0;
}
%endif

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
%if gridded:
    __global const uint *gtab, __global const uint *rtab,
%endif
%if tab1 or tab2:
    __global const uint *btab,                  // the first axis's table, then the second's (TABW words each)
    const uint sh1, const uint base1, const uint n1, const uint sh2, const uint base2, const uint n2,
%endif
%for v in sums:
    const double ${v}q, const double ${v}u,     // 2^s, 2^-s of the sum's fixed point
%endfor
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
%for v in sums:
    __local uint ${v}limb[3 * NB];
    __local int ${v}top[NB];
    double ${v}hi[BPO], ${v}lo[BPO];
%endfor
%if weighted:
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
%if tab1 or tab2:
    __local uint btw[${TABW * (int(tab1) + int(tab2))}];
%endif
    const uint lid = get_local_id(0);
%if gridded:
    __global const uint *gq = gtab + 4 * (size_t)get_group_id(0);
    const uint first = gq[0];
    const uint i = first + lid;
    const int active = i < gq[1];
%else:
    const uint first = get_group_id(0) * WG_SIZE;
    const uint i = first + lid;
    const int active = i < nx;
%endif
    for (uint b = lid; b < NB; b += WG_SIZE) {
        hn[b] = 0u;
%for v in sums:
        ${v}limb[b] = 0u; ${v}limb[NB + b] = 0u; ${v}limb[2 * NB + b] = 0u; ${v}top[b] = 0;
%endfor
    }
%for v in sums:
    for (uint r = 0; r < BPO; ++r) { ${v}hi[r] = 0.0; ${v}lo[r] = 0.0; }
%endfor
    for (uint b = lid; b <= NB1; b += WG_SIZE) e1[b] = edges1[b];
%if two:
    for (uint b = lid; b <= NB2; b += WG_SIZE) e2[b] = edges2[b];
%endif
%if tab1 or tab2:
    for (uint b = lid; b < ${TABW * (int(tab1) + int(tab2))}; b += WG_SIZE) btw[b] = btab[b];
%endif
%if tab1:
    __local const uchar *btab1 = (__local const uchar *)btw;
%endif
%if tab2:
    __local const uchar *btab2 = (__local const uchar *)btw + ${4 * TABW if tab1 else 0};
%endif
%if uniform1 or log1:
    const double t1lo = edges1[0], t1hi = edges1[NB1];             // the thresholds' ends
%endif
%if uniform1:
    const float lo1 = (float)edges1[NB1 + 1];                      // the edges' ends after the thresholds
    const float scale1 = (float)(NB1 / (edges1[NB1 + 2] - edges1[NB1 + 1]));
%elif log1:
    const float lo1 = (float)(2.0 * log2(edges1[NB1 + 1]));
    const float scale1 = (float)(NB1 / (2.0 * (log2(edges1[NB1 + 2]) - log2(edges1[NB1 + 1]))));
%endif
%if two and uniform2:
    const double e2lo = edges2[0], e2hi = edges2[NB2], scale2 = NB2 / (e2hi - e2lo);
%endif
%for k in ks:
    const double a${k} = active ? x${k}[i] : 0.0;
%if ortho:
%if near:
    const double L${k} = box[${k}], P${k} = box[${dims + k}];
%else:
    const double L${k} = box[${k}], iL${k} = 1.0 / L${k};
%endif
%endif
%endfor
%if triclinic:
    const double Tax = box[0], Tbx = box[1], Tby = box[2], Tcx = box[3], Tcy = box[4], Tcz = box[5];
    const double iTax = 1.0 / Tax, iTby = 1.0 / Tby, iTcz = 1.0 / Tcz;
%endif
%if weighted:
    const double wi = active ? wx[i] : 0.0;
%endif
%if grouped:
    const int gi = active ? gx[i] : 0;
%endif
%if gridded:
    for (uint rq = gq[2]; rq < gq[3]; ++rq) {       // the group's partner ranges (uniform)
    const uint j1 = rtab[2 * (size_t)rq + 1];
%if auto:
    const uint j0 = max(rtab[2 * (size_t)rq], first + 1u);             // partners j > i only
%else:
    const uint j0 = rtab[2 * (size_t)rq];
%endif
%else:
    const uint j1 = min((uint)((get_group_id(1) + 1) * chunk), ny);
%if auto:
    const uint j0 = max((uint)(get_group_id(1) * chunk), first + 1u);   // partners j > i only
%else:
    const uint j0 = get_group_id(1) * chunk;
%endif
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
        const uint m = active ? min((uint)WG_SIZE, j1 - t) : 0u;
        uint u = 0;
        for (; u + ${ILP} <= m; u += ${ILP}) {       // ${ILP} partners' separations first: their reads overlap
%for p in range(ILP):
${pair_value(p, "u + %d" % p)}
%endfor
%for p in range(ILP):
${pair_use(p, "u + %d" % p)}
%endfor
        }
        for (; u < m; ++u) {
${pair_value(0, "u")}
${pair_use(0, "u")}
        }
%if fixed:
        barrier(CLK_LOCAL_MEM_FENCE);          // the tile's <= 2^16 additions per bin are in
        for (uint r = 0; r < BPO; ++r) {
            const uint b = lid + r * WG_SIZE;
            if (b < NB) {
%for v in sums:
                fixed_flush(${v}limb, ${v}top, b, ${v}u, &${v}hi[r], &${v}lo[r]);
%endfor
            }
        }
%endif
    }
%if gridded:
    }
%endif
    barrier(CLK_LOCAL_MEM_FENCE);
    const size_t g = (size_t)get_group_id(1) * get_num_groups(0) + get_group_id(0);
    for (uint r = 0; r < BPO; ++r) {
        const uint b = lid + r * WG_SIZE;
        if (b >= NB) break;
        part_n[g * NB + b] = hn[b];
%for v in sums:
        part_${v}[2 * (g * NB + b)] = ${v}hi[r];         // double-double partials
        part_${v}[2 * (g * NB + b) + 1] = ${v}lo[r];
%endfor
    }
}

// One work-item per bin: the sums over the ngroups partial histograms, in group order
// (double-double for the fixed-point sums).
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
%for v in sums:
    double ${v}hi = 0.0, ${v}lo = 0.0;
%endfor
    for (uint g = 0; g < ngroups; ++g) {
        const size_t k = (size_t)g * NB + b;
        n += part_n[k];
%for v in sums:
        dd_add(&${v}hi, &${v}lo, part_${v}[2 * k]);
        dd_add(&${v}hi, &${v}lo, part_${v}[2 * k + 1]);
%endfor
    }
    out_n[b] = n;
%for v in sums:
    out_${v}[b] = ${v}hi + ${v}lo;
%endfor
}
</%def>
