/* Memory-bound OpenMP program for the two-node demo: STREAM-like triad over 3 x 128 MiB, repeated. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = 16L << 20;                       /* 16 Mi doubles = 128 MiB per array */
    int reps = argc > 1 ? atoi(argv[1]) : 40;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) return 1;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) { a[i] = 0.0; b[i] = 1.0; c[i] = 2.0; }
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + 0.5 * c[i];
        b[r % n] += a[(r * 7919) % n];
    }
    printf("%g\n", a[n / 2] + b[1]);
    return 0;
}
