//! `/proc/PID/pagemap`: one little-endian u64 per virtual page.
//!
//! Bits: 0-54 PFN (when present; zero without CAP_SYS_ADMIN), 55 soft-dirty,
//! 61 file-page or shared-anon, 62 swapped, 63 present.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::Error;

/// Page size the pagemap is indexed by.
pub const PAGE_SZ: u64 = 4096;

/// One pagemap entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagemapEntry(pub u64);

impl PagemapEntry {
    pub const PFN_MASK: u64 = (1 << 55) - 1;
    pub const SOFT_DIRTY: u64 = 1 << 55;
    pub const SWAPPED: u64 = 1 << 62;
    pub const PRESENT: u64 = 1 << 63;

    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }
    pub fn swapped(self) -> bool {
        self.0 & Self::SWAPPED != 0
    }
    pub fn soft_dirty(self) -> bool {
        self.0 & Self::SOFT_DIRTY != 0
    }
    /// The page frame number, when present (0 if hidden).
    pub fn pfn(self) -> Option<u64> {
        self.present().then_some(self.0 & Self::PFN_MASK)
    }
}

/// `ROOT/proc/PID/pagemap`.
pub fn pagemap_path(root: &Path, pid: u32) -> PathBuf {
    root.join(format!("proc/{pid}/pagemap"))
}

/// An open pagemap.
#[derive(Debug)]
pub struct Pagemap {
    file: File,
    path: PathBuf,
    pid: u32,
}

impl Pagemap {
    /// Opens `ROOT/proc/PID/pagemap`.
    pub fn open(root: &Path, pid: u32) -> Result<Self, Error> {
        let path = pagemap_path(root, pid);
        match File::open(&path) {
            Ok(file) => Ok(Self { file, path, pid }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if root.join(format!("proc/{pid}")).exists() {
                    Err(Error::Missing {
                        primitive: "pagemap",
                        path,
                        provides: "CONFIG_PROC_PAGE_MONITOR",
                    })
                } else {
                    Err(Error::Gone { pid, path })
                }
            }
            Err(e) => Err(Error::io("opening", &path, e)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this pagemap belongs to an address space that is gone: after
    /// an exec the process has a new one, and a pagemap opened before
    /// reads nothing at all (a live one reads an entry for every page,
    /// mapped or not). Read errors count as not stale.
    pub fn stale(&self) -> bool {
        let mut buf = [0u8; 8];
        matches!(crate::batch::read_full_at(&self.file, &mut buf, 0), Ok(0))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The entries of the pages holding `addrs`, in the order given. Pages
    /// are read with one request per run of contiguous pages, all in one
    /// batch ([`crate::batch`]); pages past the end of the file read as
    /// empty entries (not present).
    pub fn entries(&self, addrs: &[u64]) -> Result<Vec<PagemapEntry>, Error> {
        entries_many(&[(self, addrs)])
            .pop()
            .expect("one result per pagemap")
    }

    /// Like [`entries`](Self::entries), but fails with
    /// [`Error::PfnHidden`] when some page is present and every present
    /// page reads PFN 0 (the kernel hides PFNs from unprivileged readers).
    pub fn pfns(&self, addrs: &[u64]) -> Result<Vec<Option<u64>>, Error> {
        let entries = self.entries(addrs)?;
        check_pfns_visible(&entries, &self.path)?;
        Ok(entries.iter().map(|e| e.pfn()).collect())
    }
}

/// The entries of the pages holding each pagemap's addresses, as
/// [`Pagemap::entries`] reads them, of every pagemap in one batch
/// ([`crate::batch::read_many_files`]): one result per pagemap, in the
/// order given. A pagemap that cannot be read fails alone.
pub fn entries_many(items: &[(&Pagemap, &[u64])]) -> Vec<Result<Vec<PagemapEntry>, Error>> {
    let pages: Vec<Vec<u64>> = items
        .iter()
        .map(|(_, addrs)| addrs.iter().map(|a| a / PAGE_SZ).collect())
        .collect();
    let files: Vec<(&File, &[u64])> = items
        .iter()
        .zip(&pages)
        .map(|((pm, _), p)| (&pm.file, &p[..]))
        .collect();
    read_words_many(&files)
        .into_iter()
        .zip(items)
        .map(|(r, (pm, _))| match r {
            Ok(words) => Ok(words.into_iter().map(PagemapEntry).collect()),
            Err(e) => Err(Error::io("reading", &pm.path, e)),
        })
        .collect()
}

/// `struct pm_scan_arg` of `PAGEMAP_SCAN` (linux/fs.h, Linux 6.7).
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`: pages `[start, end)` sharing `categories`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 =
    (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | (0x66 << 8) | 16;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;

impl Pagemap {
    /// The populated parts (pages present or swapped out) of `ranges`
    /// (sorted, disjoint), merged where they touch, from the kernel's
    /// `PAGEMAP_SCAN` (Linux 6.7), which walks only the page tables that
    /// exist: a terabyte reservation with little populated costs little.
    /// `Ok(None)` when the kernel (or the file: a test's fake pagemap) has
    /// no such request.
    pub fn populated(
        &self,
        ranges: &[udamon_core::AddrRange],
    ) -> Result<Option<Vec<udamon_core::AddrRange>>, Error> {
        use std::os::fd::AsRawFd;
        let mut out: Vec<udamon_core::AddrRange> = Vec::new();
        let mut buf = vec![PageRegion::default(); 1024];
        for r in ranges {
            let mut start = r.start;
            while start < r.end {
                let mut arg = PmScanArg {
                    size: std::mem::size_of::<PmScanArg>() as u64,
                    start,
                    end: r.end,
                    vec: buf.as_mut_ptr() as u64,
                    vec_len: buf.len() as u64,
                    category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                    return_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                    ..Default::default()
                };
                // SAFETY: `arg` is a valid pm_scan_arg whose `vec` points to
                // `buf`, `vec_len` entries long; the kernel writes at most
                // that many page_regions there and updates `walk_end`.
                let n = unsafe {
                    libc::ioctl(
                        self.file.as_raw_fd(),
                        PAGEMAP_SCAN as _,
                        &mut arg as *mut PmScanArg,
                    )
                };
                if n < 0 {
                    let e = std::io::Error::last_os_error();
                    return match e.raw_os_error() {
                        Some(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP) => Ok(None),
                        Some(libc::EINTR) => continue,
                        _ => Err(Error::io("scanning", &self.path, e)),
                    };
                }
                for pr in &buf[..n as usize] {
                    match out.last_mut() {
                        Some(l) if l.end == pr.start => l.end = pr.end,
                        _ => out.push(udamon_core::AddrRange::new(pr.start, pr.end)),
                    }
                }
                if arg.walk_end <= start {
                    break;
                }
                start = arg.walk_end;
            }
        }
        Ok(Some(out))
    }
}

/// Fails when present entries exist and all their PFNs are zero.
pub fn check_pfns_visible(entries: &[PagemapEntry], path: &Path) -> Result<(), Error> {
    let mut present = entries.iter().filter(|e| e.present()).peekable();
    if present.peek().is_some() && present.all(|e| e.pfn() == Some(0)) {
        return Err(Error::PfnHidden {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Splits sorted, unique indices into runs of consecutive values.
pub(crate) fn contiguous_runs(sorted: &[u64]) -> impl Iterator<Item = &[u64]> {
    sorted.chunk_by(|a, b| *b == *a + 1)
}

/// The 64-bit words at `indices` (any order, repeats allowed) of a file of
/// such words, in the order given: each word read once, one request per
/// run of consecutive indices, all in one batch. Words past the end of the
/// file read as 0.
pub(crate) fn read_words(file: &File, indices: &[u64]) -> std::io::Result<Vec<u64>> {
    read_words_many(&[(file, indices)])
        .pop()
        .expect("one result per file")
}

/// [`read_words`] of several files, all in one batch: one result per
/// `(file, indices)`, in the order given; a file whose reads fail fails
/// alone.
pub(crate) fn read_words_many(items: &[(&File, &[u64])]) -> Vec<std::io::Result<Vec<u64>>> {
    let sorted: Vec<Vec<u64>> = items
        .iter()
        .map(|(_, indices)| {
            let mut s = indices.to_vec();
            s.sort_unstable();
            s.dedup();
            s
        })
        .collect();
    let runs: Vec<Vec<&[u64]>> = sorted
        .iter()
        .map(|s| contiguous_runs(s).collect())
        .collect();
    let mut buf = vec![0u8; sorted.iter().map(Vec::len).sum::<usize>() * 8];
    let mut reqs: Vec<(&File, u64, &mut [u8])> =
        Vec::with_capacity(runs.iter().map(Vec::len).sum());
    let mut rest = &mut buf[..];
    for ((file, _), file_runs) in items.iter().zip(&runs) {
        for run in file_runs {
            let (head, tail) = rest.split_at_mut(run.len() * 8);
            reqs.push((file, run[0] * 8, head));
            rest = tail;
        }
    }
    let mut got = crate::batch::read_many_files(&mut reqs).into_iter();
    drop(reqs);
    let mut out = Vec::with_capacity(items.len());
    let mut at = 0;
    for ((_, indices), (sorted, file_runs)) in items.iter().zip(sorted.iter().zip(&runs)) {
        let mut words = Vec::with_capacity(sorted.len());
        let mut err = None;
        for run in file_runs {
            match got.next().expect("one result per run") {
                Ok(n) => {
                    for i in 0..run.len() {
                        let b = &buf[(at + i) * 8..(at + i) * 8 + 8];
                        words.push(if (i + 1) * 8 <= n {
                            u64::from_ne_bytes(b.try_into().expect("8 bytes"))
                        } else {
                            0
                        });
                    }
                }
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
            at += run.len();
        }
        out.push(match err {
            Some(e) => Err(e),
            None => Ok(indices
                .iter()
                .map(|i| words[sorted.binary_search(i).expect("every index was read")])
                .collect()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// Writes a fake pagemap with `entries` (page index, raw entry).
    pub(crate) fn fake_pagemap(root: &Path, pid: u32, entries: &[(u64, u64)]) {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        let f = File::create(dir.join("pagemap")).unwrap();
        for &(page, e) in entries {
            f.write_all_at(&e.to_ne_bytes(), page * 8).unwrap();
        }
    }

    #[test]
    fn decodes_bits_at_the_right_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = PagemapEntry::PRESENT;
        fake_pagemap(
            dir.path(),
            7,
            &[
                (0x10, p | 0x1234),
                (0x11, p | PagemapEntry::SOFT_DIRTY | PagemapEntry::PFN_MASK),
                (0x20, PagemapEntry::SWAPPED),
                (0x40, p | 5),
            ],
        );
        let pm = Pagemap::open(dir.path(), 7).unwrap();
        let addrs = [
            0x11_000 + 17,
            0x10_000,
            0x20_000,
            0x30_000,
            0x40_000,
            0x999_000,
        ];
        let e = pm.entries(&addrs).unwrap();
        assert_eq!(e[0].pfn(), Some(PagemapEntry::PFN_MASK));
        assert!(e[0].soft_dirty());
        assert_eq!(e[1].pfn(), Some(0x1234));
        assert!(!e[1].soft_dirty());
        assert!(e[2].swapped() && !e[2].present());
        assert_eq!(e[3], PagemapEntry(0), "a hole reads as not present");
        assert_eq!(e[4].pfn(), Some(5));
        assert_eq!(e[5], PagemapEntry(0), "past the end reads as not present");
    }

    /// Several pagemaps in one batch: each reads as `entries` reads it
    /// alone, in the order given, and one that cannot be read (a directory
    /// in its place) fails alone.
    #[test]
    fn entries_of_several_pagemaps_in_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let p = PagemapEntry::PRESENT;
        fake_pagemap(root, 1, &[(0x10, p | 1), (0x11, p | 2), (0x40, p | 3)]);
        fake_pagemap(root, 2, &[(0x10, p | 21), (0x12, PagemapEntry::SWAPPED)]);
        fake_pagemap(root, 3, &[(0x5, p | 35)]);
        std::fs::create_dir_all(root.join("proc/4/pagemap")).unwrap();
        let pms: Vec<Pagemap> = (1..=4)
            .map(|pid| Pagemap::open(root, pid).unwrap())
            .collect();
        let a1 = [0x40_000, 0x10_000, 0x11_fff, 0x10_008, 0x999_000];
        let a2 = [0x12_000, 0x10_000, 0x11_000];
        let a3: [u64; 0] = [];
        let a4 = [0x10_000];
        let got = entries_many(&[
            (&pms[0], &a1[..]),
            (&pms[3], &a4[..]),
            (&pms[1], &a2[..]),
            (&pms[2], &a3[..]),
            (&pms[2], &[0x5_000, 0x6_000][..]),
        ]);
        assert_eq!(got.len(), 5);
        let e = |raw: &[u64]| raw.iter().map(|&r| PagemapEntry(r)).collect::<Vec<_>>();
        assert_eq!(
            got[0].as_ref().unwrap(),
            &e(&[p | 3, p | 1, p | 2, p | 1, 0])
        );
        let err = got[1].as_ref().unwrap_err();
        assert!(err.to_string().contains("proc/4/pagemap"), "{err}");
        assert_eq!(
            got[2].as_ref().unwrap(),
            &e(&[PagemapEntry::SWAPPED, p | 21, 0])
        );
        assert!(got[3].as_ref().unwrap().is_empty());
        assert_eq!(got[4].as_ref().unwrap(), &e(&[p | 35, 0]));
        for (pm, a) in [(&pms[0], &a1[..]), (&pms[1], &a2[..])] {
            let alone = pm.entries(a).unwrap();
            let i = if pm.pid() == 1 { 0 } else { 2 };
            assert_eq!(got[i].as_ref().unwrap(), &alone, "as read alone");
        }
        assert!(entries_many(&[]).is_empty());
    }

    #[test]
    fn runs_are_contiguous_pages() {
        let runs: Vec<&[u64]> = contiguous_runs(&[1, 2, 3, 7, 9, 10]).collect();
        assert_eq!(runs, vec![&[1, 2, 3][..], &[7], &[9, 10]]);
    }

    #[test]
    fn hidden_pfns_say_root_is_needed() {
        let dir = tempfile::tempdir().unwrap();
        fake_pagemap(
            dir.path(),
            7,
            &[(1, PagemapEntry::PRESENT), (2, PagemapEntry::PRESENT)],
        );
        let pm = Pagemap::open(dir.path(), 7).unwrap();
        let e = pm.pfns(&[0x1000, 0x2000]).unwrap_err();
        assert!(e.to_string().contains("needs root or CAP_SYS_ADMIN"), "{e}");
        // No present page at all is not evidence of hiding.
        assert_eq!(pm.pfns(&[0x5000]).unwrap(), vec![None]);
    }

    #[test]
    fn missing_pagemap_names_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/9")).unwrap();
        let e = Pagemap::open(dir.path(), 9).unwrap_err();
        assert!(e.to_string().contains("CONFIG_PROC_PAGE_MONITOR"), "{e}");
        let e = Pagemap::open(dir.path(), 10).unwrap_err();
        assert!(matches!(e, Error::Gone { pid: 10, .. }), "{e}");
    }
}

#[cfg(test)]
mod scan_tests {
    use super::*;
    use udamon_core::AddrRange;

    /// Whether the running kernel is 6.7 or later (PAGEMAP_SCAN).
    fn kernel_has_scan() -> bool {
        let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut v = r
            .trim()
            .split(|c: char| !c.is_ascii_digit())
            .map(|x| x.parse::<u32>().unwrap_or(0));
        let (a, b) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        (a, b) >= (6, 7)
    }

    /// This process's own pagemap: of a fresh 64 MiB anonymous mapping,
    /// the pages written (16 at the start, 8 MiB in the middle) are the
    /// populated ones, and nothing else of it.
    #[test]
    fn populated_finds_the_written_pages() {
        let len = 64 << 20;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: as above; no huge pages, so that populated means written.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        let base = p as u64;
        let buf = p as *mut u8;
        for i in 0..16 {
            // SAFETY: inside the mapping.
            unsafe { *buf.add(i * 4096) = 1 };
        }
        for i in 0..2048 {
            // SAFETY: inside the mapping (32 MiB + 8 MiB < 64 MiB).
            unsafe { *buf.add((32 << 20) + i * 4096) = 1 };
        }
        let pm = Pagemap::open(Path::new("/"), std::process::id()).unwrap();
        let got = pm
            .populated(&[AddrRange::new(base, base + len as u64)])
            .unwrap();
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, len) };
        match got {
            None => assert!(!kernel_has_scan(), "a 6.7+ kernel refused PAGEMAP_SCAN"),
            Some(r) => assert_eq!(
                r,
                vec![
                    AddrRange::new(base, base + 16 * 4096),
                    AddrRange::new(base + (32 << 20), base + (40 << 20)),
                ]
            ),
        }
    }

    #[test]
    fn a_plain_file_has_no_scan() {
        let dir = std::env::temp_dir().join(format!("udamon-scan-{}", std::process::id()));
        tests::fake_pagemap(&dir, 7, &[(0, PagemapEntry::PRESENT)]);
        let pm = Pagemap::open(&dir, 7).unwrap();
        assert_eq!(pm.populated(&[AddrRange::new(0, 1 << 20)]).unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
