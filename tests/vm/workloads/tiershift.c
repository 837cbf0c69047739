/*
 * tiershift: a hot set that moves from object to object, each starting on
 * the slow node, for the tiering comparison (scenario `tiering`).
 *
 *   tiershift [MIB_PER_OBJECT=96] [NR_OBJECTS=8] [ON_NODE0=5] [PERIOD_S=30] [NR_PERIODS=3]
 *             [COLD_EVERY_S=10]
 *
 * Maps NR_OBJECTS anonymous objects of MIB_PER_OBJECT MiB (MADV_NOHUGEPAGE:
 * every move is of 4 KiB pages) and faults them in under a task mempolicy:
 * the first ON_NODE0 objects preferring node 0, the others preferring node 1
 * (MPOL_PREFERRED, so a full node spills over instead of reclaiming or
 * OOMing). The policy is then reset to the default: the pages stay where
 * they are, and nothing binds them (NUMA balancing and DAMON may move them).
 *
 * Then NR_PERIODS hot periods of PERIOD_S seconds. Period k's hot object is
 * ON_NODE0 + k mod (NR_OBJECTS - ON_NODE0): each starts on node 1. The hot
 * object gets one byte per page written, pass after pass, without pause;
 * every COLD_EVERY_S seconds, one page in 64 of every other object is read
 * (rarely accessed, not dead). Exits after the last period.
 *
 * Output, one fact per line:
 *   object <i> 0x<start> 0x<end> want=<node> node0=<n> node1=<n> other=<n> sampled=<n>
 *   ready pid=<pid> t_mono_us=<us>
 *   shift <k> hot=<i> t=<s>                     period k starts (t: s since ready)
 *   tick t=<s> period=<k> hot=<i> share0=<0..1> node0=<n> node1=<n> other=<n> sampled=<n>
 *        passes=<n> free0_kb=<kB> free1_kb=<kB>
 *   final <i> node0=<n> node1=<n> other=<n> sampled=<n>
 *   done t=<s>
 * Node counts come from move_pages(2) without a destination (it only asks
 * where each page is; nothing is faulted in) on every 8th page.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define STRIDE 8 /* sample every 8th page */
#define MAX_OBJECTS 64
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long set_policy(int mode, int node)
{
	unsigned long mask = 1UL << node;
	return syscall(SYS_set_mempolicy, mode, mode == MPOL_DEFAULT ? NULL : &mask,
		       mode == MPOL_DEFAULT ? 0 : sizeof mask * 8);
}

struct where {
	size_t n0, n1, other, sampled;
};

static struct where where_is(unsigned char *p, size_t len)
{
	static void *addr[MAX_OBJECTS * 8192];
	static int status[MAX_OBJECTS * 8192];
	struct where w = {0, 0, 0, 0};
	size_t n = 0;
	for (size_t off = 0; off < len && n < sizeof addr / sizeof addr[0]; off += STRIDE * PAGE)
		addr[n++] = p + off;
	if (syscall(SYS_move_pages, 0, n, addr, NULL, status, 0) != 0)
		return w;
	for (size_t i = 0; i < n; i++) {
		if (status[i] == 0)
			w.n0++;
		else if (status[i] == 1)
			w.n1++;
		else
			w.other++;
	}
	w.sampled = n;
	return w;
}

/* MemFree of node N in kB, from /sys/devices/system/node/nodeN/meminfo */
static long node_free_kb(int node)
{
	char path[96], line[256];
	long kb = -1;
	snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", node);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		char *m = strstr(line, "MemFree:");
		if (m) {
			kb = strtol(m + 8, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 96;
	int n = argc > 2 ? atoi(argv[2]) : 8;
	int on0 = argc > 3 ? atoi(argv[3]) : 5;
	double period = argc > 4 ? atof(argv[4]) : 30;
	int periods = argc > 5 ? atoi(argv[5]) : 3;
	double cold_every = argc > 6 ? atof(argv[6]) : 10;
	size_t size = mib << 20;
	unsigned char *obj[MAX_OBJECTS];

	if (n < 2 || n > MAX_OBJECTS || on0 < 0 || on0 >= n || size == 0 || period <= 0 || periods < 1 ||
	    cold_every <= 0) {
		fprintf(stderr, "usage: %s [MiB=96] [objects=8] [on node 0=5] [period s=30] [periods=3] [cold every s=10]\n",
			argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < n; i++) {
		int want = i < on0 ? 0 : 1;
		obj[i] = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (obj[i] == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		madvise(obj[i], size, MADV_NOHUGEPAGE);
		if (set_policy(MPOL_PREFERRED, want) != 0)
			fprintf(stderr, "set_mempolicy(preferred %d): %s\n", want, strerror(errno));
		/* in the kernel: one fault per page from user space is slow under TCG */
		if (madvise(obj[i], size, MADV_POPULATE_WRITE) != 0)
			memset(obj[i], 0, size);
		for (size_t off = 0; off < size; off += PAGE)
			obj[i][off] = (unsigned char)(i + 1);
	}
	set_policy(MPOL_DEFAULT, 0);
	for (int i = 0; i < n; i++) {
		struct where w = where_is(obj[i], size);
		printf("object %d %#lx %#lx want=%d node0=%zu node1=%zu other=%zu sampled=%zu\n", i,
		       (unsigned long)obj[i], (unsigned long)(obj[i] + size), i < on0 ? 0 : 1, w.n0, w.n1,
		       w.other, w.sampled);
	}
	double t0 = now();
	printf("ready pid=%d t_mono_us=%.0f\n", (int)getpid(), t0 * 1e6);

	unsigned sink = 0;
	double next_tick = t0 + 1, next_cold = t0 + cold_every;
	for (int k = 0; k < periods; k++) {
		int hot = on0 + k % (n - on0);
		double start = t0 + k * period, end = start + period;
		unsigned long passes = 0;
		printf("shift %d hot=%d t=%.3f\n", k, hot, now() - t0);
		volatile unsigned char *h = obj[hot];
		for (;;) {
			for (size_t off = 0; off < size; off += PAGE)
				h[off]++;
			passes++;
			double t = now();
			if (t >= next_cold) {
				for (int i = 0; i < n; i++) {
					if (i == hot)
						continue;
					volatile unsigned char *c = obj[i];
					for (size_t off = 0; off < size; off += 64 * PAGE)
						sink += c[off];
				}
				next_cold += cold_every;
			}
			if (t >= next_tick) {
				struct where w = where_is(obj[hot], size);
				printf("tick t=%.3f period=%d hot=%d share0=%.4f node0=%zu node1=%zu other=%zu sampled=%zu "
				       "passes=%lu free0_kb=%ld free1_kb=%ld\n",
				       t - t0, k, hot, w.sampled ? (double)w.n0 / w.sampled : 0.0, w.n0, w.n1, w.other,
				       w.sampled, passes, node_free_kb(0), node_free_kb(1));
				while (next_tick <= t)
					next_tick += 1;
			}
			if (t >= end)
				break;
		}
	}
	for (int i = 0; i < n; i++) {
		struct where w = where_is(obj[i], size);
		printf("final %d node0=%zu node1=%zu other=%zu sampled=%zu\n", i, w.n0, w.n1, w.other, w.sampled);
	}
	printf("done t=%.3f sink=%u\n", now() - t0, sink);
	return 0;
}
