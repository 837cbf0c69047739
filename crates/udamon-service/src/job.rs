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

use udamon_record::Writer;
use udamon_session::features::Features;
use udamon_session::{path_blocker, Event, LiveTarget, OpsChoice, Recorder, Session, Spec};

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
    /// The job and session holding kdamond 0, if any: udamon drives one.
    pub kdamond: Arc<Mutex<Option<(String, u64)>>>,
    /// Sessions start one at a time (path choice sees who holds kdamond).
    pub start_lock: Arc<Mutex<()>>,
}

impl Env {
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
        env.with_job(&plan.name, |j| j.dry_run = plan.guardrails.dry_run);
        *self.ctl.reload.lock().unwrap_or_else(|e| e.into_inner()) = Some(plan.clone());
        self.plan = plan;
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
    done: AtomicBool,
}

/// The processes of a process-set target now.
pub fn matching_pids(root: &Path, t: &TargetPlan) -> Vec<u32> {
    let me = std::process::id();
    let mut pids: Vec<u32> = match t {
        TargetPlan::Cgroup(dir) => {
            // The directory is absolute; under a test root it is re-rooted.
            let dir = root.join(dir.strip_prefix("/").unwrap_or(dir));
            std::fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        }
        TargetPlan::Comm(_) | TargetPlan::Cmdline(_) => {
            let re = match t {
                TargetPlan::Cmdline(r) => regex::Regex::new(r).ok(),
                _ => None,
            };
            std::fs::read_dir(root.join("proc"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&pid| match t {
                    TargetPlan::Comm(c) => {
                        std::fs::read_to_string(root.join(format!("proc/{pid}/comm")))
                            .is_ok_and(|s| s.trim_end_matches('\n') == c)
                    }
                    _ => udamon_session::cmdline(root, pid)
                        .is_some_and(|l| re.as_ref().is_some_and(|re| re.is_match(&l))),
                })
                .collect()
        }
        _ => Vec::new(),
    };
    pids.retain(|&p| p != me);
    pids.sort_unstable();
    pids
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
    // Processes whose session could not start: not tried again while they
    // run (a retry every scan would only repeat the error).
    let mut failed: std::collections::BTreeSet<u64> = Default::default();
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
        // Ended sessions of process sets leave; their totals stay.
        let ended: Vec<u64> = workers
            .iter()
            .filter(|(_, w)| w.ctl.done.load(Ordering::SeqCst))
            .map(|(id, _)| *id)
            .collect();
        for id in ended {
            if let Some(w) = workers.remove(&id) {
                let _ = w.thread.join();
            }
            if plan.target.is_set() {
                let gave_up = env
                    .with_job(&plan.name, |j| {
                        let f = j.workers.get(&id).is_some_and(|w| w.state == "failed");
                        j.retire(id);
                        f
                    })
                    .unwrap_or(false);
                if gave_up {
                    failed.insert(id);
                }
            }
        }
        if plan.target.is_set() {
            if last_scan.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)) {
                last_scan = Some(Instant::now());
                let now = matching_pids(&env.root, &plan.target);
                if now.is_empty() && workers.is_empty() {
                    if !said_waiting {
                        said_waiting = true;
                        log::info(
                            Some(&plan.name),
                            &format!(
                                "waiting: no process matches {} yet; a session starts for each \
                                 as it appears",
                                plan.target.label()
                            ),
                        );
                    }
                } else {
                    said_waiting = false;
                }
                failed.retain(|id| now.iter().any(|&p| u64::from(p) == *id));
                for pid in now {
                    let id = u64::from(pid);
                    if failed.contains(&id) {
                        continue;
                    }
                    workers
                        .entry(id)
                        .or_insert_with(|| spawn_worker(id, LiveTarget::Pid(pid), &plan, &env));
                }
            }
        } else if !started_once {
            started_once = true;
            let target = match &plan.target {
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
            };
            workers.insert(0, spawn_worker(0, target, &plan, &env));
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
        match std::fs::write(env.root.join(DEMOTION), "false") {
            Ok(()) => log::info(Some(&plan.name), "demotion_enabled switched off again"),
            Err(e) => log::warn(
                Some(&plan.name),
                &format!("cannot switch demotion_enabled off again: {e}"),
            ),
        }
    }
    log::info(Some(&plan.name), "stopped");
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

/// The path for a session: `auto` skips kernel DAMON when another session
/// of this service holds it (udamon drives kdamond 0 only).
fn pick_ops(env: &Env, asked: OpsChoice, phys: bool) -> OpsChoice {
    let taken = env.kdamond.lock().is_ok_and(|k| k.is_some());
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

fn run_worker(id: u64, target: LiveTarget, plan: &JobPlan, ctl: &WorkerCtl, env: &Env) {
    let job = plan.name.clone();
    let mut plan = plan.clone();
    let phys = matches!(target, LiveTarget::Phys | LiveTarget::Node(_));
    set_worker(env, &job, id, |w| {
        w.pid = id as u32;
        w.state = "starting".into();
    });
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
    let mut session = match session {
        Ok(s) => s,
        Err(e) => {
            let msg = e.to_string();
            log::error(Some(&job), &format!("cannot start monitoring: {msg}"));
            set_worker(env, &job, id, |w| {
                w.state = "failed".into();
                w.reason = Some(msg.clone());
            });
            env.with_job(&job, |j| j.last_error = Some(msg));
            return;
        }
    };
    let info = session.info().clone();
    let (sample_us, aggr_us) = session.intervals();
    log::log(
        log::Level::Info,
        Some(&job),
        "monitoring",
        &[
            ("target", info.command.clone()),
            ("pid", info.pid.to_string()),
            ("path", info.path.to_string()),
            ("because", info.chosen_because.clone()),
        ],
    );
    set_worker(env, &job, id, |w| {
        w.command = info.command.clone();
        w.path = info.path.into();
        w.chosen_because = info.chosen_because.clone();
        w.state = "running".into();
        w.sample_us = sample_us;
        w.aggr_us = aggr_us;
        w.kdamond_pid = session.kdamond_pid();
        w.schemes = scheme_statuses(&plan);
    });
    let mut record_path = None;
    let mut record_started = Instant::now();
    let record_dir = match plan.record.as_ref().map(|r| RecordDir::open(&r.dir)) {
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            log::error(Some(&job), &format!("recording off: {e}"));
            None
        }
        None => None,
    };
    let writer = if let Some(dir) = &record_dir {
        match open_record(dir, &job, id, &session) {
            Ok((p, w)) => {
                record_path = Some(p);
                Some(w)
            }
            Err(e) => {
                log::error(Some(&job), &format!("recording off: {e}"));
                None
            }
        }
    } else {
        None
    };
    set_worker(env, &job, id, |w| {
        w.record = record_path.as_ref().map(|p| p.display().to_string())
    });
    let mut recorder = Recorder::new(&session, writer);
    let mut breaker = Breaker::default();
    let mut rss_budget = RssBudget::default();
    let mut paused: Vec<&'static str> = Vec::new();
    let mut last_stats = Instant::now() - Duration::from_secs(10);
    let mut exceeds_seen: Vec<u64> = Vec::new();
    // Which schemes the byte-rate guardrail limits: per plan, not per pass.
    let mut capped = plan.capped_by_rate();
    let started = Instant::now();
    let cpu0 = udamon_session::thread_cpu_s();
    let stop = || ctl.stop.load(Ordering::SeqCst);
    let ended_by: String = loop {
        let ev = match session.next(&stop) {
            Ok(ev) => ev,
            Err(e) => {
                let msg = e.to_string();
                log::error(Some(&job), &format!("monitoring failed: {msg}"));
                env.with_job(&job, |j| j.last_error = Some(msg.clone()));
                break format!("failed: {msg}");
            }
        };
        if let Err(e) = recorder.push(&mut session, &ev) {
            log::error(Some(&job), &format!("recording off: {e}"));
            recorder = Recorder::new(&session, None);
            record_path = None;
        }
        match &ev {
            Event::End(why) => break why.to_string(),
            Event::Exec { exe, .. } => log::info(
                Some(&job),
                &format!("pid {} exec'd {exe}: monitoring the new program", info.pid),
            ),
            Event::Snapshot(s) => set_worker(env, &job, id, |w| w.take_snapshot(s)),
        }
        // Once a second: statistics, intervals, guardrails, reloads.
        if last_stats.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last_stats = Instant::now();
        let reports = session.schemes().unwrap_or_else(|e| {
            log::warn(Some(&job), &e.to_string());
            Vec::new()
        });
        let (sample_us, aggr_us) = session.intervals();
        let rss = (info.pid != 0)
            .then(|| {
                udamon_session::rss_swap_kb(&env.root, info.pid)
                    .0
                    .map(|k| k * 1024)
            })
            .flatten();
        let cpu = udamon_session::thread_cpu_s() - cpu0;
        let kcpu = session.kdamond_cpu_s().unwrap_or(0.0);
        // Guardrails.
        let mut trips: Vec<&'static str> = Vec::new();
        let mut want: Vec<&'static str> = paused.clone();
        let g = &plan.guardrails;
        if let Some(above) = g.psi_pause_above {
            let now = *env.psi.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(change) = now.and_then(|v| breaker.update(v, above, g.psi_resume_below)) {
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
            let now_us = started.elapsed().as_micros() as u64;
            // Paged-out bytes across reloads: the status keeps the totals.
            let total_paged = env
                .with_job(&job, |j| {
                    j.workers.get(&id).map_or(0, |w| {
                        w.schemes
                            .iter()
                            .filter(|s| s.action == "pageout")
                            .map(|s| s.applied_bytes)
                            .sum::<u64>()
                    })
                })
                .unwrap_or(paged);
            if let Some(change) = rss_budget.update(now_us, rss, total_paged.max(paged), share) {
                toggle(&mut want, "rss_share", change);
                if change {
                    trips.push("rss_share");
                }
            }
        }
        // The byte-rate cap is a quota: its trips are the capped schemes'
        // quota exceeds.
        exceeds_seen.resize(reports.len(), 0);
        let mut rate_tripped = false;
        let mut rate_trips = 0;
        for (i, r) in reports.iter().enumerate() {
            if capped.get(i) == Some(&true) && r.stats.qt_exceeds > exceeds_seen[i] {
                rate_tripped = true;
                rate_trips += r.stats.qt_exceeds - exceeds_seen[i];
            }
            exceeds_seen[i] = r.stats.qt_exceeds;
        }
        set_worker(env, &job, id, |w| {
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
            w.record = record_path.as_ref().map(|p| p.display().to_string());
        });
        if !trips.is_empty() || rate_trips > 0 {
            env.with_job(&job, |j| {
                for t in &trips {
                    *j.trips.entry(t.to_string()).or_default() += 1;
                }
                if rate_trips > 0 {
                    *j.trips.entry("bytes_per_second".into()).or_default() += rate_trips;
                }
            });
        }
        let reload = ctl.reload.lock().unwrap_or_else(|e| e.into_inner()).take();
        let pause_changed = want != paused;
        if pause_changed {
            for t in &trips {
                log::warn(
                    Some(&job),
                    &format!("guardrail {t} tripped: actions paused (they only count what they would do)"),
                );
            }
            if want.is_empty() {
                log::info(Some(&job), "guardrails clear: actions resume");
            }
            paused = want;
        }
        if reload.is_some() || pause_changed {
            let new_plan = reload.clone().unwrap_or_else(|| plan.clone());
            let dry = new_plan.guardrails.dry_run || !paused.is_empty();
            match session.commit(new_plan.attrs, new_plan.effective_schemes(), dry) {
                Ok(()) => {
                    // Kernel DAMON keeps a scheme's statistics through a
                    // commit; our engine starts them again, so what they
                    // counted is kept. Either way a scheme's counters go on
                    // growing (per index) across reloads and pauses.
                    let restarts = info.path != "kdamond";
                    set_worker(env, &job, id, |w| {
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
                    exceeds_seen.clear();
                    if reload.is_some() {
                        log::info(Some(&job), "reloaded: new attributes and schemes in force");
                    }
                    plan = new_plan;
                    capped = plan.capped_by_rate();
                }
                Err(e) => {
                    let msg = format!(
                        "cannot apply the new configuration: {e}; the previous one goes on"
                    );
                    log::error(Some(&job), &msg);
                    env.with_job(&job, |j| j.last_error = Some(msg));
                }
            }
        }
        // Rotation.
        if let (Some(r), Some(dir)) = (plan.record.as_ref(), &record_dir) {
            if record_path.is_some()
                && record_started.elapsed() >= Duration::from_micros(r.rotate_us)
            {
                match open_record(dir, &job, id, &session) {
                    Ok((p, w)) => {
                        if let Err(e) = recorder.replace_writer(Some(w)) {
                            log::warn(Some(&job), &format!("closing the previous record: {e}"));
                        }
                        for old in dir.prune(&job, r.max_total_bytes, &p) {
                            log::info(
                                Some(&job),
                                &format!("removed {} (record.max_total)", old.display()),
                            );
                        }
                        record_path = Some(p);
                        record_started = Instant::now();
                    }
                    Err(e) => log::error(Some(&job), &format!("cannot rotate the record: {e}")),
                }
            }
        }
    };
    let ended_short: &'static str = if ended_by.starts_with("failed") {
        "failed"
    } else {
        "ended"
    };
    // Counted from after the set-up.
    let cpu = udamon_session::CpuSpent {
        total_s: udamon_session::thread_cpu_s() - cpu0,
        wall_s: started.elapsed().as_secs_f64(),
        setup_s: 0.0,
    };
    let out = record_path.as_ref().map(|p| p.display().to_string());
    let summary = recorder.finish(&mut session, &ended_by, out, cpu);
    if let Ok(mut k) = env.kdamond.lock() {
        if k.as_ref().is_some_and(|(j, i)| *j == job && *i == id) {
            *k = None;
        }
    }
    if let Err(e) = &summary {
        log::error(Some(&job), &format!("ending the session: {e}"));
    }
    // A stop asked for, a failure (already logged as an error) and a
    // process of a set leaving are routine; a single target ending is not.
    let level = if ended_short == "failed" || ended_by == "interrupted" || plan.target.is_set() {
        log::Level::Info
    } else {
        log::Level::Warn
    };
    log::log(
        level,
        Some(&job),
        "session ended",
        &[
            ("pid", info.pid.to_string()),
            ("ended_by", ended_by.clone()),
        ],
    );
    set_worker(env, &job, id, |w| {
        w.state = ended_short.into();
        w.reason = Some(ended_by);
        w.paused_by.clear();
    });
}

fn toggle(list: &mut Vec<&'static str>, g: &'static str, on: bool) {
    list.retain(|x| *x != g);
    if on {
        list.push(g);
    }
}
