/* streamprobe: memory streams of a program, from valgrind lackey's access trace on stdin.
 *
 *   valgrind --tool=lackey --trace-mem=yes --trace-sched=yes --log-fd=N PROG ... | streamprobe [--window W --every K]
 *
 * Corredor (2011)'s probe: the local stride of an instruction is the difference between the
 * addresses it touches one after the other (in one thread). Lackey prints every instruction
 * ("I  addr,size") followed by its data accesses (" L|S|M addr,size"); --trace-sched adds
 * "SCHED[tid]:  acquired lock" lines when valgrind's (serialising) scheduler switches threads, so
 * each access is known to its thread. Per (instruction, access slot): per-thread last address,
 * access count and range, a Misra-Gries summary of the strides (the dominant one survives) and
 * the mean absolute stride. Instructions whose ranges overlap are one stream (one array touched
 * by several instructions: an initialisation loop and the kernel, an unrolled body).
 *
 * Sampling: with --every K > 1 only one window of W accesses in every K*W is recorded (strides
 * restart at each window), counts are scaled by K. Default: every access.
 *
 * Output (stdout, one record per line, tab-separated):
 *   total  ACCESSES  THREADS  KEYS  EVERY
 *   stream SIZE_BYTES STRIDE ELEM ACCESS(C|P) PATTERN(seq|random) ACCESSES ITERATIONS SEQ_SHARE LO HI
 * SIZE_BYTES: bytes spanned (C: by all threads; P: by the busiest thread's part); ITERATIONS:
 * accesses of the stream's busiest instruction in its busiest thread (the slowest thread's loop).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 16          /* threads told apart; valgrind tid t counts as t % MAXT */
#define SLOTS 4          /* Misra-Gries stride candidates per instruction */
#define MIN_SPAN 4096    /* bytes: narrower access sequences are scalars and stack frames, not streams */
#define RANDOM_STEP 64   /* bytes: a random stream touches at least one line in this many per access, about */
#define MIN_SHARE 2e-3   /* of all accesses: rarer instructions (start-up, libc) are not a phase's streams */

struct key {
    uint64_t id;                       /* (instruction address << 3) | access slot; 0 = empty */
    uint64_t last[MAXT], lo[MAXT], hi[MAXT], count[MAXT];
    int64_t stride[SLOTS];
    uint64_t weight[SLOTS];
    uint64_t strided;                  /* stride observations */
    double abs_sum;                    /* sum of |stride| */
    unsigned elem;
};

static struct key *table;
static size_t cap = 1 << 16, used;

static struct key *lookup(uint64_t id);

static void grow(void)
{
    struct key *old = table;
    size_t oldcap = cap;
    cap *= 2;
    table = calloc(cap, sizeof *table);
    if (!table) {
        fprintf(stderr, "streamprobe: out of memory\n");
        exit(2);
    }
    used = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].id) {
            struct key *k = lookup(old[i].id);
            *k = old[i];
        }
    free(old);
}

static struct key *lookup(uint64_t id)
{
    if (2 * (used + 1) > cap)
        grow();
    size_t i = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
    while (table[i].id && table[i].id != id)
        i = (i + 1) & (cap - 1);
    if (!table[i].id) {
        table[i].id = id;
        for (int t = 0; t < MAXT; t++)
            table[i].lo[t] = UINT64_MAX;
        used++;
    }
    return &table[i];
}

static void observe(struct key *k, int tid, uint64_t addr, unsigned size)
{
    if (!k->elem)
        k->elem = size;
    if (k->last[tid]) {
        int64_t d = (int64_t)(addr - k->last[tid]);
        k->strided++;
        k->abs_sum += d < 0 ? -(double)d : (double)d;
        int hit = -1, free_slot = -1;
        for (int s = 0; s < SLOTS; s++) {
            if (k->weight[s] && k->stride[s] == d)
                hit = s;
            else if (!k->weight[s] && free_slot < 0)
                free_slot = s;
        }
        if (hit >= 0)
            k->weight[hit]++;
        else if (free_slot >= 0) {
            k->stride[free_slot] = d;
            k->weight[free_slot] = 1;
        } else
            for (int s = 0; s < SLOTS; s++)
                k->weight[s]--;
    }
    k->last[tid] = addr;
    k->count[tid]++;
    if (addr < k->lo[tid])
        k->lo[tid] = addr;
    if (addr + size > k->hi[tid])
        k->hi[tid] = addr + size;
}

/* ---- streams: instructions grouped by overlapping ranges ---- */

struct stream {
    uint64_t lo, hi, accesses, iterations, strided, seq;
    uint64_t tlo[MAXT], thi[MAXT], tcount[MAXT];
    uint64_t top;                      /* accesses of the busiest instruction so far */
    int top_parallel;                  /* ... and whether it ran in >= 2 threads (preferred) */
    int64_t stride;
    double abs_sum;
    unsigned elem;
    int parallel;                      /* some instruction ran in >= 2 threads */
};

static uint64_t key_lo(const struct key *k)
{
    uint64_t lo = UINT64_MAX;
    for (int t = 0; t < MAXT; t++)
        if (k->lo[t] < lo)
            lo = k->lo[t];
    return lo;
}

static uint64_t key_hi(const struct key *k)
{
    uint64_t hi = 0;
    for (int t = 0; t < MAXT; t++)
        if (k->hi[t] > hi)
            hi = k->hi[t];
    return hi;
}

static uint64_t key_total(const struct key *k)
{
    uint64_t n = 0;
    for (int t = 0; t < MAXT; t++)
        n += k->count[t];
    return n;
}

static int dominant(const struct key *k)
{
    int best = 0;
    for (int s = 1; s < SLOTS; s++)
        if (k->weight[s] > k->weight[best])
            best = s;
    return best;
}

static int by_lo(const void *a, const void *b)
{
    uint64_t x = key_lo(*(struct key *const *)a), y = key_lo(*(struct key *const *)b);
    return x < y ? -1 : x > y;
}

static void add_key(struct stream *s, const struct key *k)
{
    uint64_t n = key_total(k), busiest = 0;
    int threads = 0, d = dominant(k);
    for (int t = 0; t < MAXT; t++) {
        if (!k->count[t])
            continue;
        threads++;
        if (k->count[t] > busiest)
            busiest = k->count[t];
    }
    /* the busiest instruction (of the parallel ones, if any) sets element size, stride, iterations */
    if ((threads >= 2 && !s->top_parallel) || ((threads >= 2) == s->top_parallel && n > s->top)) {
        s->top = n;
        s->top_parallel = threads >= 2;
        s->elem = k->elem;
        s->stride = k->stride[d];
        s->iterations = busiest;
    }
    s->accesses += n;
    s->strided += k->strided;
    s->seq += k->weight[d];
    s->abs_sum += k->abs_sum;
    if (threads >= 2 && !s->parallel) {  /* sharing is judged on parallel code only */
        s->parallel = 1;
        memset(s->tcount, 0, sizeof s->tcount);
        memset(s->thi, 0, sizeof s->thi);
    }
    if (threads >= 2 || !s->parallel)
        for (int t = 0; t < MAXT; t++) {
            if (!k->count[t])
                continue;
            if (!s->tcount[t] || k->lo[t] < s->tlo[t])
                s->tlo[t] = k->lo[t];
            if (k->hi[t] > s->thi[t])
                s->thi[t] = k->hi[t];
            s->tcount[t] += k->count[t];
        }
}

/* C when the threads' ranges overlap over at least half of the narrower one; the size of a P
 * stream is the busiest thread's part (as the registry's microbenchmarks count private streams). */
static void emit(const struct stream *s, uint64_t every)
{
    int threads = 0, shared = 1;
    uint64_t part = 0, busiest = 0;
    for (int t = 0; t < MAXT; t++) {
        if (!s->tcount[t])
            continue;
        threads++;
        if (s->tcount[t] > busiest) {
            busiest = s->tcount[t];
            part = s->thi[t] - s->tlo[t];
        }
        for (int u = 0; u < t; u++) {
            if (!s->tcount[u])
                continue;
            uint64_t lo = s->tlo[t] > s->tlo[u] ? s->tlo[t] : s->tlo[u];
            uint64_t hi = s->thi[t] < s->thi[u] ? s->thi[t] : s->thi[u];
            uint64_t a = s->thi[t] - s->tlo[t], b = s->thi[u] - s->tlo[u];
            uint64_t narrow = a < b ? a : b;
            if (hi <= lo || 2 * (hi - lo) < narrow)
                shared = 0;
        }
    }
    int parallel = s->parallel && threads >= 2;
    double seq_share = s->strided ? (double)s->seq / (double)s->strided : 1.0;
    int sequential = seq_share >= 0.5;
    int64_t stride = s->stride < 0 ? -s->stride : s->stride;
    if (!sequential && s->strided)
        stride = (int64_t)(s->abs_sum / (double)s->strided + 0.5);
    printf("stream\t%" PRIu64 "\t%" PRId64 "\t%u\t%c\t%s\t%" PRIu64 "\t%" PRIu64 "\t%.4f\t%" PRIu64 "\t%" PRIu64 "\n",
           parallel && !shared ? part : s->hi - s->lo, stride, s->elem, parallel && !shared ? 'P' : 'C',
           sequential ? "seq" : "random", s->accesses * every, s->iterations * every, seq_share, s->lo, s->hi);
}

/* An instruction that is a stream: frequent, spanning more than a few elements, not one address
 * over and over; when its strides are regular, its range must be one its steps can cover (a
 * generic routine jumping between the stack and the heap spans a huge, sparse range). */
static int is_stream(const struct key *k, uint64_t accesses)
{
    uint64_t span = key_hi(k) - key_lo(k), n = key_total(k);
    int d = dominant(k);
    int64_t step = k->stride[d] < 0 ? -k->stride[d] : k->stride[d];
    if (!k->strided || span < MIN_SPAN || (double)n < MIN_SHARE * (double)accesses)
        return 0;
    if (k->weight[d] && step == 0)
        return 0;
    if (2 * k->weight[d] < k->strided)
        step = RANDOM_STEP;
    if ((double)span > 2.0 * (double)n * (double)step + MIN_SPAN)
        return 0;
    return 1;
}

static void report(uint64_t accesses, int threads, uint64_t every)
{
    struct key **keys = malloc((used + 1) * sizeof *keys);
    size_t n = 0;
    for (size_t i = 0; i < cap; i++)
        if (table[i].id && is_stream(&table[i], accesses))
            keys[n++] = &table[i];
    qsort(keys, n, sizeof *keys, by_lo);
    printf("total\t%" PRIu64 "\t%d\t%zu\t%" PRIu64 "\n", accesses * every, threads, used, every);
    struct stream s;
    for (size_t i = 0; i < n;) {
        memset(&s, 0, sizeof s);
        s.lo = key_lo(keys[i]);
        s.hi = key_hi(keys[i]);
        for (; i < n && key_lo(keys[i]) < s.hi; i++) {
            add_key(&s, keys[i]);
            if (key_hi(keys[i]) > s.hi)
                s.hi = key_hi(keys[i]);
        }
        emit(&s, every);
    }
    free(keys);
}

static uint64_t hex(const char **p)
{
    uint64_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uint64_t)(c - 'a' + 10);
        else
            return v;
    }
}

int main(int argc, char **argv)
{
    uint64_t window = 1 << 20, every = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--window"))
            window = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--every"))
            every = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: streamprobe [--window W] [--every K] < lackey-trace\n");
            return 2;
        }
    }
    if (!window || !every) {
        fprintf(stderr, "streamprobe: --window and --every must be positive\n");
        return 2;
    }
    table = calloc(cap, sizeof *table);
    static char line[4096];
    uint64_t iaddr = 0, accesses = 0, seen = 0;
    unsigned slot = 0;
    int tid = 1, threads = 1, recording = 1;
    while (fgets(line, sizeof line, stdin)) {
        const char *p = line;
        if (p[0] == 'I') {
            p += 3;
            iaddr = hex(&p);
            slot = 0;
        } else if (p[0] == ' ' && (p[1] == 'L' || p[1] == 'S' || p[1] == 'M')) {
            p += 3;
            uint64_t addr = hex(&p);
            unsigned size = *p == ',' ? (unsigned)strtoul(p + 1, NULL, 10) : 1;
            if (every > 1 && seen++ % window == 0) {
                recording = (seen / window) % every == 0;
                if (recording)  /* a new window: strides restart */
                    for (size_t i = 0; i < cap; i++)
                        memset(table[i].last, 0, sizeof table[i].last);
            }
            if (recording) {
                observe(lookup((iaddr << 3) | (slot & 7)), tid % MAXT, addr, size);
                accesses++;
            }
            slot++;
        } else {
            const char *sched = strstr(line, "SCHED[");
            if (sched && strstr(sched, "acquired lock")) {
                tid = atoi(sched + 6);
                if (tid > threads)
                    threads = tid;
            }
        }
    }
    report(accesses, threads, every);
    return 0;
}
