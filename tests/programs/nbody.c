/* All-pairs n-body steps over N bodies (the thesis's N-Body kind): every thread reads every body's
 * position and mass (shared streams, x y z m interleaved: stride 32 B) and updates its own bodies'
 * velocities (private). Usage: nbody N STEPS. Traced by scripts/eval_corredor_probe.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct body { double x, y, z, m; };

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000, steps = argc > 2 ? atol(argv[2]) : 2;
    struct body *p = malloc(n * sizeof *p);
    double *v = calloc(3 * n, sizeof *v);
    if (!p || !v)
        return 1;
    for (long i = 0; i < n; i++)
        p[i] = (struct body){(double)(i % 17), (double)(i % 13), (double)(i % 11), 1.0 + (double)(i % 3)};
    for (long s = 0; s < steps; s++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) {
            double ax = 0, ay = 0, az = 0;
            for (long j = 0; j < n; j++) {
                double dx = p[j].x - p[i].x, dy = p[j].y - p[i].y, dz = p[j].z - p[i].z;
                double r2 = dx * dx + dy * dy + dz * dz + 1e-3, w = p[j].m / (r2 * sqrt(r2));
                ax += dx * w;
                ay += dy * w;
                az += dz * w;
            }
            v[3 * i] += 0.01 * ax;
            v[3 * i + 1] += 0.01 * ay;
            v[3 * i + 2] += 0.01 * az;
        }
        for (long i = 0; i < n; i++) {
            p[i].x += 0.01 * v[3 * i];
            p[i].y += 0.01 * v[3 * i + 1];
            p[i].z += 0.01 * v[3 * i + 2];
        }
    }
    printf("%g\n", p[n - 1].x);
    return 0;
}
