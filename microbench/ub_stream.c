/* The thesis family (Corredor 2011): strided read-reduce over one or two memory streams.
 *
 * A configuration gives, per stream, the region size in elements, the stride in bytes, the
 * element type, shared (C: one region all threads walk) or private (P: one region per thread,
 * allocated and first-touched by its thread) and the pattern (sequential stride or random). The
 * operation is one of: sum, product, sum into four independent accumulators (one stream), or
 * sum of a+b, sum of a*b (two streams). Python maps the thesis's names onto these.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "ub.h"

struct ub_geom {
    long n;          /* elements in the region */
    long se;         /* stride in elements (the mean jump for random streams) */
    long m;          /* accesses per pass */
    uint64_t range;  /* random streams: jumps are 1..range elements */
};

#define UB_T double
#define UB_SUF f64
#include "ub_stream_loop.h"
#undef UB_T
#undef UB_SUF
#define UB_T float
#define UB_SUF f32
#include "ub_stream_loop.h"
#undef UB_T
#undef UB_SUF

typedef double (*ub_loop_fn)(const void *, const void *, struct ub_geom, struct ub_geom, long, uint64_t, uint64_t);

#define UB_DT_f64 UB_F64
#define UB_DT_f32 UB_F32
#define UB_NS(OP) (((OP) == UB_OP_ADD || (OP) == UB_OP_MUL) ? 2 : 1)
#define UB_PATTERNS_1(X, SUF, T, OP) X(SUF, T, OP, UB_SEQ, UB_SEQ) X(SUF, T, OP, UB_RANDOM, UB_SEQ)
#define UB_PATTERNS_2(X, SUF, T, OP)                                                                   \
    X(SUF, T, OP, UB_SEQ, UB_SEQ) X(SUF, T, OP, UB_SEQ, UB_RANDOM) X(SUF, T, OP, UB_RANDOM, UB_SEQ)    \
    X(SUF, T, OP, UB_RANDOM, UB_RANDOM)
#define UB_OPS(X, SUF, T)                                                                              \
    UB_PATTERNS_1(X, SUF, T, UB_OP_SUM) UB_PATTERNS_1(X, SUF, T, UB_OP_PROD)                           \
    UB_PATTERNS_1(X, SUF, T, UB_OP_SUM4) UB_PATTERNS_2(X, SUF, T, UB_OP_ADD)                           \
    UB_PATTERNS_2(X, SUF, T, UB_OP_MUL)
#define UB_ALL_LOOPS(X) UB_OPS(X, f64, double) UB_OPS(X, f32, float)

#define UB_DEFINE(SUF, T, OP, PA, PB)                                                                  \
    static double loop_##SUF##_##OP##_##PA##_##PB(const void *a, const void *b, struct ub_geom ga,     \
                                                  struct ub_geom gb, long passes, uint64_t sa,         \
                                                  uint64_t sb)                                         \
    {                                                                                                  \
        return stream_loop_##SUF(OP, UB_NS(OP), PA, PB, (const T *)a, (const T *)b, ga, gb, passes,    \
                                 sa, sb);                                                              \
    }
UB_ALL_LOOPS(UB_DEFINE)

#define UB_ENTRY(SUF, T, OP, PA, PB) [UB_DT_##SUF][OP][PA][PB] = loop_##SUF##_##OP##_##PA##_##PB,
static const ub_loop_fn ub_loops[2][5][2][2] = {UB_ALL_LOOPS(UB_ENTRY)};

/* Buffers per stream slot and element type: shared ones, and one per thread for private ones. */
static struct ub_buf shared_bufs[UB_MAX_STREAMS][2];
static struct ub_buf private_bufs[UB_MAX_THREADS][UB_MAX_STREAMS][2];

static size_t elem_bytes(enum ub_dtype t) { return t == UB_F32 ? 4 : 8; }

static struct ub_geom geom(const struct ub_stream *s)
{
    struct ub_geom g;
    g.n = s->n;
    g.se = s->stride / (long)elem_bytes(s->dtype);
    g.m = s->n / g.se;
    g.range = (uint64_t)(2 * g.se - 1);
    return g;
}

static long iters_per_pass(const struct ub_config *c)
{
    long m = geom(&c->s[0]).m;
    if (c->ns == 2 && geom(&c->s[1]).m > m)
        m = geom(&c->s[1]).m;
    return m;
}

static const char *check(const struct ub_config *c)
{
    static char msg[160];
    if (c->ns != UB_NS(c->op))
        return "operation does not match the number of streams";
    for (int i = 0; i < c->ns; i++) {
        const struct ub_stream *s = &c->s[i];
        long e = (long)elem_bytes(s->dtype);
        if (s->dtype != c->dtype)
            return "all streams must have the kernel's element type";
        if (s->n < 4 || s->stride < e || s->stride % e != 0) {
            snprintf(msg, sizeof msg, "stream %d: need n >= 4 and a stride that is a multiple of %ld bytes", i, e);
            return msg;
        }
        struct ub_geom g = geom(s);
        if (g.m < 4) {
            snprintf(msg, sizeof msg, "stream %d: stride %ld B leaves fewer than 4 accesses in %ld elements", i,
                     s->stride, s->n);
            return msg;
        }
        if (s->pattern == UB_RANDOM && (2 * g.se > s->n || g.range >= (1ull << 32)))
            return "random stream: the region must hold at least two mean strides (and under 2^32 of them)";
    }
    return NULL;
}

static void fill(char *p, enum ub_dtype t, long lo, long hi)
{
    if (t == UB_F64)
        for (long i = lo; i < hi; i++)
            ((double *)p)[i] = ub_value(i);
    else
        for (long i = lo; i < hi; i++)
            ((float *)p)[i] = (float)ub_value(i);
}

static void prepare(const struct ub_config *c, int tid)
{
    int cpu = c->n_cpus ? c->cpus[tid] : -1;
    for (int i = 0; i < c->ns; i++) {
        const struct ub_stream *s = &c->s[i];
        size_t eb = elem_bytes(s->dtype), bytes = (size_t)s->n * eb;
        if (s->access == UB_PRIVATE) {
            struct ub_buf *b = &private_bufs[tid][i][s->dtype];
            char *p = ub_buf_private(b, bytes, cpu);
            if (p && b->fresh) {
                fill(p, s->dtype, 0, (long)(b->bytes / eb));
                b->fresh = 0;
            }
        } else {
            struct ub_buf *b = &shared_bufs[i][s->dtype];
            char *p = ub_buf_shared(b, bytes, c->threads, 0);
            if (p && b->fresh) {
                long lo, hi;
                ub_partition((long)(b->bytes / eb), c->threads, tid, 512, &lo, &hi);
                fill(p, s->dtype, lo, hi);
            }
            ub_buf_shared_done(b);
        }
    }
}

static const void *base(const struct ub_config *c, int i, int tid)
{
    const struct ub_stream *s = &c->s[i];
    return s->access == UB_PRIVATE ? private_bufs[tid][i][s->dtype].p : shared_bufs[i][s->dtype].p;
}

static void run(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    const struct ub_stream *sb = c->ns == 2 ? &c->s[1] : &c->s[0];
    ub_loop_fn f = ub_loops[c->dtype][c->op][c->s[0].pattern][c->ns == 2 ? sb->pattern : UB_SEQ];
    r->checksum = f(base(c, 0, tid), c->ns == 2 ? base(c, 1, tid) : base(c, 0, tid), geom(&c->s[0]), geom(sb),
                    passes, ub_seed(tid, 0), ub_seed(tid, 1));
    r->iterations = passes * iters_per_pass(c);
}

static double bytes_per_pass(const struct ub_config *c)
{
    double per_iter = 0;
    for (int i = 0; i < c->ns; i++)
        per_iter += (double)elem_bytes(c->s[i].dtype);
    return per_iter * (double)iters_per_pass(c) * c->threads;
}

static double flops_per_pass(const struct ub_config *c)
{
    double per_iter = c->op == UB_OP_MUL ? 2 : (c->ns == 2 ? 2 : 1);
    return per_iter * (double)iters_per_pass(c) * c->threads;
}

const struct ub_kernel ub_stream_kernel = {
    .name = "stream",
    .check = check,
    .prepare = prepare,
    .run = run,
    .bytes_per_pass = bytes_per_pass,
    .flops_per_pass = flops_per_pass,
    .verify = NULL,
};
