"""Shared helpers for the doctor's scenario tests: run a real workload under `gpuscope run` in a
throw-away store (optionally with the simulated GPU library playing a scenario), then read the run
back with `gpuscope report --json`.

Environment (set by ctest through GS_TEST_ENV): GPUSCOPE_BIN, GS_SOURCE_DIR, GS_BUILD_DIR, GS_PYTHON.
GS_KEEP=1 keeps the stores; GS_SCENARIOS=a,b runs only those cases."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("GS_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
BUILD = os.environ.get("GS_BUILD_DIR", os.path.join(SRC, "build"))
BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(BUILD, "gpuscope"))
PYTHON = os.environ.get("GS_PYTHON", "/usr/bin/python3")
WORKLOADS = os.path.join(HERE, "workloads")
GPUSIM_LIB = os.path.join(BUILD, "tests", "gpusim", "libnvidia-ml.so.1")
GPUSIM_SCENARIOS = os.path.join(HERE, "..", "gpusim", "scenarios")  # the simulator's one scenario folder
CLIENT = os.path.join(SRC, "clients", "python")
SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests
STRICT = os.environ.get("GS_CHECK_STRICT") == "1"  # make check: a skip is a failure (docs/testing.md)


sys.path.insert(0, os.path.join(SRC, "scripts"))
from cpufirst import CpuFirst  # noqa: E402,F401 (scenlib.CpuFirst: the tests' and the bench's name for it)


def have_torch():
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True)
    return r.returncode == 0


class Sandbox:
    """A temporary directory with its own store; removed by close() unless GS_KEEP is set."""

    def __init__(self, prefix="gsscen-"):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.store = "sqlite://" + os.path.join(self.dir, "gs.db")

    def env(self, gpusim=None):
        e = dict(os.environ)
        e["GPUSCOPE_STORE"] = self.store
        e["XDG_DATA_HOME"] = os.path.join(self.dir, "xdg")
        e["PYTHONPATH"] = os.pathsep.join([WORKLOADS, CLIENT])  # the real client, never a stand-in
        e["OMP_NUM_THREADS"] = "1"
        if gpusim:
            e["GPUSCOPE_NVML_LIB"] = GPUSIM_LIB
            e["GPUSIM_SCENARIO"] = os.path.join(GPUSIM_SCENARIOS, gpusim)
        else:
            # CPU-only cases stay CPU-only on a machine with a real GPU.
            e["GPUSCOPE_NVML_LIB"] = "/nonexistent/libnvidia-ml.so.1"
            e.pop("GPUSIM_SCENARIO", None)
        return e

    def gs(self, *args, env=None, timeout=180, pin=None, cgroup=None):
        def pre():
            if pin:
                os.sched_setaffinity(0, pin)
            if cgroup:
                cgroup.join()
        p = subprocess.run([BIN, *args], capture_output=True, text=True, env=env or self.env(), timeout=timeout,
                           preexec_fn=pre if pin or cgroup else None)
        return p.returncode, p.stdout, p.stderr

    def run(self, name, workload, args, gpusim=None, timeout=180, cpus=None, cgroup=None):
        """Runs workload (a file in workloads/) with args under gpuscope; returns (stdout, stderr).
        cpus=N pins gpuscope and the job to the first N CPUs this process may use (the job's affinity,
        which the agent records as host.cpuset_cores), so a case means the same on a bigger machine;
        cgroup (a CpuFirst) runs them in that CPU cgroup."""
        cmd = ["run", "--name", name, "--", PYTHON, os.path.join(WORKLOADS, workload), *args]
        pin = None
        if cpus:
            allowed = sorted(os.sched_getaffinity(0))
            if len(allowed) < cpus:
                raise AssertionError(f"the case needs {cpus} CPUs, this machine allows {len(allowed)}")
            pin = set(allowed[:cpus])
        rc, out, err = self.gs(*cmd, env=self.env(gpusim), timeout=timeout, pin=pin, cgroup=cgroup)
        if rc != 0:
            raise AssertionError(f"gpuscope {' '.join(cmd)} exited {rc}\n{out}\n{err}")
        return out, err

    def report(self, ref):
        rc, out, err = self.gs("report", ref, "--json")
        if rc != 0:
            raise AssertionError(f"gpuscope report {ref} --json exited {rc}\n{err}")
        return json.loads(out)

    def close(self):
        if os.environ.get("GS_KEEP"):
            print(f"  (kept {self.dir})")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def throughput(stdout):
    """The workload's own last line: `throughput SAMPLES_PER_S`."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("throughput "):
            return float(line.split()[1])
    return None


class IdleCores:
    """How many of the machine's CPUs were idle over a stretch of wall time, on average: /proc/stat's
    idle and iowait time, read by the test itself around a run (not by the code under test).
    `with IdleCores() as c: ...` then c.cores (None where /proc/stat cannot be read)."""

    @staticmethod
    def _idle_s():
        try:
            with open("/proc/stat") as f:
                fields = f.readline().split()
            return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def __enter__(self):
        import time
        self.t0, self.i0, self.cores = time.monotonic(), self._idle_s(), None
        return self

    def __exit__(self, *exc):
        import time
        i1, wall = self._idle_s(), time.monotonic() - self.t0
        if self.i0 is not None and i1 is not None and wall > 0:
            self.cores = max(0.0, (i1 - self.i0) / wall)
        return False


# A core is free for a loader worker when at least this much CPU sat idle through the run, on
# average; none is when less than NO_CORE did (tests/load.sh's burners leave ~0). The doctor advises
# loader_workers where there is room (docs/diagnosis.md); a case that expects it on a free core expects
# it only at FREE_CORE or more, forbids it below NO_CORE, and takes either in between.
FREE_CORE = 0.75
NO_CORE = 0.25


def log(*a):
    print(*a, flush=True)
    sys.stdout.flush()


def skipped(what, reason):
    """Says that test `what` cannot run here and returns its exit code: 77 (a ctest skip), or 1 under
    make check (GS_CHECK_STRICT=1), which has installed everything these tests need."""
    if STRICT:
        log(f"{what}: FAIL: skipped under make check (GS_CHECK_STRICT=1), where it must run: {reason}")
        return 1
    log(f"{what}: skipped ({reason})")
    return SKIP
