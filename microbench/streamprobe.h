/* streamprobe.h: Corredor (2011)'s stream analysis, shared by the two stream probes.
 *
 * The local stride of an instruction is the difference between the addresses it touches one after
 * the other (in one thread). Per (instruction, access slot) "key": per-thread last address, access
 * count and range, a Misra-Gries summary of the strides (the dominant one survives) and the mean
 * absolute stride. Instructions whose ranges overlap are one stream (one array touched by several
 * instructions: an initialisation loop and the kernel, an unrolled body).
 *
 * Two hosts include this file: streamprobe.c (reads valgrind lackey's text trace from a pipe) and
 * streamtool.c (a valgrind tool that calls sp_record on every access itself, without printing).
 * Neither may use the other's C library, so the host defines before including:
 *   SP_ZALLOC(bytes)             zeroed memory (never NULL)
 *   SP_FREE(p)
 *   SP_PRINTF(fmt, ...)          where the report goes
 *   SP_SORT(base, n, size, cmp)  an in-place sort
 *   SP_WHERE(addr)               the name of the function holding instruction addr, or "-"
 *
 * Sampling: with sp_every > 1 only one window of sp_window accesses in every sp_every*sp_window is
 * recorded (strides restart at each window), counts are scaled by sp_every. Default: every access.
 *
 * Report (one record per line, tab-separated):
 *   total  ACCESSES  THREADS  KEYS  EVERY
 *   stream SIZE_BYTES STRIDE ELEM ACCESS(C|P) PATTERN(seq|random) ACCESSES ITERATIONS SEQ_SHARE LO HI FUNCTION
 * SIZE_BYTES: bytes spanned (C: by all threads; P: by the busiest thread's part); ITERATIONS:
 * accesses of the stream's busiest instruction in its busiest thread (the slowest thread's loop);
 * FUNCTION: the function holding that instruction (an OpenMP region's outlined function names
 * the phase the stream belongs to), "-" where the host cannot tell.
 */
#ifndef NODEREG_STREAMPROBE_H
#define NODEREG_STREAMPROBE_H

#include <stdint.h>

#define SP_MAXT 16          /* threads told apart; valgrind tid t counts as t % SP_MAXT */
#define SP_SLOTS 4          /* Misra-Gries stride candidates per instruction */
#define SP_MIN_SPAN 4096    /* bytes: narrower access sequences are scalars and stack frames, not streams */
#define SP_RANDOM_STEP 64   /* bytes: a random stream touches at least one line in this many per access, about */
/* of all accesses: rarer instructions (start-up, libc) are not a phase's streams. Low, because a
 * large code spreads a stream over hundreds of instructions (NPB BT: none has 0.2%); the stream
 * as a whole must still take MIN_SHARE (1%) in registry.measure.streams to count. */
#define SP_MIN_SHARE 1e-4

struct sp_key {
    uint64_t id;                       /* (instruction address << 3) | access slot */
    uint64_t last[SP_MAXT], lo[SP_MAXT], hi[SP_MAXT], count[SP_MAXT];
    int64_t stride[SP_SLOTS];
    uint64_t weight[SP_SLOTS];
    uint64_t strided;                  /* stride observations */
    double abs_sum;                    /* sum of |stride| */
    unsigned elem;
};

/* Keys live at stable addresses (the tool binds one to each instrumented access); the table holds
 * pointers to them, open addressing. */
static struct sp_key **sp_table;
static uint64_t sp_cap = 1 << 16, sp_used;
static uint64_t sp_window = 1 << 20, sp_every = 1, sp_seen, sp_accesses;
static int sp_recording = 1, sp_threads = 1;

static struct sp_key **sp_slot(struct sp_key **table, uint64_t cap, uint64_t id)
{
    uint64_t i = ((id * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
    while (table[i] && table[i]->id != id)
        i = (i + 1) & (cap - 1);
    return &table[i];
}

/* The key of (instruction, slot), made on first sight. */
static struct sp_key *sp_lookup(uint64_t id)
{
    if (!sp_table)
        sp_table = SP_ZALLOC(sp_cap * sizeof *sp_table);
    struct sp_key **slot = sp_slot(sp_table, sp_cap, id);
    if (*slot)
        return *slot;
    if (2 * (sp_used + 1) > sp_cap) {
        struct sp_key **old = sp_table;
        sp_table = SP_ZALLOC(2 * sp_cap * sizeof *sp_table);
        for (uint64_t i = 0; i < sp_cap; i++)
            if (old[i])
                *sp_slot(sp_table, 2 * sp_cap, old[i]->id) = old[i];
        sp_cap *= 2;
        SP_FREE(old);
        slot = sp_slot(sp_table, sp_cap, id);
    }
    struct sp_key *k = SP_ZALLOC(sizeof *k);
    k->id = id;
    for (int t = 0; t < SP_MAXT; t++)
        k->lo[t] = UINT64_MAX;
    sp_used++;
    return *slot = k;
}

static void sp_observe(struct sp_key *k, int tid, uint64_t addr, unsigned size)
{
    if (!k->elem)
        k->elem = size;
    if (k->last[tid]) {
        int64_t d = (int64_t)(addr - k->last[tid]);
        k->strided++;
        k->abs_sum += d < 0 ? -(double)d : (double)d;
        int hit = -1, free_slot = -1;
        for (int s = 0; s < SP_SLOTS; s++) {
            if (k->weight[s] && k->stride[s] == d)
                hit = s;
            else if (!k->weight[s] && free_slot < 0)
                free_slot = s;
        }
        if (hit >= 0)
            k->weight[hit]++;
        else if (free_slot >= 0) {
            k->stride[free_slot] = d;
            k->weight[free_slot] = 1;
        } else
            for (int s = 0; s < SP_SLOTS; s++)
                k->weight[s]--;
    }
    k->last[tid] = addr;
    k->count[tid]++;
    if (addr < k->lo[tid])
        k->lo[tid] = addr;
    if (addr + size > k->hi[tid])
        k->hi[tid] = addr + size;
}

/* One access of key k by thread tid (valgrind's thread id), through the sampling window. */
static inline void sp_record(struct sp_key *k, int tid, uint64_t addr, unsigned size)
{
    if (tid > sp_threads)
        sp_threads = tid;
    if (sp_every > 1 && sp_seen++ % sp_window == 0) {
        sp_recording = (sp_seen / sp_window) % sp_every == 0;
        if (sp_recording)  /* a new window: strides restart */
            for (uint64_t i = 0; i < sp_cap; i++)
                if (sp_table[i])
                    for (int t = 0; t < SP_MAXT; t++)
                        sp_table[i]->last[t] = 0;
    }
    if (sp_recording) {
        sp_observe(k, tid % SP_MAXT, addr, size);
        sp_accesses++;
    }
}

/* ---- streams: instructions grouped by overlapping ranges ---- */

struct sp_stream {
    uint64_t lo, hi, accesses, iterations, strided, seq;
    uint64_t tlo[SP_MAXT], thi[SP_MAXT], tcount[SP_MAXT];
    uint64_t top, top_id;              /* accesses and key of the busiest instruction so far */
    int top_parallel;                  /* ... and whether it ran in >= 2 threads (preferred) */
    int64_t stride;
    double abs_sum;
    unsigned elem;
    int parallel;                      /* some instruction ran in >= 2 threads */
};

static uint64_t sp_key_lo(const struct sp_key *k)
{
    uint64_t lo = UINT64_MAX;
    for (int t = 0; t < SP_MAXT; t++)
        if (k->lo[t] < lo)
            lo = k->lo[t];
    return lo;
}

static uint64_t sp_key_hi(const struct sp_key *k)
{
    uint64_t hi = 0;
    for (int t = 0; t < SP_MAXT; t++)
        if (k->hi[t] > hi)
            hi = k->hi[t];
    return hi;
}

static uint64_t sp_key_total(const struct sp_key *k)
{
    uint64_t n = 0;
    for (int t = 0; t < SP_MAXT; t++)
        n += k->count[t];
    return n;
}

static int sp_dominant(const struct sp_key *k)
{
    int best = 0;
    for (int s = 1; s < SP_SLOTS; s++)
        if (k->weight[s] > k->weight[best])
            best = s;
    return best;
}

static int sp_by_lo(const void *a, const void *b)
{
    uint64_t x = sp_key_lo(*(struct sp_key *const *)a), y = sp_key_lo(*(struct sp_key *const *)b);
    return x < y ? -1 : x > y;
}

static void sp_add_key(struct sp_stream *s, const struct sp_key *k)
{
    uint64_t n = sp_key_total(k), busiest = 0;
    int threads = 0, d = sp_dominant(k);
    for (int t = 0; t < SP_MAXT; t++) {
        if (!k->count[t])
            continue;
        threads++;
        if (k->count[t] > busiest)
            busiest = k->count[t];
    }
    /* the busiest instruction (of the parallel ones, if any) sets element size, stride, iterations */
    if ((threads >= 2 && !s->top_parallel) || ((threads >= 2) == s->top_parallel && n > s->top)) {
        s->top = n;
        s->top_id = k->id;
        s->top_parallel = threads >= 2;
        s->elem = k->elem;
        s->stride = k->stride[d];
        s->iterations = busiest;
    }
    s->accesses += n;
    s->strided += k->strided;
    s->seq += k->weight[d];
    s->abs_sum += k->abs_sum;
    if (threads >= 2 && !s->parallel) {  /* sharing is judged on parallel code only */
        s->parallel = 1;
        for (int t = 0; t < SP_MAXT; t++)
            s->tcount[t] = s->thi[t] = 0;
    }
    if (threads >= 2 || !s->parallel)
        for (int t = 0; t < SP_MAXT; t++) {
            if (!k->count[t])
                continue;
            if (!s->tcount[t] || k->lo[t] < s->tlo[t])
                s->tlo[t] = k->lo[t];
            if (k->hi[t] > s->thi[t])
                s->thi[t] = k->hi[t];
            s->tcount[t] += k->count[t];
        }
}

/* C when the threads' ranges overlap over at least half of the narrower one; the size of a P
 * stream is the busiest thread's part (as the registry's microbenchmarks count private streams). */
static void sp_emit(const struct sp_stream *s)
{
    int threads = 0, shared = 1;
    uint64_t part = 0, busiest = 0;
    for (int t = 0; t < SP_MAXT; t++) {
        if (!s->tcount[t])
            continue;
        threads++;
        if (s->tcount[t] > busiest) {
            busiest = s->tcount[t];
            part = s->thi[t] - s->tlo[t];
        }
        for (int u = 0; u < t; u++) {
            if (!s->tcount[u])
                continue;
            uint64_t lo = s->tlo[t] > s->tlo[u] ? s->tlo[t] : s->tlo[u];
            uint64_t hi = s->thi[t] < s->thi[u] ? s->thi[t] : s->thi[u];
            uint64_t a = s->thi[t] - s->tlo[t], b = s->thi[u] - s->tlo[u];
            uint64_t narrow = a < b ? a : b;
            if (hi <= lo || 2 * (hi - lo) < narrow)
                shared = 0;
        }
    }
    int parallel = s->parallel && threads >= 2;
    /* the share of strides that are the dominant one, in 1/10000 (printed without %f, which a
     * valgrind tool's printf lacks) */
    uint64_t seq = s->strided ? (uint64_t)(10000.0 * (double)s->seq / (double)s->strided + 0.5) : 10000;
    int sequential = 2 * seq >= 10000;
    int64_t stride = s->stride < 0 ? -s->stride : s->stride;
    if (!sequential && s->strided)
        stride = (int64_t)(s->abs_sum / (double)s->strided + 0.5);
    SP_PRINTF("stream\t%llu\t%lld\t%u\t%c\t%s\t%llu\t%llu\t%llu.%04llu\t%llu\t%llu\t%s\n",
              (unsigned long long)(parallel && !shared ? part : s->hi - s->lo), (long long)stride, s->elem,
              parallel && !shared ? 'P' : 'C', sequential ? "seq" : "random",
              (unsigned long long)(s->accesses * sp_every), (unsigned long long)(s->iterations * sp_every),
              (unsigned long long)(seq / 10000), (unsigned long long)(seq % 10000), (unsigned long long)s->lo,
              (unsigned long long)s->hi, SP_WHERE(s->top_id >> 3));
}

/* An instruction that is a stream: frequent, spanning more than a few elements, not one address
 * over and over; when its strides are regular, its range must be one its steps can cover (a
 * generic routine jumping between the stack and the heap spans a huge, sparse range). */
static int sp_is_stream(const struct sp_key *k)
{
    uint64_t span = sp_key_hi(k) - sp_key_lo(k), n = sp_key_total(k);
    int d = sp_dominant(k);
    int64_t step = k->stride[d] < 0 ? -k->stride[d] : k->stride[d];
    if (!k->strided || span < SP_MIN_SPAN || (double)n < SP_MIN_SHARE * (double)sp_accesses)
        return 0;
    if (k->weight[d] && step == 0)
        return 0;
    if (2 * k->weight[d] < k->strided)
        step = SP_RANDOM_STEP;
    if ((double)span > 2.0 * (double)n * (double)step + SP_MIN_SPAN)
        return 0;
    return 1;
}

/* The report (header): totals, then one line per stream in address order. */
static void sp_report(void)
{
    struct sp_key **keys = SP_ZALLOC((sp_used + 1) * sizeof *keys);
    uint64_t n = 0;
    for (uint64_t i = 0; sp_table && i < sp_cap; i++)
        if (sp_table[i] && sp_is_stream(sp_table[i]))
            keys[n++] = sp_table[i];
    SP_SORT(keys, n, sizeof *keys, sp_by_lo);
    SP_PRINTF("total\t%llu\t%d\t%llu\t%llu\n", (unsigned long long)(sp_accesses * sp_every), sp_threads,
              (unsigned long long)sp_used, (unsigned long long)sp_every);
    struct sp_stream s;
    for (uint64_t i = 0; i < n;) {
        s = (struct sp_stream){0};
        s.lo = sp_key_lo(keys[i]);
        s.hi = sp_key_hi(keys[i]);
        for (; i < n && sp_key_lo(keys[i]) < s.hi; i++) {
            sp_add_key(&s, keys[i]);
            if (sp_key_hi(keys[i]) > s.hi)
                s.hi = sp_key_hi(keys[i]);
        }
        sp_emit(&s);
    }
    SP_FREE(keys);
}

#endif
