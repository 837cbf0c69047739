/*
 * sparse_hot: a small hot object in a large, mostly unpopulated
 * reservation (a JVM heap, an allocator arena, a guest's memory).
 *
 *   sparse_hot [RESERVE_GIB=64] [RESIDENT_MIB=256] [HOT_MIB=4] [PERIOD_MS=20]
 *
 * Reserves RESERVE_GIB GiB (MAP_NORESERVE, MADV_NOHUGEPAGE), populates
 * RESIDENT_MIB MiB of it in the middle, and then writes one byte of every
 * page of the HOT_MIB MiB in the middle of that every PERIOD_MS
 * milliseconds, forever; the rest is never touched again.
 *
 * Output:
 *   range 0x<start> 0x<end>      the reservation
 *   resident 0x<start> 0x<end>   the populated part
 *   hot 0x<start> 0x<end>        the hot object
 *   ready pid=<pid>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int main(int argc, char **argv)
{
	size_t reserve = (argc > 1 ? strtoul(argv[1], NULL, 0) : 64) << 30;
	size_t resident = (argc > 2 ? strtoul(argv[2], NULL, 0) : 256) << 20;
	size_t hot = (argc > 3 ? strtoul(argv[3], NULL, 0) : 4) << 20;
	long period_ms = argc > 4 ? atol(argv[4]) : 20;

	if (!reserve || !resident || !hot || hot > resident || resident > reserve || period_ms <= 0) {
		fprintf(stderr, "usage: %s [reserve GiB=64] [resident MiB=256] [hot MiB=4] [period ms=20]\n",
			argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsigned char *p = mmap(NULL, reserve, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(p, reserve, MADV_NOHUGEPAGE);
	unsigned char *r = p + (reserve / 2 - resident / 2) / PAGE * PAGE;
	unsigned char *h = r + (resident / 2 - hot / 2) / PAGE * PAGE;
	madvise(r, resident, MADV_POPULATE_WRITE);
	for (size_t off = 0; off < resident; off += PAGE)
		r[off] = 1;

	printf("range %#lx %#lx\n", (unsigned long)p, (unsigned long)(p + reserve));
	printf("resident %#lx %#lx\n", (unsigned long)r, (unsigned long)(r + resident));
	printf("hot %#lx %#lx\n", (unsigned long)h, (unsigned long)(h + hot));
	printf("ready pid=%d\n", (int)getpid());

	struct timespec nap = {period_ms / 1000, (period_ms % 1000) * 1000000L};
	for (;;) {
		volatile unsigned char *v = h;
		for (size_t off = 0; off < hot; off += PAGE)
			v[off]++;
		nanosleep(&nap, NULL);
	}
}
