/* STREAM's triad a[i] = b[i] + s * c[i] over N doubles, REPS times, in an OpenMP loop (static
 * schedule: each thread owns a contiguous part of every array, so all three streams are private).
 * Usage: triad N REPS. Built by tests/test_streamprobe.py; traced by scripts/eval_corredor_probe.py. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, reps = argc > 2 ? atol(argv[2]) : 5;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c)
        return 1;
    for (long i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)i;
        c[i] = 2.0 * (double)i;
    }
    for (long r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
    }
    printf("%g\n", a[n - 1]);
    return 0;
}
