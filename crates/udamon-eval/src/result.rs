//! One run's figures, and the file they are saved to as they come.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::suite::Suite;
use crate::Error;

/// One run of one workload under one configuration. Every figure is
/// optional: a machine without PSI has no PSI figures, a simulated workload
/// has no system memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    pub workload: String,
    pub config: String,
    pub repeat: u32,
    /// "ok", "failed" or "skipped".
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Unix time the run started, seconds.
    #[serde(default)]
    pub started_unix_s: u64,
    /// Wall time of the run command (simulated workloads: simulated runtime).
    #[serde(default)]
    pub runtime_s: Option<f64>,
    /// The workload's own figure (its `metric`).
    #[serde(default)]
    pub metric: Option<f64>,
    /// Average and peak resident set of the target and its descendants,
    /// sampled once a second.
    #[serde(default)]
    pub rss_avg_kb: Option<f64>,
    #[serde(default)]
    pub rss_peak_kb: Option<u64>,
    /// MemTotal - MemFree, sampled once a second, averaged.
    #[serde(default)]
    pub mem_used_avg_kb: Option<f64>,
    /// The monitor's own CPU time (udamon or damo, with its children).
    #[serde(default)]
    pub monitor_cpu_s: Option<f64>,
    /// CPU time of the kdamond threads that started during the run.
    #[serde(default)]
    pub kdamond_cpu_s: Option<f64>,
    /// The run command's CPU time (with the children it waited for).
    #[serde(default)]
    pub workload_cpu_s: Option<f64>,
    /// System-wide counters, end minus start.
    #[serde(default)]
    pub psi_some_us: Option<u64>,
    #[serde(default)]
    pub psi_full_us: Option<u64>,
    #[serde(default)]
    pub pgmajfault: Option<u64>,
    #[serde(default)]
    pub pswpin: Option<u64>,
    #[serde(default)]
    pub pswpout: Option<u64>,
    /// How many RSS samples were taken.
    #[serde(default)]
    pub samples: u32,
    #[serde(default)]
    pub target_pid: Option<u32>,
    /// The path udamon's monitor took (kdamond, idle, softdirty).
    #[serde(default)]
    pub monitor_path: Option<String>,
    /// The system's THP setting during the run.
    #[serde(default)]
    pub thp: Option<String>,
    /// `tuned-*` runs: what their tuning chose (its fields sit beside
    /// the others in the JSON).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningInfo>,
}

/// What a `tuned-*` configuration's tuning chose, as its runs carry it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TuningInfo {
    /// The knob and its tuned value: `min_age = 3s`.
    pub tuned: String,
    /// The tuning's wall time and its runs.
    pub tuning_s: f64,
    pub tuning_runs: u32,
    /// Whether the tuned value's run kept Listing 2's SLA (absent in
    /// results saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning_sla_met: Option<bool>,
}

impl RunResult {
    pub fn new(workload: &str, config: &str, repeat: u32) -> RunResult {
        RunResult {
            workload: workload.into(),
            config: config.into(),
            repeat,
            status: "ok".into(),
            reason: None,
            warnings: Vec::new(),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            runtime_s: None,
            metric: None,
            rss_avg_kb: None,
            rss_peak_kb: None,
            mem_used_avg_kb: None,
            monitor_cpu_s: None,
            kdamond_cpu_s: None,
            workload_cpu_s: None,
            psi_some_us: None,
            psi_full_us: None,
            pgmajfault: None,
            pswpin: None,
            pswpout: None,
            samples: 0,
            target_pid: None,
            monitor_path: None,
            thp: None,
            tuning: None,
        }
    }

    /// The run's file-name stem: `WORKLOAD.CONFIG.REPEAT`.
    pub fn id(&self) -> String {
        format!("{}.{}.{}", self.workload, self.config, self.repeat)
    }

    pub fn fail(&mut self, why: impl Into<String>) {
        if self.status == "ok" {
            self.status = "failed".into();
            self.reason = Some(why.into());
        }
    }

    pub fn skip(&mut self, why: impl Into<String>) {
        self.status = "skipped".into();
        self.reason = Some(why.into());
    }

    pub fn warn(&mut self, w: impl Into<String>) {
        self.warnings.push(w.into());
    }

    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

/// The results directory: `suite.toml` (the suite the results belong to),
/// `results.jsonl` (one line per finished run, appended and synced as each
/// run ends), `runs/` (each run's output and record).
pub struct Store {
    pub dir: PathBuf,
    pub results: Vec<RunResult>,
}

impl Store {
    /// Opens `dir` for `suite`, creating it; refuses results of another suite.
    pub fn open(dir: &Path, suite: &Suite) -> Result<Store, Error> {
        let saved = dir.join("suite.toml");
        let foreign =
            std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) && !saved.exists();
        if foreign {
            return Err(Error::Usage(format!(
                "{} is not empty and holds no udamon eval results (no suite.toml): give a new or empty directory",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Usage(format!("{}: {e}", dir.display())))?;
        match std::fs::read_to_string(&saved) {
            Ok(t) if t != suite.text => {
                return Err(Error::Usage(format!(
                    "{} holds the results of another suite ({} differs from {}): give another --output, or remove the directory to start over",
                    dir.display(),
                    saved.display(),
                    suite.path.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::write_whole(&saved, suite.text.as_bytes())?
            }
            Err(e) => {
                use std::io::ErrorKind::{InvalidData, IsADirectory};
                let what = match e.kind() {
                    InvalidData => "not text",
                    IsADirectory => "a directory, not a file",
                    _ => return Err(Error::Other(format!("{}: {e}", saved.display()))),
                };
                return Err(Error::Usage(format!(
                    "{} is damaged ({what}): give another --output, or remove the directory to start over",
                    saved.display()
                )));
            }
        }
        Self::read(dir)
    }

    /// Reads the results saved in `dir` (a torn last line, from a killed
    /// run, is dropped). Damaged results, whatever the damage (a line that
    /// is not a run result, bytes that are not text, a directory in the
    /// file's place), are bad input.
    pub fn read(dir: &Path) -> Result<Store, Error> {
        let path = dir.join("results.jsonl");
        let damaged = |line: usize, why: String| {
            Error::Usage(format!(
                "{}:{line}: {why}: the results are damaged (remove the line, or give another --output)",
                path.display()
            ))
        };
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
                return Err(Error::Usage(format!(
                    "{} is a directory, not a file of results: the results are damaged (give another --output)",
                    path.display()
                )))
            }
            Err(e) => return Err(Error::Other(format!("{}: {e}", path.display()))),
        };
        let mut results = Vec::new();
        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        for (i, l) in lines.iter().enumerate() {
            let torn = i + 1 == lines.len();
            let Ok(l) = std::str::from_utf8(l) else {
                if torn {
                    continue;
                }
                return Err(damaged(i + 1, "not UTF-8 text".into()));
            };
            if l.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<RunResult>(l) {
                Ok(r) => results.push(r),
                // The last line without its newline: torn by a kill.
                Err(_) if torn => {}
                Err(e) => return Err(damaged(i + 1, format!("not a run result: {e}"))),
            }
        }
        Ok(Store {
            dir: dir.to_path_buf(),
            results,
        })
    }

    /// The saved result of a run, the latest if it ran more than once.
    pub fn get(&self, workload: &str, config: &str, repeat: u32) -> Option<&RunResult> {
        self.results
            .iter()
            .rev()
            .find(|r| r.workload == workload && r.config == config && r.repeat == repeat)
    }

    /// Appends `r` to results.jsonl and syncs it.
    pub fn save(&mut self, r: RunResult) -> Result<(), Error> {
        let path = self.dir.join("results.jsonl");
        let io = |e: std::io::Error| Error::Other(format!("{}: {e}", path.display()));
        // A torn line from a killed run is cut off first, so it cannot
        // swallow this one.
        if let Ok(text) = std::fs::read(&path) {
            if !text.is_empty() && text.last() != Some(&b'\n') {
                let keep = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io)?;
                f.set_len(keep as u64).map_err(io)?;
            }
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let mut line = serde_json::to_string(&r).map_err(|e| Error::Other(e.to_string()))?;
        line.push('\n');
        f.write_all(line.as_bytes()).map_err(io)?;
        f.sync_data().map_err(io)?;
        self.results.push(r);
        Ok(())
    }
}

/// The order runs happen in: repeat by repeat, workload by workload, the
/// configurations rotated one place each repeat, so no configuration always
/// runs first (on a cold machine) or right after another.
pub fn plan(workloads: usize, configs: usize, repeats: u32) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::with_capacity(workloads * configs * repeats as usize);
    for r in 0..repeats {
        for w in 0..workloads {
            for k in 0..configs {
                out.push((w, (k + r as usize) % configs, r));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_covers_every_run_once_and_rotates() {
        let p = plan(2, 3, 3);
        assert_eq!(p.len(), 18);
        let mut seen = std::collections::HashSet::new();
        for x in &p {
            assert!(seen.insert(*x));
        }
        let firsts: Vec<usize> = p.chunks(3).map(|c| c[0].1).collect();
        assert_eq!(firsts, vec![0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn results_survive_a_torn_line_and_a_changed_suite_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let suite = |t: &str| Suite::parse(Path::new("s.toml"), t).unwrap();
        let a = suite("configs = [\"orig\"]\n[[workload]]\nname = \"w\"\nrun = \"true\"\n");
        let mut s = Store::open(d.path(), &a).unwrap();
        s.save(RunResult::new("w", "orig", 0)).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join("results.jsonl"))
            .unwrap();
        f.write_all(b"{\"workload\":\"w\",\"con").unwrap();
        let mut s = Store::open(d.path(), &a).unwrap();
        assert_eq!(s.results.len(), 1);
        s.save(RunResult::new("w", "orig", 1)).unwrap();
        let s = Store::open(d.path(), &a).unwrap();
        assert_eq!(s.results.len(), 2);
        assert!(s.get("w", "orig", 1).is_some());
        let b =
            suite("configs = [\"orig\", \"rec\"]\n[[workload]]\nname = \"w\"\nrun = \"true\"\n");
        let e = Store::open(d.path(), &b).err().unwrap().to_string();
        assert!(e.contains("another suite"), "{e}");
    }

    /// Damage is bad input whatever it is; only a torn last line is dropped.
    #[test]
    fn damaged_results_are_bad_input() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("results.jsonl");
        let line = serde_json::to_string(&RunResult::new("w", "orig", 0)).unwrap() + "\n";
        for (bytes, want) in [
            (
                [&[0xffu8, 0xfe, b'\n'][..], line.as_bytes()].concat(),
                "results.jsonl:1: not UTF-8 text",
            ),
            (
                [line.as_bytes(), b"[1, 2]\n"].concat(),
                "results.jsonl:2: not a run result",
            ),
        ] {
            std::fs::write(&p, bytes).unwrap();
            match Store::read(d.path()) {
                Err(Error::Usage(e)) => assert!(e.contains(want), "{e}"),
                other => panic!("want a usage error, got {:?}", other.map(|s| s.results)),
            }
        }
        std::fs::write(&p, [line.as_bytes(), &[0xff, b'{']].concat()).unwrap();
        assert_eq!(Store::read(d.path()).unwrap().results.len(), 1);
    }
}
