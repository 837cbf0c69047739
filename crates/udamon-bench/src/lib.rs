//! `udamon bench`: the figures the README quotes, measured in one run so
//! their ratios compare like with like.
//!
//! Each part returns typed results (the [`Report`], serialisable as the
//! JSON `udamon bench --json` prints) and reports its tables, line by line
//! as they are measured, through the caller's [`Sink`]. The parts that
//! measure udamon as a user runs it start the executable
//! [`Options::udamon`] names in child processes.

pub mod accuracy;
pub mod allocs;
mod child;
pub mod cost;
pub mod damon_stat;
pub mod endpoint;
mod error;
pub mod import;
pub mod lock;
pub mod record;
pub mod schemes;
pub mod service;
mod sim;
pub mod tiering;

use std::path::PathBuf;

use serde::Serialize;

pub use child::time_udamon;
pub use error::{Cause, Error, Result};

/// Where the bench reports as it goes.
pub trait Sink {
    /// One line of a part's table or summary, without its newline (an
    /// empty one separates tables; `udamon bench` prints it on stdout,
    /// with `--json` not at all).
    fn line(&mut self, text: &str);
    /// A progress note of a long part: where the service soak is, every
    /// 10 s (`udamon bench` prints it on stderr after "udamon: ").
    fn note(&mut self, text: &str);
    /// A simulated run's progress: `done` of its `total` simulated
    /// microseconds, once with 0 before its first snapshot, then after
    /// each (`udamon bench` draws its "recording" bar).
    fn progress(&mut self, done: u64, total: u64) {
        let _ = (done, total);
    }
    /// The simulated run [`Sink::progress`] was about has ended.
    fn progress_end(&mut self) {}
}

/// The parts, in the order they run.
pub const PARTS: &[&str] = &[
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
    "lock",
    "allocs",
    "damon-stat",
];

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Shorter runs (figures are noisier).
    pub quick: bool,
    /// Run only these parts (all but the long ones when empty: softdirty,
    /// service, endpoint, tiering, import, lock, allocs and damon-stat run
    /// only when named).
    pub only: Vec<String>,
    /// The udamon executable, run in child processes by the record,
    /// endpoint and import parts.
    pub udamon: PathBuf,
}

impl Options {
    /// Refuses a part that does not exist.
    pub fn check(&self) -> Result<()> {
        for p in &self.only {
            if !PARTS.contains(&p.as_str()) {
                return Err(Error::Usage(format!(
                    "--only {p}: unknown part (expected cost, record, heatmap, accuracy, \
                     softdirty, schemes, tune, service, endpoint, tiering, import, lock, allocs \
                     or damon-stat)"
                )));
            }
        }
        Ok(())
    }

    /// Whether a part runs by default or was named.
    pub fn wants(&self, part: &str) -> bool {
        self.only.is_empty() || self.asked(part)
    }

    /// Whether a part was named (the long parts run only then).
    pub fn asked(&self, part: &str) -> bool {
        self.only.iter().any(|p| p == part)
    }
}

/// What the parts measured, as `udamon bench --json` prints it (a part
/// that did not run is left out).
#[derive(Serialize, Default, Debug)]
pub struct Report {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cost: Vec<cost::CostRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_ratio_64t_over_1g: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub record: Vec<record::RecordRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accuracy: Vec<accuracy::AccuracyRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub softdirty: Vec<accuracy::AccuracyRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schemes: Vec<schemes::SchemeRow>,
    /// The tuning benchmark's rows (in the JSON with their keys sorted,
    /// as `udamon bench --json` has always printed them).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "sorted_keys"
    )]
    pub tune: Option<Vec<udamon_tune::bench::Row>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<service::ServiceSoak>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<endpoint::EndpointBench>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tiering: Vec<tiering::TieringRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<import::ImportBench>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lock: Vec<lock::LockRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocs: Option<allocs::AllocsBench>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damon_stat: Option<damon_stat::DamonStatBench>,
}

/// A value serialised through `serde_json::Value`, whose maps are sorted.
fn sorted_keys<T: Serialize, S: serde::Serializer>(
    v: &T,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    serde_json::to_value(v)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}

/// Runs the parts `opts` asks for, in [`PARTS`]' order (record and
/// heatmap are one part), each table reported to `sink` as it is
/// measured; refuses an unknown part before anything runs.
pub fn run(opts: &Options, sink: &mut dyn Sink) -> Result<Report> {
    opts.check()?;
    let mut report = Report::default();
    if opts.wants("cost") {
        let c = cost::cost(opts.quick, sink)?;
        report.cost = c.rows;
        report.cost_ratio_64t_over_1g = c.ratio_64t_over_1g;
    }
    if opts.wants("record") || opts.wants("heatmap") {
        report.record = record::record(&opts.udamon, opts.quick, sink)?;
    }
    if opts.wants("accuracy") {
        report.accuracy = accuracy::accuracy(opts.quick, sink)?;
    }
    if opts.asked("softdirty") {
        report.softdirty = accuracy::softdirty(opts.quick, sink)?;
    }
    if opts.wants("schemes") {
        report.schemes = schemes::schemes(opts.quick, sink)?;
    }
    if opts.wants("tune") {
        // Its lines may end in a newline (a blank line after the table).
        report.tune = Some(udamon_tune::bench::run(opts.quick, &mut |l| {
            l.split('\n').for_each(|l| sink.line(l))
        })?);
    }
    if opts.asked("service") {
        report.service = Some(service::soak(opts.quick, sink)?);
    }
    if opts.asked("endpoint") {
        report.endpoint = Some(endpoint::bench(&opts.udamon, sink)?);
    }
    if opts.asked("tiering") {
        report.tiering = tiering::table(opts.quick, sink)?;
    }
    if opts.asked("import") {
        report.import = Some(import::bench(&opts.udamon, opts.quick, sink)?);
    }
    if opts.asked("lock") {
        report.lock = lock::table(&opts.udamon, opts.quick, sink)?;
    }
    if opts.asked("allocs") {
        report.allocs = allocs::bench(opts.quick, sink)?;
    }
    if opts.asked("damon-stat") {
        report.damon_stat = Some(damon_stat::bench(opts.quick, sink)?);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_part_is_a_usage_error_naming_the_parts() {
        let o = Options {
            only: vec!["cost".into(), "speed".into()],
            ..Options::default()
        };
        match o.check() {
            Err(Error::Usage(m)) => assert!(
                m.starts_with("--only speed: unknown part (expected cost, record,")
                    && m.ends_with("tiering, import, lock, allocs or damon-stat)"),
                "{m}"
            ),
            r => panic!("{r:?}"),
        }
        for p in PARTS {
            let o = Options {
                only: vec![p.to_string()],
                ..Options::default()
            };
            assert!(o.check().is_ok() && o.wants(p) && o.asked(p));
            assert!(!o.wants(if *p == "cost" { "tune" } else { "cost" }));
        }
    }

    /// Every part's lines, as a terminal would show them.
    #[derive(Default)]
    struct Lines(Vec<String>);

    impl Sink for Lines {
        fn line(&mut self, text: &str) {
            self.0.push(text.to_string());
        }
        fn note(&mut self, text: &str) {
            self.0.push(format!("note: {text}"));
        }
    }

    #[test]
    fn the_tiering_part_reports_its_table_and_returns_its_rows() {
        let o = Options {
            quick: true,
            only: vec!["tiering".into()],
            ..Options::default()
        };
        let mut lines = Lines::default();
        let r = run(&o, &mut lines).unwrap();
        assert_eq!(r.tiering.len(), 15);
        assert!(r.cost.is_empty() && r.tune.is_none() && r.import.is_none());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["tiering"]
        );
        assert_eq!(v["tiering"][0]["spec"], "tier-static");
        assert_eq!(v["tiering"][0]["policy"], "none");
        assert_eq!(v["tiering"][0]["runtime_change"], 0.0);
        let l = &lines.0;
        assert_eq!(l.len(), 3 + 15, "{l:#?}");
        assert_eq!(l[0], "");
        assert!(l[1].starts_with("tiering on the simulator"), "{}", l[1]);
        assert!(l[2].split_whitespace().eq([
            "spec",
            "policy",
            "fast%",
            "hot%",
            "converge",
            "promoted",
            "demoted",
            "free<0.5%",
            "used>99.7%",
            "runtime",
            "change"
        ]));
        assert!(l[3].starts_with("  tier-static none "), "{}", l[3]);
        assert!(l[17].starts_with("  tier-large  udamon-fast "), "{}", l[17]);
    }

    #[test]
    fn without_only_the_long_parts_do_not_run() {
        let o = Options::default();
        assert!(o.wants("cost") && o.wants("tune"));
        assert!(!o.asked("service") && !o.asked("import") && !o.asked("damon-stat"));
    }

    #[test]
    fn the_damon_stat_part_measures_a_scrape() {
        let o = Options {
            quick: true,
            only: vec!["damon-stat".into()],
            ..Options::default()
        };
        let mut lines = Lines::default();
        let r = run(&o, &mut lines).unwrap();
        let d = r.damon_stat.unwrap();
        assert_eq!(d.scrapes, 2_000);
        assert!(d.median_us > 0.0 && d.p99_us >= d.median_us, "{d:?}");
        assert!(d.text_bytes > 1000, "{d:?}");
        assert!(lines.0[1].starts_with("DAMON_STAT's part of one metrics scrape"));
    }
}
