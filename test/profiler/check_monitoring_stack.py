#!/usr/bin/env python3
"""CTest monitoring_stack: the profiler's Prometheus files in the stack operators run.

Starts Debian's prometheus-node-exporter (textfile collector only) on the folder where the quick
demo's closed loop writes its Prometheus files, and prometheus scraping it every second (both on
127.0.0.1, ephemeral ports, data in a temporary folder, stopped at the end). While the demo runs,
the rail series must show up live; afterwards every series docs/prometheus.md lists must be in
Prometheus with exactly the documented labels (plus the scrape's `instance` and `job`) and
plausible values, and every query of the Grafana dashboard (contrib/grafana/nccl-autopilot.json)
must evaluate, with data, over the demo's time span. `autopilot top` runs on the same files about
once a second while the demo runs (rates must be there, and no rank may be named a straggler:
nobody is slowed) and once after (its totals must equal Prometheus').

Usage: check_monitoring_stack.py AUTOPILOT_TOOL SOURCE_DIR. Exit 77 (skip) when the packages are
missing; CTest counts that as a failure under CI=true (scripts/ap.sh installs them)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
tool, src = sys.argv[1], sys.argv[2]
# Ports below the kernel's ephemeral range, as the GPU check takes them (gpu_check.free_port).
sys.path.insert(0, os.path.join(src, "bench", "gpucheck"))
from gpu_check import free_port  # noqa: E402
node_exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
prometheus = shutil.which("prometheus")
if not node_exporter or not prometheus:
    print("SKIP: prometheus-node-exporter and prometheus are needed (Debian packages of those "
          "names; scripts/ap.sh installs them)")
    sys.exit(SKIP)


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def api(port, path, **params):
    url = "http://127.0.0.1:%d/api/v1/%s?%s" % (port, path, urllib.parse.urlencode(params))
    try:
        reply = json.loads(get(url, timeout=10))
    except urllib.error.HTTPError as e:  # Prometheus says why in the body
        raise RuntimeError("%s: %s" % (e, e.read().decode(errors="replace")[:300]))
    if reply.get("status") != "success":
        raise RuntimeError("%s: %s" % (url, reply))
    return reply["data"]


def documented_series(path):
    """{metric: (type, [labels])} from docs/prometheus.md's "Every series" table; "same" repeats
    the previous row's labels, ", x" after it adds x."""
    series, previous = {}, []
    in_table = False
    for line in open(path):
        if line.startswith("## Every series"):
            in_table = True
            continue
        if not in_table or not line.startswith("| `nccl_autopilot_"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = cells[0].strip("`")
        labels = re.findall(r"`(\w+)`", cells[2].split("same")[-1])
        if cells[2].startswith("same"):
            labels = previous + labels
        series[name] = (cells[1], labels)
        previous = labels
    return series


problems = []
work = tempfile.mkdtemp(prefix="ap-monitoring-")
procs = []
try:
    textfiles = os.path.join(work, "closed-loop")  # where the demo's closed loop writes
    os.makedirs(textfiles)
    ne_port, prom_port = free_port(), free_port()
    procs.append(subprocess.Popen(
        [node_exporter, "--web.listen-address=127.0.0.1:%d" % ne_port,
         "--collector.disable-defaults", "--collector.textfile",
         "--collector.textfile.directory=" + textfiles],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "node-exporter.log"), "w")))
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: node\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % ne_port)
    procs.append(subprocess.Popen(
        [prometheus, "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(work, "tsdb"),
         "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w")))
    deadline = time.time() + 60
    while True:
        try:
            get("http://127.0.0.1:%d/-/ready" % prom_port)
            get("http://127.0.0.1:%d/metrics" % ne_port)
            break
        except OSError:
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                sys.exit("prometheus or node-exporter did not start (logs in %s)" % work)
            time.sleep(0.3)
    print("node-exporter on 127.0.0.1:%d, prometheus on 127.0.0.1:%d" % (ne_port, prom_port))

    # The demo: its closed loop only (loopback rails, faults simulated in the plugin), Prometheus
    # files every 250 ms. While it runs, the rail series must reach Prometheus.
    start = time.time()
    demo = subprocess.Popen([tool, "demo", "--quick", "--no-plot", "--mode", "closed",
                             "--no-netns", "--out", work],
                            stdout=open(os.path.join(work, "demo.log"), "w"),
                            stderr=subprocess.STDOUT)
    live_at = None
    live_top = None
    named = set()  # stragglers `autopilot top` named: none may be, nobody is slowed here
    top_frames = 0
    # One `autopilot top` on the same files for the whole run (a frame a second), as an operator
    # would keep it open.
    top = subprocess.Popen([tool, "top", "--dir", textfiles, "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    for line in top.stdout:
        if live_at is None and api(prom_port, "query", query="nccl_autopilot_rail_state")["result"]:
            live_at = time.time() - start
        if demo.poll() is not None:
            break  # the ranks finished during this frame
        frame = json.loads(line)
        top_frames += 1
        named |= {"%s rank %s" % (s["comm"], s["rank"]) for s in frame["stragglers"]}
        if live_top is None and time.time() - start > 10:
            live_top = frame
    top.kill()
    top.wait()
    demo.wait()
    end = time.time()
    if demo.returncode != 0:
        sys.exit("autopilot demo exited with %d (log: %s)" % (demo.returncode,
                                                               os.path.join(work, "demo.log")))
    if live_at is None:
        problems.append("no rail series reached Prometheus while the demo ran")
    else:
        print("rail series live in Prometheus %.1f s after the demo started (it ran %.1f s)"
              % (live_at, end - start))
    time.sleep(3)  # a few scrapes of the final files (kept by the demo)

    if named:
        problems.append("autopilot top named stragglers in a run without one: %s" % sorted(named))
    print("autopilot top: %d frames of the healthy run, stragglers named: %s"
          % (top_frames, sorted(named) or "none"))
    # autopilot top, live and on the final files; a folder it cannot read is one clear line.
    run = subprocess.run([tool, "top", "--dir", os.path.join(work, "missing"), "--frames", "1"],
                         capture_output=True, text=True, timeout=30)
    if run.returncode != 1 or "cannot read the folder" not in run.stderr:
        problems.append("autopilot top on a missing folder: exit %d, %r" % (run.returncode,
                                                                            run.stderr))
    if live_top is None:
        problems.append("autopilot top never ran while the demo did")
    else:
        comms = live_top.get("comms", [])
        if (live_top.get("processes") != 4 or len(comms) != 1 or not comms[0]["has_rates"]
                or comms[0]["collectives_per_s"] <= 0 or len(live_top.get("rails", [])) != 3):
            problems.append("autopilot top while the demo ran: %s" % live_top)
        else:
            print("autopilot top live: %.1f collectives/s, %.2f MB/s, %d rails"
                  % (comms[0]["collectives_per_s"], comms[0]["bytes_per_s"] / 1e6,
                     len(live_top["rails"])))
    run = subprocess.run([tool, "top", "--dir", textfiles, "--frames", "1", "--interval", "0.1",
                          "--json"], capture_output=True, text=True, timeout=30)
    final_top = json.loads(run.stdout) if run.returncode == 0 else {}
    print(subprocess.run([tool, "top", "--dir", textfiles, "--frames", "1", "--interval", "0.1"],
                         capture_output=True, text=True, timeout=30).stdout)

    # Every documented series, with exactly its labels and a plausible value.
    documented = documented_series(os.path.join(src, "docs", "prometheus.md"))
    if len(documented) < 20:
        problems.append("docs/prometheus.md lists only %d series" % len(documented))
    values = {}
    for name, (kind, labels) in sorted(documented.items()):
        result = api(prom_port, "query", query=name)["result"]
        if not result:
            problems.append("%s: no series in Prometheus" % name)
            continue
        expected = set(labels) | {"__name__", "instance", "job"}
        for s in result:
            got = set(s["metric"])
            if got != expected:
                problems.append("%s: labels %s, documented %s" % (name, sorted(got - {"__name__"}),
                                                                   sorted(expected - {"__name__"})))
                break
        vals = [float(s["value"][1]) for s in result]
        values[name] = result
        signed = name == "nccl_autopilot_clock_offset_seconds"  # a host may be behind
        if any(v != v or (v < 0 and not signed) for v in vals):
            problems.append("%s: negative or NaN value %s" % (name, vals))
        if kind == "counter" and not name.endswith("_total"):
            problems.append("%s: a counter not named _total" % name)
    print("%d documented series checked" % len(documented))

    def total(name, **match):
        return sum(float(s["value"][1]) for s in values.get(name, [])
                   if all(s["metric"].get(k) == v for k, v in match.items()))

    ranks = {s["metric"].get("process_rank") for s in values.get("nccl_autopilot_process_info", [])}
    if ranks != {"0", "1", "2", "3"}:
        problems.append("process_info for process ranks %s, expected the demo's 4" % sorted(ranks))
    if any(s["metric"].get("hostname") in (None, "") for s in values.get(
            "nccl_autopilot_process_info", [])):
        problems.append("process_info without a hostname")
    for s in values.get("nccl_autopilot_process_start_time_seconds", []):
        if not start - 120 < float(s["value"][1]) < end + 1:
            problems.append("start time %s outside the demo's run" % s["value"][1])
    clock_errors = [float(s["value"][1])
                    for s in values.get("nccl_autopilot_clock_offset_error_seconds", [])]
    checks = [
        ("collectives completed", total("nccl_autopilot_collective_count_total") > 1000),
        ("collective bytes", total("nccl_autopilot_collective_bytes_total") > 1e6),
        ("bus bandwidth", total("nccl_autopilot_collective_bus_bandwidth_bytes_per_second") > 0),
        ("rail bytes sent", total("nccl_autopilot_rail_sent_bytes_total") > 1e6),
        ("rail bytes received", total("nccl_autopilot_rail_received_bytes_total") > 1e6),
        # The demo fails rail 1 and heals it: the closed loop fails over and the rail re-joins.
        ("a failover", total("nccl_autopilot_rail_failovers_total") >= 1),
        ("a recovery", total("nccl_autopilot_rail_recoveries_total") >= 1),
        ("rail_failed events", total("nccl_autopilot_plugin_events_total", source="net",
                                     kind="rail_failed") >= 1),
        ("no lost profiler events", total("nccl_autopilot_profiler_events_dropped_total",
                                          reason="coll_pool_full") == 0),
        ("no failed writes", total("nccl_autopilot_export_write_errors_total") == 0),
        # The arrival exchange ran, and named nobody: nobody is slowed here.
        ("arrivals compared", total("nccl_autopilot_arrival_compared_collectives_total") > 100),
        ("no straggler named", total("nccl_autopilot_plugin_events_total", source="profiler",
                                     kind="straggler") == 0),
        ("every rank's clock offset known within 5 ms",
         len(clock_errors) == 4 and max(clock_errors) < 0.005),
    ]
    problems += ["implausible: %s" % what for what, ok in checks if not ok]
    # What top read from the files is what Prometheus scraped from them.
    top_collectives = sum(c["collectives"] for c in final_top.get("comms", []))
    top_failovers = sum(r["failovers"] for r in final_top.get("rails", []))
    if top_collectives != total("nccl_autopilot_collective_count_total"):
        problems.append("autopilot top counts %s collectives, Prometheus %s"
                        % (top_collectives, total("nccl_autopilot_collective_count_total")))
    if top_failovers != total("nccl_autopilot_rail_failovers_total"):
        problems.append("autopilot top counts %s failovers, Prometheus %s"
                        % (top_failovers, total("nccl_autopilot_rail_failovers_total")))
    for s in values.get("nccl_autopilot_rail_share_ratio", []):
        if not 0 <= float(s["value"][1]) <= 1:
            problems.append("share %s outside [0, 1]" % s["value"][1])
    current = {}
    for s in values.get("nccl_autopilot_rail_state", []):
        key = (s["metric"].get("process_rank"), s["metric"].get("rail"))
        current[key] = current.get(key, 0) + float(s["value"][1])
    if not current or any(v != 1 for v in current.values()):
        problems.append("rail_state: not exactly one current state per rail: %s" % current)

    # The dashboard: every panel's queries evaluate to data over the demo, and the variables'
    # label queries find the demo's host and communicator.
    dashboard = json.load(open(os.path.join(src, "contrib", "grafana", "nccl-autopilot.json")))
    exprs = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
    for title, expr in exprs:
        q = (expr.replace("$comm", ".*").replace("$instance", ".*")
             .replace("$__rate_interval", "4s"))
        try:
            data = api(prom_port, "query_range", query=q, start="%.3f" % start,
                       end="%.3f" % end, step="1")
        except (RuntimeError, OSError) as e:
            problems.append("dashboard panel '%s': %s" % (title, e))
            continue
        if not data["result"]:
            problems.append("dashboard panel '%s': no data for %s" % (title, q))
    print("%d dashboard queries checked" % len(exprs))
    for var in dashboard["templating"]["list"]:
        m = re.match(r"label_values\((\w+), (\w+)\)", var.get("definition", ""))
        if not m:
            continue
        got = api(prom_port, "label/%s/values" % m.group(2), **{"match[]": m.group(1)})
        if not got:
            problems.append("dashboard variable %s: no values" % var["name"])
        elif var["name"] == "comm" and "autopilot-demo" not in got:
            problems.append("dashboard variable comm: %s lacks the demo's communicator" % got)
finally:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()

if problems:
    print("monitoring stack check failed (files in %s):" % work)
    for p in problems:
        print("  " + p)
    sys.exit(1)
shutil.rmtree(work, ignore_errors=True)
print("monitoring stack check passed")
