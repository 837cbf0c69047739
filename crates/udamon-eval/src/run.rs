//! One run of a command workload under one configuration: set-up, the run
//! (measured), the monitor beside it, tear-down.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::measure::{self, Counters, Sampler, Samples};
use crate::result::RunResult;
use crate::suite::{Config, Kind, Metric, Suite, Workload};
use crate::Error;

/// Where a run happens and what it may ask of its caller.
pub struct Ctx<'a> {
    pub suite: &'a Suite,
    /// The results directory (runs/ and schemes/ under it).
    pub dir: &'a Path,
    /// The udamon binary the monitors run.
    pub udamon: &'a Path,
    /// The damo program (`damo-*` configurations), if found.
    pub damo: Option<&'a Path>,
    /// Whether the user asked to stop.
    pub stop: &'a dyn Fn() -> bool,
    /// Where /proc is read ("/" but in tests).
    pub root: &'a Path,
    /// The THP switch (`thp` configuration).
    pub thp_path: &'a Path,
}

/// How long a monitor gets to finish its record after the run ends.
const MONITOR_GRACE: Duration = Duration::from_secs(180);
/// How long a named target may take to appear after the run starts.
const TARGET_WAIT: Duration = Duration::from_secs(30);

/// A child we reap ourselves with wait4, for its resource usage.
struct Child {
    pid: i32,
    reaped: Option<(i32, libc::rusage)>,
}

impl Child {
    fn spawn(mut cmd: Command, what: &str) -> Result<Child, Error> {
        cmd.process_group(0);
        let c = cmd
            .spawn()
            .map_err(|e| Error::Other(format!("cannot start {what}: {e}")))?;
        Ok(Child {
            pid: c.id() as i32,
            reaped: None,
        })
    }

    /// Reaps the child if it has ended; true when it has.
    fn poll(&mut self) -> bool {
        if self.reaped.is_some() {
            return true;
        }
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain system call on our own child.
        let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == self.pid || r < 0 {
            self.reaped = Some((status, ru));
            return true;
        }
        false
    }

    /// Signals the child's whole process group.
    fn signal(&self, sig: i32) {
        if self.reaped.is_none() {
            // SAFETY: the group is the child's own (process_group(0)), not yet reaped.
            unsafe { libc::kill(-self.pid, sig) };
        }
    }

    /// Waits until the child ends or `limit` passes (then kills it).
    /// Returns false when it had to be killed.
    fn wait_for(&mut self, limit: Duration, stop: &dyn Fn() -> bool) -> bool {
        let t = Instant::now();
        while !self.poll() {
            if t.elapsed() >= limit || stop() {
                self.signal(libc::SIGKILL);
                while !self.poll() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    fn exit(&self) -> Option<String> {
        let (status, _) = self.reaped?;
        if libc::WIFEXITED(status) {
            let c = libc::WEXITSTATUS(status);
            (c != 0).then(|| format!("exited {c}"))
        } else if libc::WIFSIGNALED(status) {
            Some(format!("was killed by signal {}", libc::WTERMSIG(status)))
        } else {
            None
        }
    }

    fn code(&self) -> Option<i32> {
        let (status, _) = self.reaped?;
        libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
    }

    fn cpu_s(&self) -> Option<f64> {
        let (_, ru) = self.reaped.as_ref()?;
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        Some(t(ru.ru_utime) + t(ru.ru_stime))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.poll() {
            self.signal(libc::SIGKILL);
            while !self.poll() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn sh(script: &str, cwd: Option<&Path>, out: &Path, err: &Path) -> Result<Command, Error> {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).stdin(Stdio::null());
    c.stdout(file(out)?).stderr(file(err)?);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    Ok(c)
}

fn file(p: &Path) -> Result<File, Error> {
    File::create(p).map_err(|e| Error::Other(format!("{}: {e}", p.display())))
}

fn tail(p: &Path) -> String {
    let t = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
    let s = lines[lines.len().saturating_sub(3)..].join(" | ");
    if s.len() > 300 {
        format!("{}...", &s[..s.floor_char_boundary(300)])
    } else {
        s
    }
}

/// Restores the system's THP setting when dropped.
struct ThpGuard {
    path: PathBuf,
    before: String,
}

impl Drop for ThpGuard {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.before);
    }
}

/// The bracketed word of a sysfs choice file: "always [madvise] never" ->
/// "madvise" (a file holding one word: that word).
pub fn thp_mode(path: &Path) -> Option<String> {
    let t = std::fs::read_to_string(path).ok()?;
    let Some(s) = t.find('[') else {
        let w = t.trim();
        return (!w.is_empty() && !w.contains(' ')).then(|| w.to_string());
    };
    let e = t[s..].find(']')?;
    Some(t[s + 1..s + e].to_string())
}

/// The interrupted run is not saved; the caller stops.
pub struct Interrupted;

/// Runs a command workload once under `config`.
pub fn run(
    ctx: &Ctx,
    w: &Workload,
    config_name: &str,
    config: &Config,
    repeat: u32,
) -> Result<Result<RunResult, Interrupted>, Error> {
    let Kind::Command {
        run,
        setup,
        teardown,
        target,
        cwd,
        timeout_s,
        metric,
    } = &w.kind
    else {
        return Err(Error::Other("not a command workload".into()));
    };
    let mut r = RunResult::new(&w.name, config_name, repeat);
    if config.is_damo() && ctx.damo.is_none() {
        r.skip(
            "damo is not installed: put it on PATH or give `damo = \"/path/to/damo\"` in the suite",
        );
        return Ok(Ok(r));
    }
    let runs = ctx.dir.join("runs");
    std::fs::create_dir_all(&runs).map_err(|e| Error::Other(format!("{}: {e}", runs.display())))?;
    let id = r.id();
    let f = |ext: &str| runs.join(format!("{id}.{ext}"));
    let cmds = Commands {
        cwd: cwd.as_deref(),
        timeout_s: *timeout_s,
        timeout: Duration::from_secs_f64(*timeout_s),
        teardown: teardown.as_deref(),
        f: &f,
    };

    let _thp = match set_thp(ctx, config) {
        Ok(guard) => guard,
        Err(why) => {
            r.fail(why);
            return Ok(Ok(r));
        }
    };
    r.thp = thp_mode(ctx.thp_path);

    if ctx.suite.drop_caches {
        if let Err(why) = drop_caches(ctx) {
            r.fail(why);
            return Ok(Ok(r));
        }
    }

    if let Some(s) = setup {
        match cmds.set_up(ctx, s, &mut r)? {
            SetUp::Done => {}
            SetUp::Failed => return Ok(Ok(r)),
            SetUp::Interrupted => return Ok(Err(Interrupted)),
        }
    }

    let c0 = Counters::read(ctx.root);
    let sampler = Sampler::start(ctx.root.to_path_buf(), Duration::from_secs(1));
    let t0 = Instant::now();
    let mut child = Child::spawn(sh(run, cmds.cwd, &f("out"), &f("err"))?, "the run command")?;

    let target_pid = match target {
        None => Some(child.pid as u32),
        Some(name) => find_target(ctx, name, &mut child, t0),
    };
    if let Some(p) = target_pid {
        sampler.set_target(p);
        r.target_pid = Some(p);
    }

    let mut monitor = None;
    if config.monitors() {
        monitor = start_monitor(ctx, config, config_name, target, target_pid, &f, &mut r)?;
    }

    let finished = child.wait_for(cmds.timeout, ctx.stop);
    let wall = t0.elapsed().as_secs_f64();
    let interrupted = (ctx.stop)();
    let ended = monitor
        .as_mut()
        .map(|m| end_monitor(m, config, &mut r))
        .unwrap_or_default();
    let samples = sampler.finish();
    let c1 = Counters::read(ctx.root).since(&c0);
    cmds.tear_down(&mut r);
    if interrupted {
        return Ok(Err(Interrupted));
    }

    r.runtime_s = Some(wall);
    r.workload_cpu_s = child.cpu_s();
    take_measurements(&samples, &c1, &mut r);
    read_outputs(metric.as_ref(), &f, &mut r);
    judge(&cmds, &child, finished, ended, &mut r);
    Ok(Ok(r))
}

/// Starts the monitor beside the run, on the target process (`prec`: on
/// physical memory); a target that never appeared fails the run instead.
fn start_monitor(
    ctx: &Ctx,
    config: &Config,
    config_name: &str,
    target: &Option<String>,
    target_pid: Option<u32>,
    f: &dyn Fn(&str) -> PathBuf,
    r: &mut RunResult,
) -> Result<Option<Child>, Error> {
    match target_pid {
        None if !matches!(config, Config::Prec) => {
            r.fail(format!(
                "no process named {:?} appeared within {} s of the run's start",
                target.as_deref().unwrap_or(""),
                TARGET_WAIT.as_secs()
            ));
            Ok(None)
        }
        _ => {
            let cmd = monitor_command(ctx, config, config_name, target_pid.unwrap_or(0), f)?;
            let mut cmd = cmd;
            cmd.stdin(Stdio::null())
                .stdout(file(&f("monitor.out"))?)
                .stderr(file(&f("monitor.err"))?);
            Ok(Some(Child::spawn(cmd, "the monitor")?))
        }
    }
}

/// The measurements taken while the workload ran: its samples (RSS, used
/// memory, kdamond's CPU time) and the counters' increase.
fn take_measurements(samples: &Samples, c1: &Counters, r: &mut RunResult) {
    r.rss_avg_kb = samples.rss_avg_kb();
    r.rss_peak_kb = samples.rss_peak_kb();
    r.mem_used_avg_kb = samples.mem_used_avg_kb();
    r.kdamond_cpu_s = samples.kdamond_cpu_s();
    r.samples = samples.rss_kb.len() as u32;
    r.pgmajfault = c1.pgmajfault;
    r.pswpin = c1.pswpin;
    r.pswpout = c1.pswpout;
    r.psi_some_us = c1.psi_some_us;
    r.psi_full_us = c1.psi_full_us;
}

/// The THP mode a run wants (the `thp` configuration's "always", else the
/// suite's), switched on until the guard drops; Err says why it cannot be.
fn set_thp(ctx: &Ctx, config: &Config) -> Result<Option<ThpGuard>, String> {
    let want = if matches!(config, Config::Thp) {
        Some("always")
    } else {
        ctx.suite.thp.as_deref()
    };
    let Some(want) = want else {
        return Ok(None);
    };
    let Some(before) = thp_mode(ctx.thp_path) else {
        return Err(format!(
            "THP {want}: cannot read {}: the kernel has no THP",
            ctx.thp_path.display()
        ));
    };
    if let Err(e) = std::fs::write(ctx.thp_path, want) {
        return Err(format!(
            "THP {want}: cannot write {}: {e} (run as root)",
            ctx.thp_path.display()
        ));
    }
    Ok(Some(ThpGuard {
        path: ctx.thp_path.to_path_buf(),
        before,
    }))
}

/// `drop_caches = true`: the page cache written back and dropped.
fn drop_caches(ctx: &Ctx) -> Result<(), String> {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    std::fs::write(ctx.root.join("proc/sys/vm/drop_caches"), "3").map_err(|e| {
        format!("drop_caches = true: cannot write /proc/sys/vm/drop_caches: {e} (run as root)")
    })
}

/// A workload's shell commands as one run runs them: in the workload's
/// directory, within its timeout, each writing `runs/ID.EXT` (`f`).
struct Commands<'a> {
    cwd: Option<&'a Path>,
    timeout_s: f64,
    timeout: Duration,
    teardown: Option<&'a str>,
    f: &'a dyn Fn(&str) -> PathBuf,
}

/// How a set-up command went.
enum SetUp {
    Done,
    /// It failed (the result says why); torn down.
    Failed,
    /// The user asked to stop; torn down.
    Interrupted,
}

impl Commands<'_> {
    /// Runs the setup command `s`.
    fn set_up(&self, ctx: &Ctx, s: &str, r: &mut RunResult) -> Result<SetUp, Error> {
        let f = self.f;
        let mut c = Child::spawn(
            sh(s, self.cwd, &f("setup.out"), &f("setup.err"))?,
            "the setup command",
        )?;
        let done = c.wait_for(self.timeout, ctx.stop);
        if (ctx.stop)() {
            self.tear_down(r);
            return Ok(SetUp::Interrupted);
        }
        if !done {
            r.fail(format!("setup timed out after {} s", self.timeout_s));
        } else if let Some(e) = c.exit() {
            r.fail(format!("setup {e}: {}", tail(&f("setup.err"))));
        }
        if r.status != "ok" {
            self.tear_down(r);
            return Ok(SetUp::Failed);
        }
        Ok(SetUp::Done)
    }

    /// Runs the teardown command, if any; what goes wrong is a warning.
    fn tear_down(&self, r: &mut RunResult) {
        let f = self.f;
        if let Some(t) = self.teardown {
            let ok = sh(t, self.cwd, &f("teardown.out"), &f("teardown.err"))
                .and_then(|c| Child::spawn(c, "the teardown command"))
                .map(|mut c| {
                    let done = c.wait_for(self.timeout, &|| false);
                    (done, c.exit())
                });
            match ok {
                Ok((true, None)) => {}
                Ok((false, _)) => r.warn(format!("teardown timed out after {} s", self.timeout_s)),
                Ok((true, Some(e))) => {
                    r.warn(format!("teardown {e}: {}", tail(&f("teardown.err"))))
                }
                Err(e) => r.warn(e.to_string()),
            }
        }
    }
}

/// The process named `name`, waited for until it appears (at most
/// [`TARGET_WAIT`]), the run ends or the user asks to stop.
fn find_target(ctx: &Ctx, name: &str, child: &mut Child, t0: Instant) -> Option<u32> {
    let mut found = None;
    while found.is_none() && t0.elapsed() < TARGET_WAIT && !child.poll() && !(ctx.stop)() {
        found = measure::find_by_name(ctx.root, name).first().copied();
        if found.is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    if found.is_none() {
        found = measure::find_by_name(ctx.root, name).first().copied();
    }
    found
}

/// How the monitor ended.
#[derive(Default)]
struct MonitorEnd {
    /// How it ended before the run did, if it did and not well.
    early_exit: Option<String>,
    /// udamon's exit status 3: the machine lacks what the monitor needs.
    cannot: bool,
}

/// Ends the monitor once the run has ended (SIGINT, then a kill after
/// [`MONITOR_GRACE`]) unless it ended first; its CPU time goes to `r`.
fn end_monitor(m: &mut Child, config: &Config, r: &mut RunResult) -> MonitorEnd {
    let mut ended = MonitorEnd::default();
    if m.poll() {
        ended.early_exit = m.exit();
        // udamon's exit status 3: the machine lacks what the monitor needs.
        ended.cannot = m.code() == Some(3) && !config.is_damo();
    } else {
        m.signal(libc::SIGINT);
        if !m.wait_for(MONITOR_GRACE, &|| false) {
            r.warn(format!(
                "the monitor did not end within {} s of SIGINT and was killed",
                MONITOR_GRACE.as_secs()
            ));
        }
    }
    r.monitor_cpu_s = m.cpu_s();
    ended
}

/// What the run's and the monitor's outputs say: the workload's metric
/// (its absence fails the run) and the path the monitor took.
fn read_outputs(metric: Option<&Metric>, f: &dyn Fn(&str) -> PathBuf, r: &mut RunResult) {
    if let Some(m) = metric {
        let out = std::fs::read_to_string(f("out")).unwrap_or_default()
            + "\n"
            + &std::fs::read_to_string(f("err")).unwrap_or_default();
        r.metric = m.parse(&out);
        if r.metric.is_none() && r.status == "ok" {
            r.fail(format!(
                "the run's output holds no number for the metric regex {:?}",
                m.regex.as_str()
            ));
        }
    }
    if let Ok(t) = std::fs::read_to_string(f("monitor.out")) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(t.trim()) {
            r.monitor_path = v.get("ops").and_then(|o| o.as_str()).map(str::to_string);
        }
    }
}

/// The run's verdict: skipped when the machine cannot run the monitor,
/// failed when the run timed out or failed, or the monitor ended first.
fn judge(cmds: &Commands, child: &Child, finished: bool, monitor: MonitorEnd, r: &mut RunResult) {
    let f = cmds.f;
    if monitor.cannot {
        r.skip(format!(
            "this machine cannot run the monitor: {}",
            tail(&f("monitor.err"))
        ));
    } else if !finished {
        r.fail(format!(
            "the run did not end within its timeout ({} s) and was killed",
            cmds.timeout_s
        ));
    } else if let Some(e) = child.exit() {
        r.fail(format!("the run {e}: {}", tail(&f("err"))));
    } else if let Some(e) = monitor.early_exit {
        r.fail(format!(
            "the monitor {e} before the run ended: {}",
            tail(&f("monitor.err"))
        ));
    }
}

fn monitor_command(
    ctx: &Ctx,
    config: &Config,
    config_name: &str,
    pid: u32,
    f: &dyn Fn(&str) -> PathBuf,
) -> Result<Command, Error> {
    let s = ctx.suite;
    let udamon = |sub: &[&str]| {
        let mut c = Command::new(ctx.udamon);
        c.args(sub);
        if matches!(config, Config::Prec) {
            c.arg("--paddr");
        } else {
            c.arg("--pid").arg(pid.to_string());
        }
        c.arg("--ops")
            .arg(&s.ops)
            .arg("-o")
            .arg(f("udr"))
            .arg("--json")
            .args(&s.monitor_args);
        c
    };
    Ok(match config {
        Config::Rec | Config::Prec => udamon(&["record"]),
        Config::Schemes { .. } => {
            let file = crate::scheme_file(ctx.dir, config_name, config)?;
            let file = file.to_string_lossy().into_owned();
            udamon(&["apply", &file])
        }
        Config::DamoRec | Config::DamoSchemes { .. } => {
            let mut c = Command::new(ctx.damo.expect("checked by the caller"));
            // The user's options first: one taking several values (such
            // as --do_record) ends at the next option, not at the pid.
            c.arg("record").args(&s.damo_args);
            c.arg("-o")
                .arg(f("damo"))
                .arg("--output_type")
                .arg("json_compressed");
            if let Config::DamoSchemes { schemes } = config {
                c.args(crate::suite::damo_args(schemes).map_err(Error::Other)?);
            }
            c.arg(pid.to_string());
            c
        }
        Config::Orig | Config::Thp => unreachable!("no monitor"),
        Config::Tuned { .. } => {
            return Err(Error::Other(format!(
                "{config_name}: a tuned configuration runs as its tuned schemes"
            )))
        }
    })
}
