/* build: dynamic (symbols and a build-id kept; LD_PRELOAD works) */
/*
 * lockwork: a seed-like program for the out-of-core case study
 * (docs/objects.md): hot data touched at random, and a large log streamed
 * through, under a memory limit.
 *
 *   lockwork [ITERATIONS=400] [TOUCHES=4096] [HISTORY_MIB=192]
 *
 *   hot_table   .bss   32 MiB   random pages read and written
 *   index       heap   32 MiB   (alloc_index) random pages read and written
 *   history     heap  HISTORY_MIB (alloc_history) streamed: 8 MiB written
 *                               per iteration, wrapping around
 * Each iteration touches TOUCHES random pages of hot_table and index (with
 * the defaults, each page about every 4 iterations) and writes the next
 * 8 MiB of history (each page once per HISTORY_MIB / 8 iterations). The work is fixed, so the run time
 * is the figure: it prints
 *   ready
 *   done iterations=<n> us=<elapsed since ready>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 4096UL
#define MIB (1024UL * 1024UL)

char hot_table[32 * MIB];

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static char *checked(char *p)
{
	if (!p) {
		perror("malloc");
		exit(1);
	}
	return p;
}
__attribute__((noipa)) static char *alloc_index(void) { return checked(malloc(32 * MIB)); }
__attribute__((noipa)) static char *alloc_history(size_t mib) { return checked(malloc(mib * MIB)); }

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 400;
	int touches = argc > 2 ? atoi(argv[2]) : 4096;
	size_t hist = argc > 3 ? (size_t)atol(argv[3]) : 192;
	if (hist < 8)
		hist = 8;
	char *index = alloc_index();
	char *history = alloc_history(hist);
	memset(hot_table, 1, sizeof(hot_table));
	memset(index, 1, 32 * MIB);
	memset(history, 1, hist * MIB);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	uint64_t x = 88172645463325252ull, t0 = now_us();
	size_t cursor = 0, hot_pages = 32 * MIB / PAGE;
	for (long it = 0; it < iters; it++) {
		for (int i = 0; i < touches; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t p = (x >> 8) % hot_pages;
			char *base = (x & 1) ? hot_table : index;
			base[p * PAGE + (x & 0xff)]++;
		}
		for (size_t off = 0; off < 8 * MIB; off += PAGE)
			history[(cursor + off) % (hist * MIB)] = (char)it;
		cursor = (cursor + 8 * MIB) % (hist * MIB);
	}
	printf("done iterations=%ld us=%llu\n", iters, (unsigned long long)(now_us() - t0));
	return 0;
}
