## Two-body statistics (2-BS): all pairs between two point sets, block pair by block pair.
##
## One work-group handles one (L block, R block) pair: an L block is the
## WG_SIZE * PPW anchor points held by the work-group (PPW per work-item), an R
## block the same number of partner points. The launch is 2-D over block pairs:
## group (gx, gy) pairs L block l0/B + gx with R block r0/B + gy. In self mode
## (one set, pairs i < j) groups below the diagonal do no work and diagonal
## groups take the `diag` path. Kernel coordinates are SoA (host/primitives/points).
##
## Parameters (host/twobody/plan.py fills them):
##   real, dims, wg_size, ppw, variant (naive | readonly | lrshm | regshm | shuffle),
##   vec (1, 2, 4: vector loads, naive/readonly), diag (mask | triangle | balanced)
##   box       periodic orthorhombic box; images 'nearest' (minimum image) or
##             'all' (every image m in [-K_k, K_k] per dimension, nimg = K)
##   out       count | sum | hist;  hist_mode global | local, copies, flush reduce | atomic
##   nbins, binning: 'magic' (uniform bins from 0: d = sqrt(v), floor(d * scale)
##             through the 1.5 * 2^23 magic number), 'search' (binary search over
##             squared edges, closed 'left' as numpy.histogram or 'right' for
##             cumulative radii), 'user' (a user distance's value, linear bins or a search)
##   fullrange every value lies in [0, hi]: no range test (magic); an extra slot
##             per copy takes d == hi
##   fbits     exact magic binning: x = d * scale keeps fbits fraction bits, the
##             band is a window of them (host/outputs/exact.py, frac_band); 0: two
##             scales s (1 -+ eps) bracket the bin
##   clamp     local histograms clamp every slot into the copy's trash slot; off
##             for full-range magic bins, whose slots are bounded (plan.UNCLAMPED_MAX_BINS)
##   floor     exact=False on such bins: floor(d * scale) by one FFMA onto fbits
##             fraction bits, a guard slot before bin 0 (plan.floor_bins)
##   exact     pairs within the host's rounding band of a threshold are decided
##             in double from the original coordinates (outputs.cl.mako);
##             form 'diff' (sum of squared differences) or 'dot' (|a|^2 + |b|^2 -
##             2 a.b from centred coordinates, regshm d = 3 counts)
##   orig      dtype of the original coordinates (exact path)
##   sq, dist_code, pred_code, weight_code: built-in distance or user code
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="outputs" file="outputs.cl.mako"/>

## ---- squared distance of anchor p and the partner b_0..b_{D-1}, into `v`
## (count with the threshold folded in: v = d^2 - t; dot form: |a|^2 - t + |b|^2 - 2 a.b)
<%def name="sqdist(p, fold, img=None)">
%if form == 'dot':
            REAL v = ${"A_%d_n + bn" % p};
%for k in range(dims):
            v = fma(A_${p}_${k}, b_${k}, v);
%endfor
%else:
            REAL v = ${"-t" if fold else "(REAL)0"};
%for k in range(dims):
            {
%if box:
                REAL dk = mind(a_${p}_${k}, b_${k}, bx_${k}, ibx_${k});
%if img is not None:
                dk += (REAL)${img}[${k}] * bx_${k};
%endif
%else:
                REAL dk = a_${p}_${k} - b_${k};
%endif
                v = fma(dk, dk, v);
            }
%endfor
%endif
</%def>

## ---- the original indices of anchor p and partner j (exact path)
<%def name="oi(p)">xoff + lbase + ia_${p}</%def>
<%def name="oj(j)">yoff + rbase + (${j})</%def>

## ---- one pair: anchor p against the partner b_*, partner index j in the R block
<%def name="pair(p, j, mask, chk=True, defer=False)">
<%
    cond = [] if mask is None else ["(%s)" % mask]
    valid = (["va_%d" % p] if chk else []) + cond
%>\
        {
%if images == 'all':
        int m[DIMS];
        for (int k = 0; k < DIMS; ++k) m[k] = -IMGK_(k);
        for (int im = 0; im < NIMG; ++im, img_next(m)) {
%endif
%if out == 'count' and dist_code is None and pred_code is None:
${sqdist(p, True, "m" if images == 'all' else None)}
%if exact and not cond:
            // v <= 0 as v's sign bit, added in one shift-add (LEA.HI): v == +0 is a tie
            // inside the exact band, recounted by count_flush
            ct_${p} += ${"as_uint(v) >> 31" if real == 'float' else "(uint)(as_ulong(v) >> 63)"};
%else:
            ${"ct" if exact else "c"}_${p} += (uint)(${" && ".join(cond + ["v <= (REAL)0"])});
%endif
%if exact:
            mn_${p} = fmin(mn_${p}, fabs(v));
%endif
%elif dist_code is None and (out == 'hist' or out == 'count'):
${sqdist(p, False, "m" if images == 'all' else None)}
%if out == 'hist':
${hist_tally(p, j, valid, "m" if images == 'all' else None, defer)}
%else:
            REAL d = sqrt(v);
            c_${p} += (${" && ".join(cond + ["(%s)" % pred_code])}) ? 1u : 0u;
%endif
%elif dist_code is None:
${sqdist(p, False, "m" if images == 'all' else None)}
            REAL d = sqrt(v);
%if cond:
            if (${" && ".join(cond)})
%endif
            s_${p} += (${weight_code});
%else:
            REAL aa[DIMS] = {${", ".join("a_%d_%d" % (p, k) for k in range(dims))}};
            REAL bb[DIMS] = {${", ".join("b_%d" % k for k in range(dims))}};
            REAL d = user_distance(aa, bb);
%if out == 'count':
            c_${p} += (${" && ".join(cond + ["(%s)" % (pred_code or "d <= t")])}) ? 1u : 0u;
%elif out == 'sum':
%if cond:
            if (${" && ".join(cond)})
%endif
            s_${p} += (${weight_code});
%else:
${hist_tally(p, j, valid, None)}
%endif
%endif
%if images == 'all':
        }
%endif
        }
</%def>

## ---- histogram tally of one pair (v: squared distance, or d: a user value)
<%def name="hist_tally(p, j, valid, img, defer=False)">
<%
    mexpr = ", " + img if img else ""
    # exact magic bins, deferred, every pair valid: the copy's offset less the binade's
    # base (coffb) added to x's bits once, coff + slot in one instruction (LEA.HI)
    fold = defer and not valid and not clamp
%>\
%if binning == 'magic':
            const float dd = (float)${sqrt_fn}(v);
%if exact and fbits:
            // x = d * scale with FBITS fraction bits: the integer part is the bin, and a pair
            // whose fraction lies within the host's window of an edge (moff biases it by half
            // the window) is decided in double (host/outputs/exact.py, frac_band)
            const uint yi = as_uint(fma(dd, scale, s_lo));
%if fold:
            const uint hidx = (yi >> FBITS) + coffb;             // coff + slot (mod 2^32)
%else:
            uint slot = (yi >> FBITS) - FBASE;
%endif
%if defer:
            // added to its fast bin now; band_fix() moves it after the anchors' pairs if needed
            yb_${p} = yi;
            bmin = min(bmin, ${("(%s) ? (yi & FMASK) : FMASK" % " && ".join(valid)) if valid else "yi & FMASK"});
%else:
            if (${"".join("(%s) && " % c for c in valid)}(yi & FMASK) < bandw) {
                slot = exact_edge(X0, ${oi(p)}, Y0, ${oj(j)}, xp, slot, bfull${mexpr});
%if not clamp:
                slot = min(slot, (uint)TRASH);
%endif
            }
%endif
%elif exact:
            // lo: -0.5 (floor of the low estimate), or -1.5 where the host decides every pair
            // in double (exact.magic_eps: an absolute error near the first edge; yl != yh always)
            const float yl = fma(dd, s_lo, lo) + 12582912.0f;
            const float yh = fma(dd, s_hi, -0.5f) + 12582912.0f;
            uint slot = as_uint(yl) - 0x4B400000u;
            if (${"".join("(%s) && " % c for c in valid)}yl != yh) slot = exact_bin(X0, ${oi(p)}, Y0, ${oj(j)}, xp, NBINS, 0${mexpr});
%elif floor:
            // floor(x), x = d * scale >= 0, in one FFMA: moff = 2^(23-F) - 2^-(F+1) puts
            // x 2^F - 1/2 rounded to nearest (ties to even) in the binade of spacing 2^-F, whose
            // steps of 2^F are floor(x) (an exact edge lands in its upper bin as numpy's);
            // x below 2^-(F+1) stays below the binade: slot -1, the copy's guard slot
            uint slot = (as_uint(fma(dd, scale, s_lo)) >> FBITS) - FBASE;
%else:
            // floor(x), x = d * scale >= 0, as round-to-nearest-even(x - 0.5) through the
            // 1.5 * 2^23 magic number: FFMA + FADD + IADD on full-rate pipes instead of a
            // quarter-rate F2I; scale_up lifts exact edges above the tie (exact=False only)
            uint slot = as_uint(fma(dd, scale_up, -0.5f) + 12582912.0f) - 0x4B400000u;
%if not fullrange:
            slot = (dd <= hi) ? min(slot, (uint)(NBINS - 1)) : SKIP;
%endif
%endif
<% lim = "NBINS" if fullrange else "NBINS - 1" %>\
%elif binning == 'search':
            uint slot = 0;              // the largest b with esq[b] <= v ('left'), or < v ('right')
            for (uint step = BSEARCH_TOP; step > 0; step >>= 1) {
                const uint m_ = slot + step;
                if (m_ <= NBINS && esq[m_] ${"<" if closed == 'right' else "<="} v) slot = m_;
            }
%if closed == 'right':
            slot = (esq[0] < v) ? slot + 1 : 0;             // number of radii below v
%else:
            if (v < esq[0] || v > esq[NBINS]) slot = SKIP;
            else if (slot == NBINS) slot = NBINS - 1;       // v == the last edge: the last bin
%endif
%if exact:
            {   // within the band of the edge below or above: decided in double
%if closed == 'right':
                const uint lo_ = slot > 0 ? min(slot - 1, (uint)NBINS) : 0u, hi_ = min(slot, (uint)NBINS);
%else:
                const uint lo_ = min(slot, (uint)NBINS), hi_ = min(slot + 1, (uint)NBINS);
%endif
                const REAL bl = v - esq[lo_], bh = esq[hi_] - v;
                if (${"".join("(%s) && " % c for c in valid)}(fabs(bl) <= ebnd[lo_] || fabs(bh) <= ebnd[hi_]
                    || fabs(v - esq[0]) <= ebnd[0] || fabs(v - esq[NBINS]) <= ebnd[NBINS]))
                    slot = exact_bin(X0, ${oi(p)}, Y0, ${oj(j)}, xp, NBINS, ${1 if closed == 'right' else 0}${mexpr});
            }
%endif
<% lim = "NBINS - 1" %>\
%else:
%if uniform:
            uint slot = (d >= lo && d <= hi) ? min((uint)fma(d, scale, offs), (uint)(NBINS - 1)) : SKIP;
%else:
            uint slot = 0;
            for (uint step = BSEARCH_TOP; step > 0; step >>= 1) {
                const uint m_ = slot + step;
                if (m_ <= NBINS && esq[m_] <= d) slot = m_;
            }
            if (!(d >= esq[0] && d <= esq[NBINS])) slot = SKIP;
            else if (slot == NBINS) slot = NBINS - 1;
%endif
<% lim = "NBINS - 1" %>\
%endif
%if valid:
            if (!(${" && ".join(valid)})) slot = ${"SKIP" if clamp else "TRASH"};
%endif
%if hist_mode == 'global':
            if (slot <= ${lim}) atomic_add_u64_g(hist + min(slot, (uint)(NBINS - 1)), 1);
%elif clamp:
            // branch-free: any slot past the bins (SKIP, masked or out of range) lands in the
            // copy's trash slot, which the flush never reads
            atomic_inc_u32_l(lh + coff + min(slot, (uint)TRASH));
%else:
            // full range: the slot is at most NBINS (plan.UNCLAMPED_MAX_BINS; floor: at least
            // -1, the guard, in 32-bit arithmetic); masked pairs and exact bins past the range
            // were sent to the trash slot above
            atomic_inc_u32_l(lh + (${"hidx" if fold else "coff + slot"}));
%endif
</%def>

## ---- all anchors against one partner (b_k loaded); j = its index in the R block
<%def name="pairs_all(masked, j, chk)">
<% defer = out == 'hist' and hist_mode == 'local' and binning == 'magic' and exact and fbits and images != 'all' %>\
%if form == 'dot':
            const REAL bn = ${" + ".join("b_%d * b_%d" % (k, k) for k in range(dims))};
%endif
%if defer:
            uint bmin = FMASK${"".join(", yb_%d" % p for p in range(ppw))};
%endif
%for p in range(ppw):
${pair(p, j, ("ia_%d < (%s)" % (p, j)) if masked else None, chk, defer)}
%endfor
%if defer:
            if (bmin < bandw) {       // a pair within the window of an edge: one branch for all anchors
%for p in range(ppw):
${band_fix(p, j, ["va_%d" % p] if chk else [], ("ia_%d < (%s)" % (p, j)) if masked else None)}
%endfor
            }
%endif
</%def>

## ---- exact magic bins, deferred: anchor p's pair with partner j, added to its fast
## slot k (yb_p), moved to its float64 bin when x fell within the window of edge k
<%def name="band_fix(p, j, valid, mask)">
<% cond = valid + ([mask] if mask else []) + ["(yb_%d & FMASK) < bandw" % p] %>\
                if (${" && ".join("(%s)" % c for c in cond)}) {
                    const uint k = (yb_${p} >> FBITS) - FBASE;       // the nearest edge
                    const int f = (int)(yb_${p} & FMASK) - wbias;     // x 2^F less edge k's, rounded
                    // decided in double where edge k's own bound (exact.frac_band: |f| <= k wa + wb,
                    // passed as lo, offs) reaches it, else the side of edge k that x is on
                    const uint e = (bfull || (float)abs(f) <= fma((float)k, lo, offs))
                        ? exact_edge(X0, ${oi(p)}, Y0, ${oj(j)}, xp, k, bfull) : (f < 0 ? k - 1u : k);
                    if (e != k) {
                        atomic_add_u32_l(lh + coff + ${"min(k, (uint)TRASH)" if clamp else "k"}, 0xffffffffu);
                        atomic_inc_u32_l(lh + coff + min(e, (uint)TRASH));
                    }
                }
</%def>

## ---- exact counts: after the partners [j0, j1) of the R block, anchors whose
## smallest |d^2 - t| fell inside the band recount those partners, deciding the
## pairs inside the band in double (rare: the band is ~1e-6 of t)
<%def name="count_flush(j0, j1, masked)">
%if exact and out == 'count' and dist_code is None and pred_code is None:
%for p in range(ppw):
    if (va_${p} && mn_${p} <= band) {
        uint rc = 0;
        for (uint j = ${j0}; j < ${j1}; ++j) {
%if masked:
            if (!(ia_${p} < j)) continue;
%endif
%for k in range(dims):
            REAL b_${k} = R${k}[rbase + j];
%endfor
%if form == 'dot':
            const REAL bn = ${" + ".join("b_%d * b_%d" % (k, k) for k in range(dims))};
%endif
%if images == 'all':
            int m[DIMS];
            for (int k = 0; k < DIMS; ++k) m[k] = -IMGK_(k);
            for (int im = 0; im < NIMG; ++im, img_next(m)) {
${sqdist(p, True, "m")}
                rc += fabs(v) <= band ? exact_within(X0, ${oi(p)}, Y0, ${oj("j")}, xp, m) : (uint)(v <= (REAL)0);
            }
%else:
${sqdist(p, True)}
            rc += fabs(v) <= band ? exact_within(X0, ${oi(p)}, Y0, ${oj("j")}, xp) : (uint)(v <= (REAL)0);
%endif
        }
        ct_${p} = rc;
    }
    c_${p} += ct_${p};
    ct_${p} = 0;
    mn_${p} = INFINITY;
%endfor
%endif
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
${count_flush("0", "nr", masked)}
%elif variant in ('lrshm', 'regshm'):
    for (uint t0 = 0; t0 < nr; t0 += WG_SIZE) {
        barrier(CLK_LOCAL_MEM_FENCE);
        {   // every work-item stores its slot (zeros past the block)
            const int in_ = t0 + lid < nr;
%for k in range(dims):
            const REAL tb_${k} = in_ ? R${k}[rbase + t0 + lid] : (REAL)0;
%endfor
%if tvec > 1:
<% pad = ["bq_n"] if (form == 'dot') else ["(REAL)0"] * (tvec - dims) %>\
%if form == 'dot':
            const REAL bq_n = ${" + ".join("tb_%d * tb_%d" % (k, k) for k in range(dims))};
%endif
            // scalar stores into the vector tile (a vector literal stored whole reads as
            // uninitialised to Oclgrind; the loads below stay one vector each)
            __local REAL *ls_ = (__local REAL *)lR + ${tvec} * lid;
%for k, v in enumerate(["tb_%d" % k for k in range(dims)] + pad):
            ls_[${k}] = ${v};
%endfor
%else:
%for k in range(dims):
            lR[${k}][lid] = tb_${k};
%endfor
%endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint kn = min((uint)WG_SIZE, nr - t0);
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
%if form == 'dot':
            const REAL bn = bq.s3;
%for p in range(ppw):
${pair(p, "t0 + q", ("ia_%d < (t0 + q)" % p) if masked else None, chk)}
%endfor
%else:
${pairs_all(masked, "t0 + q", chk)}
%endif
        }
${count_flush("t0", "t0 + kn", masked)}
    }
%elif variant == 'shuffle':
    for (uint t0 = 0; t0 < nr; t0 += SG_SIZE) {
        const uint jl = t0 + sg_lane();
%for k in range(dims):
        const REAL r_${k} = (jl < nr) ? R${k}[rbase + jl] : (REAL)0;
%endfor
        const uint kn = min((uint)SG_SIZE, nr - t0);
%if sg_backend == 'nv':
        #pragma unroll 4
%endif
        for (uint q = 0; q < kn; ++q) {
%for k in range(dims):
            REAL b_${k} = ${"sg_shuffle_f" if real == 'float' else "sg_shuffle_d"}(sg_mem, r_${k}, q);
%endfor
${pairs_all(masked, "t0 + q", chk)}
        }
${count_flush("t0", "t0 + kn", masked)}
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
        const uint hnr = nr / 2;
        const uint last = (nr & 1u) ? hnr : ((ia_${p} < hnr) ? hnr : hnr - 1u);
        for (uint s = 1; s <= last; ++s) {
            uint j = ia_${p} + s; j = (j >= nr) ? j - nr : j;
%endif
%for k in range(dims):
            REAL b_${k} = R${k}[rbase + j];
%endfor
%if exact and out == 'count' and dist_code is None and pred_code is None:
            {   // exact count, one pair at a time: the band decided in double at once
%if form == 'dot':
                const REAL bn = ${" + ".join("b_%d * b_%d" % (k, k) for k in range(dims))};
%endif
${sqdist(p, True)}
                ct_${p} += fabs(v) <= band ? exact_within(X0, ${oi(p)}, Y0, ${oj("j")}, xp) : (uint)(v <= (REAL)0);
            }
%else:
${pair(p, "j", None)}
%endif
        }
    }
%if exact and out == 'count' and dist_code is None and pred_code is None:
    c_${p} += ct_${p};
    ct_${p} = 0;
%endif
%endfor
</%def>

<%def name="pairs_kernel(real, dims, wg_size, ppw, variant, vec, diag, box, images, nimg, out, hist_mode, copies, flush, nbins, binning, uniform, fullrange, closed, sq, dist_code, pred_code, weight_code, exact, form, orig, sqrt_fn, fbits, clamp, floor)">
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
    if form == 'dot' and not (dims == 3 and variant in ('regshm', 'lrshm') and out == 'count' and exact and not box):
        raise ValueError("form 'dot' is for exact counts with regshm/lrshm in 3-D without a box")
    if out == 'hist' and binning == 'magic' and exact and not fbits and not clamp:
        raise ValueError("the two-scale exact binning (no fbits) keeps the clamp")
    if images == 'all' and diag != 'mask' and exact and out == 'count':
        raise ValueError("images='all' counts need diag='mask'")
    ptr = "__global const REAL *restrict" if variant == 'readonly' else "__global const REAL *"
    tvec = 4 if dims in (3, 4) else 2 if dims == 2 else 1
    top = 1
    while top * 2 <= nbins:
        top *= 2
    count_exact = exact and out == 'count' and dist_code is None and pred_code is None
    nimg_total = 1
    for K in (nimg or ()):
        nimg_total *= 2 * K + 1
%>
#define DIMS ${dims}
#define PPW ${ppw}
#define BLOCK (WG_SIZE * PPW)
#define NBINS ${nbins}
#define COPIES ${copies}
#define SKIP 0xffffffffu
// a full-range local histogram keeps one extra slot per copy for d == hi (folded at the flush)
// and one trash slot (TRASH) for the pairs counted nowhere
// (floor: a guard slot before bin 0 too, for x below 2^-(FBITS+1), folded into bin 0)
#define GUARD ${1 if floor else 0}
#define HSTRIDE ${nbins + 2 + (1 if floor else 0) if (out == 'hist' and fullrange and binning == 'magic' and hist_mode == 'local') else nbins + 1}
#define TRASH (HSTRIDE - 1 - GUARD)
#define BSEARCH_TOP ${top}u
%if fbits:
#define FBITS ${fbits}
#define FMASK ${(1 << fbits) - 1}u
#define FBASE ${(150 - fbits) << (23 - fbits)}u
%endif
%if images == 'all':
#define NIMG ${nimg_total}
__constant int IMGK[DIMS] = {${", ".join(str(int(K)) for K in nimg)}};
#define IMGK_(k) IMGK[k]
// the next image vector m in [-K, K]^D (an odometer: no div/rem pairs, which
// LLVM freezes and Oclgrind cannot follow)
inline void img_next(int *m)
{
    for (int k = 0; k < DIMS; ++k) {
        if (++m[k] <= IMGK[k]) return;
        m[k] = -IMGK[k];
    }
}
%endif
%if exact:
${outputs.exact_defs(orig, dims, box, images)}
%if out == 'hist' and binning == 'magic' and fbits:
// the bin of a pair whose x lies within the window of edge k (the fast path's slot):
// k - 1 or k by its float64 squared distance against T[k], the smallest double whose
// square root reaches edge k (numpy's rule, no square root); the edges 0 and NBINS
// (closed) bound the range (host/outputs/exact.py, sqrt_thresholds). A window of the
// whole bin (bfull: the host's bound too wide for one) searches all the edges instead.
NOINLINE uint exact_edge(__global const ORIG *X, const ulong i, __global const ORIG *Y, const ulong j,
                         __global const double *xp, const uint k, const int full${", const int *m" if images == "all" else ""})
{
    if (full) return exact_bin(X, i, Y, j, xp, NBINS, 0${", m" if images == "all" else ""});
    const double s = exact_sq(X, i, Y, j, xp${", m" if images == "all" else ""});
    __global const double *T = xp + ${dims + 2 + nbins};
    if (k == 0) return 0u;
    if (k >= NBINS) return s < T[NBINS] ? NBINS - 1 : SKIP;
    return s >= T[k] ? k : k - 1;
}
%endif
%endif
%if box:
<% exact_image = exact %>\
// minimum-image difference of wrapped coordinates a, b in [0, L)
inline REAL mind(const REAL a, const REAL b, const REAL L, const REAL iL)
{
%if exact_image:
    // the image shift is applied to a or to b alone, where it is exact (Sterbenz):
    // only the final subtraction rounds, so the error is relative to the result
    const REAL n = rint((a - b) * iL);
    return fma(-fmax(n, (REAL)0), L, a) - fma(fmin(n, (REAL)0), L, b);
%else:
    const REAL dk = a - b;
    return dk - L * rint(dk * iL);
%endif
}
%endif

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
%if exact:
    __global const ORIG *X0, __global const ORIG *Y0, const ulong xoff, const ulong yoff,
%endif
    const REAL t, const REAL band,
%if out == 'hist':
    const REAL scale, const REAL s_lo, const REAL s_hi, const REAL lo, const REAL hi,
    const REAL offs, __global const REAL *edges, __global const REAL *bands,
%endif
%if exact:
    __global const double *xp,
%endif
%if out == 'count':
    volatile __global ulong *total
%elif out == 'sum':
    const ulong pbase, __global REAL *partials
%elif hist_mode == 'global' or flush == 'atomic':
    volatile __global ulong *hist
%else:
    __global uint *part
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
%if out == 'hist' and binning == 'magic' and not exact and not floor:
    const float scale_up = scale * (1.0f + 0x1p-20f);   // see the binning in hist_tally()
%elif out == 'hist' and binning == 'magic' and exact and fbits:
    const uint bandw = (uint)s_hi;                      // the window (s_lo: moff), exact.frac_band
    const int bfull = bandw > FMASK + 1u;               // every pair searched in double
    const int wbias = (int)(bandw >> 1);                // W, moff's bias (lo, offs: wa, wb)
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
%if out == 'hist' and binning != 'magic' and not (binning == 'user' and uniform):
    __local REAL esq[NBINS + 1];
    for (uint b = lid; b <= NBINS; b += WG_SIZE) esq[b] = edges[b];
%if exact and binning == 'search':
    __local REAL ebnd[NBINS + 1];
    for (uint b = lid; b <= NBINS; b += WG_SIZE) ebnd[b] = bands[b];
%endif
%endif
%if out == 'hist' and hist_mode == 'local':
    __local uint lh[COPIES * HSTRIDE];
    for (uint b = lid; b < COPIES * HSTRIDE; b += WG_SIZE) lh[b] = 0;
    const uint coff = (lid & (COPIES - 1)) * HSTRIDE + GUARD;
%if binning == 'magic' and exact and fbits and images != 'all' and not clamp:
    const uint coffb = coff - FBASE;         // hist_tally's fold: the deferred form
%endif
%endif
    barrier(CLK_LOCAL_MEM_FENCE);

    // anchors: PPW points per work-item, in registers (and local memory for lrshm)
%for p in range(ppw):
    const uint ia_${p} = lid + ${p} * WG_SIZE;
    const int va_${p} = ia_${p} < nl;
%for k in range(dims):
    REAL a_${p}_${k} = va_${p} ? L${k}[lbase + ia_${p}] : (REAL)0;
%endfor
%if form == 'dot':
%for k in range(dims):
    const REAL A_${p}_${k} = -2 * a_${p}_${k};
%endfor
    const REAL A_${p}_n = (${" + ".join("a_%d_%d * a_%d_%d" % (p, k, p, k) for k in range(dims))}) - t;
%endif
%if variant == 'lrshm':
%for k in range(dims):
    lL[${k}][ia_${p}] = a_${p}_${k};
%endfor
%endif
%if out == 'count':
    uint c_${p} = 0;
%if count_exact:
    uint ct_${p} = 0;
    REAL mn_${p} = INFINITY;
%endif
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
    // work-group total (< BLOCK^2 * images: a 32-bit local atomic), then one 64-bit
    // global atomic per work-group
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sg_lane() == 0 && mine != 0) atomic_add_u32_l(&wg_total, (uint)mine);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0 && wg_total != 0) atomic_add_u64_g(total, (ulong)wg_total);
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
        partials[pbase + gidx] = acc;
    }
%elif hist_mode == 'local':
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = lid; b < NBINS; b += WG_SIZE) {
        uint s = 0;
        for (uint c = 0; c < COPIES; ++c) s += lh[c * HSTRIDE + GUARD + b];
%if fullrange and binning == 'magic':
        if (b == NBINS - 1)
            for (uint c = 0; c < COPIES; ++c) s += lh[c * HSTRIDE + GUARD + NBINS];
%endif
%if floor:
        if (b == 0)
            for (uint c = 0; c < COPIES; ++c) s += lh[c * HSTRIDE];
%endif
%if flush == 'reduce':
        part[gidx * NBINS + b] = s;
%else:
        if (s != 0) atomic_add_u64_g(hist + b, (ulong)s);
%endif
    }
%endif
}
</%def>

## ---- small problems, directly: every pair's distance evaluated as the float64
## reference does it (outputs.cl.mako's exact_dist; xp[0] = 1: no scaling), from
## the original coordinates: no bounds, no kernel coordinates, no host decision
## between commands. A work-item takes one anchor i against a block of JB
## partners (self: j > i only); the first dimension spans max(nx, ny) rows so
## that every point of x and of y is checked once. buf (ulong): [0] the count, [1] flags (1: x
## holds NaN/inf, 2: y does, 4: a coordinate's magnitude reaches `limit`, where
## the float64 evaluation could over- or underflow and the host's scaled path
## decides instead), then xp (double) from buf + 2.
<%def name="direct_count(orig, dims, box, wg_size, jb)">
${common.prelude(real='double', wg_size=wg_size)}
${outputs.exact_defs(orig, dims, box, "nearest")}
inline uint coord_flags(__global const ORIG *P, const uint i, const double limit, const uint nonfinite)
{
    uint f = 0;
%for k in range(dims):
    {
        const double v = (double)P[(size_t)i * ${dims} + ${k}];
        if (!isfinite(v)) f |= nonfinite;
        else if (fabs(v) >= limit) f |= 4u;
    }
%endfor
    return f;
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void direct_count(__global const ORIG *X, const uint nx, __global const ORIG *Y, const uint ny,
                  const int self, const double limit, volatile __global ulong *buf)
{
    __local uint lsum, lflags;
    const uint lid = get_local_id(0);
    const uint i = get_global_id(0);
    if (lid == 0) { lsum = 0; lflags = 0; }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global const double *xp = (__global const double *)(buf + 2);
    uint f = 0;
    if (get_global_id(1) == 0) {
        if (i < nx) f |= coord_flags(X, i, limit, 1u);
        if (!self && i < ny) f |= coord_flags(Y, i, limit, 2u);
    }
    uint c = 0;
    if (i < nx) {
        const uint j0 = get_global_id(1) * ${jb}u;
        const uint j1 = min(j0 + ${jb}u, ny);
        for (uint j = self ? max(j0, i + 1) : j0; j < j1; ++j) c += exact_within(X, i, Y, j, xp);
    }
    if (c) atomic_add(&lsum, c);
    if (f) atomic_or(&lflags, f);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        if (lsum) atomic_add_u64_g(buf, (ulong)lsum);
        if (lflags) atomic_or((volatile __global uint *)(buf + 1), lflags);
    }
}
</%def>
