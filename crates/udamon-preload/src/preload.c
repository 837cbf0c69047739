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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

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

static void maybe_flush_locked(uint64_t now)
{
    if (now < S.last_flush + FLUSH_NS) /* `now` may predate the last flush */
        return;
    if (S.counters_dirty)
        put_counters_locked(now);
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
    put64(h + 24, atomic_load(&g_threshold));
    put64(h + 32, g_interval);
    write_maps_locked();
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
    unsigned depth;
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
    return u->depth == MAX_DEPTH ? _URC_END_OF_STACK : _URC_NO_REASON;
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

static void record_alloc(void *p, uint64_t n, uint64_t weight, unsigned flags)
{
    struct unwind_state u;
    u.depth = 0;
    _Unwind_Backtrace(unwind_cb, &u); /* outside the lock: it may take the loader's */
    uint64_t t = now_ns();
    uint32_t tid = my_tid();
    pthread_mutex_lock(&g_lock);
    if (S.fd < 0 && S.pending_open && open_output_locked() < 0)
        disable_locked();
    if (S.fd >= 0) {
        uint32_t id = stack_id_locked(&u);
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

/* Is this allocation of n bytes sampled? The fast path: two compares and a
 * thread-local subtraction. */
static inline int unsampled(size_t n)
{
    if (LIKELY(n < atomic_load_explicit(&g_threshold, memory_order_relaxed) && n < ts.until)) {
        ts.until -= n;
        return 1;
    }
    return 0;
}

static NOINLINE void sample(void *p, size_t n, unsigned flags)
{
    if (ts.guard)
        return;
    int st = atomic_load_explicit(&g_state, memory_order_acquire); /* then g_interval */
    if (st != ENABLED) {
        if (st == DISABLED)
            ts.until = UINT64_MAX;
        return; /* UNDECIDED: ask again after the constructor */
    }
    int saved = errno;
    ts.guard++;
    uint64_t thr = atomic_load_explicit(&g_threshold, memory_order_relaxed), T = g_interval;
    if (!ts.rng) { /* this thread's first allocation */
        ts.rng = (now_ns() ^ ((uint64_t)my_tid() << 32) ^ (uintptr_t)&ts) | 1;
        ts.until = draw(T);
        if (n < thr && n < ts.until) {
            ts.until -= n;
            goto out;
        }
    }
    uint64_t weight = n;
    if (n < thr) {
        weight = weight_of(n, T);
        ts.until = draw(T);
    }
    if (p)
        record_alloc(p, n, weight, flags);
out:
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
    ts.guard--;
    errno = saved;
}

/* At exit (atexit, then again in the destructor for what came after): the
 * maps once, the counters, an END record, and a flush. */
static void finish(void)
{
    /* Not ours to write: sampling is off, we are inside the sampler (a
     * signal handler), or this is a vfork child sharing our memory. */
    if (atomic_load(&g_state) != ENABLED || ts.guard || S.pid != getpid())
        return;
    int saved = errno;
    ts.guard++;
    pthread_mutex_lock(&g_lock);
    if (S.fd >= 0 && S.dirty && S.pid == getpid()) {
        if (!S.exit_maps_done) {
            S.exit_maps_done = 1;
            write_maps_locked();
        }
        if (S.fd >= 0) {
            uint64_t t = now_ns();
            put_counters_locked(t);
            unsigned char *r = reserve(REC_HDR + END_LEN);
            put_hdr(r, REC_END, 0, END_LEN);
            put64(r + 8, t);
            flush_locked();
            S.dirty = 0;
        }
    }
    pthread_mutex_unlock(&g_lock);
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

static void *map_zeroed(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void setup(void)
{
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
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&unwind_cb);
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
    atomic_store(&g_threshold, thr);
    pthread_mutex_lock(&g_lock);
    int ok = open_output_locked() == 0;
    if (!ok)
        disable_locked();
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(at_exit);
    atomic_store(&g_state, ENABLED);
    return;
off:
    atomic_store_explicit(&g_threshold, UINT64_MAX, memory_order_relaxed);
    atomic_store(&g_state, DISABLED);
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
