/*
 * forker: a program of several processes whose memory is known, for the
 * whole-program scenarios (process trees, cgroups, many targets).
 *
 *   forker N SECONDS [churn]
 *
 * The parent forks N workers and ends after SECONDS: it sends its workers
 * SIGTERM, SIGKILL to any still there 2 s later, reaps them all and exits 0.
 * SIGTERM, SIGINT or SIGHUP to the parent end it the same way, earlier.
 * Workers die with the parent (PR_SET_PDEATHSIG) if it is killed.
 *
 * Worker i (its slot, 0..N-1) maps its own memory after the fork, in two
 * anonymous mappings (MADV_NOHUGEPAGE, so every 4 KiB page is checked on
 * its own): a hot set of i+1 MiB that it writes one byte of every page of,
 * once per period (20 ms: the pass, then a sleep until the next period
 * starts, at least 1 ms, so N workers do not monopolise the guest's CPUs),
 * and a cold set of 16 MiB written once, at the start, never again.
 * In churn mode each worker lives a random 0.5-2 s (from its start,
 * allocation included) and exits by itself; the parent forks a replacement
 * in its slot, until SECONDS pass.
 *
 * Environment:
 *   FORKER_LOG=PATH             append the log there (default: stdout)
 *   FORKER_TOTAL_HOT_MIB=M      the hot sets total M MiB, split evenly over
 *                               the N workers (instead of i+1 MiB each): 1, 8
 *                               and 32 processes then touch the same memory
 *   FORKER_TOTAL_COLD_MIB=M     the cold sets total M MiB, split evenly
 *                               (instead of 16 MiB each)
 *   FORKER_PERIOD_MS=P          the hot set's period (default 20)
 *   FORKER_CGROUP=DIR           the parent moves itself into this cgroup v2
 *                               directory (DIR/cgroup.procs) before it forks
 *   FORKER_SEED=S               seed of churn's lifetimes (default: from the
 *                               clock)
 *
 * Log, one line each, written with one write(2) (uptime: CLOCK_BOOTTIME,
 * the clock of /proc/uptime and of /proc/PID/stat's start time):
 *   forker <pid> start <uptime_s> workers <N> seconds <S> mode <steady|churn> period_ms <P>
 *   worker <pid> start <uptime_s> hot_mib <n> slot <i> cold_mib <n> [life_s <s>]
 *                                   by the worker, first thing after the fork
 *   worker <pid> ready <uptime_s> hot 0x<start> 0x<end> cold 0x<start> 0x<end> other_kib <k>
 *                                   memory in place, the hot loop starts; other_kib:
 *                                   what else it maps (text, data, stack, vdso;
 *                                   not [vsyscall])
 *   ready pid=<parent> workers <N> <uptime_s>
 *                                   once the first N workers are ready
 *   worker <pid> exit <uptime_s> status <exit:C|signal:S>
 *                                   by the parent when it reaps the worker
 *   forker <pid> exit <uptime_s> workers_started <n>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_WORKERS 1024
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static int log_fd = 1;
static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static double clock_s(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double uptime(void)
{
	return clock_s(CLOCK_BOOTTIME);
}

/* one line, one write: lines of several processes never mix */
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	ssize_t w = write(log_fd, buf, n);
	(void)w;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* KiB this process maps besides [a0,a1) and [b0,b1) ([vsyscall] left out:
 * no monitor sees it) */
static unsigned long other_kib(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1)
{
	static char buf[65536];
	int fd = open("/proc/self/maps", O_RDONLY);
	if (fd < 0)
		return 0;
	size_t len = 0;
	ssize_t r;
	while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
		len += r;
	close(fd);
	buf[len] = 0;
	unsigned long kib = 0;
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *end;
		uintptr_t s = strtoul(line, &end, 16);
		uintptr_t e = *end == '-' ? strtoul(end + 1, NULL, 16) : s;
		if (e > s && !strstr(line, "[vsyscall]")) {
			/* adjacent anonymous mappings of the same flags are one
			 * VMA: take out the overlap with the hot and cold sets */
			uintptr_t sz = e - s;
			uintptr_t lo = s > a0 ? s : a0, hi = e < a1 ? e : a1;
			if (hi > lo)
				sz -= hi - lo;
			lo = s > b0 ? s : b0;
			hi = e < b1 ? e : b1;
			if (hi > lo)
				sz -= hi - lo;
			kib += sz / 1024;
		}
		line = next;
	}
	return kib;
}

static unsigned char *map_set(size_t bytes)
{
	unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		say("forker: mmap of %zu bytes failed: %s", bytes, strerror(errno));
		_exit(1);
	}
	madvise(p, bytes, MADV_NOHUGEPAGE);
	/* fault it in inside the kernel (page by page from user space costs a
	 * kernel entry each, slow under TCG), then write every page once */
	madvise(p, bytes, MADV_POPULATE_WRITE);
	for (size_t off = 0; off < bytes; off += PAGE)
		p[off] = (unsigned char)(off >> 12);
	return p;
}

static void worker(pid_t parent, int slot, size_t hot, size_t cold, long period_ms, double life, int ready_fd)
{
	double t_start = clock_s(CLOCK_MONOTONIC);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	pid_t me = getpid();
	if (life > 0)
		say("worker %d start %.3f hot_mib %g slot %d cold_mib %g life_s %.3f", (int)me, uptime(),
		     hot / 1048576.0, slot, cold / 1048576.0, life);
	else
		say("worker %d start %.3f hot_mib %g slot %d cold_mib %g", (int)me, uptime(), hot / 1048576.0,
		     slot, cold / 1048576.0);
	unsigned char *c = map_set(cold);
	unsigned char *h = map_set(hot);
	say("worker %d ready %.3f hot %#lx %#lx cold %#lx %#lx other_kib %lu", (int)me, uptime(),
	     (unsigned long)h, (unsigned long)(h + hot), (unsigned long)c, (unsigned long)(c + cold),
	     other_kib((uintptr_t)h, (uintptr_t)(h + hot), (uintptr_t)c, (uintptr_t)(c + cold)));
	char one = 1;
	ssize_t w = write(ready_fd, &one, 1);
	(void)w;
	close(ready_fd);

	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	long period_ns = period_ms * 1000000L;
	for (;;) {
		volatile unsigned char *v = h;
		for (size_t off = 0; off < hot; off += PAGE)
			v[off]++;
		if (life > 0 && clock_s(CLOCK_MONOTONIC) - t_start >= life)
			_exit(0);
		next.tv_nsec += period_ns;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* behind (the pass took longer than a period): no catching up,
		 * a 1 ms rest and the schedule starts again from here */
		if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
			next = now;
			next.tv_nsec += 1000000L;
			if (next.tv_nsec >= 1000000000L) {
				next.tv_nsec -= 1000000000L;
				next.tv_sec++;
			}
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
}

/* Worker p was reaped with status st: its slot is freed and its exit
 * logged. */
static void reaped(pid_t p, int st, pid_t *pids, int n)
{
	double t = uptime();
	for (int i = 0; i < n; i++)
		if (pids[i] == p)
			pids[i] = 0;
	if (WIFSIGNALED(st))
		say("worker %d exit %.3f status signal:%d", (int)p, t, WTERMSIG(st));
	else
		say("worker %d exit %.3f status exit:%d", (int)p, t, WEXITSTATUS(st));
}

static double env_num(const char *name, double dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end;
	double d = strtod(v, &end);
	if (*end || d < 0) {
		fprintf(stderr, "forker: bad %s=%s\n", name, v);
		exit(2);
	}
	return d;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	double seconds = argc > 2 ? atof(argv[2]) : 0;
	int churn = argc > 3 && strcmp(argv[3], "churn") == 0;
	if (n < 1 || n > MAX_WORKERS || seconds <= 0 || (argc > 3 && !churn) || argc > 4) {
		fprintf(stderr, "usage: %s N SECONDS [churn]   (N 1-%d; see the source for the environment)\n",
			argv[0], MAX_WORKERS);
		return 2;
	}
	double total_hot = env_num("FORKER_TOTAL_HOT_MIB", 0);
	double total_cold = env_num("FORKER_TOTAL_COLD_MIB", 0);
	long period_ms = (long)env_num("FORKER_PERIOD_MS", 20);
	if (period_ms < 1)
		period_ms = 1;
	const char *logpath = getenv("FORKER_LOG");
	if (logpath && *logpath) {
		log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			fprintf(stderr, "forker: cannot open %s: %s\n", logpath, strerror(errno));
			return 1;
		}
	}
	const char *cg = getenv("FORKER_CGROUP");
	if (cg && *cg) {
		char path[4096];
		snprintf(path, sizeof path, "%s/cgroup.procs", cg);
		int fd = open(path, O_WRONLY);
		if (fd < 0 || write(fd, "0\n", 2) != 2) {
			fprintf(stderr, "forker: cannot join cgroup %s: %s\n", cg, strerror(errno));
			return 1;
		}
		close(fd);
	}
	const char *seed = getenv("FORKER_SEED");
	rng_state = seed && *seed ? strtoull(seed, NULL, 0) : (uint64_t)(clock_s(CLOCK_MONOTONIC) * 1e9);
	rng_state ^= (uint64_t)getpid() << 32;
	if (!rng_state)
		rng_state = 1;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	int ready_pipe[2];
	if (pipe2(ready_pipe, O_NONBLOCK) != 0) {
		perror("pipe2");
		return 1;
	}
	pid_t parent = getpid();
	say("forker %d start %.3f workers %d seconds %g mode %s period_ms %ld", (int)parent, uptime(), n, seconds,
	     churn ? "churn" : "steady", period_ms);

	static pid_t pids[MAX_WORKERS];
	int started = 0, nready = 0, said_ready = 0;
	size_t per_cold = total_cold > 0 ? (size_t)(total_cold * 256 / n) * PAGE : (size_t)16 << 20;
	if (per_cold < PAGE)
		per_cold = PAGE;

	/* spawn SLOT: a worker in it; 0 on success */
	double t0 = clock_s(CLOCK_MONOTONIC);
	for (int phase = 0;; phase++) {
		/* fork into every empty slot (all of them at first; in churn
		 * mode those whose worker exited) */
		for (int i = 0; i < n && !stop && (phase == 0 || churn) && clock_s(CLOCK_MONOTONIC) - t0 < seconds; i++) {
			if (pids[i])
				continue;
			size_t hot = total_hot > 0 ? (size_t)(total_hot * 256 / n) * PAGE : ((size_t)(i + 1)) << 20;
			if (hot < PAGE)
				hot = PAGE;
			double life = churn ? 0.5 + 1.5 * (double)(rng() >> 11) / (double)(1ULL << 53) : 0;
			pid_t p = fork();
			if (p < 0) {
				say("forker: fork failed: %s", strerror(errno));
				stop = 1;
				break;
			}
			if (p == 0) {
				close(ready_pipe[0]);
				worker(parent, i, hot, per_cold, period_ms, life, ready_pipe[1]);
				_exit(0);
			}
			pids[i] = p;
			started++;
		}
		if (stop || clock_s(CLOCK_MONOTONIC) - t0 >= seconds)
			break;
		struct timespec nap = {0, 10 * 1000000L};
		nanosleep(&nap, NULL);
		/* workers that are ready */
		char buf[256];
		ssize_t r;
		while ((r = read(ready_pipe[0], buf, sizeof buf)) > 0)
			nready += r;
		if (!said_ready && nready >= n) {
			said_ready = 1;
			say("ready pid=%d workers %d %.3f", (int)parent, n, uptime());
		}
		/* workers that exited */
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			reaped(p, st, pids, n);
	}

	/* the end: SIGTERM, 2 s, SIGKILL; every worker reaped */
	for (int i = 0; i < n; i++)
		if (pids[i])
			kill(pids[i], SIGTERM);
	double t_end = clock_s(CLOCK_MONOTONIC);
	int killed = 0;
	for (;;) {
		int live = 0;
		for (int i = 0; i < n; i++)
			live += pids[i] != 0;
		if (!live)
			break;
		if (!killed && clock_s(CLOCK_MONOTONIC) - t_end > 2.0) {
			for (int i = 0; i < n; i++)
				if (pids[i])
					kill(pids[i], SIGKILL);
			killed = 1;
		}
		int st;
		pid_t p = waitpid(-1, &st, killed ? 0 : WNOHANG);
		if (p > 0) {
			reaped(p, st, pids, n);
		} else if (p < 0 && errno == ECHILD) {
			break;
		} else if (p == 0) {
			struct timespec nap = {0, 10 * 1000000L};
			nanosleep(&nap, NULL);
		}
	}
	say("forker %d exit %.3f workers_started %d", (int)parent, uptime(), started);
	return 0;
}
