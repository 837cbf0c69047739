//! The service's config file (TOML, or JSON when it ends in `.json`) and
//! the plan it resolves to: every job's target, path choice, attributes,
//! schemes (with presets expanded and files read) and guardrails. A file
//! that does not resolve is refused whole, naming the key and the fix.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use udamon_core::softdirty::SoftDirtyReset;

use serde::Deserialize;
use udamon_core::schemes::{Action, Damos};
use udamon_core::units::{parse_duration_us, parse_size, Fraction};
use udamon_core::{Attrs, IntervalsGoal, Mode};
use udamon_session::OpsChoice;

use crate::presets;

/// Where the control socket is unless the config says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/udamon/udamon.sock";

/// The smallest `record.max_total`: a record's header and first frames.
const MIN_RECORD_TOTAL: u64 = 64 << 10;

/// The longest path a Unix socket's address holds (`sun_path`, with its
/// terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Refuses a directory to write into under /proc or /sys (the kernel's
/// files, never a place for records), however it is spelt.
fn refuse_kernel_dir(key: &str, dir: &Path) -> Result<(), String> {
    let plain = lexical(dir);
    // Resolve what exists of it too: a symlink elsewhere that lands there.
    let real = dir
        .ancestors()
        .find_map(|a| a.canonicalize().ok().map(|r| (a, r)))
        .map(|(a, r)| r.join(dir.strip_prefix(a).unwrap_or(Path::new(""))));
    for p in std::iter::once(plain).chain(real) {
        if p.starts_with("/proc") || p.starts_with("/sys") || p.starts_with("/dev") {
            return Err(format!(
                "{key} = \"{}\" is under {}: the kernel's files are no place for records; give \
                 a directory such as /var/lib/udamon/JOB",
                dir.display(),
                p.components().take(2).collect::<PathBuf>().display()
            ));
        }
    }
    Ok(())
}

/// `path` with `.` and `..` folded without asking the file system.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The control socket's path from the config, checked: absolute (or
/// relative to the config's directory, like every path in it), never an
/// abstract name, short enough for a socket address.
fn socket_path(raw: Option<&Path>, base: &Path) -> Result<PathBuf, String> {
    let Some(p) = raw else {
        return Ok(PathBuf::from(DEFAULT_SOCKET));
    };
    let shown = p.display();
    if p.as_os_str().is_empty() {
        return Err(
            "socket = \"\": an empty path would bind an abstract socket that any user can \
             reach; give a file path like /run/udamon/udamon.sock"
                .into(),
        );
    }
    if p.as_os_str().as_encoded_bytes().first() == Some(&b'@') || p.to_string_lossy().contains('\0')
    {
        return Err(format!(
            "socket = \"{shown}\": abstract socket names are refused (any user could reach \
             them); give a file path like /run/udamon/udamon.sock"
        ));
    }
    let path = lexical(&base.join(p));
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(format!(
            "socket = \"{shown}\": the path is {} bytes, and a socket's address holds at most \
             {MAX_SOCKET_PATH}; give a shorter one",
            path.as_os_str().len()
        ));
    }
    if path.file_name().is_none() {
        return Err(format!(
            "socket = \"{shown}\": give a file path, like /run/udamon/udamon.sock"
        ));
    }
    refuse_kernel_dir("socket", &path)?;
    Ok(path)
}

/// A config that cannot be used: which file, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {msg}")]
pub struct ConfigError {
    pub file: String,
    pub msg: String,
}

impl ConfigError {
    /// A config is the user's input: always bad input.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        udamon_core::ErrorKind::Usage
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: Option<String>,
    socket: Option<PathBuf>,
    #[serde(default)]
    guardrails: RawGuardrails,
    #[serde(default, alias = "job")]
    jobs: Vec<RawJob>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuardrails {
    psi_pause_above: Option<f64>,
    psi_resume_below: Option<f64>,
    max_bytes_per_second: Option<SizeOrNumber>,
    max_rss_share_per_minute: Option<f64>,
    dry_run: Option<bool>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum SizeOrNumber {
    Number(u64),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: String,
    target: toml::Value,
    #[serde(default)]
    ops: OpsChoice,
    /// As record's --softdirty-reset.
    softdirty_reset: Option<String>,
    #[serde(default)]
    attrs: RawAttrs,
    #[serde(default)]
    schemes: Vec<RawSchemeSource>,
    record: Option<RawRecord>,
    #[serde(default)]
    guardrails: RawGuardrails,
    #[serde(default)]
    optional: bool,
    /// A process set's per-process metric series: the processes with the
    /// largest working sets, this many; the others are summed.
    top_processes: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAttrs {
    sample: Option<String>,
    aggr: Option<String>,
    update: Option<String>,
    min_regions: Option<u32>,
    max_regions: Option<u32>,
    auto_intervals: Option<bool>,
    /// "kernel" (the default) or "enhanced", as the commands' --mode.
    mode: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchemeSource {
    preset: Option<String>,
    file: Option<PathBuf>,
    inline: Option<String>,
    // Options of preset tiering (the seed's defaults when left out).
    /// Free memory the demotion keeps on the upper node ("0.5%").
    free: Option<String>,
    /// Use of the upper node the promotion aims at ("99.7%").
    used: Option<String>,
    /// Bytes each scheme may migrate per second ("200M").
    rate: Option<SizeOrNumber>,
    /// "temporal" (the default: full speed until the goal is met; Linux
    /// 7.1+ on kernel DAMON), "consist" (the kernel's feedback loop, the
    /// seed's) or "fast" (udamon's engine only).
    goal_tuner: Option<String>,
    /// Switch the kernel's reclaim-time demotion on while the job runs
    /// (`/sys/kernel/mm/numa/demotion_enabled`), as a backstop when
    /// promotion races allocation; restored at the end. Default true.
    backstop: Option<bool>,
}

impl RawSchemeSource {
    /// Whether it gives any of preset tiering's options.
    fn has_tiering_options(&self) -> bool {
        self.free.is_some()
            || self.used.is_some()
            || self.rate.is_some()
            || self.goal_tuner.is_some()
            || self.backstop.is_some()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    dir: PathBuf,
    rotate: Option<String>,
    max_total: Option<SizeOrNumber>,
}

/// What a job watches.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetPlan {
    Pid(u32),
    /// Every process whose command name (`/proc/PID/comm`) is this.
    Comm(String),
    /// Every process whose command line (words joined by spaces) matches.
    Cmdline(String),
    /// Every process in this cgroup v2 directory (`cgroup.procs`).
    Cgroup(PathBuf),
    /// The physical address space.
    Paddr,
    /// One NUMA node's memory.
    Node(u32),
    /// A simulated workload.
    Sim {
        path: PathBuf,
        spec_text: String,
        speed: Option<f64>,
        seed: Option<u64>,
    },
}

impl TargetPlan {
    /// How the target reads in logs, status and metrics.
    pub fn label(&self) -> String {
        match self {
            TargetPlan::Pid(p) => format!("pid {p}"),
            TargetPlan::Comm(c) => format!("comm {c}"),
            TargetPlan::Cmdline(r) => format!("cmdline ~ {r}"),
            TargetPlan::Cgroup(p) => format!("cgroup {}", p.display()),
            TargetPlan::Paddr => "physical memory".into(),
            TargetPlan::Node(n) => format!("node {n}"),
            TargetPlan::Sim { path, .. } => format!("sim {}", path.display()),
        }
    }

    /// Whether processes are followed as they come and go.
    pub fn is_set(&self) -> bool {
        matches!(
            self,
            TargetPlan::Comm(_) | TargetPlan::Cmdline(_) | TargetPlan::Cgroup(_)
        )
    }
}

/// Guardrails of one job (the global ones with the job's overrides).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Guardrails {
    /// Pause every action while memory pressure (PSI `some` avg10, %) is
    /// above this...
    pub psi_pause_above: Option<f64>,
    /// ...and resume once it is below this.
    pub psi_resume_below: f64,
    /// Bytes per second each acting scheme may act on (a size quota).
    pub max_bytes_per_second: Option<u64>,
    /// Share of the target's resident set that may be paged out per
    /// minute.
    pub max_rss_share_per_minute: Option<f64>,
    /// Every action becomes a count of what it would have done.
    pub dry_run: bool,
}

/// Recording of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordPlan {
    pub dir: PathBuf,
    pub rotate_us: u64,
    pub max_total_bytes: u64,
}

/// One job, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct JobPlan {
    pub name: String,
    pub target: TargetPlan,
    pub ops: OpsChoice,
    /// When the soft-dirty path resets the bits (as record's
    /// --softdirty-reset).
    pub softdirty_reset: SoftDirtyReset,
    pub attrs: Attrs,
    /// The schemes as the config gives them.
    pub schemes: Vec<Damos>,
    /// Where each scheme came from ("preset reclaim", "file x.toml",
    /// "inline").
    pub scheme_origins: Vec<String>,
    pub record: Option<RecordPlan>,
    pub guardrails: Guardrails,
    /// Switch the kernel's reclaim-time demotion on while the job runs
    /// (preset tiering's backstop).
    pub demotion_backstop: bool,
    /// A job this machine cannot run is skipped with a warning instead of
    /// stopping the service's start (`optional = true`).
    pub optional: bool,
    /// The files the job reads its orders from, with what each is
    /// ("scheme file", "workload spec"), checked like the config when the
    /// service runs as root.
    pub inputs: Vec<(PathBuf, &'static str)>,
    /// A process set's processes with a metric series of their own (the
    /// largest working sets); the rest are summed into one.
    pub top_processes: u32,
}

/// `top_processes` when the config leaves it out.
pub const TOP_PROCESSES: u32 = 10;
/// At most this many per-process series per job.
pub const MAX_TOP_PROCESSES: u32 = 1000;

impl JobPlan {
    /// The schemes as they run: each acting scheme's size quota limited by
    /// `max_bytes_per_second`.
    pub fn effective_schemes(&self) -> Vec<Damos> {
        crate::guard::cap_quotas(&self.schemes, self.guardrails.max_bytes_per_second)
    }

    /// For each scheme, whether the byte-rate guardrail is what limits its
    /// quota (its quota exceeds are then the guardrail's trips).
    pub fn capped_by_rate(&self) -> Vec<bool> {
        self.schemes
            .iter()
            .zip(&self.effective_schemes())
            .map(|(s, e)| crate::guard::capped_by_rate(s, e))
            .collect()
    }

    /// Whether a change from `old` can be applied to running sessions
    /// (same target and path), rather than restarting the job.
    pub fn same_sessions(&self, old: &JobPlan) -> bool {
        self.target == old.target
            && self.ops == old.ops
            && self.softdirty_reset == old.softdirty_reset
    }
}

/// A whole config, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub file: PathBuf,
    pub listen: Option<SocketAddr>,
    pub socket: PathBuf,
    pub jobs: Vec<JobPlan>,
}

impl Plan {
    /// The files the service takes orders from: the config, then each
    /// job's scheme files and workload specs.
    pub fn files(&self) -> Vec<(&Path, &'static str)> {
        let mut out = vec![(self.file.as_path(), "config")];
        for j in &self.jobs {
            out.extend(j.inputs.iter().map(|(p, what)| (p.as_path(), *what)));
        }
        out
    }

    /// Reads and resolves `path`.
    pub fn load(path: &Path) -> Result<Plan, ConfigError> {
        Self::load_on(path, Path::new("/"))
    }

    /// Reads and resolves `path` for the machine under `root` (the tiering
    /// preset reads its topology there).
    pub fn load_on(path: &Path, root: &Path) -> Result<Plan, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.display().to_string(),
            msg: format!("cannot read it: {e}"),
        })?;
        Self::parse_on(&text, path, root)
    }

    /// Resolves a config's text; `path` names it in errors and anchors the
    /// relative paths inside it.
    pub fn parse(text: &str, path: &Path) -> Result<Plan, ConfigError> {
        Self::parse_on(text, path, Path::new("/"))
    }

    /// [`parse`](Self::parse) for the machine under `root`.
    pub fn parse_on(text: &str, path: &Path, root: &Path) -> Result<Plan, ConfigError> {
        let err = |msg: String| ConfigError {
            file: path.display().to_string(),
            msg,
        };
        let raw: RawConfig = if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_str(text).map_err(|e| err(e.to_string()))?
        } else {
            toml::from_str(text).map_err(|e| {
                let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
                err(format!("line {line}, column {col}: {}", e.message()))
            })?
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let listen = match &raw.listen {
            None => None,
            Some(l) => Some(l.parse::<SocketAddr>().map_err(|_| {
                err(format!(
                    "listen = \"{l}\" is not an address and port (like \"127.0.0.1:9788\")"
                ))
            })?),
        };
        if raw.jobs.is_empty() {
            return Err(err(
                "no jobs: add a [[jobs]] table with a name, a target and schemes".into(),
            ));
        }
        let mut jobs = Vec::new();
        for (i, j) in raw.jobs.iter().enumerate() {
            let job = resolve_job(j, &raw.guardrails, base, root).map_err(|m| {
                let name = if j.name.is_empty() {
                    format!("jobs[{i}]")
                } else {
                    format!("job \"{}\"", j.name)
                };
                err(format!("{name}: {m}"))
            })?;
            if jobs.iter().any(|o: &JobPlan| o.name == job.name) {
                return Err(err(format!(
                    "two jobs are named \"{}\": give each a name of its own",
                    job.name
                )));
            }
            jobs.push(job);
        }
        Ok(Plan {
            file: path.to_path_buf(),
            listen,
            socket: socket_path(
                raw.socket.as_deref(),
                &std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf()),
            )
            .map_err(err)?,
            jobs,
        })
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

fn duration(key: &str, v: &str) -> Result<u64, String> {
    parse_duration_us(v, Fraction::Round).map_err(|e| format!("{key}: {e}"))
}

fn size(key: &str, v: &SizeOrNumber) -> Result<u64, String> {
    match v {
        SizeOrNumber::Number(n) => Ok(*n),
        SizeOrNumber::Text(s) => parse_size(s, Fraction::Round).map_err(|e| format!("{key}: {e}")),
    }
}

fn guardrails(global: &RawGuardrails, job: &RawGuardrails) -> Result<Guardrails, String> {
    let pick = |a: &Option<f64>, b: &Option<f64>| b.or(*a);
    let above = pick(&global.psi_pause_above, &job.psi_pause_above);
    let below = pick(&global.psi_resume_below, &job.psi_resume_below);
    if let Some(a) = above {
        if !(0.0..=100.0).contains(&a) {
            return Err(format!(
                "guardrails.psi_pause_above = {a}: give a percentage of time stalled, 0 to 100"
            ));
        }
    }
    if above == Some(0.0) {
        return Err(
            "guardrails.psi_pause_above = 0: pressure never falls below 0, so the job would \
             never resume; give a percentage above 0 (like 40)"
                .into(),
        );
    }
    if let Some(b) = below {
        // Resuming needs a pressure below the threshold, and pressure is
        // never below 0: at 0 or under, a paused job would stay paused.
        if !(b > 0.0 && b <= 100.0) {
            return Err(format!(
                "guardrails.psi_resume_below = {b}: give a percentage of time stalled above 0 \
                 and at most 100 (at 0 or below, a paused job would never resume)"
            ));
        }
    }
    let below = match (above, below) {
        (Some(a), Some(b)) if b > a => {
            return Err(format!(
                "guardrails.psi_resume_below = {b} is above psi_pause_above = {a}: resuming \
                 needs less pressure than pausing"
            ))
        }
        (Some(a), None) => a / 2.0,
        (_, b) => b.unwrap_or(0.0),
    };
    let bps = match job
        .max_bytes_per_second
        .as_ref()
        .or(global.max_bytes_per_second.as_ref())
    {
        None => None,
        Some(v) => match size("guardrails.max_bytes_per_second", v)? {
            0 => {
                return Err(
                    "guardrails.max_bytes_per_second = 0 would stop every action: \
                            use dry_run = true for that"
                        .into(),
                )
            }
            n => Some(n),
        },
    };
    let share = pick(
        &global.max_rss_share_per_minute,
        &job.max_rss_share_per_minute,
    );
    if let Some(s) = share {
        if !(s > 0.0 && s <= 1.0) {
            return Err(format!(
                "guardrails.max_rss_share_per_minute = {s}: give a share of the resident set \
                 above 0 and at most 1 (0.05 is 5%)"
            ));
        }
    }
    Ok(Guardrails {
        psi_pause_above: above,
        psi_resume_below: below,
        max_bytes_per_second: bps,
        max_rss_share_per_minute: share,
        dry_run: job.dry_run.or(global.dry_run).unwrap_or(false),
    })
}

fn attrs(a: &RawAttrs) -> Result<Attrs, String> {
    let d = Attrs::default();
    let sample_us = a
        .sample
        .as_deref()
        .map_or(Ok(d.sample_us), |v| duration("attrs.sample", v))?;
    let mut attrs = Attrs {
        sample_us,
        aggr_us: a
            .aggr
            .as_deref()
            .map_or(Ok(d.aggr_us), |v| duration("attrs.aggr", v))?,
        update_us: a
            .update
            .as_deref()
            .map_or(Ok(d.update_us), |v| duration("attrs.update", v))?,
        min_nr_regions: a.min_regions.unwrap_or(d.min_nr_regions),
        max_nr_regions: a.max_regions.unwrap_or(d.max_nr_regions),
        intervals_goal: IntervalsGoal::default(),
        mode: match &a.mode {
            None => Mode::Kernel,
            Some(m) => m
                .parse()
                .map_err(|e| format!("attrs.mode = \"{m}\": {e}"))?,
        },
    };
    if a.auto_intervals == Some(true) {
        // The kernel's recommended goal: 4% of the maximum accesses.
        attrs.intervals_goal = IntervalsGoal::recommended(400, sample_us);
    }
    attrs.validate().map_err(|e| format!("attrs: {e}"))?;
    Ok(attrs)
}

/// The job's target, and for a simulated one its workload, parsed once
/// (the bound on its cost is checked once the attributes are known).
fn target(
    v: &toml::Value,
    base: &Path,
) -> Result<(TargetPlan, Option<udamon_sim::Workload>), String> {
    const FORMS: &str = "give target = { pid = N }, { comm = \"NAME\" }, { cmdline = \"REGEX\" }, \
                         { cgroup = \"/sys/fs/cgroup/PATH\" }, { node = N }, { sim = \"SPEC.toml\" } \
                         or \"paddr\"";
    if let Some(s) = v.as_str() {
        return match s {
            "paddr" => Ok((TargetPlan::Paddr, None)),
            _ => Err(format!("target = \"{s}\": {FORMS}")),
        };
    }
    let Some(t) = v.as_table() else {
        return Err(format!("target: {FORMS}"));
    };
    let kinds: Vec<&str> = ["pid", "comm", "cmdline", "cgroup", "node", "sim"]
        .into_iter()
        .filter(|k| t.contains_key(*k))
        .collect();
    if kinds.len() != 1 {
        return Err(format!(
            "target has {}: {FORMS}",
            if kinds.is_empty() {
                "none of pid, comm, cmdline, cgroup, node, sim".to_string()
            } else {
                format!("{} at once", kinds.join(" and "))
            }
        ));
    }
    let allowed: &[&str] = match kinds[0] {
        "sim" => &["sim", "speed", "seed"],
        k => &[k][..],
    };
    if let Some(k) = t.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "target key \"{k}\" does not go with {} (keys here: {})",
            kinds[0],
            allowed.join(", ")
        ));
    }
    let text = |k: &str| target_text(t, k);
    match kinds[0] {
        "pid" => match t["pid"].as_integer() {
            Some(p) if p > 0 && p <= i64::from(i32::MAX) => Ok((TargetPlan::Pid(p as u32), None)),
            _ => Err(format!("target.pid = {}: give a process id", t["pid"])),
        },
        "node" => match t["node"].as_integer() {
            Some(n) if (0..=4096).contains(&n) => Ok((TargetPlan::Node(n as u32), None)),
            _ => Err(format!("target.node = {}: give a NUMA node id", t["node"])),
        },
        "comm" => {
            let c = text("comm")?;
            if c.is_empty() || c.len() > 15 {
                return Err(format!(
                    "target.comm = \"{c}\": a command name has 1 to 15 characters (the \
                     kernel's comm, as `ps -o comm` shows it); match longer command lines \
                     with cmdline = \"REGEX\""
                ));
            }
            Ok((TargetPlan::Comm(c), None))
        }
        "cmdline" => {
            let r = text("cmdline")?;
            regex::Regex::new(&r).map_err(|e| format!("target.cmdline: {e}"))?;
            Ok((TargetPlan::Cmdline(r), None))
        }
        "cgroup" => {
            let p = PathBuf::from(text("cgroup")?);
            if !p.is_absolute() {
                return Err(format!(
                    "target.cgroup = \"{}\": give the cgroup's absolute directory, like \
                     /sys/fs/cgroup/system.slice/redis.service",
                    p.display()
                ));
            }
            Ok((TargetPlan::Cgroup(p), None))
        }
        _ => sim_target(t, base),
    }
}

/// A target table's string `k`.
fn target_text(t: &toml::Table, k: &str) -> Result<String, String> {
    t[k].as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("target.{k} must be a string"))
}

/// A simulated target: its spec read and parsed (relative to `base`), its
/// speed and seed.
fn sim_target(
    t: &toml::Table,
    base: &Path,
) -> Result<(TargetPlan, Option<udamon_sim::Workload>), String> {
    let path = base.join(target_text(t, "sim")?);
    let spec_text = std::fs::read_to_string(&path)
        .map_err(|e| format!("target.sim: cannot read {}: {e}", path.display()))?;
    let workload = udamon_sim::Workload::from_toml(&spec_text, &path.display().to_string())
        .map_err(|e| format!("target.sim: {e}"))?;
    let speed = match t.get("speed") {
        None => Some(1.0),
        Some(v) => match v.as_float().or_else(|| v.as_integer().map(|i| i as f64)) {
            Some(s) if s > 0.0 && s.is_finite() => Some(s),
            Some(_) | None if v.as_str() == Some("max") => None,
            _ => {
                return Err(format!(
                    "target.speed = {v}: give simulated seconds per real second (1 is \
                     real time), or \"max\" to run as fast as it goes"
                ))
            }
        },
    };
    let seed = match t.get("seed") {
        None => None,
        Some(v) => Some(
            v.as_integer()
                .filter(|s| *s >= 0)
                .ok_or_else(|| format!("target.seed = {v}: give a whole number"))?
                as u64,
        ),
    };
    Ok((
        TargetPlan::Sim {
            path,
            spec_text,
            speed,
            seed,
        },
        Some(workload),
    ))
}

/// Where a job's tiering preset comes from: the machine's topology (under
/// the root) and the address space its target has.
struct TieringCtx<'a> {
    root: &'a Path,
    target: &'a TargetPlan,
}

/// A percentage ("0.5%", "99.7") in basis points.
fn percent_bp(key: &str, v: &str) -> Result<u64, String> {
    let n: f64 = v
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("{key} = \"{v}\": give a percentage, like \"0.5%\""))?;
    if !(0.0..=100.0).contains(&n) {
        return Err(format!(
            "{key} = \"{v}\": give a percentage from 0% to 100%"
        ));
    }
    Ok((n * 100.0).round() as u64)
}

fn tiering(ctx: &TieringCtx, o: &RawSchemeSource) -> Result<Vec<Damos>, String> {
    use udamon_core::schemes::GoalTuner;
    use udamon_session::topology::{discover, tiering_schemes, Space, TieringParams};
    let d = TieringParams::default();
    let p = TieringParams {
        free_bp: o
            .free
            .as_deref()
            .map_or(Ok(d.free_bp), |v| percent_bp("free", v))?,
        used_bp: o
            .used
            .as_deref()
            .map_or(Ok(d.used_bp), |v| percent_bp("used", v))?,
        bytes_per_s: o
            .rate
            .as_ref()
            .map_or(Ok(d.bytes_per_s), |v| size("rate", v))?,
        tuner: match o.goal_tuner.as_deref() {
            None => d.tuner,
            Some(t) => GoalTuner::from_name(t).ok_or_else(|| {
                format!(
                    "goal_tuner = \"{t}\": give \"temporal\" (the default), \"consist\" or \
                     \"fast\" (udamon's engine only)"
                )
            })?,
        },
    };
    if p.free_bp + p.used_bp < 10_000 {
        return Err(format!(
            "free = {}% and used = {}% leave a gap: demotion would stop before promotion \
             starts; make them overlap (the seed: 0.5% and 99.7%)",
            p.free_bp as f64 / 100.0,
            p.used_bp as f64 / 100.0
        ));
    }
    let space = match ctx.target {
        TargetPlan::Paddr => Space::Physical,
        TargetPlan::Pid(_)
        | TargetPlan::Comm(_)
        | TargetPlan::Cmdline(_)
        | TargetPlan::Cgroup(_) => Space::Virtual,
        TargetPlan::Node(_) => {
            return Err(
                "preset tiering moves memory between nodes: give it target = \"paddr\" \
                        (both nodes' memory) or processes, not one node"
                    .into(),
            )
        }
        TargetPlan::Sim { .. } => {
            return Err(
                "preset tiering reads this machine's NUMA topology, not a simulated one: \
                        give it a live target"
                    .into(),
            )
        }
    };
    tiering_schemes(&discover(ctx.root), space, &p).map_err(|e| format!("preset tiering: {e}"))
}

fn schemes(
    sources: &[RawSchemeSource],
    base: &Path,
    ctx: &TieringCtx,
) -> Result<(Vec<Damos>, Vec<String>), String> {
    let mut all = Vec::new();
    let mut origins = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let (list, origin) = match (&s.preset, &s.file, &s.inline) {
            (Some(p), None, None) if p == "tiering" => (tiering(ctx, s)?, "preset tiering".into()),
            _ if s.has_tiering_options() => {
                return Err(format!(
                    "schemes[{i}]: free, used, rate, goal_tuner and backstop are options of \
                     preset = \"tiering\""
                ))
            }
            (Some(p), None, None) => (presets::get(p)?, format!("preset {p}")),
            (None, Some(f), None) => {
                let path = base.join(f);
                let list = udamon_scheme_file::parse_file(&path)
                    .map_err(|e| format!("schemes[{i}]: {e}"))?;
                (list, format!("file {}", path.display()))
            }
            (None, None, Some(text)) => {
                let list = udamon_scheme_file::parse(text, &format!("schemes[{i}].inline"), None)
                    .map_err(|e| format!("schemes[{i}]: {e}"))?;
                (list, "inline".to_string())
            }
            _ => {
                return Err(format!(
                    "schemes[{i}]: give exactly one of preset = \"NAME\" ({}), file = \"PATH\" \
                     or inline = \"SCHEME\"",
                    presets::NAMES.join(", ")
                ))
            }
        };
        if list.is_empty() {
            return Err(format!("schemes[{i}] ({origin}) holds no scheme"));
        }
        origins.extend(std::iter::repeat_n(origin, list.len()));
        all.extend(list);
    }
    Ok((all, origins))
}

fn resolve_job(
    j: &RawJob,
    global: &RawGuardrails,
    base: &Path,
    root: &Path,
) -> Result<JobPlan, String> {
    let ok_name = !j.name.is_empty()
        && j.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok_name {
        return Err(format!(
            "name = \"{}\": use letters, digits, '-', '_' and '.' (it names metrics' job label \
             and record files)",
            j.name
        ));
    }
    let (target, workload) = target(&j.target, base)?;
    if matches!(target, TargetPlan::Sim { .. }) && j.ops != OpsChoice::Auto {
        return Err(format!(
            "ops = \"{}\" names a live path; a simulated target runs on udamon's engine (leave \
             ops out)",
            j.ops.name()
        ));
    }
    let mut attrs = attrs(&j.attrs)?;
    let ctx = TieringCtx {
        root,
        target: &target,
    };
    let (schemes, scheme_origins) = schemes(&j.schemes, base, &ctx)?;
    let mut inputs: Vec<(PathBuf, &'static str)> = j
        .schemes
        .iter()
        .filter_map(|s| s.file.as_ref().map(|f| (base.join(f), "scheme file")))
        .collect();
    if let TargetPlan::Sim { path, .. } = &target {
        inputs.push((path.clone(), "workload spec"));
    }
    // The seed's tiering runs with interval auto-tuning; say
    // auto_intervals = false to turn it off.
    if j.attrs.auto_intervals.is_none() && scheme_origins.iter().any(|o| o == "preset tiering") {
        attrs = self::attrs(&RawAttrs {
            auto_intervals: Some(true),
            ..j.attrs.clone()
        })?;
    }
    // The simulator's own bound on what a run may cost, checked as `record
    // --sim` checks it: a config that passes starts.
    if let Some(w) = &workload {
        udamon_sim::check_bounds(w, &attrs).map_err(|e| format!("attrs: {e}"))?;
    }
    if matches!(target, TargetPlan::Paddr | TargetPlan::Node(_)) && j.ops == OpsChoice::Softdirty {
        return Err(
            "ops = \"softdirty\" watches processes; physical memory needs kdamond or \
                    idle"
                .into(),
        );
    }
    let softdirty_reset = softdirty_reset(j, &target)?;
    let record = match &j.record {
        None => None,
        Some(r) => Some(record_plan(r, base)?),
    };
    let guardrails = guardrails(global, &j.guardrails)?;
    if guardrails.max_rss_share_per_minute.is_some()
        && matches!(
            target,
            TargetPlan::Paddr | TargetPlan::Node(_) | TargetPlan::Sim { .. }
        )
    {
        return Err(
            "guardrails.max_rss_share_per_minute needs process targets (a resident \
                    set to take a share of)"
                .into(),
        );
    }
    let top_processes = top_processes(j, &target)?;
    Ok(JobPlan {
        name: j.name.clone(),
        target,
        ops: j.ops,
        softdirty_reset,
        attrs,
        schemes,
        scheme_origins,
        record,
        guardrails,
        demotion_backstop: j
            .schemes
            .iter()
            .any(|s| s.preset.as_deref() == Some("tiering") && s.backstop != Some(false)),
        optional: j.optional,
        inputs,
        top_processes,
    })
}

/// A job's `top_processes`: for process sets, at most
/// [`MAX_TOP_PROCESSES`].
fn top_processes(j: &RawJob, target: &TargetPlan) -> Result<u32, String> {
    let Some(n) = j.top_processes else {
        return Ok(TOP_PROCESSES);
    };
    if !target.is_set() {
        return Err(format!(
            "top_processes = {n}: only a process set (comm, cmdline, cgroup) has several \
             processes; remove it"
        ));
    }
    if n > MAX_TOP_PROCESSES {
        return Err(format!(
            "top_processes = {n}: at most {MAX_TOP_PROCESSES} (each is a metric series; the \
             other processes are summed into one)"
        ));
    }
    Ok(n)
}

/// A job's `softdirty_reset`, refused when the job never takes the
/// soft-dirty path.
fn softdirty_reset(j: &RawJob, target: &TargetPlan) -> Result<SoftDirtyReset, String> {
    let softdirty_reset: SoftDirtyReset = match &j.softdirty_reset {
        None => SoftDirtyReset::default(),
        Some(v) => v
            .parse()
            .map_err(|e| format!("softdirty_reset = \"{v}\": {e}"))?,
    };
    let phys = matches!(target, TargetPlan::Paddr | TargetPlan::Node(_));
    if softdirty_reset.per_window() && !j.ops.may_take_softdirty(phys) {
        return Err(format!(
            "softdirty_reset = \"{softdirty_reset}\" applies to the soft-dirty path, which this \
             job never takes (ops = \"{}\"{}): leave it out",
            j.ops.name(),
            if phys { ", physical memory" } else { "" }
        ));
    }
    Ok(softdirty_reset)
}

/// A job's `[jobs.record]`: the directory (relative to `base`), the
/// rotation period and the total the job's records may take.
fn record_plan(r: &RawRecord, base: &Path) -> Result<RecordPlan, String> {
    let rotate_us = r
        .rotate
        .as_deref()
        .map_or(Ok(3_600_000_000), |v| duration("record.rotate", v))?;
    if rotate_us < 1_000_000 {
        return Err("record.rotate: give at least 1s".into());
    }
    let max_total_bytes = r
        .max_total
        .as_ref()
        .map_or(Ok(1 << 30), |v| size("record.max_total", v))?;
    if max_total_bytes < MIN_RECORD_TOTAL {
        return Err(format!(
            "record.max_total = {max_total_bytes} bytes: the job's records could not \
             hold one file; give at least 64K (like \"1G\"), or leave [jobs.record] out"
        ));
    }
    let dir = base.join(&r.dir);
    refuse_kernel_dir("record.dir", &dir)?;
    Ok(RecordPlan {
        dir,
        rotate_us,
        max_total_bytes,
    })
}

/// Whether a scheme changes memory (everything but `stat`).
pub fn acts(s: &Damos) -> bool {
    s.action != Action::Stat
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Plan, ConfigError> {
        Plan::parse(text, Path::new("/etc/udamon/udamon.toml"))
    }

    #[test]
    fn a_complete_config_resolves() {
        let p = parse(
            r#"
listen = "127.0.0.1:9788"
[guardrails]
psi_pause_above = 40
max_bytes_per_second = "64M"
[[jobs]]
name = "db"
target = { comm = "redis-server" }
schemes = [{ preset = "reclaim" }, { inline = "2M max 5% max min max hugepage" }]
[jobs.attrs]
aggr = "200ms"
auto_intervals = true
[jobs.guardrails]
dry_run = true
[[jobs]]
name = "all"
target = "paddr"
ops = "kdamond"
schemes = [{ preset = "lru_sort" }]
"#,
        )
        .unwrap();
        assert_eq!(p.listen.unwrap().port(), 9788);
        assert_eq!(p.socket, Path::new(DEFAULT_SOCKET));
        let db = &p.jobs[0];
        assert_eq!(db.target, TargetPlan::Comm("redis-server".into()));
        assert_eq!(db.attrs.aggr_us, 200_000);
        assert_eq!(db.attrs.intervals_goal.access_bp, 400);
        assert_eq!(db.schemes.len(), 2);
        assert_eq!(db.scheme_origins[0], "preset reclaim");
        let g = &db.guardrails;
        assert_eq!(g.psi_pause_above, Some(40.0));
        assert_eq!(g.psi_resume_below, 20.0);
        assert_eq!(g.max_bytes_per_second, Some(64 << 20));
        assert!(g.dry_run);
        assert!(!p.jobs[1].guardrails.dry_run);
        assert_eq!(p.jobs[1].target, TargetPlan::Paddr);
        let n =
            parse("[[jobs]]\nname = \"slow\"\ntarget = { node = 1 }\nops = \"idle\"\n").unwrap();
        assert_eq!(n.jobs[0].target, TargetPlan::Node(1));
    }

    #[test]
    fn preset_tiering_takes_its_options_and_refuses_a_gap() {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, t: &str| {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w("sys/devices/system/node/online", "0-1\n");
        w("sys/devices/system/node/node0/cpulist", "0\n");
        for n in 0..2 {
            w(
                &format!("sys/devices/system/node/node{n}/meminfo"),
                &format!("Node {n} MemTotal: 1024 kB\nNode {n} MemFree: 512 kB\n"),
            );
        }
        let cfg = |opts: &str| {
            format!(
                "[[jobs]]\nname = \"t\"\ntarget = {{ pid = 1 }}\nschemes = [{{ preset = \"tiering\"{opts} }}]\n"
            )
        };
        let at = Path::new("/etc/u.toml");
        let p = Plan::parse_on(&cfg(", goal_tuner = \"consist\", free = \"1%\", used = \"99.5%\", rate = \"64M\", backstop = false"), at, d.path()).unwrap();
        let j = &p.jobs[0];
        assert_eq!(j.schemes.len(), 2);
        assert_eq!(j.schemes[0].quota.goals[0].target_value, 100);
        assert_eq!(j.schemes[1].quota.goals[0].target_value, 9_950);
        assert_eq!(j.schemes[0].quota.sz, 64 << 20);
        assert_eq!(
            j.schemes[0].quota.goal_tuner,
            udamon_core::schemes::GoalTuner::Consist
        );
        assert!(!j.demotion_backstop);
        assert_eq!(j.attrs.intervals_goal.access_bp, 400);
        let default = Plan::parse_on(&cfg(""), at, d.path()).unwrap();
        assert!(default.jobs[0].demotion_backstop);
        assert_eq!(
            default.jobs[0].schemes[0].quota.goal_tuner,
            udamon_core::schemes::GoalTuner::Temporal
        );
        let e =
            Plan::parse_on(&cfg(", free = \"0.1%\", used = \"99%\""), at, d.path()).unwrap_err();
        assert!(e.to_string().contains("leave a gap"), "{e}");
        let e = Plan::parse_on(
            "[[jobs]]\nname = \"t\"\ntarget = \"paddr\"\nschemes = [{ preset = \"reclaim\", rate = \"1M\" }]\n",
            at,
            d.path(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("options of preset = \"tiering\""),
            "{e}"
        );
    }

    #[test]
    fn a_sim_job_beyond_the_simulators_bound_is_refused_naming_the_value() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("demo.toml"), udamon_sim::DEMO_SPEC).unwrap();
        let cfg = d.path().join("u.toml");
        let text = |attrs: &str| {
            format!(
                "[[jobs]]\nname = \"s\"\ntarget = {{ sim = \"demo.toml\" }}\n[jobs.attrs]\n{attrs}"
            )
        };
        // What aborted the service (a 4 GiB allocation in the model).
        let e = Plan::parse(
            &text("sample = \"1000000h\"\naggr = \"2000000h\"\nupdate = \"2000000h\"\n"),
            &cfg,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("job \"s\": attrs: sampling interval 1000000h"),
            "{e}"
        );
        Plan::parse(&text("sample = \"10ms\"\n"), &cfg).unwrap();
    }

    #[test]
    fn softdirty_reset_is_taken_and_a_changed_one_restarts_the_job() {
        let text = |r: &str| {
            format!(
                "[[jobs]]\nname = \"a\"\ntarget = {{ comm = \"x\" }}\nsoftdirty_reset = \"{r}\""
            )
        };
        let auto = parse(&text("auto")).unwrap();
        assert_eq!(auto.jobs[0].softdirty_reset, SoftDirtyReset::Auto);
        let every4 = parse(&text("windows:4")).unwrap();
        assert_eq!(every4.jobs[0].softdirty_reset, SoftDirtyReset::Windows(4));
        assert!(!every4.jobs[0].same_sessions(&auto.jobs[0]));
        let plain = parse("[[jobs]]\nname = \"a\"\ntarget = { comm = \"x\" }").unwrap();
        assert_eq!(plain.jobs[0].softdirty_reset, SoftDirtyReset::Sample);
    }

    #[test]
    fn mistakes_are_named_with_their_fix() {
        let cases = [
            ("", "no jobs"),
            ("[[jobs]]\nname = \"a\"\ntarget = { pid = 1, comm = \"x\" }", "pid and comm at once"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"everything\"", "give target = "),
            ("[[jobs]]\nname = \"a b\"\ntarget = \"paddr\"", "use letters"),
            (
                "[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[[jobs]]\nname = \"a\"\ntarget = \"paddr\"",
                "two jobs are named",
            ),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\nschemes = [{ preset = \"fast\" }]", "reclaim"),
            ("[[jobs]]\nname = \"a\"\ntarget = { cmdline = \"(\" }", "target.cmdline"),
            ("[[jobs]]\nname = \"a\"\ntarget = { node = -1 }", "NUMA node id"),
            ("[[jobs]]\nname = \"a\"\ntarget = { node = 0 }\nops = \"softdirty\"", "watches processes"),
            ("[[jobs]]\nname = \"a\"\ntarget = { pid = 1 }\nsoftdirty_reset = \"often\"", "windows:N"),
            (
                "[[jobs]]\nname = \"a\"\ntarget = { pid = 1 }\nops = \"idle\"\nsoftdirty_reset = \"auto\"",
                "applies to the soft-dirty path",
            ),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\nsoftdirty_reset = \"window\"", "physical memory"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.attrs]\nsample = \"5\"", "attrs.sample"),
            ("listen = \"localhost\"\n[[jobs]]\nname = \"a\"\ntarget = \"paddr\"", "address and port"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.guardrails]\npsi_pause_above = 10\npsi_resume_below = 20", "resuming"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.guardrails]\npsi_pause_above = 10\npsi_resume_below = -5", "psi_resume_below = -5"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.guardrails]\npsi_pause_above = 10\npsi_resume_below = nan", "psi_resume_below = NaN"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.guardrails]\npsi_pause_above = 10\npsi_resume_below = 0", "never resume"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.guardrails]\npsi_pause_above = 0", "never resume"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.attrs]\nupdate = \"0s\"", "ops update interval 0us"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.record]\ndir = \"r\"\nmax_total = 0", "record.max_total = 0"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\n[jobs.record]\ndir = \"/proc/1\"", "under /proc"),
            ("socket = \"\"\n[[jobs]]\nname = \"a\"\ntarget = \"paddr\"", "abstract socket"),
            ("socket = \"@x\"\n[[jobs]]\nname = \"a\"\ntarget = \"paddr\"", "abstract socket"),
            ("[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\nbogus = 1", "line 4"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.starts_with("/etc/udamon/udamon.toml: "), "{e}");
        }
        // Several jobs on kernel DAMON: each gets a kdamond of the set.
        let two = "[[jobs]]\nname = \"a\"\ntarget = \"paddr\"\nops = \"kdamond\"\n\
                   [[jobs]]\nname = \"b\"\ntarget = { pid = 1 }\nops = \"kdamond\"";
        assert_eq!(parse(two).unwrap().jobs.len(), 2);
    }
}
