/*
 * eight_objects: the access pattern of Daptrace's figure 4 on a real process.
 *
 *   eight_objects [MIB_PER_OBJECT=64] [SECONDS_PER_OBJECT=2] [NR_OBJECTS=8] [nothp]
 *
 * Maps NR_OBJECTS anonymous objects of MIB_PER_OBJECT MiB each and fills
 * them, then writes one byte in every 4 KiB page of one object after another
 * (obj0, obj1, ... and round again), staying SECONDS_PER_OBJECT on each.
 *
 * Output, one fact per line, for the host-side checks:
 *   object <i> 0x<start> 0x<end>      the object's address range [start, end)
 *   ready pid=<pid>                   allocation done, the pattern starts now
 *   switch <i> round=<r> t=<sec> mono_us=<us> real_us=<us>
 *                                     moved on to object i (t: seconds since ready)
 *   done <i> pages=<n> us=<us> mono_us=<us>
 *                                     left object i after writing n pages in us
 *                                     microseconds (the workload's own speed, per
 *                                     object: a huge-page-backed object is written
 *                                     faster than one of base pages)
 *   touches <n> mono_us=<us>          on SIGUSR1: pages written since ready
 * Runs until killed.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_OBJECTS 64

static volatile sig_atomic_t report;

static void on_usr1(int sig)
{
	(void)sig;
	report = 1;
}

static uint64_t clock_us(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	double per = argc > 2 ? atof(argv[2]) : 2.0;
	int n = argc > 3 ? atoi(argv[3]) : 8;
	int nothp = argc > 4 && strcmp(argv[4], "nothp") == 0;
	size_t size = mib << 20;
	unsigned char *obj[MAX_OBJECTS];

	if (n < 1 || n > MAX_OBJECTS || size == 0 || per <= 0) {
		fprintf(stderr, "usage: %s [MiB=64] [seconds=2] [objects=8] [nothp]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < n; i++) {
		obj[i] = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (obj[i] == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		if (nothp)
			madvise(obj[i], size, MADV_NOHUGEPAGE);
		memset(obj[i], i + 1, size);
		printf("object %d %#lx %#lx\n", i, (unsigned long)obj[i], (unsigned long)(obj[i] + size));
	}
	signal(SIGUSR1, on_usr1);
	printf("ready pid=%d\n", (int)getpid());

	uint64_t t0 = clock_us(CLOCK_MONOTONIC);
	unsigned long long touches = 0;
	uint64_t per_us = (uint64_t)(per * 1e6);
	for (unsigned long round = 0;; round++) {
		for (int i = 0; i < n; i++) {
			uint64_t start = clock_us(CLOCK_MONOTONIC);
			printf("switch %d round=%lu t=%.3f mono_us=%llu real_us=%llu\n", i, round,
			       (start - t0) / 1e6, (unsigned long long)start,
			       (unsigned long long)clock_us(CLOCK_REALTIME));
			volatile unsigned char *p = obj[i];
			unsigned long long before = touches;
			do {
				for (size_t off = 0; off < size; off += PAGE)
					p[off]++;
				touches += size / PAGE;
				if (report) {
					report = 0;
					printf("touches %llu mono_us=%llu\n", touches,
					       (unsigned long long)clock_us(CLOCK_MONOTONIC));
				}
			} while (clock_us(CLOCK_MONOTONIC) - start < per_us);
			uint64_t end = clock_us(CLOCK_MONOTONIC);
			printf("done %d pages=%llu us=%llu mono_us=%llu\n", i, touches - before,
			       (unsigned long long)(end - start), (unsigned long long)end);
		}
	}
}
