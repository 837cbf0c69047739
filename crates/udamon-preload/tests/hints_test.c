/* The program tests/hints.rs runs with placement hints: two allocation sites
 * that share a wrapper (so the hinted frame is not the innermost one) and a
 * big global. Compiled at -O0 so each site keeps its own frame. It prints
 * "site NAME VADDR" (the return address into the site, relative to the
 * program's load bias, as a site hint names it), "range NAME LO HI" (the
 * whole pages of a block, or the pages covering the global), "locked NAME
 * KB" (the Locked: kB of the mappings over that range, from
 * /proc/self/smaps), "vmlck KB" and "done". Given a library's path, it
 * dlopens it after start and reports its site ("site lib VADDR"), a block
 * from that site ("libblock") and its global ("libtable") too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BIG (2 << 20)
#define MEDIUM (64 << 10)

/* The global a symbol hint names (in .bss). */
char hot_table[3 << 20];

static uintptr_t site_vaddr[2];

static uintptr_t load_bias(void *addr)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        exit(7);
    return lm->l_addr;
}

NOINLINE void *alloc_here(size_t n, int which)
{
    uintptr_t ret = (uintptr_t)__builtin_return_address(0);
    site_vaddr[which] = ret - load_bias((void *)ret);
    return malloc(n);
}

NOINLINE void *site_hot(size_t n) { return alloc_here(n, 0); }
NOINLINE void *site_cold(size_t n) { return alloc_here(n, 1); }

static uintptr_t page;

/* Sums Locked: over the mappings that overlap [lo, hi). */
static void report(const char *name, uintptr_t lo, uintptr_t hi)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        exit(8);
    char line[512];
    unsigned long vlo = 0, vhi = 0, kb, total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            vlo = a;
            vhi = b;
        } else if (sscanf(line, "Locked: %lu kB", &kb) == 1 && vlo < hi && lo < vhi)
            total += kb;
    }
    fclose(f);
    printf("range %s %#lx %#lx\nlocked %s %lu\n", name, (unsigned long)lo, (unsigned long)hi, name,
           total);
}

static void report_block(const char *name, void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, lo = (a + page - 1) & ~(page - 1), hi = (a + n) & ~(page - 1);
    report(name, lo, hi);
}

/* The library's part: lib_alloc's site and lib_table (hints_lib.c). */
static void with_library(const char *path)
{
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        exit(9);
    }
    void *(*lib_alloc)(size_t) = (void *(*)(size_t))dlsym(h, "lib_alloc");
    uintptr_t (*lib_site)(void) = (uintptr_t(*)(void))dlsym(h, "lib_site");
    char *table = dlsym(h, "lib_table");
    size_t *table_size = dlsym(h, "lib_table_size");
    if (!lib_alloc || !lib_site || !table || !table_size)
        exit(10);
    /* The first hinted-size allocation after the dlopen takes the library
     * in: its symbol hint first, then its site. */
    char *p = lib_alloc(BIG);
    if (!p)
        exit(11);
    memset(p, 1, BIG);
    memset(table, 1, *table_size);
    printf("site lib %#lx\n", (unsigned long)lib_site());
    report_block("libblock", p, BIG);
    uintptr_t t = (uintptr_t)table;
    report("libtable", t & ~(page - 1), (t + *table_size + page - 1) & ~(page - 1));
    free(p);
}

int main(int argc, char **argv)
{
    page = (uintptr_t)sysconf(_SC_PAGESIZE);
    printf("pid %d\n", (int)getpid());
    char *hot = site_hot(BIG);       /* mmap'd by glibc */
    char *hot2 = site_hot(MEDIUM);   /* from the heap */
    char *tiny = site_hot(100);      /* below UDAMON_HINT_MIN: not checked */
    char *cold = site_cold(BIG);
    if (!hot || !hot2 || !tiny || !cold)
        return 2;
    memset(hot, 1, BIG);
    memset(hot2, 1, MEDIUM);
    memset(cold, 1, BIG);
    memset(hot_table, 1, sizeof hot_table);
    printf("site hot %#lx\nsite cold %#lx\n", (unsigned long)site_vaddr[0],
           (unsigned long)site_vaddr[1]);
    report_block("hot", hot, BIG);
    report_block("hot2", hot2, MEDIUM);
    report_block("cold", cold, BIG);
    uintptr_t t = (uintptr_t)hot_table;
    report("table", t & ~(page - 1), (t + sizeof hot_table + page - 1) & ~(page - 1));
    if (argc > 1)
        with_library(argv[1]);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmLck:", 6))
            printf("vmlck %lu\n", strtoul(line + 6, NULL, 10));
    if (f)
        fclose(f);
    free(hot);
    free(hot2);
    free(tiny);
    free(cold);
    printf("done\n");
    return 0;
}
