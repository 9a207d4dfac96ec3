## Two-body statistics (2-BS): all pairs between two point sets, block pair by block pair.
##
## One work-group handles one (L block, R block) pair: an L block is the
## WG_SIZE * PPW anchor points held by the work-group (PPW per work-item), an R
## block the same number of partner points. The launch is 2-D over block pairs:
## group (gx, gy) pairs L block l0/B + gx with R block r0/B + gy. In self mode
## (one set, pairs i < j) groups below the diagonal return at once and diagonal
## groups take the `diag` path. Data are SoA (one array per dimension).
##
## Template parameters (host/twobody.py fills them):
##   real, dims, wg_size, ppw      types and shape
##   variant   pairwise stage: naive | readonly | lrshm | regshm | shuffle
##   vec       1, 2 or 4: vector loads of R points (naive / readonly only)
##   diag      mask | triangle | balanced: intra-block work of diagonal groups
##   box       minimum-image distances in an orthorhombic periodic box
##   out       count | sum | hist
##   hist_mode global | local;  copies: private local copies (lane % copies)
##   flush     reduce (per-group copies + hist_reduce kernel) | atomic
##   nbins, uniform                histogram shape (edges binary-searched if not uniform)
##   fullrange the range is [0, hi] with hi >= every possible value (built-in
##             distance): no range test; d == hi lands in an extra slot (no clamp)
##   sq        the value is a squared Euclidean distance (built-in distance)
##   dist_code user distance: C body over `const REAL a[DIMS], const REAL b[DIMS]`
##             returning REAL (None: built-in Euclidean)
##   pred_code count predicate over `d` and `t` (None: d < t)
##   weight_code sum weight over `d` and `t`
<%namespace name="common" file="common.cl.mako"/>

## ---- one pair: anchor p against the point b_0..b_{D-1}; `mask` a C condition or None
<%def name="pair(p, mask, chk=True)">
<%
    cond = [] if mask is None else ["(%s)" % mask]
%>\
        {
%if dist_code is None:
            REAL v = (REAL)0;
%for k in range(dims):
            {
                REAL dk = a_${p}_${k} - b_${k};
%if box:
                dk -= bx_${k} * rint(dk * ibx_${k});
%endif
                v = fma(dk, dk, v);
            }
%endfor
%else:
            REAL aa[DIMS] = {${", ".join("a_%d_%d" % (p, k) for k in range(dims))}};
            REAL bb[DIMS] = {${", ".join("b_%d" % k for k in range(dims))}};
            REAL v = user_distance(aa, bb);
%endif
%if out == 'count':
%if pred_code is None:
            c_${p} += (uint)(${" && ".join(cond + ["v < t"])});
%else:
            REAL d = ${"sqrt(v)" if sq else "v"};
            c_${p} += (${" && ".join(cond + ["(%s)" % pred_code])}) ? 1u : 0u;
%endif
%elif out == 'sum':
            REAL d = ${"sqrt(v)" if sq else "v"};
%if cond:
            if (${" && ".join(cond)})
%endif
            s_${p} += (${weight_code});
%else:
            REAL d = ${("native_sqrt(v)" if real == 'float' else "sqrt(v)") if sq else "v"};
<%
    tests = (["va_%d" % p] if chk else []) + cond + ([] if fullrange else ["d >= lo", "d <= hi"])
%>\
%if tests:
            if (${" && ".join(tests)}) {
%else:
            {
%endif
%if uniform and fullrange and real == 'float':
                // floor(x), x = d * scale >= 0, as round-to-nearest-even(x - 0.5) through the
                // 1.5 * 2^23 magic number: FFMA + FADD + IADD on full-rate pipes instead of
                // a quarter-rate F2I (+20% SDH on the H200). scale_up = scale * (1 + 2^-20)
                // lifts an x that is exactly an edge k above the tie k - 0.5, so exact edges
                // still land in the upper bin as in numpy; only x within 1e-6 relative below
                // an edge (float32 rounding noise) may land one bin high.
                uint bin = (uint)(as_int(fma(d, scale_up, -0.5f) + 12582912.0f) - 0x4B400000);
%elif uniform:
                uint bin = (uint)fma(d, scale, offs);
%else:
                uint bin = 0;
                for (uint step = BSEARCH_TOP; step > 0; step >>= 1) {
                    uint m = bin + step;
                    if (m < NBINS && le[m] <= d) bin = m;
                }
%endif
%if hist_mode == 'global':
                atomic_add_u64_g(hist + min(bin, (uint)(NBINS - 1)), 1);
%else:
%if not (fullrange and hist_mode == 'local'):
                bin = min(bin, (uint)(NBINS - 1));
%endif
                atomic_inc_u32_l(lh + coff + bin);
%endif
            }
%endif
        }
</%def>

## ---- all anchors against one point (b_k already loaded); j = the point's index in the R block
<%def name="pairs_all(masked, j, chk)">
%for p in range(ppw):
${pair(p, ("ia_%d < (%s)" % (p, j)) if masked else None, chk)}
%endfor
</%def>

## ---- the pairwise stage over the whole R block (nr points); masked: diagonal, pairs ia < j only
<%def name="block_loop(masked, chk=True)">
<% tvec = 4 if dims in (3, 4) else 2 if dims == 2 else 1 %>\
%if variant in ('naive', 'readonly'):
    {
        uint j = 0;
%if vec > 1:
        for (; j + ${vec} <= nr; j += ${vec}) {
%for k in range(dims):
            REAL${vec} bv_${k} = load_real${vec}(R${k}, (rbase + j) / ${vec});
%endfor
%for u in range(vec):
            {
%for k in range(dims):
                REAL b_${k} = bv_${k}.s${u};
%endfor
${pairs_all(masked, "j + %d" % u, chk)}
            }
%endfor
        }
%endif
        for (; j < nr; ++j) {
%for k in range(dims):
            REAL b_${k} = R${k}[rbase + j];
%endfor
${pairs_all(masked, "j", chk)}
        }
    }
%elif variant in ('lrshm', 'regshm'):
    for (uint t0 = 0; t0 < nr; t0 += WG_SIZE) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t0 + lid < nr) {
%if tvec > 1:
            lR[lid] = (REAL${tvec})(${", ".join(["R%d[rbase + t0 + lid]" % k for k in range(dims)] + ["(REAL)0"] * (tvec - dims))});
%else:
%for k in range(dims):
            lR[${k}][lid] = R${k}[rbase + t0 + lid];
%endfor
%endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        uint kn = min((uint)WG_SIZE, nr - t0);
%if sg_backend == 'nv':
        #pragma unroll 4
%endif
        for (uint q = 0; q < kn; ++q) {
%if tvec > 1:
            const REAL${tvec} bq = lR[q];         // one vector load (a broadcast) per partner
%for k in range(dims):
            REAL b_${k} = bq.s${k};
%endfor
%else:
%for k in range(dims):
            REAL b_${k} = lR[${k}][q];
%endfor
%endif
%if variant == 'lrshm':
%for p in range(ppw):
%for k in range(dims):
            REAL a_${p}_${k} = lL[${k}][lid + ${p} * WG_SIZE];
%endfor
%endfor
%endif
${pairs_all(masked, "t0 + q", chk)}
        }
    }
%elif variant == 'shuffle':
    for (uint t0 = 0; t0 < nr; t0 += SG_SIZE) {
        uint jl = t0 + sg_lane();
%for k in range(dims):
        REAL r_${k} = (jl < nr) ? R${k}[rbase + jl] : (REAL)0;
%endfor
        uint kn = min((uint)SG_SIZE, nr - t0);
%if sg_backend == 'nv':
        #pragma unroll 4
%endif
        for (uint q = 0; q < kn; ++q) {
%for k in range(dims):
            REAL b_${k} = ${"sg_shuffle_f" if real == 'float' else "sg_shuffle_d"}(sg_mem, r_${k}, q);
%endfor
${pairs_all(masked, "t0 + q", chk)}
        }
    }
%else:
<% raise ValueError("unknown variant %r" % (variant,)) %>
%endif
</%def>

## ---- diagonal groups with per-anchor loops (no sub-group primitives inside)
<%def name="diag_loop()">
%for p in range(ppw):
    if (ia_${p} < nr) {
%if diag == 'triangle':
        for (uint j = ia_${p} + 1; j < nr; ++j) {
%else:
        // load balancing (2-BS 3.4.1): anchor i pairs with (i + s) % nr, s = 1 .. nr/2;
        // for even nr the last step s = nr/2 only for i < nr/2 (each pair once).
        uint hnr = nr / 2;
        uint last = (nr & 1u) ? hnr : ((ia_${p} < hnr) ? hnr : hnr - 1u);
        for (uint s = 1; s <= last; ++s) {
            uint j = ia_${p} + s; j = (j >= nr) ? j - nr : j;
%endif
%for k in range(dims):
            REAL b_${k} = R${k}[rbase + j];
%endfor
${pair(p, None)}
        }
    }
%endfor
</%def>

<%def name="pairs_kernel(real, dims, wg_size, ppw, variant, vec, diag, box, out, hist_mode, copies, flush, nbins, uniform, fullrange, sq, dist_code, pred_code, weight_code)">
${common.prelude(real=real, wg_size=wg_size)}
<%
    if variant not in ('naive', 'readonly', 'lrshm', 'regshm', 'shuffle'):
        raise ValueError("unknown variant %r" % (variant,))
    if diag not in ('mask', 'triangle', 'balanced'):
        raise ValueError("unknown diag %r" % (diag,))
    if vec not in (1, 2, 4) or (vec > 1 and variant not in ('naive', 'readonly')):
        raise ValueError("vec %r does not apply to variant %r" % (vec, variant))
    if out == 'hist' and hist_mode == 'local' and (copies < 1 or copies & (copies - 1) or copies > 32):
        raise ValueError("copies must be a power of two <= 32")
    ptr = "__global const REAL *restrict" if variant == 'readonly' else "__global const REAL *"
    tvec = 4 if dims in (3, 4) else 2 if dims == 2 else 1
    top = 1
    while top * 2 < nbins:
        top *= 2
%>
#define DIMS ${dims}
#define PPW ${ppw}
#define BLOCK (WG_SIZE * PPW)
#define NBINS ${nbins}
#define COPIES ${copies}
// a full-range local histogram keeps one extra slot per copy for d == hi (folded at the flush)
#define HSTRIDE ${nbins + 1 if (out == 'hist' and fullrange and hist_mode == 'local') else nbins}
#define BSEARCH_TOP ${top}u

%if dist_code is not None:
inline REAL user_distance(const REAL a[DIMS], const REAL b[DIMS])
{
${dist_code}
}
%endif

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void pairs(
%for k in range(dims):
    ${ptr} L${k},
%endfor
%for k in range(dims):
    ${ptr} R${k},
%endfor
%if box:
%for k in range(dims):
    const REAL bx_${k}, const REAL ibx_${k},
%endfor
%endif
    const ulong nL, const ulong nR, const ulong l0, const ulong r0, const int self_mode,
    const REAL t,
%if out == 'count':
    volatile __global ulong *total
%elif out == 'sum':
    __global REAL *partials
%else:
    __global const REAL *edges, const REAL lo, const REAL hi, const REAL scale, const REAL offs,
%if hist_mode == 'global' or flush == 'atomic':
    volatile __global ulong *hist
%else:
    __global uint *part
%endif
%endif
    )
{
    SG_DECL;
    const uint lid = get_local_id(0);
    const ulong lbase = l0 + (ulong)get_group_id(0) * BLOCK;
    const ulong rbase = r0 + (ulong)get_group_id(1) * BLOCK;
    const size_t gidx = get_group_id(1) * get_num_groups(0) + get_group_id(0);
    // groups below the diagonal of a self join do no work (no early return:
    // every work-item must reach the barriers; PoCL miscompiles early returns)
    const int skip = self_mode && lbase > rbase;
    const int on_diag = self_mode && lbase == rbase;
    const uint nr = skip ? 0u : (uint)min((ulong)BLOCK, nR - rbase);
    const uint nl = skip ? 0u : (uint)min((ulong)BLOCK, nL - lbase);

%if out == 'count':
    __local uint wg_total;
    if (lid == 0) wg_total = 0;
%endif
%if out == 'hist' and uniform and fullrange and real == 'float':
    const float scale_up = scale * (1.0f + 0x1p-20f);   // see the binning in pair()
%endif
%if variant == 'lrshm' or variant == 'regshm':
%if tvec > 1:
    __local REAL${tvec} lR[WG_SIZE];      // partner tile, one vector per point
%else:
    __local REAL lR[DIMS][WG_SIZE];
%endif
%endif
%if variant == 'lrshm':
    __local REAL lL[DIMS][BLOCK];
%endif
%if out == 'hist' and not uniform:
    __local REAL le[NBINS + 1];
    for (uint b = lid; b <= NBINS; b += WG_SIZE) le[b] = edges[b];
%endif
%if out == 'hist' and hist_mode == 'local':
    __local uint lh[COPIES * HSTRIDE];
    for (uint b = lid; b < COPIES * HSTRIDE; b += WG_SIZE) lh[b] = 0;
    const uint coff = (lid & (COPIES - 1)) * HSTRIDE;
%endif
%if out == 'hist' and (hist_mode == 'local' or not uniform):
    barrier(CLK_LOCAL_MEM_FENCE);
%endif

    // anchors: PPW points per work-item, in registers (and local memory for lrshm)
%for p in range(ppw):
    const uint ia_${p} = lid + ${p} * WG_SIZE;
    const int va_${p} = ia_${p} < nl;
%for k in range(dims):
    REAL a_${p}_${k} = va_${p} ? L${k}[lbase + ia_${p}] : (REAL)0;
%endfor
%if variant == 'lrshm':
%for k in range(dims):
    lL[${k}][ia_${p}] = a_${p}_${k};
%endfor
%endif
%if out == 'count':
    uint c_${p} = 0;
%elif out == 'sum':
    REAL s_${p} = (REAL)0;
%endif
%endfor

    if (!on_diag) {
%if out == 'hist':
        if (nl == BLOCK) {          // every anchor valid: no per-pair check
${block_loop(False, False)}
        } else {
${block_loop(False, True)}
        }
%else:
${block_loop(False, False)}
%endif
    } else {
%if diag == 'mask':
${block_loop(True)}
%else:
${diag_loop()}
%endif
    }

    // ---- output stage
%if out == 'count':
    ulong mine = 0;
%for p in range(ppw):
    if (va_${p}) mine += c_${p};
%endfor
    mine = sg_reduce_add_ul(sg_mem, mine);
    // work-group total (< BLOCK^2 < 2^32: a core 32-bit local atomic), then one
    // 64-bit global atomic per work-group (not per sub-group)
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sg_lane() == 0 && mine) atomic_add_u32_l(&wg_total, (uint)mine);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0 && wg_total) atomic_add_u64_g(total, (ulong)wg_total);
%elif out == 'sum':
    REAL mine = (REAL)0;
%for p in range(ppw):
    if (va_${p}) mine += s_${p};
%endfor
    mine = ${"sg_reduce_add_f" if real == 'float' else "sg_reduce_add_d"}(sg_mem, mine);
    __local REAL sgs[WG_SIZE];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sg_lane() == 0) sgs[sg_id()] = mine;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        REAL acc = (REAL)0;
        for (uint s = 0; s < WG_SIZE / sg_size(); ++s) acc += sgs[s];
        partials[gidx] = acc;
    }
%elif hist_mode == 'local':
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = lid; b < NBINS; b += WG_SIZE) {
        uint s = 0;
        for (uint c = 0; c < COPIES; ++c) s += lh[c * HSTRIDE + b];
%if fullrange:
        if (b == NBINS - 1)
            for (uint c = 0; c < COPIES; ++c) s += lh[c * HSTRIDE + NBINS];
%endif
%if flush == 'reduce':
        part[gidx * NBINS + b] = s;
%else:
        if (s) atomic_add_u64_g(hist + b, (ulong)s);
%endif
    }
%endif
}
</%def>

## ---- sums per-group histograms part[g * nbins + b] (g < ngroups) into hist (ulong, accumulated)
<%def name="hist_reduce(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void hist_reduce(__global const uint *part, const uint ngroups, const uint nbins, const uint per,
                 volatile __global ulong *hist)
{
    const uint b = get_global_id(0);
    const uint g0 = get_global_id(1) * per;
    if (b >= nbins) return;
    ulong s = 0;
    const uint g1 = min(ngroups, g0 + per);
    for (uint g = g0; g < g1; ++g) s += part[(size_t)g * nbins + b];
    if (s) atomic_add_u64_g(hist + b, s);
}
</%def>
