## The similarity self-join beyond the cell grid (host/selfjoin/tiled.py):
## every pair i < j of one point set with d <= eps, for 9..64 dimensions,
## where a grid of cells of side eps has 3^(d-1) neighbour rows per point and
## prunes nothing. A tiled all-pairs join (the 2-BS paper's register-tile /
## shared-memory pattern): a work-group takes a block of WG_SIZE * ANCHORS
## anchor points (each work-item ANCHORS of them, WG_SIZE apart, in private
## memory) and walks the partners j past its lowest anchor in tiles of TILE
## points staged in local memory; only the pairs i < j are evaluated
## (blocks above the diagonal; the diagonal block masked by i < j). Anchors
## are the points i < na (na <= n): with na < n only the pairs with a point
## among the first na (a slab's own points, ahead of its halo).
##
## Points arrive as the user's (n, D) row-major array X (ORIG: float or
## double), so a tile is one contiguous block of TILE * D values (coalesced
## loads without a layout pass). Kernel coordinates are x * scale in REAL
## (the input's precision; scale a power of two computed in WIDE, double
## where the device has it, as points.cl.mako's layout does).
##
## Exactness (host/outputs/exact.py): v = sum_k (a_ik - a_jk)^2 - thr with
## thr = (eps * scale)^2; a pair with |v| <= band (the host's count_band) is
## decided by exact_within from the original coordinates in double
## (outputs.cl.mako: the float64 evaluation, d <= eps); any other pair by
## the sign of v.
##
## Writers (the pair-output protocol of pages.cl.mako): a work-item is one
## writer; writer w holds the anchors (w / WG_SIZE) * WG_SIZE * ANCHORS +
## w % WG_SIZE + a * WG_SIZE (a < ANCHORS) and emits its records (i, j) in
## increasing j, then increasing anchor: the same order whatever its work-
## group, so a writer that stopped resumes from the redo list by skipping
## the records it placed (done[w]). Writers nw of them: w0 + k, or wl[k] when
## wl_on (the redo list, a sample or a batch). A group walks the partners past
## the lowest anchor among its writers (a local minimum), so any mix of
## writers in one group is right.
##
## Outputs: 'pairs' (page allocator: pool, ctl, npages, page, fills, done,
## redo), 'paircount' (records per writer into cnt[w]), 'pairwrite' (writer
## w's records at out_ij[offs[w - w0]] on) and 'degree' (neighbours of every
## point into deg[i]: an anchor's in private, a partner's in a local counter
## per tile slot, each flushed with one global atomic).
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="pages" file="pages.cl.mako"/>
<%namespace name="outputs" file="outputs.cl.mako"/>

<%def name="join(real, orig, dims, wg_size, tile, anchors, output, exact)">
<%
    if output not in ("pairs", "paircount", "pairwrite", "degree"):
        raise ValueError("output must be 'pairs', 'paircount', 'pairwrite' or 'degree', got %r" % (output,))
    if orig not in ("float", "double"):
        raise ValueError("orig must be 'float' or 'double', got %r" % (orig,))
    wide = "double" if fp64 else "float"
    live = " && !stopped_" if output == "pairs" else ""
%>
${common.prelude(real=real, wg_size=wg_size)}
%if exact:
${outputs.exact_defs(orig, dims, False, 'nearest')}
%endif
%if output == 'pairs':
${pages.page_defs()}
%else:
typedef uint2 PREC;
%endif
#define D ${dims}
#define TILE ${tile}
#define ANCHORS ${anchors}
%if not exact:
typedef ${orig} ORIG;
%endif
typedef ${wide} WIDE;

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void selfjoin_tiled(__global const ORIG *X, const uint n, const uint na, const WIDE scale,
%if exact:
                    __global const double *xp,
%endif
                    const REAL thr, const REAL band,
                    const uint nw, const uint w0, __global const uint *wl, const uint wl_on,
%if output == 'pairs':
                    __global PREC *pool, volatile __global uint *ctl, const uint npages, const uint page,
                    __global uint *fills, __global uint *done, __global uint *redo)
%elif output == 'paircount':
                    __global uint *cnt)
%elif output == 'pairwrite':
                    __global const ulong *offs, __global PREC *out_ij)
%else:
                    volatile __global uint *deg)
%endif
{
    __local REAL tl[TILE * D];
    __local uint lo_;
%if output == 'degree':
    __local uint tc[TILE];
%endif
    // every work-item runs the tile loop to its end (the barriers); one past
    // the writers, or stopped, only emits nothing
    const uint gw_ = get_global_id(0), lid_ = get_local_id(0);
    const int live_ = gw_ < nw;
    const uint w = live_ ? (wl_on ? wl[gw_] : w0 + gw_) : 0u;
    const uint base = (w / WG_SIZE) * (WG_SIZE * ANCHORS) + w % WG_SIZE;
    if (lid_ == 0) lo_ = n;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live_ && base < na) atomic_min(&lo_, base);
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint jstart = lo_ + 1;

    // the anchors, i < na (zeros past it: such an anchor is skipped)
    REAL ax[ANCHORS][D];
    for (uint a = 0; a < ANCHORS; ++a) {
        const uint i = base + a * WG_SIZE;
        for (uint k = 0; k < D; ++k)
            ax[a][k] = live_ && i < na ? (REAL)((WIDE)X[(size_t)i * D + k] * scale) : (REAL)0;
    }
%if output == 'pairs':
    PAGE_WRITER(live_ && wl_on ? done[w] : 0u);
%elif output == 'degree':
    uint h_[ANCHORS];
    for (uint a = 0; a < ANCHORS; ++a) h_[a] = 0;
%else:
    uint h_ = 0;
%endif
%if output == 'pairwrite':
    const ulong wbase = live_ ? offs[w - w0] : 0UL;
%endif

    for (uint jb = jstart; jb < n; jb += TILE) {
        const uint tn = min((uint)TILE, n - jb);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint e = lid_; e < tn * D; e += WG_SIZE)
            tl[e] = (REAL)((WIDE)X[(size_t)jb * D + e] * scale);
%if output == 'degree':
        for (uint t = lid_; t < TILE; t += WG_SIZE) tc[t] = 0;
%endif
        barrier(CLK_LOCAL_MEM_FENCE);
        if (live_) {
            for (uint t = 0; t < tn${live}; ++t) {
                const uint j = jb + t;
                REAL s[ANCHORS];
                for (uint a = 0; a < ANCHORS; ++a) s[a] = (REAL)0;
                for (uint k = 0; k < D; ++k) {
                    const REAL p = tl[t * D + k];
                    for (uint a = 0; a < ANCHORS; ++a) {
                        const REAL dk = ax[a][k] - p;
                        s[a] += dk * dk;
                    }
                }
                for (uint a = 0; a < ANCHORS${live}; ++a) {
                    const uint i = base + a * WG_SIZE;
                    if (i >= j || i >= na) continue;        // below the diagonal, or past the anchors
                    const REAL v = s[a] - thr;
%if exact:
                    const int hit = fabs(v) <= band ? (int)exact_within(X, i, X, j, xp) : v <= (REAL)0;
%else:
                    const int hit = v <= (REAL)0;
%endif
                    if (hit) {
%if output == 'pairs':
                        PAGE_EMIT((PREC)(i, j));
%elif output == 'paircount':
                        ++h_;
%elif output == 'pairwrite':
                        // (vstore2: Oclgrind reports the vector assignment's undef store)
                        vstore2((PREC)(i, j), 0, (__global uint *)(out_ij + wbase + h_));
                        ++h_;
%else:
                        ++h_[a];
                        atomic_inc((volatile __local uint *)(tc + t));
%endif
                    }
                }
            }
        }
%if output == 'degree':
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint t = lid_; t < tn; t += WG_SIZE)
            if (tc[t]) atomic_add(deg + jb + t, tc[t]);
%endif
    }
    if (live_) {
%if output == 'pairs':
        page_end(ctl, fills, done, redo, w, pg_, fill_, h_, stopped_);
%elif output == 'paircount':
        cnt[w] = h_;
%elif output == 'degree':
        for (uint a = 0; a < ANCHORS; ++a)
            if (h_[a]) atomic_add(deg + base + a * WG_SIZE, h_[a]);
%endif
    }
}
</%def>
