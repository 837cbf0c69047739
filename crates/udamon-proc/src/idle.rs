//! `/sys/kernel/mm/page_idle/bitmap`: one bit per PFN, in u64 words of 64
//! PFNs each. Writing a 1 bit marks the page idle (clearing its young bits
//! through the reverse map); reading returns 1 while the page stayed idle.
//! Reads and writes must be whole, aligned words.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::batch::{read_many, write_many};
use crate::pagemap::{contiguous_runs, read_words};
use crate::Error;

/// `ROOT/sys/kernel/mm/page_idle/bitmap`.
pub fn bitmap_path(root: &Path) -> PathBuf {
    root.join("sys/kernel/mm/page_idle/bitmap")
}

/// The idle page bitmap, open for reading and writing.
#[derive(Debug)]
pub struct IdleBitmap {
    file: File,
    path: PathBuf,
}

impl IdleBitmap {
    pub fn open(root: &Path) -> Result<Self, Error> {
        let path = bitmap_path(root);
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => Ok(Self { file, path }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Missing {
                primitive: "idle page bitmap",
                path,
                provides: "CONFIG_IDLE_PAGE_TRACKING",
            }),
            Err(e) => Err(Error::io("opening", &path, e)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Marks `pfns` idle: one word per 64 PFNs holding just their bits, one
    /// write per run of contiguous words, all in one batch
    /// ([`crate::batch`]).
    pub fn set_idle(&self, pfns: &[u64]) -> Result<(), Error> {
        let words = group_words(pfns);
        let idx: Vec<u64> = words.iter().map(|w| w.0).collect();
        let buf: Vec<u8> = words.iter().flat_map(|w| w.1.to_ne_bytes()).collect();
        let mut reqs: Vec<(u64, &[u8])> = Vec::new();
        let mut at = 0;
        for run in contiguous_runs(&idx) {
            reqs.push((run[0] * 8, &buf[at * 8..(at + run.len()) * 8]));
            at += run.len();
        }
        write_many(&self.file, &reqs).map_err(|e| Error::io("writing", &self.path, e))
    }

    /// Whether each of `pfns` is still idle, in the order given; one read
    /// per run of contiguous words, all in one batch. PFNs past the end
    /// read as not idle.
    pub fn is_idle(&self, pfns: &[u64]) -> Result<Vec<bool>, Error> {
        let idx: Vec<u64> = pfns.iter().map(|p| p / 64).collect();
        let vals = read_words(&self.file, &idx).map_err(|e| Error::io("reading", &self.path, e))?;
        Ok(pfns
            .iter()
            .zip(vals)
            .map(|(p, w)| w & (1 << (p % 64)) != 0)
            .collect())
    }
}

impl IdleBitmap {
    /// Marks the pages of `pending` idle (one entry per sampled region,
    /// `None` for a region whose page is not checked). On failure every
    /// entry becomes `None`, so nothing reads as accessed, and the error is
    /// returned.
    pub fn mark_pending(&self, pending: &mut [Option<u64>]) -> Result<(), Error> {
        let pfns: Vec<u64> = pending.iter().flatten().copied().collect();
        self.set_idle(&pfns)
            .inspect_err(|_| pending.iter_mut().for_each(|p| *p = None))
    }

    /// Reads back what [`mark_pending`](Self::mark_pending) marked: one
    /// entry per pending entry, accessed when its page is no longer idle.
    /// On failure `accessed` holds `false` for every entry.
    pub fn read_pending(
        &self,
        pending: &[Option<u64>],
        accessed: &mut Vec<bool>,
    ) -> Result<(), Error> {
        accessed.clear();
        let pfns: Vec<u64> = pending.iter().flatten().copied().collect();
        match self.is_idle(&pfns) {
            Ok(idle) => {
                let mut it = idle.into_iter();
                accessed.extend(
                    pending
                        .iter()
                        .map(|p| p.is_some() && !it.next().expect("one per pfn")),
                );
                Ok(())
            }
            Err(e) => {
                accessed.resize(pending.len(), false);
                Err(e)
            }
        }
    }
}

/// `ROOT/proc/kpageflags`.
pub fn kpageflags_path(root: &Path) -> PathBuf {
    root.join("proc/kpageflags")
}

/// `/proc/kpageflags`: 64 flag bits per PFN (include/uapi/linux/kernel-page-flags.h).
///
/// Needed because the idle bitmap tracks a large folio (a THP, an mTHP) by
/// its head page only: the kernel skips tail PFNs on write and reports them
/// "not idle" on read. [`heads`](Self::heads) maps each sampled PFN to the
/// head of its folio, so a huge page is checked as a whole, as kernel DAMON
/// checks a PMD-mapped page.
#[derive(Debug)]
pub struct KpageFlags {
    file: File,
    path: PathBuf,
}

const KPF_LRU: u64 = 1 << 5;
const KPF_COMPOUND_HEAD: u64 = 1 << 15;
const KPF_COMPOUND_TAIL: u64 = 1 << 16;
/// Folios are naturally aligned and at most PMD-sized (512 pages) for the
/// anonymous and file memory the bitmap tracks.
const MAX_FOLIO_PAGES: u64 = 512;

impl KpageFlags {
    pub fn open(root: &Path) -> Result<Self, Error> {
        let path = kpageflags_path(root);
        match File::open(&path) {
            Ok(file) => Ok(Self { file, path }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Missing {
                primitive: "page flags file",
                path,
                provides: "CONFIG_PROC_PAGE_MONITOR",
            }),
            Err(e) => Err(Error::io("opening", &path, e)),
        }
    }

    /// The head PFN of each PFN's folio (the PFN itself when it is not a
    /// tail page). `vaddrs[i]` is where `pfns[i]` is mapped: a PMD-mapped
    /// huge page is aligned alike in both spaces, so its head is read
    /// with the page's own flags; other tails scan back at most 4 KiB of
    /// flags.
    pub fn heads(&self, pfns: &[u64], vaddrs: &[u64]) -> Result<Vec<u64>, Error> {
        Ok(self
            .heads_with_flags(pfns, vaddrs)?
            .into_iter()
            .map(|(h, _)| h)
            .collect())
    }

    /// Like [`heads`](Self::heads), but `None` for a page whose folio is
    /// not on an LRU list (kernel memory, free pages, pages in flight):
    /// the bitmap never tracks those, and the kernel's DAMON counts them
    /// as not accessed.
    pub fn lru_heads(&self, pfns: &[u64], addrs: &[u64]) -> Result<Vec<Option<u64>>, Error> {
        Ok(self
            .heads_with_flags(pfns, addrs)?
            .into_iter()
            .map(|(h, f)| (f & KPF_LRU != 0).then_some(h))
            .collect())
    }

    /// (head, the head's flags) of each PFN: one batch of reads for every
    /// PFN's flags and, where the page sits in its 2 MiB like its virtual
    /// address does (the mark of a PMD-mapped huge page, whose head is
    /// aligned alike in both spaces), the flags of that head; one more for
    /// the 4 KiB scans of tails whose head was elsewhere.
    fn heads_with_flags(&self, pfns: &[u64], vaddrs: &[u64]) -> Result<Vec<(u64, u64)>, Error> {
        let err = |e| Error::io("reading", &self.path, e);
        let guess = |i: usize| {
            let offset = vaddrs.get(i).map_or(0, |v| v / 4096 % MAX_FOLIO_PAGES);
            (offset > 0 && pfns[i] % MAX_FOLIO_PAGES == offset).then(|| pfns[i] - offset)
        };
        // The pages' own flags, then each page's guessed head's (the page
        // itself where there is no guess: read once either way).
        let guesses: Vec<Option<u64>> = (0..pfns.len()).map(guess).collect();
        let mut wanted: Vec<u64> = pfns.to_vec();
        wanted.extend(guesses.iter().zip(pfns).map(|(g, &p)| g.unwrap_or(p)));
        let words = read_words(&self.file, &wanted).map_err(err)?;
        let (own, guessed) = words.split_at(pfns.len());
        let mut out: Vec<(u64, u64)> = pfns.iter().copied().zip(own.iter().copied()).collect();
        let mut missed = Vec::new();
        for (i, o) in out.iter_mut().enumerate() {
            if o.1 & KPF_COMPOUND_TAIL == 0 {
                continue;
            }
            match guesses[i] {
                Some(g) if guessed[i] & KPF_COMPOUND_HEAD != 0 => *o = (g, guessed[i]),
                _ => missed.push(i),
            }
        }
        // The others scan back to the folio's natural alignment.
        let mut blocks: Vec<Vec<u8>> = missed
            .iter()
            .map(|&i| vec![0u8; (pfns[i] % MAX_FOLIO_PAGES) as usize * 8 + 8])
            .collect();
        let mut reqs: Vec<(u64, &mut [u8])> = missed
            .iter()
            .zip(blocks.iter_mut())
            .map(|(&i, b)| ((pfns[i] - pfns[i] % MAX_FOLIO_PAGES) * 8, &mut b[..]))
            .collect();
        let got = read_many(&self.file, &mut reqs).map_err(err)?;
        drop(reqs);
        for ((&i, block), n) in missed.iter().zip(&blocks).zip(got) {
            let base = pfns[i] - pfns[i] % MAX_FOLIO_PAGES;
            let words: Vec<u64> = block[..n - n % 8]
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect();
            if let Some(h) = words.iter().rposition(|f| f & KPF_COMPOUND_HEAD != 0) {
                out[i] = (base + h as u64, words[h]);
            }
        }
        Ok(out)
    }
}

/// (word index, bits of the given PFNs in it), sorted by word.
fn group_words(pfns: &[u64]) -> Vec<(u64, u64)> {
    let mut sorted: Vec<u64> = pfns.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for p in sorted {
        let (w, bit) = (p / 64, 1u64 << (p % 64));
        match out.last_mut() {
            Some(last) if last.0 == w => last.1 |= bit,
            _ => out.push((w, bit)),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A zeroed fake bitmap covering `nr_pfns`.
    pub(crate) fn fake_bitmap(root: &Path, nr_pfns: u64) {
        let p = bitmap_path(root);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        File::create(&p)
            .unwrap()
            .set_len(nr_pfns.div_ceil(64) * 8)
            .unwrap();
    }

    #[test]
    fn tail_pages_map_to_their_folio_head() {
        let dir = tempfile::tempdir().unwrap();
        let p = kpageflags_path(dir.path());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let f = File::create(&p).unwrap();
        // A 512-page folio at PFN 1024, a 16-page one at 2048, a plain page at 3000.
        let put = |pfn: u64, flags: u64| f.write_all_at(&flags.to_ne_bytes(), pfn * 8).unwrap();
        put(1024, KPF_COMPOUND_HEAD | KPF_LRU);
        for pfn in 1025..1536 {
            put(pfn, KPF_COMPOUND_TAIL);
        }
        put(2048, KPF_COMPOUND_HEAD);
        for pfn in 2049..2064 {
            put(pfn, KPF_COMPOUND_TAIL);
        }
        put(3000, 0);
        let k = KpageFlags::open(dir.path()).unwrap();
        assert_eq!(
            k.lru_heads(&[1300, 2050, 3000], &[]).unwrap(),
            vec![Some(1024), None, None],
            "only the first folio is on an LRU list"
        );
        assert_eq!(
            k.heads(&[1024, 1300, 1535, 2050, 2063, 3000], &[]).unwrap(),
            vec![1024, 1024, 1024, 2048, 2048, 3000]
        );
        // With the mapping address: the PMD guess (page 276 of its 2 MiB).
        assert_eq!(
            k.heads(&[1300], &[0x7f00_0000_0000 + 276 * 4096]).unwrap(),
            vec![1024]
        );
        // A wrong guess (the 16-page folio is not PMD-aligned) falls back to the scan.
        assert_eq!(
            k.heads(&[2050], &[0x7f00_0000_0000 + 5 * 4096]).unwrap(),
            vec![2048]
        );
    }

    pub(crate) fn word(root: &Path, w: u64) -> u64 {
        let f = File::open(bitmap_path(root)).unwrap();
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, w * 8).unwrap();
        u64::from_ne_bytes(b)
    }

    #[test]
    fn set_and_read_back_by_pfn() {
        let dir = tempfile::tempdir().unwrap();
        fake_bitmap(dir.path(), 64 * 4);
        let bm = IdleBitmap::open(dir.path()).unwrap();
        bm.set_idle(&[0, 63, 64, 130, 129]).unwrap();
        assert_eq!(word(dir.path(), 0), 1 | 1 << 63);
        assert_eq!(word(dir.path(), 1), 1);
        assert_eq!(word(dir.path(), 2), 0b110);
        assert_eq!(word(dir.path(), 3), 0);
        assert_eq!(
            bm.is_idle(&[130, 0, 1, 64, 200, 100_000]).unwrap(),
            vec![true, true, false, true, false, false]
        );
    }

    #[test]
    fn missing_bitmap_names_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let e = IdleBitmap::open(dir.path()).unwrap_err();
        let want = format!(
            "the idle page bitmap {}/sys/kernel/mm/page_idle/bitmap is missing (needs CONFIG_IDLE_PAGE_TRACKING)",
            dir.path().display()
        );
        assert_eq!(e.to_string(), want);
    }
}
