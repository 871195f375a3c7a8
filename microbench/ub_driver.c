/* nodereg microbenchmark driver: runs kernel configurations read from stdin.
 *
 * Protocol (one line in, one JSON line out):
 *   run id=7 kernel=stream op=sum dtype=f64 threads=2 cpus=0,1 reps=5 target=0.003
 *       a.n=4096 a.stride=8 a.access=C a.pattern=seq [b.n=... b.stride=... ...]
 *   run id=8 kernel=triad threads=1 cpus=0 n=1048576 nt=1 reps=5
 *   run id=9 kernel=gemm threads=2 cpus=0,1 n=1024 reps=5      (n: the matrices' side N)
 *   more reps=3        (more repetitions of the last configuration, same passes)
 *   info               (what the build is: vector width, FMA flavour)
 * Keys: passes=N fixes the passes per repetition (else calibrated so one repetition takes at
 * least `target` seconds); line=BYTES is the pointer-chase element size; verify=0 skips the
 * kernel's verification walk (the chase's walk of its whole cycle: 1.4 s at 512 MiB), for runs
 * that only prepare a configuration already verified (the signature windows). warmup=N: the passes
 * of the untimed repetition that fixed passes run first (default: passes; a signature window, which
 * times nothing, needs only the threads started and the data in place). reps=0 prepares and
 * calibrates only (times []), for `more` to repeat.
 *
 * Per configuration: every thread pins itself to its CPU, the kernel prepares its data (first
 * touch by the threads that use it), calibration runs double as warm-up (the last one runs at
 * the final pass count; with fixed passes one untimed repetition is run instead), then `reps`
 * timed repetitions. A repetition's time is that of its slowest
 * thread (each thread times its own work after a barrier, as in Corredor 2011); `iters` are
 * that thread's loop iterations. Reply:
 *   {"id":7,"ok":true,"kernel":"stream","threads":2,"passes":P,"iters":I,"times":[...],
 *    "checksum":X,"bytes":B,"flops":F,"cpus":[0,1]}
 * where bytes and flops are per repetition (all threads) and cpus are the CPUs the threads ran
 * on (sched_getcpu at the end of the last repetition). Errors: {"id":7,"ok":false,"error":"..."}.
 * The driver exits at end of input, and (on Linux) when its parent dies.
 */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "ub.h"

static const struct ub_kernel *const kernels[] = {
    &ub_stream_kernel, &ub_copy_kernel,  &ub_scale_kernel,    &ub_add_kernel,         &ub_triad_kernel, &ub_load_kernel,
    &ub_store_kernel,  &ub_chase_kernel, &ub_peak_fma_kernel, &ub_scalar_fp64_kernel, &ub_int_kernel,
    &ub_int_branch_kernel, &ub_fp_chain_kernel, &ub_gemm_kernel,
};

static struct ub_thread_result results[UB_MAX_THREADS];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pin(const struct ub_config *c, int tid)
{
#if defined(__linux__)
    if (!c->n_cpus)
        return;
    if (c->cpus[tid] < 0 || c->cpus[tid] >= CPU_SETSIZE) {
        ub_fail("CPU number out of range");
        return;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c->cpus[tid], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "cannot pin a thread to CPU %d", c->cpus[tid]);
        ub_fail(msg);
    }
#else
    (void)c;
    (void)tid;
#endif
}

static int current_cpu(void)
{
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

/* ---- parsing ---- */

static int parse_enum(const char *v, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    return -1;
}

static const char *parse_cpus(struct ub_config *c, char *v)
{
    c->n_cpus = 0;
    for (char *tok = strtok(v, ","); tok; tok = strtok(NULL, ",")) {
        if (c->n_cpus >= UB_MAX_THREADS)
            return "too many CPUs";
        c->cpus[c->n_cpus++] = atoi(tok);
    }
    return NULL;
}

static const char *parse_stream_key(struct ub_config *c, int i, const char *key, const char *v)
{
    static const char *const access[] = {"C", "P"}, *const pattern[] = {"seq", "random"};
    struct ub_stream *s = &c->s[i];
    if (i + 1 > c->ns)
        c->ns = i + 1;
    if (strcmp(key, "n") == 0)
        s->n = atol(v);
    else if (strcmp(key, "stride") == 0)
        s->stride = atol(v);
    else if (strcmp(key, "access") == 0) {
        int e = parse_enum(v, access, 2);
        if (e < 0)
            return "access must be C or P";
        s->access = (enum ub_access)e;
    } else if (strcmp(key, "pattern") == 0) {
        int e = parse_enum(v, pattern, 2);
        if (e < 0)
            return "pattern must be seq or random";
        s->pattern = (enum ub_pattern)e;
    } else
        return "unknown stream key";
    return NULL;
}

static const char *parse_config(char *args, struct ub_config *c)
{
    static const char *const ops[] = {"sum", "prod", "sum4", "add", "mul"}, *const dtypes[] = {"f64", "f32"};
    memset(c, 0, sizeof *c);
    c->threads = 1;
    c->reps = 5;
    c->target_s = 0.002;
    c->line = 64;
    c->verify = 1;
    char *save = NULL;
    for (char *tok = strtok_r(args, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return "expected key=value";
        *eq = 0;
        const char *key = tok;
        char *v = eq + 1;
        const char *err = NULL;
        if (strcmp(key, "id") == 0)
            c->id = atol(v);
        else if (strcmp(key, "kernel") == 0)
            snprintf(c->kernel, sizeof c->kernel, "%s", v);
        else if (strcmp(key, "op") == 0) {
            int e = parse_enum(v, ops, 5);
            if (e < 0)
                return "unknown op";
            c->op = (enum ub_op)e;
        } else if (strcmp(key, "dtype") == 0) {
            int e = parse_enum(v, dtypes, 2);
            if (e < 0)
                return "dtype must be f64 or f32";
            c->dtype = (enum ub_dtype)e;
        } else if (strcmp(key, "threads") == 0)
            c->threads = atoi(v);
        else if (strcmp(key, "cpus") == 0)
            err = parse_cpus(c, v);
        else if (strcmp(key, "reps") == 0)
            c->reps = atoi(v);
        else if (strcmp(key, "target") == 0)
            c->target_s = atof(v);
        else if (strcmp(key, "passes") == 0)
            c->passes = atol(v);
        else if (strcmp(key, "warmup") == 0)
            c->warmup = atol(v);
        else if (strcmp(key, "n") == 0)
            c->n = atol(v);
        else if (strcmp(key, "nt") == 0)
            c->nt = atoi(v);
        else if (strcmp(key, "line") == 0)
            c->line = atoi(v);
        else if (strcmp(key, "verify") == 0)
            c->verify = atoi(v);
        else if ((key[0] == 'a' || key[0] == 'b') && key[1] == '.')
            err = parse_stream_key(c, key[0] - 'a', key + 2, v);
        else
            return "unknown key";
        if (err)
            return err;
    }
    for (int i = 0; i < c->ns; i++)
        c->s[i].dtype = c->dtype;
    if (c->threads < 1 || c->threads > UB_MAX_THREADS)
        return "threads out of range";
    if (c->n_cpus && c->n_cpus != c->threads)
        return "cpus must list one CPU per thread";
    if (c->reps < 0)
        return "reps must not be negative";
    return NULL;
}

/* ---- running ---- */

static const struct ub_kernel *find_kernel(const char *name)
{
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(kernels[i]->name, name) == 0)
            return kernels[i];
    return NULL;
}

static void prepare(const struct ub_kernel *k, const struct ub_config *c)
{
#pragma omp parallel num_threads(c->threads)
    {
        int tid = omp_get_thread_num();
        pin(c, tid);
        k->prepare(c, tid);
    }
}

/* One repetition: returns the slowest thread's time and its index in *slowest. */
static double repetition(const struct ub_kernel *k, const struct ub_config *c, long passes, int *slowest)
{
    int team = 0;
#pragma omp parallel num_threads(c->threads)
    {
        int tid = omp_get_thread_num();
        if (tid == 0)
            team = omp_get_num_threads();
        pin(c, tid);
#pragma omp barrier
        double t0 = now();
        k->run(c, tid, passes, &results[tid]);
        results[tid].seconds = now() - t0;
        results[tid].cpu = current_cpu();
    }
    if (team != c->threads)
        ub_fail("the OpenMP runtime gave fewer threads than asked (check OMP_THREAD_LIMIT)");
    int worst = 0;
    for (int t = 1; t < c->threads; t++)
        if (results[t].seconds > results[worst].seconds)
            worst = t;
    *slowest = worst;
    return results[worst].seconds;
}

static long calibrate(const struct ub_kernel *k, const struct ub_config *c)
{
    long passes = 1;
    int slowest;
    for (;;) {
        double t = repetition(k, c, passes, &slowest);
        if (ub_error() || t >= c->target_s || passes > (1L << 40))
            return passes;
        double grow = c->target_s / (t > 1e-9 ? t : 1e-9) * 1.2;
        long next = (long)((double)passes * (grow < 1000.0 ? grow : 1000.0));
        passes = next > passes ? next : passes * 2;
    }
}

static void print_error(long id, const char *msg)
{
    printf("{\"id\":%ld,\"ok\":false,\"error\":\"", id);
    for (const char *p = msg; *p; p++)
        putchar(*p == '"' || *p == '\\' ? '\'' : *p);
    printf("\"}\n");
}

static void print_number(double v)
{
    if (isfinite(v))
        printf("%.17g", v);
    else
        printf("null");
}

static void print_times(const double *times, int reps)
{
    printf("\"times\":[");
    for (int r = 0; r < reps; r++)
        printf(r ? ",%.9e" : "%.9e", times[r]);
    printf("]");
}

/* The configuration `more` repeats. */
static struct ub_config current;
static const struct ub_kernel *current_kernel;
static long current_passes;

static void timed_reps(int reps, double *times, long *iters)
{
    int slowest = 0;
    for (int r = 0; r < reps && !ub_error(); r++) {
        times[r] = repetition(current_kernel, &current, current_passes, &slowest);
        *iters = results[slowest].iterations;
    }
}

static void cmd_run(char *args)
{
    static struct ub_config c;
    const char *err = parse_config(args, &c);
    current_kernel = NULL;
    if (err) {
        print_error(c.id, err);
        return;
    }
    const struct ub_kernel *k = find_kernel(c.kernel);
    if (!k) {
        print_error(c.id, "unknown kernel");
        return;
    }
    if ((err = k->check(&c))) {
        print_error(c.id, err);
        return;
    }
    ub_clear_error();
    prepare(k, &c);
    current = c;
    current_kernel = k;
    /* calibration ends with a repetition at the final pass count: that is the warm-up */
    long passes = c.passes > 0 ? c.passes : calibrate(k, &c);
    int slowest;
    if (c.passes > 0 && !ub_error())
        repetition(k, &c, c.warmup > 0 ? c.warmup : passes, &slowest); /* warm-up */
    current_passes = passes;
    double *times = calloc((size_t)c.reps + 1, sizeof(double)); /* reps=0: prepare and calibrate only */
    long iters = 0;
    if (!times) {
        print_error(c.id, "out of memory");
        return;
    }
    timed_reps(c.reps, times, &iters);
    if (ub_error()) {
        print_error(c.id, ub_error());
        current_kernel = NULL;
        free(times);
        return;
    }
    double checksum = 0;
    if (k->verify && c.verify)
        checksum = k->verify(&c);
    else
        for (int t = 0; t < c.threads; t++)
            checksum += results[t].checksum;
    printf("{\"id\":%ld,\"ok\":true,\"kernel\":\"%s\",\"threads\":%d,\"passes\":%ld,\"iters\":%ld,", c.id, k->name,
           c.threads, passes, iters);
    print_times(times, c.reps);
    printf(",\"checksum\":");
    print_number(checksum);
    printf(",\"bytes\":");
    print_number(k->bytes_per_pass(&c) * (double)passes);
    printf(",\"flops\":");
    print_number(k->flops_per_pass(&c) * (double)passes);
    printf(",\"cpus\":[");
    for (int t = 0; t < c.threads; t++)
        printf(t ? ",%d" : "%d", results[t].cpu);
    printf("]}\n");
    free(times);
}

static void cmd_more(char *args)
{
    int reps = 0;
    if (sscanf(args, " reps=%d", &reps) != 1 || reps < 1) {
        print_error(-1, "more: expected reps=N");
        return;
    }
    if (!current_kernel) {
        print_error(-1, "more: no configuration has run");
        return;
    }
    double *times = calloc((size_t)reps, sizeof(double));
    long iters = 0;
    if (!times) {
        print_error(current.id, "out of memory");
        return;
    }
    ub_clear_error();
    timed_reps(reps, times, &iters);
    if (ub_error())
        print_error(current.id, ub_error());
    else {
        printf("{\"id\":%ld,\"ok\":true,", current.id);
        print_times(times, reps);
        printf("}\n");
    }
    free(times);
}

static void cmd_info(void)
{
    printf("{\"ok\":true,\"vector_bytes\":%d,\"fma\":\"%s\",\"fma_lanes\":%d,\"fma_chains\":%d,\"openmp\":%d,"
           "\"max_threads\":%d}\n",
           UB_VBYTES, ub_fma_kind(), ub_fma_lanes(), ub_fma_chains(), _OPENMP, UB_MAX_THREADS);
}

int main(void)
{
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    setvbuf(stdout, NULL, _IOLBF, 0);
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        char *args = line + strcspn(line, " \t\n");
        if (*args)
            *args++ = 0;
        if (strcmp(line, "run") == 0)
            cmd_run(args);
        else if (strcmp(line, "more") == 0)
            cmd_more(args);
        else if (strcmp(line, "info") == 0)
            cmd_info();
        else if (strcmp(line, "quit") == 0)
            break;
        else if (line[0])
            print_error(-1, "unknown command");
        fflush(stdout);
    }
    return 0;
}
