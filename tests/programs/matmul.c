/* C = A x B for N x N doubles, i-j-k loops, rows of C split between OpenMP threads: the inner loop
 * reads a row of A (stride 8 B, private: each thread its own rows) and a column of B (stride 8N B,
 * shared: every thread reads all of B); C is written once per (i, j), too rarely to be significant.
 * Usage: matmul N. Built by tests/test_streamprobe.py; traced by scripts/eval_corredor_probe.py. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200;
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    if (!a || !b || !c)
        return 1;
    for (long i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7);
        b[i] = (double)(i % 5);
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0;
            for (long k = 0; k < n; k++)
                s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    printf("%g\n", c[n * n - 1]);
    return 0;
}
