//! The suite file: the workloads, the configurations, how many repeats.
//!
//! ```toml
//! repeats = 3
//! configs = ["orig", "rec", "prcl", "damo-rec"]
//!
//! [[workload]]
//! name = "sqlite"
//! setup = "rm -f /tmp/e.db && sqlite3 /tmp/e.db < gen.sql"
//! run = "exec sqlite3 /tmp/e.db < query.sql"
//! ```
//!
//! Paths in the file are relative to the file's directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use udamon_core::schemes::Damos;
use udamon_core::units::{parse_duration_us, Fraction};

use crate::Error;

/// The seeds' scheme configurations, built in (DAOS Listing 3).
pub const ETHP: &str = include_str!("../../../examples/schemes/ethp.txt");
pub const PRCL: &str = include_str!("../../../examples/schemes/prcl.txt");
/// THP "always" as a scheme, for simulated workloads (the simulator has no
/// system-wide THP setting).
pub const THP_SCHEME: &str = include_str!("../../../examples/schemes/thp.txt");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "default_repeats")]
    repeats: u32,
    configs: Vec<String>,
    #[serde(default)]
    ops: Option<String>,
    #[serde(default)]
    monitor_args: Vec<String>,
    #[serde(default)]
    damo: Option<PathBuf>,
    #[serde(default)]
    damo_args: Vec<String>,
    #[serde(default)]
    drop_caches: bool,
    #[serde(default)]
    thp: Option<String>,
    #[serde(default)]
    schemes: BTreeMap<String, PathBuf>,
    #[serde(default)]
    tune: Option<TuneFile>,
    #[serde(default)]
    workload: Vec<WorkloadFile>,
}

/// How `tuned-*` configurations tune (as `udamon tune`'s flags).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TuneFile {
    #[serde(default)]
    knob: Option<String>,
    #[serde(default)]
    range: Option<String>,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    samples: Option<usize>,
    #[serde(default)]
    baseline_runs: Option<usize>,
    #[serde(default)]
    seed: Option<u64>,
}

fn default_repeats() -> u32 {
    3
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    name: String,
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    sim: Option<PathBuf>,
    #[serde(default)]
    duration: Option<String>,
    #[serde(default)]
    setup: Option<String>,
    #[serde(default)]
    teardown: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    metric: Option<MetricFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricFile {
    regex: String,
    name: String,
    #[serde(default = "yes")]
    higher_is_better: bool,
}

fn yes() -> bool {
    true
}

/// A workload's own performance figure, parsed from its output: the first
/// capture group of the last line that matches.
#[derive(Debug, Clone)]
pub struct Metric {
    pub regex: regex::Regex,
    pub name: String,
    pub higher_is_better: bool,
}

impl Metric {
    /// The figure in `output` (the run's stdout then stderr), if any line matches.
    pub fn parse(&self, output: &str) -> Option<f64> {
        output
            .lines()
            .filter_map(|l| self.regex.captures(l))
            .filter_map(|c| {
                c.get(1)
                    .and_then(|m| m.as_str().replace(',', "").parse().ok())
            })
            .next_back()
    }
}

/// What a workload is.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A command, run with `sh -c`.
    Command {
        run: String,
        setup: Option<String>,
        teardown: Option<String>,
        /// The process to monitor and measure, by name; `None`: the run
        /// command's own process.
        target: Option<String>,
        cwd: Option<PathBuf>,
        timeout_s: f64,
        metric: Option<Metric>,
    },
    /// A simulated workload (a spec file), for the spec's duration or this one.
    Sim {
        spec: PathBuf,
        duration_us: Option<u64>,
    },
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
}

/// One configuration a workload runs under.
#[derive(Debug, Clone)]
pub enum Config {
    /// No monitoring.
    Orig,
    /// udamon records the target process.
    Rec,
    /// udamon records the physical address space.
    Prec,
    /// THP "always" for the run (the system's setting is restored after).
    Thp,
    /// udamon applies these schemes to the target (and records it).
    Schemes {
        file: SchemeSource,
        schemes: Vec<Damos>,
    },
    /// damo records the target.
    DamoRec,
    /// damo applies these schemes to the target (and records it).
    DamoSchemes { schemes: Vec<Damos> },
    /// These schemes, with the suite's `[tune]` knob tuned for each
    /// workload first (DAOS's auto-tuning runtime, on the workload's own
    /// runs), then applied as `Schemes` are.
    Tuned { schemes: Vec<Damos> },
}

/// How `tuned-*` configurations are tuned: the knob, its range and grid,
/// the number of sampled runs, the sampling seed.
#[derive(Debug, Clone, Copy)]
pub struct TuneSpec {
    pub knob: udamon_tune::Knob,
    pub domain: udamon_tune::Domain,
    pub samples: usize,
    /// `orig` runs the scores are relative to; their median is used (one
    /// noisy baseline skews every score).
    pub baseline_runs: usize,
    pub seed: u64,
}

#[derive(Debug, Clone)]
pub enum SchemeSource {
    /// A built-in scheme text (written next to the results for udamon to read).
    Builtin(&'static str),
    File(PathBuf),
}

impl Config {
    /// Whether the configuration needs a live monitor (and so a machine with
    /// a monitoring path).
    pub fn monitors(&self) -> bool {
        !matches!(self, Config::Orig | Config::Thp)
    }

    pub fn is_damo(&self) -> bool {
        matches!(self, Config::DamoRec | Config::DamoSchemes { .. })
    }
}

#[derive(Debug, Clone)]
pub struct Suite {
    pub path: PathBuf,
    /// The file's text, kept with the results to refuse resuming a changed suite.
    pub text: String,
    pub repeats: u32,
    pub configs: Vec<(String, Config)>,
    pub ops: String,
    pub monitor_args: Vec<String>,
    pub damo: Option<PathBuf>,
    pub damo_args: Vec<String>,
    pub drop_caches: bool,
    /// The THP setting for every configuration but `thp` (which runs with
    /// "always"); `None`: leave the system's.
    pub thp: Option<String>,
    /// The `[tune]` table (defaults: `min_age` of scheme 0 over 0-60 s,
    /// 10 samples), for `tuned-*` configurations.
    pub tune: TuneSpec,
    pub workloads: Vec<Workload>,
}

const DEFAULT_TIMEOUT_S: f64 = 600.0;
const OPS: &[&str] = &["auto", "kdamond", "idle", "softdirty"];

fn bad(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Usage(format!("{}: {what}", path.display()))
}

impl Suite {
    pub fn load(path: &Path) -> Result<Suite, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Suite, Error> {
        let f: File = toml::from_str(text).map_err(|e| bad(path, e))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let rel = |p: &Path| -> PathBuf {
            if p.is_absolute() || dir.as_os_str().is_empty() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };
        if f.repeats == 0 || f.repeats > 1000 {
            return Err(bad(
                path,
                format!("repeats = {}: give 1 to 1000", f.repeats),
            ));
        }
        let ops = f.ops.unwrap_or_else(|| "auto".into());
        if !OPS.contains(&ops.as_str()) {
            return Err(bad(
                path,
                format!("ops = {ops:?}: give one of {}", OPS.join(", ")),
            ));
        }
        if let Some(t) = &f.thp {
            if !["always", "madvise", "never"].contains(&t.as_str()) {
                return Err(bad(
                    path,
                    format!("thp = {t:?}: give always, madvise or never"),
                ));
            }
        }
        if f.workload.is_empty() {
            return Err(bad(path, "no [[workload]]: add at least one"));
        }
        if f.configs.is_empty() {
            return Err(bad(
                path,
                "configs = []: name at least one, e.g. [\"orig\", \"rec\"]",
            ));
        }
        let mut workloads = Vec::new();
        for w in f.workload {
            if !valid_name(&w.name) {
                return Err(bad(
                    path,
                    format!(
                        "workload name {:?}: use letters, digits, '-', '_' and '.'",
                        w.name
                    ),
                ));
            }
            if workloads.iter().any(|x: &Workload| x.name == w.name) {
                return Err(bad(path, format!("workload {:?} is named twice", w.name)));
            }
            workloads.push(workload(path, w, &rel)?);
        }
        let configs = configs(path, &f.configs, &f.schemes, &rel)?;
        let tune = tune_spec(path, f.tune.as_ref())?;
        for (name, c) in &configs {
            if let Config::Tuned { schemes } = c {
                udamon_tune::check(schemes, &tune.knob, &tune.domain)
                    .map_err(|e| bad(path, format!("config {name:?}: [tune]: {e}")))?;
            }
        }
        Ok(Suite {
            path: path.to_path_buf(),
            text: text.to_string(),
            repeats: f.repeats,
            configs,
            ops,
            monitor_args: f.monitor_args,
            damo: f.damo.map(|d| {
                if d.components().count() > 1 {
                    rel(&d)
                } else {
                    d
                }
            }),
            damo_args: f.damo_args,
            drop_caches: f.drop_caches,
            thp: f.thp,
            tune,
            workloads,
        })
    }
}

/// One `[[workload]]`: a command, or a simulated spec.
fn workload(
    path: &Path,
    mut w: WorkloadFile,
    rel: &dyn Fn(&Path) -> PathBuf,
) -> Result<Workload, Error> {
    let kind = match (w.run.take(), w.sim.take()) {
        (Some(_), Some(_)) => {
            return Err(bad(
                path,
                format!("workload {:?}: give `run` or `sim`, not both", w.name),
            ))
        }
        (None, None) => {
            return Err(bad(
                path,
                format!(
                    "workload {:?}: give `run` (a command) or `sim` (a spec file)",
                    w.name
                ),
            ))
        }
        (None, Some(spec)) => sim_kind(path, &w, &spec, rel)?,
        (Some(_), None) if w.duration.is_some() => {
            return Err(bad(
                path,
                format!("workload {:?}: `duration` is for simulated workloads; a command runs until it ends (see `timeout`)", w.name),
            ))
        }
        (Some(run), None) => command_kind(path, &mut w, run, rel)?,
    };
    Ok(Workload { name: w.name, kind })
}

/// A simulated workload: its spec (relative to the suite) and duration;
/// the commands' keys refused.
fn sim_kind(
    path: &Path,
    w: &WorkloadFile,
    spec: &Path,
    rel: &dyn Fn(&Path) -> PathBuf,
) -> Result<Kind, Error> {
    let extra = [
        ("setup", w.setup.is_some()),
        ("teardown", w.teardown.is_some()),
        ("target", w.target.is_some()),
        ("cwd", w.cwd.is_some()),
        ("timeout", w.timeout.is_some()),
        ("metric", w.metric.is_some()),
    ];
    if let Some((k, _)) = extra.iter().find(|(_, set)| *set) {
        return Err(bad(
            path,
            format!(
                "workload {:?}: `{k}` is for commands, not simulated workloads",
                w.name
            ),
        ));
    }
    let duration_us = match &w.duration {
        None => None,
        Some(t) => Some(
            parse_duration_us(t, Fraction::Round)
                .map_err(|e| bad(path, format!("workload {:?}: duration {t:?}: {e}", w.name)))?,
        ),
    };
    Ok(Kind::Sim {
        spec: rel(spec),
        duration_us,
    })
}

/// A command workload: its timeout, metric and target checked; its
/// commands taken from `w`.
fn command_kind(
    path: &Path,
    w: &mut WorkloadFile,
    run: String,
    rel: &dyn Fn(&Path) -> PathBuf,
) -> Result<Kind, Error> {
    let timeout_s = match &w.timeout {
        None => DEFAULT_TIMEOUT_S,
        Some(t) => {
            parse_duration_us(t, Fraction::Round)
                .map_err(|e| bad(path, format!("workload {:?}: timeout {t:?}: {e}", w.name)))?
                as f64
                / 1e6
        }
    };
    if timeout_s <= 0.0 {
        return Err(bad(
            path,
            format!("workload {:?}: timeout must be above 0", w.name),
        ));
    }
    let metric = match w.metric.take() {
        None => None,
        Some(m) => {
            let regex = regex::Regex::new(&m.regex)
                .map_err(|e| bad(path, format!("workload {:?}: metric regex: {e}", w.name)))?;
            if regex.captures_len() < 2 {
                return Err(bad(
                    path,
                    format!(
                        "workload {:?}: metric regex {:?} has no capture group: put the number in ( )",
                        w.name, m.regex
                    ),
                ));
            }
            Some(Metric {
                regex,
                name: m.name,
                higher_is_better: m.higher_is_better,
            })
        }
    };
    if let Some(t) = &w.target {
        if t.is_empty() || t.contains('/') {
            return Err(bad(
                path,
                format!(
                    "workload {:?}: target {t:?}: give a process name, e.g. \"redis-server\"",
                    w.name
                ),
            ));
        }
    }
    Ok(Kind::Command {
        run,
        setup: w.setup.take(),
        teardown: w.teardown.take(),
        target: w.target.take(),
        cwd: w.cwd.take().map(|c| rel(&c)),
        timeout_s,
        metric,
    })
}

/// The configurations `configs` names (`[schemes]` gives scheme files
/// their names); a name of `[schemes]` may not be a built-in one.
fn configs(
    path: &Path,
    names: &[String],
    table: &BTreeMap<String, PathBuf>,
    rel: &dyn Fn(&Path) -> PathBuf,
) -> Result<Vec<(String, Config)>, Error> {
    let mut configs: Vec<(String, Config)> = Vec::new();
    for name in names {
        if configs.iter().any(|(n, _)| n == name) {
            return Err(bad(path, format!("config {name:?} is listed twice")));
        }
        let c = config(path, name, table, rel)?;
        configs.push((name.clone(), c));
    }
    for name in table.keys() {
        if matches!(name.as_str(), "orig" | "rec" | "prec" | "thp")
            || name.starts_with("damo-")
            || name.starts_with("tuned-")
        {
            return Err(bad(
                path,
                format!("[schemes] {name:?}: that name is a built-in configuration; pick another"),
            ));
        }
    }
    Ok(configs)
}

/// The `[tune]` table, checked, with `udamon tune`'s defaults.
fn tune_spec(path: &Path, t: Option<&TuneFile>) -> Result<TuneSpec, Error> {
    let ue = |e: udamon_tune::Error| bad(path, format!("[tune]: {e}"));
    let knob = match t.and_then(|t| t.knob.as_deref()) {
        Some(k) => udamon_tune::Knob::parse(k).map_err(ue)?,
        None => udamon_tune::Knob::default(),
    };
    let (lo, hi) = match t.and_then(|t| t.range.as_deref()) {
        Some(r) => knob.parse_range(r).map_err(ue)?,
        None => knob.default_range().ok_or_else(|| {
            bad(
                path,
                format!(
                    "[tune]: knob {:?} has no default range: give range, e.g. range = {:?}",
                    knob.name(),
                    knob.example_range()
                ),
            )
        })?,
    };
    let step = match t.and_then(|t| t.step.as_deref()) {
        Some(s) => {
            let v = knob
                .parse_value(s)
                .map_err(|e| bad(path, format!("[tune]: step {s:?}: {e}")))?;
            if v <= 0.0 {
                return Err(bad(
                    path,
                    format!(
                        "[tune]: step {s:?} is 0: give a step above 0, e.g. {:?}",
                        knob.format(knob.default_step(lo, hi))
                    ),
                ));
            }
            v
        }
        None => knob.default_step(lo, hi),
    };
    let domain = udamon_tune::Domain::new(lo, hi, step).map_err(ue)?;
    let samples = t.and_then(|t| t.samples).unwrap_or(10);
    if !(1..=100).contains(&samples) {
        return Err(bad(
            path,
            format!("[tune]: samples = {samples}: give 1 to 100 (the paper uses 10)"),
        ));
    }
    let baseline_runs = t.and_then(|t| t.baseline_runs).unwrap_or(1);
    if !(1..=10).contains(&baseline_runs) {
        return Err(bad(
            path,
            format!("[tune]: baseline_runs = {baseline_runs}: give 1 to 10"),
        ));
    }
    Ok(TuneSpec {
        knob,
        domain,
        samples,
        baseline_runs,
        seed: t.and_then(|t| t.seed).unwrap_or(0),
    })
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with('.')
}

/// The schemes a configuration name stands for: `ethp` and `prcl` are built
/// in; other names come from the `[schemes]` table.
fn scheme_source(
    path: &Path,
    name: &str,
    table: &BTreeMap<String, PathBuf>,
    rel: &dyn Fn(&Path) -> PathBuf,
) -> Result<Option<(SchemeSource, Vec<Damos>)>, Error> {
    if let Some(file) = table.get(name) {
        let file = rel(file);
        let schemes = udamon_scheme_file::parse_file(&file)
            .map_err(|e| bad(path, format!("[schemes] {name}: {e}")))?;
        if schemes.is_empty() {
            return Err(bad(
                path,
                format!(
                    "[schemes] {name}: {}: no scheme in the file",
                    file.display()
                ),
            ));
        }
        return Ok(Some((SchemeSource::File(file), schemes)));
    }
    let text = match name {
        "ethp" => ETHP,
        "prcl" => PRCL,
        _ => return Ok(None),
    };
    let schemes = udamon_scheme_file::parse(text, name, None)
        .map_err(|e| Error::Other(format!("built-in scheme {name}: {e}")))?;
    Ok(Some((SchemeSource::Builtin(text), schemes)))
}

fn config(
    path: &Path,
    name: &str,
    table: &BTreeMap<String, PathBuf>,
    rel: &dyn Fn(&Path) -> PathBuf,
) -> Result<Config, Error> {
    Ok(match name {
        "orig" => Config::Orig,
        "rec" => Config::Rec,
        "prec" => Config::Prec,
        "thp" => Config::Thp,
        "damo-rec" => Config::DamoRec,
        _ => {
            if let Some(s) = name.strip_prefix("tuned-") {
                let Some((_, schemes)) = scheme_source(path, s, table, rel)? else {
                    return Err(unknown(path, name));
                };
                return Ok(Config::Tuned { schemes });
            }
            if let Some(s) = name.strip_prefix("damo-") {
                let Some((_, schemes)) = scheme_source(path, s, table, rel)? else {
                    return Err(unknown(path, name));
                };
                damo_args(&schemes).map_err(|e| bad(path, format!("config {name:?}: {e}")))?;
                return Ok(Config::DamoSchemes { schemes });
            }
            let Some((file, schemes)) = scheme_source(path, name, table, rel)? else {
                return Err(unknown(path, name));
            };
            Config::Schemes { file, schemes }
        }
    })
}

fn unknown(path: &Path, name: &str) -> Error {
    bad(
        path,
        format!(
            "config {name:?} is unknown: give orig, rec, prec, thp, ethp, prcl, damo-rec, damo-<scheme>, tuned-<scheme>, or a scheme named in [schemes]"
        ),
    )
}

/// damo's command-line options for `schemes`: the access pattern and the
/// action only. Schemes with quotas, watermarks, filters or a target node
/// are refused rather than silently run without them.
pub fn damo_args(schemes: &[Damos]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for (i, s) in schemes.iter().enumerate() {
        if s.quota.is_set()
            || s.watermarks != Default::default()
            || !s.filters.is_empty()
            || s.target_nid.is_some()
        {
            return Err(format!(
                "scheme {i} has quotas, watermarks, filters or a target node, which udamon eval does not pass to damo; give damo an access pattern and an action only"
            ));
        }
        if i > 0 {
            out.push("--damos_scheme".into());
        }
        let p = &s.pattern;
        let pct = |bp: u32| format!("{}", bp as f64 / 100.0);
        out.extend([
            "--damos_action".into(),
            s.action.name().into(),
            "--damos_sz_region".into(),
            p.min_sz.to_string(),
            p.max_sz.to_string(),
            "--damos_access_rate".into(),
            pct(p.min_freq_bp),
            pct(p.max_freq_bp),
            "--damos_age".into(),
            p.min_age_us.to_string(),
            p.max_age_us.to_string(),
        ]);
        if s.apply_interval_us != 0 {
            out.extend([
                "--damos_apply_interval".into(),
                s.apply_interval_us.to_string(),
            ]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Suite, Error> {
        Suite::parse(Path::new("suite.toml"), text)
    }

    #[test]
    fn a_suite_parses_with_its_builtin_configs() {
        let s = parse(
            r#"
            repeats = 2
            configs = ["orig", "rec", "prcl", "damo-prcl", "ethp"]
            [[workload]]
            name = "w"
            run = "true"
            metric = { regex = "([0-9.,]+) ops/s", name = "ops/s" }
            "#,
        )
        .unwrap();
        assert_eq!(s.repeats, 2);
        assert_eq!(s.configs.len(), 5);
        assert!(matches!(s.configs[3].1, Config::DamoSchemes { .. }));
        let Kind::Command {
            metric: Some(m), ..
        } = &s.workloads[0].kind
        else {
            panic!()
        };
        assert_eq!(m.parse("a\n12 ops/s\nb\n1,234.5 ops/s\n"), Some(1234.5));
        assert_eq!(m.parse("none"), None);
    }

    #[test]
    fn bad_suites_name_the_value_and_the_fix() {
        for (text, want) in [
            (r#"configs = ["orig"]"#, "no [[workload]]"),
            ("configs = [\"oops\"]\n[[workload]]\nname = \"w\"\nrun = \"true\"", "\"oops\" is unknown"),
            ("configs = [\"tuned-oops\"]\n[[workload]]\nname = \"w\"\nrun = \"true\"", "\"tuned-oops\" is unknown"),
            ("configs = [\"tuned-prcl\"]\n[tune]\nknob = \"3.min_age\"\n[[workload]]\nname = \"w\"\nrun = \"true\"", "config \"tuned-prcl\": [tune]"),
            ("configs = [\"tuned-prcl\"]\n[tune]\nsamples = 0\n[[workload]]\nname = \"w\"\nrun = \"true\"", "samples = 0"),
            ("configs = [\"tuned-prcl\"]\n[tune]\nbaseline_runs = 0\n[[workload]]\nname = \"w\"\nrun = \"true\"", "baseline_runs = 0"),
            ("configs = [\"tuned-prcl\"]\n[tune]\nknob = \"min_sz\"\n[[workload]]\nname = \"w\"\nrun = \"true\"", "give range"),
            ("configs = [\"orig\"]\n[[workload]]\nname = \"w\"", "give `run`"),
            ("configs = [\"orig\"]\n[[workload]]\nname = \"a b\"\nrun = \"x\"", "letters, digits"),
            ("configs = [\"orig\"]\n[[workload]]\nname = \"w\"\nrun = \"x\"\nmetric = { regex = \"[0-9]+\", name = \"n\" }", "no capture group"),
            ("configs = [\"orig\"]\nrepeats = 0\n[[workload]]\nname = \"w\"\nrun = \"x\"", "repeats = 0"),
            ("configs = [\"orig\"]\nops = \"x\"\n[[workload]]\nname = \"w\"\nrun = \"x\"", "ops = \"x\""),
            ("configs = [\"orig\"]\n[[workload]]\nname = \"w\"\nsim = \"s.toml\"\nsetup = \"x\"", "`setup` is for commands"),
            ("configs = [\"orig\"]\n[[workload]]\nname = \"w\"\nrun = \"x\"\nduration = \"1s\"", "`duration` is for simulated workloads"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn damo_gets_the_pattern_and_the_action() {
        let s = udamon_scheme_file::parse(PRCL, "prcl", None).unwrap();
        let a = damo_args(&s).unwrap().join(" ");
        assert_eq!(
            a,
            format!("--damos_action pageout --damos_sz_region 4096 {} --damos_access_rate 0 0 --damos_age 5000000 {}", u64::MAX, u64::MAX)
        );
        let two = udamon_scheme_file::parse(ETHP, "ethp", None).unwrap();
        assert!(damo_args(&two)
            .unwrap()
            .iter()
            .any(|x| x == "--damos_scheme"));
    }
}
