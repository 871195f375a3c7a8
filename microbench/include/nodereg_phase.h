/* nodereg phase markers for C and C++ programs.
 *
 *   #include "nodereg_phase.h"
 *   NODEREG_PHASE_BEGIN("solve");
 *   ... work ...
 *   NODEREG_PHASE_END("solve");
 *
 * Under `nodereg trace` the environment variable NODEREG_PHASE_FIFO names a FIFO; each marker writes
 * one line "begin NAME T PID" / "end NAME T PID" to it, T being CLOCK_MONOTONIC seconds (the clock the
 * tracer uses, so the boundary is exact whatever the reader's latency) and PID the marking process
 * (each rank of an MPI program has its own phases' time). Outside a trace (variable unset, or
 * no reader) the macros do nothing but one getenv on first use. NAME must not contain whitespace.
 * Every line is one write(2) of less than PIPE_BUF bytes, so threads and child processes may mark
 * concurrently without interleaving. Header-only: no library to link.
 *
 * Under the PMPI library that `nodereg trace -- mpirun ...` preloads into every rank, a marker also
 * tells that library (through the weak symbol nodereg_pmpi_mark, absent otherwise) which phase the
 * rank's MPI calls belong to, so each marker phase's communication is counted call by call.
 *
 * Manual stream probes (Corredor 2011's fallback, when the author knows the phase's streams):
 *   NODEREG_PHASE_STREAM("solve", n * n, 8, 8, 'C', "seq");   // size (elements), stride (bytes),
 *                                                              // element bytes, C|P, seq|random
 * one call per stream, in the thesis's positional order; stored as the phase's phase_streams.
 *   NODEREG_PHASE_ITERATIONS("solve", n * n * n / threads);  // loop iterations of the slowest thread
 */
#ifndef NODEREG_PHASE_H
#define NODEREG_PHASE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int nodereg_phase_fd_ = -2; /* -2: not opened yet, -1: no tracer */

static inline int nodereg_phase_open_(void)
{
    if (nodereg_phase_fd_ == -2) {
        const char *path = getenv("NODEREG_PHASE_FIFO");
        nodereg_phase_fd_ = (path && *path) ? open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
    }
    return nodereg_phase_fd_;
}

static inline void nodereg_phase_send_(const char *line, int n)
{
    if (n > 0 && n < 512) {
        ssize_t written = write(nodereg_phase_fd_, line, (size_t)n);
        (void)written; /* a lost marker must never disturb the application */
    }
}

extern void nodereg_pmpi_mark(const char *verb, const char *name) __attribute__((weak));

static inline void nodereg_phase_fifo_mark_(const char *verb, const char *name)
{
    if (nodereg_phase_open_() < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[512];
    nodereg_phase_send_(line, snprintf(line, sizeof line, "%s %s %lld.%09ld %d\n", verb, name, (long long)ts.tv_sec,
                                       ts.tv_nsec, (int)getpid()));
}

/* The PMPI library's phase is the inner one: it opens after the line to the tracer is written and
 * closes before the next is, so that write (a system call that can wake the tracer and lose this
 * CPU to it) stays out of the phase's time, as it stays out of timers the program keeps inside. */
static inline void nodereg_phase_mark_(const char *verb, const char *name)
{
    int begin = verb[0] == 'b';
    if (nodereg_pmpi_mark && !begin)
        nodereg_pmpi_mark(verb, name);
    nodereg_phase_fifo_mark_(verb, name);
    if (nodereg_pmpi_mark && begin)
        nodereg_pmpi_mark(verb, name);
}

static inline void nodereg_phase_stream_(const char *name, long long size_elems, long long stride_bytes,
                                         int elem_bytes, char access, const char *pattern)
{
    if (nodereg_phase_open_() < 0)
        return;
    char line[512];
    nodereg_phase_send_(line, snprintf(line, sizeof line, "stream %s %lld %lld %d %c %s\n", name, size_elems,
                                       stride_bytes, elem_bytes, access, pattern));
}

static inline void nodereg_phase_iterations_(const char *name, double n)
{
    if (nodereg_phase_open_() < 0)
        return;
    char line[512];
    nodereg_phase_send_(line, snprintf(line, sizeof line, "iterations %s %.17g\n", name, n));
}

#define NODEREG_PHASE_BEGIN(name) nodereg_phase_mark_("begin", (name))
#define NODEREG_PHASE_END(name) nodereg_phase_mark_("end", (name))
#define NODEREG_PHASE_STREAM(name, size_elems, stride_bytes, elem_bytes, access, pattern) \
    nodereg_phase_stream_((name), (long long)(size_elems), (long long)(stride_bytes), (elem_bytes), (access), (pattern))
#define NODEREG_PHASE_ITERATIONS(name, n) nodereg_phase_iterations_((name), (double)(n))

#endif /* NODEREG_PHASE_H */
