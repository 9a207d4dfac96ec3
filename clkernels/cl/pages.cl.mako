## The atomic page allocator (2-BS paper, section 3.3.3, Algorithm 5: the
## direct output buffer), shared by every kernel whose output size is unknown
## (host/primitives/pages.py manages the pool; host/outputs/pairs.py runs the
## rounds).
##
## A pool of NPAGES pages of PAGE records; ctl[0] is the global pointer GP (the
## next free page). A writer (a work-item) fills its own page and takes the
## next with one atomic when it is full, so writers rarely meet on GP. Beyond
## the paper a writer takes its first page at its first record (a writer with
## no output holds no page), records how many records each page holds
## (fills[page], written when the writer leaves the page), and never loses a
## record when the pool runs out: page_put fails, the writer stops, and the
## host drains the pages, recycles the pool and runs that writer again,
## skipping the records it had already placed (its output order is
## deterministic). ctl[1] counts the writers that stopped (their ids in redo).
##
## Record type PREC (a 2 x 32-bit pair of indices) and the writer protocol:
##     PAGE_WRITER(skip)  declares pg, fill, h (records produced so far), stopped
##     PAGE_EMIT(rec)     places one record (skipping the first `skip`)
##     page_end(...)      closes the page and reports a stopped writer
<%namespace name="common" file="common.cl.mako"/>

<%def name="page_defs()">
#define PAGE_NONE 0xffffffffu
typedef uint2 PREC;

// Place rec in the writer's page (pg, fill); a new page from GP when there is
// none or it is full. 0 when the pool is exhausted (nothing written).
inline int page_put(__global PREC *pool, volatile __global uint *ctl, const uint npages, const uint page,
                    __global uint *fills, uint *pg, uint *fill, const PREC rec)
{
    if (*pg == PAGE_NONE || *fill == page) {
        if (*pg != PAGE_NONE) fills[*pg] = page;       // the full page is committed
        const uint p = atomic_inc(ctl);
        if (p >= npages) { *pg = PAGE_NONE; return 0; }
        *pg = p;
        *fill = 0;
    }
    pool[(size_t)(*pg) * page + *fill] = rec;
    *fill += 1;
    return 1;
}

// A writer's end: its last page's fill; a stopped writer leaves how many
// records it placed in all (done[w]) and its id in the redo list.
inline void page_end(volatile __global uint *ctl, __global uint *fills, __global uint *done,
                     __global uint *redo, const uint w, const uint pg, const uint fill, const uint h,
                     const int stopped)
{
    if (pg != PAGE_NONE) fills[pg] = fill;
    if (stopped) {
        done[w] = h;
        redo[atomic_inc(ctl + 1)] = w;
    }
}

#define PAGE_WRITER(skip_) \
    uint pg_ = PAGE_NONE, fill_ = 0, h_ = 0; int stopped_ = 0; const uint skip_h_ = (skip_)
#define PAGE_EMIT(rec_) \
    do { \
        if (h_ >= skip_h_ && !page_put(pool, ctl, npages, page, fills, &pg_, &fill_, (rec_))) stopped_ = 1; \
        else ++h_; \
    } while (0)
</%def>

## Dense copy of the pages [0, used), split into the two index columns as
## int64 (what the host returns, so the host only copies): offs[p] = exclusive
## scan of fills; out_i[offs[p] + k] = pool[p * page + k].x (and .y into out_j)
## for k < fills[p]. One work-item per pool slot. (A dense record buffer is
## one page: fills = {m}, offs = {0}.)
<%def name="compact()">
${common.prelude(real='float', wg_size=64)}
typedef uint2 PREC;
__kernel void pages_compact(__global const PREC *pool, __global const uint *fills, __global const uint *offs,
                            const ulong slots, const uint page, __global long *out_i, __global long *out_j)
{
    const ulong s = get_global_id(0);
    if (s >= slots) return;
    const uint p = (uint)(s / page), k = (uint)(s - (ulong)p * page);
    if (k < fills[p]) {
        const PREC r = pool[s];
        out_i[offs[p] + k] = (long)r.x;
        out_j[offs[p] + k] = (long)r.y;
    }
}
</%def>
