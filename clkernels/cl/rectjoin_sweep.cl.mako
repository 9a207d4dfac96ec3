## Rectangle join by sort and sweep along axis 0 (host/rectjoin, RectPlan
## method 'sweep'; the thesis's section 2.1): the data boxes sorted by lo_0
## once, then a work-item per query box (a writer of the pair protocol, as
## in rectjoin.cl.mako, whose output defs it shares) searches its window.
##   rj_sweep_keys  per data box its sort key: lo_0 as an order-preserving
##                  unsigned integer when the box is narrow (lo_0 + W >=
##                  hi_0), all ones when it is wide (so the wide boxes sort
##                  last, by index); the sort's padding (the largest pair);
##                  nn[0] counts the narrow boxes. The (key, box) pairs then
##                  go through the shared sort (host/primitives/sort.py).
##   rj_sweep_rows  the boxes in sorted order as rows of 2d values (srow):
##                  a window is read contiguously
##   rj_sweep       the wide boxes (sorted positions [nn, nb)) in tiles
##                  through local memory, tested by every query; then the
##                  narrow boxes [t0, t1): t0 the first with lo_0 + W >=
##                  q.lo_0, t1 the first after it with lo_0 > q.hi_0 (two
##                  binary searches); every candidate gets the full test.
## No rounding drops a candidate: a narrow box b that meets q has
## fl(b.lo_0 + W) >= b.hi_0 >= q.lo_0, with fl(lo_0 + W) the same IEEE sum
## (rj_reach) when the box is classified and when it is searched; the sum is
## monotone in lo_0, so the search's predicate is monotone along the list.
## Each data box is either narrow or wide, so a pair is reported once.
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="rj" file="rectjoin.cl.mako"/>

<%def name="reach()">
// lo_0 + W: the one expression of the narrow test and of the window's search
inline REAL rj_reach(const REAL lo, const REAL w) { return lo + w; }
</%def>

<%def name="sweep_build(real, dims, wg_size)">
${rj.check(real, dims, 'count', 'reduce')}
${common.prelude(real=real, wg_size=wg_size)}
${reach()}
// keys/vals: n2 >= nb pairs (the sort's padded length)
__kernel void rj_sweep_keys(__global const REAL *b, const uint nb, const REAL w, const uint n2,
                            __global ulong *keys, __global uint *vals, volatile __global uint *nn)
{
    const uint t = get_global_id(0);
    if (t >= n2) return;
    if (t >= nb) {
        keys[t] = ~0UL;
        vals[t] = ~0u;
        return;
    }
    const REAL lo = b[t], hi = b[(size_t)${dims} * nb + t];
    ulong key = ~0UL;
    if (rj_reach(lo, w) >= hi) {
%if real == 'double':
        const ulong u = as_ulong(lo);
        key = (u >> 63) ? ~u : (u | 0x8000000000000000UL);
%else:
        const uint u = as_uint(lo);
        key = (ulong)((u >> 31) ? ~u : (u | 0x80000000u));
%endif
        atomic_inc(nn);
    }
    keys[t] = key;
    vals[t] = t;
}

// srow[t * 2d + c] = column c of box vals[t], t < nb (the SoA columns b)
__kernel void rj_sweep_rows(__global const REAL *b, const uint nb, __global const uint *vals,
                            __global REAL *srow)
{
    const uint t = get_global_id(0);
    if (t >= nb) return;
    const uint j = vals[t];
%for c in range(2 * dims):
    srow[(size_t)t * ${2 * dims} + ${c}] = b[(size_t)${c} * nb + j];
%endfor
}
</%def>

<%def name="sweep_join(real, dims, wg_size, output, variant)">
${rj.check(real, dims, output, variant)}
${rj.head(real, wg_size, output)}
${reach()}
<%
    live = " && !stopped_" if output == "pairs" else ""
    row = 2 * dims
    # a sorted box: 2d values at srow + t * 2d as vectors of 4 and 2 (as the grid's entries)
    chunks, c0 = [], 0
    while c0 < row:
        w = 4 if c0 + 4 <= row else 2
        chunks.append((c0, w))
        c0 += w
    comp = {}
    for v, (c0, w) in enumerate(chunks):
        for k in range(w):
            comp[c0 + k] = "e%d.s%d" % (v, k)
    overlap = rj.attr.overlap
%>
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void rj_sweep(__global const REAL *q, const uint nq, __global const REAL *srow, __global const uint *vals,
              __global const uint *nnp, const uint nb, const REAL w,
              const uint nw, const uint w0, __global const uint *wl, const uint wl_on,
${rj.out_args(output)}
{
${rj.out_decl(output, variant)}
%for c in range(row):
    __local REAL tl${c}[WG_SIZE];
%endfor
    __local uint tj[WG_SIZE];
    const uint gw_ = get_global_id(0), lid_ = get_local_id(0);
    const int valid_ = gw_ < nw, live_ = valid_;
    const uint wr_ = valid_ ? (wl_on ? wl[gw_] : w0 + gw_) : 0u, i = wr_;
${rj.load_query(dims)}
${rj.out_begin(output, variant)}
    const uint nn = nnp[0];
    // the wide boxes: every query tests them (the same tiles for the work-group)
    for (uint tb = nn; tb < nb; tb += WG_SIZE) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tb + lid_ < nb) {
            tj[lid_] = vals[tb + lid_];
%for c in range(row):
            tl${c}[lid_] = srow[(size_t)(tb + lid_) * ${row} + ${c}];
%endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (live_) {
            const uint tn = min((uint)WG_SIZE, nb - tb);
            for (uint t = 0; t < tn${live}; ++t) {
                if ${overlap(dims, lambda k: "tl%d[t]" % k, lambda k: "tl%d[t]" % (dims + k))} {
                    const uint j = tj[t];
                    ${rj.hit(output, variant)}
                }
            }
        }
    }
    if (live_) {
        // the window [t0, t1) of the narrow boxes
        uint a = 0, z = nn;
        while (a < z) {
            const uint m = a + (z - a) / 2;
            if (rj_reach(srow[(size_t)m * ${row}], w) >= qlo0) z = m; else a = m + 1;
        }
        const uint t0 = a;
        z = nn;
        while (a < z) {
            const uint m = a + (z - a) / 2;
            if (srow[(size_t)m * ${row}] > qhi0) z = m; else a = m + 1;
        }
        const uint t1 = a;
        for (uint t = t0; t < t1${live}; ++t) {
%for v, (c0, cw) in enumerate(chunks):
            const ${real}${cw} e${v} = vload${cw}(0, srow + (size_t)t * ${row} + ${c0});
%endfor
            if ${overlap(dims, lambda k: comp[k], lambda k: comp[dims + k])} {
                const uint j = vals[t];
                ${rj.hit(output, variant)}
            }
        }
    }
${rj.out_end(output, variant)}
}
</%def>
