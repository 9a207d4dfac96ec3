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
## (Grouped staging, below, counts records in ctl[0] instead: a dense pool.)
##
## Record type PREC (a 2 x 32-bit pair of indices) and the writer protocol:
##     PAGE_WRITER(skip)  declares pg, fill, h (records produced so far), stopped
##     PAGE_EMIT(rec)     places one record (skipping the first `skip`)
##     page_end(...)      closes the page and reports a stopped writer
##
## Staged writers (page_defs(stage=S), S > 0; beyond the paper, one atomic for
## a whole work-group; the self-join and theta-join kernels): a writer keeps its records in local memory
## (PAGE_STAGE_LOCALS at kernel scope; slot k of work-item l at
## stage_[k * WG_SIZE + l], no bank conflicts). At points every work-item of the
## group reaches (stage_commit: at the end, and where some writer's stage is
## half full: stage_commit_if -- in the self-join kernels between groups of k
## rows, in the theta join at tile boundaries) the group scans its staged counts, takes one
## run of consecutive pages for all of them with one atomic_add on GP and
## writes them there densely (coalesced). Between those points a writer makes
## room for each chunk of PAGE_STAGE_CHUNK candidates beforehand, spilling
## what it holds to its own pages as above (PAGE_STAGE_SPILL), so the loop
## that tests candidates holds no atomic. A run cut short by the pool's end is
## filled as far as it goes and the writers whose records did not fit stop
## (done = the records they placed, in output order): nothing is lost, and a
## pool of one page still makes progress.
<%namespace name="common" file="common.cl.mako"/>

<%def name="page_defs(stage=0, grouped=False)">
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

%if stage and grouped:
${group_defs(stage)}
%elif not stage:
#define PAGE_WRITER(skip_) \
    uint pg_ = PAGE_NONE, fill_ = 0, h_ = 0; int stopped_ = 0; const uint skip_h_ = (skip_)
#define PAGE_EMIT(rec_) \
    do { \
        if (stopped_) ; \
        else if (h_ >= skip_h_ && !page_put(pool, ctl, npages, page, fills, &pg_, &fill_, (rec_))) stopped_ = 1; \
        else ++h_; \
    } while (0)
%else:
#define STAGE ${stage}
#define PAGE_STAGE_LOCALS \
    __local PREC stage_[STAGE * WG_SIZE]; __local uint sscan_[WG_SIZE]; __local uint stot_[WG_SIZE]; \
    __local uint sbase_; __local uint sflag_[3]; SG_DECL; \
    if (get_local_id(0) == 0) sflag_[0] = sflag_[1] = sflag_[2] = 0u; \
    barrier(CLK_LOCAL_MEM_FENCE)
// h_: records skipped or placed in the writer's own pages; sc_: records staged after them
// (a record staged by vstore2: a plain store of a pair built from two values is
// compiled by Oclgrind's front end into a store of poison in the self-join kernels)
#define PAGE_WRITER(skip_) \
    uint pg_ = PAGE_NONE, fill_ = 0, h_ = 0, sc_ = 0; int stopped_ = 0; const uint skip_h_ = (skip_)
// the caller keeps room (PAGE_STAGE_SPILL when sc_ > STAGE - PAGE_STAGE_CHUNK, before a
// chunk of at most PAGE_STAGE_CHUNK emits)
#define PAGE_STAGE_CHUNK ${max(1, stage // 2)}
#define PAGE_EMIT(rec_) \
    do { \
        if (h_ < skip_h_) ++h_; \
        else if (!stopped_) vstore2((rec_), 0, (__local uint *)(stage_ + sc_++ * WG_SIZE + get_local_id(0))); \
    } while (0)
// A fast path's emit (a writer that skips nothing and has not stopped): the record at
// stage slot c_ while there is room, c_ counting on; c_ > STAGE when done: the stage
// overflowed, and the caller takes the candidates again with PAGE_EMIT from sc_ (the
// slot c_ began at, so nothing staged past it is read before it is written again)
#define PAGE_STAGE_FAST(rec_, c_) \
    do { \
        if ((c_) < STAGE) vstore2((rec_), 0, (__local uint *)(stage_ + (c_) * WG_SIZE + get_local_id(0))); \
        ++(c_); \
    } while (0)
#define PAGE_STAGE_SPILL() \
    do { \
        const uint k_ = stage_spill(pool, ctl, npages, page, fills, &pg_, &fill_, stage_, sc_); \
        h_ += k_; \
        if (k_ < sc_) stopped_ = 1; \
        sc_ = 0; \
    } while (0)

// The writer's staged records [0, sc) into its own pages: how many were placed.
inline uint stage_spill(__global PREC *pool, volatile __global uint *ctl, const uint npages, const uint page,
                        __global uint *fills, uint *pg, uint *fill, __local const PREC *st, const uint sc)
{
    const uint l = get_local_id(0);
    for (uint k = 0; k < sc; ++k)
        if (!page_put(pool, ctl, npages, page, fills, pg, fill, st[k * WG_SIZE + l])) return k;
    return sc;
}
%endif
</%def>

## Grouped staging (page_defs(stage=S, grouped=True); the grid's row kernel):
## the writers of a group of GRP_SIZE work-items (a sub-group of 32 on NVIDIA;
## min(32, WG_SIZE) elsewhere) share one buffer of S * GRP_SIZE records in
## local memory, so however the group's records fall among its writers none
## has to spill while the buffer has room; beside each record its writer's
## lane (gtag_). Writers test candidates in chunks of PAGE_STAGE_CHUNK
## (group_loop), the group in step (GRP_ANY: while some writer has candidates
## left); after each chunk (PAGE_GROUP_ROOM) a group whose buffer has less than
## a chunk's worth of room left (PAGE_STAGE_CHUNK * GRP_SIZE records) writes
## it into the pool's next slots -- one atomic_add on ctl[0], which counts
## records here, not pages; coalesced stores -- so the buffer never overflows
## and the pool fills densely: no page fills, the drain copies the first
## ctl[0] records (host: PagePool(dense=True)). A record takes its slot
## (PAGE_EMIT_IF, every work-item of the group) on NVIDIA and on the `local`
## back end by a ballot -- the chunk's loop runs in step there, a lane past its
## candidates masked (in_ = 0), and the fill is a register -- elsewhere by a
## local atomic_inc in the writer's own loop. Collective points: on NVIDIA
## only the warp's (vote.sync, bar.warp.sync: no work-group barrier);
## elsewhere the work-group's (barriers; every group then flushes where one
## needs to). A run cut short by the pool's end (npages * page records)
## places the buffer's first records; a writer with records past them takes
## those back from h_ (its records lie in the buffer in its output order, so
## the placed ones are a prefix) and stops.
<%def name="group_defs(stage)">
#define STAGE ${stage}
#define GRP_SIZE ${'32u' if sg_backend == 'nv' else '(WG_SIZE < 32 ? (uint)WG_SIZE : 32u)'}
#define GSTAGE (STAGE * GRP_SIZE)
#define PAGE_STAGE_CHUNK ${max(1, stage // 2)}
inline uint grp_lane(void) { return (uint)get_local_id(0) % GRP_SIZE; }
inline uint grp_id(void) { return (uint)get_local_id(0) / GRP_SIZE; }
// h_: records skipped or placed (in the buffer or in pages)
#define PAGE_WRITER(skip_) \
    uint h_ = 0; int stopped_ = 0; const uint skip_h_ = (skip_)
<% in_step = sg_backend in ('nv', 'local') %>\
%if sg_backend == 'nv':
#define GRP_BARRIER() asm volatile("bar.warp.sync 0xffffffff;" ::: "memory")
inline int grp_any(__local uint *flags, uint *r, const int p)
{
    int v;
    asm volatile("{ .reg .pred a, b; setp.ne.s32 a, %1, 0; vote.sync.any.pred b, a, 0xffffffff; selp.s32 %0, 1, 0, b; }"
                 : "=r"(v) : "r"(p));
    return v;
}
#define GRP_BALLOT(p_) sg_ballot(sg_mem, (p_))
inline uint grp_lanes_below(void) { uint m; asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m)); return m; }
%else:
#define GRP_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
// the work-group's any (every work-item calls it): flags in rotation, one barrier
inline int grp_any(__local uint *flags, uint *r, const int p)
{
    const uint k = *r % 3u;
    if (p) flags[k] = 1u;
    if (get_local_id(0) == 0) flags[(k + 1u) % 3u] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    *r += 1u;
    return flags[k] != 0u;
}
%if in_step:
#define GRP_BALLOT(p_) sg_ballot(sg_mem, (p_))
inline uint grp_lanes_below(void) { return (1u << grp_lane()) - 1u; }
%endif
%endif
%if in_step:
// the group's fill: a register (gfr_), the same in every lane (sub-group = group)
#define PAGE_EMIT_IF(hit_, rec_) \
    do { \
        const int s_ = (hit_) && h_ < skip_h_; \
        const int e_ = (hit_) && !s_ && !stopped_; \
        const uint b_ = GRP_BALLOT(e_); \
        if (e_) { \
            const uint k_ = gfr_ + popcount(b_ & grp_lanes_below()); \
            vstore2((rec_), 0, (__local uint *)(gbuf_ + k_)); \
            gtag_[k_] = (ushort)grp_lane(); \
        } \
        gfr_ += popcount(b_); \
        if (s_ || e_) ++h_; \
    } while (0)
#define GRP_FILL() gfr_
#define GRP_FILL_RESET() gfr_ = 0u
%if sg_backend == 'nv':
#define GRP_NEEDS(p_) (p_)                  /* the fill is the warp's: p_ is uniform */
%else:
#define GRP_NEEDS(p_) GRP_ANY(p_)           /* every group flushes where one needs to */
%endif
%else:
#define PAGE_EMIT_IF(hit_, rec_) \
    do { \
        if (!(hit_)) ; \
        else if (h_ < skip_h_) ++h_; \
        else if (!stopped_) { \
            const uint k_ = atomic_inc(gfill_ + grp_id()); \
            vstore2((rec_), 0, (__local uint *)(gbuf_ + k_)); \
            gtag_[k_] = (ushort)grp_lane(); \
            ++h_; \
        } \
    } while (0)
#define GRP_FILL() (GRP_BARRIER(), gfill_[grp_id()])
#define GRP_NEEDS(p_) GRP_ANY(p_)
#define GRP_FILL_RESET() \
    do { if (grp_lane() == 0) gfill_[grp_id()] = 0u; GRP_BARRIER(); } while (0)
%endif
#define GRP_ANY(p_) grp_any(gany_, &gr_, (p_))
#define PAGE_GROUP_LOCALS \
    __local PREC gbufs_[STAGE * WG_SIZE]; __local ushort gtags_[STAGE * WG_SIZE]; \
    __local uint gfill_[WG_SIZE / GRP_SIZE]; __local uint gbase_[WG_SIZE / GRP_SIZE]; __local uint gany_[3]; \
    uint gr_ = 0, gfr_ = 0; SG_DECL; \
    __local PREC *const gbuf_ = gbufs_ + grp_id() * GSTAGE; \
    __local ushort *const gtag_ = gtags_ + grp_id() * GSTAGE; \
    if (grp_lane() == 0) gfill_[grp_id()] = 0u; \
    if (get_local_id(0) < 3) gany_[get_local_id(0)] = 0u; \
    barrier(CLK_LOCAL_MEM_FENCE)
// After a chunk (every work-item): the group's buffer into the pool where it holds
// more than over_ records (GSTAGE less a chunk's worth: it cannot overflow; 0: the end)
#define PAGE_GROUP_ROOM(over_) \
    do { \
        const uint f_ = GRP_FILL(); \
        if (GRP_NEEDS(f_ > (over_))) { \
            group_flush(pool, ctl, npages * page, gbuf_, gtag_, gbase_ + grp_id(), f_, &h_, &stopped_); \
            GRP_FILL_RESET(); \
        } \
    } while (0)

// The group's f buffered records into the next f slots of the pool (every
// work-item of the group; of the work-group where GRP_BARRIER is the
// work-group's); the buffer is free again when it returns.
inline void group_flush(__global PREC *pool, volatile __global uint *ctl, const uint slots,
                        __local const PREC *buf, __local const ushort *tag, __local uint *base, const uint f,
                        uint *h, int *stopped)
{
    const uint lane = grp_lane();
    if (lane == 0 && f) {
        // no add once the pool is full: ctl[0] stays within slots plus the runs in flight
        // (a 32-bit count that every later flush added to would wrap on large outputs)
        const uint at = atomic_or(ctl, 0u);                    // (an atomic read: others add to it)
        *base = at >= slots ? at : atomic_add(ctl, f);
    }
    GRP_BARRIER();                                            // the base, and the buffer's records
    const uint p = f ? *base : slots;
    const uint cap = p >= slots ? 0u : min(f, slots - p);     // records placed
    for (uint t = lane; t < cap; t += GRP_SIZE) pool[p + t] = buf[t];
    if (cap < f) {                                            // the pool ran out
        uint lost = 0;
        for (uint t = cap; t < f; ++t) lost += tag[t] == lane ? 1u : 0u;
        *h -= lost;
        if (lost) *stopped = 1;
    }
    GRP_BARRIER();                                            // the buffer is read
}
</%def>

## The loop header of a chunk of a writer's candidates [jb, je) (the caller
## closes it): in step on NVIDIA and the `local` back end (j clamped to 0 where
## in_ is 0), the writer's own loop elsewhere (in_ = 1).
<%def name="group_loop(jb, je)">
%if sg_backend in ('nv', 'local'):
                    for (uint t_ = 0; t_ < PAGE_STAGE_CHUNK; ++t_) {
                        const int in_ = ${jb} + t_ < ${je};
                        const uint j = in_ ? ${jb} + t_ : 0u;
%else:
                    for (uint j = ${jb}; j < ${je}; ++j) {
                        const int in_ = 1;
%endif
</%def>

## The work-group's staged records into one run of pages: every work-item of
## the group (a writer or not: sc_ = 0), with the writer state in scope; the
## staged records that fit are placed (h_ grows), a writer whose records did
## not all fit stops (page_end then reports it), and sc_ is 0 again. The
## counts are scanned in sub-groups (shuffles) and across them in local memory.
<%def name="stage_commit()">
        {
            const uint l_ = get_local_id(0), g_ = sg_id();
            barrier(CLK_LOCAL_MEM_FENCE);                   // the last commit's reads are done
            uint v_ = sg_scan_add(sg_mem, sc_);              // inclusive, in the sub-group
            if (sg_lane() == sg_size() - 1) stot_[g_] = v_;
            barrier(CLK_LOCAL_MEM_FENCE);
            uint total_ = 0;
            for (uint q_ = 0; q_ < (WG_SIZE + SG_SIZE - 1) / SG_SIZE; ++q_) {
                if (q_ == g_) v_ += total_;
                total_ += stot_[q_];
            }
            if (total_) {                                    // uniform
                const uint need_ = (total_ + page - 1) / page;
                sscan_[l_] = v_;
                if (l_ == 0) sbase_ = atomic_add(ctl, need_);
                barrier(CLK_LOCAL_MEM_FENCE);
                const uint p_ = sbase_;
                const uint got_ = p_ >= npages ? 0u : min(need_, npages - p_);   // the run's pages in the pool
                const uint cap_ = min(total_, got_ * page);                       // records placed
                for (uint t_ = l_; t_ < cap_; t_ += WG_SIZE) {
                    uint lo_ = 0, hi_ = WG_SIZE - 1;          // the work-item holding record t_
                    while (lo_ < hi_) {
                        const uint mid_ = (lo_ + hi_) >> 1;
                        if (sscan_[mid_] > t_) hi_ = mid_; else lo_ = mid_ + 1;
                    }
                    const uint k_ = t_ - (lo_ ? sscan_[lo_ - 1] : 0u);
                    pool[(size_t)p_ * page + t_] = stage_[k_ * WG_SIZE + lo_];
                }
                for (uint q_ = l_; q_ < got_; q_ += WG_SIZE) fills[p_ + q_] = min(page, cap_ - q_ * page);
                const uint ex_ = v_ - sc_;
                const uint placed_ = cap_ > ex_ ? min(sc_, cap_ - ex_) : 0u;
                h_ += placed_;
                if (placed_ < sc_) stopped_ = 1;
                sc_ = 0;
                barrier(CLK_LOCAL_MEM_FENCE);               // stage_ is free again
            }
        }
</%def>

## A commit between rows (every work-item, ``row``: a counter all share) only
## where some writer holds more than half its stage: one barrier decides (flags
## in rotation, so no writer resets one another may still read).
<%def name="stage_commit_if(row)">
        {
            if (sc_ > STAGE / 2) sflag_[(${row}) % 3] = 1u;
            if (get_local_id(0) == 0) sflag_[(${row} + 1) % 3] = 0u;
            barrier(CLK_LOCAL_MEM_FENCE);
            if (sflag_[(${row}) % 3]) {
${stage_commit()}
            }
        }
</%def>

## Dense copy of the pages [0, used), split into the two index columns as
## int64 (what the host returns, so the host only copies): offs[p] = exclusive
## scan of fills; out_i[offs[p] + k] = pool[p * page + k].x (and .y into out_j)
## for k < fills[p]. One work-item per pool slot. (A dense record buffer is
## one page: fills = {m}, offs = {0}.) ``mapped``: a record (a, b) comes out
## as the pair of ids (min(ids_a[a], ids_b[b]), max(...)) -- the global ids of
## points a call saw as a subset (a slab of a distributed join). ``keyed``
## (pairs put in (i, j) order on the device): one uint64 column instead,
## out_k = i << 32 | j, for the segmented sort; pages_unkey then splits the
## sorted keys into the two int64 columns.
<%def name="compact(keys_run, mapped=False, keyed=False)">
<%
    if mapped and keyed:
        raise ValueError("keyed records are the raw (i, j) pairs, not mapped ids")
%>
${common.prelude(real='float', wg_size=64)}
typedef uint2 PREC;
__kernel void pages_compact(__global const PREC *pool, __global const uint *fills, __global const uint *offs,
%if keyed:
                            const ulong slots, const uint page, __global ulong *out_k
%else:
                            const ulong slots, const uint page, __global long *out_i, __global long *out_j
%endif
%if mapped:
                            , __global const long *ids_a, __global const long *ids_b
%endif
                            )
{
    if (get_global_id(0) >= slots) return;
    const uint s = (uint)get_global_id(0);                  // slots <= 2^31 (pages.MAX_SLOTS): 32-bit division
    const uint p = s / page, k = s - p * page;
    if (k < fills[p]) {
        const PREC r = pool[s];
%if keyed:
        out_k[offs[p] + k] = upsample(r.x, r.y);
%elif mapped:
        const long a = ids_a[r.x], b = ids_b[r.y];
        out_i[offs[p] + k] = min(a, b);
        out_j[offs[p] + k] = max(a, b);
%else:
        out_i[offs[p] + k] = (long)r.x;
        out_j[offs[p] + k] = (long)r.y;
%endif
    }
}
%if keyed:

// A work-group of 64 takes 64 * KEYS_RUN consecutive keys (work-item l the keys l, l + 64,
// ...: coalesced loads) and counts them by row in a local hash table (open addressing,
// half full at most), then adds each row's count with one global atomic: a row's keys
// may lie anywhere in the block (a group of writers' records interleave by writer),
// and the global atomics per row stay few whatever the layout.
<%
    hbits = (2 * 64 * keys_run).bit_length() - 1
    if 2 * 64 * keys_run != 1 << hbits:
        raise ValueError("keys_run must be a power of two")
%>\
#define KEYS_RUN ${keys_run}u
#define KEYS_WG 64u
#define KEYS_BLOCK (KEYS_WG * KEYS_RUN)
#define HBITS ${hbits}u
#define HSIZE (1u << HBITS)                     /* 2 * KEYS_BLOCK */
#define HEMPTY 0xffffffffu                      /* no row: rows are below 2^32 - 1 */

// a row's first slot: the high bits of a Fibonacci hash (rows equal modulo HSIZE spread out)
inline uint rows_slot(__local uint *hrow, const uint row)
{
    uint s = (row * 0x9E3779B1u) >> (32u - HBITS);
    for (;;) {
        const uint old = atomic_cmpxchg(hrow + s, HEMPTY, row);
        if (old == HEMPTY || old == row) return s;
        s = (s + 1u) & (HSIZE - 1u);
    }
}

#define ROWS_TABLE \
    __local uint hrow[HSIZE], hcnt[HSIZE]; \
    for (uint t = get_local_id(0); t < HSIZE; t += KEYS_WG) { hrow[t] = HEMPTY; hcnt[t] = 0u; } \
    barrier(CLK_LOCAL_MEM_FENCE); \
    const ulong b = (ulong)get_group_id(0) * KEYS_BLOCK + get_local_id(0)

__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void keys_rows(__global const ulong *key, const ulong n, __global uint *cnt)
{
    ROWS_TABLE;
    for (uint t = 0; t < KEYS_RUN; ++t) {
        const ulong k = b + (ulong)t * KEYS_WG;
        if (k < n) atomic_inc(hcnt + rows_slot(hrow, (uint)(key[k] >> 32)));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint t = get_local_id(0); t < HSIZE; t += KEYS_WG)
        if (hcnt[t]) atomic_add(cnt + hrow[t], hcnt[t]);
}

// the scatter's cursors: a copy of the rows' offsets (a kernel's copy: Oclgrind, the memory
// checker, keeps a pool buffer that once had a driver copy uninitialised under later stores)
__kernel void rows_cursor(__global const uint *offsets, const uint rows, __global uint *cur)
{
    if (get_global_id(0) < rows) cur[get_global_id(0)] = offsets[get_global_id(0)];
}

// cur: the rows' offsets, each advanced past the keys placed. The block's keys counted by
// row as in keys_rows (a key's rank among its row's in the block from the local atomic),
// one global atomic a row of the block takes its range, the keys stored there (in no
// particular order: the sort of the row's segment fixes it). (Putting the block's keys in
// row order in local memory first, for runs of stores, measured slower on the H100.)
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void keys_scatter(__global const ulong *key, const ulong n, __global uint *cur, __global ulong *out)
{
    ROWS_TABLE;
    uint slot[KEYS_RUN], rank[KEYS_RUN];
    for (uint t = 0; t < KEYS_RUN; ++t) {
        const ulong k = b + (ulong)t * KEYS_WG;
        if (k < n) {
            slot[t] = rows_slot(hrow, (uint)(key[k] >> 32));
            rank[t] = atomic_inc(hcnt + slot[t]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint t = get_local_id(0); t < HSIZE; t += KEYS_WG)
        if (hcnt[t]) hrow[t] = atomic_add(cur + hrow[t], hcnt[t]);     // the slot's row -> its range
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint t = 0; t < KEYS_RUN; ++t) {
        const ulong k = b + (ulong)t * KEYS_WG;
        if (k < n) out[hrow[slot[t]] + rank[t]] = key[k];
    }
}

// the sorted keys [0, n) of one chunk of rows into the columns' elements [base, base + n)
__kernel void pages_unkey(__global const ulong *key, const ulong n, const ulong base, __global long *out_i,
                          __global long *out_j)
{
    if (get_global_id(0) >= n) return;
    const ulong k = key[get_global_id(0)];
    out_i[base + get_global_id(0)] = (long)(k >> 32);
    out_j[base + get_global_id(0)] = (long)(k & 0xffffffffUL);
}

// The rows cut into ``parts`` chunks of about equal keys (the order sorts and downloads
// them one after another): work-item c finds the first row r whose offset reaches
// total * c / parts and writes (r, offsets[r]); c = parts gives the end.
__kernel void rows_split(__global const uint *offsets, const uint rows, const uint parts, __global uint *out)
{
    const uint c = (uint)get_global_id(0);
    if (c > parts) return;
    const ulong want = (ulong)offsets[rows] * c / parts;
    uint lo = 0, hi = rows;
    while (lo < hi) {
        const uint mid = lo + (hi - lo) / 2;
        if ((ulong)offsets[mid] >= want) hi = mid; else lo = mid + 1;
    }
    out[2 * c] = lo;
    out[2 * c + 1] = offsets[lo];
}

// one chunk's segment offsets for the segmented sort: rows [r0, r0 + nrows] less the
// chunk's first offset, widened
__kernel void rows_rebase(__global const uint *offsets, const uint r0, const uint nrows, __global ulong *out)
{
    const uint t = (uint)get_global_id(0);
    if (t <= nrows) out[t] = (ulong)(offsets[r0 + t] - offsets[r0]);
}
%endif
</%def>
