#!/usr/bin/env python3
"""A stand-in for `udamon run CONFIG`, for developing the packaging without udamon.

    fake_exporter.py run CONFIG

Reads the same config (TOML, or JSON when the name ends in .json), listens on
its `listen` address and serves at /metrics every metric family of the service
contract (/tmp/spec/service-spec.md, "Metrics"), with exactly its names, types
and labels: one set per job of the config, one per scheme of each job, two NUMA
nodes. Counters grow with time, gauges move, so rate() and the dashboard have
something to draw. Nothing here measures anything: the numbers are made up.

Behaves like the service where the packaging can see it: logfmt on stderr,
SIGHUP counts a reload (udamon_config_reloads_total), SIGTERM/SIGINT exit 0,
READY=1/RELOADING=1/STOPPING=1/WATCHDOG=1 to $NOTIFY_SOCKET when set (so the
unit can be tried under systemd with this script as ExecStart).

Python 3 standard library only (tomllib: 3.11; older versions need a .json
config).
"""

import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.0.0-fake"
QUANTILES = ["0", "10", "20", "30", "40", "50", "60", "70", "80", "90", "99", "100"]
GUARDRAILS = ["psi", "bytes_per_second", "rss_share"]
NODE_ITEMS = ["pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct",
              "pgdemote_khugepaged", "pgmigrate_success", "pgmigrate_fail"]
START = time.monotonic()


def log(level, msg, **kv):
    fields = " ".join(f"{k}={v}" for k, v in kv.items())
    msg = msg.replace('"', "'")
    print(f'level={level} {fields + " " if fields else ""}msg="{msg}"', file=sys.stderr, flush=True)


def load_config(path):
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".json"):
        return json.loads(raw)
    try:
        import tomllib
    except ImportError:
        sys.exit(f"fake_exporter: {path}: reading TOML needs Python 3.11 (tomllib); give a .json config")
    return tomllib.loads(raw.decode())


def scheme_action(s):
    """The DAMOS action of one `schemes` entry, as far as a fake can tell."""
    if "preset" in s:
        return {"reclaim": "pageout", "ethp": "hugepage", "lru_sort": "lru_prio"}.get(s["preset"], "stat")
    if "inline" in s:
        words = s["inline"].split()
        return words[6] if len(words) >= 7 else "stat"
    return "stat"  # a scheme file: not read here


def target_text(t):
    if isinstance(t, str):
        return t
    if isinstance(t, dict) and t:
        k, v = next(iter(t.items()))
        return f"{k}={v}"
    return str(t)


def esc(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Exposition:
    def __init__(self):
        self.fams = {}

    def add(self, name, typ, help_, labels, value):
        fam = self.fams.setdefault(name, (typ, help_, []))
        fam[2].append((labels, value))

    def text(self):
        out = []
        for name, (typ, help_, samples) in self.fams.items():
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {typ}")
            for labels, value in samples:
                ls = ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())
                v = repr(float(value)) if not float(value).is_integer() else str(int(value))
                out.append(f"{name}{{{ls}}} {v}" if ls else f"{name} {v}")
        return "\n".join(out) + "\n"


class State:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.reloads = {"success": 0, "failure": 0}
        self.last_ok = 1
        self.cfg = load_config(path)

    def reload(self):
        with self.lock:
            try:
                self.cfg = load_config(self.path)
                self.reloads["success"] += 1
                self.last_ok = 1
                log("info", "config reloaded", config=self.path)
            except Exception as e:  # noqa: BLE001 - a fake: any error is a failed reload
                self.reloads["failure"] += 1
                self.last_ok = 0
                log("error", f"config reload failed, keeping the running one: {e}", config=self.path)

    def render(self):
        with self.lock:
            cfg = self.cfg
            reloads = dict(self.reloads)
            last_ok = self.last_ok
        t = time.monotonic() - START
        e = Exposition()
        g_dry = bool(cfg.get("guardrails", {}).get("dry_run", False))
        for j, job in enumerate(cfg.get("jobs", [])):
            name = job.get("name", f"job{j}")
            jl = {"udamon_job": name}
            attrs = job.get("attrs", {})
            dry = bool(job.get("guardrails", {}).get("dry_run", g_dry))
            path = "sim" if isinstance(job.get("target"), dict) and "sim" in job["target"] else "kdamond"
            wave = math.sin(t / 7.0 + j)
            e.add("udamon_job_up", "gauge", "1 while the job monitors, 0 when its target is gone or it failed", jl, 1)
            e.add("udamon_job_info", "gauge", "Job description", {**jl, "path": path, "target": target_text(job.get("target"))}, 1)
            e.add("udamon_job_snapshots_total", "counter", "Snapshots taken", jl, int(t * 10))
            e.add("udamon_job_regions", "gauge", "Regions of the last snapshot", jl, 120 + int(40 * wave))
            e.add("udamon_job_sample_interval_seconds", "gauge", "Sampling interval (tuned when auto_intervals)", jl,
                  0.005 * (1.5 + wave if attrs.get("auto_intervals") else 1))
            e.add("udamon_job_aggregation_interval_seconds", "gauge", "Aggregation interval (tuned when auto_intervals)", jl,
                  0.1 * (1.5 + wave if attrs.get("auto_intervals") else 1))
            e.add("udamon_job_wss_bytes", "gauge", "Bytes of regions accessed in the last snapshot", jl,
                  int((300 + 80 * wave) * 2**20) // 4096 * 4096)
            for i, q in enumerate(QUANTILES):
                v = -0.2 if i == 0 else (float(q) ** 2) * 120 * (1 + 0.1 * wave)
                e.add("udamon_job_idle_time_seconds", "gauge", "Memory idle time percentiles (negative: accessed in the last window)",
                      {**jl, "percentile": q}, round(v, 3))
            e.add("udamon_job_estimated_bandwidth_bytes_per_second", "gauge", "Estimated memory bandwidth", jl,
                  int(2e9 * (1.2 + wave)))
            for k, gr in enumerate(GUARDRAILS):
                paused = 1 if gr == "psi" and (t % 30) > 25 else 0
                e.add("udamon_job_guardrail_paused", "gauge", "1 while the guardrail pauses actions", {**jl, "guardrail": gr}, paused)
            for gr in GUARDRAILS:
                e.add("udamon_job_guardrail_trips_total", "counter", "Times the guardrail paused actions", {**jl, "guardrail": gr},
                      int(t // 30) if gr == "psi" else 0)
            e.add("udamon_job_dry_run", "gauge", "1 when actions are replaced by stat", jl, int(dry))
            for s, sch in enumerate(job.get("schemes", [])):
                sl = {**jl, "scheme": str(s), "action": scheme_action(sch)}
                tried = int(t * 40e6 * (s + 1))
                applied = 0 if dry else int(tried * 0.3)
                e.add("udamon_scheme_tried_bytes_total", "counter", "Bytes of regions the scheme was tried on", sl, tried)
                e.add("udamon_scheme_tried_regions_total", "counter", "Regions the scheme was tried on", sl, int(t * 12))
                e.add("udamon_scheme_applied_bytes_total", "counter", "Bytes the action was applied to", sl, applied)
                e.add("udamon_scheme_applied_regions_total", "counter", "Regions the action was applied to", sl, 0 if dry else int(t * 4))
                e.add("udamon_scheme_quota_exceeds_total", "counter", "Times the quota was exceeded", sl, int(t // 5))
                e.add("udamon_scheme_would_apply_bytes_total", "counter", "Bytes the action would have been applied to (dry run)", sl,
                      int(tried * 0.3) if dry else 0)
                e.add("udamon_scheme_effective_quota_bytes", "gauge", "Effective size quota", sl, int((64 + 32 * wave) * 2**20))
                gl = {**sl, "goal": "0", "metric": "some_mem_psi_us"}
                e.add("udamon_scheme_goal_current_value", "gauge", "Current value of the quota goal's metric", gl, int(1000 * (1 + wave)))
                e.add("udamon_scheme_goal_target_value", "gauge", "Target value of the quota goal's metric", gl, 1000)
                e.add("udamon_scheme_active", "gauge", "1 while the watermarks let the scheme run", sl, 1)
        for node in ("0", "1"):
            nl = {"node": node}
            total = 8 * 2**30
            used = int(total * (0.55 + 0.1 * math.sin(t / 11 + int(node))))
            e.add("udamon_node_memory_used_bytes", "gauge", "Used memory of the NUMA node", nl, used)
            e.add("udamon_node_memory_free_bytes", "gauge", "Free memory of the NUMA node", nl, total - used)
        for node in ("0", "1"):
            for k, item in enumerate(NODE_ITEMS):
                e.add("udamon_node_vmstat_total", "counter", "Tiering counters of /sys/devices/system/node/nodeN/vmstat",
                      {"node": node, "item": item}, int(t * (50 + 10 * k) * (1 + int(node))))
        for k, item in enumerate(NODE_ITEMS):
            e.add("udamon_vmstat_total", "counter", "Tiering counters of /proc/vmstat", {"item": item}, int(t * (150 + 30 * k)))
        for kind, f in (("some", 0.02), ("full", 0.005)):
            e.add("udamon_psi_memory_stall_seconds_total", "counter", "Memory PSI stall time", {"kind": kind}, round(t * f, 6))
        for kind, f in (("some", 0.02), ("full", 0.005)):
            e.add("udamon_psi_memory_avg10_ratio", "gauge", "Memory PSI avg10", {"kind": kind}, round(f * (1 + math.sin(t / 5)), 6))
        cpu = os.times()
        e.add("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", {}, round(cpu.user + cpu.system, 3))
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        e.add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", {}, rss)
        e.add("udamon_build_info", "gauge", "udamon version", {"version": VERSION}, 1)
        for result in ("success", "failure"):
            e.add("udamon_config_reloads_total", "counter", "Config reloads (SIGHUP, udamon ctl reload)", {"result": result}, reloads[result])
        e.add("udamon_config_last_reload_success", "gauge", "1 when the last reload succeeded", {}, last_ok)
        return e.text()


def notify(msg):
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(msg.encode(), addr)


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "run":
        print("usage: fake_exporter.py run CONFIG", file=sys.stderr)
        sys.exit(2)
    path = sys.argv[2]
    try:
        state = State(path)
    except (OSError, ValueError) as e:
        print(f"config {path}: {e}", file=sys.stderr)
        sys.exit(2)
    listen = state.cfg.get("listen")
    m = re.fullmatch(r"\[?([^\]]*)\]?:(\d+)", listen or "")
    if not m:
        print(f"config {path}: listen = {listen!r}: expected HOST:PORT (the fake needs an endpoint)", file=sys.stderr)
        sys.exit(2)
    host, port = m.group(1), int(m.group(2))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics here")
                return
            body = state.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    ThreadingHTTPServer.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as e:
        print(f"cannot listen on {listen}: {e.strerror.lower()}", file=sys.stderr)
        sys.exit(1)
    server.daemon_threads = True

    def stop(signum, _frame):
        log("info", f"{signal.Signals(signum).name}: stopping")
        notify("STOPPING=1")
        threading.Thread(target=server.shutdown, daemon=True).start()

    def hup(_signum, _frame):
        notify(f"RELOADING=1\nMONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")
        state.reload()
        notify("READY=1")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, hup)
    wd = int(os.environ.get("WATCHDOG_USEC", "0"))
    if wd:
        def ping():
            while True:
                time.sleep(wd / 2e6)
                notify("WATCHDOG=1")
        threading.Thread(target=ping, daemon=True).start()
    log("info", f"fake exporter serving http://{listen}/metrics", jobs=len(state.cfg.get("jobs", [])))
    notify("READY=1")
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
