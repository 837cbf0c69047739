/*
 * hold: keep a block of anonymous memory, mostly idle, for pageout and
 * migration checks.
 *
 *   hold [MIB=256] [HOT_MIB=0] [HOT_PERIOD_MS=100]
 *
 * Maps MIB MiB (MADV_NOHUGEPAGE, so every action works on 4 KiB pages),
 * writes every page once, then sleeps until killed. With HOT_MIB > 0 the
 * first HOT_MIB MiB stay hot: one byte per page is written every
 * HOT_PERIOD_MS milliseconds; the rest is never touched again.
 *
 * Output:
 *   range 0x<start> 0x<end>     the whole block
 *   hot 0x<start> 0x<end>       the hot part (empty when HOT_MIB is 0)
 *   cold 0x<start> 0x<end>      the cold part
 *   ready pid=<pid>
 *   report <tag> part=<hot|cold> pages=<n> present=<n> swapped=<n> node0=<n> node1=<n> other=<n>
 * A report pair (hot and cold) is printed after "ready" (tag "start") and on
 * every SIGUSR1 (tag "usr1-<k>"). present/swapped come from /proc/self/pagemap
 * (bits 63/62); the node counts from move_pages(2) without a target, which
 * only asks where each page is and faults nothing in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define CHUNK 4096

static volatile sig_atomic_t want_report;

static void on_usr1(int sig)
{
	(void)sig;
	want_report = 1;
}

static void report(const char *tag, const char *part, unsigned char *start, size_t len)
{
	size_t pages = len / PAGE, present = 0, swapped = 0, node[2] = {0, 0}, other = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);
	static uint64_t ent[CHUNK];
	static void *addr[CHUNK];
	static int status[CHUNK];

	for (size_t i = 0; i < pages; i += CHUNK) {
		size_t n = pages - i < CHUNK ? pages - i : CHUNK;
		off_t off = (off_t)(((uintptr_t)start / PAGE + i) * 8);
		if (fd >= 0 && pread(fd, ent, n * 8, off) == (ssize_t)(n * 8)) {
			for (size_t j = 0; j < n; j++) {
				present += (ent[j] >> 63) & 1;
				swapped += (ent[j] >> 62) & 1;
			}
		}
		for (size_t j = 0; j < n; j++)
			addr[j] = start + (i + j) * PAGE;
		if (syscall(SYS_move_pages, 0, n, addr, NULL, status, 0) == 0) {
			for (size_t j = 0; j < n; j++) {
				if (status[j] == 0 || status[j] == 1)
					node[status[j]]++;
				else if (status[j] >= 0)
					other++;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	printf("report %s part=%s pages=%zu present=%zu swapped=%zu node0=%zu node1=%zu other=%zu\n",
	       tag, part, pages, present, swapped, node[0], node[1], other);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	size_t hot_mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 0;
	long period_ms = argc > 3 ? atol(argv[3]) : 100;
	size_t len = mib << 20, hot = hot_mib << 20;
	int nreport = 0;
	char tag[32];

	if (len == 0 || hot > len || period_ms <= 0) {
		fprintf(stderr, "usage: %s [MiB=256] [hot MiB=0] [hot period ms=100]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(p, len, MADV_NOHUGEPAGE);
	/* fault the pages in inside the kernel: page by page from user space
	 * costs a kernel entry each, slow under TCG with pti=on (Linux >= 5.14) */
	madvise(p, len, MADV_POPULATE_WRITE);
	/* every page different, but cheap to compress: a counter in each 64 bytes */
	for (size_t off = 0; off < len; off += 64)
		*(uint64_t *)(p + off) = off * 0x9E3779B97F4A7C15ull;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);

	printf("range %#lx %#lx\n", (unsigned long)p, (unsigned long)(p + len));
	printf("hot %#lx %#lx\n", (unsigned long)p, (unsigned long)(p + hot));
	printf("cold %#lx %#lx\n", (unsigned long)(p + hot), (unsigned long)(p + len));
	printf("ready pid=%d\n", (int)getpid());
	report("start", "hot", p, hot);
	report("start", "cold", p + hot, len - hot);

	struct timespec nap = {period_ms / 1000, (period_ms % 1000) * 1000000L};
	for (;;) {
		if (want_report) {
			want_report = 0;
			snprintf(tag, sizeof tag, "usr1-%d", ++nreport);
			report(tag, "hot", p, hot);
			report(tag, "cold", p + hot, len - hot);
		}
		if (hot) {
			volatile unsigned char *h = p;
			for (size_t off = 0; off < hot; off += PAGE)
				h[off]++;
			nanosleep(&nap, NULL);
		} else {
			pause();
		}
	}
}
