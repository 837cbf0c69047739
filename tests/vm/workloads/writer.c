/*
 * writer: writes one part of a buffer and only reads the rest, so a monitor
 * that sees writes only (soft-dirty) must find the written part busy and the
 * read part idle, while an accessed-bit monitor finds both busy.
 *
 *   writer [MIB=64] [WRITE_PERCENT=50]
 *
 * Maps MIB MiB (MADV_NOHUGEPAGE), fills it, then loops forever: one byte
 * written in every 4 KiB page of the first WRITE_PERCENT % of the buffer,
 * one byte read in every page of the rest.
 *
 * Output:
 *   range 0x<start> 0x<end>
 *   write 0x<start> 0x<end>
 *   read 0x<start> 0x<end>
 *   ready pid=<pid>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	unsigned pct = argc > 2 ? (unsigned)atoi(argv[2]) : 50;
	size_t len = mib << 20;

	if (len == 0 || pct > 100) {
		fprintf(stderr, "usage: %s [MiB=64] [write percent=50]\n", argv[0]);
		return 2;
	}
	size_t wlen = (len * pct / 100) & ~(PAGE - 1);
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
	memset(p, 0x11, len);
	printf("range %#lx %#lx\n", (unsigned long)p, (unsigned long)(p + len));
	printf("write %#lx %#lx\n", (unsigned long)p, (unsigned long)(p + wlen));
	printf("read %#lx %#lx\n", (unsigned long)(p + wlen), (unsigned long)(p + len));
	printf("ready pid=%d\n", (int)getpid());

	volatile unsigned char *v = p;
	uint64_t sink = 0;
	for (;;) {
		for (size_t off = 0; off < wlen; off += PAGE)
			v[off]++;
		for (size_t off = wlen; off < len; off += PAGE)
			sink += v[off];
		if (sink == 1) /* never true in practice; keeps the reads alive */
			puts("");
	}
}
