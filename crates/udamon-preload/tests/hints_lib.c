/* A library tests/hints.rs has hints_test.c dlopen after start: a site of
 * its own (behind a wrapper, like the program's) and a global. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

char lib_table[1 << 20];
size_t lib_table_size = sizeof lib_table;

static uintptr_t site;

NOINLINE void *lib_wrap(size_t n)
{
    uintptr_t ret = (uintptr_t)__builtin_return_address(0);
    Dl_info info;
    struct link_map *lm = NULL;
    if (dladdr1((void *)ret, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm)
        site = ret - lm->l_addr;
    return malloc(n);
}

NOINLINE void *lib_alloc(size_t n) { return lib_wrap(n); }

uintptr_t lib_site(void) { return site; }
