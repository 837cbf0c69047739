//! [`ProcOps`]: the vaddr operations set over live processes, in user space.

use std::path::{Path, PathBuf};

use udamon_core::{AddrRange, Operations, SampleWindow, Target};

use crate::idle::IdleBitmap;
use crate::maps::{monitoring_ranges, read_maps};
use crate::pagemap::Pagemap;
use crate::ProcError;

/// How accesses are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessMode {
    /// Idle page tracking: PFNs from pagemap, idle bits from the bitmap.
    /// Sees reads and writes, like the kernel's paddr checks. Needs root.
    IdlePage,
    /// Soft-dirty: `4` written to `clear_refs`, bit 55 of pagemap read back.
    /// **Write-only**: reads are never seen. Needs CONFIG_MEM_SOFT_DIRTY;
    /// clears the soft-dirty state of the whole process each sample.
    SoftDirtyWriteOnly,
}

/// Per-target state.
#[derive(Debug)]
struct ProcTarget {
    pid: u32,
    pagemap: Option<Pagemap>,
    gone: bool,
}

/// The operations set for live processes: `target_ranges` from
/// `/proc/PID/maps`, access checks through pagemap and the idle page bitmap
/// (or soft-dirty bits). Every path is under `root` ("/" in production).
///
/// The engine's primitives cannot fail, so an I/O error makes the affected
/// samples count as not accessed and is kept for [`take_error`](Self::take_error).
#[derive(Debug)]
pub struct ProcOps {
    root: PathBuf,
    mode: AccessMode,
    targets: Vec<ProcTarget>,
    bitmap: Option<IdleBitmap>,
    /// PFN of each region's sampling page marked idle at prepare time
    /// (`None`: not present, counts as not accessed).
    pending: Vec<Option<u64>>,
    error: Option<ProcError>,
}

impl ProcOps {
    /// Opens the primitives `mode` needs for `pids` (target `i` is `pids[i]`)
    /// and fails with a precise error when one is missing.
    pub fn new(
        root: impl Into<PathBuf>,
        pids: &[u32],
        mode: AccessMode,
    ) -> Result<Self, ProcError> {
        let root = root.into();
        let bitmap = match mode {
            AccessMode::IdlePage => Some(IdleBitmap::open(&root)?),
            AccessMode::SoftDirtyWriteOnly => None,
        };
        let mut targets = Vec::with_capacity(pids.len());
        for &pid in pids {
            let pagemap = Pagemap::open(&root, pid)?;
            if mode == AccessMode::SoftDirtyWriteOnly {
                let p = clear_refs_path(&root, pid);
                if !p.exists() {
                    return Err(ProcError::Missing {
                        primitive: "soft-dirty reset file",
                        path: p,
                        provides: "CONFIG_PROC_PAGE_MONITOR and CONFIG_MEM_SOFT_DIRTY",
                    });
                }
            }
            targets.push(ProcTarget {
                pid,
                pagemap: Some(pagemap),
                gone: false,
            });
        }
        Ok(Self {
            root,
            mode,
            targets,
            bitmap,
            pending: Vec::new(),
            error: None,
        })
    }

    pub fn mode(&self) -> AccessMode {
        self.mode
    }

    /// The first error since the last call, if any.
    pub fn take_error(&mut self) -> Option<ProcError> {
        self.error.take()
    }

    fn note(&mut self, e: ProcError) {
        self.error.get_or_insert(e);
    }

    fn proc_dir(&self, pid: u32) -> PathBuf {
        self.root.join(format!("proc/{pid}"))
    }

    /// Pagemap entries of the sampling addresses of target `i`, or `None`
    /// (and the target marked gone) when its process vanished.
    fn sample_entries(&mut self, i: usize, t: &Target) -> Option<Vec<crate::PagemapEntry>> {
        let addrs: Vec<u64> = t.regions.iter().map(|r| r.sampling_addr).collect();
        let pt = self.targets.get_mut(i)?;
        if pt.gone {
            return None;
        }
        let pm = pt.pagemap.as_ref()?;
        match pm.entries(&addrs) {
            Ok(e) => Some(e),
            Err(e) => {
                let pid = pt.pid;
                if !self.proc_dir(pid).exists() {
                    self.targets[i].gone = true;
                } else {
                    self.note(e);
                }
                None
            }
        }
    }
}

/// `ROOT/proc/PID/clear_refs`.
pub fn clear_refs_path(root: &Path, pid: u32) -> PathBuf {
    root.join(format!("proc/{pid}/clear_refs"))
}

impl Operations for ProcOps {
    fn target_ranges(&mut self, idx: usize, _target: &Target) -> Option<Vec<AddrRange>> {
        let pid = self.targets.get(idx)?.pid;
        match read_maps(&self.root, pid) {
            Ok(m) => Some(monitoring_ranges(&m)),
            Err(ProcError::Gone { .. }) => {
                self.targets[idx].gone = true;
                None
            }
            Err(e) => {
                self.note(e);
                None
            }
        }
    }

    fn prepare_access_checks(&mut self, targets: &[Target], _window: SampleWindow) {
        self.pending.clear();
        match self.mode {
            AccessMode::IdlePage => {
                for (i, t) in targets.iter().enumerate() {
                    match self.sample_entries(i, t) {
                        Some(e) => self.pending.extend(e.iter().map(|e| e.pfn())),
                        None => self.pending.extend(t.regions.iter().map(|_| None)),
                    }
                }
                let pfns: Vec<u64> = self.pending.iter().flatten().copied().collect();
                if pfns.is_empty() {
                    return;
                }
                if pfns.iter().all(|&p| p == 0) {
                    let path = crate::pagemap::pagemap_path(&self.root, self.targets[0].pid);
                    self.note(ProcError::PfnHidden { path });
                    self.pending.iter_mut().for_each(|p| *p = None);
                    return;
                }
                let bm = self.bitmap.as_ref().expect("idle mode opens the bitmap");
                if let Err(e) = bm.set_idle(&pfns) {
                    self.pending.iter_mut().for_each(|p| *p = None);
                    self.note(e);
                }
            }
            AccessMode::SoftDirtyWriteOnly => {
                for i in 0..targets.len().min(self.targets.len()) {
                    if self.targets[i].gone {
                        continue;
                    }
                    let p = clear_refs_path(&self.root, self.targets[i].pid);
                    if let Err(e) = std::fs::write(&p, "4") {
                        if !self.proc_dir(self.targets[i].pid).exists() {
                            self.targets[i].gone = true;
                        } else {
                            self.note(ProcError::io("writing", &p, e));
                        }
                    }
                }
            }
        }
    }

    fn check_accesses(
        &mut self,
        targets: &[Target],
        _window: SampleWindow,
        accessed: &mut Vec<bool>,
    ) {
        accessed.clear();
        match self.mode {
            AccessMode::IdlePage => {
                let nr: usize = targets.iter().map(|t| t.regions.len()).sum();
                if self.pending.len() != nr {
                    accessed.resize(nr, false);
                    return;
                }
                let pfns: Vec<u64> = self.pending.iter().flatten().copied().collect();
                let bm = self.bitmap.as_ref().expect("idle mode opens the bitmap");
                let idle = match bm.is_idle(&pfns) {
                    Ok(v) => v,
                    Err(e) => {
                        self.note(e);
                        accessed.resize(nr, false);
                        return;
                    }
                };
                let mut it = idle.into_iter();
                for p in &self.pending {
                    accessed.push(p.is_some() && !it.next().expect("one per pfn"));
                }
            }
            AccessMode::SoftDirtyWriteOnly => {
                for (i, t) in targets.iter().enumerate() {
                    match self.sample_entries(i, t) {
                        Some(e) => accessed.extend(e.iter().map(|e| e.present() && e.soft_dirty())),
                        None => accessed.extend(t.regions.iter().map(|_| false)),
                    }
                }
            }
        }
    }

    fn target_valid(&self, idx: usize) -> bool {
        self.targets
            .get(idx)
            .is_some_and(|t| !t.gone && self.proc_dir(t.pid).exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::tests::{fake_bitmap, word};
    use crate::PagemapEntry;
    use std::os::unix::fs::FileExt;
    use udamon_core::Region;

    const P: u64 = PagemapEntry::PRESENT;

    fn fake_proc(root: &Path, pid: u32, entries: &[(u64, u64)]) {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("maps"),
            "00010000-00020000 r-xp 00000000 00:00 0 /bin/x\n\
             00100000-00110000 rw-p 00000000 00:00 0 [heap]\n\
             00400000-00410000 rw-p 00000000 00:00 0 [stack]\n",
        )
        .unwrap();
        std::fs::write(dir.join("clear_refs"), "").unwrap();
        let f = std::fs::File::create(dir.join("pagemap")).unwrap();
        for &(page, e) in entries {
            f.write_all_at(&e.to_le_bytes(), page * 8).unwrap();
        }
    }

    fn target(pid: u32, samples: &[u64]) -> Target {
        let mut t = Target::new(pid);
        for &a in samples {
            let mut r = Region::new(a, a + 0x1000);
            r.sampling_addr = a;
            t.regions.push(r);
        }
        t
    }

    const W: SampleWindow = SampleWindow {
        start_us: 0,
        end_us: 5000,
    };

    #[test]
    fn idle_mode_marks_then_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Pages 0x10, 0x100 present at PFNs 70, 3; page 0x400 not present.
        fake_proc(root, 42, &[(0x10, P | 70), (0x100, P | 3)]);
        fake_bitmap(root, 128);
        let mut ops = ProcOps::new(root, &[42], AccessMode::IdlePage).unwrap();
        let t = [target(42, &[0x10_000, 0x100_000, 0x400_000])];
        assert_eq!(
            ops.target_ranges(0, &t[0]).unwrap(),
            vec![
                AddrRange::new(0x10000, 0x20000),
                AddrRange::new(0x100000, 0x110000),
                AddrRange::new(0x400000, 0x410000)
            ]
        );
        ops.prepare_access_checks(&t, W);
        assert_eq!(word(root, 0), 1 << 3);
        assert_eq!(word(root, 1), 1 << 6);
        // The "kernel" sees PFN 70 accessed: its idle bit is cleared.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(crate::idle::bitmap_path(root))
            .unwrap();
        f.write_all_at(&0u64.to_ne_bytes(), 8).unwrap();
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(
            acc,
            vec![true, false, false],
            "non-present counts as not accessed"
        );
        assert!(ops.take_error().is_none());
        assert!(ops.target_valid(0));
    }

    #[test]
    fn hidden_pfns_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 42, &[(0x10, P)]);
        fake_bitmap(dir.path(), 128);
        let mut ops = ProcOps::new(dir.path(), &[42], AccessMode::IdlePage).unwrap();
        let t = [target(42, &[0x10_000])];
        ops.prepare_access_checks(&t, W);
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(acc, vec![false]);
        let e = ops.take_error().unwrap();
        assert!(e.to_string().contains("needs root or CAP_SYS_ADMIN"), "{e}");
    }

    #[test]
    fn soft_dirty_mode_clears_and_reads_bit_55() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sd = PagemapEntry::SOFT_DIRTY;
        fake_proc(root, 42, &[(0x10, P | sd | 1), (0x100, P | 2), (0x400, sd)]);
        let mut ops = ProcOps::new(root, &[42], AccessMode::SoftDirtyWriteOnly).unwrap();
        let t = [target(42, &[0x10_000, 0x100_000, 0x400_000])];
        ops.prepare_access_checks(&t, W);
        assert_eq!(
            std::fs::read_to_string(clear_refs_path(root, 42)).unwrap(),
            "4"
        );
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(acc, vec![true, false, false]);
    }

    #[test]
    fn vanished_process_becomes_invalid() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 42, &[(0x10, P | 9)]);
        fake_bitmap(dir.path(), 128);
        let mut ops = ProcOps::new(dir.path(), &[42], AccessMode::IdlePage).unwrap();
        std::fs::remove_dir_all(dir.path().join("proc/42")).unwrap();
        assert!(!ops.target_valid(0));
        let t = [target(42, &[0x10_000])];
        assert_eq!(ops.target_ranges(0, &t[0]), None);
        ops.prepare_access_checks(&t, W);
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(acc, vec![false]);
    }

    #[test]
    fn missing_primitives_are_named() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 42, &[]);
        let e = ProcOps::new(dir.path(), &[42], AccessMode::IdlePage).unwrap_err();
        assert!(e.to_string().contains("CONFIG_IDLE_PAGE_TRACKING"), "{e}");
        std::fs::remove_file(clear_refs_path(dir.path(), 42)).unwrap();
        let e = ProcOps::new(dir.path(), &[42], AccessMode::SoftDirtyWriteOnly).unwrap_err();
        assert!(e.to_string().contains("CONFIG_MEM_SOFT_DIRTY"), "{e}");
    }
}
