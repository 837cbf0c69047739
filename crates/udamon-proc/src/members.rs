//! The processes of a program: given processes, their descendants (followed
//! as they fork, kept when their parent exits), and the processes of a
//! cgroup v2 (its subtree included), found again at every scan. A process is
//! named by its pid and start time, so a pid reused by another process is a
//! new member, never the old one. Kernel threads and zombies (no address
//! space) are never members; threads are their process's member.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::stat::ProcStat;
use crate::Error;

/// A rule over a process: the root, its pid and its command name.
pub type MatchFn = dyn Fn(&Path, u32, &str) -> bool + Send + Sync;

/// Which processes belong by what they are: called with the root, a pid
/// and its command name (`/proc/PID/stat`); every process of the machine is
/// asked at every scan. The label names the rule in messages.
#[derive(Clone)]
pub struct Matcher {
    pub label: String,
    pub test: Arc<MatchFn>,
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matcher")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// What makes a process a member of the program.
#[derive(Clone, Debug, Default)]
pub struct Program {
    /// These processes (while they run).
    pub pids: Vec<u32>,
    /// And their descendants, followed as they are forked.
    pub children: bool,
    /// And every process of this cgroup v2 directory and the cgroups under
    /// it (a path under the cgroup2 mount, as `/sys/fs/cgroup/a/b`, or
    /// relative to the mount, as `a/b`).
    pub cgroup: Option<PathBuf>,
    /// And every process this says belongs (never udamon itself).
    pub matching: Option<Matcher>,
}

/// One member process, as seen by a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub pid: u32,
    /// Clock ticks after boot (`/proc/PID/stat` field 22).
    pub start: u64,
    /// `/proc/PID/stat`'s command name.
    pub comm: String,
    /// Its address space's size in bytes (`/proc/PID/stat` field 23) at
    /// the scan: a process whose size stayed the same most likely kept its
    /// mappings, so they need not be read again at once.
    pub vsize: u64,
}

/// Scans more than this many processes of one cgroup are cut short: a
/// program of more processes than a machine's default `pid_max` is not one.
const MAX_MEMBERS: usize = 1 << 22;

/// Finds a program's members, scan after scan (see the module's
/// documentation).
#[derive(Debug)]
pub struct Tracker {
    root: PathBuf,
    program: Program,
    /// The cgroup directory, resolved under `root`.
    cgroup_dir: Option<PathBuf>,
    /// Members of the last scan (pid, start), with `children`: a
    /// descendant stays a member after its parent exits.
    known: BTreeSet<(u32, u64)>,
    /// The given processes' start times, read when tracking began.
    roots: Vec<(u32, u64)>,
    /// Processes a rule said no to, by pid and the inode number of their
    /// `/proc` directory (a new process under the same pid has another):
    /// not read again until the cache is cleared, every
    /// [`RECHECK_SCANS`] scans (a command line or name can change).
    rejected: BTreeSet<(u32, u64)>,
    scans: u64,
}

/// A rule's "no" is asked again after this many scans.
const RECHECK_SCANS: u64 = 10;

/// A process's fields a scan needs, from one read of its stat file.
struct Seen {
    start: u64,
    comm: String,
    vsize: u64,
    /// Has an address space: not a kernel thread, not a zombie.
    has_mm: bool,
}

fn seen(root: &Path, pid: u32) -> Option<Seen> {
    let st = ProcStat::read(root, pid)?;
    let state = st.state();
    // Kernel threads have no address space: vsize (field 23) is 0, and so
    // is a zombie's.
    // Fields 22 (start time) and 23 (vsize), in one pass over the line.
    let (start, vsize) = {
        let mut f = st.fields_from(22);
        (f.next()??, f.next().flatten().unwrap_or(0))
    };
    let has_mm = vsize > 0 && !matches!(state, 'Z' | 'X' | 'x');
    Some(Seen {
        start,
        comm: st.comm,
        vsize,
        has_mm,
    })
}

/// The cgroup2 mount under `root`.
fn cgroup_mount(root: &Path) -> PathBuf {
    root.join("sys/fs/cgroup")
}

impl Tracker {
    /// Starts tracking `program` under `root` ("/" in production). Fails
    /// when a given process does not exist or the cgroup is not a cgroup
    /// v2 directory.
    pub fn new(root: &Path, program: Program) -> Result<Tracker, Error> {
        let mut roots = Vec::new();
        for &pid in &program.pids {
            match seen(root, pid) {
                Some(s) => roots.push((pid, s.start)),
                None => {
                    return Err(Error::Gone {
                        pid,
                        path: root.join(format!("proc/{pid}")),
                    })
                }
            }
        }
        let cgroup_dir = match &program.cgroup {
            None => None,
            Some(c) => Some(resolve_cgroup(root, c)?),
        };
        Ok(Tracker {
            root: root.to_path_buf(),
            program,
            cgroup_dir,
            known: BTreeSet::new(),
            roots,
            rejected: BTreeSet::new(),
            scans: 0,
        })
    }

    /// The members now, in pid order.
    pub fn scan(&mut self) -> Vec<Member> {
        let mut found: BTreeMap<u32, Seen> = BTreeMap::new();
        let look = |pid: u32, start: Option<u64>, found: &mut BTreeMap<u32, Seen>| {
            if found.contains_key(&pid) {
                return;
            }
            if let Some(s) = seen(&self.root, pid) {
                if start.is_none_or(|st| st == s.start) {
                    found.insert(pid, s);
                }
            }
        };
        // Descendants stay members after their parent exits; a process
        // that left the cgroup or stopped matching does not.
        let sticky = if self.program.children {
            &self.known
        } else {
            &BTreeSet::new()
        };
        for &(pid, start) in self.roots.iter().chain(sticky) {
            look(pid, Some(start), &mut found);
        }
        if let Some(dir) = &self.cgroup_dir {
            for pid in cgroup_procs(dir) {
                look(pid, None, &mut found);
            }
        }
        if let Some(m) = &self.program.matching {
            self.scans += 1;
            if self.scans.is_multiple_of(RECHECK_SCANS) {
                self.rejected.clear();
            }
            let me = std::process::id();
            let mut rejected = BTreeSet::new();
            // One pass over /proc; a process already said no to costs no
            // read (its directory's inode number comes with the listing).
            for (pid, ino) in pids_and_inodes(&self.root) {
                if pid == me || found.contains_key(&pid) {
                    continue;
                }
                if self.rejected.contains(&(pid, ino)) {
                    rejected.insert((pid, ino));
                    continue;
                }
                match seen(&self.root, pid) {
                    Some(s) if (m.test)(&self.root, pid, &s.comm) => {
                        found.insert(pid, s);
                    }
                    Some(_) => {
                        rejected.insert((pid, ino));
                    }
                    None => {}
                }
            }
            self.rejected = rejected;
        }
        if self.program.children {
            // Breadth first from every member: children of each thread.
            let mut queue: Vec<u32> = found.keys().copied().collect();
            while let Some(pid) = queue.pop() {
                if found.len() >= MAX_MEMBERS {
                    break;
                }
                for child in children(&self.root, pid) {
                    if !found.contains_key(&child) {
                        look(child, None, &mut found);
                        if found.contains_key(&child) {
                            queue.push(child);
                        }
                    }
                }
            }
        }
        self.known = found.iter().map(|(&p, s)| (p, s.start)).collect();
        found
            .into_iter()
            .filter(|(_, s)| s.has_mm)
            .map(|(pid, s)| Member {
                pid,
                start: s.start,
                comm: s.comm,
                vsize: s.vsize,
            })
            .collect()
    }
}

/// The cgroup `c` names, as a directory under `root`, checked to be a
/// cgroup v2 one (it has `cgroup.procs`).
fn resolve_cgroup(root: &Path, c: &Path) -> Result<PathBuf, Error> {
    let mount = cgroup_mount(root);
    let rel = c
        .strip_prefix("/sys/fs/cgroup")
        .or_else(|_| c.strip_prefix("/"))
        .unwrap_or(c);
    if rel
        .components()
        .any(|p| !matches!(p, std::path::Component::Normal(_)))
    {
        return Err(Error::Cgroup {
            path: c.to_path_buf(),
            why: "give a path without `..` under /sys/fs/cgroup".into(),
        });
    }
    let dir = mount.join(rel);
    if !dir.join("cgroup.procs").is_file() {
        let why = if mount.join("cgroup.controllers").is_file() {
            format!(
                "{} has no cgroup.procs: no such cgroup (`ls {}` lists them)",
                dir.display(),
                mount.display()
            )
        } else {
            format!(
                "no cgroup v2 hierarchy at {} (cgroup v1 is not supported)",
                mount.display()
            )
        };
        return Err(Error::Cgroup {
            path: c.to_path_buf(),
            why,
        });
    }
    Ok(dir)
}

/// Pids in `dir/cgroup.procs` and in those of the cgroups under it.
fn cgroup_procs(dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if out.len() >= MAX_MEMBERS {
            break;
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                // Sub-cgroups are directories; symlinks are not followed.
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(e.path());
                }
            }
        }
    }
    out
}

/// The children of every thread of `pid` (`/proc/PID/task/TID/children`,
/// CONFIG_PROC_CHILDREN), else those found by a pass over `/proc` (the
/// processes whose parent is `pid`).
fn children(root: &Path, pid: u32) -> Vec<u32> {
    let task = root.join(format!("proc/{pid}/task"));
    let mut out = Vec::new();
    let mut any_file = false;
    if let Ok(rd) = std::fs::read_dir(&task) {
        for e in rd.flatten() {
            if let Ok(text) = std::fs::read_to_string(e.path().join("children")) {
                any_file = true;
                out.extend(
                    text.split_whitespace()
                        .filter_map(|w| w.parse::<u32>().ok()),
                );
            }
        }
    }
    if !any_file {
        out = by_parent(root, pid);
    }
    out
}

/// Every process's pid and the inode number of its `/proc` directory.
fn pids_and_inodes(root: &Path) -> Vec<(u32, u64)> {
    use std::os::unix::fs::DirEntryExt;
    let Ok(rd) = std::fs::read_dir(root.join("proc")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.ino())))
        .collect()
}

/// Processes whose parent (`/proc/PID/stat` field 4) is `pid`.
fn by_parent(root: &Path, pid: u32) -> Vec<u32> {
    pids_and_inodes(root)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|&p| ProcStat::read(root, p).and_then(|s| s.field(4)) == Some(u64::from(pid)))
        .collect()
}

/// A process's cgroup v2 path (`0::PATH` in `/proc/PID/cgroup`).
pub fn cgroup_of(root: &Path, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(root.join(format!("proc/{pid}/cgroup"))).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake process: stat with parent, start time and vsize; its one
    /// thread's children file.
    fn proc(root: &Path, pid: u32, ppid: u32, start: u64, vsize: u64, children: &[u32]) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(d.join(format!("task/{pid}"))).unwrap();
        std::fs::write(
            d.join("stat"),
            format!(
                "{pid} (w {pid}) S {ppid} 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} {vsize} 0\n"
            ),
        )
        .unwrap();
        let kids: Vec<String> = children.iter().map(u32::to_string).collect();
        std::fs::write(d.join(format!("task/{pid}/children")), kids.join(" ")).unwrap();
    }

    fn pids(m: &[Member]) -> Vec<u32> {
        m.iter().map(|m| m.pid).collect()
    }

    #[test]
    fn descendants_are_followed_and_kept_when_their_parent_exits() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        proc(r, 10, 1, 100, 4096, &[11]);
        proc(r, 11, 10, 101, 4096, &[12]);
        proc(r, 12, 11, 102, 4096, &[]);
        proc(r, 13, 1, 103, 4096, &[]); // not of the program
        let p = Program {
            pids: vec![10],
            children: true,
            ..Program::default()
        };
        let mut tr = Tracker::new(r, p).unwrap();
        assert_eq!(pids(&tr.scan()), vec![10, 11, 12]);
        // 11 exits; 12 is reparented to init but stays a member.
        std::fs::remove_dir_all(r.join("proc/11")).unwrap();
        proc(r, 10, 1, 100, 4096, &[14]);
        proc(r, 12, 1, 102, 4096, &[]);
        proc(r, 14, 10, 104, 4096, &[]);
        assert_eq!(pids(&tr.scan()), vec![10, 12, 14]);
        // 12's pid is reused by another program: not a member.
        proc(r, 12, 1, 999, 4096, &[]);
        assert_eq!(pids(&tr.scan()), vec![10, 14]);
    }

    #[test]
    fn kernel_threads_and_zombies_are_not_members() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        proc(r, 10, 1, 100, 4096, &[11, 12]);
        proc(r, 11, 10, 101, 0, &[]);
        let d = r.join("proc/12");
        std::fs::create_dir_all(d.join("task/12")).unwrap();
        std::fs::write(
            d.join("stat"),
            "12 (z) Z 10 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 102 0 0\n",
        )
        .unwrap();
        let p = Program {
            pids: vec![10],
            children: true,
            ..Program::default()
        };
        assert_eq!(pids(&Tracker::new(r, p).unwrap().scan()), vec![10]);
    }

    #[test]
    fn a_cgroup_and_its_subtree() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let cg = r.join("sys/fs/cgroup");
        std::fs::create_dir_all(cg.join("app/sub")).unwrap();
        std::fs::write(cg.join("cgroup.controllers"), "memory\n").unwrap();
        std::fs::write(cg.join("app/cgroup.procs"), "20\n").unwrap();
        std::fs::write(cg.join("app/sub/cgroup.procs"), "21\n22\n").unwrap();
        proc(r, 20, 1, 200, 4096, &[]);
        proc(r, 21, 1, 201, 4096, &[]);
        // 22 exited between the read of cgroup.procs and its stat.
        for given in ["/sys/fs/cgroup/app", "app", "/app"] {
            let p = Program {
                cgroup: Some(given.into()),
                ..Program::default()
            };
            assert_eq!(pids(&Tracker::new(r, p).unwrap().scan()), vec![20, 21]);
        }
        let bad = |c: &str| {
            let p = Program {
                cgroup: Some(c.into()),
                ..Program::default()
            };
            Tracker::new(r, p).unwrap_err().to_string()
        };
        assert!(bad("nope").contains("no such cgroup"), "{}", bad("nope"));
        assert!(bad("app/../..").contains(".."));
    }

    #[test]
    fn processes_that_match_a_rule() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        proc(r, 30, 1, 300, 4096, &[]);
        proc(r, 31, 1, 301, 4096, &[]);
        proc(r, 32, 1, 302, 0, &[]);
        let p = Program {
            matching: Some(Matcher {
                label: "comm w 31 or w 32".into(),
                test: Arc::new(|_, _, comm| comm == "w 31" || comm == "w 32"),
            }),
            ..Program::default()
        };
        // 32 matches but has no memory (a kernel thread).
        let mut tr = Tracker::new(r, p).unwrap();
        assert_eq!(pids(&tr.scan()), vec![31]);
        // 30 said no; renamed, it is not read again until the recheck.
        std::fs::write(
            r.join("proc/30/stat"),
            "30 (w 31) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 300 4096 0\n",
        )
        .unwrap();
        assert_eq!(pids(&tr.scan()), vec![31]);
        let mut seen_again = false;
        for _ in 0..RECHECK_SCANS {
            seen_again |= pids(&tr.scan()) == vec![30, 31];
        }
        assert!(seen_again);
    }

    #[test]
    fn a_missing_process_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = Program {
            pids: vec![77],
            ..Program::default()
        };
        let e = Tracker::new(t.path(), p).unwrap_err();
        assert!(matches!(e, Error::Gone { pid: 77, .. }));
    }
}
