//! A job's threads: a supervisor that finds the job's processes (for
//! process sets, as they come and go) and one worker per session, which
//! steps its [`Session`], keeps the job's status, enforces the guardrails,
//! takes reloads and writes the rotating record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use udamon_record::{TargetEvent, Writer};
use udamon_session::features::Features;
use udamon_session::{
    path_blocker, Event, FileWriter, LiveTarget, OpsChoice, Recorder, SchemeReport, Session,
    SessionInfo, Spec,
};

use crate::config::{JobPlan, TargetPlan};
use crate::guard::{Breaker, RssBudget};
use crate::log;
use crate::records::RecordDir;
use crate::status::{GoalStatus, JobStatus, SchemeStatus, ServiceStatus, WorkerStatus};

/// What every job shares: the status, the machine's root and features,
/// the memory pressure reading, and who holds kernel DAMON.
#[derive(Clone)]
pub struct Env {
    pub status: Arc<Mutex<ServiceStatus>>,
    pub root: PathBuf,
    pub features: Arc<Features>,
    /// PSI memory `some` avg10 (%), refreshed by the service.
    pub psi: Arc<Mutex<Option<f64>>>,
    /// The job and session holding kdamond 0, if any, where the service
    /// has no set of kdamonds.
    pub kdamond: Arc<Mutex<Option<(String, u64)>>>,
    /// The service's set of kdamonds (one for each job on kernel DAMON,
    /// made at the start or a reload): a session on kernel DAMON takes a
    /// free one.
    pub kdamonds: Arc<Mutex<Option<Arc<udamon_kdamon::KdamondSet>>>>,
    /// Sessions start one at a time (path choice sees who holds kdamond).
    pub start_lock: Arc<Mutex<()>>,
}

impl Env {
    /// The service's set of kdamonds, if it made one.
    pub fn kdamond_set(&self) -> Option<Arc<udamon_kdamon::KdamondSet>> {
        self.kdamonds.lock().ok().and_then(|k| k.clone())
    }

    pub fn status(&self) -> MutexGuard<'_, ServiceStatus> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with_job<R>(&self, name: &str, f: impl FnOnce(&mut JobStatus) -> R) -> Option<R> {
        self.status()
            .jobs
            .iter_mut()
            .find(|j| j.name == name)
            .map(f)
    }
}

/// A running job: its supervisor thread and what steers it.
pub struct Job {
    pub plan: JobPlan,
    ctl: Arc<JobCtl>,
    thread: Option<JoinHandle<()>>,
}

/// Requests to a job's threads.
#[derive(Default)]
struct JobCtl {
    stop: AtomicBool,
    /// A new plan for the running sessions (same target and path).
    reload: Mutex<Option<JobPlan>>,
    /// Paused by `udamon ctl pause` (until `resume`).
    paused: AtomicBool,
}

impl Job {
    /// Starts the job's threads; its status appears in `env` at once.
    pub fn start(plan: JobPlan, env: &Env) -> Job {
        {
            let mut st = env.status();
            st.jobs.retain(|j| j.name != plan.name);
            st.jobs.push(JobStatus {
                name: plan.name.clone(),
                target: plan.target.label(),
                ops: plan.ops.name().into(),
                dry_run: plan.guardrails.dry_run,
                top_processes: plan.top_processes,
                ..Default::default()
            });
        }
        let ctl = Arc::new(JobCtl::default());
        let (p, c, e) = (plan.clone(), Arc::clone(&ctl), env.clone());
        let thread = std::thread::Builder::new()
            .name(format!("job {}", plan.name))
            .spawn(move || supervise(p, c, e))
            .ok();
        log::info(
            Some(&plan.name),
            &format!("started: {}", plan.target.label()),
        );
        Job { plan, ctl, thread }
    }

    /// Hands a changed plan (same target and path) to the running sessions.
    pub fn reload(&mut self, plan: JobPlan, env: &Env) {
        env.with_job(&plan.name, |j| {
            j.dry_run = plan.guardrails.dry_run;
            j.top_processes = plan.top_processes;
        });
        *self.ctl.reload.lock().unwrap_or_else(|e| e.into_inner()) = Some(plan.clone());
        self.plan = plan;
    }

    /// Pauses (or resumes) the job's sessions, keeping what they learned
    /// ([`udamon_session::Session::pause`]); each says how in its status.
    pub fn set_paused(&self, paused: bool) {
        self.ctl.paused.store(paused, Ordering::SeqCst);
    }

    /// Stops every session (each removes its kdamond, ends its record) and
    /// waits for them.
    pub fn stop(mut self) {
        self.ctl.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Asks the job to stop without waiting (all jobs are asked first, then
    /// waited for).
    pub fn request_stop(&self) {
        self.ctl.stop.store(true, Ordering::SeqCst);
    }
}

struct Worker {
    ctl: Arc<WorkerCtl>,
    thread: JoinHandle<()>,
}

#[derive(Default)]
struct WorkerCtl {
    stop: AtomicBool,
    reload: Mutex<Option<JobPlan>>,
    /// The job is paused: the session should be.
    paused: AtomicBool,
    done: AtomicBool,
}

/// The processes of a process-set target now (none for other targets, or
/// a cgroup that does not exist).
pub fn matching_pids(root: &Path, t: &TargetPlan) -> Vec<u32> {
    if !t.is_set() {
        return Vec::new();
    }
    udamon_proc::Tracker::new(root, program_of(t))
        .map(|mut tr| tr.scan().into_iter().map(|m| m.pid).collect())
        .unwrap_or_default()
}

/// The kernel's reclaim-time demotion switch.
const DEMOTION: &str = "sys/kernel/mm/numa/demotion_enabled";

/// Switches the kernel's demotion on for a tiering job (a backstop when
/// promotion races allocation); returns whether it was off, so that it is
/// switched off again at the end.
fn backstop_on(env: &Env, job: &str) -> bool {
    let path = env.root.join(DEMOTION);
    let Ok(v) = std::fs::read_to_string(&path) else {
        log::info(
            Some(job),
            "no demotion_enabled on this kernel: no demotion backstop",
        );
        return false;
    };
    if matches!(v.trim(), "true" | "1" | "y" | "Y") {
        return false;
    }
    match std::fs::write(&path, "true") {
        Ok(()) => {
            log::info(
                Some(job),
                "demotion_enabled switched on while the job runs (backstop = false turns this off)",
            );
            true
        }
        Err(e) => {
            log::warn(
                Some(job),
                &format!("cannot switch demotion_enabled on: {e}"),
            );
            false
        }
    }
}

fn supervise(mut plan: JobPlan, ctl: Arc<JobCtl>, env: Env) {
    let restore_demotion = plan.demotion_backstop && backstop_on(&env, &plan.name);
    let mut workers: BTreeMap<u64, Worker> = BTreeMap::new();
    // The processes of a set whose session could not start: not tried
    // again while they are the set (a retry every scan would only repeat
    // the error).
    let mut failed: Option<Vec<u32>> = None;
    // The set when its session started.
    let mut last_set: Vec<u32> = Vec::new();
    let mut started_once = false;
    let mut last_scan = None::<Instant>;
    // Whether "waiting for a matching process" was logged (once per wait).
    let mut said_waiting = false;
    loop {
        if ctl.stop.load(Ordering::SeqCst) {
            break;
        }
        if let Some(p) = ctl.reload.lock().unwrap_or_else(|e| e.into_inner()).take() {
            for w in workers.values() {
                *w.ctl.reload.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.clone());
            }
            plan = p;
        }
        let paused = ctl.paused.load(Ordering::SeqCst);
        for w in workers.values() {
            w.ctl.paused.store(paused, Ordering::SeqCst);
        }
        if retire_ended(&mut workers, &plan, &env) {
            failed = Some(std::mem::take(&mut last_set));
        }
        if plan.target.is_set() {
            // While the set's session runs, it follows the set itself.
            if workers.is_empty() && last_scan.is_none_or(|t| t.elapsed() >= Duration::from_secs(2))
            {
                last_scan = Some(Instant::now());
                let now = matching_pids(&env.root, &plan.target);
                if now.is_empty() && workers.is_empty() {
                    if !said_waiting {
                        said_waiting = true;
                        log::info(
                            Some(&plan.name),
                            &format!(
                                "waiting: no process matches {} yet; one session follows the \
                                 set's processes once one appears",
                                plan.target.label()
                            ),
                        );
                    }
                } else {
                    said_waiting = false;
                }
                // One session follows the whole set; one that could not
                // start is tried again when the set changes.
                if failed.as_ref().is_some_and(|f| *f != now) {
                    failed = None;
                }
                if !now.is_empty() && workers.is_empty() && failed.is_none() {
                    let target = LiveTarget::Program {
                        program: program_of(&plan.target),
                        command: None,
                    };
                    workers.insert(SET_WORKER, spawn_worker(SET_WORKER, target, &plan, &env));
                    last_set = now;
                }
            }
        } else if !started_once {
            started_once = true;
            workers.insert(0, spawn_worker(0, single_target(&plan.target), &plan, &env));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for w in workers.values() {
        w.ctl.stop.store(true, Ordering::SeqCst);
    }
    for (_, w) in workers {
        let _ = w.thread.join();
    }
    if restore_demotion {
        backstop_off(&env, &plan.name);
    }
    log::info(Some(&plan.name), "stopped");
}

/// Switches the kernel's demotion off again at the end of a tiering job
/// that switched it on ([`backstop_on`]).
fn backstop_off(env: &Env, job: &str) {
    match std::fs::write(env.root.join(DEMOTION), "false") {
        Ok(()) => log::info(Some(job), "demotion_enabled switched off again"),
        Err(e) => log::warn(
            Some(job),
            &format!("cannot switch demotion_enabled off again: {e}"),
        ),
    }
}

/// The worker id of a process set's one session.
const SET_WORKER: u64 = 0;

/// Ended sessions of process sets leave (the set's processes all exited);
/// their totals stay. Returns whether one of them failed to start or run.
fn retire_ended(workers: &mut BTreeMap<u64, Worker>, plan: &JobPlan, env: &Env) -> bool {
    let ended: Vec<u64> = workers
        .iter()
        .filter(|(_, w)| w.ctl.done.load(Ordering::SeqCst))
        .map(|(id, _)| *id)
        .collect();
    let mut gave_up = false;
    for id in ended {
        if let Some(w) = workers.remove(&id) {
            let _ = w.thread.join();
        }
        if plan.target.is_set() {
            gave_up |= env
                .with_job(&plan.name, |j| {
                    let f = j.workers.get(&id).is_some_and(|w| w.state == "failed");
                    j.retire(id);
                    f
                })
                .unwrap_or(false);
        }
    }
    gave_up
}

/// A process set as a program: its processes, followed as they come and
/// go, all targets of one session.
fn program_of(target: &TargetPlan) -> udamon_proc::Program {
    use udamon_proc::{Matcher, Program};
    let matching = match target {
        TargetPlan::Comm(c) => {
            let c = c.clone();
            Some(Matcher {
                label: format!("comm {c}"),
                test: Arc::new(move |_, _, comm| comm == c),
            })
        }
        TargetPlan::Cmdline(r) => {
            // Checked when the config was read.
            let re = regex::Regex::new(r).ok();
            Some(Matcher {
                label: format!("cmdline ~ {r}"),
                test: Arc::new(move |root, pid, _| {
                    udamon_session::cmdline(root, pid)
                        .is_some_and(|l| re.as_ref().is_some_and(|re| re.is_match(&l)))
                }),
            })
        }
        _ => None,
    };
    let cgroup = match target {
        TargetPlan::Cgroup(d) => Some(d.clone()),
        _ => None,
    };
    Program {
        cgroup,
        matching,
        ..Program::default()
    }
}

/// The one target of a job that is not a process set.
fn single_target(target: &TargetPlan) -> LiveTarget {
    match target {
        TargetPlan::Pid(p) => LiveTarget::Pid(*p),
        TargetPlan::Paddr => LiveTarget::Phys,
        TargetPlan::Node(n) => LiveTarget::Node(*n),
        TargetPlan::Sim {
            path,
            spec_text,
            speed,
            seed,
        } => LiveTarget::Sim {
            spec_text: spec_text.clone(),
            origin: path.display().to_string(),
            seed: *seed,
            speed: *speed,
        },
        _ => unreachable!("process sets are scanned above"),
    }
}

fn spawn_worker(id: u64, target: LiveTarget, plan: &JobPlan, env: &Env) -> Worker {
    let ctl = Arc::new(WorkerCtl::default());
    let (p, c, e) = (plan.clone(), Arc::clone(&ctl), env.clone());
    let name = format!("{} {id}", plan.name);
    let thread = std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            run_worker(id, target, &p, &c, &e);
            c.done.store(true, Ordering::SeqCst);
        })
        .expect("cannot start a thread");
    Worker { ctl, thread }
}

/// The path for a session: `auto` skips kernel DAMON when the service's
/// kdamonds are all held by its other sessions.
fn pick_ops(env: &Env, asked: OpsChoice, phys: bool) -> OpsChoice {
    let taken = match env.kdamond_set() {
        Some(set) => set.free() == 0,
        None => env.kdamond.lock().is_ok_and(|k| k.is_some()),
    };
    if asked != OpsChoice::Auto || !taken {
        return asked;
    }
    [OpsChoice::Idle, OpsChoice::Softdirty]
        .into_iter()
        .filter(|o| !(phys && *o == OpsChoice::Softdirty))
        .find(|&o| path_blocker(&env.features, o, phys).is_none())
        .unwrap_or(asked)
}

fn set_worker(env: &Env, job: &str, id: u64, f: impl FnOnce(&mut WorkerStatus)) {
    env.with_job(job, |j| f(j.workers.entry(id).or_default()));
}

/// Opens a new record file for a session in the job's record directory:
/// `DIR/JOB-ID-UNIXTIME.udr`, created exclusively (records.rs).
fn open_record(
    dir: &RecordDir,
    job: &str,
    id: u64,
    session: &Session,
) -> Result<(PathBuf, udamon_session::FileWriter), String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (path, file) = dir.create(job, id, now)?;
    let w = Writer::from_file(file, &path, &session.header())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok((path, w))
}

fn scheme_statuses(plan: &JobPlan) -> Vec<SchemeStatus> {
    plan.schemes
        .iter()
        .zip(plan.capped_by_rate())
        .enumerate()
        .map(|(index, (s, capped))| SchemeStatus {
            index,
            action: s.action.name().into(),
            description: udamon_scheme_file::describe(s),
            origin: plan.scheme_origins.get(index).cloned().unwrap_or_default(),
            goals: s
                .quota
                .goals
                .iter()
                .map(|g| GoalStatus {
                    metric: serde_json::to_value(g.metric)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    target: g.target_value,
                    current: None,
                })
                .collect(),
            capped_by_guardrail: capped,
            ..Default::default()
        })
        .collect()
}

/// One session of a job, start to end: started, stepped until it ends
/// (statistics, guardrails, reloads and record rotation once a second),
/// then ended.
fn run_worker(id: u64, target: LiveTarget, plan: &JobPlan, ctl: &WorkerCtl, env: &Env) {
    let job = plan.name.clone();
    let plan = plan.clone();
    let phys = matches!(target, LiveTarget::Phys | LiveTarget::Node(_));
    set_worker(env, &job, id, |w| {
        w.pid = id as u32;
        w.state = "starting".into();
    });
    let Some(session) = start_session(id, target, phys, &plan, env) else {
        return;
    };
    let mut run = SessionRun::new(id, plan, session, ctl, env);
    let ended_by = run.step_until_end();
    run.end(ended_by);
}

/// Starts a worker's session (one at a time: the path choice sees who
/// holds kdamond) and notes it as kdamond's holder when it drives kernel
/// DAMON. On failure the error is logged and shown in the worker's and the
/// job's status.
fn start_session(
    id: u64,
    target: LiveTarget,
    phys: bool,
    plan: &JobPlan,
    env: &Env,
) -> Option<Session> {
    let job = &plan.name;
    let session = {
        let _one_at_a_time = env.start_lock.lock();
        let spec = Spec {
            target,
            ops: pick_ops(env, plan.ops, phys),
            root: env.root.clone(),
            attrs: plan.attrs,
            schemes: plan.effective_schemes(),
            dry_run: plan.guardrails.dry_run,
            duration_us: None,
            stop_on_exec: false,
            softdirty_reset: plan.softdirty_reset,
            alloc_sites: None,
            hints: Vec::new(),
            kdamonds: env.kdamond_set(),
            warn: {
                let job = job.clone();
                udamon_session::Warner::new(move |m| log::warn(Some(&job), m))
            },
        };
        let s = Session::start(&spec);
        if let Ok(s) = &s {
            if s.info().path == "kdamond" {
                if let Ok(mut k) = env.kdamond.lock() {
                    *k = Some((job.clone(), id));
                }
            }
        }
        s
    };
    match session {
        Ok(s) => Some(s),
        Err(e) => {
            let msg = e.to_string();
            log::error(Some(job), &format!("cannot start monitoring: {msg}"));
            set_worker(env, job, id, |w| {
                w.state = "failed".into();
                w.reason = Some(msg.clone());
            });
            env.with_job(job, |j| j.last_error = Some(msg));
            None
        }
    }
}

/// Logs what a started session monitors and how, and shows it in the
/// worker's status (now "running").
fn announce(id: u64, plan: &JobPlan, session: &mut Session, env: &Env) -> SessionInfo {
    let job = &plan.name;
    let info = session.info().clone();
    let (sample_us, aggr_us) = session.intervals();
    log::log(
        log::Level::Info,
        Some(job),
        "monitoring",
        &[
            ("target", info.command.clone()),
            ("pid", info.pid.to_string()),
            ("path", info.path.to_string()),
            ("because", info.chosen_because.clone()),
        ],
    );
    set_worker(env, job, id, |w| {
        w.pid = info.pid;
        w.command = info.command.clone();
        w.path = info.path.into();
        w.chosen_because = info.chosen_because.clone();
        w.state = "running".into();
        w.sample_us = sample_us;
        w.aggr_us = aggr_us;
        w.kdamond_pid = session.kdamond_pid();
        w.schemes = scheme_statuses(plan);
        if session.is_program() {
            w.processes = session
                .header()
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| (i as u32, process_status(t)))
                .collect();
        }
    });
    info
}

/// A process's status entry, as it joins.
fn process_status(t: &udamon_record::TargetInfo) -> crate::status::ProcessStatus {
    crate::status::ProcessStatus {
        pid: t.pid,
        comm: t.comm.clone().unwrap_or_default(),
        wss_bytes: 0,
    }
}

/// Opens the job's record directory and the session's first record in it
/// (recording goes off, logged, when either cannot be opened), and shows
/// the record in the worker's status: the directory, the record's path and
/// its writer.
fn open_first_record(
    id: u64,
    plan: &JobPlan,
    session: &Session,
    env: &Env,
) -> (Option<RecordDir>, Option<PathBuf>, Option<FileWriter>) {
    let job = &plan.name;
    let mut record_path = None;
    let record_dir = match plan.record.as_ref().map(|r| RecordDir::open(&r.dir)) {
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            log::error(Some(job), &format!("recording off: {e}"));
            None
        }
        None => None,
    };
    let writer = if let Some(dir) = &record_dir {
        match open_record(dir, job, id, session) {
            Ok((p, w)) => {
                record_path = Some(p);
                Some(w)
            }
            Err(e) => {
                log::error(Some(job), &format!("recording off: {e}"));
                None
            }
        }
    } else {
        None
    };
    set_worker(env, job, id, |w| {
        w.record = record_path.as_ref().map(|p| p.display().to_string())
    });
    (record_dir, record_path, writer)
}

/// A worker's running session and what its loop carries from one event to
/// the next.
struct SessionRun<'a> {
    id: u64,
    job: String,
    ctl: &'a WorkerCtl,
    env: &'a Env,
    /// The plan in force (a reload replaces it).
    plan: JobPlan,
    info: SessionInfo,
    session: Session,
    recorder: Recorder,
    record_dir: Option<RecordDir>,
    /// The record being written, if any.
    record_path: Option<PathBuf>,
    record_started: Instant,
    breaker: Breaker,
    rss_budget: RssBudget,
    /// The guardrails pausing actions now.
    paused: Vec<&'static str>,
    last_stats: Instant,
    exceeds_seen: Vec<u64>,
    /// Which schemes the byte-rate guardrail limits: per plan, not per pass.
    /// A pause or resume request the session refused: not tried again
    /// until the request changes.
    pause_refused: Option<bool>,
    capped: Vec<bool>,
    started: Instant,
    cpu0: f64,
}

impl<'a> SessionRun<'a> {
    /// Announces a started session and opens its first record.
    fn new(id: u64, plan: JobPlan, mut session: Session, ctl: &'a WorkerCtl, env: &'a Env) -> Self {
        let info = announce(id, &plan, &mut session, env);
        let record_started = Instant::now();
        let (record_dir, record_path, writer) = open_first_record(id, &plan, &session, env);
        let recorder = Recorder::new(&session, writer);
        let last_stats = Instant::now() - Duration::from_secs(10);
        let capped = plan.capped_by_rate();
        let started = Instant::now();
        let cpu0 = udamon_session::thread_cpu_s();
        SessionRun {
            id,
            job: plan.name.clone(),
            ctl,
            env,
            plan,
            info,
            session,
            recorder,
            record_dir,
            record_path,
            record_started,
            breaker: Breaker::default(),
            rss_budget: RssBudget::default(),
            paused: Vec::new(),
            pause_refused: None,
            last_stats,
            exceeds_seen: Vec::new(),
            capped,
            started,
            cpu0,
        }
    }

    /// Steps the session, recording each event, until it ends or fails;
    /// returns why it ended.
    fn step_until_end(&mut self) -> String {
        let ctl = self.ctl;
        let stop = || ctl.stop.load(Ordering::SeqCst);
        loop {
            let want = ctl.paused.load(Ordering::SeqCst);
            if want != self.session.paused().is_some() && self.pause_refused != Some(want) {
                self.set_paused(want);
            }
            if self
                .session
                .paused()
                .is_some_and(udamon_session::Paused::stops_monitoring)
            {
                // Nothing to step: wait, keeping statistics, reloads and
                // the guardrails' view current.
                if stop() {
                    break "stopped while paused".to_string();
                }
                std::thread::sleep(Duration::from_millis(100));
                if self.last_stats.elapsed() >= Duration::from_secs(1) {
                    self.last_stats = Instant::now();
                    self.every_second();
                }
                continue;
            }
            let ev = match self.session.next(&stop) {
                Ok(ev) => ev,
                Err(e) => {
                    let msg = e.to_string();
                    log::error(Some(&self.job), &format!("monitoring failed: {msg}"));
                    self.env
                        .with_job(&self.job, |j| j.last_error = Some(msg.clone()));
                    break format!("failed: {msg}");
                }
            };
            if let Err(e) = self.recorder.push(&mut self.session, &ev) {
                log::error(Some(&self.job), &format!("recording off: {e}"));
                self.recorder = Recorder::new(&self.session, None);
                self.record_path = None;
            }
            match &ev {
                Event::End(why) => break why.to_string(),
                Event::Exec { exe, .. } => log::info(
                    Some(&self.job),
                    &format!(
                        "pid {} exec'd {exe}: monitoring the new program",
                        self.info.pid
                    ),
                ),
                Event::Snapshot(s) => {
                    set_worker(self.env, &self.job, self.id, |w| w.take_snapshot(s))
                }
                Event::Targets(events) => self.take_target_events(events),
            }
            // Once a second: statistics, intervals, guardrails, reloads.
            if self.last_stats.elapsed() < Duration::from_secs(1) {
                continue;
            }
            self.last_stats = Instant::now();
            self.every_second();
        }
    }

    /// Pauses or resumes the session as `udamon ctl` asked; logs how, and
    /// shows it in the status. A failure is logged and the session goes
    /// on as it was.
    fn set_paused(&mut self, paused: bool) {
        let r = if paused {
            self.session.pause().map(|how| Some(how.describe()))
        } else {
            self.session.resume().map(|()| None)
        };
        match r {
            Ok(how) => {
                self.pause_refused = None;
                let msg = match how {
                    Some(h) => format!("paused on request: {h}"),
                    None => "resumed on request".into(),
                };
                log::info(Some(&self.job), &msg);
                set_worker(self.env, &self.job, self.id, |w| {
                    w.paused = how.map(str::to_string);
                });
            }
            Err(e) => {
                let msg = format!(
                    "cannot {} the session: {e}; it goes on as it was",
                    if paused { "pause" } else { "resume" }
                );
                log::error(Some(&self.job), &msg);
                self.env.with_job(&self.job, |j| j.last_error = Some(msg));
                // Not tried again until the request changes.
                self.pause_refused = Some(paused);
            }
        }
    }

    /// A process set's processes that arrived or left: logged, and in the
    /// status.
    fn take_target_events(&self, events: &[TargetEvent]) {
        for e in events {
            let msg = match e {
                TargetEvent::Arrive { idx, target, .. } => format!(
                    "process {} ({}) joined as target {idx}",
                    target.pid,
                    target.comm.as_deref().unwrap_or("?")
                ),
                TargetEvent::Exit { idx, why, .. } => format!("target {idx} left ({why})"),
            };
            log::info(Some(&self.job), &msg);
        }
        set_worker(self.env, &self.job, self.id, |w| {
            for e in events {
                match e {
                    TargetEvent::Arrive { idx, target, .. } => {
                        w.processes.insert(*idx, process_status(target));
                    }
                    TargetEvent::Exit { idx, .. } => {
                        w.processes.remove(idx);
                    }
                }
            }
        });
    }

    /// Once a second: statistics, intervals, guardrails, reloads, then
    /// the record's rotation.
    fn every_second(&mut self) {
        let reports = self.session.schemes().unwrap_or_else(|e| {
            log::warn(Some(&self.job), &e.to_string());
            Vec::new()
        });
        let (sample_us, aggr_us) = self.session.intervals();
        let pids = self.session.pids();
        // A program's: summed over its processes.
        let rss = (!pids.is_empty())
            .then(|| {
                pids.iter()
                    .map(|&p| udamon_session::rss_kb(&self.env.root, p))
                    .sum::<Option<u64>>()
                    .map(|k| k * 1024)
            })
            .flatten();
        let cpu = udamon_session::thread_cpu_s() - self.cpu0;
        let kcpu = self.session.kdamond_cpu_s().unwrap_or(0.0);
        // Guardrails.
        let (want, trips) = self.guardrails(&reports, rss);
        let (rate_tripped, rate_trips) = self.rate_trips(&reports);
        set_worker(self.env, &self.job, self.id, |w| {
            for (s, r) in w.schemes.iter_mut().zip(&reports) {
                s.update(r);
            }
            w.sample_us = sample_us;
            w.aggr_us = aggr_us;
            w.rss_bytes = rss;
            w.cpu_s = cpu + kcpu;
            w.paused_by = want.iter().map(|s| s.to_string()).collect();
            if rate_tripped {
                w.paused_by.push("bytes_per_second".into());
            }
            w.record = self.record_path.as_ref().map(|p| p.display().to_string());
        });
        if !trips.is_empty() || rate_trips > 0 {
            self.env.with_job(&self.job, |j| {
                for t in &trips {
                    *j.trips.entry(t.to_string()).or_default() += 1;
                }
                if rate_trips > 0 {
                    *j.trips.entry("bytes_per_second".into()).or_default() += rate_trips;
                }
            });
        }
        let reload = self
            .ctl
            .reload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let pause_changed = self.take_pause(want, &trips);
        if reload.is_some() || pause_changed {
            self.commit(reload);
        }
        // Rotation.
        self.rotate();
    }

    /// The guardrails (PSI, RSS share): which of them want actions paused
    /// after this pass, and which tripped in it.
    fn guardrails(
        &mut self,
        reports: &[SchemeReport],
        rss: Option<u64>,
    ) -> (Vec<&'static str>, Vec<&'static str>) {
        let mut trips: Vec<&'static str> = Vec::new();
        let mut want: Vec<&'static str> = self.paused.clone();
        let g = &self.plan.guardrails;
        if let Some(above) = g.psi_pause_above {
            let now = *self.env.psi.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(change) =
                now.and_then(|v| self.breaker.update(v, above, g.psi_resume_below))
            {
                toggle(&mut want, "psi", change);
                if change {
                    trips.push("psi");
                }
            }
        }
        if let (Some(share), Some(rss)) = (g.max_rss_share_per_minute, rss) {
            let paged: u64 = reports
                .iter()
                .filter(|r| r.action == "pageout")
                .map(|r| r.stats.sz_applied)
                .sum();
            let now_us = self.started.elapsed().as_micros() as u64;
            // Paged-out bytes across reloads: the status keeps the totals.
            let id = self.id;
            let total_paged = self
                .env
                .with_job(&self.job, |j| {
                    j.workers.get(&id).map_or(0, |w| {
                        w.schemes
                            .iter()
                            .filter(|s| s.action == "pageout")
                            .map(|s| s.applied_bytes)
                            .sum::<u64>()
                    })
                })
                .unwrap_or(paged);
            if let Some(change) = self
                .rss_budget
                .update(now_us, rss, total_paged.max(paged), share)
            {
                toggle(&mut want, "rss_share", change);
                if change {
                    trips.push("rss_share");
                }
            }
        }
        (want, trips)
    }

    /// The byte-rate cap is a quota: its trips are the capped schemes'
    /// quota exceeds. Whether it tripped since the last pass, and how often.
    fn rate_trips(&mut self, reports: &[SchemeReport]) -> (bool, u64) {
        self.exceeds_seen.resize(reports.len(), 0);
        let mut rate_tripped = false;
        let mut rate_trips = 0;
        for (i, r) in reports.iter().enumerate() {
            if self.capped.get(i) == Some(&true) && r.stats.qt_exceeds > self.exceeds_seen[i] {
                rate_tripped = true;
                rate_trips += r.stats.qt_exceeds - self.exceeds_seen[i];
            }
            self.exceeds_seen[i] = r.stats.qt_exceeds;
        }
        (rate_tripped, rate_trips)
    }

    /// Takes the guardrails that want actions paused; a change is logged.
    /// Returns whether it changed.
    fn take_pause(&mut self, want: Vec<&'static str>, trips: &[&'static str]) -> bool {
        let pause_changed = want != self.paused;
        if pause_changed {
            for t in trips {
                log::warn(
                    Some(&self.job),
                    &format!("guardrail {t} tripped: actions paused (they only count what they would do)"),
                );
            }
            if want.is_empty() {
                log::info(Some(&self.job), "guardrails clear: actions resume");
            }
            self.paused = want;
        }
        pause_changed
    }

    /// Commits a reloaded plan, or the plan in force with actions paused
    /// or resumed; on failure the previous configuration goes on.
    fn commit(&mut self, reload: Option<JobPlan>) {
        let reloaded = reload.is_some();
        let new_plan = reload.unwrap_or_else(|| self.plan.clone());
        let dry = new_plan.guardrails.dry_run || !self.paused.is_empty();
        match self
            .session
            .commit(new_plan.attrs, new_plan.effective_schemes(), dry)
        {
            Ok(()) => {
                // Kernel DAMON keeps a scheme's statistics through a
                // commit; our engine starts them again, so what they
                // counted is kept. Either way a scheme's counters go on
                // growing (per index) across reloads and pauses.
                let restarts = self.info.path != "kdamond";
                set_worker(self.env, &self.job, self.id, |w| {
                    let fresh = scheme_statuses(&new_plan);
                    w.schemes.truncate(fresh.len());
                    for (i, f) in fresh.into_iter().enumerate() {
                        match w.schemes.get_mut(i) {
                            Some(s) => {
                                if restarts {
                                    s.reset();
                                }
                                s.action = f.action;
                                s.description = f.description;
                                s.origin = f.origin;
                                s.goals = f.goals;
                                s.capped_by_guardrail = f.capped_by_guardrail;
                            }
                            None => w.schemes.push(f),
                        }
                    }
                });
                self.exceeds_seen.clear();
                if reloaded {
                    log::info(
                        Some(&self.job),
                        "reloaded: new attributes and schemes in force",
                    );
                }
                if new_plan.record != self.plan.record {
                    self.switch_record(&new_plan);
                }
                self.plan = new_plan;
                self.capped = self.plan.capped_by_rate();
            }
            Err(e) => {
                let msg =
                    format!("cannot apply the new configuration: {e}; the previous one goes on");
                log::error(Some(&self.job), &msg);
                self.env.with_job(&self.job, |j| j.last_error = Some(msg));
            }
        }
    }

    /// New recording settings, taken online: the record being written ends
    /// here and the next one starts under the new settings (or recording
    /// stops), while the session, its kdamond, regions and ages go on.
    fn switch_record(&mut self, plan: &JobPlan) {
        let (dir, path, writer) = open_first_record(self.id, plan, &self.session, self.env);
        if let Err(e) = self.recorder.replace_writer(writer) {
            log::warn(
                Some(&self.job),
                &format!("closing the previous record: {e}"),
            );
        }
        let msg = match &path {
            Some(p) => format!("new recording settings: now recording to {}", p.display()),
            None => "new recording settings: recording off".to_string(),
        };
        log::info(Some(&self.job), &msg);
        self.record_dir = dir;
        self.record_path = path;
        self.record_started = Instant::now();
    }

    /// Starts a new record once the current one is `record.rotate` old,
    /// and prunes the job's records to `record.max_total`.
    fn rotate(&mut self) {
        let (Some(r), Some(dir)) = (self.plan.record.as_ref(), &self.record_dir) else {
            return;
        };
        if self.record_path.is_none()
            || self.record_started.elapsed() < Duration::from_micros(r.rotate_us)
        {
            return;
        }
        let job = &self.job;
        match open_record(dir, job, self.id, &self.session) {
            Ok((p, w)) => {
                if let Err(e) = self.recorder.replace_writer(Some(w)) {
                    log::warn(Some(job), &format!("closing the previous record: {e}"));
                }
                for old in dir.prune(job, r.max_total_bytes, &p) {
                    log::info(
                        Some(job),
                        &format!("removed {} (record.max_total)", old.display()),
                    );
                }
                self.record_path = Some(p);
                self.record_started = Instant::now();
            }
            Err(e) => log::error(Some(job), &format!("cannot rotate the record: {e}")),
        }
    }

    /// Ends the session (its record's end, kdamond given back), logs why,
    /// and leaves the worker's final status.
    fn end(mut self, ended_by: String) {
        let job = &self.job;
        let id = self.id;
        let ended_short: &'static str = if ended_by.starts_with("failed") {
            "failed"
        } else {
            "ended"
        };
        // Counted from after the set-up.
        let cpu = udamon_session::CpuSpent {
            total_s: udamon_session::thread_cpu_s() - self.cpu0,
            wall_s: self.started.elapsed().as_secs_f64(),
            setup_s: 0.0,
        };
        let out = self.record_path.as_ref().map(|p| p.display().to_string());
        let summary = self.recorder.finish(&mut self.session, &ended_by, out, cpu);
        if let Ok(mut k) = self.env.kdamond.lock() {
            if k.as_ref().is_some_and(|(j, i)| j == job && *i == id) {
                *k = None;
            }
        }
        if let Err(e) = &summary {
            log::error(Some(job), &format!("ending the session: {e}"));
        }
        // A stop asked for, a failure (already logged as an error) and a
        // process of a set leaving are routine; a single target ending is not.
        let level =
            if ended_short == "failed" || ended_by == "interrupted" || self.plan.target.is_set() {
                log::Level::Info
            } else {
                log::Level::Warn
            };
        log::log(
            level,
            Some(job),
            "session ended",
            &[
                ("pid", self.info.pid.to_string()),
                ("ended_by", ended_by.clone()),
            ],
        );
        set_worker(self.env, job, id, |w| {
            w.state = ended_short.into();
            w.reason = Some(ended_by);
            w.paused_by.clear();
        });
    }
}

fn toggle(list: &mut Vec<&'static str>, g: &'static str, on: bool) {
    list.retain(|x| *x != g);
    if on {
        list.push(g);
    }
}
