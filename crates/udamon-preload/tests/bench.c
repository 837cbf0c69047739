/* A malloc-heavy loop for the overhead benchmark: small blocks of mixed
 * sizes with a window of live ones, like an allocation-bound program. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    static void *live[4096];
    unsigned x = 12345;
    for (long i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        unsigned k = (x >> 8) % 4096;
        free(live[k]);
        live[k] = malloc(16 + (x >> 20) % 496);
        if (live[k])
            *(char *)live[k] = 1;
    }
    for (int k = 0; k < 4096; k++)
        free(live[k]);
    puts("done");
    return 0;
}
