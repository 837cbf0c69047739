//! `udamon run` (the service) and `udamon ctl`, end to end on the
//! simulator and on fake /proc trees (the hidden `--root` flag): the plan
//! of `--check`, metrics, reloads (SIGHUP and `ctl reload`), guardrails,
//! rotating records, process sets, and a clean stop on SIGTERM. Nothing
//! here touches the machine's own DAMON.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{demo_spec, finish, free_port, spawn, text, udamon, write, Bounds};

/// `udamon run --check CFG` on the fake tree under `root`.
fn check_on(dir: &Path, cfg: &Path, root: &Path) -> std::process::Output {
    udamon(
        dir,
        &[
            "run",
            "--check",
            cfg.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
    )
}

const BOUNDS: Bounds = Bounds {
    secs: 120,
    mem_bytes: 4 << 30,
};

/// GET `path` from the endpoint; None while it does not answer.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// The value of the series whose line starts with `series` (name and
/// labels as the endpoint prints them).
fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Polls until `f` holds on the metrics, at most `secs`.
fn wait_for(port: u16, secs: u64, what: &str, f: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    let mut last = String::new();
    while t.elapsed() < Duration::from_secs(secs) {
        if let Some(m) = get(port, "/metrics") {
            if f(&m) {
                return m;
            }
            last = m;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what}: not seen within {secs} s; last metrics:\n{last}");
}

struct Service {
    child: Option<Child>,
    dir: PathBuf,
}

impl Service {
    fn start(dir: &Path, config: &Path, root: &Path) -> Service {
        let child = spawn(
            dir,
            &[
                "run",
                config.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
            ],
            BOUNDS,
        );
        Service {
            child: Some(child),
            dir: dir.to_path_buf(),
        }
    }

    fn signal(&self, sig: i32) {
        let pid = self.child.as_ref().unwrap().id();
        // SAFETY: kill has no memory effects; the child is ours and alive.
        unsafe { libc::kill(pid as i32, sig) };
    }

    fn ctl(&self, socket: &Path, args: &[&str]) -> std::process::Output {
        let mut a = vec!["ctl", "--socket", socket.to_str().unwrap()];
        a.extend_from_slice(args);
        udamon(&self.dir, &a)
    }

    /// SIGTERM, then the service's output; it must exit 0 in time.
    fn stop(self) -> String {
        self.signal(libc::SIGTERM);
        self.stop_waiting()
    }

    /// The service's output once it exits (0, in time) after a stop asked
    /// for already.
    fn stop_waiting(mut self) -> String {
        let out = finish(self.child.take().unwrap(), 60, "udamon run");
        let err = text(&out.stderr);
        assert!(out.status.success(), "udamon run failed: {err}");
        err
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sim_config(port: u16, socket: &Path, extra_job: &str, schemes: &str) -> String {
    format!(
        r#"listen = "127.0.0.1:{port}"
socket = "{}"
[[jobs]]
name = "demo"
target = {{ sim = "{}", speed = 20 }}
schemes = [{schemes}]
{extra_job}
"#,
        socket.display(),
        demo_spec().display()
    )
}

#[test]
fn check_prints_the_plan_and_refuses_what_cannot_run() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        sim_config(9, &d.path().join("s"), "", r#"{ preset = "reclaim" }"#),
    )
    .unwrap();
    let out = udamon(d.path(), &["run", "--check", cfg.to_str().unwrap()]);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for want in [
        "job demo: sim ",
        "path: sim",
        "scheme 0: pageout regions of 4.0 KiB.. with access 0%..0% idle for 2m..",
        "(preset reclaim)",
        "metrics: http://127.0.0.1:9/metrics",
    ] {
        assert!(o.contains(want), "{want} missing from\n{o}");
    }
    let out = udamon(
        d.path(),
        &["run", "--check", "--json", cfg.to_str().unwrap()],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"][0]["path"]["Ok"], "sim");
    // A process on a machine that has no access-check primitive.
    fs::write(
        &cfg,
        "[[jobs]]\nname = \"db\"\ntarget = { pid = 1 }\nschemes = [{ preset = \"reclaim\" }]\n",
    )
    .unwrap();
    let out = check_on(d.path(), &cfg, &root);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("path: CANNOT RUN HERE"));
    assert!(text(&out.stderr).contains("some jobs cannot run"));
}

#[test]
fn a_bad_config_is_refused_naming_the_key_and_fix() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        "[[jobs]]\nname = \"a\"\ntarget = { pid = 1 }\n[jobs.attrs]\naggr = \"100\"\n",
    )
    .unwrap();
    for args in [vec!["run", "--check"], vec!["run"]] {
        let mut a = args.clone();
        a.push(cfg.to_str().unwrap());
        let out = udamon(d.path(), &a);
        assert_eq!(out.status.code(), Some(2));
        let e = text(&out.stderr);
        assert!(
            e.contains("u.toml: job \"a\": attrs.aggr: duration \"100\" has no unit"),
            "{e}"
        );
    }
}

/// A service on the simulator: metrics in the exposition format, a
/// refused reload that changes nothing, an accepted one applied online,
/// dry run and the pressure breaker through reloads and a fake PSI file,
/// rotating records within their bound, and a clean stop.
#[test]
fn the_service_serves_metrics_reloads_guards_and_stops() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    write(
        &root,
        "proc/pressure/memory",
        "some avg10=1.00 avg60=0.00 avg300=0.00 total=1000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    );
    // DAMON_STAT (7.2+: every file), read at each scrape, never written.
    let stat = "sys/module/damon_stat/parameters";
    let idle: Vec<String> = (0..101i64).map(|i| (i * 100 - 300).to_string()).collect();
    for (f, v) in [
        ("enabled", "Y\n".to_string()),
        ("estimated_memory_bandwidth", "524288000\n".into()),
        ("memory_idle_ms_percentiles", idle.join(",") + "\n"),
        ("aggr_interval_us", "200000\n".into()),
        ("kdamond_pid", "4711\n".into()),
    ] {
        write(&root, &format!("{stat}/{f}"), &v);
    }
    let port = free_port();
    let socket = d.path().join("ctl.sock");
    let rec = d.path().join("rec");
    let record = format!(
        "[jobs.record]\ndir = \"{}\"\nrotate = \"1s\"\nmax_total = \"600K\"\n",
        rec.display()
    );
    let cfg = d.path().join("u.toml");
    let pageout = r#"{ inline = "4K max 0 0 5s max pageout" }"#;
    fs::write(&cfg, sim_config(port, &socket, &record, pageout)).unwrap();
    let svc = Service::start(d.path(), &cfg, &root);
    let m = wait_for(port, 60, "pageout applied", |m| {
        value(
            m,
            "udamon_scheme_applied_bytes_total{udamon_job=\"demo\",scheme=\"0\",action=\"pageout\"}",
        )
        .is_some_and(|v| v > 0.0)
    });
    for series in [
        "udamon_job_up{udamon_job=\"demo\"} 1",
        "udamon_job_aggregation_interval_seconds{udamon_job=\"demo\"} 0.1",
        "udamon_job_sample_interval_seconds{udamon_job=\"demo\"} 0.005",
        "udamon_job_idle_time_seconds{udamon_job=\"demo\",percentile=\"50\"}",
        "udamon_psi_memory_avg10_ratio{kind=\"some\"} 0.01",
        "udamon_config_last_reload_success 1",
        "# TYPE udamon_scheme_applied_bytes_total counter",
        "udamon_damon_stat_enabled 1",
        "udamon_damon_stat_memory_bandwidth_bytes_per_second 524288000",
        "udamon_damon_stat_memory_idle_seconds{percentile=\"0\"} -0.3",
        "udamon_damon_stat_memory_idle_seconds{percentile=\"50\"} 4.7",
        "udamon_damon_stat_memory_idle_seconds{percentile=\"100\"} 9.7",
        "udamon_damon_stat_aggr_interval_seconds 0.2",
        "udamon_damon_stat_kdamond_pid 4711",
        "udamon_damon_stat_scrape_error 0",
    ] {
        assert!(m.contains(series), "{series} missing from\n{m}");
    }
    assert!(value(&m, "udamon_job_wss_bytes{udamon_job=\"demo\"}").unwrap() > 0.0);
    check_with_promtool(&m);
    let applied = |m: &str| {
        value(
            m,
            "udamon_scheme_applied_bytes_total{udamon_job=\"demo\",scheme=\"0\",action=\"pageout\"}",
        )
        .unwrap()
    };
    let applied_before = applied(&m);

    // A broken config is refused; the old one goes on.
    fs::write(&cfg, "[[jobs]]\nname = \"demo\"\n").unwrap();
    svc.signal(libc::SIGHUP);
    let m = wait_for(port, 20, "refused reload", |m| {
        value(m, "udamon_config_reloads_total{result=\"failure\"}") == Some(1.0)
    });
    assert_eq!(value(&m, "udamon_config_last_reload_success"), Some(0.0));
    assert_eq!(value(&m, "udamon_job_up{udamon_job=\"demo\"}"), Some(1.0));

    // Dry run and the breaker, through `ctl reload`.
    let guarded = format!(
        "{record}[jobs.guardrails]\ndry_run = true\npsi_pause_above = 30\npsi_resume_below = 10\n"
    );
    fs::write(&cfg, sim_config(port, &socket, &guarded, pageout)).unwrap();
    let out = svc.ctl(&socket, &["reload"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("demo: updated online"),
        "{}",
        text(&out.stdout)
    );
    let m = wait_for(port, 30, "dry run counting", |m| {
        value(
            m,
            "udamon_scheme_would_apply_bytes_total{udamon_job=\"demo\",scheme=\"0\",action=\"pageout\"}",
        )
        .is_some_and(|v| v > 0.0)
    });
    assert_eq!(
        value(&m, "udamon_job_dry_run{udamon_job=\"demo\"}"),
        Some(1.0)
    );
    // A reload is no counter reset: what the scheme applied before stays.
    assert!(
        applied(&m) >= applied_before,
        "{} < {applied_before}",
        applied(&m)
    );
    write(
        &root,
        "proc/pressure/memory",
        "some avg10=55.00 avg60=0.00 avg300=0.00 total=9000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    );
    wait_for(port, 30, "breaker open", |m| {
        value(
            m,
            "udamon_job_guardrail_paused{udamon_job=\"demo\",guardrail=\"psi\"}",
        ) == Some(1.0)
            && value(
                m,
                "udamon_job_guardrail_trips_total{udamon_job=\"demo\",guardrail=\"psi\"}",
            ) == Some(1.0)
    });
    let st = svc.ctl(&socket, &["status"]);
    assert!(
        text(&st.stdout).contains("PAUSED by guardrail: psi"),
        "{}",
        text(&st.stdout)
    );
    write(
        &root,
        "proc/pressure/memory",
        "some avg10=5.00 avg60=0.00 avg300=0.00 total=9000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    );
    wait_for(port, 30, "breaker closed", |m| {
        value(
            m,
            "udamon_job_guardrail_paused{udamon_job=\"demo\",guardrail=\"psi\"}",
        ) == Some(0.0)
    });
    let st = svc.ctl(&socket, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v["jobs"][0]["trips"]["psi"], 1);
    assert_eq!(v["reloads_ok"], 1);

    let err = svc.stop();
    assert!(err.contains("level=info msg=stopped"), "{err}");
    assert!(err.contains("reload refused"), "{err}");
    assert!(!socket.exists(), "the socket is removed at the stop");
    // Rotation kept the records within their bound, each readable.
    let files: Vec<_> = fs::read_dir(&rec)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(files.len() >= 2, "{files:?}");
    let total: u64 = files.iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    assert!(
        total <= 600 * 1024 + 400 * 1024,
        "{total} bytes in {files:?}"
    );
    for f in &files {
        let out = udamon(d.path(), &["report", "wss", f.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            text(&out.stderr)
        );
    }
}

/// `promtool check metrics` on the endpoint's text, where Prometheus is
/// installed (CI installs it and sets UDAMON_REQUIRE_PROMETHEUS=1).
fn check_with_promtool(metrics: &str) {
    let Ok(mut c) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("UDAMON_REQUIRE_PROMETHEUS").is_none(),
            "promtool is required here"
        );
        eprintln!("promtool not installed: the exposition format is not linted");
        return;
    };
    c.stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

const PID: u32 = 4343;

/// A kernel with soft-dirty bits (and nothing else udamon could use).
fn softdirty_kernel(root: &Path) {
    write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
    write(root, "boot/config-6.12.0-test", "CONFIG_MEM_SOFT_DIRTY=y\n");
}

/// A process with a heap whose pagemap says: present, half soft-dirty.
fn fake_heap_process(root: &Path, pid: u32, cmdline: &str) {
    common::fake_process(root, pid, common::HEAP_MAP, cmdline);
}

/// A job over a command-line pattern follows the processes that match as
/// they come and go, all in one session: each process a target, with a
/// working-set series of its own, arrivals and exits logged.
#[test]
fn a_process_set_is_followed_as_processes_come_and_go() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    softdirty_kernel(&root);
    fake_heap_process(&root, PID, "batch\0--job\0nightly\0");
    write(&root, "proc/77/cmdline", "other\0");
    let port = free_port();
    let socket = d.path().join("ctl.sock");
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        format!(
            r#"listen = "127.0.0.1:{port}"
socket = "{}"
[[jobs]]
name = "batch"
target = {{ cmdline = "^batch .*nightly" }}
ops = "softdirty"
schemes = [{{ inline = "min max min max min max stat" }}]
"#,
            socket.display()
        ),
    )
    .unwrap();
    let out = check_on(d.path(), &cfg, &root);
    assert!(
        text(&out.stdout).contains(&format!("processes now: {PID}")),
        "{}",
        text(&out.stdout)
    );
    let svc = Service::start(d.path(), &cfg, &root);
    let one =
        format!("udamon_process_wss_bytes{{udamon_job=\"batch\",pid=\"{PID}\",comm=\"worker\"}}");
    wait_for(port, 60, "first process watched", |m| {
        value(m, "udamon_job_sessions{udamon_job=\"batch\"}") == Some(1.0)
            && value(m, "udamon_job_processes{udamon_job=\"batch\"}") == Some(1.0)
            && value(m, "udamon_job_wss_bytes{udamon_job=\"batch\"}").is_some_and(|v| v > 0.0)
            && value(m, &one).is_some_and(|v| v > 0.0)
    });
    fake_heap_process(&root, PID + 1, "batch\0--job\0nightly\0");
    let m = wait_for(port, 60, "second process watched", |m| {
        value(m, "udamon_job_processes{udamon_job=\"batch\"}") == Some(2.0)
    });
    // Still one session, on one path.
    assert_eq!(
        value(&m, "udamon_job_sessions{udamon_job=\"batch\"}"),
        Some(1.0)
    );
    let before = value(&m, "udamon_job_snapshots_total{udamon_job=\"batch\"}").unwrap();
    // A process leaves /proc at once, not file by file.
    let gone = root.join(format!(".gone-{PID}"));
    fs::rename(root.join(format!("proc/{PID}")), &gone).unwrap();
    fs::remove_dir_all(gone).unwrap();
    let m = wait_for(port, 60, "first process gone", |m| {
        value(m, "udamon_job_processes{udamon_job=\"batch\"}") == Some(1.0)
    });
    assert!(value(&m, "udamon_job_snapshots_total{udamon_job=\"batch\"}").unwrap() >= before);
    assert!(value(&m, &one).is_none(), "the gone process has no series");
    let err = svc.stop();
    assert!(
        err.contains(&format!("process {} (worker) joined as target 1", PID + 1)),
        "{err}"
    );
    assert!(err.contains("target 0 left (exited)"), "{err}");
}

/// A real Prometheus scrapes the service on the simulator, finds the WSS,
/// scheme-bytes and interval series, and every expression of the Grafana
/// dashboard returns data (tests/service/prom_check.py). Needs Debian's
/// `prometheus`; CI installs it and sets UDAMON_REQUIRE_PROMETHEUS=1.
#[test]
fn prometheus_scrapes_the_service_and_the_dashboard_has_data() {
    let have = std::process::Command::new("prometheus")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var_os("UDAMON_REQUIRE_PROMETHEUS").is_none(),
            "prometheus is required here"
        );
        eprintln!("prometheus not installed: skipped");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let d = tempfile::tempdir().unwrap();
    // The repository's demo config, on a free port and a private socket.
    let demo = fs::read_to_string(repo.join("examples/service/demo.toml")).unwrap();
    let examples = repo.join("examples").canonicalize().unwrap();
    let cfg = demo
        .replace("127.0.0.1:9788", &format!("127.0.0.1:{}", free_port()))
        .replace(
            "/tmp/udamon-demo.sock",
            d.path().join("s").to_str().unwrap(),
        )
        .replace("../specs/", &format!("{}/specs/", examples.display()))
        .replace(
            "\"demo-schemes.toml",
            &format!("\"{}/service/demo-schemes.toml", examples.display()),
        );
    let path = d.path().join("demo.toml");
    fs::write(&path, cfg).unwrap();
    let mut c = std::process::Command::new("python3");
    c.arg(repo.join("tests/service/prom_check.py"))
        .args(["--udamon", env!("CARGO_BIN_EXE_udamon"), "--config"])
        .arg(&path)
        .args(["--expect-job", "demo", "--dashboard"])
        .arg(repo.join("packaging/grafana/udamon-dashboard.json"));
    let out = common::run_bounded(
        c,
        Bounds {
            secs: 240,
            mem_bytes: 8 << 30,
        },
        "prom_check.py",
    );
    let o = text(&out.stdout);
    assert!(out.status.success(), "{o}{}", text(&out.stderr));
    assert!(o.contains(" exprs return series"), "{o}");
}

/// Under systemd (NOTIFY_SOCKET, WATCHDOG_USEC): READY=1 once the jobs
/// run, watchdog pings, RELOADING=1 (with MONOTONIC_USEC) on SIGHUP and
/// READY=1 after it, STOPPING=1 on SIGTERM.
#[test]
fn systemd_hears_ready_reloading_watchdog_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let d = tempfile::tempdir().unwrap();
    let notify = d.path().join("notify");
    let sock = UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        sim_config(
            free_port(),
            &d.path().join("s"),
            "",
            r#"{ preset = "ethp" }"#,
        ),
    )
    .unwrap();
    // systemd names the watched process: the shell's pid is udamon's after
    // the exec.
    let mut c = std::process::Command::new("sh");
    c.args(["-c", "WATCHDOG_PID=$$ exec \"$0\" run \"$1\""])
        .arg(env!("CARGO_BIN_EXE_udamon"))
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "1000000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    let svc = Service {
        child: Some(child),
        dir: d.path().to_path_buf(),
    };
    let mut heard = Vec::new();
    let listen_until = |want: &str, heard: &mut Vec<String>| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            let mut buf = [0u8; 512];
            let Ok(n) = sock.recv(&mut buf) else { break };
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            heard.push(msg.clone());
            if msg.contains(want) {
                return;
            }
        }
        panic!("{want} not heard; heard {heard:?}");
    };
    listen_until("READY=1", &mut heard);
    listen_until("WATCHDOG=1", &mut heard);
    svc.signal(libc::SIGHUP);
    listen_until("RELOADING=1", &mut heard);
    assert!(
        heard.last().unwrap().contains("MONOTONIC_USEC="),
        "{heard:?}"
    );
    listen_until("READY=1", &mut heard);
    svc.signal(libc::SIGTERM);
    listen_until("STOPPING=1", &mut heard);
    let err = svc.stop_waiting();
    assert!(err.contains("msg=stopped"), "{err}");
}

/// A job whose path this machine lacks (here: no idle page bitmap) stops
/// `run` before anything starts (exit 3, naming the job); marked optional,
/// it is skipped with a warning and the rest runs. A process whose own
/// session cannot start (its clear_refs is gone) is reported once, in the
/// log and in `ctl status`, and not retried at every scan while it runs.
#[test]
fn a_job_or_session_that_cannot_start_is_reported_once() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    softdirty_kernel(&root);
    fake_heap_process(&root, PID, "batch\0nightly\0");
    let socket = d.path().join("ctl.sock");
    let cfg = d.path().join("u.toml");
    let job = |name: &str, ops: &str, extra: &str| {
        format!(
            "[[jobs]]\nname = \"{name}\"\ntarget = {{ comm = \"worker\" }}\nops = \"{ops}\"\n{extra}"
        )
    };
    let head = format!("socket = \"{}\"\n", socket.display());
    fs::write(&cfg, format!("{head}{}", job("b", "idle", ""))).unwrap();
    let out = udamon(
        d.path(),
        &[
            "run",
            cfg.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("job b: --ops idle is not available"),
        "{}",
        text(&out.stderr)
    );
    assert!(!socket.exists(), "nothing was started");

    std::fs::remove_file(root.join(format!("proc/{PID}/clear_refs"))).unwrap();
    fs::write(
        &cfg,
        format!(
            "{head}{}{}",
            job("b", "idle", "optional = true\n"),
            job("s", "softdirty", "")
        ),
    )
    .unwrap();
    let svc = Service::start(d.path(), &cfg, &root);
    // Three scans' worth.
    std::thread::sleep(Duration::from_secs(7));
    let st = svc.ctl(&socket, &["status"]);
    assert!(
        text(&st.stdout).contains("last problem: "),
        "{}",
        text(&st.stdout)
    );
    let err = svc.stop();
    assert!(
        err.contains("job=b msg=\"optional job skipped: it cannot run on this machine"),
        "{err}"
    );
    assert_eq!(err.matches("cannot start monitoring").count(), 1, "{err}");
}

/// Preset tiering on processes of a two-tier machine: its schemes come
/// from the topology, and its backstop switches the kernel's demotion on
/// for the job's life only.
#[test]
fn the_tiering_backstop_lasts_as_long_as_the_job() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    softdirty_kernel(&root);
    write(&root, "sys/devices/system/node/online", "0-1\n");
    write(&root, "sys/devices/system/node/node0/cpulist", "0-1\n");
    write(&root, "sys/devices/system/node/node1/cpulist", "\n");
    for n in 0..2 {
        write(
            &root,
            &format!("sys/devices/system/node/node{n}/meminfo"),
            &format!("Node {n} MemTotal: 1048576 kB\nNode {n} MemFree: 524288 kB\n"),
        );
    }
    write(
        &root,
        "sys/devices/virtual/memory_tiering/memory_tier4/nodelist",
        "0\n",
    );
    write(
        &root,
        "sys/devices/virtual/memory_tiering/memory_tier54/nodelist",
        "1\n",
    );
    write(&root, "sys/kernel/mm/numa/demotion_enabled", "false\n");
    fake_heap_process(&root, PID, "app\0");
    let socket = d.path().join("ctl.sock");
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        format!(
            "socket = \"{}\"\n[[jobs]]\nname = \"tier\"\ntarget = {{ comm = \"worker\" }}\nops = \"softdirty\"\n\
             schemes = [{{ preset = \"tiering\", goal_tuner = \"temporal\", rate = \"64M\" }}]\n",
            socket.display()
        ),
    )
    .unwrap();
    let demotion = || fs::read_to_string(root.join("sys/kernel/mm/numa/demotion_enabled")).unwrap();
    let svc = Service::start(d.path(), &cfg, &root);
    let t = Instant::now();
    while demotion().trim() != "true" && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(demotion().trim(), "true");
    let st = svc.ctl(&socket, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    // A process set is one session, its processes its targets.
    let w = &v["jobs"][0]["workers"]["0"];
    assert_eq!(w["processes"]["0"]["pid"], PID, "{v}");
    assert_eq!(w["schemes"][0]["action"], "migrate_cold", "{v}");
    assert_eq!(w["schemes"][1]["action"], "migrate_hot", "{v}");
    assert_eq!(
        w["schemes"][0]["goals"][0]["metric"], "node_mem_free_bp",
        "{v}"
    );
    let err = svc.stop();
    assert_eq!(demotion(), "false", "{err}");
    assert!(err.contains("demotion_enabled switched off again"), "{err}");
}

/// docs/service.md's example configuration, as written, is a valid plan:
/// `run --check` lays out its job (and exits 0, or 2 only because this
/// machine cannot run it, which it says).
#[test]
fn the_documented_configuration_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let doc = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/service.md"
    ))
    .unwrap();
    let start = doc.find("```toml\n").expect("a toml block") + 8;
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    let cfg = dir.path().join("udamon.toml");
    fs::write(&cfg, block).unwrap();
    let out = udamon(dir.path(), &["run", "--check", cfg.to_str().unwrap()]);
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    assert!(o.contains("job redis: comm redis-server"), "{o}{e}");
    match out.status.code() {
        Some(0) => {}
        Some(3) => assert!(e.contains("cannot run on this machine"), "{o}{e}"),
        // Only for want of the unit's state directory (/var/lib/udamon).
        Some(1) => assert!(
            o.contains("CANNOT START: job redis: record.dir") && !o.contains("CANNOT RUN HERE"),
            "{o}{e}"
        ),
        c => panic!("exit {c:?}: {o}{e}"),
    }
    // A soft-dirty reset other than the kernel's way is said in the plan.
    fs::write(
        &cfg,
        block.replace("softdirty_reset = \"sample\"", "softdirty_reset = \"auto\""),
    )
    .unwrap();
    let out = udamon(dir.path(), &["run", "--check", cfg.to_str().unwrap()]);
    let o = text(&out.stdout);
    assert!(
        o.contains("  soft-dirty reset: auto"),
        "{o}{}",
        text(&out.stderr)
    );
}

/// A process set with no process yet is no error: the service runs, and
/// the log and `ctl status` say what it waits for.
#[test]
fn a_process_set_without_processes_waits_and_says_for_what() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    softdirty_kernel(&root);
    let socket = d.path().join("ctl.sock");
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        format!(
            "socket = \"{}\"\n[[jobs]]\nname = \"later\"\ntarget = {{ comm = \"not-yet\" }}\n\
             ops = \"softdirty\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let out = check_on(d.path(), &cfg, &root);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("no process matches yet: it waits"),
        "{}",
        text(&out.stdout)
    );
    let svc = Service::start(d.path(), &cfg, &root);
    let t = Instant::now();
    while !socket.exists() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let st = svc.ctl(&socket, &["status"]);
    assert!(
        text(&st.stdout).contains("no session: waiting for a process matching comm not-yet"),
        "{}",
        text(&st.stdout)
    );
    let err = svc.stop();
    assert_eq!(
        err.matches("waiting: no process matches comm not-yet yet")
            .count(),
        1,
        "{err}"
    );
}

/// A service of one simulated job `demo` without schemes, under `dir`:
/// the service, its port, control socket and config file.
fn plain_sim_service(dir: &Path) -> (Service, u16, PathBuf, PathBuf) {
    let root = dir.join("root");
    fs::create_dir_all(&root).unwrap();
    let port = free_port();
    let socket = dir.join("ctl.sock");
    let cfg = dir.join("u.toml");
    fs::write(&cfg, sim_config(port, &socket, "", "")).unwrap();
    (Service::start(dir, &cfg, &root), port, socket, cfg)
}

/// `udamon ctl pause` and `resume` on a simulated job (udamon's engine):
/// the session stops being stepped (its snapshot count stands still) and
/// goes on where it was; the status and the answer say how; an unknown job
/// is a usage error naming the jobs there are.
#[test]
fn a_job_pauses_and_resumes_keeping_what_it_learned() {
    let d = tempfile::tempdir().unwrap();
    let (svc, port, socket, _) = plain_sim_service(d.path());
    let snapshots = |svc: &Service| {
        let st = svc.ctl(&socket, &["status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        let w = &v["jobs"][0]["workers"];
        let n: u64 = w
            .as_object()
            .map(|o| o.values().filter_map(|w| w["snapshots"].as_u64()).sum())
            .unwrap_or(0);
        let paused: Vec<String> = w
            .as_object()
            .map(|o| {
                o.values()
                    .filter_map(|w| w["paused"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        (n, paused)
    };
    wait_for(port, 60, "snapshots", |m| {
        value(m, "udamon_job_snapshots_total{udamon_job=\"demo\"}").is_some_and(|v| v > 3.0)
    });

    let out = svc.ctl(&socket, &["pause", "demo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("job demo: paused"), "{said}");
    assert!(
        said.contains("monitoring paused: the regions and their ages are kept"),
        "{said}"
    );
    let (a, paused) = snapshots(&svc);
    assert_eq!(paused.len(), 1, "{paused:?}");
    std::thread::sleep(Duration::from_millis(1500));
    let (b, _) = snapshots(&svc);
    assert_eq!(a, b, "no snapshot while paused");
    let st = text(&svc.ctl(&socket, &["status"]).stdout);
    assert!(st.contains("paused: monitoring paused"), "{st}");
    let m = get(port, "/metrics").unwrap();
    assert_eq!(
        value(&m, "udamon_job_paused_sessions{udamon_job=\"demo\"}"),
        Some(1.0)
    );

    let out = svc.ctl(&socket, &["resume", "demo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("job demo: resumed"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (c, paused) = snapshots(&svc);
        if c > b && paused.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot after the resume ({b} -> {c})"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let out = svc.ctl(&socket, &["pause", "nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no job named \"nosuch\" (jobs: demo)"),
        "{}",
        text(&out.stderr)
    );
    let err = svc.stop();
    assert!(
        err.contains("paused on request: monitoring paused"),
        "{err}"
    );
    assert!(err.contains("resumed on request"), "{err}");
}

/// New recording settings are taken online: the session goes on (its
/// snapshot count keeps growing, no restart), a record starts in the new
/// directory, and removing `[jobs.record]` ends it, readable.
#[test]
fn recording_settings_change_online() {
    let d = tempfile::tempdir().unwrap();
    let (svc, port, socket, cfg) = plain_sim_service(d.path());
    let snaps =
        |m: &str| value(m, "udamon_job_snapshots_total{udamon_job=\"demo\"}").unwrap_or(0.0);
    let before = snaps(&wait_for(port, 60, "snapshots", |m| snaps(m) > 3.0));

    let rec = d.path().join("rec");
    let record = format!("[jobs.record]\ndir = \"{}\"\n", rec.display());
    fs::write(&cfg, sim_config(port, &socket, &record, "")).unwrap();
    let out = svc.ctl(&socket, &["reload"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("demo: updated online"),
        "{}",
        text(&out.stdout)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let file = loop {
        let files: Vec<_> = fs::read_dir(&rec)
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        if let Some(f) = files.first() {
            break f.clone();
        }
        assert!(Instant::now() < deadline, "no record in {}", rec.display());
        std::thread::sleep(Duration::from_millis(200));
    };
    let m = wait_for(port, 30, "snapshots go on", |m| snaps(m) > before + 3.0);
    assert!(snaps(&m) > before, "the session went on: no restart");

    fs::write(&cfg, sim_config(port, &socket, "", "")).unwrap();
    let out = svc.ctl(&socket, &["reload"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The session takes it at its next second: its status shows no record.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = svc.ctl(&socket, &["status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        let recording = v["jobs"][0]["workers"]
            .as_object()
            .is_some_and(|o| o.values().any(|w| !w["record"].is_null()));
        if !recording {
            break;
        }
        assert!(Instant::now() < deadline, "still recording: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let err = svc.stop();
    assert!(err.contains("now recording to"), "{err}");
    assert!(err.contains("recording off"), "{err}");
    assert!(!err.contains("restarted"), "{err}");
    let out = udamon(d.path(), &["report", "wss", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
