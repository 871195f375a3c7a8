/* Runs natively, fails (exit status 3) under valgrind: its preloaded core library shows in the
 * process's own memory map. For the "program fails under the stream probe" case of test_streamprobe. */
#include <stdio.h>
#include <string.h>

int main(void)
{
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "vgpreload"))
            return 3;
    return 0;
}
