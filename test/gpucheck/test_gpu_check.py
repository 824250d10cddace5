#!/usr/bin/env python3
"""CPU-side parts of bench/gpucheck/gpu_check.py: arguments, NCCL log parsing (samples written
from the messages documented in docs/gpu-check.md), Prometheus parsing, the expected values,
the plugin verdicts and the Markdown table. Standard library only (no torch)."""
import contextlib
import ctypes
import io
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpucheck"))
import gpu_check as gc  # noqa: E402


def sample(name):
    with open(os.path.join(HERE, "samples", name)) as f:
        return f.read()


def parse_args(argv):
    p = gc.build_parser()
    args = p.parse_args(argv)
    gc.check_args(p, args)
    return args


class Arguments(unittest.TestCase):
    def test_defaults(self):
        a = parse_args([])
        self.assertEqual(a.sizes[0], 8)
        self.assertEqual(a.sizes[-1], 256 << 20)
        self.assertEqual(a.modes, ["stock", "all", "net", "tuner", "profiler"])
        self.assertEqual(a.collectives, gc.COLLECTIVES)
        self.assertEqual((a.fault_down, a.fault_up), (1 << 20, 64 << 20))
        self.assertEqual(a.ranks, 2)

    def test_sizes(self):
        self.assertEqual(gc.parse_size("64K"), 65536)
        self.assertEqual(gc.parse_size("256MiB"), 256 << 20)
        self.assertEqual(gc.parse_size("1g"), 1 << 30)
        self.assertEqual(gc.size_sweep(8, 100, 4), [8, 32, 100])
        self.assertEqual(gc.size_sweep(8, 8, 2), [8])
        self.assertRaises(ValueError, gc.parse_size, "12Q")

    def test_out_from_environment(self):
        old = os.environ.get("OUT")
        os.environ["OUT"] = "/tmp/somewhere"
        try:
            self.assertEqual(parse_args([]).out, "/tmp/somewhere")
        finally:
            if old is None:
                del os.environ["OUT"]
            else:
                os.environ["OUT"] = old
        if "OUT" not in os.environ:
            self.assertEqual(parse_args([]).out, "gpu-check-out")

    def test_rejected(self):
        for argv in (["--modes", "stock,turbo"], ["--collectives", "alltoall"],
                     ["--ranks", "1"], ["--ranks", "9"], ["--min-bytes", "1M", "--max-bytes",
                                                          "1K"],
                     ["--factor", "1"], ["--iters", "2", "--min-iters", "3"],
                     ["--max-bytes", "lots"], ["--rails", "127.0.0.1"], ["--modes", ""]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit) as e:
                    parse_args(argv)
                self.assertEqual(e.exception.code, 2)
        # One rail is fine without the fault run.
        self.assertEqual(parse_args(["--rails", "127.0.0.1", "--no-fault"]).rails, "127.0.0.1")

    def test_mps(self):
        self.assertEqual(parse_args([]).mps, "auto")
        for choice in ("auto", "on", "off"):
            self.assertEqual(parse_args(["--mps", choice]).mps, choice)
        for argv in (["--mps", "yes"], ["--mps"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit) as e:
                    parse_args(argv)
                self.assertEqual(e.exception.code, 2)


class Environment(unittest.TestCase):
    def setUp(self):
        self.args = parse_args([])

    def test_stock_disables_every_plugin(self):
        env = gc.mode_env("stock", "/lib", "/out", "stock", self.args)
        for kind in ("NET", "TUNER", "PROFILER"):
            self.assertEqual(env["NCCL_%s_PLUGIN" % kind], "none")
        self.assertEqual(env["NCCL_NET"], "Socket")
        self.assertEqual(env["NCCL_SOCKET_IFNAME"], "lo")
        self.assertNotIn("LD_LIBRARY_PATH", env)
        self.assertNotIn("NCCL_AUTOPILOT_NET_ADDRS", env)

    def test_all_plugins(self):
        env = gc.mode_env("all", "/lib", "/out", "all", self.args)
        for kind in ("NET", "TUNER", "PROFILER"):
            self.assertEqual(env["NCCL_%s_PLUGIN" % kind], "autopilot")
        self.assertEqual(env["NCCL_NET"], "autopilot")
        self.assertEqual(env["NCCL_AUTOPILOT_NET_ADDRS"], "127.0.0.1,127.0.0.2")
        self.assertTrue(env["LD_LIBRARY_PATH"].startswith("/lib:"))
        self.assertIn("%p", env["NCCL_AUTOPILOT_PROM_FILE"])
        self.assertIn("%p", env["NCCL_DEBUG_FILE"])
        self.assertEqual(env["NCCL_DEBUG"], "INFO")

    def test_each_plugin_alone(self):
        for mode in ("net", "tuner", "profiler"):
            env = gc.mode_env(mode, "/lib", "/out", mode, self.args)
            for kind in ("net", "tuner", "profiler"):
                self.assertEqual(env["NCCL_%s_PLUGIN" % kind.upper()],
                                 "autopilot" if kind == mode else "none", (mode, kind))
            self.assertEqual(env["NCCL_NET"], "autopilot" if mode == "net" else "Socket")
            self.assertEqual("NCCL_AUTOPILOT_PROM_FILE" in env, mode == "profiler")

    def test_chunk_mode_turns_chunk_arms_on(self):
        env = gc.mode_env("chunk", "/lib", "/out", "chunk", self.args)
        for kind in ("NET", "TUNER", "PROFILER"):
            self.assertEqual(env["NCCL_%s_PLUGIN" % kind], "autopilot")
        self.assertEqual(env["NCCL_AUTOPILOT_TUNER_CHUNK"], "1")
        self.assertNotIn("NCCL_AUTOPILOT_TUNER_CHUNK",
                         gc.mode_env("all", "/lib", "/out", "all", self.args))

    def test_mps_variables_only_with_mps(self):
        base = {"PATH": "/bin"}  # not ours: a caller's CUDA_MPS_* must not hide a missing one
        dirs = ("/tmp/gpucheck-mps-x/pipe", "/tmp/gpucheck-mps-x/log")
        for mode in gc.MODES:
            without = gc.run_env(mode, "/lib", "/out", mode, self.args)
            self.assertEqual([k for k in without if k.startswith("CUDA_MPS")], [], mode)
            for native in (False, True):
                env = gc.rank_env(without, 1, self.args, 1234, mode, native=native, base=base)
                self.assertEqual([k for k in env if k.startswith("CUDA_MPS")], [], mode)
            extra = gc.run_env(mode, "/lib", "/out", mode, self.args, mps=dirs)
            for native in (False, True):
                env = gc.rank_env(extra, 1, self.args, 1234, mode, native=native, base=base)
                self.assertEqual(env["CUDA_MPS_PIPE_DIRECTORY"], dirs[0])
                self.assertEqual(env["CUDA_MPS_LOG_DIRECTORY"], dirs[1])
                self.assertEqual(env["NCCL_NET_PLUGIN"], extra["NCCL_NET_PLUGIN"])
                self.assertEqual(env["RANK"], "1")
                self.assertEqual(env["PATH"], "/bin")
                self.assertEqual("NCCL_HOSTID" in env, not native)
        self.assertEqual(gc.mps_env(None), {})
        fault = gc.run_env("all", "/lib", "/out", "fault", self.args,
                           fault={"plan": "/out/fault.plan"}, mps=dirs)
        self.assertEqual(fault["NCCL_AUTOPILOT_FAULT_FILE"], "/out/fault.plan")
        self.assertEqual(fault["CUDA_MPS_PIPE_DIRECTORY"], dirs[0])


class Values(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(gc.element_counts("all_reduce", 8, 2), (2, 2))
        self.assertEqual(gc.element_counts("all_gather", 8, 2), (1, 2))
        self.assertEqual(gc.element_counts("reduce_scatter", 8, 2), (2, 1))
        self.assertIsNone(gc.element_counts("all_gather", 8, 4))
        self.assertIsNone(gc.element_counts("broadcast", 2, 2))
        self.assertEqual(gc.element_counts("all_gather", 1 << 20, 4), (65536, 262144))

    def test_expected_values_are_exact_and_distinguish_chunks(self):
        # float32 represents every sum exactly (integers far below 2**24).
        self.assertLessEqual(max(gc.value(k, r) for k in range(31) for r in range(8)) * 8, 1 << 24)
        # Neighbouring ranks' chunks differ, so a chunk landing at the wrong offset is seen.
        per = 4
        got = [gc.expected_python("all_gather", k, 0, 2, per) for k in range(2 * per)]
        self.assertNotEqual(got[:per], got[per:])
        self.assertEqual(got[per:], [gc.value(k, 1) for k in range(per, 2 * per)])
        rs = [gc.expected_python("reduce_scatter", k, 1, 2, per) for k in range(per)]
        self.assertEqual(rs, [gc.value(per + k, 0) + gc.value(per + k, 1) for k in range(per)])
        self.assertEqual(gc.expected_python("broadcast", 5, 1, 2, per), gc.value(5, 0))
        self.assertEqual(gc.expected_python("all_reduce", 3, 0, 3, per),
                         sum(gc.value(3, r) for r in range(3)))

    def test_busbw_factors(self):
        self.assertAlmostEqual(gc.busbw_factor("all_reduce", 2), 1.0)
        self.assertAlmostEqual(gc.busbw_factor("all_reduce", 4), 1.5)
        self.assertAlmostEqual(gc.busbw_factor("all_gather", 4), 0.75)
        self.assertAlmostEqual(gc.busbw_factor("broadcast", 4), 1.0)


class NcclLog(unittest.TestCase):
    def test_plugins_loaded(self):
        p = gc.parse_nccl_log(sample("plugins-2.28.log"))
        self.assertEqual(p["version"], "2.28.9+cuda13.0")
        self.assertEqual(p["net"], {"name": "autopilot", "version": "v11"})
        self.assertEqual(p["tuner"], {"name": "autopilot", "version": "v5"})
        self.assertEqual(p["profiler"], {"name": "autopilot", "version": "v5"})
        self.assertEqual(p["network"], "autopilot")
        self.assertEqual(p["external"]["net"], "/opt/ap/lib/libnccl-net-autopilot.so")
        self.assertTrue(any(x.startswith("SIMULATED fault: rail 1") for x in p["ours"]))
        self.assertTrue(any("healthy -> failed" in x for x in p["ours"]))
        self.assertIn("example warning text", p["warnings"])
        self.assertEqual(gc.plugin_verdict("all", p, "Socket"), [])
        # The same log is wrong for every other mode.
        for mode in ("stock", "net", "tuner", "profiler"):
            self.assertNotEqual(gc.plugin_verdict(mode, p, "Socket"), [], mode)

    def test_stock(self):
        p = gc.parse_nccl_log(sample("stock-2.28.log"))
        self.assertEqual(p["version"], "2.28.9+cuda13.0")
        self.assertIsNone(p["net"])
        self.assertIsNone(p["tuner"])
        self.assertEqual(p["network"], "Socket")
        self.assertEqual(gc.plugin_verdict("stock", p, "Socket"), [])
        self.assertEqual(gc.plugin_verdict("tuner", p, "Socket"),
                         ["NCCL did not report loading our tuner plugin"])
        self.assertIn("NCCL used network 'Socket', expected IB",
                      gc.plugin_verdict("stock", p, "IB"))

    def test_not_found(self):
        p = gc.parse_nccl_log(sample("notfound-2.30.log"))
        self.assertEqual(p["version"], "2.30.7+cuda13.0")
        self.assertIsNone(p["net"])
        self.assertEqual(p["not_found"], ["NET:autopilot libnccl-net-autopilot.so",
                                          "TUNER:autopilot libnccl-tuner-autopilot.so"])
        self.assertEqual(p["unsupported"], ["profiler /tmp/libnccl-profiler-autopilot.so"])
        self.assertEqual(p["open_errors"], ["PROFILER: libnccl-profiler-autopilot.so: "
                                            "/lib/libc.so.6: version `GLIBC_2.34' not found"])
        self.assertIn("NCCL did not report loading our profiler plugin (PROFILER: "
                      "libnccl-profiler-autopilot.so: /lib/libc.so.6: version `GLIBC_2.34' not "
                      "found)", gc.plugin_verdict("all", p, "Socket"))
        self.assertIn("Failed to initialize any NET plugin", p["warnings"])
        problems = gc.plugin_verdict("all", p, "Socket")
        self.assertIn("NCCL did not report loading our net plugin", problems)
        self.assertIn("NCCL used network None, not autopilot", problems)

    def test_other_plugin_name(self):
        text = "h:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v9)\n"
        p = gc.parse_nccl_log(text)
        self.assertEqual(p["net"], {"name": "AWS Libfabric", "version": "v9"})
        self.assertIn("NCCL picked net plugin 'AWS Libfabric', not autopilot",
                      gc.plugin_verdict("net", p, "Socket"))


PROM = """# HELP nccl_autopilot_rail_failovers_total x
nccl_autopilot_rail_failovers_total{process_rank="1",rail="127.0.0.2",transport="tcp",device="0"} 1
nccl_autopilot_rail_state{process_rank="1",rail="127.0.0.2",transport="tcp",device="0",state="healthy"} 1
nccl_autopilot_rail_state{process_rank="1",rail="127.0.0.2",transport="tcp",device="0",state="failed"} 0
nccl_autopilot_rail_sent_bytes_total{process_rank="1",rail="127.0.0.2",transport="tcp",device="0"} 1000
nccl_autopilot_rail_share_ratio{process_rank="1",rail="127.0.0.2",transport="tcp",device="0"} 0.25
nccl_autopilot_collective_count_total{comm="tp \\"g}\\"",rank="0",n_ranks="2",collective="AllReduce",size_bucket="1048576",algo="Ring",proto="Simple"} 12
"""


class Ports(unittest.TestCase):
    def test_rendezvous_port_is_below_the_ephemeral_range(self):
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
        for _ in range(20):
            port = gc.free_port()
            self.assertTrue(10000 <= port < low, port)
            with socket.socket() as s:
                s.bind(("0.0.0.0", port))  # still free


class Exports(unittest.TestCase):
    def test_prometheus_summed_over_processes(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, text in enumerate((PROM, PROM.replace(
                    'process_rank="1"', 'process_rank="2"').replace(
                    "share_ratio{process_rank=\"2\",rail=\"127.0.0.2\",transport=\"tcp\","
                    "device=\"0\"} 0.25", "share_ratio{process_rank=\"2\",rail=\"127.0.0.2"
                    "\",transport=\"tcp\",device=\"0\"} 0.75"))):
                paths.append(os.path.join(d, "%d.prom" % i))
                with open(paths[-1], "w") as f:
                    f.write(text)
            paths.append(os.path.join(d, "missing.prom"))
            rails, decisions = gc.parse_prometheus(paths)
        self.assertEqual(rails["127.0.0.2"]["failovers_total"], 2)
        self.assertEqual(rails["127.0.0.2"]["state"], "healthy")
        self.assertEqual(rails["127.0.0.2"]["sent_bytes_total"], 2000)
        self.assertAlmostEqual(rails["127.0.0.2"]["share_ratio"], 0.5)
        self.assertEqual(decisions, {"AllReduce 1048576 Ring/Simple": 24})

    def test_fault_verdict(self):
        run = {"nccl": {"ours": ["SIMULATED fault: rail 1 (127.0.0.2) down"]},
               "rails": {"127.0.0.2": {"failovers_total": 1}}}
        self.assertEqual(gc.fault_verdict(run, "nccl"), [])
        run["rails"] = {}
        self.assertEqual(gc.fault_verdict(run, "nccl"),
                         ["no rail failover counted in the profiler's export"])
        run["nccl"]["ours"] = []
        self.assertEqual(len(gc.fault_verdict(run, "nccl")), 2)
        self.assertEqual(gc.fault_verdict(run, "gloo"), [])


class ChunkSummary(unittest.TestCase):
    def test_summed_over_ranks_and_communicators(self):
        line = ("h:1:2 [0] NCCL INFO autopilot: tuner: comm 0x1 rank %d: ...; 3 cells offered "
                "at half their chunk size (%d tasks halved, %d already at the smallest chunk); "
                "0 contexts re-opened")
        text = "\n".join([line % (0, 120, 2), line % (1, 120, 2), "unrelated"])
        self.assertEqual(gc.chunk_summary(text),
                         {"tasks_halved": 240, "tasks_at_smallest": 4, "summaries": 2})
        self.assertEqual(gc.chunk_summary(""),
                         {"tasks_halved": 0, "tasks_at_smallest": 0, "summaries": 0})


def fake_run(tag, busbw, problems=()):
    rows = []
    for coll in ("all_reduce", "all_gather"):
        for size in (8, 1 << 20):
            rows.append({"collective": coll, "bytes": size, "time_us": 100.0 / busbw,
                         "busbw_gbs": busbw * (size / float(1 << 20)), "wrong": 0})
    parsed = gc.parse_nccl_log(sample("plugins-2.28.log" if tag != "stock" else
                                      "stock-2.28.log"))
    return {"tag": tag, "mode": tag, "rc": [0, 0], "seconds": 3.0, "rows": rows,
            "nccl": parsed, "rails": {"127.0.0.2": {"failovers_total": 1.0, "state": "healthy"}}
            if tag == "all" else {}, "decisions": {"AllReduce 1048576 RING/SIMPLE": 4}
            if tag == "all" else {}, "problems": list(problems)}


class Table(unittest.TestCase):
    def test_markdown(self):
        report = {"date": "2026-12-01", "host": "h", "backend": "nccl", "ranks": 2,
                  "environment": {"gpu": "H200", "torch": "2.9", "cuda_version": "13.0"},
                  "nccl_version": "2.28.9+cuda13.0", "elapsed_s": 12, "ok": False,
                  "runs": [fake_run("stock", 2.0), dict(fake_run("all", 3.0, ["a | b"]),
                                                       skipped=["sizes from 256 MiB: time"])],
                  "problems": ["all: a | b"]}
        md = gc.render_markdown(report)
        self.assertIn("| stock | 0,0 | 3.0 | - | - | - | Socket | none |", md)
        self.assertIn("| all | 0,0 | 3.0 | autopilot v11 | autopilot v5 | autopilot v5 | "
                      "autopilot | a / b |", md)
        self.assertIn("## all_reduce: bus bandwidth GB/s", md)
        self.assertIn("| size | stock busbw | stock us | all busbw | all us | all ratio |", md)
        self.assertIn("| 1 MiB | 2 | 50.0 | 3 | 33.3 | 1.50 |", md)
        self.assertNotIn("reduce_scatter", md)
        self.assertIn("- rail 127.0.0.2: failovers_total=1, state=healthy", md)
        self.assertIn("- ran AllReduce 1048576 RING/SIMPLE: 4", md)
        self.assertIn("- log: SIMULATED fault: rail 1 (127.0.0.2) down", md)
        self.assertIn("- log: comm 0x1a2b send rail 1 (127.0.0.2): healthy -> failed", md)
        self.assertNotIn("- log: net transport", md)
        self.assertIn("verdict: **FAIL**", md)
        self.assertIn("## Not measured\n\n- all: sizes from 256 MiB: time\n", md)
        self.assertIn("NCCL 2.28.9+cuda13.0", md)

    def test_mps_line(self):
        report = {"runs": [fake_run("stock", 1.0)], "ok": True, "elapsed_s": 1,
                  "backend": "nccl", "ranks": 2}
        self.assertNotIn("MPS", gc.render_markdown(report))  # reports from before --mps
        report["mps"] = {"mode": "auto", "used": True, "why": "private daemon"}
        self.assertIn("\n- MPS: on (private daemon)\n", gc.render_markdown(report))
        report["mps"] = {"mode": "auto", "used": False,
                         "why": "nvidia-cuda-mps-control not found"}
        self.assertIn("\n- MPS: off (nvidia-cuda-mps-control not found): small-size figures are "
                      "the GPU's context switches between the processes, not the network\n",
                      gc.render_markdown(report))
        report.update(backend="gloo", mps={"mode": "auto", "used": False,
                                           "why": "gloo backend, no GPU used"})
        self.assertIn("\n- MPS: off (gloo backend, no GPU used)\n", gc.render_markdown(report))

    def test_native_runs_compare_with_native_stock(self):
        report = {"runs": [fake_run("stock", 1.0), fake_run("all", 2.0),
                           fake_run("native-stock", 4.0), fake_run("native-all", 2.0)],
                  "ok": True, "elapsed_s": 1}
        md = gc.render_markdown(report)
        self.assertIn("| size | stock busbw | stock us | all busbw | all us | all ratio | "
                      "native-stock busbw | native-stock us | native-all busbw | native-all us "
                      "| native-all ratio |", md)
        self.assertIn("| 1 MiB | 1 | 100.0 | 2 | 50.0 | 2.00 | 4 | 25.0 | 2 | 50.0 | 0.50 |", md)

    def test_render_cli(self):
        report = {"runs": [fake_run("stock", 1.0)], "ok": True, "elapsed_s": 1}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(report, f)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                self.assertEqual(gc.main(["--render", f.name]), 0)
        finally:
            os.unlink(f.name)
        self.assertIn("| 1 MiB | 1 | 100.0 |", out.getvalue())
        self.assertIn("verdict: **PASS**", out.getvalue())


FAKE_TORCH = {
    "torch/__init__.py": "__version__ = '9.9'\nfrom . import cuda, version, distributed\n",
    "torch/version.py": "cuda = '13.0'\n",
    "torch/cuda/__init__.py": "from . import nccl\nimport ctypes\n"
                              "def is_available(): return True\n"
                              "def device_count(): return 1\n"
                              "def get_device_name(i): return 'Fake GPU'\n"
                              "LIB = ctypes.CDLL(__import__('os').environ['FAKE_LIB'])\n",
    "torch/cuda/nccl.py": "def version(): return (2, 28, 9)\n",
    "torch/distributed.py": "def is_available(): return True\n"
                            "def is_gloo_available(): return True\n"
                            "def is_nccl_available(): return True\n",
}


# A stand-in for nvidia-cuda-mps-control, as the real one behaves (driver 580): `-d` records its
# variables, creates the control socket (a plain file here) and starts the "daemon" (a sleep),
# whose pid it writes; `quit` on stdin records and ends it, leaving the socket and pid files.
# FAKE_MPS_FAIL=start: -d fails; =nosocket: -d succeeds but no socket appears; =noquit: the
# daemon ignores quit.
FAKE_MPS_CONTROL = """#!/bin/sh
pipe=$CUDA_MPS_PIPE_DIRECTORY
if [ "$1" = -d ]; then
  echo "start pipe=$pipe log=$CUDA_MPS_LOG_DIRECTORY" >>"$FAKE_MPS_CALLS"
  case "${FAKE_MPS_FAIL:-}" in
    start) echo "An instance of this daemon is already running" >&2; exit 1;;
    nosocket) exit 0;;
  esac
  sleep 60 </dev/null >/dev/null 2>&1 &
  echo $! >"$pipe/nvidia-cuda-mps-control.pid"
  : >"$pipe/control"
  echo "fake control daemon started" >"$CUDA_MPS_LOG_DIRECTORY/control.log"
  exit 0
fi
read cmd
echo "$cmd pipe=$pipe" >>"$FAKE_MPS_CALLS"
if [ "$cmd" = quit ] && [ "${FAKE_MPS_FAIL:-}" != noquit ] &&
   [ -f "$pipe/nvidia-cuda-mps-control.pid" ]; then
  kill "$(cat "$pipe/nvidia-cuda-mps-control.pid")"
fi
exit 0
"""
# A stand-in for the ranks' Python: torch's probe answers with one GPU, the MPS client check
# passes (unless FAKE_PY_CLIENT_FAIL), a worker records its MPS variable and fails (or sleeps
# FAKE_PY_WORKER_SLEEP seconds).
FAKE_PYTHON = """#!/bin/sh
case "$2" in
  *is_available*)
    echo '{"torch": "9.9", "cuda": true, "devices": 1, "cuda_version": "13.0",'\
' "gpu": "Fake GPU", "nccl": "2.28.9", "gloo": true, "nccl_backend": true}';;
  --worker)
    echo "worker mps=${CUDA_MPS_PIPE_DIRECTORY:-} log=${CUDA_MPS_LOG_DIRECTORY:-}" \
      >>"$FAKE_MPS_CALLS"
    [ -n "${FAKE_PY_WORKER_SLEEP:-}" ] && exec sleep "$FAKE_PY_WORKER_SLEEP"
    exit 1;;
  *)
    echo "client mps=${CUDA_MPS_PIPE_DIRECTORY:-}" >>"$FAKE_MPS_CALLS"
    if [ -n "${FAKE_PY_CLIENT_FAIL:-}" ]; then
      echo "RuntimeError: CUDA error: MPS client failed to connect" >&2; exit 1
    fi;;
esac
"""


def alive(pid):
    """pid runs (a zombie no one reaped has exited)."""
    try:
        os.kill(pid, 0)
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Mps(unittest.TestCase):
    """Starting and stopping the private MPS daemon, against a stand-in control command on
    PATH (no GPU, no root)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        d = self.tmp.name
        self.bin, self.out = os.path.join(d, "bin"), os.path.join(d, "out")
        os.mkdir(self.bin)
        os.mkdir(self.out)
        for name, text in (("nvidia-cuda-mps-control", FAKE_MPS_CONTROL),
                           ("python", FAKE_PYTHON)):
            with open(os.path.join(self.bin, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(self.bin, name), 0o755)
        self.python = os.path.join(self.bin, "python")
        self.calls = os.path.join(d, "calls.txt")
        old = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(old)))
        for k in [k for k in os.environ if k.startswith(("CUDA_MPS", "FAKE_"))]:
            del os.environ[k]
        os.environ["PATH"] = self.bin + os.pathsep + os.environ.get("PATH", "")
        os.environ["FAKE_MPS_CALLS"] = self.calls

    def read_calls(self):
        try:
            with open(self.calls) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def setup(self, choice, backend="nccl", gpu=True):
        return gc.setup_mps(choice, backend, gpu, self.python, self.out, wait_s=0.5)

    def test_started_and_stopped(self):
        for choice in ("auto", "on"):
            os.unlink(self.calls) if os.path.exists(self.calls) else None
            daemon, info, problem = self.setup(choice)
            self.assertIsNotNone(daemon)
            self.assertIsNone(problem)
            self.assertEqual(info, {"mode": choice, "used": True, "why": "private daemon",
                                    "pipe_dir": daemon.dirs[0]})
            pipe, log = daemon.dirs
            # Short, private, fresh: under /tmp, only ours, empty but for the socket.
            self.assertTrue(pipe.startswith("/tmp/gpucheck-mps-") and len(pipe) < 60, pipe)
            self.assertEqual(os.stat(pipe).st_mode & 0o777, 0o700)
            self.assertEqual(sorted(os.listdir(pipe)),
                             ["control", "nvidia-cuda-mps-control.pid"])
            self.assertTrue(daemon._running())
            self.assertEqual(gc.mps_env(daemon.dirs), {"CUDA_MPS_PIPE_DIRECTORY": pipe,
                                                       "CUDA_MPS_LOG_DIRECTORY": log})
            self.assertEqual(self.read_calls(), ["start pipe=%s log=%s" % (pipe, log),
                                                 "client mps=%s" % pipe])
            pid = daemon.pid
            self.assertGreater(pid, 0)
            self.assertEqual(daemon.stop(), "stopped")
            self.assertFalse(alive(pid))
            self.assertEqual(daemon.stop(), "stopped")  # once only
            self.assertEqual(self.read_calls()[2:], ["quit pipe=%s" % pipe])
            self.assertFalse(os.path.exists(os.path.dirname(pipe)))
            with open(os.path.join(self.out, "mps-control.log")) as f:
                self.assertEqual(f.read(), "fake control daemon started\n")

    def test_daemon_that_ignores_quit(self):
        os.environ["FAKE_MPS_FAIL"] = "noquit"
        daemon, info, _ = self.setup("auto")
        self.assertTrue(info["used"])
        pid = daemon.pid
        self.assertEqual(daemon.stop(), "control daemon (pid %d) still running 0.5 s after "
                                        "quit; sent it SIGTERM" % pid)
        deadline = time.time() + 5
        while alive(pid) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(pid))
        self.assertFalse(os.path.exists(daemon.root))

    def test_off_never_starts(self):
        daemon, info, problem = self.setup("off")
        self.assertEqual((daemon, info, problem),
                         (None, {"mode": "off", "used": False, "why": "--mps off"}, None))
        self.assertEqual(self.read_calls(), [])

    def test_not_applicable(self):
        for choice in ("auto", "on"):
            daemon, info, problem = self.setup(choice, backend="gloo")
            self.assertEqual((daemon, problem, info["used"]), (None, None, False))
            self.assertEqual(info["why"], "gloo backend, no GPU used")
            daemon, info, problem = self.setup(choice, gpu=False)
            self.assertEqual((daemon, problem, info["why"]), (None, None, "no GPU"))
        self.assertEqual(self.read_calls(), [])

    def test_not_found(self):
        os.environ["PATH"] = os.pathsep.join(
            p for p in os.environ["PATH"].split(os.pathsep) if p != self.bin)
        if gc.shutil.which(gc.MPS_CONTROL):
            self.skipTest("a real nvidia-cuda-mps-control is on PATH")
        daemon, info, problem = self.setup("auto")
        self.assertEqual((daemon, problem), (None, None))
        self.assertEqual(info, {"mode": "auto", "used": False,
                                "why": "nvidia-cuda-mps-control not found"})
        daemon, info, problem = self.setup("on")
        self.assertEqual(problem, "MPS asked for (--mps on) but not used: "
                                  "nvidia-cuda-mps-control not found")

    def check_failed_start(self, why_part, quit_sent=True):
        for choice in ("auto", "on"):
            os.unlink(self.calls) if os.path.exists(self.calls) else None
            daemon, info, problem = self.setup(choice)
            self.assertIsNone(daemon)
            self.assertFalse(info["used"])
            self.assertIn(why_part, info["why"])
            if choice == "auto":
                self.assertIsNone(problem)
            else:
                self.assertEqual(problem, "MPS asked for (--mps on) but not used: " + info["why"])
            calls = self.read_calls()
            self.assertTrue(calls[0].startswith("start pipe=/tmp/gpucheck-mps-"), calls)
            pipe = calls[0].split()[1][len("pipe="):]
            # Whatever -d said, quit is sent (a daemon that started is never left behind) and
            # the folders are gone.
            self.assertEqual(calls[-1], "quit pipe=" + pipe)
            self.assertFalse(os.path.exists(os.path.dirname(pipe)))

    def test_start_fails(self):
        os.environ["FAKE_MPS_FAIL"] = "start"
        self.check_failed_start("nvidia-cuda-mps-control -d exited with 1: An instance of this "
                                "daemon is already running")

    def test_no_socket(self):
        os.environ["FAKE_MPS_FAIL"] = "nosocket"
        self.check_failed_start("left no control socket in /tmp/gpucheck-mps-")

    def test_client_fails(self):
        os.environ["FAKE_PY_CLIENT_FAIL"] = "1"
        self.check_failed_start("a CUDA client under MPS failed (exit 1: RuntimeError: CUDA "
                                "error: MPS client failed to connect)")

    def main(self, *extra):
        argv = ["--python", self.python, "--out", self.out, "--modes", "stock", "--no-fault",
                "--no-native", "--max-bytes", "8", "--budget", "60"] + list(extra)
        with contextlib.redirect_stdout(io.StringIO()) as out, \
                contextlib.redirect_stderr(io.StringIO()):
            rc = gc.main(argv)
        with open(os.path.join(self.out, "gpu-check.json")) as f:
            return rc, json.load(f), out.getvalue()

    def test_check_uses_mps_and_stops_it_after_a_failed_run(self):
        rc, report, out = self.main()
        self.assertEqual(rc, 1)  # the stand-in workers fail
        mps = report["mps"]
        self.assertEqual((mps["used"], mps["why"], mps["stop"]), (True, "private daemon",
                                                                  "stopped"))
        pipe = mps["pipe_dir"]
        calls = self.read_calls()
        self.assertEqual(calls[0].split()[:2], ["start", "pipe=" + pipe])
        workers = [c for c in calls if c.startswith("worker ")]
        self.assertEqual(len(workers), 2)
        self.assertTrue(all(c.startswith("worker mps=%s log=/tmp/" % pipe) for c in workers))
        self.assertEqual(calls[-1], "quit pipe=" + pipe)
        self.assertEqual(report["runs"][0]["env"]["CUDA_MPS_PIPE_DIRECTORY"], pipe)
        self.assertIn("gpu-check: MPS: on (private daemon)", out)
        with open(os.path.join(self.out, "gpu-check.md")) as f:
            self.assertIn("- MPS: on (private daemon)\n", f.read())
        self.assertFalse(os.path.exists(os.path.dirname(pipe)))

    def test_check_without_mps(self):
        rc, report, _ = self.main("--mps", "off")
        self.assertEqual(rc, 1)
        self.assertEqual(report["mps"], {"mode": "off", "used": False, "why": "--mps off"})
        self.assertEqual(self.read_calls(), ["worker mps= log="] * 2)
        self.assertFalse([k for k in report["runs"][0]["env"] if k.startswith("CUDA_MPS")])
        # on, where the daemon does not start: a problem, and the runs go on without MPS
        os.environ["FAKE_MPS_FAIL"] = "start"
        os.unlink(self.calls)
        rc, report, _ = self.main("--mps", "on")
        self.assertEqual(rc, 1)
        self.assertFalse(report["mps"]["used"])
        self.assertTrue(report["problems"][0].startswith(
            "MPS asked for (--mps on) but not used: nvidia-cuda-mps-control -d exited with 1"))
        self.assertEqual([c for c in self.read_calls() if c.startswith("worker")],
                         ["worker mps= log="] * 2)

    def test_stopped_on_sigterm(self):
        """SIGTERM in the middle of a run: the ranks are killed, the daemon stopped."""
        os.environ["FAKE_PY_WORKER_SLEEP"] = "37.25"
        old = signal.getsignal(signal.SIGTERM)
        timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        t0 = time.time()
        try:
            with self.assertRaises(SystemExit) as e, \
                    contextlib.redirect_stdout(io.StringIO()):
                gc.main(["--python", self.python, "--out", self.out, "--modes", "stock",
                         "--no-fault", "--no-native"])
        finally:
            timer.cancel()
        self.assertEqual(e.exception.code, 128 + signal.SIGTERM)
        self.assertLess(time.time() - t0, 15)
        self.assertEqual(signal.getsignal(signal.SIGTERM), old)  # restored
        calls = self.read_calls()
        pipe = calls[0].split()[1][len("pipe="):]
        self.assertEqual(len([c for c in calls if c.startswith("worker mps=" + pipe)]), 2)
        self.assertEqual(calls[-1], "quit pipe=" + pipe)
        self.assertFalse(os.path.exists(os.path.dirname(pipe)))
        out = os.popen("ps -eo args").read()
        self.assertNotIn("sleep 37.25", out)

    def test_stopped_when_the_check_breaks(self):
        def broken(*args, **kwargs):
            raise RuntimeError("broken run")
        real = gc.run_mode
        gc.run_mode = broken
        try:
            with self.assertRaises(RuntimeError), \
                    contextlib.redirect_stdout(io.StringIO()):
                gc.main(["--python", self.python, "--out", self.out, "--modes", "stock",
                         "--no-fault", "--no-native"])
        finally:
            gc.run_mode = real
        calls = self.read_calls()
        self.assertTrue(calls[0].startswith("start pipe=/tmp/gpucheck-mps-"), calls)
        pipe = calls[0].split()[1][len("pipe="):]
        self.assertEqual(calls[-1], "quit pipe=" + pipe)
        self.assertFalse(os.path.exists(os.path.dirname(pipe)))


class Probe(unittest.TestCase):
    """probe_torch runs its script in a child Python; a stand-in torch package checks what it
    reads (versions, GPU, the NCCL library file the process mapped)."""

    def test_probe(self):
        with tempfile.TemporaryDirectory() as d:
            for path, text in FAKE_TORCH.items():
                os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(d, path), "w") as f:
                    f.write(text)
            # A library whose file name says libnccl.so, to be found in /proc/self/maps.
            fake = os.path.join(d, "libnccl.so.2")
            import shutil
            shutil.copy(next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6",
                                         "/usr/lib/libm.so.6") if os.path.exists(p)), fake)
            old = dict(os.environ)
            os.environ["PYTHONPATH"] = d
            os.environ["FAKE_LIB"] = fake
            try:
                info = gc.probe_torch(sys.executable, "nccl")
            finally:
                os.environ.clear()
                os.environ.update(old)
        self.assertEqual(info["torch"], "9.9")
        self.assertTrue(info["cuda"])
        self.assertEqual(info["gpu"], "Fake GPU")
        self.assertEqual(info["nccl"], "2.28.9")
        self.assertEqual(info["nccl_lib"], fake)
        self.assertTrue(info["nccl_backend"])

    def test_no_torch(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "torch.py"), "w") as f:
                f.write("raise ImportError('no torch here')\n")
            old = dict(os.environ)
            os.environ["PYTHONPATH"] = d
            try:
                info = gc.probe_torch(sys.executable, "nccl")
            finally:
                os.environ.clear()
                os.environ.update(old)
        self.assertIn("torch not importable", info["error"])


class LibraryLoad(unittest.TestCase):
    def test_loads_or_says_why(self):
        lib = os.path.join(os.environ.get("AUTOPILOT_BUILD_DIR", os.path.join(ROOT, "build")),
                           "lib")
        if os.path.exists(os.path.join(lib, "libnccl-net-autopilot.so")):
            self.assertIsNone(gc.library_load_error(lib))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "libnccl-net-autopilot.so"), "w") as f:
                f.write("not an ELF file, and long enough not to be too short for one." * 20)
            self.assertIn("invalid ELF header", gc.library_load_error(d))


class Native(unittest.TestCase):
    """run_mode with the real ncclperf binary (CTest passes its path): without a GPU it exits
    77 and the run is reported as skipped with the reason (never as a measured pass)."""

    def test_without_gpu(self):
        binary = os.environ.get("GPUCHECK_NCCLPERF")
        if not binary:
            self.skipTest("GPUCHECK_NCCLPERF not set (CTest sets it)")
        with tempfile.TemporaryDirectory() as out:
            args = parse_args(["--out", out, "--max-bytes", "1K", "--ranks", "2"])
            run = gc.run_mode(args, "stock", "native-stock", "/nonexistent", time.time() + 30,
                              native=binary)
            self.assertEqual(run["rc"], [77])
            self.assertEqual(run["problems"], [])  # the torch runs stand; reported as skipped
            self.assertEqual(run["rows"], [])
            self.assertIn("ncclperf checked nothing (no usable NCCL or CUDA runtime; see "
                          "native-stock.rank0.out)", run["skipped"])
            with open(os.path.join(out, "native-stock.rank0.out")) as f:
                text = f.read()
            self.assertIn("nothing checked", text)
            try:  # where NCCL is installed, the version is read without a GPU
                ctypes.CDLL("libnccl.so.2")
                self.assertIn("ncclperf: NCCL 2.", text)
            except OSError:
                self.assertIn("cannot open libnccl.so.2", text)


    def test_with_stand_in(self):
        """The whole native path (command line, row files, problems) with ncclperf running on
        the host-memory stand-in for NCCL (test/gpucheck/fake_nccl.cc)."""
        binary, fake = os.environ.get("GPUCHECK_NCCLPERF"), os.environ.get("GPUCHECK_FAKE_NCCL")
        if not binary or not fake:
            self.skipTest("GPUCHECK_NCCLPERF / GPUCHECK_FAKE_NCCL not set (CTest sets them)")
        with tempfile.TemporaryDirectory() as out:
            args = parse_args(["--out", out, "--max-bytes", "4K", "--factor", "8",
                               "--ranks", "2", "--iters", "3"])
            args.nccl_lib = args.cudart_lib = fake
            old = dict(os.environ)
            os.environ["FAKE_NCCL_DIR"] = out
            try:
                run = gc.run_mode(args, "stock", "native-stock", "/nonexistent",
                                  time.time() + 60, native=binary)
                os.environ["FAKE_NCCL_CORRUPT"] = "Broadcast"
                bad = gc.run_mode(args, "stock", "native-bad", "/nonexistent",
                                  time.time() + 60, native=binary)
            finally:
                os.environ.clear()
                os.environ.update(old)
        self.assertEqual(run["rc"], [0])
        self.assertEqual(run["problems"], [])
        self.assertEqual(sorted((r["collective"], r["bytes"]) for r in run["rows"]),
                         sorted((c, b) for c in gc.COLLECTIVES for b in (8, 64, 512, 4096)))
        self.assertEqual(bad["rc"], [1])
        # one wrong element in each of the two checks (before and after the timed calls)
        self.assertIn("rank 1: broadcast 8 B: 2 wrong elements", bad["problems"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
