/* LD_PRELOAD shim timing every GCC OpenMP parallel region (libgomp's GOMP_parallel entry points).
 *
 * Why: the thesis's phases are OpenMP fork-join regions; a region's time is its slowest thread's.
 * The shim wraps the outlined function the compiler passes to GOMP_parallel in a trampoline that
 * times each thread, and records per region: the outlined function (address, load base, object and
 * dynamic symbol from dladdr; nodereg resolves local symbols such as main._omp_fn.0 from the ELF
 * symbol table), the region's wall time, the slowest thread's time and the thread count.
 *
 * Consecutive calls of one function separated by less than NODEREG_GOMP_GAP_MS (default 10 ms) are
 * merged into one record (calls, summed times), so a time-stepping loop writes a few lines, not
 * millions. Records go to the file named by NODEREG_GOMP_OUT (appended, one write(2) per line, so
 * forked processes may share it) when a record closes and at exit. Times are CLOCK_MONOTONIC ns.
 *
 * Line format (tab-separated):
 *   R pid addr base calls start_ns end_ns wall_ns slowest_ns thread_ns max_threads symbol object
 * Nested regions pass through untimed (they are part of their outer region).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*omp_fn_t)(void *);

struct tramp {
    omp_fn_t fn;
    void *data;
    atomic_llong slowest_ns;
    atomic_llong thread_ns;
    atomic_int threads;
};

struct record {
    omp_fn_t fn;
    long long calls, start_ns, end_ns, wall_ns, slowest_ns, thread_ns;
    int max_threads;
};

#define OPEN_RECORDS 64
static struct record open_records[OPEN_RECORDS];
static int n_open;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth;
static long long gap_ns = -1;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *real_symbol(const char *name)
{
    void *sym = dlsym(RTLD_NEXT, name);
    if (!sym) {
        fprintf(stderr, "nodereg gomp shim: %s not found in libgomp\n", name);
        abort();
    }
    return sym;
}

static void trampoline(void *arg)
{
    struct tramp *t = arg;
    depth++;
    long long t0 = now_ns();
    t->fn(t->data);
    long long d = now_ns() - t0;
    depth--;
    atomic_fetch_add(&t->thread_ns, d);
    atomic_fetch_add(&t->threads, 1);
    long long prev = atomic_load(&t->slowest_ns);
    while (d > prev && !atomic_compare_exchange_weak(&t->slowest_ns, &prev, d)) {
    }
}

static void write_record(const struct record *r)
{
    const char *path = getenv("NODEREG_GOMP_OUT");
    if (!path || !*path)
        return;
    Dl_info info;
    memset(&info, 0, sizeof info);
    dladdr((void *)r->fn, &info);
    char line[4096];
    int n = snprintf(line, sizeof line, "R\t%d\t%lu\t%lu\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%d\t%s\t%s\n",
                     (int)getpid(), (unsigned long)r->fn, (unsigned long)info.dli_fbase, r->calls, r->start_ns,
                     r->end_ns, r->wall_ns, r->slowest_ns, r->thread_ns, r->max_threads,
                     info.dli_sname ? info.dli_sname : "-", info.dli_fname ? info.dli_fname : "-");
    if (n <= 0 || n >= (int)sizeof line)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

static void add_region(omp_fn_t fn, long long start, long long end, struct tramp *t)
{
    pthread_mutex_lock(&lock);
    if (gap_ns < 0) {
        const char *g = getenv("NODEREG_GOMP_GAP_MS");
        gap_ns = (long long)((g && *g ? atof(g) : 10.0) * 1e6);
    }
    struct record *r = NULL;
    for (int i = 0; i < n_open; i++)
        if (open_records[i].fn == fn) {
            r = &open_records[i];
            break;
        }
    if (r && start - r->end_ns > gap_ns) {
        write_record(r);
        r->calls = 0;
    }
    if (!r) {
        if (n_open == OPEN_RECORDS) { /* evict the record that ended longest ago */
            int oldest = 0;
            for (int i = 1; i < n_open; i++)
                if (open_records[i].end_ns < open_records[oldest].end_ns)
                    oldest = i;
            write_record(&open_records[oldest]);
            open_records[oldest] = open_records[--n_open];
        }
        r = &open_records[n_open++];
        memset(r, 0, sizeof *r);
        r->fn = fn;
    }
    if (r->calls == 0) {
        r->start_ns = start;
        r->wall_ns = r->slowest_ns = r->thread_ns = 0;
        r->max_threads = 0;
    }
    r->calls++;
    r->end_ns = end;
    r->wall_ns += end - start;
    r->slowest_ns += atomic_load(&t->slowest_ns);
    r->thread_ns += atomic_load(&t->thread_ns);
    int threads = atomic_load(&t->threads);
    if (threads > r->max_threads)
        r->max_threads = threads;
    pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void flush_all(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_open; i++)
        if (open_records[i].calls)
            write_record(&open_records[i]);
    n_open = 0;
    pthread_mutex_unlock(&lock);
}

/* Each wrapper: pass nested regions through; time outer ones around the real entry point. */
#define TIMED_REGION(CALL_REAL)                                                                    \
    if (depth > 0) {                                                                               \
        omp_fn_t call_fn = fn;                                                                     \
        void *call_data = data;                                                                    \
        CALL_REAL;                                                                                 \
        return;                                                                                    \
    }                                                                                              \
    struct tramp t = {fn, data, 0, 0, 0};                                                          \
    omp_fn_t call_fn = trampoline;                                                                 \
    void *call_data = &t;                                                                          \
    long long start = now_ns();                                                                    \
    CALL_REAL;                                                                                     \
    add_region(fn, start, now_ns(), &t);

void GOMP_parallel(omp_fn_t fn, void *data, unsigned num_threads, unsigned flags)
{
    static void (*real)(omp_fn_t, void *, unsigned, unsigned);
    if (!real)
        real = real_symbol("GOMP_parallel");
    TIMED_REGION(real(call_fn, call_data, num_threads, flags))
}

#define LOOP_WRAPPER(NAME)                                                                         \
    void NAME(omp_fn_t fn, void *data, unsigned num_threads, long lo, long hi, long incr, long chunk, \
              unsigned flags)                                                                      \
    {                                                                                              \
        static void (*real)(omp_fn_t, void *, unsigned, long, long, long, long, unsigned);        \
        if (!real)                                                                                 \
            real = real_symbol(#NAME);                                                             \
        TIMED_REGION(real(call_fn, call_data, num_threads, lo, hi, incr, chunk, flags))           \
    }

LOOP_WRAPPER(GOMP_parallel_loop_static)
LOOP_WRAPPER(GOMP_parallel_loop_dynamic)
LOOP_WRAPPER(GOMP_parallel_loop_guided)

void GOMP_parallel_loop_runtime(omp_fn_t fn, void *data, unsigned num_threads, long lo, long hi, long incr,
                                unsigned flags)
{
    static void (*real)(omp_fn_t, void *, unsigned, long, long, long, unsigned);
    if (!real)
        real = real_symbol("GOMP_parallel_loop_runtime");
    TIMED_REGION(real(call_fn, call_data, num_threads, lo, hi, incr, flags))
}

void GOMP_parallel_sections(omp_fn_t fn, void *data, unsigned num_threads, unsigned count, unsigned flags)
{
    static void (*real)(omp_fn_t, void *, unsigned, unsigned, unsigned);
    if (!real)
        real = real_symbol("GOMP_parallel_sections");
    TIMED_REGION(real(call_fn, call_data, num_threads, count, flags))
}
