/* streamprobe: memory streams of a program, from valgrind lackey's access trace on stdin.
 *
 *   valgrind --tool=lackey --trace-mem=yes --trace-sched=yes --log-fd=N PROG ... | streamprobe [--window W --every K]
 *
 * The fallback probe, where the valgrind tool (streamtool.c) cannot be built. Lackey prints every
 * instruction ("I  addr,size") followed by its data accesses (" L|S|M addr,size"); --trace-sched
 * adds "SCHED[tid]:  acquired lock" lines when valgrind's (serialising) scheduler switches
 * threads, so each access is known to its thread. The analysis and the report are streamprobe.h's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *zalloc(size_t bytes)
{
    void *p = calloc(1, bytes);
    if (!p) {
        fprintf(stderr, "streamprobe: out of memory\n");
        exit(2);
    }
    return p;
}

#define SP_ZALLOC(bytes) zalloc(bytes)
#define SP_FREE(p) free(p)
#define SP_PRINTF(...) printf(__VA_ARGS__)
#define SP_SORT(base, n, size, cmp) qsort(base, n, size, cmp)
#define SP_WHERE(addr) "-"   /* lackey's trace has no symbols */
#include "streamprobe.h"

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
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--window"))
            sp_window = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--every"))
            sp_every = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: streamprobe [--window W] [--every K] < lackey-trace\n");
            return 2;
        }
    }
    if (!sp_window || !sp_every) {
        fprintf(stderr, "streamprobe: --window and --every must be positive\n");
        return 2;
    }
    static char line[4096];
    uint64_t iaddr = 0;
    unsigned slot = 0;
    int tid = 1;
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
            sp_record(sp_lookup((iaddr << 3) | (slot & 7)), tid, addr, size);
            slot++;
        } else {
            const char *sched = strstr(line, "SCHED[");
            if (sched && strstr(sched, "acquired lock"))
                tid = atoi(sched + 6);
        }
    }
    sp_report();
    return 0;
}
