//! What a run measures, the way DAMON's evaluation harness (damon-tests'
//! perf suite) measures it: the target's RSS and the system's used memory
//! sampled once a second, the kdamond threads' CPU time, and PSI, major
//! faults and swap traffic as end minus start of the kernel's counters.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use udamon_proc::{clock_ticks_per_s, proc_field, ProcStat};

/// The kernel's cumulative counters read at the start and the end of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// /proc/vmstat `pgmajfault`, `pswpin`, `pswpout` (system-wide).
    pub pgmajfault: Option<u64>,
    pub pswpin: Option<u64>,
    pub pswpout: Option<u64>,
    /// /proc/pressure/memory `total=` of `some` and `full`, microseconds.
    pub psi_some_us: Option<u64>,
    pub psi_full_us: Option<u64>,
}

impl Counters {
    pub fn read(root: &Path) -> Counters {
        let mut c = Counters::default();
        if let Ok(t) = std::fs::read_to_string(root.join("proc/vmstat")) {
            c.pgmajfault = proc_field(&t, "pgmajfault");
            c.pswpin = proc_field(&t, "pswpin");
            c.pswpout = proc_field(&t, "pswpout");
        }
        if let Ok(t) = std::fs::read_to_string(root.join("proc/pressure/memory")) {
            for l in t.lines() {
                let total = l
                    .split_whitespace()
                    .find_map(|f| f.strip_prefix("total="))
                    .and_then(|v| v.parse().ok());
                if l.starts_with("some") {
                    c.psi_some_us = total;
                } else if l.starts_with("full") {
                    c.psi_full_us = total;
                }
            }
        }
        c
    }

    /// `self - start` for each counter both readings have.
    pub fn since(&self, start: &Counters) -> Counters {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        Counters {
            pgmajfault: d(self.pgmajfault, start.pgmajfault),
            pswpin: d(self.pswpin, start.pswpin),
            pswpout: d(self.pswpout, start.pswpout),
            psi_some_us: d(self.psi_some_us, start.psi_some_us),
            psi_full_us: d(self.psi_full_us, start.psi_full_us),
        }
    }
}

/// `MemTotal - MemFree` in kB, as damon-tests computes "memory used".
pub fn mem_used_kb(root: &Path) -> Option<u64> {
    let t = std::fs::read_to_string(root.join("proc/meminfo")).ok()?;
    Some(proc_field(&t, "MemTotal:")?.saturating_sub(proc_field(&t, "MemFree:")?))
}

fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64 / 1024
    } else {
        4
    }
}

/// proc(5)'s numbers of the `/proc/PID/stat` fields used here.
const PPID: usize = 4;
const UTIME: usize = 14;
const STIME: usize = 15;
const STARTTIME: usize = 22;

fn cpu_ticks(s: &ProcStat) -> Option<u64> {
    Some(s.field(UTIME)? + s.field(STIME)?)
}

/// Every process's stat, by pid.
pub fn all_stats(root: &Path) -> HashMap<u32, ProcStat> {
    let Ok(dir) = std::fs::read_dir(root.join("proc")) else {
        return HashMap::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, ProcStat::read(root, pid)?)))
        .collect()
}

/// `root` and its descendants, from one reading of every process.
pub fn tree(stats: &HashMap<u32, ProcStat>, root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, s) in stats {
        if let Some(ppid) = s.field(PPID) {
            children.entry(ppid as u32).or_default().push(pid);
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let me = out[i];
        if let Some(c) = children.get(&me) {
            out.extend(c.iter().copied().filter(|p| *p != me));
        }
        i += 1;
        if out.len() > 100_000 {
            break;
        }
    }
    out
}

/// Resident kB of a process (statm's second field).
pub fn rss_kb(root: &Path, pid: u32) -> Option<u64> {
    let t = std::fs::read_to_string(root.join(format!("proc/{pid}/statm"))).ok()?;
    let pages: u64 = t.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_kb())
}

/// Processes named `name` (their comm, or the file name of argv[0]), newest first.
pub fn find_by_name(root: &Path, name: &str) -> Vec<u32> {
    // The kernel cuts comm at 15 bytes.
    let comm = name.get(..15).unwrap_or(name);
    let mut found: Vec<(u64, u32)> = Vec::new();
    for (pid, s) in all_stats(root) {
        let argv0 = std::fs::read(root.join(format!("proc/{pid}/cmdline")))
            .ok()
            .and_then(|c| {
                let first = c.split(|b| *b == 0).next()?.to_vec();
                let s = String::from_utf8(first).ok()?;
                Some(s.rsplit('/').next()?.to_string())
            });
        if s.comm == comm || argv0.as_deref() == Some(name) {
            found.push((s.field(STARTTIME).unwrap_or(0), pid));
        }
    }
    found.sort_unstable_by(|a, b| b.cmp(a));
    found.into_iter().map(|(_, p)| p).collect()
}

/// What the sampler saw over a run.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub rss_kb: Vec<u64>,
    pub mem_used_kb: Vec<u64>,
    /// The CPU ticks of each kdamond thread that was not there at the start,
    /// as last read.
    pub kdamond_ticks: BTreeMap<u32, u64>,
}

impl Samples {
    pub fn rss_avg_kb(&self) -> Option<f64> {
        avg(&self.rss_kb)
    }
    pub fn rss_peak_kb(&self) -> Option<u64> {
        self.rss_kb.iter().copied().max()
    }
    pub fn mem_used_avg_kb(&self) -> Option<f64> {
        avg(&self.mem_used_kb)
    }
    /// CPU seconds of the kdamond threads that started during the run.
    pub fn kdamond_cpu_s(&self) -> Option<f64> {
        if self.kdamond_ticks.is_empty() {
            return None;
        }
        // A thread first seen mid-run started then: its count starts at 0.
        Some(self.kdamond_ticks.values().sum::<u64>() as f64 / clock_ticks_per_s())
    }
}

fn avg(v: &[u64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64 / v.len() as f64)
}

/// Samples once a second on its own thread, until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    target: Arc<Mutex<Option<u32>>>,
    /// Set by `set_target`: sample without waiting for the interval.
    now: Arc<AtomicBool>,
    out: Arc<Mutex<Samples>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling; kdamond threads already running now are not counted
    /// (they belong to someone else).
    pub fn start(root: PathBuf, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let target: Arc<Mutex<Option<u32>>> = Arc::new(Mutex::new(None));
        let now = Arc::new(AtomicBool::new(false));
        let out = Arc::new(Mutex::new(Samples::default()));
        let before: HashSet<u32> = kdamonds(&all_stats(&root)).into_keys().collect();
        let (s, t, o, n) = (stop.clone(), target.clone(), out.clone(), now.clone());
        let thread = std::thread::spawn(move || {
            let step = Duration::from_millis(50);
            let mut next = std::time::Instant::now();
            while !s.load(Ordering::SeqCst) {
                // A new target is sampled at once (a command shorter than
                // the interval still has its RSS), then every interval.
                if n.swap(false, Ordering::SeqCst) {
                    next = std::time::Instant::now();
                }
                if std::time::Instant::now() >= next {
                    next += interval;
                    let stats = all_stats(&root);
                    // The target's tree, while the target lives.
                    let tgt = *t.lock().unwrap_or_else(|e| e.into_inner());
                    let rss: Option<u64> = tgt.filter(|p| stats.contains_key(p)).map(|p| {
                        tree(&stats, p)
                            .iter()
                            .filter_map(|&q| rss_kb(&root, q))
                            .sum()
                    });
                    let used = mem_used_kb(&root);
                    let mut o = o.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(r) = rss {
                        o.rss_kb.push(r);
                    }
                    if let Some(u) = used {
                        o.mem_used_kb.push(u);
                    }
                    for (pid, ticks) in kdamonds(&stats) {
                        if !before.contains(&pid) {
                            o.kdamond_ticks.insert(pid, ticks);
                        }
                    }
                }
                std::thread::sleep(step);
            }
        });
        Sampler {
            stop,
            target,
            now,
            out,
            thread: Some(thread),
        }
    }

    /// The process whose tree's RSS is sampled from now on.
    pub fn set_target(&self, pid: u32) {
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) = Some(pid);
        self.now.store(true, Ordering::SeqCst);
    }

    pub fn finish(mut self) -> Samples {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.out.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// kdamond threads and their CPU ticks.
fn kdamonds(stats: &HashMap<u32, ProcStat>) -> HashMap<u32, u64> {
    stats
        .iter()
        .filter(|(_, s)| s.comm.starts_with("kdamond"))
        .filter_map(|(&p, s)| Some((p, cpu_ticks(s)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_and_subtracted() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/pressure")).unwrap();
        std::fs::write(
            d.path().join("proc/vmstat"),
            "nr_free_pages 1\npgmajfault 10\npswpin 3\npswpout 4\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("proc/pressure/memory"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=500\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=200\n",
        )
        .unwrap();
        let a = Counters::read(d.path());
        assert_eq!(a.pgmajfault, Some(10));
        assert_eq!(a.psi_full_us, Some(200));
        std::fs::write(
            d.path().join("proc/vmstat"),
            "pgmajfault 25\npswpin 3\npswpout 9\n",
        )
        .unwrap();
        let b = Counters::read(d.path()).since(&a);
        assert_eq!(
            (b.pgmajfault, b.pswpin, b.pswpout, b.psi_some_us),
            (Some(15), Some(0), Some(5), Some(0))
        );
        std::fs::write(
            d.path().join("proc/meminfo"),
            "MemTotal:  1000 kB\nMemFree:   300 kB\n",
        )
        .unwrap();
        assert_eq!(mem_used_kb(d.path()), Some(700));
    }

    #[test]
    fn this_process_tree_is_found_and_measured() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let stats = all_stats(Path::new("/"));
        assert!(tree(&stats, me).contains(&child.id()));
        assert!(rss_kb(Path::new("/"), me).unwrap() > 0);
        assert!(find_by_name(Path::new("/"), "sleep").contains(&child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }
}
