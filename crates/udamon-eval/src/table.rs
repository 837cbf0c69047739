//! The results, summarised: per workload and configuration, each figure's
//! mean, spread and overhead against `orig`, as a terminal table, JSON, and
//! the tab-separated layout of damon-tests' reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::result::{RunResult, TuningInfo};
use crate::suite::{Kind, Suite};

/// A figure every run may have.
pub struct Figure {
    /// damon-tests' metric name where it has one.
    pub key: &'static str,
    pub unit: Unit,
    pub get: fn(&RunResult) -> Option<f64>,
}

#[derive(Clone, Copy, PartialEq)]
pub enum Unit {
    Seconds,
    Kb,
    Count,
    Micros,
    Plain,
}

pub const FIGURES: &[Figure] = &[
    fig("runtime", Unit::Seconds, |r| r.runtime_s),
    fig("metric", Unit::Plain, |r| r.metric),
    fig("rss.avg", Unit::Kb, |r| r.rss_avg_kb),
    fig("rss.peak", Unit::Kb, |r| r.rss_peak_kb.map(|v| v as f64)),
    fig("memused.avg", Unit::Kb, |r| r.mem_used_avg_kb),
    fig("monitor_cpu_s", Unit::Seconds, |r| r.monitor_cpu_s),
    fig("kdamond_cpu_s", Unit::Seconds, |r| r.kdamond_cpu_s),
    fig("pgmajfaults", Unit::Count, |r| {
        r.pgmajfault.map(|v| v as f64)
    }),
    fig("psi_mem_some_us", Unit::Micros, |r| {
        r.psi_some_us.map(|v| v as f64)
    }),
    fig("psi_mem_full_us", Unit::Micros, |r| {
        r.psi_full_us.map(|v| v as f64)
    }),
    fig("pswpin", Unit::Count, |r| r.pswpin.map(|v| v as f64)),
    fig("pswpout", Unit::Count, |r| r.pswpout.map(|v| v as f64)),
];

const fn fig(key: &'static str, unit: Unit, get: fn(&RunResult) -> Option<f64>) -> Figure {
    Figure { key, unit, get }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Stats {
    pub n: u32,
    pub mean: f64,
    /// Sample standard deviation (0 with one run).
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(v: &[f64]) -> Option<Stats> {
        if v.is_empty() {
            return None;
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = if v.len() > 1 {
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Some(Stats {
            n: v.len() as u32,
            mean,
            stdev: var.sqrt(),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

#[derive(Debug, Serialize)]
pub struct ConfigSummary {
    pub config: String,
    pub ok: u32,
    pub failed: u32,
    pub skipped: u32,
    /// Why runs failed or were skipped (distinct reasons).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Each figure over the runs that ended well.
    pub stats: BTreeMap<&'static str, Stats>,
    /// (mean / orig's mean - 1) x 100, per figure.
    pub overhead_pct: BTreeMap<&'static str, f64>,
    /// `tuned-*`: what its tuning chose (the fields sit beside the others).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningInfo>,
}

#[derive(Debug, Serialize)]
pub struct WorkloadSummary {
    pub workload: String,
    pub simulated: bool,
    /// The performance figure: the workload's metric, else "runtime".
    pub perf: &'static str,
    pub perf_name: String,
    pub higher_is_better: bool,
    pub configs: Vec<ConfigSummary>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub planned_runs: usize,
    pub done_runs: usize,
    pub workloads: Vec<WorkloadSummary>,
}

impl Summary {
    /// The workloads none of whose runs ended well and some failed, with
    /// why (their distinct reasons): what they measure is nothing.
    pub fn failed_workloads(&self) -> Vec<(&str, Vec<&str>)> {
        self.workloads
            .iter()
            .filter(|w| {
                w.configs.iter().all(|c| c.ok == 0) && w.configs.iter().any(|c| c.failed > 0)
            })
            .map(|w| {
                let mut why: Vec<&str> = Vec::new();
                for r in w.configs.iter().flat_map(|c| &c.reasons) {
                    if !why.contains(&r.as_str()) {
                        why.push(r);
                    }
                }
                (w.workload.as_str(), why)
            })
            .collect()
    }
}

/// Summarises the latest result of every planned run.
pub fn summarise(suite: &Suite, results: &[RunResult]) -> Summary {
    let latest = |w: &str, c: &str, r: u32| {
        results
            .iter()
            .rev()
            .find(|x| x.workload == w && x.config == c && x.repeat == r)
    };
    let mut done = 0;
    let mut workloads = Vec::new();
    for w in &suite.workloads {
        let (perf, perf_name, higher) = match &w.kind {
            Kind::Command {
                metric: Some(m), ..
            } => ("metric", m.name.clone(), m.higher_is_better),
            Kind::Sim { .. } => ("runtime", "simulated runtime (s)".into(), false),
            _ => ("runtime", "runtime (s)".into(), false),
        };
        let mut configs = Vec::new();
        for (c, _) in &suite.configs {
            let runs: Vec<&RunResult> = (0..suite.repeats)
                .filter_map(|r| latest(&w.name, c, r))
                .collect();
            done += runs.len();
            let ok: Vec<&RunResult> = runs.iter().copied().filter(|r| r.ok()).collect();
            let mut reasons: Vec<String> = Vec::new();
            for r in runs.iter().filter(|r| !r.ok()) {
                if let Some(why) = &r.reason {
                    if !reasons.contains(why) {
                        reasons.push(why.clone());
                    }
                }
            }
            let mut stats = BTreeMap::new();
            for f in FIGURES {
                let v: Vec<f64> = ok
                    .iter()
                    .filter_map(|r| (f.get)(r))
                    .filter(|v| v.is_finite())
                    .collect();
                if let Some(s) = Stats::of(&v) {
                    stats.insert(f.key, s);
                }
            }
            configs.push(ConfigSummary {
                config: c.clone(),
                ok: ok.len() as u32,
                failed: runs.iter().filter(|r| r.status == "failed").count() as u32,
                skipped: runs.iter().filter(|r| r.status == "skipped").count() as u32,
                reasons,
                stats,
                overhead_pct: BTreeMap::new(),
                tuning: runs.iter().find_map(|r| r.tuning.clone()),
            });
        }
        if let Some(base) = configs
            .iter()
            .find(|c| c.config == "orig")
            .map(|c| c.stats.clone())
        {
            for c in configs.iter_mut() {
                for (k, s) in &c.stats {
                    if let Some(b) = base.get(k).filter(|b| b.mean != 0.0) {
                        c.overhead_pct.insert(k, (s.mean / b.mean - 1.0) * 100.0);
                    }
                }
            }
        }
        workloads.push(WorkloadSummary {
            workload: w.name.clone(),
            simulated: matches!(w.kind, Kind::Sim { .. }),
            perf,
            perf_name,
            higher_is_better: higher,
            configs,
        });
    }
    Summary {
        planned_runs: suite.workloads.len() * suite.configs.len() * suite.repeats as usize,
        done_runs: done,
        workloads,
    }
}

fn human(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Kb => {
            let b = v * 1024.0;
            if b >= 1024.0 * 1024.0 * 1024.0 {
                format!("{:.2} GiB", b / (1u64 << 30) as f64)
            } else if b >= 1024.0 * 1024.0 {
                format!("{:.1} MiB", b / (1u64 << 20) as f64)
            } else {
                format!("{:.0} KiB", v)
            }
        }
        Unit::Seconds => {
            if v >= 100.0 {
                format!("{v:.0} s")
            } else if v >= 1.0 {
                format!("{v:.2} s")
            } else {
                format!("{:.0} ms", v * 1e3)
            }
        }
        Unit::Micros => format!("{:.2} s", v / 1e6),
        Unit::Count => format!("{v:.0}"),
        Unit::Plain => {
            if v.abs() >= 1000.0 {
                format!("{v:.0}")
            } else if v.abs() >= 10.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.3}")
            }
        }
    }
}

fn unit_of(key: &str) -> Unit {
    FIGURES
        .iter()
        .find(|f| f.key == key)
        .map_or(Unit::Plain, |f| f.unit)
}

/// The terminal table: one block per workload.
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    for w in &summary.workloads {
        let runs = w
            .configs
            .iter()
            .map(|c| c.ok + c.failed + c.skipped)
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "{} ({}{}; {} run{} per configuration at most)",
            w.workload,
            w.perf_name,
            if w.perf == "metric" {
                if w.higher_is_better {
                    ", higher is better"
                } else {
                    ", lower is better"
                }
            } else {
                ""
            },
            runs,
            if runs == 1 { "" } else { "s" }
        );
        let cols = [
            (w.perf, "perf"),
            ("rss.avg", "RSS avg"),
            ("rss.peak", "RSS peak"),
            ("memused.avg", "mem used"),
            ("monitor_cpu_s", "monitor CPU"),
            ("kdamond_cpu_s", "kdamond CPU"),
            ("pgmajfaults", "major faults"),
            ("psi_mem_some_us", "PSI some"),
        ];
        let with_overhead = ["metric", "runtime", "rss.avg", "memused.avg"];
        let mut rows: Vec<Vec<String>> = vec![std::iter::once("config".to_string())
            .chain(cols.iter().map(|(_, l)| l.to_string()))
            .chain(std::iter::once("runs".into()))
            .collect()];
        for c in &w.configs {
            let mut row = vec![c.config.clone()];
            for (k, _) in cols {
                let cell = match c.stats.get(k) {
                    None => "-".to_string(),
                    Some(s) => {
                        let mut t = human(s.mean, unit_of(k));
                        if s.n > 1 && s.mean != 0.0 && with_overhead.contains(&k) {
                            let _ = write!(t, " ±{:.0}%", s.stdev / s.mean.abs() * 100.0);
                        }
                        if c.config != "orig" && with_overhead.contains(&k) {
                            if let Some(o) = c.overhead_pct.get(k) {
                                let _ = write!(t, " ({o:+.1}%)");
                            }
                        }
                        t
                    }
                };
                row.push(cell);
            }
            let mut runs = format!("{}", c.ok);
            if c.failed > 0 {
                let _ = write!(runs, " +{} failed", c.failed);
            }
            if c.skipped > 0 {
                let _ = write!(runs, " +{} skipped", c.skipped);
            }
            row.push(runs);
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let mut line = String::from(" ");
            for (i, cell) in r.iter().enumerate() {
                let pad = widths[i] - cell.chars().count();
                if i == 0 || i + 1 == r.len() {
                    let _ = write!(line, " {cell}{}", " ".repeat(pad));
                } else {
                    let _ = write!(line, " {}{cell}", " ".repeat(pad));
                }
                line.push(' ');
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        for c in &w.configs {
            if let Some(t) = &c.tuning {
                let _ = write!(
                    out,
                    "  {}: tuned {} in {} ({} runs, not counted above)",
                    c.config,
                    t.tuned,
                    human(t.tuning_s, Unit::Seconds),
                    t.tuning_runs
                );
                if t.tuning_sla_met == Some(false) {
                    out.push_str("; no tuning run kept the SLA (at most 10% slower than orig)");
                }
                out.push('\n');
            }
            for why in &c.reasons {
                let _ = writeln!(out, "  {}: {why}", c.config);
            }
        }
        out.push('\n');
    }
    out
}

/// damon-tests' report layout: for each figure, a table with a row per
/// workload (then `total` and `average`) and the columns `orig`, then
/// `CONFIG (overhead%)`; then a stats section (avg, stdev, min, max).
pub fn tsv(suite: &Suite, summary: &Summary) -> String {
    let mut out = String::new();
    let configs: Vec<&str> = suite.configs.iter().map(|(n, _)| n.as_str()).collect();
    let base = configs.iter().position(|c| *c == "orig");
    for f in FIGURES {
        let any = summary
            .workloads
            .iter()
            .any(|w| w.configs.iter().any(|c| c.stats.contains_key(f.key)));
        if !any {
            continue;
        }
        let _ = writeln!(out, "# {}", f.key);
        let mut head = vec!["workload".to_string()];
        for c in &configs {
            head.push(if Some(*c) == base.map(|b| configs[b]) || base.is_none() {
                c.to_string()
            } else {
                format!("{c} (overhead%)")
            });
        }
        let _ = writeln!(out, "{}", head.join("\t"));
        for w in &summary.workloads {
            let mut row = vec![w.workload.clone()];
            for (i, c) in w.configs.iter().enumerate() {
                match c.stats.get(f.key) {
                    None => row.push("-".into()),
                    Some(s) => row.push(cell(
                        s.mean,
                        c.overhead_pct.get(f.key).copied(),
                        Some(i) == base || base.is_none(),
                    )),
                }
            }
            let _ = writeln!(out, "{}", row.join("\t"));
        }
        // A configuration's total (and average) is over the workloads where
        // both it and orig have the figure, and so is its overhead.
        for (label, avg) in [("total", false), ("average", true)] {
            let mut row = vec![label.to_string()];
            for i in 0..configs.len() {
                let mut sum = (0.0, 0.0, 0u32);
                for w in &summary.workloads {
                    let v = w.configs.get(i).and_then(|c| c.stats.get(f.key));
                    let b = match base {
                        Some(b) => w.configs.get(b).and_then(|c| c.stats.get(f.key)),
                        None => v,
                    };
                    if let (Some(v), Some(b)) = (v, b) {
                        sum = (sum.0 + v.mean, sum.1 + b.mean, sum.2 + 1);
                    }
                }
                if sum.2 == 0 {
                    row.push("-".into());
                    continue;
                }
                let k = if avg { sum.2 as f64 } else { 1.0 };
                let o = (sum.1 != 0.0).then(|| (sum.0 / sum.1 - 1.0) * 100.0);
                row.push(cell(sum.0 / k, o, Some(i) == base || base.is_none()));
            }
            let _ = writeln!(out, "{}", row.join("\t"));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "# stats");
    let _ = writeln!(out, "metric\tworkload\tconfig\truns\tavg\tstdev\tmin\tmax");
    for f in FIGURES {
        for w in &summary.workloads {
            for c in &w.configs {
                if let Some(s) = c.stats.get(f.key) {
                    let _ = writeln!(
                        out,
                        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                        f.key,
                        w.workload,
                        c.config,
                        s.n,
                        num(s.mean),
                        num(s.stdev),
                        num(s.min),
                        num(s.max)
                    );
                }
            }
        }
    }
    out
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn cell(v: f64, overhead: Option<f64>, is_base: bool) -> String {
    match overhead {
        Some(o) if !is_base => format!("{} ({o:.2})", num(v)),
        _ if !is_base => format!("{} (-)", num(v)),
        _ => num(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn result(w: &str, c: &str, rep: u32, runtime: f64, rss: f64) -> RunResult {
        let mut r = RunResult::new(w, c, rep);
        r.runtime_s = Some(runtime);
        r.rss_avg_kb = Some(rss);
        r
    }

    #[test]
    fn overheads_are_against_orig_and_failures_are_counted_apart() {
        let suite = Suite::parse(
            Path::new("s.toml"),
            "repeats = 2\nconfigs = [\"orig\", \"rec\"]\n[[workload]]\nname = \"w\"\nrun = \"x\"\n",
        )
        .unwrap();
        let mut bad = result("w", "rec", 1, 99.0, 1.0);
        bad.fail("the run exited 1");
        let rs = vec![
            result("w", "orig", 0, 10.0, 100.0),
            result("w", "orig", 1, 12.0, 100.0),
            result("w", "rec", 0, 11.0, 90.0),
            bad,
        ];
        let s = summarise(&suite, &rs);
        let rec = &s.workloads[0].configs[1];
        assert_eq!((rec.ok, rec.failed), (1, 1));
        assert!((rec.overhead_pct["runtime"] - 0.0).abs() < 1e-9);
        assert!((rec.overhead_pct["rss.avg"] + 10.0).abs() < 1e-9);
        let orig = &s.workloads[0].configs[0].stats["runtime"];
        assert!((orig.stdev - 2f64.sqrt()).abs() < 1e-9);
        let t = tsv(&suite, &s);
        assert!(
            t.contains("workload\torig\trec (overhead%)\nw\t11\t11 (0.00)\n"),
            "{t}"
        );
        assert!(t.contains("rss.avg\tw\trec\t1\t90\t0\t90\t90"), "{t}");
        let r = render(&s);
        assert!(
            r.contains("1 +1 failed") && r.contains("rec: the run exited 1"),
            "{r}"
        );
    }
}
