//! The service: jobs from a config, the metrics endpoint, the control
//! socket, signals (SIGHUP reloads, SIGTERM and SIGINT stop), systemd's
//! notifications and watchdog.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sd_notify::NotifyState;
use serde::Serialize;
use udamon_core::units::fmt_bytes;
use udamon_session::features::probe;
use udamon_session::{LiveTarget, Spec};

use crate::config::{ConfigError, Guardrails, JobPlan, Plan, TargetPlan};
use crate::job::{matching_pids, Env, Job};
use crate::log;
use crate::metrics::psi_some_avg10;
use crate::status::ServiceStatus;

/// How long jobs have to stop before our kdamond is turned off under them.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config, or a file it names, is refused (the user's to fix).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A job needs what this machine lacks (and is not optional).
    #[error("{0}")]
    Capability(String),
    /// The endpoint, the socket or a record directory could not be set
    /// up, or (`ctl_request`) the service's socket could not be reached.
    #[error("{0}")]
    Setup(String),
}

impl Error {
    /// A refused config is bad input, a missing capability is one, and a
    /// setup that failed is a runtime failure.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Config(_) => udamon_core::ErrorKind::Usage,
            Error::Capability(_) => udamon_core::ErrorKind::Capability,
            Error::Setup(_) => udamon_core::ErrorKind::Failure,
        }
    }
}

/// How the service runs.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// "/" in production; a fake tree in tests.
    pub root: PathBuf,
    /// Run as root on a config, scheme file or spec that another user
    /// could have written (refused by default; trust.rs).
    pub allow_insecure_files: bool,
}

/// Refuses, when running as root, a file of the plan that another user
/// could have written.
fn check_trust(plan: &Plan, opts: &Options) -> Result<(), Error> {
    if opts.allow_insecure_files || !crate::trust::running_as_root() {
        return Ok(());
    }
    for (path, what) in plan.files() {
        crate::trust::check(path, what, 0).map_err(|msg| ConfigError {
            file: plan.file.display().to_string(),
            msg,
        })?;
    }
    Ok(())
}

/// Reads the config and checks its files' trust.
fn load(config: &Path, opts: &Options) -> Result<Plan, Error> {
    let plan = Plan::load_on(config, &opts.root)?;
    check_trust(&plan, opts)?;
    Ok(plan)
}

enum Request {
    Reload(Option<Sender<Result<String, String>>>),
    /// Pause (true) or resume a job by name.
    Pause(String, bool, Sender<Result<String, String>>),
    Stop,
}

/// One job of `--check`'s plan.
#[derive(Debug, Serialize)]
pub struct JobCheck {
    pub name: String,
    pub target: String,
    /// Processes the target matches now (process sets and pids).
    pub processes: Vec<u32>,
    /// The path a session would take here, and why; or why it cannot run.
    pub path: Result<String, String>,
    pub because: String,
    /// When the soft-dirty path would reset the bits ("sample", "auto"...).
    pub softdirty_reset: String,
    pub attrs: udamon_core::Attrs,
    pub schemes: Vec<String>,
    pub guardrails: String,
    pub record: Option<String>,
    /// Skipped, not fatal, where it cannot run.
    pub optional: bool,
    /// Why it cannot run is a capability the machine lacks (exit 3), not
    /// a scheme the path refuses (exit 2).
    #[serde(skip)]
    pub missing_capability: bool,
}

/// What `udamon run --check` prints.
#[derive(Debug, Serialize)]
pub struct Check {
    pub config: String,
    pub listen: Option<String>,
    pub socket: String,
    pub jobs: Vec<JobCheck>,
    /// What would stop `udamon run` from starting (the endpoint, the
    /// socket, record directories), each with its fix.
    pub problems: Vec<String>,
}

/// How a check ends: what `--check` exits with and `run` refuses to start.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// A set-up problem (port, socket, record directory): exit 1.
    Setup,
    /// A job this machine cannot run: exit 3.
    Capability,
    /// A job whose schemes its path refuses: exit 2.
    Usage,
}

impl Check {
    /// Whether every job can run here and nothing stops the start.
    pub fn ok(&self) -> bool {
        self.verdict() == Verdict::Ok
    }

    /// The worst of what stops the start (optional jobs never do).
    pub fn verdict(&self) -> Verdict {
        let failing = || self.jobs.iter().filter(|j| j.path.is_err() && !j.optional);
        if failing().any(|j| !j.missing_capability) {
            Verdict::Usage
        } else if failing().next().is_some() {
            Verdict::Capability
        } else if !self.problems.is_empty() {
            Verdict::Setup
        } else {
            Verdict::Ok
        }
    }

    /// Every reason the start would fail, one per line.
    pub fn reasons(&self) -> String {
        let mut out: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| !j.optional)
            .filter_map(|j| {
                j.path
                    .as_ref()
                    .err()
                    .map(|e| format!("job {}: {e} (or mark the job optional = true)", j.name))
            })
            .collect();
        out.extend(self.problems.iter().cloned());
        out.join("\n")
    }
}

/// Validates the config and says what each job would do on this machine,
/// and whether the endpoint, the socket and the record directories can be
/// set up (each tried and released), changing nothing.
pub fn check(path: &Path, opts: &Options) -> Result<Check, Error> {
    let plan = load(path, opts)?;
    Ok(check_plan(&plan, opts))
}

fn check_plan(plan: &Plan, opts: &Options) -> Check {
    let path = &plan.file;
    let features = probe(&opts.root);
    let jobs = plan
        .jobs
        .iter()
        .map(|j| {
            let processes = match &j.target {
                TargetPlan::Pid(p) => vec![*p],
                t if t.is_set() => matching_pids(&opts.root, t),
                _ => Vec::new(),
            };
            let target = match &j.target {
                TargetPlan::Paddr => LiveTarget::Phys,
                TargetPlan::Node(n) => LiveTarget::Node(*n),
                TargetPlan::Sim { .. } => LiveTarget::Sim {
                    spec_text: String::new(),
                    origin: String::new(),
                    seed: None,
                    speed: None,
                },
                _ => LiveTarget::Pid(processes.first().copied().unwrap_or(0)),
            };
            let spec = Spec {
                target,
                ops: j.ops,
                root: opts.root.clone(),
                attrs: j.attrs,
                schemes: j.effective_schemes(),
                dry_run: j.guardrails.dry_run,
                duration_us: None,
                stop_on_exec: false,
                softdirty_reset: j.softdirty_reset,
                alloc_sites: None,
            hints: Vec::new(),
            kdamonds: None,
            warn: udamon_session::Warner::default(),
            };
            let result = udamon_session::plan(&spec, &features);
            let missing_capability =
                matches!(&result, Err(udamon_session::Error::Capability(_)));
            let (path, because) = match result {
                // A process set whose processes have not appeared yet
                // waits for them: no error, but said.
                Ok((p, b)) if j.target.is_set() && processes.is_empty() => (
                    Ok(p.to_string()),
                    format!("{b}; no process matches yet: it waits, and starts a session for each as it appears"),
                ),
                Ok((p, b)) => (Ok(p.to_string()), b),
                Err(e) => (Err(e.to_string()), String::new()),
            };
            JobCheck {
                name: j.name.clone(),
                target: j.target.label(),
                processes,
                path,
                because,
                softdirty_reset: j.softdirty_reset.to_string(),
                attrs: j.attrs,
                schemes: j
                    .effective_schemes()
                    .iter()
                    .zip(&j.scheme_origins)
                    .map(|(s, o)| format!("{} ({o})", udamon_scheme_file::describe(s)))
                    .collect(),
                guardrails: describe_guardrails(&j.guardrails),
                record: j.record.as_ref().map(|r| {
                    format!(
                        "{} (a file per {} s, at most {} in all)",
                        r.dir.display(),
                        r.rotate_us / 1_000_000,
                        fmt_bytes(r.max_total_bytes)
                    )
                }),
                optional: j.optional,
                missing_capability,
            }
        })
        .collect();
    Check {
        config: path.display().to_string(),
        listen: plan.listen.map(|l| l.to_string()),
        socket: plan.socket.display().to_string(),
        jobs,
        problems: setup_problems(plan),
    }
}

/// A job's guardrails in words, "none" without any.
fn describe_guardrails(g: &Guardrails) -> String {
    let mut guard = Vec::new();
    if let Some(a) = g.psi_pause_above {
        guard.push(format!(
            "pause above {a}% memory pressure, resume below {}%",
            g.psi_resume_below
        ));
    }
    if let Some(b) = g.max_bytes_per_second {
        guard.push(format!("at most {}/s per action", fmt_bytes(b)));
    }
    if let Some(s) = g.max_rss_share_per_minute {
        guard.push(format!(
            "page out at most {:.1}% of RSS a minute",
            s * 100.0
        ));
    }
    if g.dry_run {
        guard.push("dry run: actions only count".into());
    }
    if guard.is_empty() {
        "none".into()
    } else {
        guard.join("; ")
    }
}

/// Tries what `run` sets up before any job starts, releasing each: the
/// endpoint's address, the control socket's path, the record directories.
fn setup_problems(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(addr) = plan.listen {
        if let Err(e) = crate::http::bind(addr) {
            out.push(format!(
                "listen = \"{addr}\": cannot bind it: {e} (another program may use the port, \
                 or the address is not this machine's: change listen)"
            ));
        }
    }
    if let Err(e) = socket_ready(&plan.socket) {
        out.push(e);
    }
    for j in &plan.jobs {
        if let Some(r) = &j.record {
            if let Err(e) = record_dir_ready(&r.dir) {
                out.push(format!("job {}: record.dir: {e}", j.name));
            }
        }
    }
    out
}

/// Whether a record directory can be opened and written now: an
/// existing one gets a probe file created exclusively and removed, a
/// missing one needs its parent to exist (udamon creates no more).
fn record_dir_ready(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        let d = crate::records::RecordDir::open(dir)?;
        let (p, f) = d.create(".udamon-check", u64::from(std::process::id()), 0)?;
        drop(f);
        std::fs::remove_file(&p).map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
        return Ok(());
    }
    match dir.parent() {
        Some(parent) if parent.is_dir() => {
            // SAFETY: access has no memory effects; the C string is valid.
            let c = std::ffi::CString::new(parent.as_os_str().as_encoded_bytes())
                .map_err(|_| format!("{}: the path holds a NUL byte", dir.display()))?;
            if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
                return Err(format!(
                    "cannot create {}: {} is not writable",
                    dir.display(),
                    parent.display()
                ));
            }
            Ok(())
        }
        _ => Err(format!(
            "cannot create {}: its parent directory does not exist (udamon creates the record \
             directory itself, never its parents)",
            dir.display()
        )),
    }
}

fn notify(state: &[NotifyState]) {
    let _ = sd_notify::notify(false, state);
}

/// Runs the service until SIGTERM or SIGINT (or `stop` turning true).
pub fn run(config: &Path, opts: &Options, stop: Arc<AtomicBool>) -> Result<(), Error> {
    // Signals first: a stop asked for during the start is kept, not fatal.
    let (tx, rx) = channel::<Request>();
    start_signals(tx.clone(), opts.root.clone())?;
    let mut plan = load_checked(config, opts)?;
    clean_up_leftover(&opts.root);
    let env = service_env(config, opts);
    // Endpoint and socket next: a port in use fails the start, not later.
    let http = match plan.listen {
        Some(addr) => Some(crate::http::Endpoint::start(addr, &env).map_err(|e| {
            Error::Setup(format!(
                "cannot serve metrics on {addr}: {e} (another program may use the port: change \
                 listen)"
            ))
        })?),
        None => None,
    };
    let ctl = start_ctl(&plan.socket, &env, tx.clone())?;
    log::log(
        log::Level::Info,
        None,
        "udamon service starting",
        &[
            ("config", config.display().to_string()),
            ("jobs", plan.jobs.len().to_string()),
            (
                "listen",
                plan.listen
                    .map_or("off".into(), |a| format!("http://{a}/metrics")),
            ),
            ("socket", plan.socket.display().to_string()),
        ],
    );
    make_kdamonds(&plan, opts, &env);
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    for j in &plan.jobs {
        jobs.insert(j.name.clone(), Job::start(j.clone(), &env));
    }
    notify(&[NotifyState::Ready, NotifyState::Status("monitoring")]);
    serve(config, opts, &stop, &rx, &mut plan, &mut jobs, &env);
    notify(&[NotifyState::Stopping]);
    log::info(None, "stopping: every job ends its sessions");
    stop_jobs(jobs, &opts.root);
    if let Some(set) = env.kdamond_set() {
        if let Err(e) = set.remove() {
            log::warn(None, &format!("removing the service's kdamonds: {e}"));
        }
    }
    if let Some(h) = http {
        h.stop();
    }
    // Removes the socket udamon made, if it is still that one.
    drop(ctl);
    log::info(None, "stopped");
    Ok(())
}

/// Loads the config and checks it as `--check` does; a job this machine
/// cannot run is dropped (logged) when optional.
fn load_checked(config: &Path, opts: &Options) -> Result<Plan, Error> {
    let mut plan = load(config, opts)?;
    // Everything --check checks, before anything starts: a job this
    // machine cannot run stops the start (exit 3) unless it is optional.
    let checked = check_plan(&plan, opts);
    match checked.verdict() {
        Verdict::Ok => {}
        Verdict::Capability => return Err(Error::Capability(checked.reasons())),
        Verdict::Usage => {
            return Err(Error::Config(ConfigError {
                file: config.display().to_string(),
                msg: checked.reasons(),
            }))
        }
        Verdict::Setup => return Err(Error::Setup(checked.reasons())),
    }
    for j in checked.jobs.iter().filter(|j| j.optional) {
        if let Err(e) = &j.path {
            log::warn(
                Some(&j.name),
                &format!("optional job skipped: it cannot run on this machine: {e}"),
            );
            plan.jobs.retain(|p| p.name != j.name);
        }
    }
    Ok(plan)
}

/// How many of `plan`'s jobs run on kernel DAMON here, checked again at
/// the start (after a dead udamon's leftover kdamonds were removed, which
/// the first check saw in the way) and at each reload.
fn kernel_jobs(plan: &Plan, opts: &Options) -> usize {
    check_plan(plan, opts)
        .jobs
        .iter()
        .filter(|j| j.path.as_deref() == Ok("kdamond"))
        .count()
}

/// Makes the service's set of kdamonds, one for each job on kernel DAMON,
/// where it has none or where it has too few and none of them is held (the
/// kernel changes the number of kdamonds only while none runs). Where a
/// kdamond of another tool exists nothing is made, and the jobs say why
/// when they start.
fn make_kdamonds(plan: &Plan, opts: &Options, env: &Env) {
    let need = kernel_jobs(plan, opts);
    let mut slot = env.kdamonds.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(set) = slot.as_ref() {
        if set.nr() >= need {
            return;
        }
        if set.free() < set.nr() {
            log::warn(
                None,
                &format!(
                    "{need} jobs would run on kernel DAMON and the service has {} kdamonds, \
                     some of them running: the kernel adds kdamonds only while none runs, so \
                     the others use udamon's engine (ops = \"auto\") or fail to start \
                     (ops = \"kdamond\") until the service restarts",
                    set.nr()
                ),
            );
            return;
        }
        if let Err(e) = set.remove() {
            log::warn(None, &format!("removing the service's kdamonds: {e}"));
            return;
        }
        *slot = None;
    }
    if need == 0 {
        return;
    }
    let me = udamon_proc::start_time(&opts.root, std::process::id());
    match udamon_kdamon::KdamondSet::create(&opts.root, need, me) {
        Ok(set) => {
            log::info(
                None,
                &format!(
                    "made {need} kdamond{} for the jobs on kernel DAMON",
                    if need == 1 { "" } else { "s" }
                ),
            );
            *slot = Some(set);
        }
        Err(e) => log::warn(
            None,
            &format!("kernel DAMON's kdamonds cannot be made for the jobs: {e}"),
        ),
    }
}

/// The status every job shares, empty, and what the jobs read of the
/// machine.
fn service_env(config: &Path, opts: &Options) -> Env {
    let status = Arc::new(Mutex::new(ServiceStatus {
        version: env!("CARGO_PKG_VERSION").into(),
        config: config.display().to_string(),
        pid: std::process::id(),
        started_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        last_reload_ok: true,
        ..Default::default()
    }));
    Env {
        status,
        root: opts.root.clone(),
        features: Arc::new(probe(&opts.root)),
        psi: Arc::new(Mutex::new(psi_some_avg10(&opts.root))),
        kdamond: Arc::new(Mutex::new(None)),
        kdamonds: Arc::new(Mutex::new(None)),
        start_lock: Arc::new(Mutex::new(())),
    }
}

/// The service's loop until a stop: requests (reloads), the pressure
/// reading every 2 s, the watchdog's pings.
fn serve(
    config: &Path,
    opts: &Options,
    stop: &AtomicBool,
    rx: &Receiver<Request>,
    plan: &mut Plan,
    jobs: &mut BTreeMap<String, Job>,
    env: &Env,
) {
    let mut watchdog_us = 0;
    let watchdog = sd_notify::watchdog_enabled(false, &mut watchdog_us);
    let mut last_ping = Instant::now();
    let mut last_psi = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Request::Stop) => break,
            Ok(Request::Reload(reply)) => {
                let r = reload(config, opts, plan, jobs, env);
                if let Some(reply) = reply {
                    let _ = reply.send(r);
                }
            }
            Ok(Request::Pause(name, paused, reply)) => {
                let r = match jobs.get(&name) {
                    Some(j) => {
                        j.set_paused(paused);
                        Ok(name)
                    }
                    None => Err(format!(
                        "no job named \"{name}\" (jobs: {})",
                        jobs.keys().cloned().collect::<Vec<_>>().join(", ")
                    )),
                };
                let _ = reply.send(r);
            }
            Err(_) => {}
        }
        if last_psi.elapsed() >= Duration::from_secs(2) {
            last_psi = Instant::now();
            let v = psi_some_avg10(&opts.root);
            *env.psi.lock().unwrap_or_else(|e| e.into_inner()) = v;
            env.status().psi_some_avg10 = v;
        }
        if watchdog && last_ping.elapsed() >= Duration::from_micros(watchdog_us / 2) {
            last_ping = Instant::now();
            notify(&[NotifyState::Watchdog]);
        }
    }
}

/// Stops every job and waits for them, turning our kdamond off when a
/// session has not stopped after a grace period.
fn stop_jobs(jobs: BTreeMap<String, Job>, root: &Path) {
    for j in jobs.values() {
        j.request_stop();
    }
    // A session blocked in a kernel DAMON request (a tried-regions walk
    // waits for every scheme to be applied once) would hold the stop up:
    // after a grace period, turn our kdamond off, which ends the request.
    let stopped = Arc::new(AtomicBool::new(false));
    let (flag, root) = (Arc::clone(&stopped), root.to_path_buf());
    std::thread::spawn(move || {
        std::thread::sleep(STOP_GRACE);
        if !flag.load(Ordering::SeqCst)
            && udamon_kdamon::claim::turn_off_own(&root, &|pid| udamon_proc::start_time(&root, pid))
        {
            log::warn(
                None,
                &format!(
                    "a session did not stop within {} s (a kernel DAMON request blocked): \
                     turned our kdamond off",
                    STOP_GRACE.as_secs()
                ),
            );
        }
    });
    for (_, j) in jobs {
        j.stop();
    }
    stopped.store(true, Ordering::SeqCst);
}

/// Re-reads the config and applies the difference; a config that fails
/// validation changes nothing.
fn reload(
    config: &Path,
    opts: &Options,
    plan: &mut Plan,
    jobs: &mut BTreeMap<String, Job>,
    env: &Env,
) -> Result<String, String> {
    let monotonic = NotifyState::monotonic_usec_now().ok();
    let mut states = vec![NotifyState::Reloading];
    states.extend(monotonic);
    notify(&states);
    let result = match load(config, opts) {
        Err(e) => {
            let msg = format!("reload refused, the running configuration goes on: {e}");
            log::error(None, &msg);
            let mut st = env.status();
            st.reloads_failed += 1;
            st.last_reload_ok = false;
            st.last_reload_error = Some(msg.clone());
            Err(msg)
        }
        Ok(new) => {
            let mut said = Vec::new();
            if new.listen != plan.listen || new.socket != plan.socket {
                log::warn(
                    None,
                    "listen and socket changes take effect at the next start of the service",
                );
                said.push("listen/socket: at the next start".to_string());
            }
            let names: Vec<String> = jobs.keys().cloned().collect();
            for name in names {
                if !new.jobs.iter().any(|j| j.name == name) {
                    if let Some(j) = jobs.remove(&name) {
                        j.stop();
                    }
                    env.status().jobs.retain(|j| j.name != name);
                    log::info(Some(&name), "removed by the reload");
                    said.push(format!("{name}: removed"));
                }
            }
            make_kdamonds(&new, opts, env);
            for j in &new.jobs {
                let changed = |old: &JobPlan| old != j;
                match jobs.get_mut(&j.name) {
                    None => {
                        jobs.insert(j.name.clone(), Job::start(j.clone(), env));
                        said.push(format!("{}: added", j.name));
                    }
                    Some(old) if !changed(&old.plan) => {}
                    Some(old) if j.same_sessions(&old.plan) => {
                        old.reload(j.clone(), env);
                        log::info(
                            Some(&j.name),
                            "new attributes, schemes, guardrails or recording: applied online",
                        );
                        said.push(format!("{}: updated online", j.name));
                    }
                    Some(_) => {
                        if let Some(old) = jobs.remove(&j.name) {
                            old.stop();
                        }
                        jobs.insert(j.name.clone(), Job::start(j.clone(), env));
                        log::info(Some(&j.name), "new target or path: restarted");
                        said.push(format!("{}: restarted", j.name));
                    }
                }
            }
            *plan = new;
            let mut st = env.status();
            st.reloads_ok += 1;
            st.last_reload_ok = true;
            st.last_reload_error = None;
            if said.is_empty() {
                said.push("nothing changed".into());
            }
            log::info(None, &format!("reloaded: {}", said.join("; ")));
            Ok(said.join("\n"))
        }
    };
    notify(&[NotifyState::Ready]);
    result
}

/// The control socket udamon created: removed when dropped, if the path
/// still names that socket (a file put there since is left alone).
struct CtlSocket {
    path: PathBuf,
    id: (u64, u64),
}

impl Drop for CtlSocket {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The directory the unit owns (RuntimeDirectory=udamon), the one parent
/// udamon creates for its socket when it is missing.
fn own_socket_dir() -> &'static Path {
    Path::new(crate::config::DEFAULT_SOCKET)
        .parent()
        .expect("an absolute default")
}

/// Whether the control socket can be created at `path`: its directory
/// exists (or is the one udamon's own), and the path is free or a socket
/// nobody answers on. Creates and removes nothing.
fn socket_ready(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    match path.parent() {
        Some(dir) if dir.is_dir() => {}
        Some(dir) if dir == own_socket_dir() && dir.parent().is_some_and(Path::is_dir) => {}
        Some(dir) => {
            return Err(format!(
                "socket = \"{shown}\": directory {} does not exist; create it (mode 0700) or \
                 give a socket in an existing directory (udamon creates only {})",
                dir.display(),
                own_socket_dir().display()
            ))
        }
        None => return Err(format!("socket = \"{shown}\": give a file path")),
    }
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(()),
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                Err(format!(
                    "another udamon service answers on {shown}: stop it, or give this one \
                     another socket = \"PATH\""
                ))
            } else {
                Ok(())
            }
        }
        Ok(m) => Err(format!(
            "socket = \"{shown}\" exists and is {}, not a socket: udamon never replaces it; \
             remove it yourself or give another path",
            if m.is_dir() {
                "a directory"
            } else if m.file_type().is_symlink() {
                "a symbolic link"
            } else {
                "a file"
            }
        )),
    }
}

fn start_ctl(path: &Path, env: &Env, tx: Sender<Request>) -> Result<CtlSocket, Error> {
    use std::os::unix::fs::MetadataExt;
    socket_ready(path).map_err(Error::Setup)?;
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            // Only the unit's own directory (socket_ready said so).
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::Setup(format!("cannot create {}: {e}", dir.display())))?;
        }
    }
    // A stale socket of a service that died (socket_ready checked that it
    // is a socket nobody answers on).
    if std::fs::symlink_metadata(path).is_ok() {
        let _ = std::fs::remove_file(path);
    }
    // Created 0600 from the start: ctl's access is the socket's permission.
    // SAFETY: umask has no memory effects; nothing else creates files while
    // the service starts.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener =
        bound.map_err(|e| Error::Setup(format!("cannot listen on {}: {e}", path.display())))?;
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::Setup(format!("{}: {e}", path.display())))?;
    let socket = CtlSocket {
        path: path.to_path_buf(),
        id: (meta.dev(), meta.ino()),
    };
    let env = env.clone();
    std::thread::Builder::new()
        .name("ctl".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = answer(conn, &env, &tx);
            }
        })
        .map_err(|e| Error::Setup(format!("cannot start the control thread: {e}")))?;
    Ok(socket)
}

/// How long a pause or resume request waits for the job's sessions to
/// say they took it.
const PAUSE_WAIT: Duration = Duration::from_secs(15);

/// Asks the service loop to pause or resume job `name`, then waits for its
/// running sessions to show it in the status; the answer says how each
/// paused (kernel DAMON's context pause, the engine's, or actions only).
fn pause_request(env: &Env, tx: &Sender<Request>, name: &str, paused: bool) -> serde_json::Value {
    let verb = if paused { "pause" } else { "resume" };
    let (rtx, rrx): (_, Receiver<Result<String, String>>) = channel();
    let _ = tx.send(Request::Pause(name.to_string(), paused, rtx));
    match rrx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return serde_json::json!({ "ok": false, "message": e }),
        Err(_) => {
            return serde_json::json!({ "ok": false, "message": "the service did not answer within 10 s" })
        }
    }
    let started = Instant::now();
    loop {
        let sessions: Option<Vec<(u64, Option<String>)>> =
            env.status().jobs.iter().find(|j| j.name == name).map(|j| {
                j.workers
                    .iter()
                    .filter(|(_, w)| w.running())
                    .map(|(id, w)| (*id, w.paused.clone()))
                    .collect()
            });
        let sessions = sessions.unwrap_or_default();
        let done = sessions.iter().all(|(_, p)| p.is_some() == paused);
        if done || started.elapsed() >= PAUSE_WAIT {
            let lines: Vec<String> = sessions
                .iter()
                .map(|(id, p)| match p {
                    Some(how) => format!("session {id}: {how}"),
                    None => format!("session {id}: running"),
                })
                .collect();
            let message = match (done, sessions.is_empty()) {
                (_, true) => format!(
                    "job {name}: {verb}d; it has no running session now (one that starts \
                     keeps the request)"
                ),
                (true, false) => format!("job {name}: {verb}d\n{}", lines.join("\n")),
                (false, false) => format!(
                    "job {name}: {verb} requested, not yet taken by every session within {} s \
                     (see the log)\n{}",
                    PAUSE_WAIT.as_secs(),
                    lines.join("\n")
                ),
            };
            return serde_json::json!({ "ok": done, "message": message });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One control request: a line `status`, `reload`, `pause JOB` or
/// `resume JOB`; the answer is one JSON document.
fn answer(conn: UnixStream, env: &Env, tx: &Sender<Request>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let words: Vec<&str> = line.split_whitespace().collect();
    if let [verb @ ("pause" | "resume"), name] = words[..] {
        let reply = pause_request(env, tx, name, verb == "pause");
        let mut w = &conn;
        return writeln!(w, "{reply}");
    }
    let reply = match line.trim() {
        "status" => serde_json::to_value(&*env.status()).unwrap_or_default(),
        "reload" => {
            let (rtx, rrx): (_, Receiver<Result<String, String>>) = channel();
            let _ = tx.send(Request::Reload(Some(rtx)));
            match rrx.recv_timeout(Duration::from_secs(60)) {
                Ok(Ok(what)) => serde_json::json!({ "ok": true, "message": what }),
                Ok(Err(e)) => serde_json::json!({ "ok": false, "message": e }),
                Err(_) => {
                    serde_json::json!({ "ok": false, "message": "the service did not answer within 60 s" })
                }
            }
        }
        other => {
            serde_json::json!({ "ok": false, "message": format!("unknown request \"{other}\" (status, reload, pause JOB, resume JOB)") })
        }
    };
    let mut w = &conn;
    writeln!(w, "{reply}")
}

fn start_signals(tx: Sender<Request>, root: PathBuf) -> Result<(), Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM])
        .map_err(|e| Error::Setup(format!("cannot catch signals: {e}")))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut stopping = false;
            for sig in signals.forever() {
                match sig {
                    SIGHUP => {
                        log::info(None, "SIGHUP: reloading the configuration");
                        let _ = tx.send(Request::Reload(None));
                    }
                    _ if stopping => {
                        // A second stop signal while stopping: remove our
                        // kdamond, if any, and exit now.
                        log::warn(None, "second signal: exiting now");
                        force_cleanup(&root);
                        std::process::exit(130);
                    }
                    _ => {
                        stopping = true;
                        log::info(None, "stop requested");
                        let _ = tx.send(Request::Stop);
                    }
                }
            }
        })
        .map_err(|e| Error::Setup(format!("cannot start the signal thread: {e}")))?;
    Ok(())
}

/// A kdamond left by a udamon that died (a service killed by its
/// watchdog, say) would block kernel DAMON for this run: remove it when its
/// claim proves it udamon's, as `udamon cleanup` does; anything else is
/// left alone.
fn clean_up_leftover(root: &Path) {
    use udamon_kdamon::claim;
    let start = |pid| udamon_proc::start_time(root, pid);
    if let claim::Verdict::Leftover(c) = claim::judge(root, &start) {
        match claim::clean_up(root, &start) {
            Ok(_) => log::warn(
                None,
                &format!(
                    "removed kdamond 0, left by udamon pid {} that died (its claim proves it)",
                    c.udamon_pid
                ),
            ),
            Err(e) => log::warn(None, &format!("a kdamond left by udamon stays: {e}")),
        }
    }
}

/// Removes the kdamond this process created, if its claim says so.
fn force_cleanup(root: &Path) {
    use udamon_kdamon::claim;
    let me = std::process::id();
    let verdict = claim::judge(root, &|pid| udamon_proc::start_time(root, pid));
    if matches!(verdict, claim::Verdict::Running(c) if c.udamon_pid == me) {
        let _ = claim::remove_kdamond(root, me);
    }
}

/// Sends one request to a running service and returns its JSON answer.
pub fn ctl_request(socket: &Path, request: &str) -> Result<serde_json::Value, Error> {
    let conn = UnixStream::connect(socket).map_err(|e| {
        Error::Setup(format!(
            "cannot reach the udamon service at {}: {e} (is `udamon run` running? give its \
             socket with --socket)",
            socket.display()
        ))
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(90)))
        .map_err(|e| Error::Setup(e.to_string()))?;
    let mut w = &conn;
    writeln!(w, "{request}")
        .map_err(|e| Error::Setup(format!("writing to {}: {e}", socket.display())))?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .map_err(|e| Error::Setup(format!("reading from {}: {e}", socket.display())))?;
    serde_json::from_str(&line)
        .map_err(|e| Error::Setup(format!("the service's answer is not JSON: {e}")))
}
