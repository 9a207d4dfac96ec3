## Similarity self-join kernels over the cell grid (host/cellgrid/pairs.py
## runs them; the grid's default self-join kernel is cellgrid.cl.mako's 'row'
## variant): the cell access patterns of the self-join papers with K
## work-items per point, the points in cell order or in workload order.
##
## One self grid (A = B, not periodic; cellgrid.cl.mako's helpers, geometry,
## decode and dist2 through its namespace). The neighbour cells are taken a
## stencil row at a time (the row's cells c0-1..c0+1 of dimension 0 have
## consecutive ids: one contiguous range of sorted points), per `kernel`:
##   'gpucalcglobal'  all 3^D adjacent cells, every j != i (each distance is
##                    computed by both points); a point keeps the pairs its
##                    output needs: j > i (sorted positions) for pair records,
##                    all j for its own degree / CSR row (no atomics on j);
##   'unicomp'        the odd-coordinate pattern (Algorithm 2 of the
##                    load-imbalance paper, in D dims): a row whose highest
##                    non-zero offset is in dimension h >= 1 is visited iff
##                    c[h] is odd; in the own row, the cells c0 +- 1 iff c0 is
##                    odd; in the own cell the later points. Every pair of
##                    adjacent cells is evaluated once (by the cell of the two
##                    that is odd in the highest dimension where they differ);
##   'lidunicomp'     the neighbour cells with a greater linear id (the rows
##                    with a greater id, and in the own row c0 + 1) and the own
##                    cell's later points (Algorithm 3).
## K work-items per point (a power of two <= 32): writer w = point * K + lane;
## split 'candidates': the lanes split the point's candidates, the t-th
## candidate (counted across all its ranges, in a fixed order) going to lane
## t % K (the papers' way), the rows' searches shared: the K lanes search K
## rows at once, lane l row o + l, and read each other's ranges from local
## memory (in the papers every lane searches every row: K times the binary
## searches, which cost more than the candidates at ~10 neighbours; a launch
## over listed writers, or over writers that are not whole points, searches
## per lane);
## split 'rows': lane l takes the stencil rows o with o % K == l, searches and
## candidates. Each lane is its own writer of the Pairs protocol
## (pages.cl.mako): its records come in a fixed order, so a stopped writer
## resumes; staged writers (stage > 0) share runs of pages per work-group. Which writers a launch runs: the list
## wl (wl_on: a redo round or a sample), the range [w0, w0 + nw), or every
## writer in workload order (order_on: slot s holds point order[s], lanes
## consecutive; queue_on: each work-group takes its WG_SIZE / K slots from the
## global counter wq[0], WORKQUEUE, else slots in work-group order,
## SORTBYWL). 'degree' sums the K lanes' counts in local memory (the lanes of a
## point are consecutive work-items of one work-group in every launch that
## counts degrees: never from a list), by sub-group shuffles (common.cl.mako)
## where the back end's sub-groups surely hold K lanes.
##
## Outputs (as cellgrid.cl.mako's pair outputs): 'pairs' (page allocator),
## 'paircount' (records per writer: cnt[w]), 'pairwrite' (writer w's records
## at offs[w - w0]), 'degree' (neighbours per input point), 'csrwrite' (CSR
## rows at cur[row]++; self_too: the point's own entry). exact: pairs within
## the band of thr decided in double (outputs.cl.mako's exact_within).
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="cg" file="cellgrid.cl.mako"/>
<%namespace name="pages" file="pages.cl.mako"/>
<%namespace name="outputs" file="outputs.cl.mako"/>

## A hit at (i, j), sorted positions, with d2 computed: the output's action.
<%def name="emit(kernel, output, exact)">
<% own_only = kernel == 'gpucalcglobal' %>
                {
                    const REAL v = d2 - thr;
%if exact:
                    const int hit = fabs(v) <= band ? (int)exact_within(X0, pa[i], X0, pa[j], xp) : v <= (REAL)0;
%else:
                    const int hit = v <= (REAL)0;
%endif
%if own_only and output in ('pairs', 'paircount', 'pairwrite'):
                    if (hit && j > i) {
%else:
                    if (hit) {
%endif
%if output == 'paircount':
                        ++h_;
%elif output == 'degree':
                        ++h_;
%if not own_only:
                        atomic_inc(deg + pa[j]);
%endif
%elif output == 'csrwrite':
                        const uint oi_ = pa[i], oj_ = pa[j];
                        idx[atomic_inc(cur + oi_)] = oj_;
%if not own_only:
                        idx[atomic_inc(cur + oj_)] = oi_;
%endif
%else:
                        const uint oi_ = pa[i], oj_ = pa[j];
                        const PREC rec_ = (PREC)(min(oi_, oj_), max(oi_, oj_));
%if output == 'pairwrite':
                        out_ij[wbase + h_] = rec_;
                        ++h_;
%else:
                        PAGE_EMIT(rec_);
%endif
%endif
                    }
                }
</%def>

## The candidates' ranges of stencil row `o` (neighbour rows along dimensions
## 1..D-1, the row's cells c0-1..c0+1 along dimension 0) of point i for the
## kernel's pattern, into the uint4 `var`: (j0, j1) of the first range and of
## a second one (UNICOMP's own row); empty ranges have j0 >= j1.
<%def name="row_ranges(kernel, dim, o, var, table=False)">
                {
%if dim > 1:
                    uint t_o = ${o};
%endif
                    ulong rid = 0;
                    int ok = 1, rel = 0, odd = 0;    // rel, odd: the highest non-zero offset, c there odd
%for kk in range(1, dim):
                    {   // dimension ${kk}'s offset: the row number's next base-3 digit, t_o / 3 by a
                        // multiply (exact for 32 bits; a / and % pair compiles to a `freeze`
                        // Oclgrind cannot run)
                        const uint tq_ = mul_hi(t_o, 0xAAAAAAABu) >> 1;
                        const long dk = (long)(t_o - 3u * tq_) - 1;
%if kk < dim - 1:
                        t_o = tq_;
%endif
                        const long nc = c[${kk}] + dk;
                        if (nc < 0 || nc >= (long)m[${kk}]) ok = 0;
                        rid += (ulong)nc * stride[${kk}];
                        if (dk != 0) { rel = (int)dk; odd = (int)(c[${kk}] & 1); }
                    }
%endfor
                    long lo0 = max(c0 - 1, (long)0), hi0 = min(c0 + 1, m0 - 1), lo1 = 1, hi1 = 0;
                    uint jmin0 = 0, jmin1 = 0;          // the ranges' first sorted positions
%if kernel == 'lidunicomp':
                    if (rel < 0) ok = 0;                // a row with smaller ids
                    if (ok && rel == 0) {   // the own row: the own cell (its later points) and c0 + 1, no search
%if table:
                        const uint e = ca_ + 1 + (uint)bn_;
%else:
                        const uint e = ca_ + 1 + (uint)(c0 + 1 < m0 && ca_ + 1 < a_ncells && a_ids[ca_ + 1] == aid + 1);
%endif
                        ${var}.x = i + 1; ${var}.y = a_start[e - 1] + a_count[e - 1];
                        ok = 0;
                    }
%elif kernel == 'unicomp':
                    if (rel != 0) {
                        if (!odd) ok = 0;
                    } else if (c0 & 1) {                // c0 - 1, then the own cell's later points and c0 + 1
                        hi0 = lo0 = c0 - 1;
                        lo1 = c0; hi1 = min(c0 + 1, m0 - 1); jmin1 = i + 1;
                    } else {                            // the own cell's later points
                        lo0 = hi0 = c0; jmin0 = i + 1;
                    }
%endif
%if table:
                    if (ok && rel != 0) {       // a neighbour row: its range from the cell's row table
                        const uint o_ = ${o};
                        // two scalar loads: Oclgrind's --uninitialized crashes on a uint2 (or vload2)
                        // load from a global pointer
                        const size_t t_ = 2 * ((size_t)ca_ * (NROWS - 1) + (o_ < NROWS / 2 ? o_ : o_ - 1));
                        ${var}.x = rtab[t_]; ${var}.y = rtab[t_ + 1];
                        ok = 0;
                    }
%endif
                    for (int seg = 0; seg < 2 && ok; ++seg) {
                        const long lo = seg ? lo1 : lo0, hi = seg ? hi1 : hi0;
                        if (lo > hi) continue;
%if table:
                        int f_ = 2, l_ = 2;             // the segment's first and last non-empty cells
                        for (int off = -1; off <= 1; ++off) {
                            const int ex = off < 0 ? bp_ : (off > 0 ? bn_ : 1);
                            if (ex && c0 + off >= lo && c0 + off <= hi) { if (f_ == 2) f_ = off; l_ = off; }
                        }
                        if (f_ == 2) continue;
                        const uint s = ca_ + f_, e = ca_ + l_ + 1;
%else:
                        const ulong idhi = rid + (ulong)hi;
                        const int s = find_first(a_ids, a_ncells, rid + (ulong)lo);
                        uint e = (uint)s;
                        while (e < a_ncells && a_ids[e] <= idhi) ++e;
                        if (e == (uint)s) continue;
%endif
                        const uint j0 = max(a_start[s], seg ? jmin1 : jmin0), j1 = a_start[e - 1] + a_count[e - 1];
                        if (seg) { ${var}.z = j0; ${var}.w = j1; } else { ${var}.x = j0; ${var}.y = j1; }
                    }
                }
</%def>

<%def name="join(real, orig, dim, wg_size, kernel, k, split, output, exact, stage=0, table=False)">
<%
    if kernel not in ('gpucalcglobal', 'unicomp', 'lidunicomp'):
        raise ValueError("unknown self-join kernel %r" % (kernel,))
    if k < 1 or k > 32 or k & (k - 1) or wg_size % k:
        raise ValueError("k must be a power of two <= 32 dividing wg_size, got %r" % (k,))
    if split not in ('candidates', 'rows'):
        raise ValueError("split must be 'candidates' or 'rows', got %r" % (split,))
    by_rows = split == 'rows' and k > 1
    staged = output == 'pairs' and stage > 0
    live = " && !stopped_" if output == "pairs" and not staged else ""
    step = "1" if by_rows else "K"
    # the K lanes of a point (consecutive work-items) take K stencil rows at a time; without
    # a row table they search them, lane l row o + l, and share the ranges through local
    # memory (a listed writer, wl_on, searches its rows itself)
    group = k if k > 1 and not by_rows else 1
    shared = group > 1 and not table
    collective = staged or shared
    # the K lanes' degree counts summed by sub-group shuffles where a sub-group
    # surely holds K aligned lanes (nv: 32; local: min(32, wg_size)), else in local memory
    sg_red = output == 'degree' and k > 1 and sg_backend in ('nv', 'local')
    q_point = lambda kk: "xa[(size_t)%d * na + j]" % kk
%>
${common.prelude(real=real, wg_size=wg_size)}
%if exact:
${outputs.exact_defs(orig, dim, False, 'nearest')}
%endif
${cg.helpers(dim, False, exact)}
%if output == 'pairs':
${pages.page_defs(stage)}
%else:
typedef uint2 PREC;
%endif
#define K ${k}
#define NROWS (NSTENCIL / 3)
#define GROUP ${group}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void sj_${kernel}(__global const REAL *xa, uint na, __global const uint *a_point_cell,
                  __global const ulong *a_ids, __global const uint *a_start, __global const uint *a_count,
                  uint a_ncells, __global const ulong *igeom, __global const uint *rtab,
%if exact:
                  __global const ORIG *X0, __global const uint *pa, __global const double *xp,
%else:
                  __global const uint *pa,
%endif
                  REAL thr, REAL band, uint nw, uint w0, __global const uint *wl, uint wl_on,
                  __global const uint *order, uint order_on, volatile __global uint *wq, uint queue_on,
%if output == 'pairs':
                  __global PREC *pool, volatile __global uint *ctl, uint npages, uint page,
                  __global uint *fills, __global uint *done, __global uint *redo)
%elif output == 'paircount':
                  __global uint *cnt)
%elif output == 'degree':
                  volatile __global uint *deg)
%elif output == 'csrwrite':
                  volatile __global uint *cur, __global uint *idx, uint self_too)
%else:
                  __global const ulong *offs, __global PREC *out_ij)
%endif
{
    const uint lid = get_local_id(0);
    __local uint qbase_;
%if shared:
    __local uint4 rng_[WG_SIZE];
%endif
%if staged:
    PAGE_STAGE_LOCALS;
%elif sg_red:
    SG_DECL;
%elif output == 'degree' and k > 1:
    __local uint red_[WG_SIZE];
%endif
    uint slot0 = get_group_id(0) * (WG_SIZE / K);
    if (queue_on) {                 // uniform: a kernel argument
        if (lid == 0) qbase_ = atomic_add(wq, (uint)(WG_SIZE / K));
        barrier(CLK_LOCAL_MEM_FENCE);
        slot0 = qbase_;
    }
    const uint g = get_global_id(0);
    uint w = 0;
    int valid;
    if (wl_on) {
        valid = g < nw;
        if (valid) w = wl[g];
    } else if (order_on) {
        const uint slot = slot0 + lid / K;
        valid = slot < na;
        if (valid) w = order[slot] * K + (lid & (K - 1));
    } else {
        valid = g < nw;
        w = valid ? w0 + g : 0u;
    }
    const uint i = w / K, lane = w & (K - 1);
%if output == 'pairs':
    PAGE_WRITER(valid && wl_on ? done[w] : 0u);
%else:
    uint h_ = 0;
%endif
%if output == 'pairwrite':
    const ulong wbase = valid ? offs[w - w0] : 0UL;
%endif
%if output == 'csrwrite':
    if (valid && self_too && lane == 0) idx[atomic_inc(cur + pa[i])] = pa[i];
%endif
%if collective:
    {           // every work-item takes part in the commits / the shared searches; one past
                // the writers (i = 0: points exist) tests no candidate
%else:
    if (valid) {
%endif
${cg.load_geometry(dim, False)}
        REAL p[D];
%for kk in range(dim):
        p[${kk}] = xa[(size_t)${kk} * na + i];
%endfor
        const uint ca_ = a_point_cell[i];
        const ulong aid = a_ids[ca_];
${cg.decode(dim, 'aid')}
        const long m0 = (long)m[0], c0 = c[0];
%if table:
        // the own row's cells c0 - 1 and c0 + 1, where not empty, sit next to the own cell
        const int bp_ = c0 > 0 && ca_ > 0 && a_ids[ca_ - 1] == aid - 1;
        const int bn_ = c0 + 1 < m0 && ca_ + 1 < a_ncells && a_ids[ca_ + 1] == aid + 1;
%endif
        uint t_ = 0;                        // candidates so far (the lanes' stride phase)
%if shared:
        // uniform: listed writers, or a range of writers not whole points, are not
        // every point's K lanes side by side: each lane searches its rows itself
        const int own_ = wl_on || ((w0 | nw) & (K - 1));
%endif
        for (uint o = 0; o < NROWS; o += GROUP) {
%if staged:
            if (o) {        // every work-item: the trip count is fixed
${pages.stage_commit_if("(o / GROUP)")}
            }
%endif
%if shared:
            {               // lane l searches row o + l of its point for all K lanes
                uint4 q_ = (uint4)(0u);
                if (valid && !own_ && o + lane < NROWS) {
${row_ranges(kernel, dim, "o + lane", "q_")}
                }
                rng_[lid] = q_;
                barrier(CLK_LOCAL_MEM_FENCE);
            }
%endif
            for (uint r = 0; r < GROUP && o + r < NROWS && valid; ++r) {
%if by_rows:
                if (((o + r) & (K - 1)) != lane) continue;      // the lane's rows
%endif
                uint4 q = (uint4)(0u);
%if shared:
                if (own_) {
${row_ranges(kernel, dim, "o + r", "q")}
                } else {
                    q = rng_[(lid & ~(uint)(K - 1)) + r];
                }
%else:
${row_ranges(kernel, dim, "o + r", "q", table)}
%endif
              for (int seg = 0; seg < 2; ++seg) {
                const uint j0 = seg ? q.z : q.x, j1 = seg ? q.w : q.y;
                if (j0 >= j1) continue;
%if by_rows:
                const uint jf = j0;
%else:
                const uint jf = j0 + ((lane - t_) & (K - 1));
                t_ += j1 - j0;
%endif
%if staged:
                // chunks of PAGE_STAGE_CHUNK candidates, room for their records made
                // before each (pages.cl.mako): no atomic and no exit in the test loop
                for (uint jc_ = jf; jc_ < j1 && !stopped_; ) {
                    if (sc_ > STAGE - PAGE_STAGE_CHUNK) PAGE_STAGE_SPILL();
                    const uint je_ = j1 - jc_ > ${step} * PAGE_STAGE_CHUNK ? jc_ + ${step} * PAGE_STAGE_CHUNK : j1;
                  for (uint j = jc_; j < je_; j += ${step}) {
%else:
                for (uint j = jf; j < j1${live}; j += ${step}) {
%endif
%if kernel == 'gpucalcglobal':
                    if (j == i) continue;
%endif
${cg.dist2(dim, False, q_point)}
${emit(kernel, output, exact)}
                }
%if staged:
                  jc_ = je_;
                }
%endif
              }
            }
%if shared:
            barrier(CLK_LOCAL_MEM_FENCE);   // rng_ is read
%endif
        }
    }
%if output == 'pairs':
%if staged:
${pages.stage_commit()}
%endif
    if (valid) page_end(ctl, fills, done, redo, w, pg_, fill_, h_, stopped_);
%elif output == 'paircount':
    if (valid) cnt[w] = h_;
%elif sg_red:
    uint tot_ = h_;                     // h_ is 0 on an invalid work-item; every work-item takes part
    for (uint s = K / 2; s > 0; s >>= 1) tot_ += sg_shuffle_xor(sg_mem, tot_, s);
    if (valid && lane == 0 && tot_) atomic_add(deg + pa[i], tot_);
%elif output == 'degree' and k > 1:
    red_[lid] = h_;                     // h_ is 0 on an invalid work-item
    for (uint s = K / 2; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if ((lid & (K - 1)) < s) red_[lid] += red_[lid + s];
    }
    if (valid && lane == 0 && red_[lid]) atomic_add(deg + pa[i], red_[lid]);
%elif output == 'degree':
    if (valid && h_) atomic_add(deg + pa[i], h_);
%endif
}
</%def>

## Per cell, from the searches of its 3^D neighbourhood's stencil rows (one
## work-item a cell): the row table (rows_on; grids of D <= 3, JOIN_TABLE_MAX_ROWS):
## rtab[c * (NROWS - 1) + t] = (j0, j1), the sorted positions of the t-th
## neighbour row's cells c0-1..c0+1 (t counts the rows but the own one; (0, 0)
## where empty or outside the grid), read by the join kernels instead of a
## search a point; and SORTBYWL's order (keys_on): the cells by descending
## workload (the points of the cell's neighbourhood, itself included) to within
## an eighth of an octave (wl_bucket: exact below 16, then 8 buckets an octave,
## NBUCKETS in all), equal buckets in cell order, by a stable counting sort --
## sj_cells writes each cell's bucket rank rb (0: the largest workloads) and its
## work-group's point count per rank at gh[rb * groups + group]; the exclusive scan
## of gh gives each (rank, group) its first slot; sj_order_cells adds the points
## of the group's earlier cells of the same rank (the cell's first slot), and
## sj_order_scatter puts every point at its cell's first slot plus its place in
## the cell. The input order: the inverse of the grid's permutation.
<%def name="workload(dim, wg_size, buckets)">
${common.prelude(real='float', wg_size=wg_size)}
${cg.helpers(dim, False, False)}
#define NROWS (NSTENCIL / 3)
#define NBUCKETS ${buckets}u          // wl_bucket's values: 0..239

inline uint wl_bucket(const ulong t)
{
    const uint v = (uint)min(t, (ulong)0xffffffffu);
    if (v < 16u) return v;
    const uint e = 31u - (uint)clz(v);      // 4..31
    return 16u + (e - 4u) * 8u + ((v >> (e - 3u)) & 7u);
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void sj_cells(__global const ulong *a_ids, __global const uint *a_start, __global const uint *a_count,
              uint a_ncells, __global const ulong *igeom, uint keys_on, __global uint *cb, __global uint *gh,
              uint rows_on, __global uint2 *rtab)
{
    const uint ca = get_global_id(0), lid = get_local_id(0);
    __local uint hist_[NBUCKETS];
    for (uint b = lid; b < NBUCKETS; b += WG_SIZE) hist_[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);           // unconditional (PoCL: no barrier under a branch)
    if (ca < a_ncells) {
${cg.load_geometry(dim, False)}
        const ulong aid = a_ids[ca];
${cg.decode(dim, 'aid')}
        const long m0 = (long)m[0], c0 = c[0];
        const long lo = max(c0 - 1, (long)0), hi = min(c0 + 1, m0 - 1);
        ulong total = 0;
        int dig[D] = {${", ".join(["0"] * dim)}};
        for (uint o = 0; o < NROWS; ++o, stencil_next(dig + 1, D - 1)) {
            ulong rid = 0;
            int ok = 1;
%for kk in range(1, dim):
            {
                const long nc = c[${kk}] + (long)dig[${kk}] - 1;
                if (nc < 0 || nc >= (long)m[${kk}]) ok = 0;
                rid += (ulong)nc * stride[${kk}];
            }
%endfor
            uint2 r_ = (uint2)(0u);
            if (ok) {
                const int s = find_first(a_ids, a_ncells, rid + (ulong)lo);
                uint e = (uint)s;
                while (e < a_ncells && a_ids[e] <= rid + (ulong)hi) ++e;
                if (e > (uint)s) {
                    r_.x = a_start[s]; r_.y = a_start[e - 1] + a_count[e - 1];
                    total += (ulong)(r_.y - r_.x);
                }
            }
            if (rows_on && o != NROWS / 2) rtab[(size_t)ca * (NROWS - 1) + (o < NROWS / 2 ? o : o - 1)] = r_;
        }
        if (keys_on) {
            const uint rb = NBUCKETS - 1u - wl_bucket(total);
            cb[ca] = rb;
            atomic_add(hist_ + rb, a_count[ca]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (keys_on)
        for (uint b = lid; b < NBUCKETS; b += WG_SIZE) gh[(size_t)b * get_num_groups(0) + get_group_id(0)] = hist_[b];
}

// The input order: ord[perm[p]] = p, the sorted position of the caller's point i at ord[i]
__kernel void sj_input_order(__global const uint *perm, uint n, __global uint *ord)
{
    const uint p = get_global_id(0);
    if (p < n) ord[perm[p]] = p;
}

// first[c] = the first slot of cell c in the order: its (rank, group)'s first slot (gh,
// scanned) plus the points of the group's earlier cells of the same rank (the launch of sj_cells)
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void sj_order_cells(__global const uint *a_count, uint a_ncells, __global const uint *cb,
                    __global const uint *gh, __global uint *first)
{
    const uint ca = get_global_id(0), lid = get_local_id(0);
    __local uint rb_[WG_SIZE], cnt_[WG_SIZE];
    const uint rb = ca < a_ncells ? cb[ca] : NBUCKETS;
    rb_[lid] = rb;
    cnt_[lid] = ca < a_ncells ? a_count[ca] : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (ca >= a_ncells) return;
    uint before = 0;
    for (uint j = 0; j < lid; ++j) before += rb_[j] == rb ? cnt_[j] : 0u;
    first[ca] = gh[(size_t)rb * get_num_groups(0) + get_group_id(0)] + before;
}

__kernel void sj_order_scatter(__global const uint *a_point_cell, __global const uint *a_start, uint n,
                               __global const uint *first, __global uint *order)
{
    const uint p = get_global_id(0);
    if (p >= n) return;
    const uint c = a_point_cell[p];
    order[first[c] + (p - a_start[c])] = p;
}
</%def>
