//! Working set size: per snapshot, the bytes of the regions accessed at
//! least `acc_thres` times in the window (regions smaller than `sz_thres`
//! are left out), with the average, percentiles and the time series.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::human::{fmt_bytes, fmt_us};
use crate::source::each;
use crate::{Error, SnapshotSource, TargetRow, TargetTable};

/// What to measure. Every field maps to one command-line flag.
#[derive(Clone, Debug, PartialEq)]
pub struct WssOptions {
    /// Smallest `nr_accesses` of a region counted in the working set.
    /// Default: 1.
    pub acc_thres: u32,
    /// Smallest region size in bytes counted in the working set. Default: 1.
    pub sz_thres: u64,
    /// Percentiles to report, each in `0..=100`. Default: 0, 25, 50, 75, 100.
    pub percentiles: Vec<f64>,
    /// Snapshots to leave out at the start of the record, e.g. the warm-up
    /// while the regions adapt. They are left out of the series too.
    /// Default: 0.
    pub skip: usize,
    /// Target to measure, by index. Default: all targets, summed.
    pub target: Option<u32>,
}

impl Default for WssOptions {
    fn default() -> Self {
        Self {
            acc_thres: 1,
            sz_thres: 1,
            percentiles: vec![0.0, 25.0, 50.0, 75.0, 100.0],
            skip: 0,
            target: None,
        }
    }
}

/// One point of the working set time series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WssPoint {
    /// End of the snapshot's window, microseconds since the record's start.
    pub end_us: u64,
    pub wss_bytes: u64,
}

/// One percentile of the working set sizes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WssPercentile {
    pub percentile: f64,
    pub wss_bytes: u64,
}

/// The working set report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Wss {
    pub target_idx: Option<u32>,
    pub acc_thres: u32,
    pub sz_thres_bytes: u64,
    /// Snapshots left out at the start.
    pub skipped: usize,
    /// Average working set size over the series (rounded down).
    pub wss_avg_bytes: u64,
    pub percentiles: Vec<WssPercentile>,
    pub series: Vec<WssPoint>,
}

/// The value at percentile `p` of ascending `sorted`, by damo's rule:
/// index `floor(p / 100 * n)`, clamped to `n - 1`. `None` when empty.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let idx = ((p / 100.0 * n as f64) as usize).min(n - 1);
    Some(sorted[idx])
}

/// Measures the working set of every snapshot of `src` in one pass.
pub fn build<S: SnapshotSource + ?Sized>(src: &S, opts: &WssOptions) -> Result<Wss, Error> {
    check_percentiles(opts)?;
    let mut series = Vec::new();
    let seen = walk(src, opts, |end_us, targets| {
        let wss = targets.iter().map(|&(_, b)| b).sum();
        series.push(WssPoint {
            end_us,
            wss_bytes: wss,
        });
    })?;
    if series.is_empty() {
        return Err(Error::NoSnapshots);
    }
    let (wss_avg_bytes, percentiles) = stats(&series, &opts.percentiles);
    Ok(Wss {
        target_idx: opts.target,
        acc_thres: opts.acc_thres,
        sz_thres_bytes: opts.sz_thres,
        skipped: opts.skip.min(seen),
        wss_avg_bytes,
        percentiles,
        series,
    })
}

fn check_percentiles(opts: &WssOptions) -> Result<(), Error> {
    match opts
        .percentiles
        .iter()
        .find(|p| !(0.0..=100.0).contains(*p))
    {
        Some(p) => Err(Error::InvalidOption(format!(
            "percentile {p} is outside 0..=100"
        ))),
        None => Ok(()),
    }
}

/// Calls `f` with the end of each snapshot past `opts.skip` (microseconds
/// since the source's start, a whole record's when it is read through a
/// selection) and each selected target's working set in it; returns the
/// snapshots seen.
fn walk<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &WssOptions,
    mut f: impl FnMut(u64, &[(u32, u64)]),
) -> Result<usize, Error> {
    let mut record_start = src.record_start_us()?;
    let mut seen = 0usize;
    let mut per_target = Vec::new();
    each(src, |s| {
        let start = *record_start.get_or_insert(s.start_us);
        seen += 1;
        if seen <= opts.skip {
            return;
        }
        per_target.clear();
        per_target.extend(
            s.targets
                .iter()
                .filter(|t| crate::source::selected(opts.target, t.target_idx))
                .map(|t| {
                    let b = t
                        .regions
                        .iter()
                        .filter(|r| r.nr_accesses >= opts.acc_thres && r.sz() >= opts.sz_thres)
                        .map(|r| r.sz())
                        .sum();
                    (t.target_idx, b)
                }),
        );
        f(s.end_us.saturating_sub(start), &per_target);
    })?;
    Ok(seen)
}

/// The average (rounded down) and the percentiles of a series.
fn stats(series: &[WssPoint], percentiles: &[f64]) -> (u64, Vec<WssPercentile>) {
    let mut sorted: Vec<u64> = series.iter().map(|p| p.wss_bytes).collect();
    sorted.sort_unstable();
    let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
    let avg = (sum / (sorted.len().max(1) as u128)) as u64;
    let ps = percentiles
        .iter()
        .map(|&p| WssPercentile {
            percentile: p,
            wss_bytes: percentile(&sorted, p).unwrap_or(0),
        })
        .collect();
    (avg, ps)
}

/// The working set of one process (target), over the windows it was in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessWss {
    #[serde(flatten)]
    pub process: TargetRow,
    /// Snapshots that hold the target (past the skipped ones).
    pub windows: usize,
    pub wss_avg_bytes: u64,
    pub percentiles: Vec<WssPercentile>,
    pub series: Vec<WssPoint>,
}

/// The working set report broken down by process (`--by process`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WssByProcess {
    pub acc_thres: u32,
    pub sz_thres_bytes: u64,
    /// Snapshots left out at the start.
    pub skipped: usize,
    /// Snapshots read past the skipped ones.
    pub snapshots: usize,
    /// One per target found in the snapshots, by index.
    pub processes: Vec<ProcessWss>,
}

/// Measures the working set of each target of `src` in one pass: its
/// windows are the snapshots that hold it, each with the bytes of its own
/// regions; `table` names the targets.
pub fn build_by_process<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &WssOptions,
    table: &TargetTable,
) -> Result<WssByProcess, Error> {
    check_percentiles(opts)?;
    let mut series: BTreeMap<u32, Vec<WssPoint>> = BTreeMap::new();
    let mut snapshots = 0;
    let seen = walk(src, opts, |end_us, targets| {
        snapshots += 1;
        for &(t, wss_bytes) in targets {
            series
                .entry(t)
                .or_default()
                .push(WssPoint { end_us, wss_bytes });
        }
    })?;
    if snapshots == 0 {
        return Err(Error::NoSnapshots);
    }
    if let Some(t) = opts.target.filter(|t| !series.contains_key(t)) {
        return Err(Error::NoTarget(t));
    }
    let processes = series
        .into_iter()
        .map(|(idx, series)| {
            let (wss_avg_bytes, percentiles) = stats(&series, &opts.percentiles);
            ProcessWss {
                process: table.row(idx),
                windows: series.len(),
                wss_avg_bytes,
                percentiles,
                series,
            }
        })
        .collect();
    Ok(WssByProcess {
        acc_thres: opts.acc_thres,
        sz_thres_bytes: opts.sz_thres,
        skipped: opts.skip.min(seen),
        snapshots,
        processes,
    })
}

impl WssByProcess {
    /// Writes one row per process: its index, pid, comm, when it arrived
    /// and left, its windows, the percentiles and the average; `series`
    /// adds each process's time series.
    pub fn write_text(&self, w: &mut dyn Write, series: bool) -> Result<(), Error> {
        writeln!(
            w,
            "# working set by process: {} snapshots ({} skipped), nr_accesses >= {}, size >= {}",
            self.snapshots,
            self.skipped,
            self.acc_thres,
            fmt_bytes(self.sz_thres_bytes)
        )?;
        let pcts: Vec<String> = self.processes.first().map_or(Vec::new(), |p| {
            p.percentiles
                .iter()
                .map(|p| format!("p{}", fmt_pct(p.percentile)))
                .collect()
        });
        write!(
            w,
            "{:>6}  {:>8}  {:<15}  {:>10}  {:<20}  {:>7}",
            "target", "pid", "comm", "arrived", "left", "windows"
        )?;
        for p in pcts.iter().map(String::as_str).chain(["avg"]) {
            write!(w, "  {p:>10}")?;
        }
        writeln!(w)?;
        for p in &self.processes {
            let r = &p.process;
            write!(
                w,
                "{:>6}  {:>8}  {:<15}  {:>10}  {:<20}  {:>7}",
                r.target_idx,
                r.pid,
                r.comm.as_deref().unwrap_or("-"),
                r.arrived_us.map_or("-".into(), fmt_us),
                left_text(r),
                p.windows
            )?;
            for b in p
                .percentiles
                .iter()
                .map(|x| x.wss_bytes)
                .chain([p.wss_avg_bytes])
            {
                write!(w, "  {:>10}", fmt_bytes(b))?;
            }
            writeln!(w)?;
        }
        if series {
            for p in &self.processes {
                writeln!(w, "\n# {}", p.process.name())?;
                write_series(w, &p.series)?;
            }
        }
        Ok(())
    }

    /// Writes the report as one JSON object: `acc_thres`, `sz_thres_bytes`,
    /// `skipped`, `snapshots`, and `processes: [{target_idx, pid, start,
    /// comm, cgroup, label, arrived_us, left_us, left_why, windows,
    /// wss_avg_bytes, percentiles, series}]`.
    pub fn write_json(&self, w: &mut dyn Write) -> Result<(), Error> {
        serde_json::to_writer(&mut *w, self).map_err(std::io::Error::from)?;
        writeln!(w)?;
        Ok(())
    }
}

/// "-" while the target was monitored to the end, else "1.20 s (exited)".
pub(crate) fn left_text(r: &TargetRow) -> String {
    match (r.left_us, &r.left_why) {
        (Some(t), Some(why)) => format!("{} ({why})", fmt_us(t)),
        (Some(t), None) => fmt_us(t),
        _ => "-".into(),
    }
}

impl Wss {
    /// Writes the report as aligned text; `series` adds the time series.
    pub fn write_text(&self, w: &mut dyn Write, series: bool) -> Result<(), Error> {
        let target = self
            .target_idx
            .map_or("all targets".to_string(), |t| format!("target {t}"));
        writeln!(
            w,
            "# working set of {target}: {} snapshots ({} skipped), nr_accesses >= {}, size >= {}",
            self.series.len(),
            self.skipped,
            self.acc_thres,
            fmt_bytes(self.sz_thres_bytes)
        )?;
        writeln!(w, "{:>10}  {:>12}  {:>16}", "percentile", "wss", "bytes")?;
        for p in &self.percentiles {
            writeln!(
                w,
                "{:>10}  {:>12}  {:>16}",
                fmt_pct(p.percentile),
                fmt_bytes(p.wss_bytes),
                p.wss_bytes
            )?;
        }
        writeln!(
            w,
            "{:>10}  {:>12}  {:>16}",
            "avg",
            fmt_bytes(self.wss_avg_bytes),
            self.wss_avg_bytes
        )?;
        if series {
            writeln!(w)?;
            write_series(w, &self.series)?;
        }
        Ok(())
    }

    /// Writes the report as one JSON object: `target_idx` (null for all),
    /// `acc_thres`, `sz_thres_bytes`, `skipped`, `wss_avg_bytes`,
    /// `percentiles: [{percentile, wss_bytes}]`, `series: [{end_us, wss_bytes}]`.
    pub fn write_json(&self, w: &mut dyn Write) -> Result<(), Error> {
        serde_json::to_writer(&mut *w, self).map_err(std::io::Error::from)?;
        writeln!(w)?;
        Ok(())
    }
}

/// A WSS time series as aligned text, its heading first.
fn write_series(w: &mut dyn Write, series: &[WssPoint]) -> Result<(), Error> {
    writeln!(w, "{:>12}  {:>12}  {:>16}", "time", "wss", "bytes")?;
    for p in series {
        writeln!(
            w,
            "{:>12}  {:>12}  {:>16}",
            fmt_us(p.end_us),
            fmt_bytes(p.wss_bytes),
            p.wss_bytes
        )?;
    }
    Ok(())
}

fn fmt_pct(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};

    fn snap(i: u64, regions: &[(u64, u64, u32)]) -> Snapshot {
        Snapshot {
            start_us: i * 100_000,
            end_us: (i + 1) * 100_000,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions: regions
                    .iter()
                    .map(|&(start, end, nr_accesses)| RegionSnapshot {
                        start,
                        end,
                        nr_accesses,
                        age: 0,
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn percentile_rule_table() {
        let v: Vec<u64> = (1..=10).collect();
        for (p, want) in [
            (0.0, 1),
            (25.0, 3),
            (50.0, 6),
            (75.0, 8),
            (99.0, 10),
            (100.0, 10),
        ] {
            assert_eq!(percentile(&v, p), Some(want), "p{p}");
        }
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn thresholds_skip_and_series() {
        let snaps: Vec<Snapshot> = (0..5)
            .map(|i| {
                snap(
                    i,
                    &[
                        (0, 4096, 0),
                        (4096, 4096 * 3, i as u32),
                        (4096 * 3, 4096 * 4, 20),
                    ],
                )
            })
            .collect();
        let w = build(&snaps, &WssOptions::default()).unwrap();
        let got: Vec<u64> = w.series.iter().map(|p| p.wss_bytes).collect();
        assert_eq!(got, [4096, 3 * 4096, 3 * 4096, 3 * 4096, 3 * 4096]);
        assert_eq!(w.wss_avg_bytes, (4096 + 12 * 4096) / 5);
        assert_eq!(w.percentiles[0].wss_bytes, 4096);
        assert_eq!(w.series[0].end_us, 100_000);

        let opts = WssOptions {
            acc_thres: 3,
            sz_thres: 8192,
            skip: 1,
            ..Default::default()
        };
        let w = build(&snaps, &opts).unwrap();
        let got: Vec<u64> = w.series.iter().map(|p| p.wss_bytes).collect();
        assert_eq!(got, [0, 0, 8192, 8192]);
        assert_eq!(w.skipped, 1);
        assert!(matches!(
            build(
                &snaps,
                &WssOptions {
                    skip: 5,
                    ..Default::default()
                }
            ),
            Err(Error::NoSnapshots)
        ));
    }
}
