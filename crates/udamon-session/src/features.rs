//! What this machine offers udamon, probed read-only under a root path (so
//! tests can build a fake `/proc` and `/sys`). Nothing here ever writes: in
//! particular nothing under `sys/kernel/mm/damon` is written, whatever its
//! state, and no kdamond is created to see which files the kernel offers.
//! Kernel DAMON features are read from the files of kdamonds that already
//! exist; without one they are inferred from the kernel version, using the
//! landmarks of [`needs_for_entry`] and [`needs_for_keyword`] (the table the
//! kdamond driver names in its own errors). Every kernel DAMON feature from
//! 6.14 on is judged the same way, one by one, from the table of
//! [`crate::kernel_features`].

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::Serialize;
use udamon_core::schemes::{Action, FilterType, GoalMetric};
use udamon_core::units::fmt_bytes;
use udamon_kdamon::{damon_stat, needs_for_entry, needs_for_keyword};

use crate::kernel_features::{Probe, CONTEXT, GOAL, KDAMOND, KERNEL_FEATURES, SCHEME};

#[derive(Debug, Serialize)]
pub struct Feature {
    pub name: &'static str,
    pub available: bool,
    /// What was found, or what is missing and what provides it.
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct Kdamond {
    pub index: u32,
    pub state: String,
    pub pid: Option<u32>,
    /// The udamon process whose claim proves this kdamond udamon's
    /// ([`udamon_kdamon::claim`]): a run still going, or one that died and
    /// left it (`udamon cleanup` removes that one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udamon_pid: Option<u32>,
    /// Whether that run is still going.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udamon_running: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct Features {
    pub kernel: String,
    /// Where the kernel's build options were read; `None` when neither
    /// `/boot/config-RELEASE` nor `/proc/config.gz` is readable (rows that
    /// depend on a config option then say so, or go by the kernel version).
    pub kernel_config: Option<String>,
    pub features: Vec<Feature>,
    /// kdamonds that exist and that udamon did not create (probing creates
    /// none): udamon never touches them.
    pub foreign_kdamonds: Vec<Kdamond>,
    /// DAMON's special-purpose modules (DAMON_RECLAIM, DAMON_LRU_SORT,
    /// DAMON_STAT) that are built in or loaded: their kdamonds are not in
    /// the sysfs tree, and the trace gets their events too.
    pub damon_modules: Vec<DamonModule>,
    /// Kernel DAMON's operations sets; `None` when neither a context's
    /// avail_operations nor the kernel config can be read (path choice then
    /// lets the driver try: it reads avail_operations before using a set).
    pub damon_ops: Option<Vec<OpsSet>>,
    /// Every kernel DAMON feature from 6.14 on
    /// ([`KERNEL_FEATURES`](crate::kernel_features::KERNEL_FEATURES)), in
    /// version order: whether this machine has it, and why.
    pub kernel_features: Vec<KernelFeatureRow>,
}

/// One kernel DAMON feature, as this machine has it or not.
#[derive(Debug, Serialize)]
pub struct KernelFeatureRow {
    /// The kernel's name: a sysfs file, keyword, module or tracepoint.
    pub name: &'static str,
    /// What it is (a filter type, a goal metric, a context file...).
    pub kind: &'static str,
    /// The Linux version that added it ("6.14").
    pub since: &'static str,
    pub available: bool,
    /// The evidence (a file seen in the kdamond tree, the kernel version),
    /// or what is missing and what provides it.
    pub detail: String,
}

/// One of kernel DAMON's operations sets, as this kernel offers it.
#[derive(Debug, Clone, Serialize)]
pub struct OpsSet {
    /// "vaddr", "fvaddr" or "paddr".
    pub name: &'static str,
    pub offered: bool,
    /// What provides it (a config option and kernel version).
    pub needs: &'static str,
}

#[derive(Debug, Serialize)]
pub struct DamonModule {
    /// "damon_reclaim", "damon_lru_sort" or "damon_stat".
    pub module: String,
    pub enabled: bool,
    pub kdamond_pid: Option<u32>,
}

impl DamonModule {
    /// How to turn it off, for messages.
    pub fn disable_hint(&self) -> String {
        format!(
            "echo N > /sys/module/{}/parameters/enabled disables it",
            self.module
        )
    }
}

/// The DAMON modules present under `ROOT/sys/module`.
pub fn damon_modules(root: &Path) -> Vec<DamonModule> {
    ["damon_reclaim", "damon_lru_sort", "damon_stat"]
        .iter()
        .filter_map(|m| {
            let p = root.join(format!("sys/module/{m}/parameters"));
            let read = |f: &str| {
                fs::read_to_string(p.join(f))
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            let enabled = read("enabled")?;
            Some(DamonModule {
                module: (*m).to_string(),
                enabled: enabled == "Y" || enabled == "1",
                kdamond_pid: read("kdamond_pid")
                    .and_then(|p| p.parse().ok())
                    .filter(|&p: &u32| p > 0),
            })
        })
        .collect()
}

#[cfg(test)]
impl Features {
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }
}

const SYSFS_NEEDS: &str = "Linux 5.18+ with CONFIG_DAMON_SYSFS";
const ADMIN: &str = "sys/kernel/mm/damon/admin";
// Shapes of directories in the DAMON tree, relative to ADMIN, are those of
// crate::kernel_features (`*` stands for any index).

/// DAMON features gated by one file: row, directory shape, file under it.
const GATED: [(&str, &str, &str); 6] = [
    ("damon_tried_regions", SCHEME, "tried_regions"),
    ("damon_apply_interval", SCHEME, "apply_interval_us"),
    ("damon_quota_goals", SCHEME, "quotas/goals"),
    ("damon_migrate_actions", SCHEME, "target_nid"),
    (
        "damon_intervals_autotune",
        CONTEXT,
        "monitoring_attrs/intervals/intervals_goal",
    ),
    ("damon_refresh", KDAMOND, "refresh_ms"),
];
/// Quota goal metrics udamon uses, each with the file that came with it.
const METRICS: [(&str, &str, &str); 4] = [
    (GoalMetric::UserInput.name(), SCHEME, "quotas/goals"),
    (GoalMetric::SomeMemPsiUs.name(), GOAL, "target_metric"),
    (GoalMetric::NodeMemUsedBp.name(), GOAL, "nid"),
    (GoalMetric::NodeMemFreeBp.name(), GOAL, "nid"),
];
/// Filter types in the order the kernel added them.
const FILTER_TYPES: [&str; 8] = [
    FilterType::Anon.name(),
    FilterType::Memcg.name(),
    FilterType::Addr.name(),
    FilterType::Target.name(),
    FilterType::Young.name(),
    FilterType::HugepageSize.name(),
    FilterType::Unmapped.name(),
    FilterType::Active.name(),
];
const OPS: [&str; 3] = ["vaddr", "fvaddr", "paddr"];

type Version = (u32, u32);

/// Major and minor of "6.12.0-foo" or "6.12+".
fn version_of(s: &str) -> Option<Version> {
    let mut it = s.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The machine under a root, read-only.
struct Machine<'a> {
    root: &'a Path,
    version: Option<Version>,
    cfg: Option<String>,
}

impl Machine<'_> {
    fn read(&self, p: &str) -> Option<String> {
        fs::read_to_string(self.root.join(p.trim_start_matches('/')))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn exists(&self, p: &str) -> bool {
        self.root.join(p.trim_start_matches('/')).exists()
    }

    /// Whether a config option is set (`=y` or `=m`); `None` without config.
    fn config(&self, opt: &str) -> Option<bool> {
        let cfg = self.cfg.as_ref()?;
        Some(
            cfg.lines()
                .any(|l| l.strip_prefix(opt).is_some_and(|v| v == "=y" || v == "=m")),
        )
    }

    fn at_least(&self, v: Version) -> Option<bool> {
        self.version.map(|k| k >= v)
    }

    /// Whether the kernel meets `needs` ("Linux X.Y+", "CONFIG_X", or
    /// "Linux X.Y+ with CONFIG_X"); `None` when that cannot be told.
    fn meets(&self, needs: &str) -> Option<bool> {
        let checks: Vec<Option<bool>> = needs
            .strip_prefix("Linux ")
            .and_then(version_of)
            .map(|v| self.at_least(v))
            .into_iter()
            .chain(
                needs
                    .split_whitespace()
                    .filter(|w| w.starts_with("CONFIG_"))
                    .map(|o| self.config(o)),
            )
            .collect();
        if checks.contains(&Some(false)) {
            Some(false)
        } else if checks.contains(&None) {
            None
        } else {
            Some(true)
        }
    }

    fn version_str(&self) -> String {
        self.version
            .map_or("unknown".into(), |(a, b)| format!("{a}.{b}"))
    }

    /// "CONFIG_X set", "CONFIG_X not set", or "CONFIG_X assumed (...)".
    fn config_word(&self, opt: &str) -> String {
        match self.config(opt) {
            Some(true) => format!("{opt} set"),
            Some(false) => format!("{opt} not set"),
            None => format!("{opt} assumed (no kernel config to check)"),
        }
    }
}

/// The kernel's build options and where they were read: /boot/config-RELEASE
/// as distributions install it, else the kernel's own /proc/config.gz.
fn kernel_config(root: &Path, release: &str) -> Option<(String, String)> {
    use std::io::Read;
    let boot = format!("/boot/config-{release}");
    if let Ok(c) = fs::read_to_string(root.join(&boot[1..])) {
        return Some((c, boot));
    }
    let gz = fs::File::open(root.join("proc/config.gz")).ok()?;
    let mut s = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut s)
        .ok()?;
    Some((s, "/proc/config.gz".into()))
}

/// "a, b; c, d need X; e needs Y": what is offered, then what the rest need
/// (consecutive keywords with the same needs grouped).
fn listing(items: &[(&str, Option<&str>)]) -> String {
    let offered: Vec<&str> = items
        .iter()
        .filter(|(_, n)| n.is_none())
        .map(|(k, _)| *k)
        .collect();
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for (k, n) in items {
        let Some(n) = n else { continue };
        match groups.last_mut() {
            Some((ks, last)) if last == n => ks.push(k),
            _ => groups.push((vec![k], n)),
        }
    }
    let mut parts = vec![if offered.is_empty() {
        "none".to_string()
    } else {
        offered.join(", ")
    }];
    parts.extend(groups.iter().map(|(ks, n)| {
        let verb = if ks.len() == 1 { "needs" } else { "need" };
        format!("{} {verb} {n}", ks.join(", "))
    }));
    parts.join("; ")
}

/// The kernel DAMON sysfs tree as it is.
struct Damon {
    present: bool,
    /// Shape of every entry under `admin/kdamonds` (indices as `*`) to the
    /// first entry of that shape, relative to `admin`.
    seen: BTreeMap<String, String>,
}

impl Damon {
    fn read(m: &Machine) -> Damon {
        let admin = m.root.join(ADMIN);
        let mut seen = BTreeMap::new();
        walk(&admin.join("kdamonds"), "kdamonds", "kdamonds", &mut seen);
        Damon {
            present: admin.exists(),
            seen,
        }
    }

    /// What DAMON features are read from: directories of `level`'s shape,
    /// or the kernel version when none exists.
    fn basis(&self, m: &Machine, level: &str) -> String {
        match self.seen.get(level) {
            Some(dir) => format!("read from {dir}"),
            None => format!("by kernel version {}", m.version_str()) + &self.nothing(level),
        }
    }

    /// " (no scheme to inspect)", naming the kdamond when there is none.
    fn nothing(&self, level: &str) -> String {
        let noun = match self.seen.contains_key(KDAMOND) {
            true => level.rsplit('/').nth(1).unwrap_or("").trim_end_matches('s'),
            false => "kdamond",
        };
        format!(" (no {noun} to inspect)")
    }

    /// Whether the kernel creates `file` in directories of `level`, with
    /// the evidence or what provides the file: seen in the tree when such a
    /// directory exists, else by kernel version.
    fn gate(&self, m: &Machine, level: &str, file: &str) -> (bool, String) {
        self.gate_any(m, &[(level, file)], entry_needs(file))
    }

    /// [`gate`](Self::gate) for an entry that may be in any of several
    /// places (`(level, file)`), provided by `needs`: present in one, or
    /// missing from the first directory that exists, else by version
    /// (that of the first place).
    fn gate_any(&self, m: &Machine, at: &[(&str, &str)], needs: &str) -> (bool, String) {
        for (level, file) in at {
            if let Some(seen) = self.seen.get(&format!("{level}/{file}")) {
                return (true, format!("{seen} present"));
            }
        }
        for (level, file) in at {
            if let Some(dir) = self.seen.get(*level) {
                return (false, format!("{dir} has no {file}: needs {needs}"));
            }
        }
        let level = at.first().map_or(KDAMOND, |a| a.0);
        match m.meets(needs) {
            Some(true) => (true, self.basis(m, level)),
            Some(false) => (
                false,
                format!("needs {needs}; kernel version {}", m.version_str()) + &self.nothing(level),
            ),
            None => (
                false,
                format!("needs {needs}; unknown kernel version") + &self.nothing(level),
            ),
        }
    }

    fn rows(&self, m: &Machine, f: &mut Vec<Feature>) {
        let names = ["damon_operations", "damon_goal_metrics", "damon_filters"];
        if !self.present {
            for name in names.into_iter().chain(GATED.map(|g| g.0)) {
                f.push(Feature {
                    name,
                    available: false,
                    detail: format!("no DAMON sysfs: needs {SYSFS_NEEDS}"),
                });
            }
            return;
        }
        let mut row = |name, (available, detail): (bool, String)| {
            f.push(Feature {
                name,
                available,
                detail,
            })
        };
        row("damon_operations", self.operations(m));

        let (goals, why) = self.gate(m, SCHEME, "quotas/goals");
        let metrics = METRICS.map(|(kw, level, file)| {
            let ok = self.gate(m, level, file).0;
            (
                kw,
                (!ok).then(|| needs_for_keyword(kw).unwrap_or(entry_needs(file))),
            )
        });
        let level = if self.seen.contains_key(GOAL) {
            GOAL
        } else {
            SCHEME
        };
        row(
            "damon_goal_metrics",
            match goals {
                true => (
                    true,
                    format!("{}; {}", listing(&metrics), self.basis(m, level)),
                ),
                false => (false, why),
            },
        );

        let core = self.gate(m, SCHEME, "core_filters").0;
        let (filters, why) = match self.gate(m, SCHEME, "filters") {
            (false, _) if core => self.gate(m, SCHEME, "core_filters"),
            g => g,
        };
        let types = FILTER_TYPES.map(|kw| {
            let n = needs_for_keyword(kw).unwrap_or(entry_needs("filters"));
            (kw, (m.meets(n) == Some(false)).then_some(n))
        });
        let allow = match m.meets(entry_needs("allow")) {
            Some(false) => format!("reject only (allow needs {})", entry_needs("allow")),
            _ => "allow and reject".into(),
        };
        let dirs = if core {
            "core_filters, ops_filters"
        } else {
            "filters"
        };
        row(
            "damon_filters",
            match filters {
                true => (
                    true,
                    format!(
                        "{}; {allow}; in {dirs}; {}",
                        listing(&types),
                        self.basis(m, SCHEME)
                    ),
                ),
                false => (false, why),
            },
        );

        for (name, level, file) in GATED {
            row(name, self.gate(m, level, file));
        }
    }

    /// Each operations set: offered or not (`None`: unknown), and what
    /// provides it; from a context's avail_operations, else the kernel
    /// config. `None` as a whole when neither is there to read.
    fn ops_sets(&self, m: &Machine) -> Option<(Vec<OpsSet>, String)> {
        if !self.present {
            return Some((
                OPS.iter()
                    .map(|o| OpsSet {
                        name: o,
                        offered: false,
                        needs: SYSFS_NEEDS,
                    })
                    .collect(),
                "no DAMON sysfs".into(),
            ));
        }
        let needs = |o| needs_for_keyword(o).unwrap_or("a newer kernel");
        let file = self
            .seen
            .get(&format!("{CONTEXT}/avail_operations"))
            .and_then(|at| Some((m.read(&format!("{ADMIN}/{at}"))?, at)));
        let (offered, basis) = match file {
            Some((s, at)) => {
                let ops: Vec<&str> = s.split_whitespace().collect();
                (OPS.map(|o| ops.contains(&o)), format!("read from {at}"))
            }
            None if m.cfg.is_some() => (
                OPS.map(|o| m.meets(needs(o)) == Some(true)),
                "by kernel config".into(),
            ),
            None => return None,
        };
        let sets = OPS
            .iter()
            .zip(offered)
            .map(|(o, offered)| OpsSet {
                name: o,
                offered,
                needs: needs(o),
            })
            .collect();
        Some((sets, basis))
    }

    /// The operations sets row: [`ops_sets`](Self::ops_sets) as text.
    fn operations(&self, m: &Machine) -> (bool, String) {
        let Some((sets, basis)) = self.ops_sets(m) else {
            let all = OPS.map(|o| {
                format!(
                    "{o} needs {}",
                    needs_for_keyword(o).unwrap_or("a newer kernel")
                )
            });
            return (
                false,
                format!(
                    "unknown: no context's avail_operations to read and no kernel config ({})",
                    all.join("; ")
                ),
            );
        };
        let items: Vec<(&str, Option<&str>)> = sets
            .iter()
            .map(|s| (s.name, (!s.offered).then_some(s.needs)))
            .collect();
        (
            sets.iter().any(|s| s.offered),
            format!("{}; {basis}", listing(&items)),
        )
    }
}

fn entry_needs(file: &str) -> &'static str {
    needs_for_entry(file.rsplit('/').next().unwrap_or(file)).unwrap_or("a newer kernel")
}

/// The damon_stat row: DAMON_STAT's parameters present (enabled or not,
/// its kdamond), else why not: by the kernel config, then the version.
/// udamon only reads the module (`udamon damon-stat`).
fn damon_stat_row(m: &Machine) -> (bool, String) {
    let params = damon_stat::PARAMETERS;
    let needs = damon_stat::NEEDS;
    if m.root.join(params).is_dir() {
        let pid = m
            .read(&format!("{params}/kdamond_pid"))
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|&p| p > 0);
        let state = match m.read(&format!("{params}/enabled")).as_deref() {
            Some("Y" | "1") => match pid {
                Some(p) => format!("enabled, kdamond pid {p}"),
                None => "enabled".into(),
            },
            Some("N" | "0") => "disabled (udamon never enables it)".into(),
            _ => "its enabled file is unreadable".into(),
        };
        return (true, format!("/{params} present: {state}"));
    }
    let why = match (m.config("CONFIG_DAMON_STAT"), m.at_least((6, 17))) {
        (Some(true), _) => {
            return (
                false,
                format!(
                    "CONFIG_DAMON_STAT set but no /{params}: the module is not loaded \
                     (modprobe damon_stat)"
                ),
            )
        }
        (Some(false), _) => return (false, format!("CONFIG_DAMON_STAT not set (needs {needs})")),
        (None, Some(false)) => format!("kernel version {}", m.version_str()),
        (None, Some(true)) => format!(
            "kernel version {}, no kernel config to check",
            m.version_str()
        ),
        (None, None) => "unknown kernel version".into(),
    };
    (false, format!("no /{params} (needs {needs}; {why})"))
}

/// Every kernel feature of [`KERNEL_FEATURES`], judged on this machine.
fn kernel_feature_rows(m: &Machine, damon: &Damon) -> Vec<KernelFeatureRow> {
    KERNEL_FEATURES
        .iter()
        .map(|k| {
            let needs = format!("Linux {}+", k.since);
            let no_sysfs = || {
                let detail = match m.meets(&needs) {
                    Some(true) => "no DAMON sysfs: needs CONFIG_DAMON_SYSFS".to_string(),
                    _ => format!("no DAMON sysfs: needs {needs} with CONFIG_DAMON_SYSFS"),
                };
                (false, detail)
            };
            let (available, detail) = match k.probe {
                Probe::Entry(_) | Probe::Keyword if !damon.present => no_sysfs(),
                Probe::Entry(at) => damon.gate_any(m, at, &needs),
                Probe::Keyword => by_version(m, &needs, ""),
                Probe::Module => damon_stat_row(m),
                Probe::ModuleParameter(file) => module_parameter(m, file, &needs),
                Probe::Tracepoint => tracepoint(m, k.name, &needs),
            };
            KernelFeatureRow {
                name: k.name,
                kind: k.kind,
                since: k.since,
                available,
                detail,
            }
        })
        .collect()
}

/// What the kernel version says of a feature that `needs` it (`why`
/// says what could not be inspected instead).
fn by_version(m: &Machine, needs: &str, why: &str) -> (bool, String) {
    match m.meets(needs) {
        Some(true) => (true, format!("by kernel version {}{why}", m.version_str())),
        Some(false) => (
            false,
            format!("needs {needs}; kernel version {}{why}", m.version_str()),
        ),
        None => (false, format!("needs {needs}; unknown kernel version{why}")),
    }
}

/// A file of DAMON_STAT's parameters: seen there, or missing from them.
fn module_parameter(m: &Machine, file: &str, needs: &str) -> (bool, String) {
    let params = damon_stat::PARAMETERS;
    if m.exists(&format!("{params}/{file}")) {
        (true, format!("/{params}/{file} present"))
    } else if m.root.join(params).is_dir() {
        (false, format!("/{params} has no {file}: needs {needs}"))
    } else {
        (
            false,
            format!(
                "no /{params}: needs {needs} with CONFIG_DAMON_STAT (kernel version {})",
                m.version_str()
            ),
        )
    }
}

/// A tracepoint of the `damon` events, in tracefs where it is mounted and
/// readable, else by kernel version.
fn tracepoint(m: &Machine, name: &str, needs: &str) -> (bool, String) {
    for tracing in ["sys/kernel/tracing", "sys/kernel/debug/tracing"] {
        let events = format!("{tracing}/events/damon");
        if m.exists(&format!("{events}/{name}")) {
            return (true, format!("/{events}/{name} present"));
        }
        if m.exists(&events) {
            return (false, format!("/{events} has no {name}: needs {needs}"));
        }
    }
    by_version(m, needs, " (no tracefs events/damon to inspect)")
}

/// Records every entry under `dir` by shape (see [`Damon::seen`]), without
/// descending into the (possibly many) regions of `tried_regions`.
fn walk(dir: &Path, shape: &str, rel: &str, seen: &mut BTreeMap<String, String>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        (name.parse::<u32>().ok(), name)
    });
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let index = name.parse::<u32>().is_ok();
        let s = format!("{shape}/{}", if index { "*" } else { &name });
        let r = format!("{rel}/{name}");
        seen.entry(s.clone()).or_insert_with(|| r.clone());
        let dir = e.file_type().is_ok_and(|t| t.is_dir());
        if dir && !(index && shape.ends_with("tried_regions")) {
            walk(&e.path(), &s, &r, seen);
        }
    }
}

/// The most NUMA nodes a kernel has: `MAX_NUMNODES` is
/// `1 << CONFIG_NODES_SHIFT`, and `NODES_SHIFT` is at most 10.
pub(crate) const MAX_NUMNODES: u32 = 1024;

/// Node numbers of a sysfs node list such as "0-2,4" (parts that do not
/// parse are skipped). A node number of [`MAX_NUMNODES`] or more is
/// refused, naming it: no kernel has one, and a list such as
/// `0-4294967295` (a damaged or forged tree) would take minutes and
/// gigabytes to expand.
pub(crate) fn parse_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for p in s.trim().split(',') {
        let (a, b) = p.split_once('-').unwrap_or((p, p));
        let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) else {
            continue;
        };
        if a.max(b) >= MAX_NUMNODES {
            return Err(format!(
                "node list \"{}\" names node {}, beyond the kernel's {MAX_NUMNODES} nodes \
                 (MAX_NUMNODES)",
                s.trim(),
                a.max(b)
            ));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// Probes the machine under `root` ("/" for the real one).
pub fn probe(root: &Path) -> Features {
    let kernel = fs::read_to_string(root.join("proc/sys/kernel/osrelease"))
        .map_or("unknown".into(), |s| s.trim().to_string());
    let (cfg, cfg_src) = kernel_config(root, &kernel).unzip();
    let m = Machine {
        root,
        version: version_of(&kernel),
        cfg,
    };
    // Kernel DAMON through sysfs.
    let damon = Damon::read(&m);
    let mut f = vec![Feature {
        name: "kernel_damon_sysfs",
        available: damon.present,
        detail: match damon.present {
            true => format!("/{ADMIN} present"),
            false => format!("no /{ADMIN} (needs {SYSFS_NEEDS})"),
        },
    }];
    damon.rows(&m, &mut f);
    let (available, detail) = damon_stat_row(&m);
    f.push(Feature {
        name: "damon_stat",
        available,
        detail,
    });
    let damon_ops = damon.ops_sets(&m).map(|(sets, _)| sets);
    let kernel_features = kernel_feature_rows(&m, &damon);
    let foreign = foreign_kdamonds(&m);

    // The other rows, in the order they are shown (the node lists give two).
    let mut row = |name, (available, detail): (bool, String)| {
        f.push(Feature {
            name,
            available,
            detail,
        })
    };
    row("idle_page_bitmap", idle_page_bitmap_row(&m));
    row("pagemap_pfn", pagemap_pfn_row(&m));
    row("soft_dirty", soft_dirty_row(&m));
    row("pagemap_scan", pagemap_scan_row(&m));
    row("process_madvise", process_madvise_row(&m));
    let (move_pages, numa) = numa_rows(&m);
    row("move_pages", move_pages);
    row("numa", numa);
    row("transparent_hugepage", transparent_hugepage_row(&m));
    row("swap", swap_row(&m));
    row("psi", psi_row(&m));
    row("cgroup_v2", cgroup_v2_row(&m));

    Features {
        kernel,
        kernel_config: cfg_src,
        features: f,
        foreign_kdamonds: foreign,
        damon_modules: damon_modules(root),
        damon_ops,
        kernel_features,
    }
}

/// Every kdamond in the sysfs tree, in index order. Kdamond 0, the one a
/// udamon run creates (or every kdamond of a set a udamon service made),
/// carries that run when the claim proves it udamon's (the run still
/// going, or dead and leaving it).
fn foreign_kdamonds(m: &Machine) -> Vec<Kdamond> {
    let root = m.root;
    // kdamonds someone else runs (or a udamon run, which its claim proves).
    let verdict = udamon_kdamon::claim::judge(root, &|pid| udamon_proc::start_time(root, pid));
    let (udamon_pid, udamon_running) = match &verdict {
        udamon_kdamon::claim::Verdict::Running(c) => (Some(c.udamon_pid), Some(true)),
        udamon_kdamon::claim::Verdict::Leftover(c) => (Some(c.udamon_pid), Some(false)),
        _ => (None, None),
    };
    // A udamon's set of kdamonds: all of them are that run's.
    let claimed = udamon_kdamon::claim::SetClaim::read(root).map_or(1, |s| s.nr_kdamonds as u32);
    let mut foreign = Vec::new();
    if let Some(n) = m
        .read(&format!("{ADMIN}/kdamonds/nr_kdamonds"))
        .and_then(|s| s.parse::<u32>().ok())
    {
        for i in 0..n {
            let dir = format!("{ADMIN}/kdamonds/{i}");
            foreign.push(Kdamond {
                index: i,
                state: m
                    .read(&format!("{dir}/state"))
                    .unwrap_or_else(|| "unknown".into()),
                pid: m.read(&format!("{dir}/pid")).and_then(|s| s.parse().ok()),
                udamon_pid: udamon_pid.filter(|_| i < claimed),
                udamon_running: udamon_running.filter(|_| i < claimed),
            });
        }
    }
    foreign
}

/// The idle_page_bitmap row: the bitmap present, and readable by us.
fn idle_page_bitmap_row(m: &Machine) -> (bool, String) {
    let idle = "/sys/kernel/mm/page_idle/bitmap";
    if !m.exists(idle) {
        (
            false,
            format!("no {idle} (needs CONFIG_IDLE_PAGE_TRACKING)"),
        )
    } else if fs::File::open(m.root.join(&idle[1..])).is_ok() {
        (true, format!("{idle} present and readable"))
    } else {
        (
            false,
            format!("{idle} present but not readable (needs root)"),
        )
    }
}

/// The pagemap_pfn row: whether our own pagemap shows frame numbers.
fn pagemap_pfn_row(m: &Machine) -> (bool, String) {
    match pagemap_pfn_visible(m.root) {
        Some(true) => (true, "/proc/self/pagemap shows page frame numbers".into()),
        Some(false) => (
            false,
            "/proc/self/pagemap hides page frame numbers (needs root or CAP_SYS_ADMIN)".into(),
        ),
        None => (
            false,
            "/proc/self/pagemap is not readable (needs CONFIG_PROC_PAGE_MONITOR)".into(),
        ),
    }
}

/// The soft_dirty row, by the kernel config.
fn soft_dirty_row(m: &Machine) -> (bool, String) {
    match m.config("CONFIG_MEM_SOFT_DIRTY") {
        Some(true) => (
            true,
            "CONFIG_MEM_SOFT_DIRTY set (write-only monitoring)".into(),
        ),
        Some(false) => (
            false,
            "CONFIG_MEM_SOFT_DIRTY not set (write-only monitoring needs it)".into(),
        ),
        None => (
            false,
            "unknown: no kernel config to check (write-only monitoring needs \
                 CONFIG_MEM_SOFT_DIRTY)"
                .into(),
        ),
    }
}

/// The pagemap_scan row, by the kernel version.
fn pagemap_scan_row(m: &Machine) -> (bool, String) {
    match m.at_least((6, 7)) {
        Some(true) => (
            true,
            format!(
                "PAGEMAP_SCAN by kernel version {}: --mode enhanced fits regions to a \
                     process's populated memory",
                m.version_str()
            ),
        ),
        Some(false) => (
            false,
            format!(
                "needs Linux 6.7+ (kernel version {}): --mode enhanced then monitors whole \
                     mappings, as the kernel's mode does",
                m.version_str()
            ),
        ),
        None => (
            false,
            "unknown: no kernel version (needs Linux 6.7+)".into(),
        ),
    }
}

/// The process_madvise row: the advice udamon sends, by kernel version and
/// config.
fn process_madvise_row(m: &Machine) -> (bool, String) {
    let pm = "Linux 5.10+ with CONFIG_ADVISE_SYSCALLS";
    match (m.at_least((5, 10)), m.config("CONFIG_ADVISE_SYSCALLS")) {
        (_, Some(false)) => (
            false,
            format!("CONFIG_ADVISE_SYSCALLS not set (needs {pm})"),
        ),
        (Some(true), _) => {
            let collapse = "Linux 6.1+ with CONFIG_TRANSPARENT_HUGEPAGE";
            let advice = [
                (Action::Pageout.name(), None),
                (Action::Cold.name(), None),
                (Action::Willneed.name(), None),
                (
                    Action::Collapse.name(),
                    (m.meets(collapse) == Some(false)).then_some(collapse),
                ),
            ];
            (
                true,
                format!(
                    "{}; by kernel version {}, {}; other processes need CAP_SYS_NICE",
                    listing(&advice),
                    m.version_str(),
                    m.config_word("CONFIG_ADVISE_SYSCALLS")
                ),
            )
        }
        _ => (
            false,
            format!("needs {pm}; kernel version {}", m.version_str()),
        ),
    }
}

/// The move_pages and numa rows, in that order, from the node lists under
/// `/sys/devices/system/node` (and the memory tiers, for numa).
fn numa_rows(m: &Machine) -> ((bool, String), (bool, String)) {
    let node = "/sys/devices/system/node";
    let online = m.read(&format!("{node}/online"));
    let has_memory = m.read(&format!("{node}/has_memory"));
    let mem_file = if has_memory.is_some() {
        "has_memory"
    } else {
        "online"
    };
    let memory = has_memory.or_else(|| online.clone()).unwrap_or_default();
    // A node list beyond the kernel's limit reads as no node, and is named.
    let mem_list = parse_list(&memory);
    let mem_nodes = mem_list.clone().unwrap_or_default();
    let numa = m.config("CONFIG_NUMA").unwrap_or(online.is_some());
    let move_pages = if !numa || m.config("CONFIG_MIGRATION") == Some(false) {
        (
            false,
            format!(
                "needs CONFIG_NUMA and CONFIG_MIGRATION ({}, {})",
                m.config_word("CONFIG_NUMA"),
                m.config_word("CONFIG_MIGRATION")
            ),
        )
    } else if let Err(e) = &mem_list {
        (false, format!("{node}/{mem_file}: {e}"))
    } else if mem_nodes.len() < 2 {
        (
            false,
            format!(
                "needs 2+ NUMA nodes with memory to move pages between; nodes with memory: {}",
                if memory.is_empty() { "none" } else { &memory }
            ),
        )
    } else {
        (
            true,
            format!(
                "nodes with memory {memory}; {}, {}",
                m.config_word("CONFIG_NUMA"),
                m.config_word("CONFIG_MIGRATION")
            ),
        )
    };
    let numa = match online.as_deref().map(parse_list) {
        None => (false, format!("no {node} (needs CONFIG_NUMA)")),
        Some(Err(e)) => (false, format!("{node}/online: {e}")),
        Some(Ok(ids)) => {
            let nodes: Vec<String> = ids
                .into_iter()
                .map(|n| {
                    let cpus = m
                        .read(&format!("{node}/node{n}/cpulist"))
                        .filter(|c| !c.is_empty())
                        .map_or("no cpus".into(), |c| format!("cpus {c}"));
                    let mem = if mem_nodes.contains(&n) {
                        "memory"
                    } else {
                        "no memory"
                    };
                    format!("node {n} ({cpus}, {mem})")
                })
                .collect();
            let mut detail = nodes.join(", ");
            let tiers = memory_tiers(m.root);
            if !tiers.is_empty() {
                detail += &format!("; memory tiers: {}", tiers.join(", "));
            }
            (true, detail)
        }
    };
    (move_pages, numa)
}

/// The transparent_hugepage row: its enabled and defrag modes.
fn transparent_hugepage_row(m: &Machine) -> (bool, String) {
    let thp = |f: &str| {
        m.read(&format!("/sys/kernel/mm/transparent_hugepage/{f}"))
            .map(|s| {
                s.split('[')
                    .nth(1)
                    .and_then(|r| r.split(']').next())
                    .map_or(s.clone(), String::from)
            })
    };
    match (thp("enabled"), thp("defrag")) {
        (None, _) => (
            false,
            "no /sys/kernel/mm/transparent_hugepage (needs CONFIG_TRANSPARENT_HUGEPAGE)".into(),
        ),
        (Some(e), d) => (
            true,
            format!("enabled {e}") + &d.map_or(String::new(), |d| format!(", defrag {d}")),
        ),
    }
}

/// The swap row: each swap device in `/proc/swaps`, with its size and use.
fn swap_row(m: &Machine) -> (bool, String) {
    match m.read("/proc/swaps") {
        None => (false, "no /proc/swaps (needs CONFIG_SWAP)".into()),
        Some(s) => {
            let devs: Vec<String> = s
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    let kib = |i: usize| w.get(i)?.parse::<u64>().ok().map(|k| fmt_bytes(k * 1024));
                    Some(format!(
                        "{} {} {}, {} used",
                        w[0],
                        w.get(1)?,
                        kib(2)?,
                        kib(3)?
                    ))
                })
                .collect();
            match devs.is_empty() {
                true => (
                    false,
                    "no swap device in /proc/swaps (paging out anonymous memory needs \
                         one: mkswap and swapon)"
                        .into(),
                ),
                false => (true, devs.join("; ")),
            }
        }
    }
}

/// The psi row: memory pressure stall information, and why it is missing.
fn psi_row(m: &Machine) -> (bool, String) {
    let psi = "/proc/pressure/memory";
    if m.exists(psi) {
        (true, format!("{psi} present"))
    } else if m.config("CONFIG_PSI") == Some(true) {
        (
            false,
            format!("no {psi}: CONFIG_PSI set but PSI is off (needs the psi=1 boot option)"),
        )
    } else {
        (
            false,
            format!("no {psi} (needs Linux 4.20+ with CONFIG_PSI)"),
        )
    }
}

/// The cgroup_v2 row: the unified hierarchy at `/sys/fs/cgroup`.
fn cgroup_v2_row(m: &Machine) -> (bool, String) {
    match m.read("/sys/fs/cgroup/cgroup.controllers") {
        Some(c) => (
            true,
            format!("unified hierarchy at /sys/fs/cgroup, controllers: {c}"),
        ),
        None => (
            false,
            "/sys/fs/cgroup is not a cgroup v2 mount (needs cgroup2 mounted there: \
                 CONFIG_CGROUPS, systemd.unified_cgroup_hierarchy=1)"
                .into(),
        ),
    }
}

/// "4 (nodes 0)" for every memory tier, in tier order.
fn memory_tiers(root: &Path) -> Vec<String> {
    let dir = root.join("sys/devices/virtual/memory_tiering");
    let mut tiers: Vec<(u32, String)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let t = name.strip_prefix("memory_tier")?.parse().ok()?;
            let nodes = fs::read_to_string(e.path().join("nodelist")).ok()?;
            Some((t, nodes.trim().to_string()))
        })
        .collect();
    tiers.sort();
    tiers
        .into_iter()
        .map(|(t, n)| format!("{t} (nodes {n})"))
        .collect()
}

/// Reads this process's pagemap entry for a page it just wrote.
fn pagemap_pfn_visible(root: &Path) -> Option<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let page = vec![1u8; 8192];
    let addr = page.as_ptr() as u64;
    let mut file = fs::File::open(root.join("proc/self/pagemap")).ok()?;
    file.seek(SeekFrom::Start(addr / 4096 * 8)).ok()?;
    let mut buf = [0u8; 8];
    file.read_exact(&mut buf).ok()?;
    std::hint::black_box(&page);
    let entry = u64::from_le_bytes(buf);
    let present = entry >> 63 & 1 == 1;
    Some(present && entry & ((1 << 55) - 1) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn write(root: &Path, p: &str, s: &str) {
        let path = root.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, s).unwrap();
    }

    /// A fake tree from (path, content) pairs; DAMON paths relative to admin.
    fn tree(files: &[(&str, &str)], damon: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (p, s) in files {
            write(dir.path(), p, s);
        }
        for (p, s) in damon {
            write(dir.path(), &format!("{ADMIN}/{p}"), s);
        }
        dir
    }

    /// Probes, proving that probing wrote nothing: every file keeps its
    /// content and no file or directory appears.
    fn probe_read_only(root: &Path) -> Features {
        let before = snapshot_tree(root);
        let f = probe(root);
        assert_eq!(snapshot_tree(root), before);
        f
    }

    fn row<'a>(f: &'a Features, name: &str) -> (bool, &'a str) {
        let r = f.get(name).unwrap_or_else(|| panic!("no row {name}"));
        (r.available, &r.detail)
    }

    #[test]
    fn fake_tree_with_busy_kdamond() {
        let dir = tree(
            &[
                ("proc/sys/kernel/osrelease", "6.12.0-test\n"),
                (
                    "boot/config-6.12.0-test",
                    "CONFIG_DAMON_VADDR=y\n# CONFIG_DAMON_PADDR is not set\nCONFIG_MEM_SOFT_DIRTY=y\n",
                ),
            ],
            &[
                ("kdamonds/nr_kdamonds", "1\n"),
                ("kdamonds/0/state", "on\n"),
                ("kdamonds/0/pid", "4242\n"),
                ("kdamonds/0/contexts/nr_contexts", "0\n"),
            ],
        );
        let f = probe_read_only(dir.path());
        assert_eq!(f.kernel, "6.12.0-test");
        assert_eq!(f.kernel_config.as_deref(), Some("/boot/config-6.12.0-test"));
        assert!(row(&f, "kernel_damon_sysfs").0);
        assert_eq!(
            row(&f, "damon_operations"),
            (
                true,
                "vaddr, fvaddr; paddr needs CONFIG_DAMON_PADDR; by kernel config"
            )
        );
        // A kdamond without a context: context files go by version, and
        // kdamond files are read.
        assert_eq!(
            row(&f, "damon_apply_interval"),
            (true, "by kernel version 6.12 (no scheme to inspect)")
        );
        assert_eq!(
            row(&f, "damon_refresh"),
            (false, "kdamonds/0 has no refresh_ms: needs Linux 6.17+")
        );
        assert!(row(&f, "soft_dirty").0);
        assert!(!row(&f, "idle_page_bitmap").0);
        assert_eq!(f.foreign_kdamonds.len(), 1);
        assert_eq!(f.foreign_kdamonds[0].pid, Some(4242));
        assert_eq!(f.foreign_kdamonds[0].state, "on");
    }

    #[test]
    fn damon_features_read_from_existing_kdamond_files() {
        // The version says 6.12, but the files are what the kernel creates:
        // no target_nid here (say, a distribution kernel without it).
        let s = "kdamonds/1/contexts/0/schemes/0";
        let dir = tree(
            &[("proc/sys/kernel/osrelease", "6.12.3\n")],
            &[
                ("kdamonds/nr_kdamonds", "2\n"),
                ("kdamonds/0/state", "off\n"),
                ("kdamonds/0/contexts/nr_contexts", "0\n"),
                ("kdamonds/1/state", "on\n"),
                ("kdamonds/1/pid", "77\n"),
                (
                    "kdamonds/1/contexts/0/avail_operations",
                    "vaddr\nfvaddr\npaddr\n",
                ),
                (
                    "kdamonds/1/contexts/0/monitoring_attrs/intervals/sample_us",
                    "5000\n",
                ),
                (&format!("{s}/action"), "stat\n"),
                (&format!("{s}/apply_interval_us"), "0\n"),
                (&format!("{s}/tried_regions/total_bytes"), "0\n"),
                (&format!("{s}/tried_regions/0/start"), "4096\n"),
                (&format!("{s}/quotas/goals/nr_goals"), "1\n"),
                (&format!("{s}/quotas/goals/0/target_metric"), "user_input\n"),
                (&format!("{s}/filters/nr_filters"), "0\n"),
            ],
        );
        let f = probe_read_only(dir.path());
        assert_eq!(
            row(&f, "damon_operations"),
            (
                true,
                "vaddr, fvaddr, paddr; read from kdamonds/1/contexts/0/avail_operations"
            )
        );
        assert_eq!(
            row(&f, "damon_apply_interval"),
            (
                true,
                "kdamonds/1/contexts/0/schemes/0/apply_interval_us present"
            )
        );
        assert!(row(&f, "damon_tried_regions").0);
        assert!(row(&f, "damon_quota_goals").0);
        assert_eq!(
            row(&f, "damon_goal_metrics"),
            (
                true,
                "user_input, some_mem_psi_us; node_mem_used_bp, node_mem_free_bp need Linux 6.16+; \
                 read from kdamonds/1/contexts/0/schemes/0/quotas/goals/0"
            )
        );
        assert_eq!(
            row(&f, "damon_filters"),
            (
                true,
                "anon, memcg, addr, target, young; hugepage_size, unmapped, active need Linux 6.15+; \
                 reject only (allow needs Linux 6.14+); in filters; read from kdamonds/1/contexts/0/schemes/0"
            )
        );
        assert_eq!(
            row(&f, "damon_migrate_actions"),
            (
                false,
                "kdamonds/1/contexts/0/schemes/0 has no target_nid: needs Linux 6.11+"
            )
        );
        assert_eq!(
            row(&f, "damon_intervals_autotune"),
            (
                false,
                "kdamonds/1/contexts/0 has no monitoring_attrs/intervals/intervals_goal: needs Linux 6.15+"
            )
        );
        let k: Vec<_> = f
            .foreign_kdamonds
            .iter()
            .map(|k| (k.index, k.pid))
            .collect();
        assert_eq!(k, [(0, None), (1, Some(77))]);
    }

    /// A set of kdamonds this process made (its set claim): every one is
    /// listed as this run's, and the kernel path is not blocked by them;
    /// the same set claimed by a udamon that died blocks it, each named.
    #[test]
    fn this_processs_set_of_kdamonds_is_not_in_its_way() {
        let me = std::process::id();
        let stat = format!("{me} (udamon) S {} 4242 0\n", vec!["0"; 18].join(" "));
        let claim = |pid: u32| format!("udamon_pid={pid}\nudamon_start=4242\nnr_kdamonds=2\n");
        let kd = [
            ("kdamonds/nr_kdamonds", "2\n"),
            ("kdamonds/0/state", "on\n"),
            ("kdamonds/0/pid", "300\n"),
            ("kdamonds/1/state", "off\n"),
        ];
        let ours = tree(
            &[
                (&format!("proc/{me}/stat"), &stat),
                ("run/udamon/kdamonds.claim", &claim(me)),
            ],
            &kd,
        );
        let f = probe_read_only(ours.path());
        let k: Vec<_> = f
            .foreign_kdamonds
            .iter()
            .map(|k| (k.index, k.udamon_pid, k.udamon_running))
            .collect();
        assert_eq!(k, [(0, Some(me), Some(true)), (1, Some(me), Some(true))]);
        let why = crate::path_blocker(&f, crate::OpsChoice::Kdamond, false).unwrap_or_default();
        assert!(
            !why.contains("kdamond 0") && !why.contains("kdamond 1"),
            "{why}"
        );
        assert!(!why.contains("occupied"), "{why}");
        // the same claim by a pid that is gone: both are in the way
        let theirs = tree(&[("run/udamon/kdamonds.claim", &claim(me + 1))], &kd);
        let f = probe_read_only(theirs.path());
        let why = crate::path_blocker(&f, crate::OpsChoice::Kdamond, false).unwrap_or_default();
        assert!(
            why.contains("kdamond 0") && why.contains("kdamond 1"),
            "{why}"
        );
        // by another udamon that runs (a service): named as such
        let other = me + 1;
        let stat = format!("{other} (udamon) S {} 4242 0\n", vec!["0"; 18].join(" "));
        let running = tree(
            &[
                (&format!("proc/{other}/stat"), &stat),
                ("run/udamon/kdamonds.claim", &claim(other)),
            ],
            &kd,
        );
        let f = probe_read_only(running.path());
        let why = crate::path_blocker(&f, crate::OpsChoice::Kdamond, false).unwrap_or_default();
        assert!(
            why.contains(&format!(
                "kdamond 1 is another udamon's (pid {other}, running"
            )),
            "{why}"
        );
    }

    #[test]
    fn damon_features_by_kernel_version_without_kdamonds() {
        let dir = tree(
            &[("proc/sys/kernel/osrelease", "6.12.9-arch1\n")],
            &[("kdamonds/nr_kdamonds", "0\n")],
        );
        let f = probe_read_only(dir.path());
        assert!(f.foreign_kdamonds.is_empty());
        assert_eq!(f.kernel_config, None);
        let by = "by kernel version 6.12 (no kdamond to inspect)";
        for name in [
            "damon_tried_regions",
            "damon_apply_interval",
            "damon_quota_goals",
            "damon_migrate_actions",
        ] {
            assert_eq!(row(&f, name), (true, by), "{name}");
        }
        assert_eq!(
            row(&f, "damon_intervals_autotune"),
            (
                false,
                "needs Linux 6.15+; kernel version 6.12 (no kdamond to inspect)"
            )
        );
        assert_eq!(
            row(&f, "damon_goal_metrics"),
            (
                true,
                "user_input, some_mem_psi_us; node_mem_used_bp, node_mem_free_bp need Linux 6.16+; by \
                 kernel version 6.12 (no kdamond to inspect)"
            )
        );
        let (ok, ops) = row(&f, "damon_operations");
        assert!(!ok);
        assert!(
            ops.starts_with("unknown: no context's avail_operations"),
            "{ops}"
        );
    }

    #[test]
    fn no_damon_and_nothing_else_names_what_provides_each_row() {
        let dir = tree(&[("proc/sys/kernel/osrelease", "5.4.0\n")], &[]);
        let f = probe_read_only(dir.path());
        assert!(f.foreign_kdamonds.is_empty());
        for r in &f.features {
            assert!(!r.available, "{} {}", r.name, r.detail);
            assert!(r.detail.contains("needs"), "{} {}", r.name, r.detail);
            if r.name.starts_with("damon_") && r.name != "damon_stat" {
                assert_eq!(
                    r.detail,
                    "no DAMON sysfs: needs Linux 5.18+ with CONFIG_DAMON_SYSFS"
                );
            }
        }
        assert_eq!(
            row(&f, "process_madvise").1,
            "needs Linux 5.10+ with CONFIG_ADVISE_SYSCALLS; kernel version 5.4"
        );
        assert_eq!(
            f.features
                .iter()
                .filter(|r| r.name.starts_with("damon_") && r.name != "damon_stat")
                .count(),
            9
        );
        assert_eq!(
            row(&f, "damon_stat"),
            (
                false,
                "no /sys/module/damon_stat/parameters (needs Linux 6.17+ with CONFIG_DAMON_STAT; \
                 kernel version 5.4)"
            )
        );
        // Every kernel feature is listed, none available, each with why.
        assert_eq!(f.kernel_features.len(), KERNEL_FEATURES.len());
        for k in &f.kernel_features {
            assert!(!k.available, "{} {}", k.name, k.detail);
            assert!(k.detail.contains("needs Linux"), "{} {}", k.name, k.detail);
        }
        assert_eq!(
            kf(&f, "pause"),
            (
                false,
                "no DAMON sysfs: needs Linux 7.2+ with CONFIG_DAMON_SYSFS"
            )
        );
    }

    fn kf<'a>(f: &'a Features, name: &str) -> (bool, &'a str) {
        let k = f
            .kernel_features
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("no kernel feature {name}"));
        (k.available, &k.detail)
    }

    #[test]
    fn kernel_features_of_a_6_16_kernel_without_kdamonds_by_version() {
        let dir = tree(
            &[("proc/sys/kernel/osrelease", "6.16.2-arch1\n")],
            &[("kdamonds/nr_kdamonds", "0\n")],
        );
        let f = probe_read_only(dir.path());
        let names: Vec<&str> = f.kernel_features.iter().map(|k| k.name).collect();
        let table: Vec<&str> = KERNEL_FEATURES.iter().map(|k| k.name).collect();
        assert_eq!(names, table);
        let by = "by kernel version 6.16 (no kdamond to inspect)";
        for name in [
            "allow",
            "sz_ops_filter_passed",
            "core_filters",
            "intervals_goal",
            "nid",
        ] {
            assert_eq!(kf(&f, name), (true, by), "{name}");
        }
        for name in ["hugepage_size", "node_mem_used_bp"] {
            assert_eq!(kf(&f, name), (true, "by kernel version 6.16"), "{name}");
        }
        assert_eq!(
            kf(&f, "dests"),
            (
                false,
                "needs Linux 6.17+; kernel version 6.16 (no kdamond to inspect)"
            )
        );
        assert_eq!(
            kf(&f, "collapse"),
            (false, "needs Linux 7.2+; kernel version 6.16")
        );
        let no_stat = "no /sys/module/damon_stat/parameters (needs Linux 6.17+ with \
                       CONFIG_DAMON_STAT; kernel version 6.16)";
        assert_eq!(kf(&f, "damon_stat"), (false, no_stat));
        assert_eq!(row(&f, "damon_stat"), (false, no_stat));
        assert_eq!(
            kf(&f, "kdamond_pid"),
            (
                false,
                "no /sys/module/damon_stat/parameters: needs Linux 7.2+ with CONFIG_DAMON_STAT \
                 (kernel version 6.16)"
            )
        );
        assert_eq!(
            kf(&f, "damos_stat_after_apply_interval"),
            (
                false,
                "needs Linux 7.0+; kernel version 6.16 (no tracefs events/damon to inspect)"
            )
        );
        let v = serde_json::to_value(&f).unwrap();
        let k = &v["kernel_features"][0];
        assert_eq!(k["name"], "allow");
        assert_eq!(k["since"], "6.14");
        assert_eq!(k["available"], true);
        assert_eq!(k["detail"], by);
    }

    #[test]
    fn kernel_features_read_from_a_7_3_kdamond_tree() {
        let c = "kdamonds/0/contexts/0";
        let s = format!("{c}/schemes/0");
        let damon: Vec<(String, &str)> = [
            ("kdamonds/nr_kdamonds", "1\n"),
            ("kdamonds/0/state", "off\n"),
            ("kdamonds/0/refresh_ms", "0\n"),
            (&format!("{c}/avail_operations"), "vaddr\nfvaddr\npaddr\n"),
            (&format!("{c}/addr_unit"), "1\n"),
            (&format!("{c}/pause"), "N\n"),
            (
                &format!("{c}/monitoring_attrs/intervals/intervals_goal/access_bp"),
                "0\n",
            ),
            (&format!("{c}/targets/0/pid_target"), "0\n"),
            (&format!("{c}/targets/0/obsolete_target"), "N\n"),
            (&format!("{s}/action"), "stat\n"),
            (&format!("{s}/dests/nr_dests"), "0\n"),
            (&format!("{s}/core_filters/0/allow"), "N\n"),
            (&format!("{s}/ops_filters/nr_filters"), "0\n"),
            (&format!("{s}/filters/nr_filters"), "0\n"),
            (&format!("{s}/stats/sz_ops_filter_passed"), "0\n"),
            (&format!("{s}/stats/nr_snapshots"), "0\n"),
            (&format!("{s}/stats/max_nr_snapshots"), "0\n"),
            (&format!("{s}/quotas/goal_tuner"), "consist\n"),
            (&format!("{s}/quotas/fail_charge_num"), "0\n"),
            (&format!("{s}/quotas/fail_charge_denom"), "0\n"),
            (&format!("{s}/quotas/goals/0/target_metric"), "user_input\n"),
            (&format!("{s}/quotas/goals/0/nid"), "0\n"),
            (&format!("{s}/quotas/goals/0/path"), "\n"),
        ]
        .into_iter()
        .map(|(p, v)| (p.to_string(), v))
        .collect();
        let damon: Vec<(&str, &str)> = damon.iter().map(|(p, v)| (p.as_str(), *v)).collect();
        let files = [
            ("proc/sys/kernel/osrelease", "7.3.0\n"),
            ("sys/module/damon_stat/parameters/enabled", "Y\n"),
            ("sys/module/damon_stat/parameters/kdamond_pid", "91\n"),
            (
                "sys/kernel/tracing/events/damon/damos_stat_after_apply_interval/enable",
                "0\n",
            ),
        ];
        let dir = tree(&files, &damon);
        let f = probe_read_only(dir.path());
        for k in &f.kernel_features {
            assert!(k.available, "{} {}", k.name, k.detail);
        }
        assert_eq!(
            kf(&f, "dests"),
            (true, "kdamonds/0/contexts/0/schemes/0/dests present")
        );
        assert_eq!(
            kf(&f, "pause"),
            (true, "kdamonds/0/contexts/0/pause present")
        );
        assert_eq!(
            kf(&f, "allow"),
            (
                true,
                "kdamonds/0/contexts/0/schemes/0/core_filters/0/allow present"
            )
        );
        assert_eq!(kf(&f, "collapse"), (true, "by kernel version 7.3"));
        let stat = "/sys/module/damon_stat/parameters present: enabled, kdamond pid 91";
        assert_eq!(kf(&f, "damon_stat"), (true, stat));
        assert_eq!(row(&f, "damon_stat"), (true, stat));
        assert_eq!(
            kf(&f, "damos_stat_after_apply_interval"),
            (
                true,
                "/sys/kernel/tracing/events/damon/damos_stat_after_apply_interval present"
            )
        );

        // A tree without pause (a distribution kernel that lacks it), a
        // module without kdamond_pid, tracefs without the tracepoint.
        fs::remove_file(dir.path().join(format!("{ADMIN}/{c}/pause"))).unwrap();
        fs::remove_file(
            dir.path()
                .join("sys/module/damon_stat/parameters/kdamond_pid"),
        )
        .unwrap();
        fs::remove_dir_all(
            dir.path()
                .join("sys/kernel/tracing/events/damon/damos_stat_after_apply_interval"),
        )
        .unwrap();
        fs::write(
            dir.path().join("sys/module/damon_stat/parameters/enabled"),
            "N\n",
        )
        .unwrap();
        let f = probe_read_only(dir.path());
        assert_eq!(
            kf(&f, "pause"),
            (
                false,
                "kdamonds/0/contexts/0 has no pause: needs Linux 7.2+"
            )
        );
        assert_eq!(
            kf(&f, "kdamond_pid"),
            (
                false,
                "/sys/module/damon_stat/parameters has no kdamond_pid: needs Linux 7.2+"
            )
        );
        assert_eq!(
            kf(&f, "damos_stat_after_apply_interval"),
            (
                false,
                "/sys/kernel/tracing/events/damon has no damos_stat_after_apply_interval: needs \
                 Linux 7.0+"
            )
        );
        assert_eq!(
            row(&f, "damon_stat"),
            (
                true,
                "/sys/module/damon_stat/parameters present: disabled (udamon never enables it)"
            )
        );
        assert_eq!(f.kernel_features.iter().filter(|k| !k.available).count(), 3);
    }

    #[test]
    fn the_damon_stat_row_goes_by_config_then_version() {
        for (config, want) in [
            (
                "CONFIG_DAMON_STAT=m\n",
                "CONFIG_DAMON_STAT set but no /sys/module/damon_stat/parameters: the module is \
                 not loaded (modprobe damon_stat)",
            ),
            (
                "# CONFIG_DAMON_STAT is not set\n",
                "CONFIG_DAMON_STAT not set (needs Linux 6.17+ with CONFIG_DAMON_STAT)",
            ),
        ] {
            let dir = tree(
                &[
                    ("proc/sys/kernel/osrelease", "6.18.1\n"),
                    ("boot/config-6.18.1", config),
                ],
                &[],
            );
            assert_eq!(
                row(&probe_read_only(dir.path()), "damon_stat"),
                (false, want)
            );
        }
        let dir = tree(&[("proc/sys/kernel/osrelease", "6.18.1\n")], &[]);
        assert_eq!(
            row(&probe_read_only(dir.path()), "damon_stat"),
            (
                false,
                "no /sys/module/damon_stat/parameters (needs Linux 6.17+ with CONFIG_DAMON_STAT; \
                 kernel version 6.18, no kernel config to check)"
            )
        );
    }

    #[test]
    fn process_madvise_move_pages_and_machine_rows_by_config() {
        let node = "sys/devices/system/node";
        let numa_box = [
            ("proc/sys/kernel/osrelease", "6.1.0\n"),
            (
                "boot/config-6.1.0",
                "CONFIG_ADVISE_SYSCALLS=y\nCONFIG_NUMA=y\nCONFIG_MIGRATION=y\nCONFIG_TRANSPARENT_HUGEPAGE=y\n",
            ),
            (&format!("{node}/online"), "0-1\n"),
            (&format!("{node}/has_memory"), "0-1\n"),
            (&format!("{node}/node0/cpulist"), "0-3\n"),
            (&format!("{node}/node1/cpulist"), "\n"),
            ("sys/devices/virtual/memory_tiering/memory_tier4/nodelist", "0\n"),
            ("sys/devices/virtual/memory_tiering/memory_tier22/nodelist", "1\n"),
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never\n",
            ),
            (
                "proc/swaps",
                "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0  partition\t1048576\t12288\t100\n",
            ),
        ];
        let dir = tree(&numa_box, &[]);
        let f = probe_read_only(dir.path());
        assert_eq!(
            row(&f, "process_madvise"),
            (
                true,
                "pageout, cold, willneed, collapse; by kernel version 6.1, CONFIG_ADVISE_SYSCALLS \
                 set; other processes need CAP_SYS_NICE"
            )
        );
        assert_eq!(
            row(&f, "move_pages"),
            (
                true,
                "nodes with memory 0-1; CONFIG_NUMA set, CONFIG_MIGRATION set"
            )
        );
        assert_eq!(
            row(&f, "numa"),
            (
                true,
                "node 0 (cpus 0-3, memory), node 1 (no cpus, memory); memory tiers: 4 (nodes 0), 22 (nodes 1)"
            )
        );
        assert_eq!(row(&f, "transparent_hugepage"), (true, "enabled madvise"));
        assert_eq!(
            row(&f, "swap"),
            (true, "/dev/zram0 partition 1.0 GiB, 12.0 MiB used")
        );

        // Node lists no kernel has (a forged tree) are named, not expanded.
        let forged: Vec<(&str, &str)> = numa_box
            .iter()
            .map(|&(p, v)| match p.strip_prefix(node) {
                Some("/online" | "/has_memory") => (p, "0-4294967295\n"),
                _ => (p, v),
            })
            .collect();
        let dir = tree(&forged, &[]);
        let f = probe_read_only(dir.path());
        let beyond = "node list \"0-4294967295\" names node 4294967295, beyond the kernel's \
                      1024 nodes (MAX_NUMNODES)";
        assert_eq!(
            row(&f, "numa"),
            (false, format!("/{node}/online: {beyond}").as_str())
        );
        assert_eq!(
            row(&f, "move_pages"),
            (false, format!("/{node}/has_memory: {beyond}").as_str())
        );

        // Older kernel, one memory node, options off.
        let dir = tree(
            &[
                ("proc/sys/kernel/osrelease", "5.15.0\n"),
                (
                    "boot/config-5.15.0",
                    "CONFIG_ADVISE_SYSCALLS=y\nCONFIG_NUMA=y\nCONFIG_MIGRATION=y\n",
                ),
                (&format!("{node}/online"), "0-1\n"),
                (&format!("{node}/has_memory"), "0\n"),
            ],
            &[],
        );
        let f = probe_read_only(dir.path());
        assert_eq!(
            row(&f, "process_madvise").1,
            "pageout, cold, willneed; collapse needs Linux 6.1+ with CONFIG_TRANSPARENT_HUGEPAGE; \
             by kernel version 5.15, CONFIG_ADVISE_SYSCALLS set; other processes need CAP_SYS_NICE"
        );
        assert_eq!(
            row(&f, "move_pages"),
            (
                false,
                "needs 2+ NUMA nodes with memory to move pages between; nodes with memory: 0"
            )
        );
        let dir = tree(
            &[
                ("proc/sys/kernel/osrelease", "6.6.0\n"),
                (
                    "boot/config-6.6.0",
                    "# CONFIG_ADVISE_SYSCALLS is not set\n# CONFIG_NUMA is not set\n",
                ),
            ],
            &[],
        );
        let f = probe_read_only(dir.path());
        assert_eq!(
            row(&f, "process_madvise"),
            (
                false,
                "CONFIG_ADVISE_SYSCALLS not set (needs Linux 5.10+ with CONFIG_ADVISE_SYSCALLS)"
            )
        );
        assert_eq!(
            row(&f, "move_pages"),
            (
                false,
                "needs CONFIG_NUMA and CONFIG_MIGRATION (CONFIG_NUMA not set, CONFIG_MIGRATION not set)"
            )
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(version_of("6.12.0-rc1"), Some((6, 12)));
        assert_eq!(version_of("unknown"), None);
        assert_eq!(parse_list("0-2,4\n"), Ok(vec![0, 1, 2, 4]));
        assert_eq!(parse_list(""), Ok(Vec::<u32>::new()));
        assert_eq!(parse_list("0-1023"), Ok((0..1024).collect()));
        assert_eq!(
            parse_list("0-4294967295\n"),
            Err(
                "node list \"0-4294967295\" names node 4294967295, beyond the kernel's 1024 \
                 nodes (MAX_NUMNODES)"
                    .into()
            )
        );
        assert!(parse_list("0,1024").is_err());
        assert_eq!(
            listing(&[
                ("a", None),
                ("b", Some("X")),
                ("c", Some("X")),
                ("d", Some("Y"))
            ]),
            "a; b, c need X; d needs Y"
        );
    }

    fn snapshot_tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    out.push((p.clone(), None));
                    stack.push(p);
                } else {
                    out.push((p.clone(), Some(fs::read(&p).unwrap())));
                }
            }
        }
        out.sort();
        out
    }
}
