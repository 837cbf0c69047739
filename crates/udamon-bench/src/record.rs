//! Record size and report speed: an hour of the cost-1g workload recorded
//! (6 minutes when quick), at default attributes and at 1,000 regions; the
//! heatmap PNG and the HTML report of each record made by `udamon report`
//! in a child process, timed.

use std::path::Path;

use serde::Serialize;
use udamon_core::Attrs;
use udamon_sim::MonitorKind;

use crate::child::{time_heatmap, time_udamon};
use crate::cost::COST_1G;
use crate::error::Result;
use crate::sim::{bench_run, run};
use crate::Sink;

#[derive(Serialize, Debug, Clone)]
pub struct RecordRow {
    pub attrs: String,
    pub simulated_s: f64,
    pub snapshots: u64,
    pub avg_nr_regions: f64,
    pub record_bytes: u64,
    pub record_bytes_per_hour: f64,
    pub heatmap_elapsed_s: f64,
    pub heatmap_peak_rss_bytes: u64,
    pub html_elapsed_s: f64,
    pub html_peak_rss_bytes: u64,
    pub html_bytes: u64,
}

/// Both attribute sets; `udamon` is the executable the reports are made
/// with.
pub fn record(udamon: &Path, quick: bool, sink: &mut dyn Sink) -> Result<Vec<RecordRow>> {
    let dir = std::env::temp_dir().join(format!("udamon-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let duration: u64 = if quick { 360_000_000 } else { 3_600_000_000 };
    sink.line(&format!(
        "record size, heatmap and HTML report speed ({} s of the cost-1g workload)",
        duration / 1_000_000
    ));
    let configs = [
        ("default attrs", Attrs::default()),
        (
            "1,000 regions",
            Attrs {
                min_nr_regions: 1000,
                max_nr_regions: 1000,
                ..Attrs::default()
            },
        ),
    ];
    let mut rows = Vec::new();
    for (label, attrs) in configs {
        let path = dir.join("hour.udr");
        let r = bench_run(
            COST_1G,
            "cost-1g",
            Some(duration),
            attrs,
            MonitorKind::Adaptive,
            false,
        );
        let s = run(&r, Some(&path), sink)?;
        let per_hour = s.record_bytes as f64 * 3600.0 / s.simulated_s;
        let (heat_s, peak) = time_heatmap(udamon, &path, &dir.join("hour.png"))?;
        let html = dir.join("hour.html");
        let (html_s, html_peak) = time_udamon(
            udamon,
            &[
                "report".as_ref(),
                "html".as_ref(),
                path.as_os_str(),
                "-o".as_ref(),
                html.as_os_str(),
            ],
        )?;
        let html_bytes = std::fs::metadata(&html).map_or(0, |m| m.len());
        let row = RecordRow {
            attrs: label.into(),
            simulated_s: s.simulated_s,
            snapshots: s.snapshots,
            avg_nr_regions: s.avg_nr_regions,
            record_bytes: s.record_bytes,
            record_bytes_per_hour: per_hour,
            heatmap_elapsed_s: heat_s,
            heatmap_peak_rss_bytes: peak,
            html_elapsed_s: html_s,
            html_peak_rss_bytes: html_peak,
            html_bytes,
        };
        sink.line(&format!(
            "  {label}: {} snapshots, {:.0} regions on average: {} written, {} per hour",
            row.snapshots,
            row.avg_nr_regions,
            udamon_report::fmt_bytes(row.record_bytes),
            udamon_report::fmt_bytes(per_hour as u64)
        ));
        sink.line(&format!(
            "    heatmap PNG of it: {:.2}s, peak RSS {}",
            row.heatmap_elapsed_s,
            udamon_report::fmt_bytes(row.heatmap_peak_rss_bytes)
        ));
        sink.line(&format!(
            "    HTML report of it: {:.2}s, peak RSS {}, {} page",
            row.html_elapsed_s,
            udamon_report::fmt_bytes(row.html_peak_rss_bytes),
            udamon_report::fmt_bytes(row.html_bytes)
        ));
        rows.push(row);
    }
    sink.line("");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rows)
}
