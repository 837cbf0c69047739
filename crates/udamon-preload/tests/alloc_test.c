/* The program tests/alloc_sites.rs runs under the preload library: known
 * allocation sites, frees, a realloc, threads and a fork. Compiled at -O0 so
 * each site keeps its own frame (no inlining, no tail calls). It prints what
 * the test checks against: "fn NAME ADDR", "big ADDR SIZE" (every allocation
 * of at least 64 KiB), "freed ADDR", "realloc OLD NEW SIZE", "child PID",
 * "childbig ADDR SIZE". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void touch(void *p, size_t n)
{
    memset(p, 1, n < 4096 ? n : 4096);
}

NOINLINE void *site_a(void) { return malloc(1 << 20); }
NOINLINE void *site_b(void) { return malloc(64); }
NOINLINE void *site_c(void) { return malloc(4096); }
NOINLINE void *site_d(size_t n) { return malloc(n); }

static void *thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++) {
        void *p = site_d(256 << 10);
        touch(p, 256 << 10);
        printf("big %p %d\n", p, 256 << 10);
        printf("freed %p\n", p);
        free(p);
    }
    static __thread void *small[1000];
    for (int i = 0; i < 1000; i++)
        small[i] = site_b();
    for (int i = 0; i < 1000; i++)
        free(small[i]);
    return NULL;
}

int main(void)
{
    printf("pid %d\n", (int)getpid());
    printf("fn site_a %p\nfn site_b %p\nfn site_c %p\nfn site_d %p\n", (void *)site_a,
           (void *)site_b, (void *)site_c, (void *)site_d);
    printf("fn main %p\nfn thread_main %p\nfn touch %p\n", (void *)main, (void *)thread_main,
           (void *)touch);

    void *a = site_a();
    touch(a, 1 << 20);
    printf("big %p %d\n", a, 1 << 20);

    static void *b[1000];
    for (int i = 0; i < 1000; i++)
        b[i] = site_b();
    for (int i = 0; i < 1000; i += 2)
        free(b[i]);

    static void *c[2560]; /* 10 MiB in 4 KiB pieces */
    for (int i = 0; i < 2560; i++) {
        c[i] = site_c();
        touch(c[i], 4096);
    }
    for (int i = 0; i < 2560; i++)
        free(c[i]);

    void *r = site_d(100000);
    printf("big %p %d\n", r, 100000);
    uintptr_t old = (uintptr_t)r;
    void *r2 = realloc(r, 3 << 20);
    printf("realloc %#lx %p %d\n", (unsigned long)old, r2, 3 << 20);

    void *z = calloc(1, 200000);
    printf("big %p %d\n", z, 200000);
    void *al = NULL;
    if (posix_memalign(&al, 4096, 300000))
        return 2;
    printf("big %p %d\n", al, 300000);

    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, thread_main, NULL))
            return 3;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);

    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 4;
    if (child == 0) {
        void *p = site_d(2 << 20);
        touch(p, 2 << 20);
        printf("child %d\nchildbig %p %d\n", (int)getpid(), p, 2 << 20);
        for (int i = 0; i < 1000; i++)
            free(site_b());
        free(p);
        exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
        return 5;

    printf("freed %p\n", a);
    free(a);
    printf("freed %p\n", r2);
    free(r2);
    printf("freed %p\n", z);
    free(z);
    printf("freed %p\n", al);
    free(al);
    for (int i = 1; i < 1000; i += 2)
        free(b[i]);
    printf("done\n");
    return 0;
}
