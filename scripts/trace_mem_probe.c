/* Calibrated memory probe, candidate (a) of scripts/measure_trace_memsep.py (memory pressure without counters).
 *
 * Idea: a phase that streams memory and a phase that computes in registers both show one busy CPU
 * in /proc. A co-running probe tells them apart from the outside: every PERIOD_MS it makes a short
 * burst of memory accesses over its own buffer and times them; while the traced program streams
 * memory it competes for the shared cache and DRAM bandwidth and the probe's bursts slow down.
 * "chase" walks a random pointer chain (latency; a buffer sized to the LLC shows cache eviction),
 * "read" reads consecutive lines (bandwidth; a buffer larger than the LLC shows DRAM contention).
 * Not the default of `nodereg trace`: docs/trace.md has the measurements that decided against it.
 *
 * usage: mem_probe chase|read WS_BYTES STEPS PERIOD_MS (chase: random pointer chain; read: sequential lines)
 * Prints one line per burst: "<CLOCK_MONOTONIC seconds> <ns per step>" (line-buffered), until it
 * is killed or its parent dies. The burst is timed with the thread's CPU clock, so being preempted
 * by the traced program on a shared CPU does not read as memory pressure.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#define LINE 64

static double seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t next_random(void)
{ /* xorshift64*: reproducible chain, no libc rand() state shared with anything */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "chase") && strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: mem_probe chase|read WS_BYTES STEPS PERIOD_MS\n");
        return 2;
    }
    int chase = !strcmp(argv[1], "chase");
    size_t lines = (size_t)atoll(argv[2]) / LINE;
    long steps = atol(argv[3]);
    double period = atof(argv[4]) / 1000.0;
    if (lines < 2 || steps < 1 || period <= 0) {
        fprintf(stderr, "mem_probe: bad arguments\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    /* one pointer per cache line; Sattolo's shuffle makes a single cycle through every line */
    void **chain = aligned_alloc(4096, lines * LINE);
    size_t *order = malloc(lines * sizeof *order);
    if (!chain || !order) {
        fprintf(stderr, "mem_probe: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_random() % i;
        size_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    size_t stride = LINE / sizeof(void *);
    for (size_t i = 0; i < lines; i++)
        chain[order[i] * stride] = &chain[order[(i + 1) % lines] * stride];
    free(order);
    void **p = &chain[0];
    for (size_t i = 0; i < lines; i++) /* warm: the whole chain into the cache once */
        p = (void **)*p;

    size_t pos = 0;
    double next = seconds(CLOCK_MONOTONIC);
    for (;;) {
        double c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
        if (chase) {
            for (long s = 0; s < steps; s++)
                p = (void **)*p;
        } else {
            uintptr_t acc = 0;
            for (long s = 0; s < steps; s++) {
                acc += (uintptr_t)chain[pos * stride];
                pos = pos + 1 == lines ? 0 : pos + 1;
            }
            p = (void **)(acc | 1);
        }
        double c1 = seconds(CLOCK_THREAD_CPUTIME_ID);
        printf("%.6f %.3f\n", seconds(CLOCK_MONOTONIC), (c1 - c0) * 1e9 / steps + (p == NULL));
        fflush(stdout);
        next += period;
        double wait = next - seconds(CLOCK_MONOTONIC);
        if (wait < 0) {
            next = seconds(CLOCK_MONOTONIC);
            continue;
        }
        struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    }
}
