/* nodereg phase markers for C and C++ programs.
 *
 *   #include "nodereg_phase.h"
 *   NODEREG_PHASE_BEGIN("solve");
 *   ... work ...
 *   NODEREG_PHASE_END("solve");
 *
 * Under `nodereg trace` the environment variable NODEREG_PHASE_FIFO names a FIFO; each marker writes
 * one line "begin NAME T" / "end NAME T" to it, T being CLOCK_MONOTONIC seconds (the clock the tracer
 * uses, so the boundary is exact whatever the reader's latency). Outside a trace (variable unset, or
 * no reader) the macros do nothing but one getenv on first use. NAME must not contain whitespace.
 * Every line is one write(2) of less than PIPE_BUF bytes, so threads and child processes may mark
 * concurrently without interleaving. Header-only: no library to link.
 */
#ifndef NODEREG_PHASE_H
#define NODEREG_PHASE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int nodereg_phase_fd_ = -2; /* -2: not opened yet, -1: no tracer */

static inline void nodereg_phase_mark_(const char *verb, const char *name)
{
    if (nodereg_phase_fd_ == -2) {
        const char *path = getenv("NODEREG_PHASE_FIFO");
        nodereg_phase_fd_ = (path && *path) ? open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
    }
    if (nodereg_phase_fd_ < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[512];
    int n = snprintf(line, sizeof line, "%s %s %lld.%09ld\n", verb, name, (long long)ts.tv_sec, ts.tv_nsec);
    if (n > 0 && n < (int)sizeof line) {
        ssize_t written = write(nodereg_phase_fd_, line, (size_t)n);
        (void)written; /* a lost marker must never disturb the application */
    }
}

#define NODEREG_PHASE_BEGIN(name) nodereg_phase_mark_("begin", (name))
#define NODEREG_PHASE_END(name) nodereg_phase_mark_("end", (name))

#endif /* NODEREG_PHASE_H */
