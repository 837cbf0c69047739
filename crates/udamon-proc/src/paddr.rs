//! [`PaddrOps`]: the physical address space, checked through the idle page
//! bitmap (the user-space counterpart of the kernel's paddr operations).

use std::path::{Path, PathBuf};

use udamon_core::{AddrRange, Operations, SampleWindow, Target};

use crate::idle::{IdleBitmap, KpageFlags};
use crate::Error;

/// The top-level "System RAM" ranges of `ROOT/proc/iomem`. Fails when the
/// file hides its addresses (they read as zero for readers without
/// CAP_SYS_ADMIN).
pub fn system_ram(root: &Path) -> Result<Vec<AddrRange>, Error> {
    let path = root.join("proc/iomem");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
    let mut out = Vec::new();
    for line in text.lines() {
        // Nested resources are indented; System RAM is top level.
        if line.starts_with(' ') || !line.ends_with(": System RAM") {
            continue;
        }
        let range = line.split(" : ").next().unwrap_or("");
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        // iomem ends are inclusive; keep whole pages.
        let (start, end) = (s.div_ceil(4096) * 4096, (e + 1) / 4096 * 4096);
        if start < end {
            out.push(AddrRange::new(start, end));
        }
    }
    if out.is_empty() || out.iter().all(|r| r.start == 0 && r.end == 0) {
        return Err(Error::Denied {
            path,
            source: std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "no System RAM address is visible (addresses read as zero without CAP_SYS_ADMIN)",
            ),
        });
    }
    Ok(out)
}

/// The System RAM of NUMA node `node`: its memory blocks
/// (`/sys/devices/system/node/nodeN/memoryM`, each `block_size_bytes`
/// long) within System RAM, merged where they touch.
pub fn node_ram(root: &Path, node: u32) -> Result<Vec<AddrRange>, Error> {
    let dir = root.join(format!("sys/devices/system/node/node{node}"));
    let bs_path = root.join("sys/devices/system/memory/block_size_bytes");
    let bs_text =
        std::fs::read_to_string(&bs_path).map_err(|e| Error::io("reading", &bs_path, e))?;
    let bs = u64::from_str_radix(bs_text.trim().trim_start_matches("0x"), 16).map_err(|_| {
        Error::io(
            "reading",
            &bs_path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not a hexadecimal size"),
        )
    })?;
    let mut blocks: Vec<u64> = std::fs::read_dir(&dir)
        .map_err(|e| Error::io("reading", &dir, e))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("memory")?.parse().ok())
        .collect();
    blocks.sort_unstable();
    let mut ranges: Vec<AddrRange> = Vec::new();
    for b in blocks {
        let (start, end) = (b * bs, (b + 1) * bs);
        match ranges.last_mut() {
            Some(r) if r.end == start => r.end = end,
            _ => ranges.push(AddrRange::new(start, end)),
        }
    }
    let ram = system_ram(root)?;
    let out: Vec<AddrRange> = ranges
        .iter()
        .flat_map(|n| {
            ram.iter().filter_map(move |r| {
                let (s, e) = (n.start.max(r.start), n.end.min(r.end));
                (s < e).then(|| AddrRange::new(s, e))
            })
        })
        .collect();
    if out.is_empty() {
        return Err(Error::io(
            "reading",
            &dir,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("node {node} has no memory block within System RAM"),
            ),
        ));
    }
    Ok(out)
}

/// Physical memory as one target (index 0): its ranges from `/proc/iomem`,
/// a sampled address's page is its PFN; pages not on an LRU list (kernel
/// memory, free pages) count as not accessed, as in the kernel.
#[derive(Debug)]
pub struct PaddrOps {
    root: PathBuf,
    /// Only this NUMA node's memory.
    node: Option<u32>,
    bitmap: IdleBitmap,
    flags: KpageFlags,
    pending: Vec<Option<u64>>,
    error: Option<Error>,
}

impl PaddrOps {
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, Error> {
        Self::with_node(root, None)
    }

    /// The memory of NUMA node `node` only ([`node_ram`]), or all System
    /// RAM with `None`.
    pub fn with_node(root: impl Into<PathBuf>, node: Option<u32>) -> Result<Self, Error> {
        let root = root.into();
        let bitmap = IdleBitmap::open(&root)?;
        let flags = KpageFlags::open(&root)?;
        match node {
            Some(n) => node_ram(&root, n)?,
            None => system_ram(&root)?,
        };
        Ok(Self {
            root,
            node,
            bitmap,
            flags,
            pending: Vec::new(),
            error: None,
        })
    }

    /// The first error since the last call, if any.
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    fn note(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }
}

impl Operations for PaddrOps {
    fn target_ranges(&mut self, _idx: usize, _target: &Target) -> Option<Vec<AddrRange>> {
        let ranges = match self.node {
            Some(n) => node_ram(&self.root, n),
            None => system_ram(&self.root),
        };
        match ranges {
            Ok(r) => Some(r),
            Err(e) => {
                self.note(e);
                None
            }
        }
    }

    fn prepare_access_checks(&mut self, targets: &[Target], _window: SampleWindow) {
        let addrs: Vec<u64> = targets
            .iter()
            .flat_map(|t| t.regions.iter().map(|r| r.sampling_addr))
            .collect();
        let pfns: Vec<u64> = addrs.iter().map(|a| a / 4096).collect();
        self.pending = match self.flags.lru_heads(&pfns, &addrs) {
            Ok(h) => h,
            Err(e) => {
                self.note(e);
                vec![None; pfns.len()]
            }
        };
        if let Err(e) = self.bitmap.mark_pending(&mut self.pending) {
            self.note(e);
        }
    }

    fn check_accesses(
        &mut self,
        targets: &[Target],
        _window: SampleWindow,
        accessed: &mut Vec<bool>,
    ) {
        let nr: usize = targets.iter().map(|t| t.regions.len()).sum();
        if self.pending.len() != nr {
            accessed.clear();
            accessed.resize(nr, false);
            return;
        }
        if let Err(e) = self.bitmap.read_pending(&self.pending, accessed) {
            self.note(e);
        }
    }

    /// Free memory per mille of the total, from `/proc/meminfo`.
    fn free_mem_rate(&mut self, _now_us: u64) -> Option<u32> {
        crate::ops::meminfo_free_rate(&self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ram_is_the_nodes_blocks_within_system_ram() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let p = dir.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w(
            "proc/iomem",
            "00001000-0009fbff : System RAM\n00100000-7ffdffff : System RAM\n100000000-17fffffff : System RAM\n",
        );
        w("sys/devices/system/memory/block_size_bytes", "8000000\n");
        // Node 0: blocks 0..15 (0..2 GiB); node 1: blocks 32..47 (4..6 GiB).
        for b in 0..16 {
            w(
                &format!("sys/devices/system/node/node0/memory{b}/online"),
                "1",
            );
            w(
                &format!("sys/devices/system/node/node1/memory{}/online", b + 32),
                "1",
            );
        }
        w("sys/devices/system/node/node0/meminfo", "");
        assert_eq!(
            node_ram(dir.path(), 0).unwrap(),
            vec![
                AddrRange::new(0x1000, 0x9f000),
                AddrRange::new(0x100000, 0x7ffe_0000)
            ]
        );
        assert_eq!(
            node_ram(dir.path(), 1).unwrap(),
            vec![AddrRange::new(0x1_0000_0000, 0x1_8000_0000)]
        );
        assert!(node_ram(dir.path(), 2).is_err());
    }

    #[test]
    fn system_ram_is_the_top_level_ram_of_iomem() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/iomem"),
            "00000000-00000fff : Reserved\n\
             00001000-0009fbff : System RAM\n\
             000f0000-000fffff : System ROM\n\
             00100000-7ffdffff : System RAM\n\
             \x20 01000000-01ffffff : Kernel code\n\
             100000000-17fffffff : System RAM\n",
        )
        .unwrap();
        assert_eq!(
            system_ram(dir.path()).unwrap(),
            vec![
                AddrRange::new(0x1000, 0x9f000),
                AddrRange::new(0x100000, 0x7ffe_0000),
                AddrRange::new(0x1_0000_0000, 0x1_8000_0000),
            ]
        );
        std::fs::write(
            dir.path().join("proc/iomem"),
            "00000000-00000000 : System RAM\n",
        )
        .unwrap();
        let e = system_ram(dir.path()).unwrap_err();
        assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}");
    }
}
