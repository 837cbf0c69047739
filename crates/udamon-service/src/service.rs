//! The service: jobs from a config, the metrics endpoint, the control
//! socket, signals (SIGHUP reloads, SIGTERM and SIGINT stop), systemd's
//! notifications and watchdog.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sd_notify::NotifyState;
use serde::Serialize;
use udamon_report::fmt_bytes;
use udamon_session::features::probe;
use udamon_session::{LiveTarget, Spec};

use crate::config::{ConfigError, JobPlan, Plan, TargetPlan};
use crate::job::{matching_pids, Env, Job};
use crate::log;
use crate::metrics::{psi_some_avg10, render, Machine, CONTENT_TYPE};
use crate::status::ServiceStatus;

/// How long jobs have to stop before our kdamond is turned off under them.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The endpoint or the socket could not be set up.
    #[error("{0}")]
    Setup(String),
}

/// How the service runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// "/" in production; a fake tree in tests.
    pub root: PathBuf,
}

enum Request {
    Reload(Option<Sender<Result<String, String>>>),
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
}

/// What `udamon run --check` prints.
#[derive(Debug, Serialize)]
pub struct Check {
    pub config: String,
    pub listen: Option<String>,
    pub socket: String,
    pub jobs: Vec<JobCheck>,
}

impl Check {
    /// Whether every job can run here.
    pub fn ok(&self) -> bool {
        self.jobs.iter().all(|j| j.path.is_ok())
    }
}

/// Validates the config and says what each job would do on this machine,
/// touching nothing.
pub fn check(path: &Path, opts: &Options) -> Result<Check, ServiceError> {
    let plan = Plan::load_on(path, &opts.root)?;
    let features = probe(&opts.root);
    let mut kdamond_taken = false;
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
                warn: udamon_session::Warner::default(),
            };
            let mut result = udamon_session::plan(&spec, &features);
            if let Ok(("kdamond", _)) = &result {
                if kdamond_taken {
                    result = Err(udamon_session::SessionError::Capability(
                        "kernel DAMON would already be held by an earlier job (udamon drives \
                         one kdamond): give this job ops = \"idle\""
                            .into(),
                    ));
                }
                kdamond_taken = true;
            }
            let (path, because) = match result {
                Ok((p, b)) => (Ok(p.to_string()), b),
                Err(e) => (Err(e.to_string()), String::new()),
            };
            let g = &j.guardrails;
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
                guardrails: if guard.is_empty() {
                    "none".into()
                } else {
                    guard.join("; ")
                },
                record: j.record.as_ref().map(|r| {
                    format!(
                        "{} (a file per {} s, at most {} in all)",
                        r.dir.display(),
                        r.rotate_us / 1_000_000,
                        fmt_bytes(r.max_total_bytes)
                    )
                }),
            }
        })
        .collect();
    Ok(Check {
        config: path.display().to_string(),
        listen: plan.listen.map(|l| l.to_string()),
        socket: plan.socket.display().to_string(),
        jobs,
    })
}

fn notify(state: &[NotifyState]) {
    let _ = sd_notify::notify(false, state);
}

/// Runs the service until SIGTERM or SIGINT (or `stop` turning true).
pub fn run(config: &Path, opts: &Options, stop: Arc<AtomicBool>) -> Result<(), ServiceError> {
    // Signals first: a stop asked for during the start is kept, not fatal.
    let (tx, rx) = channel::<Request>();
    start_signals(tx.clone(), opts.root.clone())?;
    let plan = Plan::load_on(config, &opts.root)?;
    clean_up_leftover(&opts.root);
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
    let env = Env {
        status: Arc::clone(&status),
        root: opts.root.clone(),
        features: Arc::new(probe(&opts.root)),
        psi: Arc::new(Mutex::new(psi_some_avg10(&opts.root))),
        kdamond: Arc::new(Mutex::new(None)),
        start_lock: Arc::new(Mutex::new(())),
    };
    // Endpoint and socket next: a port in use fails the start, not later.
    let http = match plan.listen {
        Some(addr) => Some(start_http(addr, &env)?),
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
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    for j in &plan.jobs {
        jobs.insert(j.name.clone(), Job::start(j.clone(), &env));
    }
    let mut plan = plan;
    notify(&[NotifyState::Ready, NotifyState::Status("monitoring")]);
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
                let r = reload(config, &mut plan, &mut jobs, &env);
                if let Some(reply) = reply {
                    let _ = reply.send(r);
                }
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
    notify(&[NotifyState::Stopping]);
    log::info(None, "stopping: every job ends its sessions");
    for j in jobs.values() {
        j.request_stop();
    }
    // A session blocked in a kernel DAMON request (a tried-regions walk
    // waits for every scheme to be applied once) would hold the stop up:
    // after a grace period, turn our kdamond off, which ends the request.
    let stopped = Arc::new(AtomicBool::new(false));
    let (flag, root) = (Arc::clone(&stopped), opts.root.clone());
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
    if let Some(h) = http {
        h.unblock();
    }
    drop(ctl);
    let _ = std::fs::remove_file(&plan.socket);
    log::info(None, "stopped");
    Ok(())
}

/// Re-reads the config and applies the difference; a config that fails
/// validation changes nothing.
fn reload(
    config: &Path,
    plan: &mut Plan,
    jobs: &mut BTreeMap<String, Job>,
    env: &Env,
) -> Result<String, String> {
    let monotonic = NotifyState::monotonic_usec_now().ok();
    let mut states = vec![NotifyState::Reloading];
    states.extend(monotonic);
    notify(&states);
    let result = match Plan::load_on(config, &env.root) {
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
                            "new attributes, schemes or guardrails: applied online",
                        );
                        said.push(format!("{}: updated online", j.name));
                    }
                    Some(_) => {
                        if let Some(old) = jobs.remove(&j.name) {
                            old.stop();
                        }
                        jobs.insert(j.name.clone(), Job::start(j.clone(), env));
                        log::info(Some(&j.name), "new target, path or recording: restarted");
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

fn start_http(
    addr: std::net::SocketAddr,
    env: &Env,
) -> Result<Arc<tiny_http::Server>, ServiceError> {
    let server = tiny_http::Server::http(addr).map_err(|e| {
        ServiceError::Setup(format!(
            "cannot serve metrics on {addr}: {e} (another program may use the port: change \
             listen)"
        ))
    })?;
    let server = Arc::new(server);
    let s = Arc::clone(&server);
    let env = env.clone();
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for req in s.incoming_requests() {
                let url = req.url().to_string();
                let resp = if url == "/metrics" || url.starts_with("/metrics?") {
                    let status = env.status().clone();
                    let text = render(&status, &Machine::read(&env.root));
                    tiny_http::Response::from_string(text).with_header(
                        tiny_http::Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes())
                            .expect("a valid header"),
                    )
                } else if url == "/" {
                    tiny_http::Response::from_string(
                        "<html><body><h1>udamon</h1><p><a href=\"/metrics\">metrics</a></p></body></html>",
                    )
                    .with_header(
                        tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"text/html"[..])
                            .expect("a valid header"),
                    )
                } else {
                    tiny_http::Response::from_string("not found: try /metrics\n")
                        .with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        })
        .map_err(|e| ServiceError::Setup(format!("cannot start the metrics thread: {e}")))?;
    Ok(server)
}

/// Removes the socket file when dropped.
struct CtlSocket(PathBuf);

impl Drop for CtlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn start_ctl(path: &Path, env: &Env, tx: Sender<Request>) -> Result<CtlSocket, ServiceError> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|e| {
                ServiceError::Setup(format!("cannot create {}: {e}", dir.display()))
            })?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    if path.exists() {
        // A live service answers on it; a dead one left the file.
        if UnixStream::connect(path).is_ok() {
            return Err(ServiceError::Setup(format!(
                "another udamon service answers on {}: stop it, or give this one another \
                 socket = \"PATH\"",
                path.display()
            )));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| ServiceError::Setup(format!("cannot listen on {}: {e}", path.display())))?;
    // Root only by default (the directory is 0700 too).
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    let env = env.clone();
    std::thread::Builder::new()
        .name("ctl".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = answer(conn, &env, &tx);
            }
        })
        .map_err(|e| ServiceError::Setup(format!("cannot start the control thread: {e}")))?;
    Ok(CtlSocket(path.to_path_buf()))
}

/// One control request: a line `status` or `reload`; the answer is one
/// JSON document.
fn answer(conn: UnixStream, env: &Env, tx: &Sender<Request>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
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
            serde_json::json!({ "ok": false, "message": format!("unknown request \"{other}\" (status, reload)") })
        }
    };
    let mut w = &conn;
    writeln!(w, "{reply}")
}

fn start_signals(tx: Sender<Request>, root: PathBuf) -> Result<(), ServiceError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM])
        .map_err(|e| ServiceError::Setup(format!("cannot catch signals: {e}")))?;
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
        .map_err(|e| ServiceError::Setup(format!("cannot start the signal thread: {e}")))?;
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
pub fn ctl_request(socket: &Path, request: &str) -> Result<serde_json::Value, String> {
    let conn = UnixStream::connect(socket).map_err(|e| {
        format!(
            "cannot reach the udamon service at {}: {e} (is `udamon run` running? give its \
             socket with --socket)",
            socket.display()
        )
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(90)))
        .map_err(|e| e.to_string())?;
    let mut w = &conn;
    writeln!(w, "{request}").map_err(|e| format!("writing to {}: {e}", socket.display()))?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .map_err(|e| format!("reading from {}: {e}", socket.display()))?;
    serde_json::from_str(&line).map_err(|e| format!("the service's answer is not JSON: {e}"))
}
