#!/usr/bin/env python3
"""CTest cli_args: the `autopilot` tool's command line, every subcommand (and ncclperf's).

  check_cli.py AUTOPILOT NCCLPERF

For every command the tool lists: `--help` exits 0 with its usage on stdout; an unknown flag and
bad values of representative flags exit 2 with one line on stderr that names the flag and the
value, and nothing on stdout (no crash, no uncaught exception, no run with a half-read command
line). A command the tool lists but this file does not know fails the test, so that a new
command gets its cases here.
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile

# Per command: (arguments, text the one-line error must contain besides the command's name).
# Every case must fail while parsing: a value that slipped through would start the command, so
# each run has a timeout and a test that starts a benchmark fails rather than waits.
BAD = {
    "attackbench": [
        (["--seconds", "abc"], ["--seconds", "abc"]),
        (["--seconds", "0"], ["--seconds", "'0'"]),
        (["--seconds", "601"], ["--seconds", "601"]),
        (["--follower"], ["--follower"]),
    ],
    "demo": [
        (["--ranks", "abc"], ["--ranks", "abc"]),
        (["--ranks", "1"], ["--ranks", "'1'"]),
        (["--ranks", "4x"], ["--ranks", "4x"]),
        (["--rails", "-5"], ["--rails", "-5"]),
        (["--phase-seconds", "nan"], ["--phase-seconds", "nan"]),
        (["--warmup-seconds", "-1"], ["--warmup-seconds", "-1"]),
        (["--sizes", "65536,0"], ["--sizes", "'0'"]),
        (["--sizes", "64k"], ["--sizes", "64k"]),
        (["--mode", "fast"], ["--mode", "fast"]),
        (["--json"], ["--json"]),
    ],
    "demo-rank": [
        ([], ["--rank"]),
        (["--rank", "x", "--nranks", "2", "--fd", "3", "--comm-id", "1", "--sizes", "8"],
         ["--rank", "x"]),
        (["--rank", "0", "--nranks", "2", "--fd", "3", "--comm-id", "0", "--sizes", "8"],
         ["--comm-id", "'0'"]),
    ],
    "ibbench": [
        (["--size", "abc"], ["--size", "abc"]),
        (["--size", "-1"], ["--size", "-1"]),
        (["--seconds", "nan"], ["--seconds", "nan"]),
        (["--seconds", "-2"], ["--seconds", "-2"]),
    ],
    "top": [
        (["--interval", "0"], ["--interval", "'0'"]),
        (["--interval", "abc"], ["--interval", "abc"]),
        (["--frames", "-1"], ["--frames", "-1"]),
        (["--stale-after", "nan"], ["--stale-after", "nan"]),
        (["--dir"], ["--dir"]),
    ],
    "info": [
        (["--nccl", "1.0"], ["--nccl", "1.0"]),
        (["--nccl"], ["--nccl"]),
    ],
    "netbench": [
        (["--seconds", "abc"], ["--seconds", "abc"]),
        (["--seconds", "0"], ["--seconds", "'0'"]),
        (["--rail-mbit", "-1"], ["--rail-mbit", "-1"]),
        (["--only", "nosuch"], ["--only", "nosuch"]),
    ],
    "params": [
        (["stray"], ["stray"]),
    ],
    "profbench": [
        (["--json"], ["--json"]),
        (["extra"], ["extra"]),
    ],
    "replay": [
        (["--calls", "abc", "x.csv"], ["--calls", "abc"]),
        (["--runs", "0", "x.csv"], ["--runs", "'0'"]),
        (["--seed", "-1", "x.csv"], ["--seed", "-1"]),
        (["--noise", "2", "x.csv"], ["--noise", "'2'"]),
        (["--probe-budget", "0.9", "x.csv"], ["--probe-budget", "0.9"]),
        (["--min-bytes", "1e3", "x.csv"], ["--min-bytes", "1e3"]),
        ([], ["FILE.csv"]),
        (["--train", "a.csv"], ["--train", "--score"]),
    ],
    "simulate": [
        (["--gpus", "0"], ["--gpus", "'0'"]),
        (["--seeds", "abc"], ["--seeds", "abc"]),
        (["--jobs", "-3"], ["--jobs", "-3"]),
        (["--window-mib", "1.5"], ["--window-mib", "1.5"]),
        (["--scenarios", "healthy,nosuch"], ["--scenarios", "nosuch"]),
        (["--policies", "best"], ["--policies", "best"]),
        (["--model", "gpt"], ["--model", "gpt"]),
    ],
    "tunerbench": [
        (["--rounds", "abc"], ["--rounds", "abc"]),
        (["--rounds", "0"], ["--rounds", "'0'"]),
        (["--calls", "-5"], ["--calls", "-5"]),
        (["--calls", "99999999999999999999"], ["--calls", "99999999999999999999"]),
    ],
}

# ncclperf, the GPU check's sweep binary, parses its command line the same way.
NCCLPERF_BAD = [
    (["--ranks", "9"], ["--ranks", "'9'"]),
    (["--iters", "abc"], ["--iters", "abc"]),
    (["--max-bytes", "64X"], ["--max-bytes", "64X"]),
    (["--min-bytes", "-8"], ["--min-bytes", "-8"]),
    (["--time-per-size", "0"], ["--time-per-size", "'0'"]),
    (["--collectives", "all_reduce,alltoall"], ["--collectives", "alltoall"]),
    (["--min-bytes", "1M", "--max-bytes", "64K"], ["--min-bytes", "--max-bytes"]),
    (["--no-such-flag"], ["--no-such-flag"]),
]

# Arguments a command needs before an unknown flag is reached (required options are checked
# first).
REQUIRED = {
    "demo-rank": ["--rank", "0", "--nranks", "2", "--fd", "3", "--comm-id", "1", "--sizes", "8"],
}

failures = []


# The tool re-executes itself once to put its library folder on LD_LIBRARY_PATH; that doubles the
# start-up (slow under the sanitizers) and plays no part in parsing, so the runs skip it.
ENV = dict(os.environ, AUTOPILOT_LIBRARY_PATH_SET="1")


def run(tool, args, cwd):
    try:
        return subprocess.run([tool] + args, capture_output=True, text=True, timeout=30, cwd=cwd,
                              env=ENV)
    except subprocess.TimeoutExpired:
        failures.append("autopilot %s: still running after 30 s (the command line was accepted "
                        "and the command started?)" % " ".join(args))
        return None


def expect_usage_error(tool, cmd, args, needles, cwd, program="autopilot"):
    shown = " ".join(([cmd] if cmd else []) + args)
    r = run(tool, ([cmd] if cmd else []) + args, cwd)
    if r is None:
        return
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    problems = []
    if r.returncode != 2:
        problems.append("exit %d, wanted 2" % r.returncode)
    if len(lines) != 1:
        problems.append("%d lines on stderr, wanted 1" % len(lines))
    if r.stdout:
        problems.append("output on stdout")
    text = " ".join(lines)
    prefix = "%s %s:" % (program, cmd) if cmd else program + ":"
    if not text.startswith(prefix):
        problems.append("the message does not start with '%s'" % prefix)
    for n in needles:
        if n not in text:
            problems.append("the message does not mention %s" % n)
    if problems:
        failures.append("%s %s: %s\n    stderr: %s" % (program, shown, "; ".join(problems),
                                                    r.stderr.strip()[:400]))


def expect_help(tool, cmd, flag, cwd):
    program = "autopilot %s" % cmd if cmd else "ncclperf"
    r = run(tool, ([cmd] if cmd else []) + [flag], cwd)
    if r is None:
        return
    if r.returncode != 0 or not r.stdout.startswith("Usage: " + program):
        failures.append("%s %s: exit %d, stdout %r" % (program, flag, r.returncode, r.stdout[:120]))
    elif "--help" not in r.stdout or r.stderr:
        failures.append("%s %s: no option list, or output on stderr" % (program, flag))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_cli.py AUTOPILOT NCCLPERF")
    tool = os.path.abspath(sys.argv[1])
    ncclperf = os.path.abspath(sys.argv[2])
    cwd = tempfile.mkdtemp(prefix="ap-cli-")

    top = run(tool, ["--help"], cwd)
    if top is None or top.returncode != 0 or "Usage: autopilot" not in top.stdout:
        sys.exit("FAIL: autopilot --help: %r" % (top and (top.returncode, top.stdout[:200])))
    listed = []
    in_list = False
    for line in top.stdout.splitlines():
        if line.startswith("commands:"):
            in_list = True
        elif in_list and line.startswith("  ") and line.split():
            listed.append(line.split()[0])
        elif in_list and not line.strip():
            in_list = False
    if len(listed) < 5:
        failures.append("autopilot --help lists %d commands: %s" % (len(listed), listed))
    for cmd in listed:
        if cmd not in BAD:
            failures.append("autopilot %s: no cases in check_cli.py; add them" % cmd)
    for cmd in BAD:
        if cmd not in listed:
            failures.append("autopilot %s: not listed by autopilot --help" % cmd)

    version = run(tool, ["--version"], cwd)
    if version is not None and (version.returncode != 0 or "nccl-autopilot" not in version.stdout):
        failures.append("autopilot --version: exit %d, %r" % (version.returncode, version.stdout))
    bare = run(tool, [], cwd)
    if bare is not None and (bare.returncode != 2 or "Usage: autopilot" not in bare.stderr):
        failures.append("autopilot without a command: exit %d, wanted 2 and the usage on stderr"
                        % bare.returncode)
    expect_usage_error(tool, "", ["nosuch"], ["nosuch"], cwd)
    expect_usage_error(tool, "", ["--bogus"], ["--bogus"], cwd)

    # Independent processes, mostly waiting on the loader: run a few at once.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
    pending = []
    cases = 0
    for cmd in sorted(BAD):
        for flag in ["--help", "-h"] if cmd == "demo" else ["--help"]:
            pending.append(pool.submit(expect_help, tool, cmd, flag, cwd))
        pending.append(pool.submit(expect_usage_error, tool, cmd,
                                   REQUIRED.get(cmd, []) + ["--no-such-flag"], ["--no-such-flag"],
                                   cwd))
        for args, needles in BAD[cmd]:
            pending.append(pool.submit(expect_usage_error, tool, cmd, args, needles, cwd))
            cases += 1
    pending.append(pool.submit(expect_help, ncclperf, None, "--help", cwd))
    for args, needles in NCCLPERF_BAD:
        pending.append(pool.submit(expect_usage_error, ncclperf, "", args, needles, cwd,
                                   "ncclperf"))
        cases += 1
    for f in pending:
        f.result()
    pool.shutdown()
    leftovers = os.listdir(cwd)
    if leftovers:
        failures.append("a rejected command line still wrote files: %s" % leftovers)

    if failures:
        print("FAIL:\n" + "\n".join(failures))
        return 1
    print("ok: %d commands and ncclperf; --help, -h, an unknown flag and %d bad values"
          % (len(listed), cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
