/* build: dynamic (symbols and a build-id kept; LD_PRELOAD works) */
/*
 * named_objects: eight named objects whose hotness changes over time, for
 * `udamon report objects` (docs/objects.md).
 *
 *   named_objects [SECONDS_PER_PHASE=10] [ROUNDS=1]
 *
 * Four globals (data symbols) and four heap objects, each from its own
 * allocation site (a function of its own):
 *   hot_index     .bss   4 MiB      sessions  alloc_sessions()  8 MiB
 *   lookup_table  .data  2 MiB      cache     alloc_cache()     6 MiB
 *   scratch       .bss   4 MiB      buffers   alloc_buffers()   4 MiB
 *   cold_log      .bss   4 MiB      archive   alloc_archive()   8 MiB
 * After filling them all once, three phases repeat ROUNDS times, each
 * SECONDS_PER_PHASE long, writing one byte in every page of its hot
 * objects every 10 ms and touching nothing else:
 *   phase 0: hot_index, sessions, cache
 *   phase 1: lookup_table, scratch, cache, buffers
 *   phase 2: hot_index, buffers
 * cold_log and archive stay cold.
 *
 * Output, one fact per line, to $NAMED_OBJECTS_LOG if set, else stdout
 * (times: us since main() started):
 *   object <name> <global|heap> 0x<start> 0x<end>
 *   phase <n> start_us=<us> hot=<name>,<name>,...
 *   end end_us=<us>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MIB (1024UL * 1024UL)

char hot_index[4 * MIB];
char lookup_table[2 * MIB] = { 1 };
char scratch[4 * MIB];
char cold_log[4 * MIB];

struct object {
	const char *name;
	const char *kind;
	char *start;
	size_t size;
};

static struct object objects[8];
static uint64_t t0;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Each heap object has its own call site: a function that is never
 * inlined, merged with a twin (noipa) nor left by a tail call, so the
 * return address names it. */
static char *checked(char *p)
{
	if (!p) {
		perror("malloc");
		exit(1);
	}
	return p;
}
__attribute__((noipa)) static char *alloc_sessions(void) { return checked(malloc(8 * MIB)); }
__attribute__((noipa)) static char *alloc_cache(void) { return checked(malloc(6 * MIB)); }
__attribute__((noipa)) static char *alloc_buffers(void) { return checked(malloc(4 * MIB)); }
__attribute__((noipa)) static char *alloc_archive(void) { return checked(malloc(8 * MIB)); }

static void touch(struct object *o, unsigned v)
{
	for (size_t off = 0; off < o->size; off += PAGE)
		((volatile char *)o->start)[off] = (char)v;
}

static struct object *find(const char *name)
{
	for (int i = 0; i < 8; i++)
		if (strcmp(objects[i].name, name) == 0)
			return &objects[i];
	return NULL;
}

static const char *phases[3][5] = {
	{ "hot_index", "sessions", "cache", NULL },
	{ "lookup_table", "scratch", "cache", "buffers", NULL },
	{ "hot_index", "buffers", NULL },
};

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 10;
	int rounds = argc > 2 ? atoi(argv[2]) : 1;
	t0 = now_us();
	const char *log = getenv("NAMED_OBJECTS_LOG");
	if (log && !freopen(log, "w", stdout)) {
		perror(log);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	objects[0] = (struct object){ "hot_index", "global", hot_index, sizeof(hot_index) };
	objects[1] = (struct object){ "lookup_table", "global", lookup_table, sizeof(lookup_table) };
	objects[2] = (struct object){ "scratch", "global", scratch, sizeof(scratch) };
	objects[3] = (struct object){ "cold_log", "global", cold_log, sizeof(cold_log) };
	objects[4] = (struct object){ "sessions", "heap", alloc_sessions(), 8 * MIB };
	objects[5] = (struct object){ "cache", "heap", alloc_cache(), 6 * MIB };
	objects[6] = (struct object){ "buffers", "heap", alloc_buffers(), 4 * MIB };
	objects[7] = (struct object){ "archive", "heap", alloc_archive(), 8 * MIB };
	for (int i = 0; i < 8; i++) {
		touch(&objects[i], 1);
		printf("object %s %s %p %p\n", objects[i].name, objects[i].kind,
		       (void *)objects[i].start, (void *)(objects[i].start + objects[i].size));
	}
	for (int r = 0; r < rounds; r++) {
		for (int p = 0; p < 3; p++) {
			uint64_t start = now_us();
			printf("phase %d start_us=%llu hot=", p, (unsigned long long)(start - t0));
			for (int j = 0; phases[p][j]; j++)
				printf("%s%s", j ? "," : "", phases[p][j]);
			printf("\n");
			unsigned v = 2;
			while (now_us() - start < (uint64_t)secs * 1000000u) {
				for (int j = 0; phases[p][j]; j++)
					touch(find(phases[p][j]), v);
				v++;
				usleep(10000);
			}
		}
	}
	printf("end end_us=%llu\n", (unsigned long long)(now_us() - t0));
	return 0;
}
