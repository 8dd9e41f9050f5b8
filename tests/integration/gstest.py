"""Shared helpers for integration tests: run the real gpuscope binary in a throw-away store.

Each test script does `from gstest import *`, makes a Sandbox, and calls gs(...) which returns
(exit code, stdout, stderr). Failures raise AssertionError with the command's output. A script ends
with run_tests(globals()), which runs its test_* functions as a unittest suite."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from shlex import quote as shlex_quote

SRC = os.environ.get("GS_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))
BUILD = os.environ.get("GS_BUILD_DIR", os.path.join(SRC, "build"))
PYTHON = os.environ.get("GS_PYTHON", "/usr/bin/python3")


def _cpu_first_bin(real):
    """Where ctest runs a script under `scripts/cpufirst.py --procs-env GS_CPU_FIRST_PROCS`
    (tests/integration/CMakeLists.txt), a wrapper that moves itself into the CPU-first cgroup and then
    execs gpuscope (same pid, same argv[0]): gpuscope and the job it runs get the CPUs first, the
    script, its servers and other processes share them as usual. Elsewhere gpuscope itself."""
    procs = os.environ.get("GS_CPU_FIRST_PROCS")
    if not procs:
        return real
    import atexit
    d = tempfile.mkdtemp(prefix="gs-cpufirst-bin-")
    atexit.register(shutil.rmtree, d, True)
    path = os.path.join(d, "gpuscope")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\necho $$ > "$GS_CPU_FIRST_PROCS" 2>/dev/null\nexec {shlex_quote(os.path.abspath(real))} "$@"\n')
    os.chmod(path, 0o755)
    return path


_REAL_BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(os.path.dirname(__file__), "../../build/gpuscope"))
# BIN_FIRST: gpuscope CPU first, for the runs whose finding the job's own CPU decides (a loader that
# sleeps reads input_latency only when it did not wait for a CPU): `sb.gs(..., first=True)`. BIN is
# the same where GS_CPU_FIRST_ALL is set (GS_JOB_FIRST: the tick-grid scripts, every gpuscope they
# start), else gpuscope itself.
BIN_FIRST = _cpu_first_bin(_REAL_BIN)
BIN = BIN_FIRST if os.environ.get("GS_CPU_FIRST_ALL") else _REAL_BIN


# A job that speaks the gs1 protocol itself (standard library only):
#   job.py [--mark] [--out FILE] DATA COMPUTE N [KEY=VALUE...]
# sends each KEY=VALUE as a param, then N steps that each wait DATA seconds (sleeping) and compute
# COMPUTE seconds (spinning), reporting both; with --mark, an "epoch 1" mark at step N // 2. With
# --out, it writes what it measured itself as JSON: steps, samples, the wall time from its first
# step's start to its last step's end, and its total data wait and compute (seconds).
_STEP_JOB = r'''
import json, os, socket, sys, time
args = sys.argv[1:]
mark = args[:1] == ["--mark"]
if mark:
    args = args[1:]
out = None
if args[:1] == ["--out"]:
    out, args = args[1], args[2:]
data, comp, n = float(args[0]), float(args[1]), int(args[2])
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def send(line):
    if path:
        s.sendto(line.encode(), path)
for kv in args[3:]:
    k, v = kv.split("=", 1)
    send(f"gs1 param {k} {v}")
first, data_s, compute_s = None, 0.0, 0.0
for i in range(n):
    t0 = time.monotonic(); time.sleep(data); t1 = time.monotonic()
    if first is None:
        first = t0
    while time.monotonic() - t1 < comp:
        pass
    t2 = time.monotonic()
    data_s, compute_s = data_s + t1 - t0, compute_s + t2 - t1
    send(f"gs1 step {i} data={t1 - t0:.6f} compute={t2 - t1:.6f} samples=32 t={t2:.6f}")
    if mark and i == n // 2:
        send(f"gs1 mark epoch 1 t={t2:.6f}")
if out:
    with open(out, "w") as f:
        json.dump({"steps": n, "samples": 32 * n, "wall_s": t2 - first if n else None, "data_s": data_s,
                   "compute_s": compute_s}, f)
'''


class Sandbox:
    """A temporary directory with its own store; removed at exit unless GS_KEEP is set."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gstest-")
        self.db = os.path.join(self.dir, "gs.db")
        self.store = "sqlite://" + self.db
        self.env = dict(os.environ)
        self.env["GPUSCOPE_STORE"] = self.store
        self.env["XDG_DATA_HOME"] = os.path.join(self.dir, "xdg")
        # the user's alerts.ini (docs/alerts.md) applies to every run: not to the tests' runs
        self.env["XDG_CONFIG_HOME"] = os.path.join(self.dir, "config")
        self.env.pop("GPUSCOPE_NVML_LIB", None)
        self.env.pop("GPUSCOPE_ROCM_SMI_LIB", None)  # AMD GPUs only where a test asks (test_rocm_run)
        for k in ("GPUSCOPE_DCGM_LIB", "GPUSCOPE_DCGM_HOST"):  # DCGM only where a test asks (test_dcgm_run)
            self.env.pop(k, None)

    def gs(self, *args, env=None, timeout=120, input=None, first=False):
        """gpuscope ARGS in this sandbox: (exit code, stdout, stderr). first: CPU first (BIN_FIRST)."""
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run([BIN_FIRST if first else BIN, *args], capture_output=True, text=True, env=e, timeout=timeout,
                           input=input)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args, **kw):
        rc, out, err = self.gs(*args, **kw)
        check(rc == 0, f"gpuscope {' '.join(args)} exited {rc}\nstdout:\n{out}\nstderr:\n{err}")
        return out

    def json(self, *args, **kw):
        return json.loads(self.ok(*args, **kw))

    def csv(self, *args, **kw):
        """Rows of `show --csv` as dicts."""
        import csv, io
        return list(csv.DictReader(io.StringIO(self.ok(*args, **kw))))

    def step_job(self, data, compute, steps, *params, mark=False, out=None):
        """The command line of a job that reports `steps` steps of `data` seconds waiting and `compute`
        seconds computing over gs1 (and params "KEY=VALUE"; mark: an epoch mark halfway; out: a file
        where the job writes its own count of steps and samples and its wall time, as JSON), for
        `gs("run", "--", *sb.step_job(...))`. The job's script is written into the sandbox."""
        path = os.path.join(self.dir, "step_job.py")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(_STEP_JOB)
        return [PYTHON, path, *(["--mark"] if mark else []), *(["--out", out] if out else []), str(data),
                str(compute), str(steps), *params]

    def close(self):
        if not os.environ.get("GS_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def pb_varint(n):
    """n as protobuf's base-128 varint (a negative int64 as its 64-bit two's complement), for the
    tests that write protobuf by hand (test_import_tensorboard.py, fake_kubelet.py)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def check(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)


def wait_until(cond, what, timeout=60, proc=None, every=0.02):
    """Polls cond() every `every` seconds until it returns something true, and returns that: how a test waits
    for a state (a file the job wrote, a line, a row in the store) instead of sleeping. The timeout
    only bounds a hang (generous: a loaded machine is slow, never wrong); a proc (Popen) that exits
    first ends the wait too. Raises AssertionError naming `what`."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited ({proc.returncode}) first")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout} s")
        time.sleep(every)


def wait_file(path, what=None, timeout=60, proc=None):
    """wait_until the file exists and is not empty; returns its text."""
    def ready():
        try:
            with open(path) as f:
                return f.read() or None
        except OSError:
            return None
    return wait_until(ready, what or f"{path} was not written", timeout, proc)


SKIP = 77  # ctest's SKIP_RETURN_CODE for the integration tests (tests/integration/CMakeLists.txt)
# Under `make check` (which sets GS_CHECK_STRICT=1) every Debian package a test needs has just been
# installed, so a skip would hide a test that should have run: skip() and skip_script() fail instead.
# Only a skip for a package Debian does not have (skip_needs_pypi(), in a script labelled needs-pypi
# in tests/integration/CMakeLists.txt) stays a skip there. docs/testing.md, "Skips".
STRICT = os.environ.get("GS_CHECK_STRICT") == "1"
PYPI = "needs-pypi: "  # how a skip_needs_pypi() reason starts


class Skipped(unittest.SkipTest):
    """Raised by skip(): the test cannot run here (a missing package, say), which is not a pass.
    A unittest.SkipTest, so unittest records it as a skip (a test may raise SkipTest itself too)."""


def _strict_failure(reason):
    return (f"skipped under make check (GS_CHECK_STRICT=1), where what this test needs is installed: "
            f"{reason}")


def skip(reason):
    """Ends the current test as skipped, with the reason. A script whose tests skip exits 77, which
    ctest shows as "Skipped" (never as passed): keep a test that may skip in a script of its own.
    With GS_CHECK_STRICT=1 (make check) the skip is a failure with the same reason."""
    if STRICT:
        raise AssertionError(_strict_failure(reason))
    raise Skipped(reason)


def skip_needs_pypi(reason):
    """Ends the current test as skipped because it needs a package only pip has (not Debian): a skip
    even under GS_CHECK_STRICT=1, which make check lists by name at its end. The script must carry
    the ctest label needs-pypi (tests/integration/CMakeLists.txt, GS_NEEDS_PYPI)."""
    raise Skipped(PYPI + reason)


def skip_script(reason):
    """For a script that cannot run any of its tests here (checked before run_tests): prints the
    reason and exits 77 (a ctest skip), or, with GS_CHECK_STRICT=1, prints it as a failure and
    exits 1. Never returns."""
    if STRICT:
        print("FAIL: " + _strict_failure(reason))
        sys.exit(1)
    print("SKIP: " + reason)
    sys.exit(SKIP)


_shared = []  # the sandboxes shared_sandbox() made, closed by run_tests


def shared_sandbox(setup=None):
    """A function returning one Sandbox for all of a script's tests: made on its first call, then
    set up by setup(sb) (runs the tests read back), and closed when run_tests ends."""
    made = []

    def get():
        if not made:
            made.append(Sandbox())
            _shared.append(made[0])
            if setup:
                setup(made[0])
        return made[0]
    return get


class _Case(unittest.FunctionTestCase):
    """One test_* function of a script as a unittest case, shown under the function's own name."""

    def __str__(self):
        return self.id()

    def shortDescription(self):
        return None


def run_tests(globs):
    """Runs every function named test_* in globs, in name order, as a unittest suite (one
    FunctionTestCase each) with unittest's text runner: a check() that fails is a failure, any other
    exception an error, skip() or unittest.SkipTest a skip. Closes the shared sandboxes, then exits 1
    on any failure or error, else 77 (a ctest skip) when a test skipped, else 0. With
    GS_CHECK_STRICT=1 a skip other than skip_needs_pypi() (a plain unittest.SkipTest) exits 1."""
    suite = unittest.TestSuite(_Case(fn) for name, fn in sorted(globs.items())
                               if name.startswith("test_") and callable(fn))
    try:
        result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    finally:
        for sb in _shared:
            sb.close()
    hidden = [f"{case}: {why}" for case, why in result.skipped if not str(why).startswith(PYPI)]
    if STRICT and hidden:
        print("FAIL: " + _strict_failure("; ".join(hidden)))
        sys.exit(1)
    sys.exit(1 if not result.wasSuccessful() else SKIP if result.skipped else 0)
