/* Runs natively, fails under valgrind: its preloaded core library shows in the process's own
 * memory map. Exit status 3, or with the argument "crash" a segmentation fault. For the "program
 * fails (crashes) under the stream probe" cases of test_streamprobe. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "vgpreload")) {
            if (argc > 1 && !strcmp(argv[1], "crash"))
                raise(SIGSEGV);
            return 3;
        }
    return 0;
}
