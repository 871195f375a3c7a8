/* One array read by 1024 copies of the same loop, each its own load instruction: a stream spread
 * over so many instructions that none has 0.2% of the accesses, as in NPB BT's solver. Its stream:
 * N doubles, stride 8, read by one thread. Usage: spread N. Built by tests/test_streamprobe.py. */
#include <stdio.h>
#include <stdlib.h>

#define LOOP for (long i = 0; i < n; i++) s += a[i];
#define X4(x) x x x x

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4096;
    double *a = malloc(n * sizeof *a), s = 0;
    if (!a)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = (double)i;
    X4(X4(X4(X4(X4(LOOP)))))
    printf("%g\n", s);
    return 0;
}
