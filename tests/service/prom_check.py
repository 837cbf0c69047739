#!/usr/bin/env python3
"""End-to-end check of `udamon run`'s Prometheus endpoint, a real Prometheus, and the dashboard.

    tests/service/prom_check.py --udamon PATH --config CONFIG [--expect-job NAME]
        [--dashboard packaging/grafana/udamon-dashboard.json] [--screenshot OUT.png]
    tests/service/prom_check.py --fake --config CONFIG ...      (tests/service/fake_exporter.py instead)

Steps, each reported as ok or FAIL:
  1. start `PATH run CONFIG`; wait for http://LISTEN/metrics (LISTEN from the
     config's `listen`, or 127.0.0.1:--port)
  2. `promtool check metrics` on one scrape: parse errors and lint problems fail
     (--allow-lint TEXT accepts lint lines containing TEXT)
  3. start `prometheus` in a scratch directory, scraping the endpoint every 1 s
     (a udamon job is the metrics' `udamon_job` label); wait for the
     target to be up, then --settle seconds (20) of scrapes
  4. query the HTTP API: udamon_job_up == 1, udamon_job_wss_bytes,
     rate(udamon_scheme_tried_bytes_total[1m]) > 0, the two interval gauges, all
     for --expect-job (any job when not given); the dashboard's job variable
  5. every `expr` of the dashboard ($job, $instance and other variables as .*,
     $__rate_interval and $__interval as 1m) must return at least one series
  6. with --screenshot, headless Chromium draws Prometheus's graph of
     udamon_job_wss_bytes into OUT.png
Both processes are stopped at the end, also on failure; everything ends within
--timeout seconds (120). Exit 0 PASS, 1 FAIL, 2 usage error.

Against the real binary, with a simulated target (no root, no kernel DAMON).
udamon reads relative paths in a config from the config's directory: give
absolute ones in a config under /tmp. Every dashboard panel must have a series, so the scheme
has a quota and a quota goal (effective quota, goal panels) and the schemes
file form is used, as the inline text form carries neither:

    cat >/tmp/svc-schemes.toml <<'EOF'
    [[scheme]]
    action = "pageout"
    access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["5s", "max"] }
    [scheme.quota]
    size = "64M"
    reset_interval = "1s"
    [[scheme.quota.goals]]
    metric = "user_input"
    target = 10000
    current = 5000
    EOF
    cat >/tmp/svc.toml <<'EOF'
    listen = "127.0.0.1:9788"
    socket = "/tmp/udamon-svc.sock"
    [[jobs]]
    name = "demo"
    target = { sim = "/PATH/TO/udamon/examples/specs/demo.toml", speed = 10.0 }
    schemes = [ { file = "/tmp/svc-schemes.toml" } ]
    [jobs.attrs]
    sample = "5ms"
    aggr = "100ms"
    EOF
    tests/service/prom_check.py --udamon target/release/udamon --config /tmp/svc.toml --expect-job demo \
        [--screenshot docs/service-prometheus.png]

Python 3 standard library only; needs `prometheus` and `promtool` (Debian
package prometheus), and `chromium` for --screenshot.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_DASHBOARD = os.path.join(REPO, "packaging", "grafana", "udamon-dashboard.json")

# Metric families of docs/service.md, to warn about names that drift.
SPEC_FAMILIES = {
    "udamon_job_up", "udamon_job_info", "udamon_job_snapshots_total", "udamon_job_regions",
    "udamon_job_sample_interval_seconds", "udamon_job_aggregation_interval_seconds", "udamon_job_wss_bytes",
    "udamon_job_idle_time_seconds", "udamon_job_estimated_bandwidth_bytes_per_second",
    "udamon_job_guardrail_paused", "udamon_job_guardrail_trips_total", "udamon_job_dry_run",
    "udamon_job_sessions", "udamon_job_cpu_seconds_total", "udamon_page_size_bytes",
    "udamon_scheme_tried_bytes_total", "udamon_scheme_tried_regions_total", "udamon_scheme_applied_bytes_total",
    "udamon_scheme_applied_regions_total", "udamon_scheme_quota_exceeds_total",
    "udamon_scheme_would_apply_bytes_total", "udamon_scheme_effective_quota_bytes",
    "udamon_scheme_goal_current_value", "udamon_scheme_goal_target_value", "udamon_scheme_active",
    "udamon_node_memory_used_bytes", "udamon_node_memory_free_bytes", "udamon_node_vmstat_total",
    "udamon_vmstat_total", "udamon_psi_memory_stall_seconds_total", "udamon_psi_memory_avg10_ratio",
    "process_cpu_seconds_total", "process_resident_memory_bytes", "udamon_build_info",
    "udamon_config_reloads_total", "udamon_config_last_reload_success",
}


class Timeout(Exception):
    pass


class Abort(Exception):
    """A step failed in a way that makes the following steps pointless."""


class Run:
    def __init__(self, args):
        self.args = args
        self.start = time.monotonic()
        self.deadline = self.start + args.timeout
        self.results = []  # (status, name, detail)
        self.procs = []  # (name, Popen, log path)
        self.tmp = tempfile.mkdtemp(prefix="prom_check.")

    # ------------------------------------------------------------ reporting
    def record(self, ok, name, detail=""):
        status = "ok" if ok else "FAIL"
        self.results.append((status, name, detail))
        line = f"{status:4}  {name}" + (f": {detail}" if detail else "")
        print(line, flush=True)
        return ok

    def warn(self, name, detail):
        self.results.append(("warn", name, detail))
        print(f"warn  {name}: {detail}", flush=True)

    def left(self):
        return self.deadline - time.monotonic()

    def budget(self, want):
        """Seconds for a step: at most `want`, and never past the deadline (less 8 s to clean up)."""
        b = min(want, self.left() - 8)
        if b <= 0:
            raise Timeout(f"no time left within --timeout {self.args.timeout:g}s")
        return b

    # ------------------------------------------------------------ processes
    def spawn(self, name, cmd, cwd=None):
        logpath = os.path.join(self.tmp, f"{name}.log")
        log = open(logpath, "wb")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             cwd=cwd, start_new_session=True)
        log.close()
        self.procs.append((name, p, logpath))
        return p

    def log_tail(self, name, lines=15):
        for n, _p, path in self.procs:
            if n == name:
                try:
                    with open(path, errors="replace") as f:
                        tail = f.read().splitlines()[-lines:]
                except OSError:
                    return ""
                return "\n".join("      | " + line for line in tail)
        return ""

    def stop_all(self):
        for name, p, _ in reversed(self.procs):
            if p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, signal.SIGTERM)  # its own session: the process and its children
            except ProcessLookupError:
                continue
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=3)
                print(f"note  {name} did not stop on SIGTERM within 5 s; killed", flush=True)

    # ------------------------------------------------------------ HTTP
    def http_get(self, url, timeout=5.0):
        with urllib.request.urlopen(url, timeout=min(timeout, max(self.left() - 5, 0.5))) as r:
            return r.read()

    def api(self, base, path, **params):
        url = f"{base}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            body = self.http_get(url, timeout=10)
        except urllib.error.HTTPError as e:
            body = e.read()  # Prometheus answers 400/422 with a JSON error
        doc = json.loads(body)
        if doc.get("status") != "success":
            raise ValueError(f'{doc.get("errorType", "error")}: {doc.get("error", body[:200])}')
        return doc["data"]


def listen_port(config_path):
    """The port of `listen` in a udamon config (TOML, or JSON for .json)."""
    with open(config_path, "rb") as f:
        raw = f.read()
    listen = None
    if config_path.endswith(".json"):
        listen = json.loads(raw).get("listen")
    else:
        try:
            import tomllib

            listen = tomllib.loads(raw.decode()).get("listen")
        except ImportError:  # Python < 3.11: the top-level key, by hand
            m = re.search(r'(?m)^\s*listen\s*=\s*"([^"]*)"', raw.decode())
            listen = m.group(1) if m else None
    if not listen:
        return None, None
    m = re.fullmatch(r"\[?([^\]]*)\]?:(\d+)", listen)
    if not m:
        raise ValueError(f"listen = {listen!r} is not HOST:PORT")
    host = m.group(1)
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    return host, int(m.group(2))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def promql_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dashboard_exprs(dash):
    """(panel title, refId, expr) of every target of every panel, rows' nested panels included."""
    out = []

    def walk(panels):
        for p in panels or []:
            for t in p.get("targets") or []:
                if t.get("expr"):
                    out.append((p.get("title", f'panel {p.get("id")}'), t.get("refId", "?"), t["expr"]))
            walk(p.get("panels"))

    walk(dash.get("panels"))
    return out


def resolve_vars(expr, names):
    """Grafana's variables as Prometheus sees them with 'All' selected."""
    for v in ("__rate_interval", "__interval", "__range"):
        expr = re.sub(r"\$\{" + v + r"(:[^}]*)?\}|\$" + v + r"\b|\[\[" + v + r"\]\]", "1m", expr)
    for n in names:
        expr = re.sub(r"\$\{" + re.escape(n) + r"(:[^}]*)?\}|\$" + re.escape(n) + r"\b|\[\[" + re.escape(n) + r"\]\]",
                      ".*", expr)
    return expr


def check_dashboard_shape(run, dash):
    ok = True
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 39:
        ok = run.record(False, "dashboard schemaVersion", f'{dash.get("schemaVersion")!r}, expected 39 or newer')
    tvars = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = tvars.get("DS_PROMETHEUS")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        ok = run.record(False, "dashboard DS_PROMETHEUS variable", "missing, or not a prometheus datasource variable")
    job = tvars.get("job")
    jq = job and (job.get("query", {}).get("query") if isinstance(job.get("query"), dict) else job.get("query"))
    if not jq or not re.fullmatch(r"label_values\(\s*udamon_job_up\s*(\{[^}]*\})?\s*,\s*udamon_job\s*\)", jq):
        ok = run.record(False, "dashboard job variable", f"query {jq!r}, expected label_values(udamon_job_up, udamon_job)")
    bad_ds = []

    def walk(panels):
        for p in panels or []:
            if p.get("type") != "row":
                for t in [p] + list(p.get("targets") or []):
                    uid = (t.get("datasource") or {}).get("uid")
                    if uid != "${DS_PROMETHEUS}":
                        bad_ds.append(f'{p.get("title")!r} ({uid!r})')
            walk(p.get("panels"))

    walk(dash.get("panels"))
    if bad_ds:
        ok = run.record(False, "dashboard datasources", "not ${DS_PROMETHEUS}: " + ", ".join(sorted(set(bad_ds))))
    if ok:
        run.record(True, "dashboard shape", f'schemaVersion {dash["schemaVersion"]}, DS_PROMETHEUS and job variables, '
                                            "every panel on ${DS_PROMETHEUS}")
    return [n for n in tvars if n != "DS_PROMETHEUS"], jq


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    who = ap.add_mutually_exclusive_group(required=True)
    who.add_argument("--udamon", metavar="PATH", help="the udamon binary")
    who.add_argument("--fake", action="store_true", help="use tests/service/fake_exporter.py instead of udamon")
    ap.add_argument("--config", required=True, help="the config given to `run` (needs listen = \"127.0.0.1:PORT\")")
    ap.add_argument("--port", type=int, help="the endpoint's port when the config has no listen (host 127.0.0.1)")
    ap.add_argument("--expect-job", action="append", default=[], metavar="NAME",
                    help="a job that must be up and acting (repeatable); default: any job")
    ap.add_argument("--dashboard", default=DEFAULT_DASHBOARD, help="Grafana dashboard whose exprs must all answer")
    ap.add_argument("--screenshot", metavar="OUT.png", help="headless Chromium screenshot of the WSS graph")
    ap.add_argument("--allow-lint", action="append", default=[], metavar="TEXT",
                    help="accept promtool lint lines containing TEXT (repeatable); parse errors always fail")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds of scrapes before querying (20)")
    ap.add_argument("--timeout", type=float, default=120.0, help="the whole run ends within this (120)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, prometheus.yml, TSDB)")
    ap.add_argument("--prometheus", default="prometheus", help="prometheus binary (prometheus)")
    ap.add_argument("--promtool", default="promtool", help="promtool binary (promtool)")
    ap.add_argument("--chromium", default="chromium", help="chromium binary (chromium)")
    args = ap.parse_args()

    for tool in [args.prometheus, args.promtool] + ([args.chromium] if args.screenshot else []):
        if not shutil.which(tool):
            print(f"prom_check: {tool} is not installed (Debian: apt-get install prometheus chromium)", file=sys.stderr)
            return 2
    if args.udamon and not (os.path.isfile(args.udamon) and os.access(args.udamon, os.X_OK)):
        print(f"prom_check: --udamon {args.udamon} is not an executable file", file=sys.stderr)
        return 2
    try:
        dash = json.load(open(args.dashboard))
    except (OSError, ValueError) as e:
        print(f"prom_check: dashboard {args.dashboard}: {e}", file=sys.stderr)
        return 2
    try:
        host, port = listen_port(args.config)
    except (OSError, ValueError) as e:
        print(f"prom_check: config {args.config}: {e}", file=sys.stderr)
        return 2
    if port is None:
        if not args.port:
            print(f"prom_check: config {args.config} has no listen = \"HOST:PORT\"; add one or pass --port",
                  file=sys.stderr)
            return 2
        host, port = "127.0.0.1", args.port
    elif args.port and args.port != port:
        print(f"prom_check: --port {args.port} but the config listens on {port}", file=sys.stderr)
        return 2
    if args.screenshot:
        args.screenshot = os.path.abspath(args.screenshot)

    run = Run(args)

    def on_alarm(_s, _f):
        raise Timeout(f"the run took longer than --timeout {args.timeout:g}s")

    def on_term(s, _f):
        raise Timeout(f"stopped by {signal.Signals(s).name}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # The backstop; the steps keep within run.deadline themselves.
    signal.setitimer(signal.ITIMER_REAL, max(args.timeout - 6, 1))
    try:
        steps(run, dash, host, port)
    except Timeout as e:
        run.record(False, "time", str(e))
    except Abort:
        pass
    except Exception as e:  # noqa: BLE001 - reported, never a traceback in place of the summary
        run.record(False, "internal error", f"{type(e).__name__}: {e}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        run.stop_all()
        if args.keep:
            print(f"note  scratch directory kept: {run.tmp}")
        else:
            shutil.rmtree(run.tmp, ignore_errors=True)
    failed = [r for r in run.results if r[0] == "FAIL"]
    passed = [r for r in run.results if r[0] == "ok"]
    warned = [r for r in run.results if r[0] == "warn"]
    took = time.monotonic() - run.start
    who = "fake exporter" if args.fake else args.udamon
    print()
    if failed:
        print(f"FAIL: {len(failed)} of {len(failed) + len(passed)} checks failed ({who}, {took:.0f} s):")
        for _s, name, detail in failed:
            print(f"  - {name}: {detail.splitlines()[0] if detail else ''}")
        return 1
    print(f"PASS: {len(passed)} checks ({who}, {took:.0f} s)" + (f", {len(warned)} warnings" if warned else ""))
    return 0


def steps(run, dash, host, port):
    args = run.args
    tvars, job_var_query = check_dashboard_shape(run, dash)
    exprs = dashboard_exprs(dash)
    if not exprs:
        run.record(False, "dashboard exprs", "no panel has an expr")

    # 1. the exporter
    if args.fake:
        cmd = [sys.executable, os.path.join(HERE, "fake_exporter.py"), "run", os.path.abspath(args.config)]
    else:
        cmd = [os.path.abspath(args.udamon), "run", os.path.abspath(args.config)]
    # From the repository's top, as a developer would run it (udamon itself reads the config's
    # relative paths from the config's directory).
    exporter = run.spawn("exporter", cmd, cwd=REPO)
    url = f"http://{host}:{port}/metrics" if ":" not in host else f"http://[{host}]:{port}/metrics"
    t_end = time.monotonic() + run.budget(20)
    scrape, err = None, None
    while time.monotonic() < t_end:
        if exporter.poll() is not None:
            run.record(False, "exporter start", f"`{' '.join(cmd)}` exited with {exporter.returncode} before "
                                                f"serving {url}\n{run.log_tail('exporter')}")
            raise Abort
        try:
            scrape = run.http_get(url, timeout=3).decode()
            break
        except (OSError, urllib.error.URLError) as e:
            err = e
            time.sleep(0.25)
    if scrape is None:
        run.record(False, "exporter start", f"{url} did not answer within 20 s ({err})\n{run.log_tail('exporter')}")
        raise Abort
    run.record(True, "exporter start", f"{url} answered after {time.monotonic() - run.start:.1f} s")

    with open(os.path.join(run.tmp, "scrape.txt"), "w") as f:  # for --keep
        f.write(scrape)

    # 2. promtool
    p = subprocess.run([args.promtool, "check", "metrics"], input=scrape.encode(), capture_output=True,
                       timeout=run.budget(15))
    lines = [line for line in (p.stdout + p.stderr).decode(errors="replace").splitlines() if line.strip()]
    parse_err = [line for line in lines if line.startswith("error while linting")]
    lint = [line for line in lines if line not in parse_err]
    allowed = [line for line in lint if any(a in line for a in args.allow_lint)]
    refused = [line for line in lint if line not in allowed]
    if p.returncode not in (0, 3) or parse_err or refused:
        shown = sorted(set(parse_err + refused))
        run.record(False, "promtool check metrics",
                   f"exit {p.returncode}: " + "; ".join(shown[:6]) + (f" (+{len(shown) - 6} more)" if len(shown) > 6 else ""))
    else:
        note = f"{len(set(allowed))} distinct lint lines accepted by --allow-lint" if allowed else "clean"
        run.record(True, "promtool check metrics", note)
    families = set(re.findall(r"(?m)^# TYPE (\S+) ", scrape))
    missing = sorted(SPEC_FAMILIES - families)
    extra = sorted(f for f in families if f.startswith("udamon_") and f not in SPEC_FAMILIES)
    if missing:
        run.warn("spec families", "not exposed (yet?): " + ", ".join(missing))
    if extra:
        run.warn("spec families", "exposed but not in the spec: " + ", ".join(extra))

    # 3. prometheus
    prom_port = free_port()
    prom = f"http://127.0.0.1:{prom_port}"
    target = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    cfg = os.path.join(run.tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write(f"""# written by tests/service/prom_check.py
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: udamon
    static_configs:
      - targets: ["{target}"]
""")
    promproc = run.spawn("prometheus", [args.prometheus, f"--config.file={cfg}",
                                        f"--storage.tsdb.path={os.path.join(run.tmp, 'tsdb')}",
                                        f"--web.listen-address=127.0.0.1:{prom_port}",
                                        "--storage.tsdb.retention.time=1h", "--log.level=warn"], cwd=run.tmp)
    t_end = time.monotonic() + run.budget(30)
    up_at, last = None, "no answer from prometheus"
    while time.monotonic() < t_end:
        if promproc.poll() is not None:
            run.record(False, "prometheus start", f"exited with {promproc.returncode}\n{run.log_tail('prometheus')}")
            raise Abort
        if exporter.poll() is not None:
            run.record(False, "exporter alive", f"exited with {exporter.returncode}\n{run.log_tail('exporter')}")
            raise Abort
        try:
            targets = run.api(prom, "/api/v1/targets", state="active")["activeTargets"]
            t = [x for x in targets if x.get("scrapeUrl", "").endswith(f":{port}/metrics")]
            if t and t[0].get("health") == "up":
                up_at = time.monotonic()
                break
            last = f'target health {t[0].get("health")!r}, {t[0].get("lastError") or "no error yet"}' if t else "no target yet"
        except (OSError, ValueError, urllib.error.URLError) as e:
            last = str(e)
        time.sleep(0.5)
    if up_at is None:
        run.record(False, "prometheus target up", f"{last}\n{run.log_tail('prometheus')}")
        raise Abort
    try:
        version = run.api(prom, "/api/v1/status/buildinfo").get("version", "?")
    except (OSError, ValueError, urllib.error.URLError):
        version = "?"
    run.record(True, "prometheus target up", f"prometheus {version} on {prom}, scraping {target} every 1 s")

    # Leave time for the queries (and the screenshot); rate() needs a few scrapes whatever the budget.
    settle = max(3.0, min(args.settle, run.left() - 8 - (35 if args.screenshot else 10)))
    if settle < args.settle:
        run.warn("settle", f"{settle:.0f} s of scrapes instead of {args.settle:g} s (--timeout)")
    t_end = up_at + settle
    while time.monotonic() < t_end:
        if exporter.poll() is not None:
            run.record(False, "exporter alive", f"exited with {exporter.returncode} while being scraped\n"
                                                f"{run.log_tail('exporter')}")
            raise Abort
        time.sleep(min(1.0, max(t_end - time.monotonic(), 0)))
    run.record(exporter.poll() is None, "exporter alive", f"still serving after {settle:.0f} s of 1 s scrapes")

    # 4. the contract's core series
    def query(expr):
        return run.api(prom, "/api/v1/query", query=expr)["result"]

    def must(name, expr, describe=None):
        try:
            res = query(expr)
        except (OSError, ValueError, urllib.error.URLError) as e:
            return run.record(False, name, f"{expr}: {e}")
        if not res:
            return run.record(False, name, f"{expr}: no series")
        shown = describe(res) if describe else f"{len(res)} series"
        return run.record(True, name, f"{expr}: {shown}")

    def jobs_of(res):
        return ", ".join(sorted({r["metric"].get("udamon_job", "?") + "=" + r["value"][1] for r in res}))

    sels = [f'{{udamon_job={promql_str(j)}}}' for j in args.expect_job] or ['{udamon_job=~".+"}']
    for sel in sels:
        must("job up", f"udamon_job_up{sel} == 1", jobs_of)
        must("wss", f"udamon_job_wss_bytes{sel}", jobs_of)
        must("schemes tried", f"rate(udamon_scheme_tried_bytes_total{sel}[1m]) > 0")
        must("sample interval", f"udamon_job_sample_interval_seconds{sel}", jobs_of)
        must("aggregation interval", f"udamon_job_aggregation_interval_seconds{sel}", jobs_of)
    # The job variable: label_values(udamon_job_up, udamon_job) is Grafana's /api/v1/label/udamon_job/values?match[]=...
    m = re.fullmatch(r"label_values\(\s*(.+?)\s*,\s*udamon_job\s*\)", job_var_query or "")
    if m:
        try:
            values = run.api(prom, "/api/v1/label/udamon_job/values", **{"match[]": resolve_vars(m.group(1), tvars)})
            want = set(args.expect_job)
            ok = bool(values) and want <= set(values)
            run.record(ok, "dashboard job variable",
                       f"{job_var_query} -> {values}" + ("" if ok else f", expected {sorted(want) or 'any job'}"))
        except (OSError, ValueError, urllib.error.URLError) as e:
            run.record(False, "dashboard job variable", f"{job_var_query}: {e}")

    # 5. every dashboard expr
    nbad = 0
    for title, ref, expr in exprs:
        q = resolve_vars(expr, tvars)
        if re.search(r"\$\{?\w|\[\[\w", q):
            run.record(False, f"panel {title!r} {ref}", f"unresolved variable in {q}")
            nbad += 1
            continue
        try:
            res = query(q)
        except (OSError, ValueError, urllib.error.URLError) as e:
            run.record(False, f"panel {title!r} {ref}", f"{q}: {e}")
            nbad += 1
            continue
        if not res:
            run.record(False, f"panel {title!r} {ref}", f"{q}: no series")
            nbad += 1
    if exprs:
        run.record(nbad == 0, "dashboard exprs", f"{len(exprs) - nbad} of {len(exprs)} exprs return series")

    # 6. screenshot
    if args.screenshot:
        screenshot(run, prom, version)


def screenshot(run, prom, version):
    args = run.args
    expr = "udamon_job_wss_bytes"
    if len(args.expect_job) == 1:
        expr += "{udamon_job=" + promql_str(args.expect_job[0]) + "}"
    elif args.expect_job:
        expr += "{udamon_job=~" + promql_str("|".join(re.escape(j) for j in args.expect_job)) + "}"
    major = int(version.split(".")[0]) if version[:1].isdigit() else 2
    # Prometheus 3's UI moved the graph page to /query (g0.tab=graph); 2.x has /graph (g0.tab=0).
    page, tab = ("/query", "graph") if major >= 3 else ("/graph", "0")
    # The data is only --settle seconds old: a 1 minute range shows it, 5 minutes would be a sliver.
    # The graph spans the scrapes so far, rounded up to whole minutes.
    minutes = max(1, int((args.settle + 59) // 60))
    params = {"g0.expr": expr, "g0.tab": tab, "g0.range_input": f"{minutes}m"}
    if major < 3:
        params["g0.stacked"] = "0"
    url = prom + page + "?" + urllib.parse.urlencode(params)
    out = args.screenshot
    try:
        os.remove(out)
    except FileNotFoundError:
        pass
    cmd = [args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--window-size=1400,900", f"--user-data-dir={os.path.join(run.tmp, 'chromium')}",
           # The page draws after its JavaScript has fetched the data: give it virtual time.
           "--virtual-time-budget=8000", f"--screenshot={out}", url]
    p = run.spawn("chromium", cmd, cwd=run.tmp)
    try:
        p.wait(timeout=run.budget(40))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=3)
        run.record(False, "screenshot", f"chromium did not finish within the time left\n{run.log_tail('chromium')}")
        return
    ok = os.path.isfile(out) and os.path.getsize(out) > 10_000
    with open(out, "rb") if os.path.isfile(out) else open(os.devnull, "rb") as f:
        ok = ok and f.read(8) == b"\x89PNG\r\n\x1a\n"
    run.record(ok, "screenshot", f"{out} ({os.path.getsize(out) if os.path.isfile(out) else 0} bytes) of {url}"
               + ("" if ok else f"\n{run.log_tail('chromium')}"))


if __name__ == "__main__":
    sys.exit(main())
