//! The Prometheus endpoint's text: the service's status and the machine's
//! memory figures (NUMA nodes, tiering counters, pressure, DAMON_STAT's
//! estimates), in the text exposition format (version 0.0.4) encoded by
//! the `prometheus` crate.
//! A job is named by the `udamon_job` label: `job` is the label Prometheus
//! gives the scrape itself.

use std::path::Path;

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use udamon_kdamon::damon_stat::{self, DamonStat};

use crate::status::{JobStatus, ServiceStatus, WorkerStatus, IDLE_QUANTILES};

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Families under construction, in the order first seen.
#[derive(Default)]
struct Families(Vec<MetricFamily>);

impl Families {
    fn family(&mut self, name: &str, help: &str, kind: MetricType) -> &mut MetricFamily {
        if let Some(i) = self.0.iter().position(|f| f.name() == name) {
            return &mut self.0[i];
        }
        let mut f = MetricFamily::default();
        f.set_name(name.to_string());
        f.set_help(help.to_string());
        f.set_field_type(kind);
        self.0.push(f);
        self.0.last_mut().expect("just pushed")
    }

    fn push(&mut self, name: &str, help: &str, kind: MetricType, labels: &[(&str, &str)], v: f64) {
        let mut m = Metric::default();
        m.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut l = LabelPair::default();
                    l.set_name(k.to_string());
                    l.set_value(v.to_string());
                    l
                })
                .collect(),
        );
        match kind {
            MetricType::COUNTER => {
                let mut c = Counter::default();
                c.set_value(v);
                m.set_counter(c);
            }
            _ => {
                let mut g = Gauge::default();
                g.set_value(v);
                m.set_gauge(g);
            }
        }
        let f = self.family(name, help, kind);
        let mut all = f.take_metric();
        all.push(m);
        f.set_metric(all);
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        self.push(name, help, MetricType::GAUGE, labels, v);
    }

    fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        self.push(name, help, MetricType::COUNTER, labels, v);
    }
}

/// The machine's figures read at scrape time, under `root` ("/" in
/// production).
#[derive(Clone, Debug, Default)]
pub struct Machine {
    /// (node, used bytes, free bytes)
    pub nodes: Vec<(u32, u64, u64)>,
    /// (node, item, value) of pgpromote_*, pgdemote_*, pgmigrate_*.
    pub node_vmstat: Vec<(u32, String, u64)>,
    /// (item, value) of the same items in /proc/vmstat.
    pub vmstat: Vec<(String, u64)>,
    /// (kind, total stall seconds, avg10 share) for "some" and "full".
    pub psi: Vec<(String, f64, f64)>,
    pub cpu_s: f64,
    pub rss_bytes: u64,
    pub page_size: u64,
    /// DAMON_STAT's parameters, read only: `None` without the module,
    /// `Some(Err(why))` when they could not be read.
    pub damon_stat: Option<Result<DamonStat, String>>,
}

fn tiering_item(name: &str) -> bool {
    ["pgpromote_", "pgdemote_", "pgmigrate_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// `name value` lines of a vmstat file, tiering items only.
fn vmstat_items(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            tiering_item(k).then_some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// PSI lines: `some avg10=0.00 avg60=0.00 avg300=0.00 total=0`.
pub fn parse_psi(text: &str) -> Vec<(String, f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let kind = words.next()?.to_string();
            let (mut avg10, mut total) = (None, None);
            for w in words {
                if let Some(v) = w.strip_prefix("avg10=") {
                    avg10 = v.parse::<f64>().ok();
                } else if let Some(v) = w.strip_prefix("total=") {
                    total = v.parse::<u64>().ok();
                }
            }
            Some((kind, total? as f64 / 1e6, avg10? / 100.0))
        })
        .collect()
}

/// Memory pressure `some` avg10 (%), if the kernel has PSI.
pub fn psi_some_avg10(root: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(root.join("proc/pressure/memory")).ok()?;
    parse_psi(&text)
        .into_iter()
        .find(|p| p.0 == "some")
        .map(|p| p.2 * 100.0)
}

impl Machine {
    /// Reads what this machine has; what it lacks is left out.
    pub fn read(root: &Path) -> Machine {
        let mut m = Machine::default();
        let nodes_dir = root.join("sys/devices/system/node");
        let mut ids: Vec<u32> = std::fs::read_dir(&nodes_dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
            .collect();
        ids.sort_unstable();
        for n in ids {
            let dir = nodes_dir.join(format!("node{n}"));
            if let Ok(text) = std::fs::read_to_string(dir.join("meminfo")) {
                let field = |name: &str| {
                    text.lines()
                        .find(|l| l.split_whitespace().nth(2) == Some(name))
                        .and_then(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
                };
                if let (Some(total), Some(free)) = (field("MemTotal:"), field("MemFree:")) {
                    m.nodes
                        .push((n, (total - free.min(total)) * 1024, free * 1024));
                }
            }
            if let Ok(text) = std::fs::read_to_string(dir.join("vmstat")) {
                m.node_vmstat
                    .extend(vmstat_items(&text).into_iter().map(|(k, v)| (n, k, v)));
            }
        }
        if let Ok(text) = std::fs::read_to_string(root.join("proc/vmstat")) {
            m.vmstat = vmstat_items(&text);
        }
        if let Ok(text) = std::fs::read_to_string(root.join("proc/pressure/memory")) {
            m.psi = parse_psi(&text);
        }
        m.cpu_s = udamon_session::self_cpu_s();
        // SAFETY: sysconf has no preconditions.
        m.page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        let own = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        m.rss_bytes = udamon_proc::proc_field(&own, "VmRSS:").unwrap_or(0) * 1024;
        m.damon_stat = read_damon_stat(root);
        m
    }
}

/// The last DAMON_STAT read error logged, so that a scrape every few
/// seconds logs a lasting problem once (and again when it changes).
static DAMON_STAT_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// DAMON_STAT's parameters under `root`, read only; a read error is
/// logged once while it lasts.
pub fn read_damon_stat(root: &Path) -> Option<Result<DamonStat, String>> {
    let r = damon_stat::read(root)
        .map_err(|e| e.to_string())
        .transpose()?;
    let mut last = DAMON_STAT_ERROR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match &r {
        Err(e) if last.as_deref() != Some(e.as_str()) => {
            crate::log::warn(None, &format!("metrics: DAMON_STAT: {e}"));
            *last = Some(e.clone());
        }
        Err(_) => {}
        Ok(_) => *last = None,
    }
    Some(r)
}

/// DAMON_STAT's percentiles exported, as their `percentile` label says
/// them: "percentile" as DAMON_STAT and `udamon_job_idle_time_seconds`
/// name them, since Prometheus keeps the "quantile" label for summaries
/// (`promtool check metrics` refuses it on a gauge).
pub const DAMON_STAT_PERCENTILES: [(usize, &str); 11] = [
    (0, "0"),
    (1, "1"),
    (5, "5"),
    (10, "10"),
    (25, "25"),
    (50, "50"),
    (75, "75"),
    (90, "90"),
    (95, "95"),
    (99, "99"),
    (100, "100"),
];

/// One scrape's DAMON_STAT part alone, read under `root` and encoded (what
/// `udamon bench --only damon-stat` measures).
pub fn render_damon_stat(root: &Path) -> String {
    let mut f = Families::default();
    render_damon_stat_families(&mut f, &read_damon_stat(root));
    encode(&f)
}

/// DAMON_STAT's families: nothing without the module; when it cannot be
/// read, only `udamon_damon_stat_scrape_error` (1), as node_exporter's
/// textfile collector says a failed read.
fn render_damon_stat_families(f: &mut Families, stat: &Option<Result<DamonStat, String>>) {
    let Some(stat) = stat else { return };
    f.gauge(
        "udamon_damon_stat_scrape_error",
        "Whether DAMON_STAT's parameters could not be read at this scrape (1; its other series are then left out).",
        &[],
        f64::from(u8::from(stat.is_err())),
    );
    let Ok(s) = stat else { return };
    f.gauge(
        "udamon_damon_stat_enabled",
        "Whether the DAMON_STAT kernel module runs (1) or not (0); udamon only reads it.",
        &[],
        f64::from(u8::from(s.enabled)),
    );
    f.gauge(
        "udamon_damon_stat_memory_bandwidth_bytes_per_second",
        "DAMON_STAT's estimated memory bandwidth of all physical memory (estimated_memory_bandwidth).",
        &[],
        s.estimated_memory_bandwidth as f64,
    );
    for (p, label) in DAMON_STAT_PERCENTILES {
        if let Some(ms) = s.idle_ms(p) {
            f.gauge(
                "udamon_damon_stat_memory_idle_seconds",
                "DAMON_STAT's idle time of physical memory by size percentile (memory_idle_ms_percentiles): that share of memory has been idle at most this long; negative: accessed in the last aggregation interval, hot for that long.",
                &[("percentile", label)],
                ms as f64 / 1000.0,
            );
        }
    }
    if let Some(us) = s.aggr_interval_us {
        f.gauge(
            "udamon_damon_stat_aggr_interval_seconds",
            "DAMON_STAT's aggregation interval (aggr_interval_us, Linux 6.18+).",
            &[],
            us as f64 / 1e6,
        );
    }
    if let Some(pid) = s.kdamond_pid {
        f.gauge(
            "udamon_damon_stat_kdamond_pid",
            "The pid of DAMON_STAT's kdamond thread (kdamond_pid, Linux 7.2+), while it runs.",
            &[],
            f64::from(pid),
        );
    }
}

/// The endpoint's text for `status` and `machine`.
pub fn render(status: &ServiceStatus, machine: &Machine) -> String {
    let mut f = Families::default();
    for job in &status.jobs {
        render_job(&mut f, job);
    }
    render_machine(&mut f, machine);
    render_damon_stat_families(&mut f, &machine.damon_stat);
    render_service(&mut f, status);
    encode(&f)
}

/// The families in the text exposition format.
fn encode(f: &Families) -> String {
    let mut out = Vec::new();
    // Encoding into a Vec fails only on invalid names, which are ours.
    if let Err(e) = TextEncoder::new().encode(&f.0, &mut out) {
        return format!("# udamon: cannot encode the metrics: {e}\n");
    }
    String::from_utf8(out).unwrap_or_default()
}

/// A job's families: its sessions, their memory figures, its guardrails,
/// its schemes.
fn render_job(f: &mut Families, job: &JobStatus) {
    let running: Vec<_> = job.workers.values().filter(|w| w.running()).collect();
    render_job_sessions(f, job, &running);
    render_job_memory(f, job, &running);
    render_job_guardrails(f, job, &running);
    render_schemes(f, job);
}

/// The sum of `g` over a job's running sessions.
fn sum(running: &[&WorkerStatus], g: impl Fn(&WorkerStatus) -> f64) -> f64 {
    running.iter().map(|w| g(w)).sum::<f64>()
}

/// A job's state, path, sessions, snapshots, regions and intervals.
fn render_job_sessions(f: &mut Families, job: &JobStatus, running: &[&WorkerStatus]) {
    let j = job.name.as_str();
    let paths: Vec<&str> = {
        let mut p: Vec<&str> = job.workers.values().map(|w| w.path.as_str()).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    let path = if paths.is_empty() {
        "none".to_string()
    } else {
        paths.join(",")
    };
    f.gauge(
        "udamon_job_up",
        "Whether the job monitors now (1) or not (0: its target is gone, or it failed).",
        &[("udamon_job", j)],
        f64::from(u8::from(job.up())),
    );
    f.gauge(
        "udamon_job_info",
        "The job's path and target (value 1).",
        &[("udamon_job", j), ("path", &path), ("target", &job.target)],
        1.0,
    );
    f.gauge(
        "udamon_job_sessions",
        "Sessions of the job that monitor now (one per process for process sets).",
        &[("udamon_job", j)],
        running.len() as f64,
    );
    f.gauge(
        "udamon_job_paused_sessions",
        "Sessions of the job paused by `udamon ctl pause` (their regions and ages kept).",
        &[("udamon_job", j)],
        running.iter().filter(|w| w.paused.is_some()).count() as f64,
    );
    let snaps = job.retired_snapshots + job.workers.values().map(|w| w.snapshots).sum::<u64>();
    f.counter(
        "udamon_job_snapshots_total",
        "Aggregation windows seen.",
        &[("udamon_job", j)],
        snaps as f64,
    );
    f.gauge(
        "udamon_job_regions",
        "Monitoring regions in the last snapshot.",
        &[("udamon_job", j)],
        sum(running, |w| w.regions as f64),
    );
    if let Some(w) = running.first() {
        f.gauge(
            "udamon_job_sample_interval_seconds",
            "The sampling interval in use (the tuned one with auto_intervals).",
            &[("udamon_job", j)],
            w.sample_us as f64 / 1e6,
        );
        f.gauge(
            "udamon_job_aggregation_interval_seconds",
            "The aggregation interval in use (the tuned one with auto_intervals).",
            &[("udamon_job", j)],
            w.aggr_us as f64 / 1e6,
        );
    }
}

/// A job's working set, estimated bandwidth and idle time percentiles.
fn render_job_memory(f: &mut Families, job: &JobStatus, running: &[&WorkerStatus]) {
    let j = job.name.as_str();
    f.gauge(
        "udamon_job_wss_bytes",
        "Working set: bytes of the regions accessed in the last aggregation window.",
        &[("udamon_job", j)],
        sum(running, |w| w.wss_bytes as f64),
    );
    f.gauge(
            "udamon_job_estimated_bandwidth_bytes_per_second",
            "DAMON_STAT's estimated memory bandwidth: sum of region size times accesses per aggregation interval.",
            &[("udamon_job", j)],
            sum(running, |w| w.bandwidth_bytes_per_s),
        );
    render_processes(f, job, running);
    if let Some(q) = job.idle_quantiles() {
        for (quantile, v) in IDLE_QUANTILES.iter().zip(q) {
            // "percentile", as DAMON_STAT names them: Prometheus keeps
            // the "quantile" label for summaries.
            let p = format!("{}", (quantile * 100.0).round());
            f.gauge(
                    "udamon_job_idle_time_seconds",
                    "Idle time of memory by size percentile, as DAMON_STAT's memory_idle_ms_percentiles (negative: accessed, for that long).",
                    &[("udamon_job", j), ("percentile", &p)],
                    v,
                );
        }
    }
}

/// A process set's processes: the working set of each of the
/// `top_processes` largest, by pid and comm, and of the others summed
/// (`pid="other"`), so that a set of thousands of processes costs
/// `top_processes + 1` series.
fn render_processes(f: &mut Families, job: &JobStatus, running: &[&WorkerStatus]) {
    let mut all: Vec<&crate::status::ProcessStatus> =
        running.iter().flat_map(|w| w.processes.values()).collect();
    if all.is_empty() {
        return;
    }
    f.gauge(
        "udamon_job_processes",
        "Processes of the job's process set monitored now.",
        &[("udamon_job", &job.name)],
        all.len() as f64,
    );
    all.sort_by(|a, b| b.wss_bytes.cmp(&a.wss_bytes).then(a.pid.cmp(&b.pid)));
    let top = (job.top_processes as usize).min(all.len());
    let help = "Working set of a process of a process set (the largest top_processes; \
                pid=\"other\" sums the rest).";
    for p in &all[..top] {
        let pid = p.pid.to_string();
        f.gauge(
            "udamon_process_wss_bytes",
            help,
            &[("udamon_job", &job.name), ("pid", &pid), ("comm", &p.comm)],
            p.wss_bytes as f64,
        );
    }
    if all.len() > top {
        let rest: u64 = all[top..].iter().map(|p| p.wss_bytes).sum();
        f.gauge(
            "udamon_process_wss_bytes",
            help,
            &[("udamon_job", &job.name), ("pid", "other"), ("comm", "")],
            rest as f64,
        );
    }
}

/// A job's dry run, guardrails and CPU time.
fn render_job_guardrails(f: &mut Families, job: &JobStatus, running: &[&WorkerStatus]) {
    let j = job.name.as_str();
    f.gauge(
        "udamon_job_dry_run",
        "Whether the job's actions only count what they would do (1).",
        &[("udamon_job", j)],
        f64::from(u8::from(job.dry_run)),
    );
    for g in ["psi", "rss_share", "bytes_per_second"] {
        let paused = running.iter().any(|w| w.paused_by.iter().any(|p| p == g));
        f.gauge(
            "udamon_job_guardrail_paused",
            "Whether a guardrail holds the job's actions back now (1).",
            &[("udamon_job", j), ("guardrail", g)],
            f64::from(u8::from(paused)),
        );
        f.counter(
            "udamon_job_guardrail_trips_total",
            "Times a guardrail held the job's actions back.",
            &[("udamon_job", j), ("guardrail", g)],
            job.trips.get(g).copied().unwrap_or(0) as f64,
        );
    }
    f.counter(
        "udamon_job_cpu_seconds_total",
        "CPU time of the job's sessions (their threads, and their kdamond), in seconds.",
        &[("udamon_job", j)],
        job.workers.values().map(|w| w.cpu_s).sum(),
    );
}

/// The machine's families: NUMA nodes, tiering counters, pressure, page
/// size, and this process's CPU time and memory.
fn render_machine(f: &mut Families, machine: &Machine) {
    for (n, used, free) in &machine.nodes {
        let node = n.to_string();
        f.gauge(
            "udamon_node_memory_used_bytes",
            "Used memory of the NUMA node.",
            &[("node", &node)],
            *used as f64,
        );
        f.gauge(
            "udamon_node_memory_free_bytes",
            "Free memory of the NUMA node.",
            &[("node", &node)],
            *free as f64,
        );
    }
    for (n, item, v) in &machine.node_vmstat {
        f.counter(
            "udamon_node_vmstat_total",
            "Promotion, demotion and migration counters of the NUMA node's vmstat.",
            &[("node", &n.to_string()), ("item", item)],
            *v as f64,
        );
    }
    for (item, v) in &machine.vmstat {
        f.counter(
            "udamon_vmstat_total",
            "Promotion, demotion and migration counters of /proc/vmstat.",
            &[("item", item)],
            *v as f64,
        );
    }
    for (kind, total, avg10) in &machine.psi {
        f.counter(
            "udamon_psi_memory_stall_seconds_total",
            "Time tasks stalled on memory (PSI), in seconds.",
            &[("kind", kind)],
            *total,
        );
        f.gauge(
            "udamon_psi_memory_avg10_ratio",
            "Share of the last 10 seconds tasks stalled on memory (PSI avg10).",
            &[("kind", kind)],
            *avg10,
        );
    }
    f.gauge(
        "udamon_page_size_bytes",
        "The page size, the unit of the vmstat counters.",
        &[],
        machine.page_size as f64,
    );
    f.counter(
        "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.",
        &[],
        machine.cpu_s,
    );
    f.gauge(
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        &[],
        machine.rss_bytes as f64,
    );
}

/// The service's families: its version and its config reloads.
fn render_service(f: &mut Families, status: &ServiceStatus) {
    f.gauge(
        "udamon_build_info",
        "The udamon version (value 1).",
        &[("version", &status.version)],
        1.0,
    );
    f.counter(
        "udamon_config_reloads_total",
        "Config reloads, by result.",
        &[("result", "success")],
        status.reloads_ok as f64,
    );
    f.counter(
        "udamon_config_reloads_total",
        "Config reloads, by result.",
        &[("result", "failure")],
        status.reloads_failed as f64,
    );
    f.gauge(
        "udamon_config_last_reload_success",
        "Whether the last config reload succeeded (1; also 1 before any).",
        &[],
        f64::from(u8::from(status.last_reload_ok)),
    );
}

fn render_schemes(f: &mut Families, job: &JobStatus) {
    use crate::status::SchemeStatus;
    // Per scheme index: totals over every session, and the retired ones.
    let mut by_index: std::collections::BTreeMap<usize, Vec<&SchemeStatus>> = Default::default();
    for w in job.workers.values() {
        for s in &w.schemes {
            by_index.entry(s.index).or_default().push(s);
        }
    }
    for s in &job.retired {
        by_index.entry(s.index).or_default().push(s);
    }
    let running: Vec<_> = job.workers.values().filter(|w| w.running()).collect();
    for (index, list) in by_index {
        let first = list[0];
        let idx = index.to_string();
        let labels = [
            ("udamon_job", job.name.as_str()),
            ("scheme", idx.as_str()),
            ("action", first.action.as_str()),
        ];
        let total = |g: fn(&SchemeStatus) -> u64| list.iter().map(|s| g(s)).sum::<u64>() as f64;
        f.counter(
            "udamon_scheme_tried_bytes_total",
            "Bytes of regions the scheme's access pattern matched.",
            &labels,
            total(|s| s.tried_bytes),
        );
        f.counter(
            "udamon_scheme_tried_regions_total",
            "Regions the scheme's access pattern matched.",
            &labels,
            total(|s| s.tried_regions),
        );
        f.counter(
            "udamon_scheme_applied_bytes_total",
            "Bytes the scheme's action was applied to.",
            &labels,
            total(|s| s.applied_bytes),
        );
        f.counter(
            "udamon_scheme_applied_regions_total",
            "Regions the scheme's action was applied to.",
            &labels,
            total(|s| s.applied_regions),
        );
        f.counter(
            "udamon_scheme_quota_exceeds_total",
            "Times the scheme's quota ran out in a quota window.",
            &labels,
            total(|s| s.quota_exceeds),
        );
        f.counter(
            "udamon_scheme_would_apply_bytes_total",
            "Dry runs: bytes the action would have been applied to.",
            &labels,
            total(|s| s.would_apply_bytes),
        );
        let live: Vec<&SchemeStatus> = running
            .iter()
            .filter_map(|w| w.schemes.iter().find(|s| s.index == index))
            .collect();
        let quotas: Vec<u64> = live
            .iter()
            .filter_map(|s| s.effective_quota_bytes)
            .collect();
        if !quotas.is_empty() {
            f.gauge(
                "udamon_scheme_effective_quota_bytes",
                "The size quota of the current quota window, summed over the job's sessions.",
                &labels,
                quotas.iter().sum::<u64>() as f64,
            );
        }
        let active: Vec<bool> = live.iter().filter_map(|s| s.active).collect();
        if !active.is_empty() {
            f.gauge(
                "udamon_scheme_active",
                "Whether the scheme's watermarks let it run (1) in any session.",
                &labels,
                f64::from(u8::from(active.iter().any(|a| *a))),
            );
        }
        if let Some(s) = live.first() {
            for (gi, g) in s.goals.iter().enumerate() {
                let gi = gi.to_string();
                let mut l = labels.to_vec();
                l.push(("goal", &gi));
                l.push(("metric", &g.metric));
                f.gauge(
                    "udamon_scheme_goal_target_value",
                    "The quota goal's target value.",
                    &l,
                    g.target as f64,
                );
                if let Some(c) = g.current {
                    f.gauge(
                        "udamon_scheme_goal_current_value",
                        "The quota goal's current value.",
                        &l,
                        c as f64,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{JobStatus, SchemeStatus, WorkerStatus};

    #[test]
    fn psi_lines_parse() {
        let p = parse_psi(
            "some avg10=12.50 avg60=1.00 avg300=0.00 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        );
        assert_eq!(p[0], ("some".into(), 2.5, 0.125));
        assert_eq!(p[1].0, "full");
    }

    #[test]
    fn the_text_follows_the_exposition_format() {
        let mut job = JobStatus {
            name: "db".into(),
            target: "comm redis-server".into(),
            ..Default::default()
        };
        let mut w = WorkerStatus {
            pid: 7,
            path: "idle".into(),
            state: "running".into(),
            aggr_us: 100_000,
            sample_us: 5_000,
            ..Default::default()
        };
        w.schemes.push(SchemeStatus {
            index: 0,
            action: "pageout".into(),
            applied_bytes: 4096,
            ..Default::default()
        });
        job.workers.insert(7, w);
        let status = ServiceStatus {
            version: "0.1.0".into(),
            jobs: vec![job],
            last_reload_ok: true,
            ..Default::default()
        };
        let text = render(&status, &Machine::default());
        assert!(
            !text.contains("udamon_process_wss_bytes"),
            "not a process set"
        );
        for want in [
            "# TYPE udamon_scheme_applied_bytes_total counter",
            "udamon_scheme_applied_bytes_total{udamon_job=\"db\",scheme=\"0\",action=\"pageout\"} 4096",
            "udamon_job_up{udamon_job=\"db\"} 1",
            "udamon_job_aggregation_interval_seconds{udamon_job=\"db\"} 0.1",
            "udamon_build_info{version=\"0.1.0\"} 1",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }

    /// A fake root with DAMON_STAT's files (6.18+ negatives, 7.2+ pid).
    fn damon_stat_root(percentiles: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(damon_stat::PARAMETERS);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in [
            ("enabled", "Y\n"),
            ("estimated_memory_bandwidth", "1234567890\n"),
            ("memory_idle_ms_percentiles", percentiles),
            ("aggr_interval_us", "100000\n"),
            ("kdamond_pid", "77\n"),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
        }
        root
    }

    fn percentiles() -> String {
        // p0..p4 accessed (hot for 500..100 ms), then i * 1500 ms idle.
        let v: Vec<String> = (0..101i64)
            .map(|i| if i < 5 { -(5 - i) * 100 } else { i * 1500 + 1 })
            .map(|v| v.to_string())
            .collect();
        v.join(",") + "\n"
    }

    #[test]
    fn damon_stat_is_exported_as_read() {
        let root = damon_stat_root(&percentiles());
        let m = Machine {
            damon_stat: read_damon_stat(root.path()),
            ..Machine::default()
        };
        let text = render(&ServiceStatus::default(), &m);
        for want in [
            "# TYPE udamon_damon_stat_enabled gauge",
            "udamon_damon_stat_enabled 1",
            "udamon_damon_stat_memory_bandwidth_bytes_per_second 1234567890",
            "# TYPE udamon_damon_stat_memory_idle_seconds gauge",
            "udamon_damon_stat_memory_idle_seconds{percentile=\"0\"} -0.5",
            "udamon_damon_stat_memory_idle_seconds{percentile=\"1\"} -0.4",
            "udamon_damon_stat_memory_idle_seconds{percentile=\"5\"} 7.501",
            "udamon_damon_stat_memory_idle_seconds{percentile=\"50\"} 75.001",
            "udamon_damon_stat_memory_idle_seconds{percentile=\"99\"} 148.501",
            "udamon_damon_stat_memory_idle_seconds{percentile=\"100\"} 150.001",
            "udamon_damon_stat_aggr_interval_seconds 0.1",
            "udamon_damon_stat_kdamond_pid 77",
            "udamon_damon_stat_scrape_error 0",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
        let percentiles = text
            .lines()
            .filter(|l| l.starts_with("udamon_damon_stat_memory_idle_seconds{"))
            .count();
        assert_eq!(percentiles, 11);
        // The part alone, as the bench measures it, is the same lines.
        let part = render_damon_stat(root.path());
        for l in part.lines() {
            assert!(text.contains(l), "{l}");
        }
        // Optional files missing (6.17): no interval, no pid.
        std::fs::remove_file(root.path().join(damon_stat::PARAMETERS).join("kdamond_pid")).unwrap();
        std::fs::remove_file(
            root.path()
                .join(damon_stat::PARAMETERS)
                .join("aggr_interval_us"),
        )
        .unwrap();
        let part = render_damon_stat(root.path());
        assert!(part.contains("udamon_damon_stat_enabled 1"), "{part}");
        assert!(!part.contains("kdamond_pid") && !part.contains("aggr_interval"));
    }

    #[test]
    fn no_damon_stat_series_without_the_module_or_when_unreadable() {
        let root = tempfile::tempdir().unwrap();
        assert!(read_damon_stat(root.path()).is_none());
        assert_eq!(render_damon_stat(root.path()), "");
        let text = render(&ServiceStatus::default(), &Machine::read(root.path()));
        assert!(!text.contains("udamon_damon_stat"), "{text}");
        // A damaged file: the error gauge alone.
        let root = damon_stat_root("1,2,3\n");
        let part = render_damon_stat(root.path());
        assert_eq!(
            part.lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>(),
            ["udamon_damon_stat_scrape_error 1"],
            "{part}"
        );
        match read_damon_stat(root.path()) {
            Some(Err(e)) => assert!(e.contains("memory_idle_ms_percentiles holds"), "{e}"),
            r => panic!("{r:?}"),
        }
    }

    /// A process set's processes: the largest working sets get a series
    /// each, the others one summed series, so cardinality stays bounded.
    #[test]
    fn per_process_series_are_bounded() {
        use crate::status::ProcessStatus;
        let mut w = WorkerStatus {
            state: "running".into(),
            ..Default::default()
        };
        for i in 0..50u32 {
            w.processes.insert(
                i,
                ProcessStatus {
                    pid: 1000 + i,
                    comm: "postgres".into(),
                    wss_bytes: u64::from(i) * 4096,
                },
            );
        }
        let mut job = JobStatus {
            name: "pg".into(),
            top_processes: 3,
            ..Default::default()
        };
        job.workers.insert(0, w);
        let status = ServiceStatus {
            jobs: vec![job],
            ..Default::default()
        };
        let text = render(&status, &Machine::default());
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("udamon_process_wss_bytes{"))
            .collect();
        assert_eq!(series.len(), 4, "{series:?}");
        assert!(text.contains(
            "udamon_process_wss_bytes{udamon_job=\"pg\",pid=\"1049\",comm=\"postgres\"} 200704"
        ));
        // 0..=46 pages summed: 46 * 47 / 2 pages.
        let rest = 46 * 47 / 2 * 4096;
        assert!(text.contains(&format!(
            "udamon_process_wss_bytes{{udamon_job=\"pg\",pid=\"other\",comm=\"\"}} {rest}"
        )));
        assert!(text.contains("udamon_job_processes{udamon_job=\"pg\"} 50"));
    }
}
