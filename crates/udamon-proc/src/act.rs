//! Actions on a live process's memory: `process_madvise(2)` through a pidfd
//! and `move_pages(2)` on the process a pidfd holds. Every call is made on
//! ranges re-checked against the process's current mappings, right before
//! acting.
//!
//! `move_pages` has no pidfd form: it takes a pid. [`Pidfd::move_to_node`]
//! makes it act on the process the pidfd holds, not on whatever process has
//! the pid, by checking the pidfd around every call. A pid is not free for
//! reuse until its process has exited *and* been reaped, and a pidfd polls
//! readable as soon as its process exits (becomes a zombie). So:
//!
//! - before each call: the pidfd is polled; if the process has exited,
//!   nothing is called (the pid may already name another process);
//! - after each call: the pidfd is polled again. If the process is still
//!   there, it was there during the whole call (exit is final), so the pid
//!   named it when the kernel looked it up: the call acted on it. Proven.
//! - if it exited between the two polls, the call may have reached another
//!   process only if, in that window, the target exited, was reaped by its
//!   parent, and the kernel handed its pid to a new process (pids are given
//!   out cyclically: the whole pid space, `kernel.pid_max`, must wrap around
//!   first). The pid's start time is then compared with the target's: a
//!   different process is reported as [`PidReused`] (the pages may have been
//!   moved; they cannot be moved back). The one case no check can see: a
//!   process that took the pid, had its pages moved, and exited and was
//!   reaped again, all before the second poll.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use udamon_core::schemes::Action;
use udamon_core::AddrRange;

use crate::maps::Mapping;

/// `madvise` advice values (include/uapi/asm-generic/mman-common.h).
const MADV_WILLNEED: i32 = 3;
const MADV_COLD: i32 = 20;
const MADV_PAGEOUT: i32 = 21;
const MADV_COLLAPSE: i32 = 25;
/// `move_pages` flag: move pages mapped by this process only (uapi mempolicy.h).
const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// Pages per `move_pages` call.
const MOVE_BATCH: usize = 4096;
/// `iovec`s per `process_madvise` call (the kernel's UIO_FASTIOV is 8,
/// IOV_MAX 1024).
const IOV_BATCH: usize = 512;

/// The advice `process_madvise` takes for `action`, where it takes one.
/// The kernel accepts only these four from another process.
pub fn madvise_advice(action: Action) -> Option<i32> {
    match action {
        Action::Pageout => Some(MADV_PAGEOUT),
        Action::Cold => Some(MADV_COLD),
        Action::Willneed => Some(MADV_WILLNEED),
        Action::Collapse => Some(MADV_COLLAPSE),
        _ => None,
    }
}

/// Whether user-space operations can carry out `action` on a process.
/// `stat` does nothing by design; migrations go through `move_pages`.
pub fn supported(action: Action) -> bool {
    madvise_advice(action).is_some()
        || matches!(
            action,
            Action::Stat | Action::MigrateHot | Action::MigrateCold
        )
}

/// The parts of `range` that lie in mappings the action may touch: the
/// process's current mappings, without the kernel's special areas
/// (`[vsyscall]`, `[vvar]`, `[vdso]`), which no advice or migration takes.
pub fn live_parts(range: AddrRange, mappings: &[Mapping]) -> Vec<AddrRange> {
    mappings
        .iter()
        .filter(|m| {
            !matches!(
                m.path.as_str(),
                "[vsyscall]" | "[vvar]" | "[vdso]" | "[vvar_vclock]"
            )
        })
        .filter_map(|m| {
            let s = range.start.max(m.range.start);
            let e = range.end.min(m.range.end);
            (s < e).then(|| AddrRange::new(s, e))
        })
        .collect()
}

/// A `move_pages` call may have acted on another process: the target exited
/// around the call and its pid now names a process with another start time.
#[derive(Debug, thiserror::Error)]
#[error(
    "pid {pid} exited while move_pages ran and now names another process (start time {now}, \
     the target's was {}): the call may have moved that process's pages",
    was.map_or("unknown".to_string(), |w| w.to_string())
)]
pub struct PidReused {
    pub pid: u32,
    /// The target's start time (`None`: it could not be read when the
    /// pidfd was opened, so any process on the pid now may be another).
    pub was: Option<u64>,
    pub now: u64,
}

/// Whether `e` (from [`Pidfd::move_to_node`]) says the call may have acted on
/// another process ([`PidReused`]): to be reported even though the target
/// is gone.
pub fn pid_reused(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<PidReused>())
}

/// A pidfd of a process: `process_madvise` goes through it, and
/// `move_pages` is checked around it (see the module's documentation).
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
    pid: u32,
    /// The process's start time (`/proc/PID/stat` field 22), read after the
    /// pidfd was opened while it still held a live process: that process's.
    start_time: Option<u64>,
}

impl Pidfd {
    /// Opens a pidfd for `pid` of this machine (`/proc` of "/").
    pub fn open(pid: u32) -> io::Result<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut me = Self {
            // SAFETY: the kernel just gave us this fd, and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            pid,
            start_time: None,
        };
        // Read after the open: if the process is still alive afterwards,
        // the pid named it during the read.
        let st = crate::stat::start_time(std::path::Path::new("/"), pid);
        me.start_time = st.filter(|_| !me.exited());
        Ok(me)
    }

    /// The pid of the process this pidfd holds.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process has exited (the pidfd polls readable then).
    /// A poll that fails reads as "not exited".
    pub fn exited(&self) -> bool {
        self.poll_exited().unwrap_or(false)
    }

    /// Whether the process has exited, or why the pidfd could not be
    /// polled.
    fn poll_exited(&self) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd, no wait.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            if n >= 0 {
                return Ok(n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn raw(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Advises `ranges` of the process; returns the bytes the kernel advised.
    ///
    /// The kernel advises the ranges of one call in order and stops at the
    /// first it cannot advise (a locked, PFN-mapped or hugetlb mapping:
    /// EINVAL; one unmapped since the maps were read: ENOMEM), returning
    /// the bytes done before it, or that error when it is the first. That
    /// range alone is skipped and the rest are advised: a short count never
    /// drops the ranges after it. Errors about the process itself (gone,
    /// not permitted, no such call) end the work.
    pub fn madvise(&self, ranges: &[AddrRange], advice: i32) -> io::Result<u64> {
        let mut done = 0u64;
        let mut i = 0;
        while i < ranges.len() {
            let chunk = &ranges[i..(i + IOV_BATCH).min(ranges.len())];
            let iov: Vec<libc::iovec> = chunk
                .iter()
                .map(|r| libc::iovec {
                    iov_base: r.start as *mut libc::c_void,
                    iov_len: r.sz() as usize,
                })
                .collect();
            // SAFETY: the iovecs describe the target's address space, which
            // the kernel reads only as addresses; `iov` outlives the call.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_process_madvise,
                    self.raw(),
                    iov.as_ptr(),
                    iov.len(),
                    advice,
                    0u32,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // The first range cannot be advised: skip it alone.
                    Some(libc::EINVAL | libc::ENOMEM | libc::EFAULT) => {
                        i += 1;
                        continue;
                    }
                    _ => return Err(e),
                }
            }
            let mut left = n as u64;
            done += left;
            // Ranges done in full; the kernel stopped at the next one (if
            // any), which is skipped.
            let mut k = 0;
            while k < chunk.len() && left >= chunk[k].sz() {
                left -= chunk[k].sz();
                k += 1;
            }
            i += if k == chunk.len() { k } else { k + 1 };
        }
        Ok(done)
    }
}

impl Pidfd {
    /// Moves the present pages of `ranges` of the process this pidfd holds
    /// to node `nid` with `move_pages(2)`; returns the bytes that are on
    /// `nid` afterwards among the pages that are present (pages already
    /// there count, as in the kernel's `migrate_pages` accounting of
    /// applied bytes).
    ///
    /// `move_pages` takes a pid: the pidfd is polled before and after each
    /// call (see the module's documentation). Errors: of kind `NotFound`
    /// when the process had exited before a call (nothing more is called)
    /// or exited during one and its pid names no other process afterwards;
    /// [`PidReused`] (see [`pid_reused`]) when the pid names another
    /// process afterwards; otherwise the kernel's error.
    pub fn move_to_node(&self, ranges: &[AddrRange], nid: u32) -> io::Result<u64> {
        self.move_to_nodes(ranges, |_| nid)
    }

    /// [`move_to_node`](Self::move_to_node) with each page's node given by
    /// its address (weighted destinations); returns the bytes that reached
    /// their node.
    pub fn move_to_nodes(
        &self,
        ranges: &[AddrRange],
        node_of: impl Fn(u64) -> u32,
    ) -> io::Result<u64> {
        let pid = self.pid;
        self.move_with(
            ranges,
            node_of,
            |pages, nodes, status| {
                // SAFETY: the three arrays have `pages.len()` entries and
                // outlive the call; the kernel only reads the page addresses
                // as addresses.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_move_pages,
                        pid as libc::pid_t,
                        pages.len() as libc::c_ulong,
                        pages.as_ptr(),
                        nodes.as_ptr(),
                        status.as_mut_ptr(),
                        MPOL_MF_MOVE,
                    )
                };
                if r < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            },
            || crate::stat::start_time(std::path::Path::new("/"), pid),
        )
    }

    /// [`move_to_node`](Self::move_to_node) with the system call and the
    /// start-time lookup given: the seam the tests use.
    fn move_with(
        &self,
        ranges: &[AddrRange],
        node_of: impl Fn(u64) -> u32,
        mut call: impl FnMut(&[*mut libc::c_void], &[libc::c_int], &mut [libc::c_int]) -> io::Result<()>,
        start_now: impl Fn() -> Option<u64>,
    ) -> io::Result<u64> {
        const PAGE: u64 = 4096;
        let pid = self.pid;
        let mut pages: Vec<*mut libc::c_void> = Vec::with_capacity(MOVE_BATCH);
        let mut moved = 0u64;
        let mut flush = |pages: &mut Vec<*mut libc::c_void>| -> io::Result<()> {
            if pages.is_empty() {
                return Ok(());
            }
            // A pidfd that cannot be polled proves nothing: no call.
            if self.poll_exited()? {
                // The pid may already be another process's: no call.
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    ExitedError(format!(
                        "pid {pid} exited before move_pages: nothing more is moved"
                    )),
                ));
            }
            let nodes: Vec<libc::c_int> = pages
                .iter()
                .map(|p| node_of(*p as u64) as libc::c_int)
                .collect();
            let mut status = vec![0 as libc::c_int; pages.len()];
            let r = call(pages, &nodes, &mut status);
            // Unsure (the poll failed) counts as exited: the start time
            // is then compared.
            if self.poll_exited().unwrap_or(true) {
                // It exited around the call: did the pid name another
                // process by then?
                let gone = |now: &str| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        ExitedError(format!("pid {pid} exited while move_pages ran ({now})")),
                    )
                };
                return Err(match (self.start_time, start_now()) {
                    (_, None) => gone("its pid names no process now"),
                    (Some(was), Some(now)) if now == was => gone("it has not been reaped yet"),
                    (was, Some(now)) => io::Error::other(PidReused { pid, was, now }),
                });
            }
            r?;
            moved += status.iter().zip(&nodes).filter(|(s, n)| s == n).count() as u64 * PAGE;
            pages.clear();
            Ok(())
        };
        for r in ranges {
            let mut a = r.start / PAGE * PAGE;
            while a < r.end {
                pages.push(a as *mut libc::c_void);
                if pages.len() == MOVE_BATCH {
                    flush(&mut pages)?;
                }
                a += PAGE;
            }
        }
        flush(&mut pages)?;
        Ok(moved)
    }
}

/// The target exited before or during a `move_pages` call: the message
/// says which. Carried in an `io::Error` of kind `NotFound`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ExitedError(String);

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, path: &str) -> Mapping {
        Mapping {
            range: AddrRange::new(start, end),
            perms: "rw-p".into(),
            offset: 0,
            dev: "00:00".into(),
            inode: 0,
            path: path.into(),
        }
    }

    #[test]
    fn live_parts_intersect_current_mappings() {
        let maps = [
            m(0x1000, 0x3000, ""),
            m(0x5000, 0x8000, "[heap]"),
            m(0xffff_0000, 0xffff_1000, "[vsyscall]"),
        ];
        assert_eq!(
            live_parts(AddrRange::new(0x2000, 0x6000), &maps),
            vec![
                AddrRange::new(0x2000, 0x3000),
                AddrRange::new(0x5000, 0x6000)
            ]
        );
        assert!(live_parts(AddrRange::new(0xffff_0000, 0xffff_1000), &maps).is_empty());
        assert!(live_parts(AddrRange::new(0x3000, 0x5000), &maps).is_empty());
    }

    #[test]
    fn only_four_advices_reach_process_madvise() {
        let advised: Vec<_> = Action::ALL
            .iter()
            .filter(|a| madvise_advice(**a).is_some())
            .map(|a| a.name())
            .collect();
        assert_eq!(advised, ["willneed", "cold", "pageout", "collapse"]);
        assert!(supported(Action::MigrateCold) && supported(Action::Stat));
        assert!(!supported(Action::LruPrio) && !supported(Action::Hugepage));
    }

    /// A range that cannot be advised (here: unmapped between two mapped
    /// ones) is skipped alone; the ranges after it are still advised.
    #[test]
    fn an_unadvisable_range_does_not_drop_the_rest() {
        const P: usize = 4096;
        // SAFETY: a fresh anonymous mapping of 48 pages, the middle 16
        // unmapped again; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                48 * P,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let b = base as u64;
        // SAFETY: within the mapping just made.
        unsafe {
            std::ptr::write_bytes(base as *mut u8, 1, 48 * P);
            assert_eq!(
                libc::munmap((b + 16 * P as u64) as *mut libc::c_void, 16 * P),
                0
            );
        }
        let p = P as u64;
        let ranges = [
            AddrRange::new(b, b + 16 * p),
            AddrRange::new(b + 16 * p, b + 32 * p),
            AddrRange::new(b + 32 * p, b + 48 * p),
        ];
        let fd = Pidfd::open(std::process::id()).expect("pidfd_open");
        match fd.madvise(&ranges, MADV_COLD) {
            Ok(n) => assert_eq!(n, 32 * p),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSYS), "{e}"),
        }
        // SAFETY: unmapping what is left of our own mapping.
        unsafe {
            libc::munmap(base, 16 * P);
            libc::munmap((b + 32 * p) as *mut libc::c_void, 16 * P);
        }
    }

    /// A process to act on (killed and reaped by the caller).
    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .expect("spawn sleep")
    }

    /// Blocks until the pidfd's process has exited (without reaping it).
    fn wait_exit(fd: &Pidfd) {
        let mut p = libc::pollfd {
            fd: fd.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; waits until the process exits.
        while unsafe { libc::poll(&mut p, 1, -1) } != 1 {}
        assert!(fd.exited());
    }

    const PAGES: [AddrRange; 1] = [AddrRange {
        start: 0x10_0000,
        end: 0x10_3000,
    }];

    /// The pid of a process that exited may name another process at any
    /// moment: no `move_pages` reaches it (the old code called move_pages
    /// with the raw pid regardless).
    #[test]
    fn move_pages_is_never_called_once_the_target_exited() {
        let mut c = sleeper();
        let fd = Pidfd::open(c.id()).expect("pidfd_open");
        c.kill().unwrap();
        wait_exit(&fd);
        let mut calls = 0;
        let e = fd
            .move_with(
                &PAGES,
                |_| 0,
                |_, _, _| {
                    calls += 1;
                    Ok(())
                },
                || None,
            )
            .unwrap_err();
        assert_eq!(calls, 0);
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("exited before move_pages"), "{e}");
        assert!(!pid_reused(&e));
        c.wait().unwrap();
    }

    /// A target that exits during the call is said: as reused when its pid
    /// names another process afterwards (another start time), as gone
    /// otherwise (a zombie not yet reaped, or no process on the pid).
    #[test]
    fn a_target_exiting_during_the_call_is_said() {
        for (after, reused, says) in [
            (Some(1), true, "may have moved that process's pages"),
            (
                Some(0),
                false,
                "exited while move_pages ran (it has not been reaped yet)",
            ),
            (
                None,
                false,
                "exited while move_pages ran (its pid names no process now)",
            ),
        ] {
            let mut c = sleeper();
            let fd = Pidfd::open(c.id()).expect("pidfd_open");
            let was = fd.start_time.expect("the sleeper's start time");
            let e = fd
                .move_with(
                    &PAGES,
                    |_| 0,
                    |_, _, _| {
                        c.kill().unwrap();
                        wait_exit(&fd);
                        Ok(())
                    },
                    || after.map(|d| was + d),
                )
                .unwrap_err();
            assert_eq!(pid_reused(&e), reused, "{e}");
            assert!(e.to_string().contains(says), "{e}");
            if !reused {
                assert_eq!(e.kind(), io::ErrorKind::NotFound);
            }
            c.wait().unwrap();
        }
    }

    /// While the target lives, every batch is called and counted.
    #[test]
    fn a_live_target_is_moved_batch_by_batch() {
        let mut c = sleeper();
        let fd = Pidfd::open(c.id()).expect("pidfd_open");
        let mut calls = 0;
        let big = [AddrRange::new(0, (MOVE_BATCH as u64 + 1) * 4096)];
        let n = fd
            .move_with(
                &big,
                |_| 1,
                |pages, nodes, status| {
                    calls += 1;
                    assert!(nodes.iter().all(|&n| n == 1));
                    status.fill(1);
                    status[0] = -libc::EFAULT;
                    assert_eq!(pages.len(), status.len());
                    Ok(())
                },
                || None,
            )
            .unwrap();
        assert_eq!(calls, 2);
        assert_eq!(n, (MOVE_BATCH as u64 - 1) * 4096);
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// The real system call on our own pages: node 0 holds them all, or
    /// the kernel has no NUMA.
    #[test]
    fn move_pages_of_own_memory_works_or_names_the_reason() {
        let buf = vec![1u8; 64 * 4096];
        let start = (buf.as_ptr() as u64).div_ceil(4096) * 4096;
        let fd = Pidfd::open(std::process::id()).expect("pidfd_open");
        match fd.move_to_node(&[AddrRange::new(start, start + 16 * 4096)], 0) {
            Ok(n) => assert!(n <= 16 * 4096),
            Err(e) => assert!(
                matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSYS | libc::ENODEV | libc::EPERM)
                ),
                "{e}"
            ),
        }
        std::hint::black_box(&buf);
    }

    #[test]
    fn madvise_of_own_memory_works_or_names_the_reason() {
        // process_madvise on ourselves with MADV_COLD: allowed for the
        // caller's own process on 5.10+ kernels.
        let buf = vec![1u8; 64 * 4096];
        let start = (buf.as_ptr() as u64).div_ceil(4096) * 4096;
        let fd = Pidfd::open(std::process::id()).expect("pidfd_open");
        match fd.madvise(&[AddrRange::new(start, start + 16 * 4096)], MADV_COLD) {
            Ok(n) => assert_eq!(n, 16 * 4096),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSYS), "{e}"),
        }
        std::hint::black_box(&buf);
    }
}
