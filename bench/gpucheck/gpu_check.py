#!/usr/bin/env python3
"""One-shot check of nccl-autopilot under real NCCL, through PyTorch's torch.distributed.

On a machine with one GPU it starts several processes on that GPU, each with its own
NCCL_HOSTID so that NCCL takes them for separate nodes and routes every byte through a network
plugin. In one run it sweeps all-reduce, all-gather, reduce-scatter and broadcast over sizes
(8 B .. 256 MiB by default), checking every result and timing it, in these modes:

  stock     every NCCL_*_PLUGIN=none, NCCL's socket transport on loopback
  all       our net, tuner and profiler plugins
  net, tuner, profiler   each of our plugins alone (the others =none)
  fault     all three plugins, rail 1 taken down (simulated inside the plugin) during the sweep
  chunk     all three plugins with the tuner's chunk-size arms on (NCCL_AUTOPILOT_TUNER_CHUNK=1;
            not in the default --modes): NCCL 2.30+ asks getChunkSize per task, and every
            result must stay exact while some tasks run at half NCCL's chunk

It records the NCCL version, which plugin symbol NCCL picked (from NCCL_DEBUG=INFO), our
decisions and rail figures (from the profiler's Prometheus export), and writes gpu-check.json
and gpu-check.md under $OUT (else gpu-check-out/). Exit status: 0 all good, 1 something failed,
2 bad arguments, 77 no GPU (nothing checked).

Processes on one GPU time-share it unless CUDA MPS runs: small-size latencies are then the
GPU's context switches between them, not the network (all-reduce 8 B: 4515 us on an H200,
23 us under MPS). `--mps auto` (the default) starts a private MPS control daemon for the check
when nvidia-cuda-mps-control is there and stops it at the end; the report says whether it ran.

Only the parent needs nothing beyond the Python standard library; the workers need torch.
`--backend gloo` runs the same flow on CPU (no NCCL, plugins not loaded): CI uses it.
"""
import argparse
import atexit
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
PLUGINS = ("net", "tuner", "profiler")
MODES = {
    "stock": (),
    "all": PLUGINS,
    "net": ("net",),
    "tuner": ("tuner",),
    "profiler": ("profiler",),
    "chunk": PLUGINS,
}
# The tuner's finalize line: "... (N tasks halved, M already at the smallest chunk) ...".
CHUNK_SUMMARY = re.compile(r"\((\d+) tasks halved, (\d+) already at the smallest chunk\)")
# nccl-tests' bus bandwidth factors (size = the larger buffer, as nccl-tests counts it).
def busbw_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in ("all_gather", "reduce_scatter"):
        return float(n - 1) / n
    return 1.0


def parse_size(text):
    m = re.match(r"^\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*$", str(text))
    if not m:
        raise ValueError("bad size %r (e.g. 8, 64K, 256M)" % text)
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if n == int(n) else ("%.1f %s" % (n, unit))
        n /= 1024.0


def size_sweep(lo, hi, factor):
    """lo, lo*factor, ... and always hi itself, so the largest size is measured."""
    sizes = []
    s = lo
    while s < hi:
        sizes.append(s)
        s *= factor
    sizes.append(hi)
    return sizes


def element_counts(coll, size, n, elem=4):
    """(input elements, output elements) per rank for a collective of `size` bytes, or None
    when the size is too small to give every rank one element (nccl-tests' conventions:
    all-gather's size is the gathered output, reduce-scatter's the full input)."""
    if coll in ("all_gather", "reduce_scatter"):
        per_rank = size // (elem * n)
        if per_rank == 0:
            return None
        return (per_rank, per_rank * n) if coll == "all_gather" else (per_rank * n, per_rank)
    count = size // elem
    return (count, count) if count else None


# The values every rank writes: small integers, so float32 sums over ranks are exact and a
# misplaced or stale chunk shows up as a wrong value (31 is prime: neighbouring chunks differ).
def value(k, r):
    return ((k % 31) * 13 + r * 7) % 31 + 1


def expected_python(coll, k, r, n, per_rank):
    """Reference for element k of rank r's output (used by the unit tests to check the
    vectorised version the workers use)."""
    if coll == "all_reduce":
        return sum(value(k, s) for s in range(n))
    if coll == "all_gather":
        return value(k, k // per_rank)
    if coll == "reduce_scatter":
        return sum(value(r * per_rank + k, s) for s in range(n))
    return value(k, 0)  # broadcast from rank 0


# ----------------------------------------------------------------------------------------------
# NCCL_DEBUG=INFO parsing. Lines look like "host:pid:tid [dev] NCCL INFO <message>". The
# messages below are the ones NCCL 2.28 to 2.30 print while loading plugins (docs/gpu-check.md).
LOG_PATTERNS = {
    "version": re.compile(r"NCCL INFO NCCL version (\S+)"),
    "net_symbol": re.compile(r"NCCL INFO NET/Plugin: Loaded net plugin (.+) \((v\d+)\)\s*$"),
    "net_external": re.compile(r"NCCL INFO Successfully loaded external network plugin (\S+)"),
    "net_used": re.compile(r"NCCL INFO Using network (\S+)"),
    "tuner_symbol": re.compile(r"NCCL INFO TUNER/Plugin: Using (.+) \((v\d+)\)\s*$"),
    "tuner_external": re.compile(r"NCCL INFO Successfully loaded external tuner plugin (\S+)"),
    "profiler_symbol": re.compile(r"NCCL INFO PROFILER/Plugin: Loaded (.+) \((v\d+)\)\s*$"),
    "profiler_external": re.compile(
        r"NCCL INFO Successfully loaded external profiler plugin (\S+)"),
    "not_found": re.compile(r"NCCL INFO (NET|TUNER|PROFILER)/Plugin: Could not find:(.*)$"),
    # Any other dlopen failure of a plugin file (e.g. a newer glibc needed than installed).
    "open_error": re.compile(r"NCCL INFO (NET|TUNER|PROFILER)/Plugin: (\S+\.so\S*): (.+)$"),
    "unsupported": re.compile(r"NCCL INFO External (network|tuner|profiler) plugin (\S+) is "
                              r"unsupported"),
}
# Our plugins log through NCCL's logger with this prefix (common/log.cc).
OURS = re.compile(r"NCCL (?:INFO|WARN) autopilot: (.*)$")


def parse_nccl_log(text):
    """What NCCL said about plugins in one or more ranks' logs."""
    out = {"version": None, "net": None, "tuner": None, "profiler": None, "network": None,
           "external": {}, "not_found": [], "open_errors": [], "unsupported": [],
           "warnings": [], "ours": []}
    for line in text.splitlines():
        m = OURS.search(line)
        if m and len(out["ours"]) < 200:
            out["ours"].append(m.group(1).strip())
        if " NCCL WARN " in line:
            if len(out["warnings"]) < 50:
                out["warnings"].append(line.split(" NCCL WARN ", 1)[1].strip())
            continue
        if " NCCL INFO " not in line:
            continue
        for key, pat in LOG_PATTERNS.items():
            m = pat.search(line)
            if not m:
                continue
            if key == "version":
                out["version"] = out["version"] or m.group(1)
            elif key.endswith("_symbol"):
                kind = key.split("_")[0]
                out[kind] = out[kind] or {"name": m.group(1), "version": m.group(2)}
            elif key.endswith("_external"):
                out["external"].setdefault(key.split("_")[0], m.group(1))
            elif key == "net_used":
                out["network"] = out["network"] or m.group(1)
            elif key == "not_found":
                entry = "%s:%s" % (m.group(1), m.group(2).strip())
                if entry not in out["not_found"]:
                    out["not_found"].append(entry)
            elif key == "open_error":
                entry = "%s: %s: %s" % m.groups()
                if entry not in out["open_errors"]:
                    out["open_errors"].append(entry)
            elif key == "unsupported":
                entry = "%s %s" % (m.group(1), m.group(2))
                if entry not in out["unsupported"]:
                    out["unsupported"].append(entry)
    return out


def plugin_verdict(mode, parsed, stock_net):
    """Problems with what NCCL loaded in this mode (empty list: as intended)."""
    problems = []
    selected = MODES[mode]
    for kind in PLUGINS:
        got = parsed.get(kind)
        if kind in selected:
            if not got:
                why = [e for e in parsed.get("open_errors", []) if e.startswith(kind.upper())]
                problems.append("NCCL did not report loading our %s plugin%s" % (
                    kind, (" (" + why[0] + ")") if why else ""))
            elif got["name"] != "autopilot":
                problems.append("NCCL picked %s plugin %r, not autopilot" % (kind, got["name"]))
        elif got:
            problems.append("%s plugin %s loaded although NCCL_%s_PLUGIN=none" %
                            (kind, got["name"], kind.upper()))
    network = parsed.get("network")
    if "net" in selected:
        if network != "autopilot":
            problems.append("NCCL used network %r, not autopilot" % network)
    elif stock_net and network and network.lower() != stock_net.lower():
        problems.append("NCCL used network %r, expected %s" % (network, stock_net))
    return problems


def parse_prometheus(paths):
    """Our profiler's export, summed over processes: rails and the (algo, proto) per
    collective and size bucket NCCL ran (what the tuner decided, or NCCL when it kept it)."""
    rails, decisions = {}, {}
    for path in paths:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            # Label values may hold escaped quotes and braces (communicator names).
            m = re.match(r'^nccl_autopilot_(rail|collective)_(\w+)\{(.*)\}\s+(\S+)\s*$', line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3)))
            try:
                metric, value = m.group(2), float(m.group(4))
            except ValueError:
                continue
            if m.group(1) == "rail":
                entry = rails.setdefault(labels.get("rail", "?"), {})
                if metric == "state":
                    if value == 1:
                        entry["state"] = labels.get("state", "?")
                elif metric in ("failovers_total", "recoveries_total", "sent_bytes_total",
                                "received_bytes_total", "retransmitted_bytes_total"):
                    entry[metric] = entry.get(metric, 0) + value
                elif metric in ("bandwidth_bytes_per_second", "share_ratio"):
                    entry.setdefault(metric, []).append(value)
            elif metric == "count_total":
                key = "%s %s %s/%s" % (labels.get("collective", "?"),
                                       labels.get("size_bucket", "?"),
                                       labels.get("algo", "?"), labels.get("proto", "?"))
                decisions[key] = decisions.get(key, 0) + value
    for entry in rails.values():  # per-process gauges: keep their mean
        for metric in ("bandwidth_bytes_per_second", "share_ratio"):
            if metric in entry:
                entry[metric] = sum(entry[metric]) / len(entry[metric])
    return rails, decisions


# ----------------------------------------------------------------------------------------------
def find_library_dir(explicit):
    candidates = [explicit] if explicit else [
        os.path.join(ROOT, "build", "lib"), os.path.join(ROOT, "lib"),
        "/opt/nccl-autopilot/lib", "/usr/local/lib", "/usr/lib"]
    for c in candidates:
        if c and os.path.exists(os.path.join(c, "libnccl-net-autopilot.so")):
            return os.path.abspath(c)
    return None


def mode_env(mode, lib_dir, out_dir, tag, args):
    """Environment of one mode's ranks (on top of the caller's)."""
    env = {}
    selected = MODES[mode]
    for kind in PLUGINS:
        env["NCCL_%s_PLUGIN" % kind.upper()] = "autopilot" if kind in selected else "none"
    # Bootstrap and NCCL's own socket transport on loopback: the sandbox may have nothing else.
    env["NCCL_SOCKET_IFNAME"] = "lo"
    if "net" in selected:
        env["NCCL_NET"] = "autopilot"  # fail loudly rather than fall back to NCCL's transports
        env["NCCL_AUTOPILOT_NET_ADDRS"] = args.rails
    elif args.stock_net:
        env["NCCL_NET"] = args.stock_net
    if selected:
        env["LD_LIBRARY_PATH"] = lib_dir + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    env["NCCL_DEBUG"] = "INFO"
    env["NCCL_DEBUG_SUBSYS"] = "INIT,ENV,NET,TUNING"
    env["NCCL_DEBUG_FILE"] = os.path.join(out_dir, tag + ".%h.%p.nccl.log")
    if mode == "chunk":
        env["NCCL_AUTOPILOT_TUNER_CHUNK"] = "1"
    if "profiler" in selected:
        env["NCCL_AUTOPILOT_PROM_FILE"] = os.path.join(out_dir, tag + ".%p.prom")
        env["NCCL_AUTOPILOT_PROM_INTERVAL_MS"] = "500"
        env["NCCL_AUTOPILOT_PROM_KEEP"] = "1"  # read after the run
    return env


def library_load_error(lib_dir):
    """None if our library loads in a fresh process (it has no dependency beyond libc and
    libstdc++, but a build from a newer distribution needs their newer versions)."""
    path = os.path.join(lib_dir, "libnccl-net-autopilot.so")
    r = subprocess.run([sys.executable, "-c", "import ctypes,sys; ctypes.CDLL(sys.argv[1])",
                        path], capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]


def find_ncclperf(explicit):
    for c in [explicit] if explicit else [os.path.join(ROOT, "build", "bin", "ncclperf"),
                                          os.path.join(ROOT, "bin", "ncclperf")]:
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return shutil.which("ncclperf")


# ----------------------------------------------------------------------------------------------
# CUDA MPS. Without it the ranks, separate processes on one GPU, time-share it: a kernel waits
# for the other processes' time slices, so small sizes measure context switches, not the network
# (H200, NCCL 2.28.9, stock all-reduce 8 B: 4515 us without MPS, 23 us with; 32 MiB busbw 1.84
# vs 3.7 GB/s). Under MPS the processes' kernels share the GPU at once. The check starts a
# private control daemon (its own pipe and log folders, so it neither meets nor stops one the
# machine runs) before the first run and stops it at the end, whatever happened in between.
MPS_CONTROL = "nvidia-cuda-mps-control"
MPS_CAVEAT = ("small-size figures are the GPU's context switches between the processes, not the "
              "network")
# What a rank does first under MPS, tried once before the runs: the daemon starts its server
# on the first client, and a server that cannot start (a container without the rights, say)
# shows here rather than as failed runs.
MPS_CLIENT_CODE = ("import torch\n"
                   "x = torch.ones(4, device='cuda')\nx += 1\ntorch.cuda.synchronize()\n"
                   "assert x.sum().item() == 8, x\nprint('mps client ok')\n")


def mps_env(dirs):
    """The variables that send CUDA clients (ranks, ncclperf) and the control command to a
    private MPS daemon; dirs = (pipe folder, log folder), or None (no MPS: no variable)."""
    if not dirs:
        return {}
    return {"CUDA_MPS_PIPE_DIRECTORY": dirs[0], "CUDA_MPS_LOG_DIRECTORY": dirs[1]}


class MpsDaemon:
    """A private MPS control daemon: start() runs `nvidia-cuda-mps-control -d` with fresh pipe
    and log folders, stop() sends it `quit`, keeps its logs in out_dir (mps-control.log,
    mps-server.log) and removes the folders. stop() may be called any number of times.
    The daemon (driver 580, CUDA 13.0) creates `control` (its socket) and
    `nvidia-cuda-mps-control.pid` in the pipe folder and, on quit, stops its server and exits
    within a fraction of a second, leaving both files behind: its exit is told by its pid."""

    def __init__(self, control, out_dir=None, wait_s=5.0, timeout_s=30.0):
        self.control, self.out_dir = control, out_dir
        self.wait_s, self.timeout_s = wait_s, timeout_s
        self.root = self.dirs = None
        self.launched = False  # -d was run: stop() sends quit whatever -d answered
        self.pid = None        # the daemon's, from its pid file
        self.stopped = None    # stop()'s note once done

    def env(self):
        return dict(os.environ, **mps_env(self.dirs))

    def _socket(self):
        return os.path.join(self.dirs[0], "control")

    def _log_tail(self):
        try:
            with open(os.path.join(self.dirs[1], "control.log"), errors="replace") as f:
                lines = [x.strip() for x in f.read().splitlines() if x.strip()]
            return "; control.log: " + lines[-1] if lines else ""
        except OSError:
            return ""

    def start(self):
        """None once the daemon's control socket is there, else why not (a sentence)."""
        # Short paths: the pipe folder holds Unix sockets, whose paths are limited to 107
        # bytes, so /tmp rather than $TMPDIR or the output folder.
        base = "/tmp" if os.access("/tmp", os.W_OK) else None
        self.root = tempfile.mkdtemp(prefix="gpucheck-mps-", dir=base)
        self.dirs = (os.path.join(self.root, "pipe"), os.path.join(self.root, "log"))
        for d in self.dirs:
            os.mkdir(d, 0o700)
        said = os.path.join(self.root, "start.out")
        try:
            # Output to a file, not a pipe: a daemon that kept the pipe open would hold us.
            with open(said, "w") as out:
                self.launched = True
                rc = subprocess.run([self.control, "-d"], env=self.env(), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT,
                                    timeout=self.timeout_s).returncode
        except (OSError, subprocess.SubprocessError) as e:
            return "%s -d: %s" % (MPS_CONTROL, e)
        if rc != 0:
            with open(said, errors="replace") as f:
                text = " ".join(f.read().split())[:200]
            return "%s -d exited with %d%s%s" % (MPS_CONTROL, rc, ": " if text else "", text)
        end = time.time() + self.wait_s
        while not os.path.exists(self._socket()):
            if time.time() > end:
                return "%s -d left no control socket in %s within %.0f s%s" % (
                    MPS_CONTROL, self.dirs[0], self.wait_s, self._log_tail())
            time.sleep(0.05)
        end = time.time() + min(1.0, self.wait_s)
        while self.pid is None:
            try:
                with open(os.path.join(self.dirs[0], "nvidia-cuda-mps-control.pid")) as f:
                    self.pid = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                if time.time() > end:
                    break  # without its pid, its exit is told by its socket going away
                time.sleep(0.05)
        return None

    def _running(self):
        if self.pid is None:
            return os.path.exists(self._socket())
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:  # a zombie no one reaped has exited
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return True

    def stop(self):
        """'stopped', or what went wrong; the folders are removed either way."""
        if self.stopped is not None or self.root is None:
            return self.stopped
        note = "stopped"
        if self.launched:
            try:  # echo quit | nvidia-cuda-mps-control, with the daemon's own variables
                r = subprocess.run([self.control], input="quit\n", env=self.env(),
                                   capture_output=True, text=True, timeout=self.timeout_s)
                if r.returncode != 0:
                    note = "quit exited with %d: %s" % (
                        r.returncode, " ".join((r.stdout + r.stderr).split())[:200])
            except (OSError, subprocess.SubprocessError) as e:
                note = "quit: %s" % e
            end = time.time() + self.wait_s
            while self._running() and time.time() < end:
                time.sleep(0.05)
            if self._running():
                what = "control daemon" + (" (pid %d)" % self.pid if self.pid else "")
                note = "%s still running %g s after quit%s" % (
                    what, self.wait_s, "" if note == "stopped" else " (%s)" % note)
                if self.pid:  # ours, by its pid: end it rather than leave it to the machine
                    try:
                        os.kill(self.pid, signal.SIGTERM)
                        note += "; sent it SIGTERM"
                    except OSError as e:
                        note += "; SIGTERM: %s" % e
        if self.out_dir:
            for name in ("control.log", "server.log"):
                try:
                    shutil.copyfile(os.path.join(self.dirs[1], name),
                                    os.path.join(self.out_dir, "mps-" + name))
                except OSError:
                    pass
        shutil.rmtree(self.root, ignore_errors=True)
        self.stopped = note
        return note


def mps_client_error(python, env, timeout=120):
    """None if a CUDA client runs under the daemon `env` points to, else why not."""
    try:
        r = subprocess.run([python, "-c", MPS_CLIENT_CODE], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return "a CUDA client under MPS did not run: %s" % e
    if r.returncode == 0:
        return None
    last = [x.strip() for x in (r.stderr + r.stdout).splitlines() if x.strip()]
    return "a CUDA client under MPS failed (exit %d%s)" % (
        r.returncode, ": " + last[-1][:200] if last else "")


def setup_mps(choice, backend, has_gpu, python, out_dir, wait_s=5.0):
    """Start a private MPS daemon where --mps and the machine allow. Returns (the running
    MpsDaemon or None, the report's "mps" entry {mode, used, why}, a problem or None: only
    --mps on makes a missing or failed daemon a problem; auto goes on without it)."""
    info = {"mode": choice, "used": False, "why": ""}
    if choice == "off":
        info["why"] = "--mps off"
        return None, info, None
    if backend != "nccl" or not has_gpu:
        info["why"] = "%s backend, no GPU used" % backend if backend != "nccl" else "no GPU"
        return None, info, None
    control = shutil.which(MPS_CONTROL)
    why = None if control else "%s not found" % MPS_CONTROL
    daemon = None
    if control:
        daemon = MpsDaemon(control, out_dir, wait_s=wait_s)
        atexit.register(daemon.stop)  # besides main's finally: any way out stops it
        try:
            why = daemon.start() or mps_client_error(python, daemon.env())
        except BaseException:  # SIGTERM (main's handler) or ^C while it starts
            daemon.stop()
            raise
        if why:
            note = daemon.stop()
            if note != "stopped":
                why += " (and stopping it: %s)" % note
            daemon = None
    if why:
        info["why"] = why
        return None, info, ("MPS asked for (--mps on) but not used: %s" % why
                            if choice == "on" else None)
    info.update(used=True, why="private daemon", pipe_dir=daemon.dirs[0])
    return daemon, info, None


def mps_line(mps, backend):
    """The report's MPS line (Markdown header and progress output)."""
    if mps.get("used"):
        return "MPS: on (%s)" % mps.get("why", "private daemon")
    return "MPS: off (%s)%s" % (mps.get("why") or "-",
                                ": " + MPS_CAVEAT if backend == "nccl" else "")


def free_port():
    """A port for the ranks' rendezvous, taken below the kernel's ephemeral range: a port the
    kernel handed out (bind to 0) and we released can be handed out again at once, as the local
    port of any outgoing connection (the previous mode's gloo pairs make many), and rank 0's
    listen then fails with "Address already in use". Below the range only a listener can take
    it."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(10000, max(10001, low))
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:  # everything below the range busy: take the old risk
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_torch(python, backend):
    """torch's view of the machine, from a child process (the parent never imports torch)."""
    code = ("import json,sys\n"
            "try:\n import torch\nexcept Exception as e:\n"
            " print(json.dumps({'error':'torch not importable: %s' % e})); sys.exit(0)\n"
            "d={'torch':torch.__version__,'cuda':bool(torch.cuda.is_available()),"
            "'devices':torch.cuda.device_count() if torch.cuda.is_available() else 0,"
            "'cuda_version':torch.version.cuda}\n"
            "if d['cuda']:\n d['gpu']=torch.cuda.get_device_name(0)\n"
            " try:\n  v=torch.cuda.nccl.version()\n"
            "  d['nccl']='.'.join(map(str,v)) if isinstance(v,tuple) else str(v)\n"
            " except Exception as e: d['nccl']='unknown (%s)' % e\n"
            # The files torch really mapped: ncclperf then uses the same NCCL and runtime.
            " try:\n  for l in open('/proc/self/maps'):\n   f=l.split()[-1]\n"
            "   if '/libnccl.so' in f: d.setdefault('nccl_lib',f)\n"
            "   if '/libcudart.so' in f: d.setdefault('cudart_lib',f)\n"
            " except OSError: pass\n"
            "import torch.distributed as dist\n"
            "d['gloo']=dist.is_available() and dist.is_gloo_available()\n"
            "d['nccl_backend']=dist.is_available() and dist.is_nccl_available()\n"
            "print(json.dumps(d))\n")
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
        return json.loads(r.stdout.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001 - any failure means "no usable torch"
        return {"error": "cannot run %s: %s" % (python, e)}


def run_env(mode, lib_dir, out_dir, tag, args, fault=None, mps=None):
    """What one run adds to the caller's environment, for every rank (or ncclperf): the
    mode's, the fault plan's, and the MPS daemon's (mps = its (pipe, log) folders, or None)."""
    env = mode_env(mode, lib_dir, out_dir, tag, args)
    if fault:
        env["NCCL_AUTOPILOT_FAULT_FILE"] = fault["plan"]
    env.update(mps_env(mps))
    return env


def rank_env(env_extra, rank, args, port, tag, native=False, base=None):
    """The whole environment of rank `rank` (of ncclperf when native), on top of `base`
    (default: ours)."""
    env = dict(os.environ if base is None else base)
    env.update(env_extra)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(args.ranks), "LOCAL_RANK": "0",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                # each process its own "node": NCCL cannot use P2P/SHM between them and
                # sends everything through the network plugin
                "NCCL_HOSTID": "autopilot-gpucheck-node-%d" % rank,
                "GPUCHECK_RESULT": os.path.join(args.out, "%s.rank%d.result.json" %
                                                (tag, rank))})
    if native:
        del env["NCCL_HOSTID"]  # ncclperf gives each process it forks its own
    return env


def run_mode(args, mode, tag, lib_dir, deadline, fault=None, native=None, mps=None):
    """Start args.ranks workers for one mode (torch processes, or the `native` ncclperf
    binary, which forks them itself), stream rank 0's progress, collect results. mps: the
    private MPS daemon's (pipe, log) folders, or None."""
    env_extra = run_env(mode, lib_dir, args.out, tag, args, fault, mps)
    if fault:
        open(fault["plan"], "w").close()
    spec = {
        "backend": args.backend, "sizes": args.sizes,
        # The fault run sweeps all-reduce only (rail down, then up again), checking every call.
        "collectives": ["all_reduce"] if fault else args.collectives,
        "iters": args.iters, "min_iters": args.min_iters, "warmup": args.warmup,
        "time_per_size": args.time_per_size, "deadline": deadline, "fault": fault,
        "check_every": bool(fault),
    }
    spec_path = os.path.join(args.out, tag + ".spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    port = free_port()
    procs, logs = [], []
    started = time.time()
    for rank in range(1 if native else args.ranks):
        env = rank_env(env_extra, rank, args, port, tag, native=bool(native))
        log_path = os.path.join(args.out, "%s.rank%d.out" % (tag, rank))
        logs.append(log_path)
        cmd = [args.python, os.path.abspath(__file__), "--worker", spec_path]
        if native:
            cmd = [native, "--ranks", str(args.ranks), "--min-bytes", str(args.sizes[0]),
                   "--max-bytes", str(args.sizes[-1]), "--factor", str(args.factor),
                   "--iters", str(args.iters), "--min-iters", str(args.min_iters),
                   "--warmup", str(args.warmup), "--time-per-size", str(args.time_per_size),
                   "--collectives", ",".join(args.collectives),
                   "--budget-s", "%.1f" % max(1.0, deadline - time.time()),
                   "--json", os.path.join(args.out, "%s.rank%%r.result.json" % tag)]
            if args.nccl_lib:
                cmd += ["--nccl", args.nccl_lib]
            if args.cudart_lib:
                cmd += ["--cudart", args.cudart_lib]
        if rank == 0:
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        else:
            with open(log_path, "w") as log:
                procs.append(subprocess.Popen(cmd, env=env, stdout=log,
                                              stderr=subprocess.STDOUT))

    def pump():
        with open(logs[0], "w") as f:
            for line in procs[0].stdout:
                f.write(line)
                f.flush()
                if line.startswith("progress "):
                    print("  [%s %5.1fs] %s" % (tag, time.time() - started, line[9:].rstrip()),
                          flush=True)
    pumper = threading.Thread(target=pump, daemon=True)
    pumper.start()
    limit = max(10.0, min(args.run_timeout, deadline + args.grace - time.time()))
    rcs, timed_out = [], False
    try:
        for p in procs:
            try:
                rcs.append(p.wait(timeout=max(1.0, started + limit - time.time())))
            except subprocess.TimeoutExpired:
                timed_out = True
                rcs.append("timeout")
    except BaseException:  # interrupted (SIGTERM, ^C): leave no rank behind, on MPS or not
        for p in procs:
            if p.poll() is None:
                p.kill()
        raise
    if timed_out:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    pumper.join(timeout=5)
    if not pumper.is_alive():
        procs[0].stdout.close()
    elapsed = time.time() - started
    results = []
    for rank in range(args.ranks):
        try:
            with open(os.path.join(args.out, "%s.rank%d.result.json" % (tag, rank))) as f:
                results.append(json.load(f))
        except (OSError, ValueError):
            results.append(None)
    text = ""
    for path in logs + sorted(glob.glob(os.path.join(args.out, tag + ".*.nccl.log"))):
        try:
            with open(path, errors="replace") as f:
                text += f.read() + "\n"
        except OSError:
            pass
    parsed = parse_nccl_log(text)
    rails, decisions = parse_prometheus(glob.glob(os.path.join(args.out, tag + ".*.prom")))
    rows = results[0]["rows"] if results and results[0] else []
    problems = []
    native_skipped = bool(native) and rcs == [77]
    if native_skipped:
        # ncclperf found no libnccl.so.2 / CUDA runtime it could open (e.g. an NCCL linked
        # into torch statically): the torch runs stand; say so instead of failing the check.
        rcs_checked, results = [], []
    else:
        rcs_checked = rcs
    for rank, rc in enumerate(rcs_checked):
        if rc != 0:
            problems.append("%s exited with %s" % ("ncclperf" if native else "rank %d" % rank,
                                                   rc))
    for rank, res in enumerate(results):
        if res is None:
            problems.append("rank %d wrote no result" % rank)
        elif res.get("error"):
            problems.append("rank %d: %s" % (rank, res["error"]))
        else:
            for row in res["rows"]:
                if row.get("wrong"):
                    problems.append("rank %d: %s %s: %d wrong elements" % (
                        rank, row["collective"], human(row["bytes"]), row["wrong"]))
    if args.backend == "nccl":
        problems += plugin_verdict(mode, parsed, args.stock_net)
    chunk = chunk_summary(text) if mode == "chunk" else None
    return {"tag": tag, "mode": mode, "chunk": chunk, "rc": rcs, "seconds": round(elapsed, 1),
            "timed_out": timed_out, "rows": rows, "nccl": parsed, "rails": rails,
            "decisions": decisions, "problems": problems,
            "env": {k: v for k, v in env_extra.items() if k != "LD_LIBRARY_PATH"},
            "skipped": sorted({s for r in results if r for s in r.get("skipped", [])}) + (
                ["ncclperf checked nothing (no usable NCCL or CUDA runtime; see %s)" %
                 os.path.basename(logs[0])] if native_skipped else [])}


def chunk_summary(text):
    """What the chunk mode's tuners report at finalize (every rank, every communicator): tasks
    given half NCCL's chunk, and tasks of a halved-chunk arm already at the smallest chunk.
    NCCL before 2.30 never calls getChunkSize, so both stay 0 there."""
    halved = kept = lines = 0
    for m in CHUNK_SUMMARY.finditer(text):
        halved += int(m.group(1))
        kept += int(m.group(2))
        lines += 1
    return {"tasks_halved": halved, "tasks_at_smallest": kept, "summaries": lines}


def fault_verdict(run, backend):
    """The fault run must finish with correct results; with NCCL the rail must have failed
    over (our profiler counts it) and the plugin must have logged the simulated fault."""
    problems = []
    if backend != "nccl":
        return problems
    if not any("SIMULATED" in line for line in run["nccl"]["ours"]):
        problems.append("the net plugin never logged the simulated fault")
    failovers = sum(r.get("failovers_total", 0) for r in run["rails"].values())
    if failovers < 1:
        problems.append("no rail failover counted in the profiler's export")
    return problems


# ----------------------------------------------------------------------------------------------
def render_markdown(report):
    """The comparison table: per collective and size, busbw (GB/s) and time (us) per mode and
    the ratio of busbw to stock."""
    runs = report["runs"]
    modes = [r["tag"] for r in runs]
    by = {r["tag"]: {(row["collective"], row["bytes"]): row for row in r["rows"]} for r in runs}
    env = report.get("environment", {})
    lines = ["# nccl-autopilot GPU check", ""]
    lines.append("- date: %s; host: %s; backend: %s; ranks: %d (%s)" % (
        report.get("date"), report.get("host"), report.get("backend"), report.get("ranks", 0),
        "one GPU, one NCCL_HOSTID each" if report.get("backend") == "nccl" else
        "CPU: no NCCL, no plugin loaded"))
    lines.append("- GPU: %s; torch %s (CUDA %s); NCCL %s" % (
        env.get("gpu", "-"), env.get("torch", "-"), env.get("cuda_version", "-"),
        report.get("nccl_version") or env.get("nccl", "-")))
    if report.get("mps"):
        lines.append("- " + mps_line(report["mps"], report.get("backend")))
    lines.append("- verdict: **%s**; elapsed %.0f s" % (
        "PASS" if report.get("ok") else "FAIL", report.get("elapsed_s", 0)))
    lines.append("")
    lines.append("| mode | exit | s | net | tuner | profiler | network | problems |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in runs:
        n = r["nccl"]
        sym = lambda k: ("%s %s" % (n[k]["name"], n[k]["version"])) if n.get(k) else "-"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["tag"], ",".join(str(x) for x in r["rc"]), r["seconds"], sym("net"), sym("tuner"),
            sym("profiler"), n.get("network") or "-",
            "; ".join(r["problems"]).replace("|", "/") or "none"))
    for r in runs:
        if r.get("chunk"):
            c = r["chunk"]
            lines.append("")
            lines.append("- %s: tuner chunk-size arms on; %d tasks at half NCCL's chunk, %d "
                         "already at the smallest (%d tuner summaries; NCCL before 2.30 never "
                         "asks)" % (r["tag"], c["tasks_halved"], c["tasks_at_smallest"],
                                    c["summaries"]))
    def base_of(tag):  # ncclperf runs compare with ncclperf's stock run
        base = "native-stock" if tag.startswith("native-") else "stock"
        return base if base in modes and base != tag else None
    for coll in COLLECTIVES:
        sizes = sorted({size for m in modes for (c, size) in by[m] if c == coll})
        if not sizes:
            continue
        lines += ["", "## %s: bus bandwidth GB/s, time us, ratio of busbw to stock" % coll, ""]
        head, rule = "| size |", "|---|"
        for m in modes:
            head += " %s busbw | %s us |" % (m, m)
            rule += "---|---|"
            if base_of(m):
                head += " %s ratio |" % m
                rule += "---|"
        lines += [head, rule]
        for size in sizes:
            line = "| %s |" % human(size)
            for m in modes:
                row = by[m].get((coll, size))
                base = by[base_of(m)].get((coll, size)) if base_of(m) else None
                if row is None:
                    line += " - | - |"
                else:
                    line += " %.4g | %.1f |" % (row["busbw_gbs"], row["time_us"])
                if base_of(m):
                    # Same size, same factor: the busbw ratio is the inverse time ratio, which
                    # keeps its precision where busbw rounds to zero (tiny sizes).
                    if row and base and row["time_us"] > 0:
                        line += " %.2f |" % (base["time_us"] / row["time_us"])
                    else:
                        line += " - |"
            lines.append(line)
    for r in runs:
        # What our plugins said about decisions and rails (their INFO/WARN lines), briefly.
        notes = [x for x in r["nccl"].get("ours", [])
                 if re.search(r"tuner|rail|SIMULATED|fail|degrad", x)][-8:]
        if r["rails"] or r["decisions"] or notes:
            lines += ["", "## %s: our exports" % r["tag"], ""]
            lines += ["- log: %s" % x.replace("|", "/")[:200] for x in notes]
            for rail, m in sorted(r["rails"].items()):
                lines.append("- rail %s: %s" % (rail, ", ".join(
                    ("%s=%s" if isinstance(v, str) else "%s=%.4g") % (k, v)
                    for k, v in sorted(m.items()))))
            for key, count in sorted(r["decisions"].items()):
                lines.append("- ran %s: %d" % (key, count))
    skipped = ["- %s: %s" % (r["tag"], x) for r in runs for x in r.get("skipped", [])]
    if skipped:
        lines += ["", "## Not measured", ""] + skipped
    if report.get("problems"):
        lines += ["", "## Problems", ""] + ["- " + p for p in report["problems"]]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
def worker(spec_path):
    """One rank: run the sweep, check every result, write rows to $GPUCHECK_RESULT."""
    with open(spec_path) as f:
        spec = json.load(f)
    result_path = os.environ["GPUCHECK_RESULT"]
    out = {"rank": int(os.environ["RANK"]), "rows": [], "skipped": []}
    try:
        _worker_sweep(spec, out)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the check
        out["error"] = "%s: %s" % (type(e).__name__, e)
        print("progress rank %d failed: %s" % (out["rank"], out["error"]), flush=True)
    with open(result_path + ".tmp", "w") as f:
        json.dump(out, f)
    os.rename(result_path + ".tmp", result_path)
    return 1 if out.get("error") else 0


def _worker_sweep(spec, out):
    import torch
    import torch.distributed as dist
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gpu = spec["backend"] == "nccl"
    if gpu:
        torch.cuda.set_device(0)
        dev = torch.device("cuda", 0)
        sync = torch.cuda.synchronize
    else:
        dev = torch.device("cpu")
        sync = lambda: None
    dist.init_process_group(spec["backend"], rank=rank, world_size=n,
                            init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"],
                                                         os.environ["MASTER_PORT"]))
    say = (lambda msg: print("progress " + msg, flush=True)) if rank == 0 else (lambda m: None)
    if gpu:
        v = torch.cuda.nccl.version()  # a tuple in recent torch, an int in old ones
        out["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)

    def vals(k, r):  # value() vectorised; k an int32 tensor
        return ((k % 31) * 13 + r * 7) % 31 + 1

    # Test hook (test/gpucheck): make the last rank see one wrong element in this collective.
    corrupt = os.environ.get("GPUCHECK_TEST_CORRUPT")
    have_into = hasattr(dist, "all_gather_into_tensor")
    have_rs = hasattr(dist, "reduce_scatter_tensor")
    fault = spec.get("fault")
    fault_state = None
    colls = []
    for coll in spec["collectives"]:
        if coll == "reduce_scatter" and (not gpu or not have_rs):
            out["skipped"].append("reduce_scatter: not supported by %s" % (
                "gloo" if not gpu else "this torch"))
        else:
            colls.append(coll)
    # Sizes outermost: when the budget runs out, what is lost is the largest sizes of every
    # collective, not every size of the last collectives.
    for size in spec["sizes"]:
        # Every rank must take the same branch, or the others would wait in a collective.
        late = torch.tensor([1.0 if time.time() > spec["deadline"] else 0.0], device=dev)
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
        if late.item() > 0:
            out["skipped"].append("sizes from %s: time budget spent" % human(size))
            break
        for coll in colls:
            counts = element_counts(coll, size, n)
            if counts is None:
                continue
            cin, cout = counts
            if fault and rank == 0:
                # Rail 1 goes down (simulated in every process, which re-read the plan) before
                # the first size that is striped, and comes back before the last size.
                if fault_state is None and size >= fault["down_at"]:
                    with open(fault["plan"], "w") as f:
                        f.write("rail 1 down\n")
                    fault_state = "down"
                    say("fault: rail 1 down (simulated) before %s %s" % (coll, human(size)))
                elif fault_state == "down" and size >= fault["up_at"]:
                    with open(fault["plan"], "w") as f:
                        f.write("rail 1 up\n")
                    fault_state = "up"
                    say("fault: rail 1 up again before %s %s" % (coll, human(size)))
            k_in = torch.arange(cin, dtype=torch.int32, device=dev)
            per = cout if coll == "reduce_scatter" else cin
            if coll == "all_reduce":
                src = vals(k_in, rank).float()
                want = sum(vals(k_in, s) for s in range(n)).float()
            elif coll == "all_gather":
                src = vals(k_in + rank * per, rank).float()
                k_out = torch.arange(cout, dtype=torch.int32, device=dev)
                want = vals(k_out, torch.div(k_out, per, rounding_mode="floor")).float()
            elif coll == "reduce_scatter":
                src = vals(k_in, rank).float()
                k_out = torch.arange(cout, dtype=torch.int32, device=dev) + rank * per
                want = sum(vals(k_out, s) for s in range(n)).float()
            else:
                src = vals(k_in, 0).float() if rank == 0 else torch.full(
                    (cin,), -1.0, device=dev)
                want = vals(k_in, 0).float()
            del k_in
            buf = torch.empty(cout, dtype=torch.float32, device=dev)
            inp = src.clone()

            def op():
                if coll == "all_reduce":
                    inp.copy_(src)
                    dist.all_reduce(inp)
                    return inp
                if coll == "broadcast":
                    inp.copy_(src)
                    dist.broadcast(inp, 0)
                    return inp
                if coll == "all_gather":
                    if have_into and gpu:
                        dist.all_gather_into_tensor(buf, src)
                    else:
                        dist.all_gather(list(buf.chunk(n)), src)
                    return buf
                dist.reduce_scatter_tensor(buf, src)
                return buf

            def timed_op():  # no re-fill: what is timed is the collective alone
                if coll == "all_reduce":
                    dist.all_reduce(inp)
                elif coll == "broadcast":
                    dist.broadcast(inp, 0)
                else:
                    op()

            def check():
                got = op()
                sync()
                if corrupt == coll and rank == n - 1:
                    got[0] += 1  # test hook: a wrong element the check must catch
                bad = int((got != want).sum().item())
                return bad

            wrong = check()
            for _ in range(spec["warmup"]):
                timed_op()
            sync()
            # One timed call to size the loop; all ranks must agree on the count (max of their
            # estimates), or they would leave the loop at different calls and hang.
            t0 = time.perf_counter()
            timed_op()
            sync()
            t1 = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=dev)
            dist.all_reduce(t1, op=dist.ReduceOp.MAX)
            iters = int(min(spec["iters"], max(spec["min_iters"],
                                               spec["time_per_size"] / max(t1.item(), 1e-7))))
            dist.barrier() if not gpu else dist.all_reduce(torch.zeros(1, device=dev))
            sync()
            t0 = time.perf_counter()
            if spec["check_every"]:
                for _ in range(iters):
                    wrong += check()
            else:
                for _ in range(iters):
                    timed_op()
            sync()
            el = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=dev)
            dist.all_reduce(el, op=dist.ReduceOp.MAX)
            wrong += check()
            t_us = el.item() / iters * 1e6
            algbw = size / (t_us * 1e-6) / 1e9
            row = {"collective": coll, "bytes": size, "count": cout, "iters": iters,
                   "time_us": round(t_us, 3), "algbw_gbs": float("%.5g" % algbw),
                   "busbw_gbs": float("%.5g" % (algbw * busbw_factor(coll, n))),
                   "wrong": wrong}
            out["rows"].append(row)
            say("%-14s %10s %6d it %11.1f us %8.3f GB/s busbw%s" % (
                coll, human(size), iters, t_us, row["busbw_gbs"],
                "" if not wrong else "  %d WRONG" % wrong))
            src = want = buf = inp = None  # free the GPU memory before the next size
    if fault and fault_state == "down" and rank == 0:
        with open(fault["plan"], "w") as f:
            f.write("rail 1 up\n")
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2, help="processes on the GPU (2..8)")
    p.add_argument("--modes", default="stock,all,net,tuner,profiler",
                   help="comma list of: " + ",".join(MODES))
    p.add_argument("--no-fault", action="store_true", help="skip the fault run")
    p.add_argument("--no-native", action="store_true",
                   help="skip the ncclperf runs (our nccl-tests-like binary, stock and all)")
    p.add_argument("--ncclperf", help="the ncclperf binary (default build/bin/ncclperf)")
    p.add_argument("--nccl-lib", help="libnccl.so.2 for ncclperf (default: the one torch loads)")
    p.add_argument("--cudart-lib", help="CUDA runtime for ncclperf (default: torch's)")
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--min-bytes", default="8")
    p.add_argument("--max-bytes", default="256M")
    p.add_argument("--factor", type=int, default=4, help="size step (8 B, 32 B, ...)")
    p.add_argument("--iters", type=int, default=20, help="most timed calls per size")
    p.add_argument("--min-iters", type=int, default=3, help="fewest timed calls per size")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--time-per-size", type=float, default=0.15,
                   help="seconds of timed calls aimed at per size (bounded by the iterations)")
    p.add_argument("--fault-sizes", default="1M,64M",
                   help="rail 1 goes down before the first size >= A, up before the first >= B")
    p.add_argument("--budget", type=float, default=400,
                   help="seconds; modes and sizes past it are skipped and reported")
    p.add_argument("--grace", type=float, default=45, help="seconds past the budget a run may "
                   "take to finish its size and shut down before it is killed")
    p.add_argument("--run-timeout", type=float, default=240, help="seconds, one mode at most")
    p.add_argument("--rails", default="127.0.0.1,127.0.0.2",
                   help="NCCL_AUTOPILOT_NET_ADDRS for our net plugin (loopback rails)")
    p.add_argument("--stock-net", default="Socket",
                   help="NCCL_NET for runs without our net plugin ('' for NCCL's choice)")
    p.add_argument("--mps", choices=["auto", "on", "off"], default="auto",
                   help="CUDA MPS for the ranks. Without it the processes time-share the GPU "
                   "and small sizes measure its context switches, not the network. auto: start "
                   "a private MPS daemon if " + MPS_CONTROL + " is on PATH, else go on without; "
                   "on: the same, but the check fails without it; off: never")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl",
                   help="gloo: the same flow on CPU, without NCCL (CI)")
    p.add_argument("--lib", help="folder with libnccl-net-autopilot.so (default build/lib)")
    p.add_argument("--python", default=os.environ.get("GPUCHECK_PYTHON", sys.executable),
                   help="Python with torch for the ranks")
    p.add_argument("--out", default=os.environ.get("OUT") or "gpu-check-out")
    p.add_argument("--parse-log", metavar="FILE", help="only parse an NCCL_DEBUG=INFO log")
    p.add_argument("--render", metavar="JSON", help="only render the table of a report")
    return p


def check_args(p, args):
    try:
        lo, hi = parse_size(args.min_bytes), parse_size(args.max_bytes)
        args.fault_down, args.fault_up = [parse_size(s) for s in args.fault_sizes.split(",")]
    except ValueError as e:
        p.error(str(e))
    if lo < 1 or hi < lo:
        p.error("--min-bytes must be >= 1 and <= --max-bytes")
    if args.factor < 2:
        p.error("--factor must be >= 2")
    if not 2 <= args.ranks <= 8:
        p.error("--ranks must be 2..8")
    if args.min_iters < 1 or args.iters < args.min_iters or args.warmup < 0:
        p.error("need 1 <= --min-iters <= --iters and --warmup >= 0")
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.modes:
        if m not in MODES:
            p.error("unknown mode %r (known: %s)" % (m, ", ".join(MODES)))
    args.collectives = [c for c in args.collectives.split(",") if c]
    for c in args.collectives:
        if c not in COLLECTIVES:
            p.error("unknown collective %r (known: %s)" % (c, ", ".join(COLLECTIVES)))
    if not args.modes:
        p.error("--modes is empty")
    rails = [a for a in args.rails.split(",") if a]
    if len(rails) < 2 and not args.no_fault:
        p.error("the fault run needs two or more --rails")
    args.sizes = size_sweep(lo, hi, args.factor)


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through main's finally, which stops MPS


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(argv[1])
    p = build_parser()
    args = p.parse_args(argv)
    check_args(p, args)
    if args.parse_log:
        with open(args.parse_log, errors="replace") as f:
            print(json.dumps(parse_nccl_log(f.read()), indent=1))
        return 0
    if args.render:
        with open(args.render) as f:
            sys.stdout.write(render_markdown(json.load(f)))
        return 0

    t_start = time.time()
    deadline = t_start + args.budget
    env_info = probe_torch(args.python, args.backend)
    if "error" in env_info:
        print("gpu-check: %s: nothing checked" % env_info["error"], file=sys.stderr)
        return 77
    if args.backend == "nccl" and not env_info.get("cuda"):
        print("gpu-check: no GPU visible to PyTorch (torch %s, CUDA %s): nothing checked" %
              (env_info.get("torch"), env_info.get("cuda_version")), file=sys.stderr)
        return 77
    if args.backend == "nccl" and not env_info.get("nccl_backend"):
        print("gpu-check: this torch has no NCCL backend", file=sys.stderr)
        return 1
    args.nccl_lib = args.nccl_lib or env_info.get("nccl_lib")
    args.cudart_lib = args.cudart_lib or env_info.get("cudart_lib")
    needs_lib = any(MODES[m] for m in args.modes) or not args.no_fault
    lib_dir = find_library_dir(args.lib)
    if needs_lib and not lib_dir:
        print("gpu-check: libnccl-net-autopilot.so not found (build first, or --lib DIR)",
              file=sys.stderr)
        return 2
    load_error = library_load_error(lib_dir) if needs_lib else None
    if load_error:  # the plugin runs will fail; say why up front (stock still runs)
        print("gpu-check: our library does not load here (%s); build it on this machine: "
              "cmake -S . -B build && cmake --build build --target nccl_autopilot autopilot "
              "ncclperf" % load_error, file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    for old in glob.glob(os.path.join(args.out, "*")):
        if re.search(r"\.(log|out|prom|json|plan|md)$", old) and os.path.isfile(old):
            os.remove(old)
    print("gpu-check: %s backend, %d ranks on %s; torch %s; NCCL %s; modes %s%s; sizes %s..%s "
          "(%d); budget %.0f s; output in %s" % (
              args.backend, args.ranks, env_info.get("gpu", "CPU"), env_info.get("torch"),
              env_info.get("nccl", "-"), ",".join(args.modes), "" if args.no_fault else "+fault",
              human(args.sizes[0]), human(args.sizes[-1]), len(args.sizes), args.budget,
              args.out), flush=True)
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "library_load_error": load_error,
              "host": socket.gethostname(), "backend": args.backend, "ranks": args.ranks,
              "environment": env_info, "library": lib_dir, "sizes": args.sizes,
              "collectives": args.collectives, "runs": [], "problems": []}
    tool = os.path.join(lib_dir, "..", "bin", "autopilot") if lib_dir else None
    if tool and os.path.exists(tool):
        r = subprocess.run([tool, "info"], capture_output=True, text=True,
                           env=dict(os.environ, LD_LIBRARY_PATH=lib_dir), timeout=60)
        with open(os.path.join(args.out, "autopilot-info.txt"), "w") as f:
            f.write(r.stdout + r.stderr)
    plan = [(m, m, None) for m in args.modes]
    if not args.no_fault:
        # Right after stock and all three plugins: the fault run matters more than the
        # single-plugin runs if the budget runs short.
        at = sum(1 for m in args.modes[:2] if m in ("stock", "all"))
        plan.insert(at, ("all", "fault", {"plan": os.path.abspath(os.path.join(
            args.out, "fault.plan")), "down_at": args.fault_down, "up_at": args.fault_up}))
    native = None if args.no_native or args.backend != "nccl" else find_ncclperf(args.ncclperf)
    if native:
        # After the torch runs that matter most: ncclperf shows what PyTorch's per-call
        # overhead hides at small sizes.
        at = len([p for p in plan if p[1] in ("stock", "all", "fault")])
        plan[at:at] = [(m, "native-" + m, None) for m in ("stock", "all") if m in args.modes]
    elif not args.no_native and args.backend == "nccl":
        report["problems"].append("ncclperf not found (build it, or --no-native)")
    # MPS from here to the end, so the runs measure the network rather than the GPU's time
    # slicing between the processes; stopped whatever happens (an exception, SIGTERM).
    old_term = term_set = False
    if args.mps != "off" and args.backend == "nccl":
        try:
            old_term, term_set = signal.signal(signal.SIGTERM, _exit_on_signal), True
        except ValueError:  # not the main thread
            pass
    mps = None
    try:
        mps, report["mps"], problem = setup_mps(args.mps, args.backend,
                                                bool(env_info.get("cuda")), args.python, args.out)
        if problem:
            report["problems"].append(problem)
        print("gpu-check: " + mps_line(report["mps"], args.backend), flush=True)
        for i, (mode, tag, fault) in enumerate(plan):
            now = time.time()
            if now > deadline:
                report["problems"].append("%s: not run, time budget spent" % tag)
                continue
            # Each run gets an equal share of what is left, so one slow mode cannot starve the
            # others; what a quick run leaves goes to the next ones.
            run_deadline = now + (deadline - now) / (len(plan) - i)
            print("gpu-check: %s (%s) at +%.0f s, %.0f s allotted" % (
                tag, ",".join(MODES[mode]) or "stock", now - t_start, run_deadline - now),
                flush=True)
            run = run_mode(args, mode, tag, lib_dir, run_deadline, fault,
                           native if tag.startswith("native-") else None,
                           mps=mps.dirs if mps else None)
            if fault:
                run["problems"] += fault_verdict(run, args.backend)
            report["runs"].append(run)
            report["problems"] += ["%s: %s" % (tag, x) for x in run["problems"]]
            print("gpu-check: %s done in %.1f s: %s" % (tag, run["seconds"], "; ".join(
                run["problems"]) or "ok"), flush=True)
            if run["skipped"]:
                print("gpu-check: %s skipped: %s" % (tag, "; ".join(run["skipped"])),
                      flush=True)
    finally:
        if term_set:
            signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)
        if mps:
            report["mps"]["stop"] = mps.stop()
            if report["mps"]["stop"] != "stopped":
                print("gpu-check: the MPS daemon (%s) may still run: %s" % (
                    report["mps"].get("pipe_dir"), report["mps"]["stop"]), file=sys.stderr)
    versions = {r["nccl"]["version"] for r in report["runs"] if r["nccl"]["version"]}
    report["nccl_version"] = ", ".join(sorted(versions)) or env_info.get("nccl")
    report["elapsed_s"] = round(time.time() - t_start, 1)
    report["ok"] = not report["problems"] and bool(report["runs"])
    with open(os.path.join(args.out, "gpu-check.json"), "w") as f:
        json.dump(report, f, indent=1)
    md = render_markdown(report)
    with open(os.path.join(args.out, "gpu-check.md"), "w") as f:
        f.write(md)
    print(md)
    print("gpu-check: %s in %.0f s; %s" % ("PASS" if report["ok"] else "FAIL",
                                           report["elapsed_s"], os.path.join(args.out,
                                                                             "gpu-check.md")))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
