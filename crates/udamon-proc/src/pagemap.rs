//! `/proc/PID/pagemap`: one little-endian u64 per virtual page.
//!
//! Bits: 0-54 PFN (when present; zero without CAP_SYS_ADMIN), 55 soft-dirty,
//! 61 file-page or shared-anon, 62 swapped, 63 present.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::ProcError;

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
    pub fn open(root: &Path, pid: u32) -> Result<Self, ProcError> {
        let path = pagemap_path(root, pid);
        match File::open(&path) {
            Ok(file) => Ok(Self { file, path, pid }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if root.join(format!("proc/{pid}")).exists() {
                    Err(ProcError::Missing {
                        primitive: "pagemap",
                        path,
                        provides: "CONFIG_PROC_PAGE_MONITOR",
                    })
                } else {
                    Err(ProcError::Gone { pid, path })
                }
            }
            Err(e) => Err(ProcError::io("opening", &path, e)),
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
        matches!(read_full_at(&self.file, &mut buf, 0), Ok(0))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The entries of the pages holding `addrs`, in the order given. Pages
    /// are read with one request per run of contiguous pages, all in one
    /// batch ([`crate::batch`]); pages past the end of the file read as
    /// empty entries (not present).
    pub fn entries(&self, addrs: &[u64]) -> Result<Vec<PagemapEntry>, ProcError> {
        let pages: Vec<u64> = addrs.iter().map(|a| a / PAGE_SZ).collect();
        let words =
            read_words(&self.file, &pages).map_err(|e| ProcError::io("reading", &self.path, e))?;
        Ok(words.into_iter().map(PagemapEntry).collect())
    }

    /// Like [`entries`](Self::entries), but fails with
    /// [`ProcError::PfnHidden`] when some page is present and every present
    /// page reads PFN 0 (the kernel hides PFNs from unprivileged readers).
    pub fn pfns(&self, addrs: &[u64]) -> Result<Vec<Option<u64>>, ProcError> {
        let entries = self.entries(addrs)?;
        check_pfns_visible(&entries, &self.path)?;
        Ok(entries.iter().map(|e| e.pfn()).collect())
    }
}

/// Fails when present entries exist and all their PFNs are zero.
pub fn check_pfns_visible(entries: &[PagemapEntry], path: &Path) -> Result<(), ProcError> {
    let mut present = entries.iter().filter(|e| e.present()).peekable();
    if present.peek().is_some() && present.all(|e| e.pfn() == Some(0)) {
        return Err(ProcError::PfnHidden {
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
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let words = read_sorted_words(file, &sorted)?;
    Ok(indices
        .iter()
        .map(|i| words[sorted.binary_search(i).expect("every index was read")])
        .collect())
}

fn read_sorted_words(file: &File, sorted: &[u64]) -> std::io::Result<Vec<u64>> {
    let mut buf = vec![0u8; sorted.len() * 8];
    let runs: Vec<&[u64]> = contiguous_runs(sorted).collect();
    let mut reqs: Vec<(u64, &mut [u8])> = Vec::with_capacity(runs.len());
    let mut rest = &mut buf[..];
    for run in &runs {
        let (head, tail) = rest.split_at_mut(run.len() * 8);
        reqs.push((run[0] * 8, head));
        rest = tail;
    }
    let got = crate::batch::read_many(file, &mut reqs)?;
    drop(reqs);
    let mut words = Vec::with_capacity(sorted.len());
    let mut at = 0;
    for (run, n) in runs.iter().zip(got) {
        for i in 0..run.len() {
            let b = &buf[(at + i) * 8..(at + i) * 8 + 8];
            words.push(if (i + 1) * 8 <= n {
                u64::from_ne_bytes(b.try_into().expect("8 bytes"))
            } else {
                0
            });
        }
        at += run.len();
    }
    Ok(words)
}

/// `pread` until `buf` is full or end of file; returns the bytes read.
pub(crate) fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(e, ProcError::Gone { pid: 10, .. }), "{e}");
    }
}
