/* Buffers kept across configurations, work partitioning and error reporting for the kernels. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ub.h"

static char ub_error_text[256];
static int ub_has_error;

void ub_fail(const char *msg)
{
#pragma omp critical(ub_error)
    if (!ub_has_error) {
        ub_has_error = 1;
        snprintf(ub_error_text, sizeof ub_error_text, "%s", msg);
    }
}

const char *ub_error(void) { return ub_has_error ? ub_error_text : NULL; }

void ub_clear_error(void) { ub_has_error = 0; }

static char *ub_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "out of memory allocating %zu bytes", bytes);
        ub_fail(msg);
        return NULL;
    }
    return p;
}

char *ub_buf_private(struct ub_buf *b, size_t bytes, int cpu)
{
    if (b->p && b->bytes >= bytes && b->cpu == cpu)
        return b->p;
    free(b->p);
    b->p = ub_alloc(bytes);
    b->bytes = b->p ? bytes : 0;
    b->cpu = cpu;
    b->fresh = 1;
    return b->p;
}

char *ub_buf_shared(struct ub_buf *b, size_t bytes, int threads, int exact)
{
    /* -threads marks "first-touched by a team of that size" (partitioned as ub_partition does) */
#pragma omp barrier
#pragma omp single
    if (!(b->p && (exact ? b->bytes == bytes : b->bytes >= bytes) && b->cpu == -threads)) {
        free(b->p);
        b->p = ub_alloc(bytes);
        b->bytes = b->p ? bytes : 0;
        b->cpu = -threads;
        b->fresh = 1;
    }
    return b->p;
}

void ub_buf_shared_done(struct ub_buf *b)
{
#pragma omp barrier
#pragma omp single
    b->fresh = 0;
}

void ub_partition(long n, int threads, int tid, long align, long *lo, long *hi)
{
    long chunk = n / threads;
    if (align > 1)
        chunk -= chunk % align;
    *lo = chunk * tid;
    *hi = tid == threads - 1 ? n : *lo + chunk;
}
