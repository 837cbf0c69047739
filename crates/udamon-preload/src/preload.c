/*
 * udamon-preload: allocation-site sampling for `udamon record --alloc-sites`.
 *
 * Loaded with LD_PRELOAD, it interposes glibc's malloc family, forwards every
 * call to the next definition (dlsym(RTLD_NEXT)), and records a sample of the
 * allocations with their call stacks in a side file that
 * `udamon_preload::read` parses (the format is documented there, in
 * src/reader.rs; the constants below must match it).
 *
 * Sampling: every allocation of at least UDAMON_ALLOC_THRESHOLD bytes, and the
 * smaller ones Poisson-sampled by bytes with mean interval UDAMON_ALLOC_SAMPLE
 * (tcmalloc's heap-profiler scheme: a per-thread countdown of bytes drawn
 * from an exponential distribution; the allocation that crosses zero is
 * sampled). By memorylessness an allocation of n bytes is sampled with
 * probability 1 - exp(-n/T), so its weight, the bytes it stands for, is the
 * unbiased n / (1 - exp(-n/T)) (about T + n/2 for n << T).
 *
 * Rules that keep the host program safe:
 *  - nothing here allocates with malloc: tables and buffers are mmap'd;
 *  - no lock of ours is held across a call into the real allocator;
 *  - a thread-local guard makes any allocation made while we are sampling
 *    (by the unwinder, stdio of an error message, atexit) pass straight
 *    through, and errno is preserved;
 *  - any failure (cannot create the file, a write fails) turns sampling off
 *    for the process with one line on stderr; the program runs on.
 *
 * Placement hints (UDAMON_HINTS, a text file udamon writes; the grammar is
 * in src/lib.rs, `write_hints`): "symbol" hints mlock or mbind a global's
 * pages when its module is loaded; "site" hints do so for the whole pages
 * inside allocations of at least UDAMON_HINT_MIN bytes whose call stack (the
 * first 16 frames) passes through a given return address of a given module.
 * They work with or without sampling. Modules loaded by dlopen are noticed
 * lazily: every hinted-size allocation compares dl_iterate_phdr's load and
 * unload counts with the last ones seen (dlopen is not interposed: glibc's
 * dlopen finds its caller's RUNPATH and namespace by its return address,
 * which would then be ours). The fast path is unchanged: the hint path is
 * entered through the same size threshold as sampling.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

static void name_ours(void *p, size_t n);

#define EXPORT __attribute__((visibility("default")))
#define NOINLINE __attribute__((noinline))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
/* initial-exec: a plain %fs-relative access, no __tls_get_addr (which may
 * allocate); fine for a library loaded at start by LD_PRELOAD. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- side file format (see src/reader.rs) ---- */
#define MAGIC "UDAMONAS"
#define VERSION 2u
#define HEADER_LEN 40u
#define REC_HDR 8u
enum { REC_ALLOC = 1, REC_FREE = 2, REC_STACK = 3, REC_MAPS = 4, REC_COUNTERS = 5, REC_END = 6,
       REC_HINTS = 7 };
#define FLAG_REALLOC 1u
#define ALLOC_LEN 40u
#define FREE_LEN 16u
#define COUNTERS_LEN 32u
#define END_LEN 8u
#define HINTS_LEN 96u
#define HINTS_REFUSED 1u /* the hints file was unreadable or malformed: no hints */
#define HINTS_CUT 2u     /* it had more than HINTS_MAX hints: the first ones apply */

/* ---- sizes ---- */
#define MAX_DEPTH 32
#define STACK_SLOTS (1u << 14)      /* 4.5 MiB of address space, touched as used */
#define LIVE_BITS 20
#define LIVE_SLOTS (1u << LIVE_BITS) /* 8 MiB */
#define FILTER_BITS 18              /* 1 MiB of counters */
#define BUF_SIZE (1u << 20)
#define FLUSH_NS 100000000ull       /* flush at most this long after new data */
#define MAPS_MAX (64u << 20)
#define MAX_SUFFIX 64               /* OUT.PID.1 .. : the same pid after exec */

#define HINTS_MAX 4096u
#define HINT_DEPTH 16               /* frames a site hint is looked for in */
#define BUILD_ID_MAX 64
#define NAME_LEN 256                /* a file basename and its NUL */
#define MODS_MAX 4096u              /* loaded modules tracked */
#define VCACHE_BITS 16              /* verdicts by return address: 512 KiB */
#define VCACHE_PROBES 8
#define HINT_LINE_MAX 1024
#define NODE_MAX 1023
#define DEFAULT_HINT_MIN 4096ull

#define DEFAULT_THRESHOLD 65536ull
#define DEFAULT_INTERVAL 524288ull
#define MAX_SETTING (1ull << 62)

/* ---- the real allocator ---- */
static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static void (*real__exit)(int);

/* dlsym may itself call calloc/malloc (for its error state) before the real
 * functions are known: those calls are served from this arena and never
 * freed. Each block is preceded by its size (for realloc). */
static _Alignas(16) char boot_arena[64 << 10];
static atomic_size_t boot_used;

static int in_boot(const void *p)
{
    return (const char *)p >= boot_arena && (const char *)p < boot_arena + sizeof boot_arena;
}

static void *boot_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    if ((align & (align - 1)) || n > sizeof boot_arena || align > sizeof boot_arena)
        return NULL;
    size_t off = atomic_load_explicit(&boot_used, memory_order_relaxed);
    for (;;) {
        size_t start = (off + 16 + align - 1) & ~(align - 1);
        size_t end = (start + n + 15) & ~(size_t)15;
        if (end > sizeof boot_arena) {
            errno = ENOMEM;
            return NULL;
        }
        if (atomic_compare_exchange_weak(&boot_used, &off, end)) {
            memcpy(boot_arena + start - sizeof n, &n, sizeof n);
            return boot_arena + start;
        }
    }
}

static size_t boot_size(const void *p)
{
    size_t n;
    memcpy(&n, (const char *)p - sizeof n, sizeof n);
    return n;
}

static atomic_int resolving;

/* Called while a real function is unknown; a nested call (dlsym allocating)
 * or another thread finds `resolving` set and uses the arena. */
static void resolve(void)
{
    if (atomic_exchange(&resolving, 1))
        return;
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    real_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
    real__exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    atomic_store(&resolving, 0);
}

/* ---- per-thread state ---- */
struct thread_state {
    uint64_t until; /* bytes left before the next sample; 0: not started */
    uint64_t rng;   /* xorshift64* state; 0: not seeded */
    uint32_t tid;   /* cached gettid(); 0: unknown */
    uint32_t guard; /* nonzero while this thread is inside the sampler */
};
static TLS struct thread_state ts;

/* ---- process state ---- */
enum { UNDECIDED, ENABLED, DISABLED };
static atomic_int g_state;                            /* sampling: UNDECIDED until the constructor */
/* Read on the fast path: allocations of at least this many bytes take the
 * slow path, the lesser of the sampling threshold and the hints' minimum. */
static _Atomic uint64_t g_threshold = UINT64_MAX;
static uint64_t g_sample_thr = UINT64_MAX; /* allocations this big are all sampled */
static uint64_t g_interval;
/* Allocations of at least this many bytes are checked against the hints
 * (UINT64_MAX: no hints). Set before g_state, read after it. */
static uint64_t g_hint_min = UINT64_MAX;
/* Counting filter of the live sampled addresses, read without the lock on
 * every free: a zero counter proves the address is not sampled. An address
 * is inserted before malloc returns it and removed before it is really
 * freed, so the program's own ordering makes the relaxed read exact for a
 * zero. */
static _Atomic uint32_t *g_filter;
/* The text segment of this library: leading frames inside it are ours. */
static uintptr_t g_self_lo, g_self_hi;

struct stack_slot {
    uint64_t hash;
    uint32_t id; /* 0: empty */
    uint32_t depth;
    uint64_t frames[MAX_DEPTH];
};

/* Everything below is guarded by g_lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int fd;             /* -1: no file (yet) */
    dev_t dev;          /* the file's identity, checked before each write */
    ino_t ino;
    int pending_open;   /* a fork child opens its file at its first sample */
    pid_t pid;          /* the process the file belongs to */
    unsigned char *buf; /* BUF_SIZE */
    size_t used;
    uint64_t last_flush;
    int dirty;          /* records since the last END */
    int exit_maps_done;
    struct stack_slot *stacks;
    uint32_t nstacks, next_stack;
    uint64_t *live;
    uint32_t nlive;
    uint64_t live_full, stacks_full, maps_truncated;
    int counters_dirty;
    uint64_t hint_events; /* H.events when the last hints record was made */
    char *scratch;      /* /proc/self/maps text */
    size_t scratch_cap;
    char base[PATH_MAX];
    char path[PATH_MAX + 48];
} S = { .fd = -1 };

/* ---- placement hints: state ---- */
/* Which module a hint is for: its build-id if given, else its basename. */
struct spec {
    uint8_t idlen; /* 0: match by name */
    unsigned char id[BUILD_ID_MAX];
    char name[NAME_LEN];
};

struct hint {
    uint64_t vaddr;
    uint64_t size; /* a symbol's; 0 for a site */
    uint32_t spec;
    uint32_t line;
    int32_t node; /* -1: none */
    uint32_t lock;
};

struct module {
    uintptr_t lo, hi; /* the extent of its PT_LOAD segments */
    uintptr_t bias;   /* l_addr */
    uint32_t hinted;  /* some hint's spec matches it */
    uint8_t idlen;
    unsigned char id[BUILD_ID_MAX];
    char name[NAME_LEN];
};

/* Set by the constructor, read-only afterwards. */
static int g_hints_requested;  /* UDAMON_HINTS was given */
static int g_hints;            /* and its hints were read */
static uint32_t g_hint_state;  /* HINTS_REFUSED, HINTS_CUT */
static uint32_t g_nhints;      /* hint lines kept */
static struct spec *g_specs;
static uint32_t g_nspecs;
static struct hint *g_sites, *g_syms; /* sites sorted by vaddr */
static uint32_t g_nsites, g_nsyms;
static int g_hints_verbose;
static uintptr_t g_page = 4096;
static char g_exe_name[NAME_LEN];
static char g_hints_path[PATH_MAX];

/* The loaded modules, sorted by address: two buffers, the current one read
 * under g_hlock, the other rebuilt by one thread at a time (g_rescanning)
 * and swapped in under g_hlock. No loader function is called with g_hlock
 * held: the loader may hold its own locks when it calls malloc. */
static pthread_mutex_t g_hlock = PTHREAD_MUTEX_INITIALIZER;
static struct module *g_modbuf[2];
static struct module *g_mods; /* g_hlock */
static uint32_t g_nmods;      /* g_hlock */
static atomic_int g_rescanning;
static _Atomic uint64_t g_seen_adds = UINT64_MAX, g_seen_subs = UINT64_MAX;
/* Verdicts by return address, one word each: ret << 16 | (site index + 1,
 * or 0 for none). Only return addresses below 2^48 and inside a known
 * module are cached; the table is cleared when a module is unloaded. */
static _Atomic uint64_t *g_vcache;
static atomic_uint g_vgen;

/* What the hints did (this process). */
static struct {
    _Atomic uint64_t matched, empty, symbols, locks, locked, binds, bound, lock_fail, bind_fail;
    _Atomic uint64_t events; /* changes of any of these */
    _Atomic uint32_t lock_errno, bind_errno;
} H;
static pid_t g_hints_pid; /* the process H belongs to */
static int g_hints_said;

/* ---- small helpers ---- */
static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void put16(unsigned char *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static void put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static void put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static void put_hdr(unsigned char *p, unsigned kind, unsigned flags, uint32_t len)
{
    put16(p, (uint16_t)kind);
    put16(p + 2, (uint16_t)flags);
    put32(p + 4, len);
}

static size_t cat(char *dst, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap)
        dst[at++] = *s++;
    dst[at] = 0;
    return at;
}

static size_t cat_u64(char *dst, size_t at, size_t cap, uint64_t v)
{
    char tmp[24];
    int i = 0;
    do
        tmp[i++] = (char)('0' + v % 10);
    while (v /= 10);
    while (i && at + 1 < cap)
        dst[at++] = tmp[--i];
    dst[at] = 0;
    return at;
}

/* One line on stderr; called with the guard set (strerror may allocate). */
static void say(const char *what, const char *path, int err, const char *tail)
{
    char line[PATH_MAX + 256];
    size_t n = cat(line, 0, sizeof line, "udamon-preload: ");
    n = cat(line, n, sizeof line, what);
    if (path) {
        n = cat(line, n, sizeof line, " ");
        n = cat(line, n, sizeof line, path);
    }
    if (err) {
        n = cat(line, n, sizeof line, ": ");
        n = cat(line, n, sizeof line, strerror(err));
    }
    n = cat(line, n, sizeof line, tail);
    if (n + 1 < sizeof line)
        line[n++] = '\n';
    ssize_t r = write(2, line, n);
    (void)r;
}

static void complain(const char *what, const char *path, int err)
{
    say(what, path, err, "; allocation sampling is off");
}

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* ---- turning off ---- */
static void disable_locked(void)
{
    atomic_store(&g_state, DISABLED);
    atomic_store_explicit(&g_threshold, g_hint_min, memory_order_relaxed);
    if (S.fd >= 0)
        close(S.fd);
    S.fd = -1;
    S.pending_open = 0;
    S.used = 0;
}

/* ---- output (g_lock held) ---- */
/* Whether S.fd still is our file: the program may have closed it and opened
 * one of its own under the same number. */
static int fd_is_ours(void)
{
    struct stat st;
    return fstat(S.fd, &st) == 0 && st.st_dev == S.dev && st.st_ino == S.ino;
}

/* Writes the buffer out; every direct write follows a call of this. */
static void flush_locked(void)
{
    if (S.fd >= 0) {
        /* A process made by a bare clone() kept our state but not our file. */
        if (getpid() != S.pid) {
            S.fd = -1; /* not ours to close */
            disable_locked();
            return;
        }
        if (!fd_is_ours()) {
            complain("the program closed the side file", S.path, 0);
            S.fd = -1;
            disable_locked();
            return;
        }
        if (S.used && write_all(S.fd, S.buf, S.used) < 0) {
            complain("cannot write the side file", S.path, errno);
            disable_locked();
            return;
        }
    }
    S.used = 0;
    S.last_flush = now_ns();
}

static unsigned char *reserve(size_t n)
{
    if (S.used + n > BUF_SIZE)
        flush_locked();
    unsigned char *p = S.buf + S.used;
    S.used += n;
    S.dirty = 1;
    return p;
}

static void put_counters_locked(uint64_t now)
{
    unsigned char *r = reserve(REC_HDR + COUNTERS_LEN);
    put_hdr(r, REC_COUNTERS, 0, COUNTERS_LEN);
    put64(r + 8, now);
    put64(r + 16, S.live_full);
    put64(r + 24, S.stacks_full);
    put64(r + 32, S.maps_truncated);
    S.counters_dirty = 0;
}

static uint64_t ld(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void put_hints_locked(uint64_t now)
{
    S.hint_events = ld(&H.events);
    unsigned char *r = reserve(REC_HDR + HINTS_LEN);
    put_hdr(r, REC_HINTS, 0, HINTS_LEN);
    put64(r + 8, now);
    put32(r + 16, g_nhints);
    put32(r + 20, g_hint_state);
    put64(r + 24, ld(&H.matched));
    put64(r + 32, ld(&H.empty));
    put64(r + 40, ld(&H.symbols));
    put64(r + 48, ld(&H.locks));
    put64(r + 56, ld(&H.locked));
    put64(r + 64, ld(&H.binds));
    put64(r + 72, ld(&H.bound));
    put64(r + 80, ld(&H.lock_fail));
    put64(r + 88, ld(&H.bind_fail));
    put32(r + 96, atomic_load_explicit(&H.lock_errno, memory_order_relaxed));
    put32(r + 100, atomic_load_explicit(&H.bind_errno, memory_order_relaxed));
}

static int hints_dirty_locked(void)
{
    return g_hints_requested && ld(&H.events) != S.hint_events;
}

static void maybe_flush_locked(uint64_t now)
{
    if (now < S.last_flush + FLUSH_NS) /* `now` may predate the last flush */
        return;
    if (S.counters_dirty)
        put_counters_locked(now);
    if (hints_dirty_locked())
        put_hints_locked(now);
    flush_locked();
}

/* The text of /proc/self/maps as one record, written directly. */
static void write_maps_locked(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    uint64_t t = now_ns();
    size_t n = 0;
    for (;;) {
        if (n == S.scratch_cap) {
            size_t cap = S.scratch_cap ? S.scratch_cap * 2 : (256u << 10);
            void *m = MAP_FAILED;
            if (cap <= MAPS_MAX)
                m = S.scratch ? mremap(S.scratch, S.scratch_cap, cap, MREMAP_MAYMOVE)
                              : mmap(NULL, cap, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) {
                S.maps_truncated++;
                S.counters_dirty = 1;
                break;
            }
            name_ours(m, cap);
            S.scratch = m;
            S.scratch_cap = cap;
        }
        ssize_t r = read(fd, S.scratch + n, S.scratch_cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    flush_locked();
    if (S.fd < 0)
        return;
    unsigned char hdr[REC_HDR + 8];
    put_hdr(hdr, REC_MAPS, 0, (uint32_t)(8 + n));
    put64(hdr + 8, t);
    if (write_all(S.fd, hdr, sizeof hdr) < 0 || write_all(S.fd, S.scratch, n) < 0) {
        complain("cannot write the side file", S.path, errno);
        disable_locked();
    }
}

/* Creates BASE.PID (BASE.PID.N if a program this pid ran before exec made
 * it), writes the header and the maps. */
static int open_output_locked(void)
{
    char *path = S.path;
    size_t cap = sizeof S.path;
    pid_t pid = getpid();
    int fd = -1, err = 0;
    for (int k = 0; k < MAX_SUFFIX && fd < 0; k++) {
        size_t n = cat(path, 0, cap, S.base);
        n = cat(path, n, cap, ".");
        n = cat_u64(path, n, cap, (uint64_t)pid);
        if (k) {
            n = cat(path, n, cap, ".");
            cat_u64(path, n, cap, (uint64_t)k);
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        err = errno;
        if (fd < 0 && err != EEXIST)
            break;
    }
    if (fd < 0) {
        complain("cannot create the side file", path, err);
        return -1;
    }
    /* Out of the way of programs that reuse low descriptor numbers. */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        complain("cannot stat the side file", path, errno);
        close(fd);
        return -1;
    }
    S.dev = st.st_dev;
    S.ino = st.st_ino;
    S.fd = fd;
    S.pid = pid;
    S.pending_open = 0;
    S.used = 0;
    unsigned char *h = reserve(HEADER_LEN);
    memcpy(h, MAGIC, 8);
    put32(h + 8, VERSION);
    put32(h + 12, HEADER_LEN);
    put32(h + 16, (uint32_t)pid);
    put32(h + 20, 0);
    put64(h + 24, g_sample_thr);
    put64(h + 32, g_interval);
    write_maps_locked();
    if (S.fd >= 0 && g_hints_requested)
        put_hints_locked(now_ns());
    return S.fd >= 0 ? 0 : -1;
}

/* ---- live sampled addresses: linear probing, backward-shift deletion ---- */
static uint32_t live_slot(uint64_t a)
{
    return (uint32_t)(((a >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - LIVE_BITS));
}

static _Atomic uint32_t *filter_at(const void *p)
{
    return &g_filter[(((uintptr_t)p >> 4) * 0xC2B2AE3D27D4EB4Full) >> (64 - FILTER_BITS)];
}

static void live_insert_locked(uint64_t a)
{
    uint32_t mask = LIVE_SLOTS - 1, i = live_slot(a);
    while (S.live[i]) {
        if (S.live[i] == a) /* its free went unseen; keep one entry */
            return;
        i = (i + 1) & mask;
    }
    if (S.nlive >= LIVE_SLOTS / 4 * 3) {
        S.live_full++;
        S.counters_dirty = 1;
        return;
    }
    S.live[i] = a;
    S.nlive++;
    atomic_fetch_add_explicit(filter_at((void *)a), 1, memory_order_relaxed);
}

static int live_remove_locked(uint64_t a)
{
    uint32_t mask = LIVE_SLOTS - 1, i = live_slot(a);
    while (S.live[i] != a) {
        if (!S.live[i])
            return 0;
        i = (i + 1) & mask;
    }
    for (uint32_t j = i;;) {
        j = (j + 1) & mask;
        if (!S.live[j])
            break;
        /* Move the entry at j to the hole at i if i lies on its probe path. */
        uint32_t k = live_slot(S.live[j]);
        if (((j - k) & mask) >= ((j - i) & mask)) {
            S.live[i] = S.live[j];
            i = j;
        }
    }
    S.live[i] = 0;
    S.nlive--;
    atomic_fetch_sub_explicit(filter_at((void *)a), 1, memory_order_relaxed);
    return 1;
}

/* ---- stacks ---- */
struct unwind_state {
    unsigned depth, max;
    uint64_t frames[MAX_DEPTH];
};

static _Unwind_Reason_Code unwind_cb(struct _Unwind_Context *ctx, void *arg)
{
    struct unwind_state *u = arg;
    uintptr_t ip = _Unwind_GetIP(ctx);
    if (!ip)
        return _URC_END_OF_STACK;
    if (u->depth == 0 && ip >= g_self_lo && ip < g_self_hi)
        return _URC_NO_REASON; /* the sampler's and the wrapper's frames */
    u->frames[u->depth++] = ip;
    return u->depth == u->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static uint64_t hash_stack(const uint64_t *f, unsigned n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (unsigned i = 0; i < n; i++)
        h = (h ^ f[i]) * 0x100000001b3ull, h ^= h >> 29;
    return h ? h : 1;
}

/* The id of the stack, writing it first if this file has not seen it. */
static uint32_t stack_id_locked(const struct unwind_state *u)
{
    if (!u->depth)
        return 0;
    uint64_t h = hash_stack(u->frames, u->depth);
    uint32_t mask = STACK_SLOTS - 1, i = (uint32_t)h & mask;
    size_t bytes = u->depth * sizeof(uint64_t);
    struct stack_slot *slot = NULL;
    for (; S.stacks[i].id; i = (i + 1) & mask) {
        struct stack_slot *s = &S.stacks[i];
        if (s->hash == h && s->depth == u->depth && !memcmp(s->frames, u->frames, bytes))
            return s->id;
    }
    if (S.nstacks < STACK_SLOTS / 4 * 3)
        slot = &S.stacks[i];
    else {
        S.stacks_full++; /* written again, undeduplicated */
        S.counters_dirty = 1;
    }
    if (S.next_stack == UINT32_MAX)
        return 0;
    uint32_t id = S.next_stack++;
    if (slot) {
        slot->hash = h;
        slot->id = id;
        slot->depth = u->depth;
        memcpy(slot->frames, u->frames, bytes);
        S.nstacks++;
    }
    unsigned char *r = reserve(REC_HDR + 8 + bytes);
    put_hdr(r, REC_STACK, 0, (uint32_t)(8 + bytes));
    put32(r + 8, id);
    put32(r + 12, u->depth);
    for (unsigned k = 0; k < u->depth; k++)
        put64(r + 16 + 8 * k, u->frames[k]);
    return id;
}


/* ---- placement hints: modules ---- */
static int spec_matches(const struct spec *sp, const struct module *m)
{
    if (sp->idlen)
        return sp->idlen == m->idlen && !memcmp(sp->id, m->id, sp->idlen);
    return m->name[0] && !strcmp(sp->name, m->name);
}

/* Whether [v, v + n) of the module lies in the file part of a PT_LOAD. */
static int in_load(const struct dl_phdr_info *info, ElfW(Addr) v, ElfW(Xword) n)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && v >= ph->p_vaddr && n <= ph->p_filesz &&
            v - ph->p_vaddr <= ph->p_filesz - n)
            return 1;
    }
    return 0;
}

static void read_build_id(struct module *m, const struct dl_phdr_info *info)
{
    m->idlen = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE || !in_load(info, ph->p_vaddr, ph->p_filesz))
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        size_t left = ph->p_filesz, align = ph->p_align == 8 ? 8 : 4;
        while (left >= sizeof(ElfW(Nhdr))) {
            ElfW(Nhdr) nh;
            memcpy(&nh, p, sizeof nh);
            size_t name_at = sizeof nh;
            if (nh.n_namesz > left || nh.n_descsz > left)
                break;
            size_t desc_at = name_at + ((nh.n_namesz + align - 1) & ~(align - 1));
            size_t next = desc_at + ((nh.n_descsz + align - 1) & ~(align - 1));
            if (next > left)
                break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(p + name_at, "GNU", 4) &&
                nh.n_descsz && nh.n_descsz <= BUILD_ID_MAX) {
                memcpy(m->id, p + desc_at, nh.n_descsz);
                m->idlen = (uint8_t)nh.n_descsz;
                return;
            }
            p += next;
            left -= next;
        }
    }
}

/* The basename of path into dst (empty if it does not fit). */
static void set_basename(char *dst, const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n >= NAME_LEN)
        n = 0;
    memcpy(dst, b, n);
    dst[n] = 0;
}

struct counts {
    uint64_t adds, subs;
    int ok;
};

static int counts_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct counts *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
        c->ok = 1;
    }
    return 1; /* the first module is enough */
}

struct scan {
    struct module *mods;
    uint32_t n;
    int first;
    struct counts c;
};

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct scan *s = arg;
    int first = s->first;
    s->first = 0;
    if (first)
        counts_cb(info, size, &s->c);
    if (s->n >= MODS_MAX)
        return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (lo >= hi)
        return 0;
    struct module *m = &s->mods[s->n];
    m->lo = lo;
    m->hi = hi;
    m->bias = info->dlpi_addr;
    /* The program itself has no name here: /proc/self/exe's. */
    if (info->dlpi_name && info->dlpi_name[0])
        set_basename(m->name, info->dlpi_name);
    else
        memcpy(m->name, first ? g_exe_name : "", first ? NAME_LEN : 1);
    read_build_id(m, info);
    m->hinted = 0;
    for (uint32_t k = 0; k < g_nspecs && !m->hinted; k++)
        m->hinted = (uint32_t)spec_matches(&g_specs[k], m);
    s->n++;
    return 0;
}

/* Heapsort (qsort may allocate). */
static void swap_bytes(char *a, char *b, size_t n)
{
    char t[64];
    while (n) {
        size_t k = n < sizeof t ? n : sizeof t;
        memcpy(t, a, k);
        memcpy(a, b, k);
        memcpy(b, t, k);
        a += k, b += k, n -= k;
    }
}

static void sift(char *b, size_t root, size_t n, size_t sz, int (*less)(const void *, const void *))
{
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n)
            return;
        if (c + 1 < n && less(b + c * sz, b + (c + 1) * sz))
            c++;
        if (!less(b + root * sz, b + c * sz))
            return;
        swap_bytes(b + root * sz, b + c * sz, sz);
        root = c;
    }
}

static void heapsort_(void *base, size_t n, size_t sz, int (*less)(const void *, const void *))
{
    char *b = base;
    for (size_t i = n / 2; i-- > 0;)
        sift(b, i, n, sz, less);
    for (size_t end = n; end-- > 1;) {
        swap_bytes(b, b + end * sz, sz);
        sift(b, 0, end, sz, less);
    }
}

static int module_less(const void *a, const void *b)
{
    return ((const struct module *)a)->lo < ((const struct module *)b)->lo;
}

/* The module of mods[0..n) (sorted) that contains a. */
static const struct module *module_at(const struct module *mods, uint32_t n, uintptr_t a)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) { /* the first with m.lo > a */
        uint32_t mid = lo + (hi - lo) / 2;
        if (mods[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && a < mods[lo - 1].hi ? &mods[lo - 1] : NULL;
}

static int same_module(const struct module *a, const struct module *b)
{
    return a->lo == b->lo && a->hi == b->hi && a->bias == b->bias && a->idlen == b->idlen &&
           !memcmp(a->id, b->id, a->idlen) && !strcmp(a->name, b->name);
}

/* ---- placement hints: actions ---- */
#ifndef SYS_mlock2
#if defined(__x86_64__)
#define SYS_mlock2 325
#elif defined(__aarch64__)
#define SYS_mlock2 284
#endif
#endif
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#define MPOL_PREFERRED_ 1
#define MASK_LONGS ((NODE_MAX + 1) / (8 * sizeof(unsigned long)) + 1)

static void bump(_Atomic uint64_t *v, uint64_t by)
{
    atomic_fetch_add_explicit(v, by, memory_order_relaxed);
}

static void failed_lock(int err)
{
    bump(&H.lock_fail, 1);
    atomic_store_explicit(&H.lock_errno, (uint32_t)err, memory_order_relaxed);
}

static void failed_bind(int err)
{
    bump(&H.bind_fail, 1);
    atomic_store_explicit(&H.bind_errno, (uint32_t)err, memory_order_relaxed);
}

/* Applies h's actions to the pages [lo, lo + len). */
static void act(const struct hint *h, uintptr_t lo, size_t len)
{
    if (h->lock) {
#ifdef SYS_mlock2
        long r = syscall(SYS_mlock2, lo, len, MLOCK_ONFAULT);
#else
        long r = -1;
        errno = ENOSYS;
#endif
        if (r == 0) {
            bump(&H.locks, 1);
            bump(&H.locked, len);
        } else
            failed_lock(errno);
    }
    if (h->node >= 0) {
        unsigned long mask[MASK_LONGS] = { 0 };
        unsigned bits = 8 * sizeof(unsigned long);
        mask[(unsigned)h->node / bits] |= 1ul << ((unsigned)h->node % bits);
        /* The kernel reads maxnode - 1 bits. */
        if (syscall(SYS_mbind, lo, len, MPOL_PREFERRED_, mask, (unsigned long)NODE_MAX + 2, 0) == 0) {
            bump(&H.binds, 1);
            bump(&H.bound, len);
        } else
            failed_bind(errno);
    }
    bump(&H.events, 1);
}

/* The symbol hints of a module just seen loaded. */
static void apply_symbols(const struct module *m)
{
    for (uint32_t i = 0; i < g_nsyms; i++) {
        const struct hint *h = &g_syms[i];
        if (!spec_matches(&g_specs[h->spec], m))
            continue;
        bump(&H.symbols, 1);
        uintptr_t a = m->bias + h->vaddr, end = a + h->size;
        if (end < a || a < m->lo || end > m->hi) { /* not this module's: a wrong hint */
            if (h->lock)
                failed_lock(EFAULT);
            if (h->node >= 0)
                failed_bind(EFAULT);
            bump(&H.events, 1);
            continue;
        }
        uintptr_t lo = a & ~(g_page - 1), hi = (end + g_page - 1) & ~(g_page - 1);
        act(h, lo, hi - lo);
    }
}

/* Takes in modules loaded (and unloaded) since the last look: at start, and
 * then at hinted-size allocations when the loader's counts have moved. */
static void refresh_modules(int force)
{
    if (!force) {
        struct counts c = { 0, 0, 0 };
        dl_iterate_phdr(counts_cb, &c);
        if (!c.ok || (c.adds == atomic_load_explicit(&g_seen_adds, memory_order_relaxed) &&
                      c.subs == atomic_load_explicit(&g_seen_subs, memory_order_relaxed)))
            return;
    }
    if (atomic_exchange(&g_rescanning, 1))
        return; /* another thread is at it */
    /* Only a rescanning thread changes g_mods. */
    const struct module *old = g_mods;
    uint32_t nold = g_nmods;
    struct module *spare = old == g_modbuf[0] ? g_modbuf[1] : g_modbuf[0];
    struct scan s = { .mods = spare, .n = 0, .first = 1 };
    dl_iterate_phdr(scan_cb, &s);
    heapsort_(spare, s.n, sizeof *spare, module_less);
    pthread_mutex_lock(&g_hlock);
    g_mods = spare;
    g_nmods = s.n;
    pthread_mutex_unlock(&g_hlock);
    uint64_t old_subs = atomic_load_explicit(&g_seen_subs, memory_order_relaxed);
    if (s.c.ok) {
        atomic_store_explicit(&g_seen_adds, s.c.adds, memory_order_relaxed);
        atomic_store_explicit(&g_seen_subs, s.c.subs, memory_order_relaxed);
    }
    for (uint32_t i = 0; i < s.n; i++) {
        if (!spare[i].hinted)
            continue;
        const struct module *was = module_at(old, nold, spare[i].lo);
        if (!was || !same_module(was, &spare[i]))
            apply_symbols(&spare[i]);
    }
    /* An unloaded module's addresses may hold another's code now. */
    if (!s.c.ok || s.c.subs != old_subs) {
        atomic_fetch_add(&g_vgen, 1);
        madvise((void *)g_vcache, sizeof(uint64_t) << VCACHE_BITS, MADV_DONTNEED);
    }
    atomic_store(&g_rescanning, 0);
}

/* The site hint (index + 1) for a return address, or 0. */
static uint32_t lookup_site(uintptr_t ret, int *known)
{
    uint32_t v = 0;
    pthread_mutex_lock(&g_hlock);
    const struct module *m = module_at(g_mods, g_nmods, ret);
    *known = m != NULL;
    if (m && m->hinted) {
        uint64_t rel = ret - m->bias;
        uint32_t lo = 0, hi = g_nsites;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (g_sites[mid].vaddr < rel)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < g_nsites && g_sites[lo].vaddr == rel; lo++)
            if (spec_matches(&g_specs[g_sites[lo].spec], m)) {
                v = lo + 1;
                break;
            }
    }
    pthread_mutex_unlock(&g_hlock);
    return v;
}

static uint32_t site_of(uintptr_t ret)
{
    _Atomic uint64_t *slot = NULL;
    uint64_t key = (uint64_t)ret << 16;
    int cacheable = ret && (uint64_t)ret >> 48 == 0;
    if (cacheable) {
        uint32_t mask = (1u << VCACHE_BITS) - 1;
        uint32_t i = (uint32_t)(((uint64_t)ret * 0x9E3779B97F4A7C15ull) >> (64 - VCACHE_BITS));
        slot = &g_vcache[i]; /* evicted if the probes find no room */
        for (int k = 0; k < VCACHE_PROBES; k++, i = (i + 1) & mask) {
            uint64_t w = atomic_load_explicit(&g_vcache[i], memory_order_relaxed);
            if (!w) {
                slot = &g_vcache[i];
                break;
            }
            if ((w & ~0xffffull) == key)
                return (uint32_t)(w & 0xffff);
        }
    }
    unsigned gen = atomic_load(&g_vgen);
    int known;
    uint32_t v = lookup_site(ret, &known);
    /* Not cached: an address in no module we know (a module loaded since
     * the last look, or generated code), or one looked up across a change. */
    if (cacheable && known && atomic_load(&g_vgen) == gen)
        atomic_store_explicit(slot, key | v, memory_order_relaxed);
    return v;
}

/* An allocation of n bytes at p with the stack u: apply the first site
 * hint met, innermost frame first, to the whole pages inside it. */
static void hint_alloc(void *p, size_t n, const struct unwind_state *u)
{
    unsigned depth = u->depth < HINT_DEPTH ? u->depth : HINT_DEPTH;
    for (unsigned i = 0; i < depth; i++) {
        uint32_t v = site_of((uintptr_t)u->frames[i]);
        if (!v)
            continue;
        uintptr_t a = (uintptr_t)p, end = a + n;
        uintptr_t lo = (a + g_page - 1) & ~(g_page - 1), hi = end & ~(g_page - 1);
        bump(&H.matched, 1);
        if (end < a || lo >= hi || lo < a) {
            bump(&H.empty, 1);
            bump(&H.events, 1);
        } else
            act(&g_sites[v - 1], lo, hi - lo);
        return;
    }
}

/* ---- sampling ---- */
static uint64_t next_rand(void)
{
    uint64_t x = ts.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ts.rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Bytes to the next sample: exponential with mean T (at least 1). */
static uint64_t draw(uint64_t T)
{
    if (!T)
        return 0;
    double u = (double)(next_rand() >> 11) * 0x1.0p-53; /* [0, 1) */
    double v = -log1p(-u) * (double)T;
    return v >= (double)MAX_SETTING ? MAX_SETTING : (uint64_t)v + 1;
}

static uint64_t weight_of(uint64_t n, uint64_t T)
{
    if (!T)
        return n;
    if (!n)
        return T;
    return (uint64_t)((double)n / -expm1(-(double)n / (double)T) + 0.5);
}

static uint32_t my_tid(void)
{
    if (!ts.tid)
        ts.tid = (uint32_t)syscall(SYS_gettid);
    return ts.tid;
}

static void record_alloc(void *p, uint64_t n, uint64_t weight, unsigned flags,
                         const struct unwind_state *stack)
{
    const struct unwind_state *u = stack;
    uint64_t t = now_ns();
    uint32_t tid = my_tid();
    pthread_mutex_lock(&g_lock);
    if (S.fd < 0 && S.pending_open && open_output_locked() < 0)
        disable_locked();
    if (S.fd >= 0) {
        uint32_t id = stack_id_locked(u);
        unsigned char *r = reserve(REC_HDR + ALLOC_LEN);
        put_hdr(r, REC_ALLOC, flags, ALLOC_LEN);
        put64(r + 8, t);
        put64(r + 16, (uint64_t)(uintptr_t)p);
        put64(r + 24, n);
        put64(r + 32, weight);
        put32(r + 40, id);
        put32(r + 44, tid);
        live_insert_locked((uint64_t)(uintptr_t)p);
        maybe_flush_locked(t);
    }
    pthread_mutex_unlock(&g_lock);
}

/* Is this allocation of n bytes passed straight through? The fast path:
 * two compares and a thread-local subtraction. */
static inline int unsampled(size_t n)
{
    if (LIKELY(n < atomic_load_explicit(&g_threshold, memory_order_relaxed) && n < ts.until)) {
        ts.until -= n;
        return 1;
    }
    return 0;
}

/* The slow path: hints for an allocation of at least g_hint_min bytes, and
 * the sampling decision; one unwind serves both. */
static NOINLINE void sample(void *p, size_t n, unsigned flags)
{
    if (ts.guard)
        return;
    int st = atomic_load_explicit(&g_state, memory_order_acquire); /* then the settings */
    if (st == UNDECIDED)
        return; /* ask again after the constructor */
    int saved = errno;
    ts.guard++;
    int hint = p && n >= g_hint_min, rec = 0;
    uint64_t weight = n;
    if (st == ENABLED) {
        uint64_t thr = g_sample_thr, T = g_interval;
        if (!ts.rng) { /* this thread's first allocation */
            ts.rng = (now_ns() ^ ((uint64_t)my_tid() << 32) ^ (uintptr_t)&ts) | 1;
            ts.until = draw(T);
        }
        if (n >= thr)
            rec = 1;
        else if (n < ts.until) /* here for the hints' sake only */
            ts.until -= n;
        else {
            rec = 1;
            weight = weight_of(n, T);
            ts.until = draw(T);
        }
        rec = rec && p;
    } else
        ts.until = UINT64_MAX; /* sampling is off: the threshold alone decides */
    if (hint)
        refresh_modules(0);
    int sites = hint && g_nsites;
    if (sites || rec) {
        struct unwind_state u;
        u.depth = 0;
        u.max = rec ? MAX_DEPTH : HINT_DEPTH;
        _Unwind_Backtrace(unwind_cb, &u); /* outside our locks: it may take the loader's */
        if (sites)
            hint_alloc(p, n, &u);
        if (rec)
            record_alloc(p, n, weight, flags, &u);
    }
    ts.guard--;
    errno = saved;
}

static inline int maybe_sampled(const void *p)
{
    return p && g_filter && atomic_load_explicit(filter_at(p), memory_order_relaxed);
}

/* p is about to be freed (or moved by realloc): record it if sampled. */
static NOINLINE void forget(void *p, unsigned flags)
{
    if (ts.guard) /* a free inside the sampler (or its signal handler) */
        return;
    int saved = errno;
    ts.guard++;
    pthread_mutex_lock(&g_lock);
    if (live_remove_locked((uint64_t)(uintptr_t)p) && S.fd >= 0) {
        uint64_t t = now_ns();
        unsigned char *r = reserve(REC_HDR + FREE_LEN);
        put_hdr(r, REC_FREE, flags, FREE_LEN);
        put64(r + 8, t);
        put64(r + 16, (uint64_t)(uintptr_t)p);
        maybe_flush_locked(t);
    }
    pthread_mutex_unlock(&g_lock);
    ts.guard--;
    errno = saved;
}

/* ---- the interposed functions ---- */
EXPORT void *malloc(size_t n)
{
    if (UNLIKELY(!real_malloc)) {
        resolve();
        if (!real_malloc)
            return boot_alloc(n, 16);
    }
    void *p = real_malloc(n);
    if (UNLIKELY(!unsampled(n)))
        sample(p, n, 0);
    return p;
}

EXPORT void free(void *p)
{
    if (UNLIKELY(in_boot(p)))
        return;
    if (UNLIKELY(maybe_sampled(p)))
        forget(p, 0);
    if (UNLIKELY(!real_free)) {
        resolve();
        if (!real_free)
            return;
    }
    real_free(p);
}

EXPORT void *calloc(size_t k, size_t m)
{
    size_t n;
    if (__builtin_mul_overflow(k, m, &n))
        n = SIZE_MAX; /* the real calloc fails it */
    if (UNLIKELY(!real_calloc)) {
        resolve();
        if (!real_calloc)
            return n == SIZE_MAX ? NULL : boot_alloc(n, 16); /* the arena is zeroed */
    }
    void *p = real_calloc(k, m);
    if (UNLIKELY(!unsampled(n)))
        sample(p, n, 0);
    return p;
}

static void *do_realloc(void *p, size_t n)
{
    if (UNLIKELY(in_boot(p))) { /* move a bootstrap block out of the arena */
        void *q = malloc(n);
        if (q) {
            size_t old = boot_size(p);
            memcpy(q, p, old < n ? old : n);
        }
        return q;
    }
    if (UNLIKELY(!real_realloc)) {
        resolve();
        if (!real_realloc)
            return p ? NULL : boot_alloc(n, 16);
    }
    /* Recorded before the real call: once it returns, the old address may be
     * another thread's new sample. A failed realloc thus reads as a free. */
    if (UNLIKELY(maybe_sampled(p)))
        forget(p, FLAG_REALLOC);
    void *q = real_realloc(p, n);
    if (UNLIKELY(!unsampled(n)) && q)
        sample(q, n, p ? FLAG_REALLOC : 0);
    return q;
}

EXPORT void *realloc(void *p, size_t n)
{
    return do_realloc(p, n);
}

EXPORT void *reallocarray(void *p, size_t k, size_t m)
{
    size_t n;
    if (__builtin_mul_overflow(k, m, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return do_realloc(p, n);
}

/* memalign, or aligned_alloc (which checks its arguments) where it exists. */
static void *aligned(int c11, size_t align, size_t n)
{
    if (UNLIKELY(!real_memalign)) {
        resolve();
        if (!real_memalign)
            return boot_alloc(n, align);
    }
    void *p = c11 && real_aligned_alloc ? real_aligned_alloc(align, n) : real_memalign(align, n);
    if (UNLIKELY(!unsampled(n)))
        sample(p, n, 0);
    return p;
}

EXPORT void *memalign(size_t align, size_t n)
{
    return aligned(0, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    return aligned(1, align, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (UNLIKELY(!real_posix_memalign)) {
        resolve();
        if (!real_posix_memalign) {
            void *p = boot_alloc(n, align);
            if (!p)
                return ENOMEM;
            *out = p;
            return 0;
        }
    }
    int r = real_posix_memalign(out, align, n);
    if (UNLIKELY(!unsampled(n)))
        sample(r ? NULL : *out, n, 0);
    return r;
}

EXPORT void *valloc(size_t n)
{
    if (UNLIKELY(!real_valloc)) {
        resolve();
        if (!real_valloc)
            return aligned(0, (size_t)sysconf(_SC_PAGESIZE), n);
    }
    void *p = real_valloc(n);
    if (UNLIKELY(!unsampled(n)))
        sample(p, n, 0);
    return p;
}

EXPORT void *pvalloc(size_t n)
{
    if (UNLIKELY(!real_pvalloc)) {
        resolve();
        if (!real_pvalloc) {
            size_t page = (size_t)sysconf(_SC_PAGESIZE);
            if (n > SIZE_MAX - page) {
                errno = ENOMEM;
                return NULL;
            }
            return aligned(0, page, (n + page - 1) & ~(page - 1));
        }
    }
    void *p = real_pvalloc(n);
    if (UNLIKELY(!unsampled(n)))
        sample(p, n, 0);
    return p;
}

/* ---- fork and exit ---- */
static void atfork_prepare(void)
{
    int saved = errno;
    ts.guard++;
    pthread_mutex_lock(&g_lock);
    flush_locked(); /* the child must not write the parent's records */
    errno = saved;
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&g_lock);
    ts.guard--;
}

/* The child starts a file of its own, at its first sample: a child that
 * only execs leaves none, and its new program gets BASE.PID. */
static void atfork_child(void)
{
    int saved = errno;
    pthread_mutex_init(&g_lock, NULL);
    ts.tid = 0;
    if (S.fd >= 0 && fd_is_ours())
        close(S.fd);
    S.fd = -1;
    S.used = 0;
    if (atomic_load(&g_state) == ENABLED) {
        /* Zero the inherited tables (private anonymous mappings). */
        madvise(S.live, LIVE_SLOTS * sizeof(uint64_t), MADV_DONTNEED);
        madvise(S.stacks, STACK_SLOTS * sizeof(struct stack_slot), MADV_DONTNEED);
        madvise((void *)g_filter, sizeof(uint32_t) << FILTER_BITS, MADV_DONTNEED);
        S.nlive = S.nstacks = 0;
        S.next_stack = 1;
        S.live_full = S.stacks_full = S.maps_truncated = 0;
        S.counters_dirty = 0;
        S.dirty = 0;
        S.exit_maps_done = 0;
        S.pending_open = 1;
    }
    /* The child counts its own hints. Memory locks are not inherited: the
     * child's next look at the modules finds them all new and applies the
     * symbol hints again (mbind policies are inherited; binding again is
     * harmless). Site-hinted blocks the parent made stay unlocked here.
     * g_hlock is not taken before the fork (no lock held across it that a
     * thread in the loader could wait for): the child starts it afresh,
     * with no module known, so a swap of the tables cut by the fork does
     * not matter. */
    S.hint_events = 0;
    if (g_hints) {
        pthread_mutex_init(&g_hlock, NULL);
        atomic_store(&g_rescanning, 0);
        g_nmods = 0;
        atomic_store(&g_seen_adds, UINT64_MAX);
        atomic_store(&g_seen_subs, UINT64_MAX);
    }
    memset((void *)&H, 0, sizeof H);
    g_hints_pid = getpid();
    g_hints_said = 0;
    ts.guard--;
    errno = saved;
}

static const char *errno_name(uint32_t e)
{
    switch (e) {
    case EPERM: return "EPERM";
    case ENOMEM: return "ENOMEM";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case EAGAIN: return "EAGAIN";
    case ENOSYS: return "ENOSYS";
    case EIO: return "EIO";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    default: return "errno";
    }
}

static size_t cat_failures(char *l, size_t n, size_t cap, uint64_t count, uint32_t err)
{
    n = cat_u64(l, n, cap, count);
    n = cat(l, n, cap, " failed");
    if (count) {
        n = cat(l, n, cap, " (last ");
        n = cat(l, n, cap, errno_name(err));
        n = cat(l, n, cap, " ");
        n = cat_u64(l, n, cap, err);
        n = cat(l, n, cap, ")");
    }
    return n;
}

/* UDAMON_HINTS_VERBOSE=1: what the hints did, one line at exit. */
static void say_hints(void)
{
    char l[512];
    size_t c = sizeof l, n = cat(l, 0, c, "udamon-preload: hints (pid ");
    n = cat_u64(l, n, c, (uint64_t)getpid());
    n = cat(l, n, c, "): ");
    n = cat_u64(l, n, c, g_nhints);
    n = cat(l, n, c, " read; ");
    n = cat_u64(l, n, c, ld(&H.matched));
    n = cat(l, n, c, " allocations matched, ");
    n = cat_u64(l, n, c, ld(&H.empty));
    n = cat(l, n, c, " with no whole page; ");
    n = cat_u64(l, n, c, ld(&H.symbols));
    n = cat(l, n, c, " symbols; mlock ");
    n = cat_u64(l, n, c, ld(&H.locks));
    n = cat(l, n, c, " ok ");
    n = cat_u64(l, n, c, ld(&H.locked));
    n = cat(l, n, c, " bytes, ");
    n = cat_failures(l, n, c, ld(&H.lock_fail), atomic_load(&H.lock_errno));
    n = cat(l, n, c, "; mbind ");
    n = cat_u64(l, n, c, ld(&H.binds));
    n = cat(l, n, c, " ok ");
    n = cat_u64(l, n, c, ld(&H.bound));
    n = cat(l, n, c, " bytes, ");
    n = cat_failures(l, n, c, ld(&H.bind_fail), atomic_load(&H.bind_errno));
    n = cat(l, n, c, "\n");
    ssize_t r = write(2, l, n);
    (void)r;
}

/* At exit (atexit, then again in the destructor for what came after): the
 * maps once, the counters, an END record, and a flush; the hints' line. */
static void finish(void)
{
    if (ts.guard) /* inside the sampler (a signal handler) */
        return;
    int saved = errno;
    ts.guard++;
    /* Not ours to write: sampling is off, or this is a vfork child sharing
     * our memory. */
    if (atomic_load(&g_state) == ENABLED && S.pid == getpid()) {
        pthread_mutex_lock(&g_lock);
        if (S.fd >= 0 && (S.dirty || hints_dirty_locked()) && S.pid == getpid()) {
            if (!S.exit_maps_done) {
                S.exit_maps_done = 1;
                write_maps_locked();
            }
            if (S.fd >= 0) {
                uint64_t t = now_ns();
                put_counters_locked(t);
                if (g_hints_requested)
                    put_hints_locked(t);
                unsigned char *r = reserve(REC_HDR + END_LEN);
                put_hdr(r, REC_END, 0, END_LEN);
                put64(r + 8, t);
                flush_locked();
                S.dirty = 0;
            }
        }
        pthread_mutex_unlock(&g_lock);
    }
    if (g_hints && g_hints_verbose && !g_hints_said && g_hints_pid == getpid()) {
        g_hints_said = 1;
        say_hints();
    }
    ts.guard--;
    errno = saved;
}

static void at_exit(void)
{
    finish();
}

__attribute__((destructor)) static void fini(void)
{
    finish();
}

/* Fork children often leave with _exit, which skips atexit: flush there too.
 * (exec is not covered: up to 100 ms of records are lost then.) */
static __attribute__((noreturn)) void exit_now(int status)
{
    finish();
    if (!real__exit)
        resolve();
    if (real__exit)
        real__exit(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

EXPORT void _exit(int status)
{
    exit_now(status);
}

EXPORT void _Exit(int status)
{
    exit_now(status);
}

/* ---- start ---- */
static int parse_env(const char *name, uint64_t dflt, uint64_t *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        *out = dflt;
        return 0;
    }
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (MAX_SETTING - 9) / 10) {
            complain("invalid value in", name, 0);
            return -1;
        }
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t me = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && me >= lo && me < hi) {
            g_self_lo = lo;
            g_self_hi = hi;
            return 1;
        }
    }
    return 0;
}

/* Names our own memory in /proc/PID/maps ("[anon:udamon-preload]", Linux
 * 5.17+ with CONFIG_ANON_VMA_NAME), so reports do not take it for the
 * program's; elsewhere the call fails and nothing changes. */
static void name_ours(void *p, size_t n)
{
    prctl(0x53564d41 /* PR_SET_VMA */, 0 /* PR_SET_VMA_ANON_NAME */, (unsigned long)p, n,
          (unsigned long)"udamon-preload");
}

static void *map_zeroed(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    name_ours(p, n);
    return p;
}

/* ---- placement hints: the file ---- */
static void hints_error(uint32_t line, const char *what, int err)
{
    char msg[PATH_MAX + 200];
    size_t n = cat(msg, 0, sizeof msg, "the hints file ");
    n = cat(msg, n, sizeof msg, g_hints_path);
    if (line) {
        n = cat(msg, n, sizeof msg, ", line ");
        n = cat_u64(msg, n, sizeof msg, line);
    }
    n = cat(msg, n, sizeof msg, ": ");
    cat(msg, n, sizeof msg, what);
    say(msg, NULL, err, "; placement hints are off");
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A hex number, with or without 0x. */
static int parse_hex(const char *t, size_t n, uint64_t *out)
{
    if (n > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'))
        t += 2, n -= 2;
    if (!n || n > 16)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hexval(t[i]);
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

static int parse_dec(const char *t, size_t n, uint64_t max, uint64_t *out)
{
    if (!n || n > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9' || v > (max - (uint64_t)(t[i] - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(t[i] - '0');
    }
    *out = v;
    return 0;
}

static int tok_is(const char *t, size_t n, const char *word)
{
    return strlen(word) == n && !memcmp(t, word, n);
}

struct hints_parse {
    int header;
    uint32_t dropped; /* hints past HINTS_MAX */
};

/* One line (no newline); NULL or what is wrong with it. */
static const char *hint_line(struct hints_parse *hp, const char *l, size_t len, uint32_t lineno)
{
    size_t i = 0;
    while (i < len && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i == len || l[0] == '#')
        return NULL; /* blank or a comment */
    const char *tok[8];
    size_t tl[8];
    int nt = 0;
    for (i = 0; i < len; i++)
        if ((unsigned char)l[i] < 0x20 || l[i] == 0x7f)
            return "a control character (fields are separated by single spaces)";
    for (i = 0; i <= len;) {
        size_t j = i;
        while (j < len && l[j] != ' ')
            j++;
        if (j == i)
            return "an empty field (fields are separated by single spaces)";
        if (nt == 8)
            return "too many fields";
        tok[nt] = l + i;
        tl[nt++] = j - i;
        i = j + 1;
    }
    if (!hp->header) {
        if (nt != 2 || !tok_is(tok[0], tl[0], "udamon-hints"))
            return "the first line is not 'udamon-hints 1'";
        if (!tok_is(tok[1], tl[1], "1"))
            return "unsupported version (this library reads 'udamon-hints 1')";
        hp->header = 1;
        return NULL;
    }
    int site = tok_is(tok[0], tl[0], "site"), sym = tok_is(tok[0], tl[0], "symbol");
    if (!site && !sym)
        return "not a hint (site or symbol)";
    if (nt != (site ? 5 : 6))
        return site ? "a site has 5 fields: site BUILD-ID|- FILE VADDR ACTION"
                    : "a symbol has 6 fields: symbol BUILD-ID|- FILE VADDR SIZE ACTION";
    struct spec sp;
    memset(&sp, 0, sizeof sp);
    if (!tok_is(tok[1], tl[1], "-")) {
        if (tl[1] % 2 || tl[1] > 2 * BUILD_ID_MAX)
            return "a build-id is an even number of hex digits, at most 128";
        for (size_t k = 0; k < tl[1]; k += 2) {
            int hi = hexval(tok[1][k]), lo = hexval(tok[1][k + 1]);
            if (hi < 0 || lo < 0)
                return "a build-id is hex digits, or -";
            sp.id[k / 2] = (unsigned char)(hi << 4 | lo);
        }
        sp.idlen = (uint8_t)(tl[1] / 2);
    }
    if (tl[2] >= NAME_LEN || memchr(tok[2], '/', tl[2]))
        return "a file is a basename (no '/') of at most 255 bytes";
    memcpy(sp.name, tok[2], tl[2]);
    struct hint h = { .line = lineno, .node = -1 };
    if (parse_hex(tok[3], tl[3], &h.vaddr) < 0)
        return "a vaddr is a hex number";
    if (sym && (parse_dec(tok[4], tl[4], 1ull << 48, &h.size) < 0 || !h.size ||
                h.vaddr + h.size < h.vaddr))
        return "a size is a decimal number of bytes, 1 to 2^48";
    const char *a = tok[nt - 1];
    size_t al = tl[nt - 1];
    uint64_t node;
    if (tok_is(a, al, "mlock"))
        h.lock = 1;
    else if (al > 5 && !memcmp(a, "node=", 5) && parse_dec(a + 5, al - 5, NODE_MAX, &node) == 0)
        h.node = (int32_t)node;
    else
        return "an action is mlock or node=N (N from 0 to 1023)";
    if (g_nhints >= HINTS_MAX) {
        hp->dropped++;
        return NULL;
    }
    uint32_t k = 0;
    while (k < g_nspecs && memcmp(&g_specs[k], &sp, sizeof sp))
        k++;
    if (k == g_nspecs)
        g_specs[g_nspecs++] = sp;
    h.spec = k;
    if (site)
        g_sites[g_nsites++] = h;
    else
        g_syms[g_nsyms++] = h;
    g_nhints++;
    return NULL;
}

static int site_less(const void *a, const void *b)
{
    const struct hint *x = a, *y = b;
    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr;
    if (x->spec != y->spec)
        return x->spec < y->spec;
    return x->line < y->line;
}

/* Reads the hints file; 0, or -1 (said on stderr) if there are none. */
static int read_hints(void)
{
    int fd = open(g_hints_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hints_error(0, "cannot open it", errno);
        return -1;
    }
    struct hints_parse hp = { 0, 0 };
    char buf[8192], line[HINT_LINE_MAX];
    size_t len = 0;
    int over = 0;
    uint32_t lineno = 0;
    const char *err = NULL;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            hints_error(0, "cannot read it", e);
            return -1;
        }
        if (r == 0) { /* a last line without a newline */
            if (len || over) {
                lineno++;
                err = over ? "a line of more than 1024 bytes" : hint_line(&hp, line, len, lineno);
            }
            break;
        }
        for (ssize_t i = 0; i < r && !err; i++) {
            if (buf[i] != '\n') {
                if (len < sizeof line)
                    line[len++] = buf[i];
                else
                    over = 1;
                continue;
            }
            lineno++;
            err = over ? "a line of more than 1024 bytes" : hint_line(&hp, line, len, lineno);
            len = 0;
            over = 0;
        }
        if (err)
            break;
    }
    close(fd);
    if (err) {
        hints_error(lineno, err, 0);
        return -1;
    }
    if (!hp.header) {
        hints_error(0, "no 'udamon-hints 1' line", 0);
        return -1;
    }
    if (hp.dropped) {
        g_hint_state |= HINTS_CUT;
        char msg[64];
        size_t n = cat(msg, 0, sizeof msg, "more than ");
        n = cat_u64(msg, n, sizeof msg, HINTS_MAX);
        cat(msg, n, sizeof msg, " hints in");
        say(msg, g_hints_path, 0, ": only the first 4096 are applied");
    }
    /* Sites by address; the same site twice (same module spec) is one,
     * with the actions of both (the first line's node wins). */
    heapsort_(g_sites, g_nsites, sizeof *g_sites, site_less);
    uint32_t w = 0;
    for (uint32_t i = 0; i < g_nsites; i++) {
        if (w && g_sites[w - 1].vaddr == g_sites[i].vaddr && g_sites[w - 1].spec == g_sites[i].spec) {
            g_sites[w - 1].lock |= g_sites[i].lock;
            if (g_sites[w - 1].node < 0)
                g_sites[w - 1].node = g_sites[i].node;
            continue;
        }
        g_sites[w++] = g_sites[i];
    }
    g_nsites = w;
    return 0;
}

static int parse_hint_env(const char *name, uint64_t dflt, uint64_t *out)
{
    const char *s = getenv(name);
    *out = dflt;
    if (!s || !*s)
        return 0;
    if (parse_dec(s, strlen(s), MAX_SETTING, out) < 0) {
        say("invalid value in", name, 0, "; placement hints are off");
        return -1;
    }
    return 0;
}

static void setup_hints(void)
{
    const char *path = getenv("UDAMON_HINTS");
    if (!path || !*path)
        return;
    g_hints_requested = 1;
    g_hints_pid = getpid();
    const char *v = getenv("UDAMON_HINTS_VERBOSE");
    g_hints_verbose = v && !strcmp(v, "1");
    uint64_t min;
    if (strlen(path) >= sizeof g_hints_path) {
        say("UDAMON_HINTS is too long:", path, 0, "; placement hints are off");
        goto refused;
    }
    cat(g_hints_path, 0, sizeof g_hints_path, path);
    if (parse_hint_env("UDAMON_HINT_MIN", DEFAULT_HINT_MIN, &min) < 0)
        goto refused;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        set_basename(g_exe_name, exe);
    }
    g_specs = map_zeroed(HINTS_MAX * sizeof *g_specs);
    g_sites = map_zeroed(HINTS_MAX * sizeof *g_sites);
    g_syms = map_zeroed(HINTS_MAX * sizeof *g_syms);
    g_modbuf[0] = map_zeroed(MODS_MAX * sizeof(struct module));
    g_modbuf[1] = map_zeroed(MODS_MAX * sizeof(struct module));
    g_vcache = map_zeroed(sizeof(uint64_t) << VCACHE_BITS);
    if (!g_specs || !g_sites || !g_syms || !g_modbuf[0] || !g_modbuf[1] || !g_vcache) {
        say("cannot map the hints' tables", NULL, errno, "; placement hints are off");
        goto refused;
    }
    if (read_hints() < 0) {
        g_nhints = g_nsites = g_nsyms = g_nspecs = 0;
        goto refused;
    }
    g_mods = g_modbuf[0];
    g_hints = 1;
    if (g_nhints) {
        refresh_modules(1); /* the symbols of the modules loaded now */
        g_hint_min = min ? min : 1;
    }
    return;
refused:
    g_hint_state |= HINTS_REFUSED;
}

static void setup(void)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0 && !(page & (page - 1)))
        g_page = (uintptr_t)page;
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&unwind_cb);
    setup_hints();
    const char *out = getenv("UDAMON_ALLOC_OUT");
    uint64_t thr, T;
    if (!out || !*out)
        goto off;
    if (parse_env("UDAMON_ALLOC_THRESHOLD", DEFAULT_THRESHOLD, &thr) < 0 ||
        parse_env("UDAMON_ALLOC_SAMPLE", DEFAULT_INTERVAL, &T) < 0)
        goto off;
    if (strlen(out) >= sizeof S.base - 48) {
        complain("UDAMON_ALLOC_OUT is too long:", out, 0);
        goto off;
    }
    cat(S.base, 0, sizeof S.base, out);
    S.buf = map_zeroed(BUF_SIZE);
    S.live = map_zeroed(LIVE_SLOTS * sizeof(uint64_t));
    S.stacks = map_zeroed(STACK_SLOTS * sizeof(struct stack_slot));
    g_filter = map_zeroed(sizeof(uint32_t) << FILTER_BITS);
    if (!S.buf || !S.live || !S.stacks || !g_filter) {
        complain("cannot map its tables", NULL, errno);
        g_filter = NULL;
        goto off;
    }
    S.next_stack = 1;
    g_interval = T;
    g_sample_thr = thr;
    atomic_store(&g_threshold, thr < g_hint_min ? thr : g_hint_min);
    pthread_mutex_lock(&g_lock);
    int ok = open_output_locked() == 0;
    if (!ok)
        disable_locked();
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        goto hooks;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(at_exit);
    atomic_store(&g_state, ENABLED);
    return;
off:
    atomic_store_explicit(&g_threshold, g_hint_min, memory_order_relaxed);
    atomic_store(&g_state, DISABLED);
hooks:
    if (g_hints) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atexit(at_exit);
    }
}

__attribute__((constructor)) static void init(void)
{
    if (!real_malloc)
        resolve();
    int saved = errno;
    ts.guard++;
    setup();
    ts.guard--;
    errno = saved;
}
