//! The mappings of the monitored targets, for the record: read at the
//! start of each target and compared once per ops update, written as a
//! `maps` entry (`udamon_record::MapsEvent`) only when they changed. A
//! mapped ELF file's build-id is read once per file (device and inode) so
//! a report later names symbols only from that very build. A simulated
//! workload's objects are its mappings.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use udamon_record::{MapInfo, MapsEvent};
use udamon_sim::Workload;

/// Files whose build-id is remembered; past this the memory starts over.
const MAX_FILES: usize = 16_384;

/// A target's mappings beyond this many are left out of the record (the
/// kernel's default `vm.max_map_count` is 65,530); the last entry says how
/// many were left out.
pub const MAX_MAPS: usize = 65_536;

/// A simulated workload's objects as mappings, each named by its object.
pub fn layout_maps(w: &Workload) -> Vec<MapInfo> {
    w.objects
        .iter()
        .map(|o| MapInfo {
            start: o.range.start,
            end: o.range.end,
            perms: if o.file { "rw-s" } else { "rw-p" }.into(),
            path: o.name.clone(),
            ..MapInfo::default()
        })
        .collect()
}

/// Watches the targets' mappings (see the module's documentation).
#[derive(Debug)]
pub(crate) struct MapsWatch {
    root: PathBuf,
    every: Duration,
    next: Option<Instant>,
    /// The mappings written last, per target index, and a hash of the
    /// maps text they were read from: a poll that reads the same text
    /// parses nothing (a program's processes mostly keep their mappings).
    last: HashMap<u32, (u64, Vec<MapInfo>)>,
    /// Build-ids by (device, inode).
    ids: HashMap<(String, u64), Option<String>>,
}

impl MapsWatch {
    pub fn new(root: &Path, every: Duration) -> Self {
        Self {
            root: root.to_path_buf(),
            every: every.max(Duration::from_millis(100)),
            next: None,
            last: HashMap::new(),
            ids: HashMap::new(),
        }
    }

    /// Forgets what was written: the next poll writes every target's
    /// mappings (a new record file starts).
    pub fn reset(&mut self) {
        self.last.clear();
        self.next = None;
    }

    /// Whether a poll is due (the first one always is).
    pub fn due(&self) -> bool {
        self.next.is_none_or(|n| Instant::now() >= n)
    }

    /// The targets' mappings that changed since they were last written
    /// (`targets`: index and pid). A target whose maps cannot be read (it
    /// just exited) is skipped; one that left is forgotten.
    pub fn poll(&mut self, targets: &[(u32, u32)], at_us: u64) -> Vec<MapsEvent> {
        self.next = Some(Instant::now() + self.every);
        self.last
            .retain(|idx, _| targets.iter().any(|(i, _)| i == idx));
        let mut out = Vec::new();
        for &(idx, pid) in targets {
            let path = udamon_proc::maps::maps_path(&self.root, pid);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let hash = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                text.hash(&mut h);
                h.finish()
            };
            if self.last.get(&idx).is_some_and(|(h, _)| *h == hash) {
                continue;
            }
            let Ok(maps) = udamon_proc::maps::parse_maps(&text, &path) else {
                continue;
            };
            let maps: Vec<MapInfo> = maps
                .into_iter()
                .take(MAX_MAPS)
                .map(|m| {
                    let build_id = self.build_id(pid, &m);
                    MapInfo {
                        start: m.range.start,
                        end: m.range.end,
                        perms: m.perms,
                        offset: m.offset,
                        dev: if m.inode == 0 { String::new() } else { m.dev },
                        inode: m.inode,
                        path: m.path,
                        build_id,
                    }
                })
                .collect();
            if self.last.get(&idx).map(|(_, m)| m) != Some(&maps) {
                out.push(MapsEvent {
                    at_us,
                    idx,
                    maps: maps.clone(),
                });
            }
            self.last.insert(idx, (hash, maps));
        }
        out
    }

    /// The build-id of a file-backed mapping's file, read once per file.
    fn build_id(&mut self, pid: u32, m: &udamon_proc::Mapping) -> Option<String> {
        if m.inode == 0 || !m.path.starts_with('/') {
            return None;
        }
        let key = (m.dev.clone(), m.inode);
        if let Some(id) = self.ids.get(&key) {
            return id.clone();
        }
        if self.ids.len() >= MAX_FILES {
            self.ids.clear();
        }
        let id = self.read_build_id(pid, m);
        self.ids.insert(key, id.clone());
        id
    }

    /// Reads the build-id of the file the process maps: through
    /// `map_files` (the mapped file itself, even if replaced or deleted
    /// since), else by its path in the process's root, if that is still
    /// the same inode.
    fn read_build_id(&self, pid: u32, m: &udamon_proc::Mapping) -> Option<String> {
        let proc = self.root.join(format!("proc/{pid}"));
        let by_map = proc.join(format!("map_files/{:x}-{:x}", m.range.start, m.range.end));
        if let Ok(id) = udamon_elf::build_id(&by_map) {
            return id;
        }
        let path = proc.join("root").join(m.path.trim_start_matches('/'));
        let same = std::fs::metadata(&path).is_ok_and(|md| md.ino() == m.inode);
        same.then(|| udamon_elf::build_id(&path).ok().flatten())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_written_at_the_start_then_only_when_they_change() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proc/42");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |text: &str| std::fs::write(dir.join("maps"), text).unwrap();
        write("00400000-00401000 r-xp 00000000 08:01 1234 /bin/prog\n01000000-01021000 rw-p 00000000 00:00 0 [heap]\n");
        let mut w = MapsWatch::new(root.path(), Duration::from_secs(1));
        assert!(w.due());
        let first = w.poll(&[(0, 42)], 0);
        assert_eq!(first.len(), 1);
        let maps = &first[0].maps;
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].path, "/bin/prog");
        assert_eq!((maps[0].dev.as_str(), maps[0].inode), ("08:01", 1234));
        // Not in the fake root: no build-id, and no error either.
        assert_eq!(maps[0].build_id, None);
        assert_eq!((maps[1].dev.as_str(), maps[1].inode), ("", 0));
        assert!(!w.due());
        assert!(w.poll(&[(0, 42)], 1_000_000).is_empty());
        write("00400000-00401000 r-xp 00000000 08:01 1234 /bin/prog\n01000000-01042000 rw-p 00000000 00:00 0 [heap]\n");
        let grown = w.poll(&[(0, 42)], 2_000_000);
        assert_eq!(grown.len(), 1);
        assert_eq!(grown[0].maps[1].end, 0x0104_2000);
        // A target that cannot be read is skipped; after a reset, all are
        // written again.
        assert!(w.poll(&[(0, 42), (1, 43)], 3_000_000).is_empty());
        w.reset();
        assert_eq!(w.poll(&[(0, 42)], 4_000_000).len(), 1);
    }

    #[test]
    fn a_mapped_elf_files_build_id_is_read_from_the_process_root() {
        let exe = std::env::current_exe().unwrap();
        let Some(id) = udamon_elf::build_id(&exe).unwrap() else {
            return; // a toolchain that links without build-ids
        };
        let pid = std::process::id();
        let maps = udamon_proc::read_maps(Path::new("/"), pid).unwrap();
        let mut w = MapsWatch::new(Path::new("/"), Duration::from_secs(1));
        let ev = w.poll(&[(0, pid)], 0);
        let exe = exe.to_str().unwrap();
        let ours: Vec<&MapInfo> = ev[0].maps.iter().filter(|m| m.path == exe).collect();
        assert!(!ours.is_empty(), "{maps:?}");
        assert!(ours.iter().all(|m| m.build_id.as_deref() == Some(&*id)));
    }
}
