//! `udamon bench`: the figures the README quotes, measured in one run so
//! their ratios compare like with like.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use udamon_core::Attrs;
use udamon_sim::MonitorKind;

use super::record::{run_sim, SimRun};
use crate::cli::BenchArgs;
use crate::output::print_json;

const SPECS: &[(&str, &str)] = &[
    ("demo", udamon_sim::DEMO_SPEC),
    ("swap", include_str!("../../../../examples/specs/swap.toml")),
    (
        "sweep",
        include_str!("../../../../examples/specs/sweep.toml"),
    ),
    (
        "sparse-hot",
        include_str!("../../../../examples/specs/sparse-hot.toml"),
    ),
];
/// The accuracy table's extra spec: where only `--mode enhanced` sees.
const SPARSE_RESIDENT: (&str, &str) = (
    "sparse-resident",
    include_str!("../../../../examples/specs/sparse-resident.toml"),
);
const COST_1G: &str = include_str!("../../../../examples/specs/cost-1g.toml");
const COST_64T: &str = include_str!("../../../../examples/specs/cost-64t.toml");

#[derive(Serialize, Default)]
struct Report {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cost: Vec<CostRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_ratio_64t_over_1g: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    record: Vec<RecordRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    accuracy: Vec<AccuracyRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    softdirty: Vec<AccuracyRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    schemes: Vec<SchemeRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tune: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<super::bench_service::ServiceSoak>,
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint: Option<super::bench_endpoint::EndpointBench>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tiering: Vec<super::bench_tiering::TieringRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<super::bench_import::ImportBench>,
}

#[derive(Serialize)]
struct SchemeRow {
    spec: String,
    config: String,
    rss_avg_bytes: f64,
    runtime_s: f64,
    faults: f64,
    rss_change: f64,
    runtime_change: f64,
}

/// The seeds' configurations (DAOS section 5): thp = every region huge,
/// ethp and prcl = the schemes of its Listing 3.
const CONFIGS: &[(&str, &str)] = &[
    ("orig", ""),
    ("rec", ""),
    ("thp", include_str!("../../../../examples/schemes/thp.txt")),
    (
        "ethp",
        include_str!("../../../../examples/schemes/ethp.txt"),
    ),
    (
        "prcl",
        include_str!("../../../../examples/schemes/prcl.txt"),
    ),
];
const SCHEME_SPECS: &[(&str, &str)] = &[
    ("demo", udamon_sim::DEMO_SPEC),
    (
        "machine",
        include_str!("../../../../examples/specs/machine.toml"),
    ),
    (
        "sparse-hot",
        include_str!("../../../../examples/specs/sparse-hot.toml"),
    ),
];

#[derive(Serialize)]
struct CostRow {
    spec: String,
    mapped_bytes: u64,
    simulated_s: f64,
    cpu_s: f64,
    cpu_ms_per_simulated_s: f64,
    avg_nr_regions: f64,
    ns_per_region_sample: f64,
}

#[derive(Serialize)]
struct RecordRow {
    attrs: String,
    simulated_s: f64,
    snapshots: u64,
    avg_nr_regions: f64,
    record_bytes: u64,
    record_bytes_per_hour: f64,
    heatmap_elapsed_s: f64,
    heatmap_peak_rss_bytes: u64,
    html_elapsed_s: f64,
    html_peak_rss_bytes: u64,
    html_bytes: u64,
}

#[derive(Serialize)]
struct AccuracyRow {
    spec: String,
    monitor: String,
    freq_mae: Option<f64>,
    hot_f1: Option<f64>,
    wss_error: Option<f64>,
    avg_nr_regions: Option<f64>,
    elapsed_s: Option<f64>,
    note: Option<String>,
}

fn wants(a: &BenchArgs, part: &str) -> bool {
    a.only.is_empty() || a.only.iter().any(|p| p == part)
}

/// Parts run only when `--only` names them (they take long).
fn asked(a: &BenchArgs, part: &str) -> bool {
    a.only.iter().any(|p| p == part)
}

pub fn run(a: BenchArgs) -> Result<()> {
    for p in &a.only {
        if ![
            "cost",
            "record",
            "heatmap",
            "accuracy",
            "softdirty",
            "schemes",
            "tune",
            "service",
            "endpoint",
            "tiering",
            "import",
        ]
        .contains(&p.as_str())
        {
            bail!(crate::UsageError(format!(
                "--only {p}: unknown part (expected cost, record, heatmap, accuracy, softdirty, \
                 schemes, tune, service, endpoint, tiering or import)"
            )));
        }
    }
    let mut report = Report::default();
    if wants(&a, "cost") {
        cost(&a, &mut report)?;
    }
    if wants(&a, "record") || wants(&a, "heatmap") {
        record(&a, &mut report)?;
    }
    if wants(&a, "accuracy") {
        accuracy_table(&a, &mut report)?;
    }
    if asked(&a, "softdirty") {
        softdirty_table(&a, &mut report)?;
    }
    if wants(&a, "schemes") {
        schemes_table(&a, &mut report)?;
    }
    if wants(&a, "tune") {
        report.tune = Some(super::tune::bench_tune(a.quick, a.json)?);
    }
    if asked(&a, "service") {
        report.service = Some(super::bench_service::soak(a.quick, a.json)?);
    }
    if asked(&a, "endpoint") {
        report.endpoint = Some(super::bench_endpoint::bench(a.json)?);
    }
    if asked(&a, "tiering") {
        report.tiering = super::bench_tiering::table(a.quick, a.json)?;
    }
    if asked(&a, "import") {
        report.import = Some(super::bench_import::bench(a.quick, a.json)?);
    }
    if a.json {
        print_json(&report)?;
    }
    Ok(())
}

fn sim(
    spec: &str,
    origin: &str,
    duration_us: Option<u64>,
    attrs: Attrs,
    kind: MonitorKind,
    out: Option<&Path>,
    score: bool,
) -> Result<super::record::RunSummary> {
    run_sim(
        &bench_run(spec, origin, duration_us, attrs, kind, score),
        out,
    )
}

/// A bench's simulated run: no schemes, no seed but the spec's, a
/// progress bar, not interruptible, the kernel's soft-dirty reset.
fn bench_run<'a>(
    spec: &'a str,
    origin: &'a str,
    duration_us: Option<u64>,
    attrs: Attrs,
    kind: MonitorKind,
    score: bool,
) -> SimRun<'a> {
    SimRun {
        spec_text: spec,
        origin,
        seed: None,
        duration_us,
        attrs,
        kind,
        schemes: Vec::new(),
        score,
        progress: true,
        interruptible: false,
        dry_run: false,
        softdirty_reset: Default::default(),
    }
}

fn cost(a: &BenchArgs, report: &mut Report) -> Result<()> {
    // 1,000 regions throughout: min = max = 1000 keeps the count there while
    // the adaptation code still runs every window.
    let attrs = Attrs {
        min_nr_regions: 1000,
        max_nr_regions: 1000,
        ..Attrs::default()
    };
    let duration = if a.quick { 20_000_000 } else { 120_000_000 };
    if !a.json {
        println!(
            "engine + simulator cost at 1,000 regions ({}s simulated each)",
            duration / 1_000_000
        );
        println!(
            "  {:<10} {:>12} {:>16} {:>10} {:>18}",
            "spec", "mapped", "CPU ms per sim. s", "regions", "ns/region/sample"
        );
    }
    // Alternate the two specs and keep each one's best of three, so both see
    // the same machine noise.
    let mut best: [Option<CostRow>; 2] = [None, None];
    for _ in 0..3 {
        for (i, (name, spec)) in [("cost-1g", COST_1G), ("cost-64t", COST_64T)]
            .into_iter()
            .enumerate()
        {
            let cpu0 = cpu_time_s();
            let mut s = sim(
                spec,
                name,
                Some(duration),
                attrs,
                MonitorKind::Adaptive,
                None,
                false,
            )?;
            // CPU time, not wall time: a short run on a shared machine is at
            // the mercy of the scheduler.
            s.elapsed_s = cpu_time_s() - cpu0;
            let model = s.model.as_ref().context("model")?;
            let samples = s.simulated_s * 1e6 / attrs.sample_us as f64;
            let row = CostRow {
                spec: name.into(),
                mapped_bytes: model.workload.mapped_bytes(),
                simulated_s: s.simulated_s,
                cpu_s: s.elapsed_s,
                cpu_ms_per_simulated_s: s.elapsed_s * 1e3 / s.simulated_s,
                avg_nr_regions: s.avg_nr_regions,
                ns_per_region_sample: s.elapsed_s * 1e9 / (samples * s.avg_nr_regions),
            };
            if best[i].as_ref().is_none_or(|b| row.cpu_s < b.cpu_s) {
                best[i] = Some(row);
            }
        }
    }
    for row in best.into_iter().flatten() {
        if !a.json {
            println!(
                "  {:<10} {:>12} {:>16.1} {:>10.0} {:>18.1}",
                row.spec,
                udamon_report::fmt_bytes(row.mapped_bytes),
                row.cpu_ms_per_simulated_s,
                row.avg_nr_regions,
                row.ns_per_region_sample
            );
        }
        report.cost.push(row);
    }
    if let [small, big] = &report.cost[..] {
        let ratio = big.cpu_s / small.cpu_s;
        report.cost_ratio_64t_over_1g = Some(ratio);
        if !a.json {
            println!("  64 TiB / 1 GiB CPU time ratio: {ratio:.2}\n");
        }
    }
    Ok(())
}

/// User plus system CPU time of this process so far, in seconds.
pub(super) fn cpu_time_s() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn record(a: &BenchArgs, report: &mut Report) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("udamon-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let duration: u64 = if a.quick { 360_000_000 } else { 3_600_000_000 };
    if !a.json {
        println!(
            "record size, heatmap and HTML report speed ({} s of the cost-1g workload)",
            duration / 1_000_000
        );
    }
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
    for (label, attrs) in configs {
        let path = dir.join("hour.udr");
        let s = sim(
            COST_1G,
            "cost-1g",
            Some(duration),
            attrs,
            MonitorKind::Adaptive,
            Some(&path),
            false,
        )?;
        let per_hour = s.record_bytes as f64 * 3600.0 / s.simulated_s;
        let (heat_s, peak) = time_heatmap(&path, &dir.join("hour.png"))?;
        let html = dir.join("hour.html");
        let (html_s, html_peak) = time_udamon(&[
            "report".as_ref(),
            "html".as_ref(),
            path.as_os_str(),
            "-o".as_ref(),
            html.as_os_str(),
        ])?;
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
        if !a.json {
            println!(
                "  {label}: {} snapshots, {:.0} regions on average: {} written, {} per hour",
                row.snapshots,
                row.avg_nr_regions,
                udamon_report::fmt_bytes(row.record_bytes),
                udamon_report::fmt_bytes(per_hour as u64)
            );
            println!(
                "    heatmap PNG of it: {:.2}s, peak RSS {}",
                row.heatmap_elapsed_s,
                udamon_report::fmt_bytes(row.heatmap_peak_rss_bytes)
            );
            println!(
                "    HTML report of it: {:.2}s, peak RSS {}, {} page",
                row.html_elapsed_s,
                udamon_report::fmt_bytes(row.html_peak_rss_bytes),
                udamon_report::fmt_bytes(row.html_bytes)
            );
        }
        report.record.push(row);
    }
    if !a.json {
        println!();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Runs `udamon report heatmap` on `record` in a child process and returns
/// its wall time and peak resident memory.
fn time_heatmap(record: &Path, png: &Path) -> Result<(f64, u64)> {
    time_udamon(&[
        "report".as_ref(),
        "heatmap".as_ref(),
        record.as_os_str(),
        "-o".as_ref(),
        png.as_os_str(),
    ])
}

/// Runs this udamon with `args` in a child process and returns its wall
/// time and peak resident memory.
pub(super) fn time_udamon(args: &[&std::ffi::OsStr]) -> Result<(f64, u64)> {
    let exe = std::env::current_exe()?;
    let what = args
        .iter()
        .take(2)
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run udamon {what}"))?;
    let pid = child.id() as libc::pid_t;
    // SAFETY: wait4 writes only into the status and rusage we pass.
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let elapsed = started.elapsed().as_secs_f64();
    if rc != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        bail!("udamon {what} failed: {}", err.trim());
    }
    Ok((elapsed, ru.ru_maxrss.max(0) as u64 * 1024))
}

fn accuracy_table(a: &BenchArgs, report: &mut Report) -> Result<()> {
    let duration = a.quick.then_some(20_000_000);
    if !a.json {
        println!("accuracy against the exact truth (default attrs; warm-up 10 windows; hot = frequency >= 0.2)");
        println!(
            "  {:<15} {:<19} {:>9} {:>7} {:>9} {:>9} {:>9}",
            "spec", "monitor", "freq_mae", "hot_f1", "wss_error", "regions", "time"
        );
    }
    for &(name, spec) in SPECS.iter().chain([&SPARSE_RESIDENT]) {
        let attrs = Attrs::default();
        let adaptive = sim(
            spec,
            name,
            duration,
            attrs,
            MonitorKind::Adaptive,
            None,
            true,
        )?;
        let own = adaptive.avg_nr_regions.round().max(1.0) as u32;
        let mut rows = vec![row(name, adaptive)];
        for kind in [
            MonitorKind::Enhanced,
            MonitorKind::FixedRegions(own),
            MonitorKind::FixedRegions(1000),
            MonitorKind::FullScan,
        ] {
            match sim(spec, name, duration, attrs, kind, None, true) {
                Ok(s) => rows.push(row(name, s)),
                Err(e) => rows.push(AccuracyRow {
                    spec: name.to_string(),
                    monitor: kind.label(),
                    freq_mae: None,
                    hot_f1: None,
                    wss_error: None,
                    avg_nr_regions: None,
                    elapsed_s: None,
                    note: Some(format!("{e:#}")),
                }),
            }
        }
        for r in rows {
            if !a.json {
                print_accuracy_row(&r);
            }
            report.accuracy.push(r);
        }
    }
    Ok(())
}

/// Soft-dirty reset every sample (the kernel's estimator, which the
/// simulator's checks are anyway), every window, and every 4th and 16th
/// window (what `auto` does for processes whose reset is dear), scored
/// against the truth: what a cheaper reset costs in accuracy.
fn softdirty_table(a: &BenchArgs, report: &mut Report) -> Result<()> {
    use udamon_core::softdirty::SoftDirtyReset;
    let duration = a.quick.then_some(20_000_000);
    if !a.json {
        println!(
            "soft-dirty reset against the exact truth (adaptive, default attrs; every access \
             counts as a write)"
        );
        println!(
            "  {:<15} {:<19} {:>9} {:>7} {:>9} {:>9} {:>9}",
            "spec", "reset", "freq_mae", "hot_f1", "wss_error", "regions", "time"
        );
    }
    for (name, spec) in SPECS {
        for reset in [
            SoftDirtyReset::Sample,
            SoftDirtyReset::Windows(1),
            SoftDirtyReset::Windows(4),
            SoftDirtyReset::Windows(16),
        ] {
            let s = run_sim(
                &SimRun {
                    softdirty_reset: reset,
                    ..bench_run(
                        spec,
                        name,
                        duration,
                        Attrs::default(),
                        MonitorKind::Adaptive,
                        true,
                    )
                },
                None,
            )?;
            let mut r = row(name, s);
            r.monitor = format!("reset {reset}");
            if !a.json {
                print_accuracy_row(&r);
            }
            report.softdirty.push(r);
        }
    }
    Ok(())
}

/// One line of an accuracy table ("refused" for a run that could not be
/// made).
fn print_accuracy_row(r: &AccuracyRow) {
    let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
    println!(
        "  {:<15} {:<19} {:>9} {:>7} {:>9} {:>9} {:>9}",
        r.spec,
        r.monitor,
        f(r.freq_mae, 4),
        f(r.hot_f1, 3),
        f(r.wss_error, 3),
        f(r.avg_nr_regions, 0),
        r.elapsed_s.map_or("refused".into(), |t| format!("{t:.2}s"))
    );
}

fn row(spec: &str, s: super::record::RunSummary) -> AccuracyRow {
    let acc = s.accuracy.expect("scored runs carry their accuracy");
    AccuracyRow {
        spec: spec.to_string(),
        monitor: s.monitor.clone(),
        freq_mae: Some(acc.freq_mae),
        hot_f1: Some(acc.hot_f1),
        wss_error: Some(acc.wss_error),
        avg_nr_regions: Some(acc.avg_nr_regions),
        elapsed_s: Some(s.elapsed_s),
        note: None,
    }
}

fn schemes_table(a: &BenchArgs, report: &mut Report) -> Result<()> {
    let duration = a.quick.then_some(20_000_000);
    if !a.json {
        println!("\nthe seeds' scheme configurations on the simulator (default attrs; changes against orig)");
        println!(
            "  {:<11} {:<5} {:>12} {:>8} {:>11} {:>8} {:>9}",
            "spec", "conf", "rss avg", "change", "runtime", "change", "faults"
        );
    }
    for (name, spec) in SCHEME_SPECS {
        let mut orig: Option<(f64, f64)> = None;
        for (config, text) in CONFIGS {
            let schemes = udamon_scheme_file::parse(text, config, None)?;
            // orig: no monitoring at all; rec: monitoring, no scheme. The
            // simulator charges monitoring no cost, so both run the engine.
            let run = SimRun {
                schemes,
                ..bench_run(
                    spec,
                    name,
                    duration,
                    Attrs::default(),
                    MonitorKind::Adaptive,
                    false,
                )
            };
            let s = run_sim(&run, None)?;
            let num = |k: &str| s.metrics.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
            let (rss, rt) = (num("rss_avg_bytes"), num("runtime_s"));
            let (rss0, rt0) = *orig.get_or_insert((rss, rt));
            let row = SchemeRow {
                spec: name.to_string(),
                config: config.to_string(),
                rss_avg_bytes: rss,
                runtime_s: rt,
                faults: num("faults"),
                rss_change: rss / rss0 - 1.0,
                runtime_change: rt / rt0 - 1.0,
            };
            if !a.json {
                println!(
                    "  {:<11} {:<5} {:>12} {:>+7.1}% {:>10.3}s {:>+7.2}% {:>9}",
                    row.spec,
                    row.config,
                    udamon_report::fmt_bytes(rss as u64),
                    row.rss_change * 100.0,
                    rt,
                    row.runtime_change * 100.0,
                    row.faults as u64
                );
            }
            report.schemes.push(row);
        }
    }
    Ok(())
}
