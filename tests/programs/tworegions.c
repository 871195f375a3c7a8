/* Two OpenMP regions with their own arrays: a triad a = b + 3c (main._omp_fn.0), then a scaled
 * copy d = 2e over twice as many elements (main._omp_fn.1). Static schedule: every stream is
 * private (P), n/2 doubles per thread in the first region, n per thread in the second.
 * Usage: tworegions N REPS. Built by tests/test_streamprobe.py. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, reps = argc > 2 ? atol(argv[2]) : 5;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    double *d = malloc(2 * n * sizeof *d), *e = malloc(2 * n * sizeof *e);
    if (!a || !b || !c || !d || !e)
        return 1;
    /* one loop per array, no zeros: calloc, or a zeroing loop the compiler makes a memset call,
     * would sweep adjacent arrays with one instruction and join them into one stream */
    for (long i = 0; i < n; i++)
        a[i] = 1.0;
    for (long i = 0; i < n; i++)
        b[i] = (double)i;
    for (long i = 0; i < n; i++)
        c[i] = 2.0 * (double)i;
    for (long i = 0; i < 2 * n; i++)
        d[i] = 1.0;
    for (long i = 0; i < 2 * n; i++)
        e[i] = (double)i;
    for (long r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
    }
    for (long r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < 2 * n; i++)
            d[i] = 2.0 * e[i];
    }
    printf("%g %g\n", a[n - 1], d[n - 1]);
    return 0;
}
