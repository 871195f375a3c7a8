/* Latency: a dependent pointer chase over a random cyclic permutation, one element per cache
 * line, so every load waits for the previous one and hardware prefetchers cannot guess the next
 * line. Each thread chases its own chain (private region of n lines).
 *
 * The visit order is a Fisher-Yates shuffle of the line indices (xorshift64, seeded per thread)
 * and line order[k] points to line order[k+1], the last back to the first: one cycle through
 * every line. A pass is UB_CHASE_STEPS dereferences; the chase resumes where the previous pass
 * (or repetition) stopped, so a run walks the whole cycle and not a prefix that would fit a cache.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "ub.h"

#define UB_CHASE_STEPS 1024

static struct ub_buf chains[UB_MAX_THREADS];
static long chain_start[UB_MAX_THREADS];
static char *cursor[UB_MAX_THREADS];

static const char *check(const struct ub_config *c)
{
    if (c->n < 2)
        return "chase needs at least 2 lines";
    if (c->line < (int)sizeof(void *) || c->line % (int)sizeof(void *) != 0)
        return "chase: line size must be a multiple of the pointer size";
    if (c->n >= (1L << 32))
        return "chase: at most 2^32 lines";
    return NULL;
}

static void prepare(const struct ub_config *c, int tid)
{
    int cpu = c->n_cpus ? c->cpus[tid] : -1;
    const long n = c->n, line = c->line;
    char *p = ub_buf_private(&chains[tid], (size_t)n * (size_t)line, cpu);
    long *order = malloc((size_t)n * sizeof(long));
    if (!p || !order) {
        free(order);
        ub_fail("out of memory building the pointer chase");
        return;
    }
    for (long i = 0; i < n; i++)
        order[i] = i;
    uint64_t x = ub_seed(tid, 7);
    for (long i = n - 1; i > 0; i--) {
        x = ub_xorshift(x);
        long j = (long)(((x >> 32) * (uint64_t)(i + 1)) >> 32);
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (long k = 0; k < n; k++)
        *(char **)(p + order[k] * line) = p + order[(k + 1) % n] * line;
    chain_start[tid] = order[0];
    cursor[tid] = p + order[0] * line;
    chains[tid].fresh = 0;
    free(order);
}

static void run(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    char *p = cursor[tid];
    for (long k = 0; k < passes; k++)
        for (int j = 0; j < UB_CHASE_STEPS; j += 8) {
            p = *(char **)p;
            p = *(char **)p;
            p = *(char **)p;
            p = *(char **)p;
            p = *(char **)p;
            p = *(char **)p;
            p = *(char **)p;
            p = *(char **)p;
        }
    cursor[tid] = p;
    r->checksum = (double)((p - chains[tid].p) / c->line);
    r->iterations = passes * UB_CHASE_STEPS;
}

/* One walk of thread 0's cycle from its start, summing line indices: n(n-1)/2 for one cycle
 * through every line. */
static double verify(const struct ub_config *c)
{
    char *base = chains[0].p, *p = base + chain_start[0] * c->line;
    double sum = 0;
    for (long k = 0; k < c->n; k++) {
        sum += (double)((p - base) / c->line);
        p = *(char **)p;
    }
    return p == base + chain_start[0] * c->line ? sum : -1.0;
}

static double bytes_per_pass(const struct ub_config *c) { return (double)UB_CHASE_STEPS * c->line * c->threads; }

static double flops_per_pass(const struct ub_config *c) { (void)c; return 0; }

const struct ub_kernel ub_chase_kernel = {
    .name = "chase",
    .check = check,
    .prepare = prepare,
    .run = run,
    .bytes_per_pass = bytes_per_pass,
    .flops_per_pass = flops_per_pass,
    .verify = verify,
};
