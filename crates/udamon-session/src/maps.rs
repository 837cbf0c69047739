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

/// A process whose mappings are watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Watched {
    /// Its target index in the record.
    pub idx: u32,
    pub pid: u32,
    /// Its address space's size as a scan of the program read it (a
    /// program's process: see [`MapsWatch::poll`]).
    pub vsize: Option<u64>,
}

/// A program's process whose size stayed the same since its mappings were
/// last read is read again at every this many polls only (a mapping
/// changed in place, by `mprotect` or a `MAP_FIXED` of the same size, is
/// seen that late).
pub(crate) const REREAD_SAME_SIZE: u32 = 10;

/// What was read last of one target.
#[derive(Debug)]
struct Last {
    /// A hash of the maps text: a poll that reads the same text parses
    /// nothing (a program's processes mostly keep their mappings).
    hash: u64,
    maps: Vec<MapInfo>,
    /// The size the target had when they were read, and the polls since.
    vsize: Option<u64>,
    polls: u32,
}

/// Watches the targets' mappings (see the module's documentation).
#[derive(Debug)]
pub(crate) struct MapsWatch {
    root: PathBuf,
    every: Duration,
    next: Option<Instant>,
    /// The mappings written last, per target index.
    last: HashMap<u32, Last>,
    /// Build-ids by (device, inode).
    ids: HashMap<(String, u64), Option<String>>,
    /// The read buffer, kept from poll to poll.
    buf: Vec<u8>,
}

impl MapsWatch {
    pub fn new(root: &Path, every: Duration) -> Self {
        Self {
            root: root.to_path_buf(),
            every: every.max(Duration::from_millis(100)),
            next: None,
            last: HashMap::new(),
            ids: HashMap::new(),
            buf: Vec::new(),
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

    /// The targets' mappings that changed since they were last written.
    /// A target whose maps cannot be read (it just exited) is skipped; one
    /// that left is forgotten. A program's process (one with a `vsize`)
    /// whose size is the one it had when its mappings were last read is
    /// not read again before [`REREAD_SAME_SIZE`] polls: reading each
    /// process's maps every second is most of what a program of many
    /// processes costs on kernel DAMON, beyond the regions.
    pub fn poll(&mut self, targets: &[Watched], at_us: u64) -> Vec<MapsEvent> {
        self.next = Some(Instant::now() + self.every);
        self.last
            .retain(|idx, _| targets.iter().any(|t| t.idx == *idx));
        let mut out = Vec::new();
        for t in targets {
            if let Some(last) = self.last.get_mut(&t.idx) {
                if t.vsize.is_some() && t.vsize == last.vsize && last.polls + 1 < REREAD_SAME_SIZE {
                    last.polls += 1;
                    continue;
                }
            }
            let path = udamon_proc::maps::maps_path(&self.root, t.pid);
            if udamon_proc::read_proc_file(&path, &mut self.buf, false).is_err() {
                continue;
            }
            // Hashed as read: text unchanged since the last read is
            // neither copied nor parsed.
            let hash = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                self.buf.hash(&mut h);
                h.finish()
            };
            if let Some(last) = self.last.get_mut(&t.idx).filter(|l| l.hash == hash) {
                last.vsize = t.vsize;
                last.polls = 0;
                continue;
            }
            let Ok(maps) =
                udamon_proc::maps::parse_maps(&String::from_utf8_lossy(&self.buf), &path)
            else {
                continue;
            };
            let pid = t.pid;
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
            if self.last.get(&t.idx).map(|l| &l.maps) != Some(&maps) {
                out.push(MapsEvent {
                    at_us,
                    idx: t.idx,
                    maps: maps.clone(),
                });
            }
            self.last.insert(
                t.idx,
                Last {
                    hash,
                    maps,
                    vsize: t.vsize,
                    polls: 0,
                },
            );
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

    fn t(idx: u32, pid: u32, vsize: Option<u64>) -> Watched {
        Watched { idx, pid, vsize }
    }

    #[test]
    fn mappings_are_written_at_the_start_then_only_when_they_change() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proc/42");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |text: &str| std::fs::write(dir.join("maps"), text).unwrap();
        write("00400000-00401000 r-xp 00000000 08:01 1234 /bin/prog\n01000000-01021000 rw-p 00000000 00:00 0 [heap]\n");
        let mut w = MapsWatch::new(root.path(), Duration::from_secs(1));
        assert!(w.due());
        let first = w.poll(&[t(0, 42, None)], 0);
        assert_eq!(first.len(), 1);
        let maps = &first[0].maps;
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].path, "/bin/prog");
        assert_eq!((maps[0].dev.as_str(), maps[0].inode), ("08:01", 1234));
        // Not in the fake root: no build-id, and no error either.
        assert_eq!(maps[0].build_id, None);
        assert_eq!((maps[1].dev.as_str(), maps[1].inode), ("", 0));
        assert!(!w.due());
        assert!(w.poll(&[t(0, 42, None)], 1_000_000).is_empty());
        write("00400000-00401000 r-xp 00000000 08:01 1234 /bin/prog\n01000000-01042000 rw-p 00000000 00:00 0 [heap]\n");
        let grown = w.poll(&[t(0, 42, None)], 2_000_000);
        assert_eq!(grown.len(), 1);
        assert_eq!(grown[0].maps[1].end, 0x0104_2000);
        // A target that cannot be read is skipped; after a reset, all are
        // written again.
        assert!(w
            .poll(&[t(0, 42, None), t(1, 43, None)], 3_000_000)
            .is_empty());
        w.reset();
        assert_eq!(w.poll(&[t(0, 42, None)], 4_000_000).len(), 1);
    }

    #[test]
    fn a_program_process_of_the_same_size_is_read_again_only_now_and_then() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proc/42");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |text: &str| std::fs::write(dir.join("maps"), text).unwrap();
        let heap = |end: u32| {
            format!("00400000-00401000 r-xp 00000000 08:01 1234 /bin/prog\n01000000-{end:08x} rw-p 00000000 00:00 0 [heap]\n")
        };
        write(&heap(0x0102_1000));
        let mut w = MapsWatch::new(root.path(), Duration::from_secs(1));
        assert_eq!(w.poll(&[t(0, 42, Some(100))], 0).len(), 1);
        // Changed in place, the size the same: seen at the tenth poll.
        write(&heap(0x0104_2000));
        for i in 1..REREAD_SAME_SIZE {
            assert!(
                w.poll(&[t(0, 42, Some(100))], u64::from(i)).is_empty(),
                "poll {i}"
            );
        }
        let late = w.poll(&[t(0, 42, Some(100))], 10);
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].maps[1].end, 0x0104_2000);
        // A new size: read at once.
        write(&heap(0x0108_4000));
        let grown = w.poll(&[t(0, 42, Some(200))], 11);
        assert_eq!(grown.len(), 1);
        assert_eq!(grown[0].maps[1].end, 0x0108_4000);
        // A process given without a size (one process, not a program) is
        // read at every poll.
        write(&heap(0x0110_0000));
        assert_eq!(w.poll(&[t(0, 42, None)], 12).len(), 1);
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
        let ev = w.poll(&[t(0, pid, None)], 0);
        let exe = exe.to_str().unwrap();
        let ours: Vec<&MapInfo> = ev[0].maps.iter().filter(|m| m.path == exe).collect();
        assert!(!ours.is_empty(), "{maps:?}");
        assert!(ours.iter().all(|m| m.build_id.as_deref() == Some(&*id)));
    }
}
