//! Actions on a live process's memory: `process_madvise(2)` through a pidfd
//! and `move_pages(2)`. Every call is made on ranges re-checked against the
//! process's current mappings, right before acting.

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

/// A pidfd of a process, for `process_madvise`.
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    pub fn open(pid: u32) -> io::Result<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just gave us this fd, and nothing else owns it.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
    }

    /// Whether the process has exited (the pidfd polls readable then).
    pub fn exited(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
    }

    fn raw(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
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

/// Moves the present pages of `ranges` of `pid` to node `nid` with
/// `move_pages(2)`; returns the bytes that are on `nid` afterwards among the
/// pages that are present (pages already there count, as in the kernel's
/// `migrate_pages` accounting of applied bytes).
pub fn move_to_node(pid: u32, ranges: &[AddrRange], nid: u32) -> io::Result<u64> {
    const PAGE: u64 = 4096;
    let mut pages: Vec<*mut libc::c_void> = Vec::with_capacity(MOVE_BATCH);
    let mut moved = 0u64;
    let flush = |pages: &mut Vec<*mut libc::c_void>, moved: &mut u64| -> io::Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let nodes = vec![nid as libc::c_int; pages.len()];
        let mut status = vec![0 as libc::c_int; pages.len()];
        // SAFETY: the three arrays have `pages.len()` entries and outlive the
        // call; the kernel only reads the page addresses as addresses.
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
        *moved += status.iter().filter(|&&s| s == nid as libc::c_int).count() as u64 * PAGE;
        pages.clear();
        Ok(())
    };
    for r in ranges {
        let mut a = r.start / PAGE * PAGE;
        while a < r.end {
            pages.push(a as *mut libc::c_void);
            if pages.len() == MOVE_BATCH {
                flush(&mut pages, &mut moved)?;
            }
            a += PAGE;
        }
    }
    flush(&mut pages, &mut moved)?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, path: &str) -> Mapping {
        Mapping {
            range: AddrRange::new(start, end),
            perms: "rw-p".into(),
            offset: 0,
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
