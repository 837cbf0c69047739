//! Working set size: per snapshot, the bytes of the regions accessed at
//! least `acc_thres` times in the window (regions smaller than `sz_thres`
//! are left out), with the average, percentiles and the time series.

use std::io::Write;

use serde::Serialize;

use crate::human::{fmt_bytes, fmt_us};
use crate::source::each;
use crate::{Error, SnapshotSource};

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
    if let Some(p) = opts
        .percentiles
        .iter()
        .find(|p| !(0.0..=100.0).contains(*p))
    {
        return Err(Error::InvalidOption(format!(
            "percentile {p} is outside 0..=100"
        )));
    }
    let mut series = Vec::new();
    // Times count from the source's start (a whole record's, when it is
    // read through a selection).
    let mut record_start = src.record_start_us()?;
    let mut seen = 0usize;
    each(src, |s| {
        let start = *record_start.get_or_insert(s.start_us);
        seen += 1;
        if seen <= opts.skip {
            return;
        }
        let wss: u64 = s
            .targets
            .iter()
            .filter(|t| crate::source::selected(opts.target, t.target_idx))
            .flat_map(|t| &t.regions)
            .filter(|r| r.nr_accesses >= opts.acc_thres && r.sz() >= opts.sz_thres)
            .map(|r| r.sz())
            .sum();
        series.push(WssPoint {
            end_us: s.end_us.saturating_sub(start),
            wss_bytes: wss,
        });
    })?;
    if series.is_empty() {
        return Err(Error::NoSnapshots);
    }
    let mut sorted: Vec<u64> = series.iter().map(|p| p.wss_bytes).collect();
    sorted.sort_unstable();
    let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
    Ok(Wss {
        target_idx: opts.target,
        acc_thres: opts.acc_thres,
        sz_thres_bytes: opts.sz_thres,
        skipped: opts.skip.min(seen),
        wss_avg_bytes: (sum / sorted.len() as u128) as u64,
        percentiles: opts
            .percentiles
            .iter()
            .map(|&p| WssPercentile {
                percentile: p,
                wss_bytes: percentile(&sorted, p).unwrap_or(0),
            })
            .collect(),
        series,
    })
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
            writeln!(w, "\n{:>12}  {:>12}  {:>16}", "time", "wss", "bytes")?;
            for p in &self.series {
                writeln!(
                    w,
                    "{:>12}  {:>12}  {:>16}",
                    fmt_us(p.end_us),
                    fmt_bytes(p.wss_bytes),
                    p.wss_bytes
                )?;
            }
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
