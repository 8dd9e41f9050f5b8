"""bench/benchlib: what the gpuscope benchmarks share (Python stdlib only, run by /usr/bin/python3).

- Finding the programs: the gpuscope binary and the bench helpers live in a CMake build folder
  (--build, else $GS_BUILD_DIR, else build/).
- Measuring an agent's cost as CPU-seconds, never wall time: each measured process is started
  inside its own cgroup (cgroup v1 cpuacct, else a cgroup v2 child), so its threads, the ones that
  exited and its children (a scraper's curl) are all counted, at nanosecond or microsecond
  resolution. Without a writable cgroup the meter falls back to /proc/PID/stat of the process and
  its live descendants (10 ms ticks; said in the output).
- Peak RSS from /proc/PID/status (VmHWM) just before a process is stopped.
- Peers come from Debian packages: ensure_packages() installs what is missing when root, or prints
  the exact apt-get line and returns what is still missing.
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def build_dir(arg=None):
    d = arg or os.environ.get("GS_BUILD_DIR") or os.path.join(REPO, "build")
    return os.path.abspath(d)


def program(build, rel):
    """Absolute path of a built program, or exits with a hint."""
    p = os.path.join(build, rel)
    if not os.access(p, os.X_OK):
        sys.exit(f"bench: {p} is missing: build first (cmake -S . -B {build} && cmake --build {build})")
    return p


def machine_facts():
    """One line: cores, CPU model, virtualisation, kernel."""
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    virt = "?"
    if shutil.which("systemd-detect-virt"):
        r = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True)
        virt = r.stdout.strip() or "none"
    hv = " (hypervisor flag)" if " hypervisor" in open("/proc/cpuinfo").read() else ""
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) // 1024
    return (f"{os.cpu_count()} CPUs ({model}){hv}, virt={virt}, {mem} MiB RAM, "
            f"kernel {os.uname().release}, load {os.getloadavg()[0]:.2f}")


# ---- measuring CPU ----


def _cgroup_mounts():
    v1 = v2 = None
    for line in open("/proc/self/mounts"):
        f = line.split()
        if f[2] == "cgroup2" and not v2:
            v2 = f[1]
        elif f[2] == "cgroup" and "cpuacct" in f[3].split(",") and not v1:
            v1 = f[1]
    return v1, v2


class Meter:
    """The CPU time of one process tree, started through Meter.popen()."""

    _base = None  # (kind, path) shared by all meters of this bench process
    _made = []

    def __init__(self, name):
        self.name = name
        self.cg = None
        self.proc = None
        self.kind = "ticks"
        base = Meter._root()
        if base:
            kind, root = base
            d = os.path.join(root, name)
            try:
                os.makedirs(d, exist_ok=True)
                self.cg, self.kind = d, kind
                Meter._made.append(d)
            except OSError:
                pass

    @classmethod
    def _root(cls):
        if cls._base is not None:
            return cls._base or None
        cls._base = False
        if os.environ.get("GS_BENCH_NO_CGROUP"):
            return None
        v1, v2 = _cgroup_mounts()
        tag = f"gsbench.{os.getpid()}"
        for kind, mnt in (("cpuacct", v1), ("cgroup2", v2)):
            if not mnt:
                continue
            d = os.path.join(mnt, tag)
            try:
                os.makedirs(d, exist_ok=True)
            except OSError:
                continue
            if os.access(os.path.join(d, "cgroup.procs"), os.W_OK):
                cls._base = (kind, d)
                cls._made.append(d)
                return cls._base
            try:
                os.rmdir(d)
            except OSError:
                pass
        return None

    def _join(self):  # runs in the child between fork and exec; a failure shows in popen()
        if self.cg:
            try:
                with open(os.path.join(self.cg, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass

    launcher = None  # bench/rusage_run, set by use_launcher()
    _seq = 0

    @classmethod
    def use_launcher(cls, build):
        p = os.path.join(build, "bench/rusage_run")
        cls.launcher = p if os.access(p, os.X_OK) else None

    def popen(self, argv, **kw):
        """Starts argv in this meter's cgroup, through rusage_run when available (then self.pid is
        the command's pid and self.proc the launcher's)."""
        self.ru_file = None
        if Meter.launcher:
            Meter._seq += 1
            self.ru_file = os.path.join(tempfile.gettempdir(), f"gsbench-ru.{os.getpid()}.{Meter._seq}")
            argv = [Meter.launcher, self.ru_file] + list(argv)
        self.proc = subprocess.Popen(argv, preexec_fn=self._join, **kw)
        self.pid = self.proc.pid
        if Meter.launcher:
            self.pid = wait_child(self.proc.pid, 10) or self.proc.pid
        if self.cg:
            try:
                pids = open(os.path.join(self.cg, "cgroup.procs")).read().split()
            except OSError:
                pids = []
            if str(self.proc.pid) not in pids and self.proc.poll() is None:
                self.cg, self.kind = None, "ticks"  # could not move it: fall back
        return self.proc

    def cpu_s(self):
        """CPU seconds used so far by the tree (user + system)."""
        if self.cg and self.kind == "cpuacct":
            return int(open(os.path.join(self.cg, "cpuacct.usage")).read()) / 1e9
        if self.cg:
            for line in open(os.path.join(self.cg, "cpu.stat")):
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
        return tree_ticks(self.proc.pid) / TICK if self.proc else 0.0

    def hwm_kib(self):
        return vm_kib(self.pid, "VmHWM")

    def wait(self, timeout=None):
        """Waits for the command; returns (exit status, whole-life CPU-s or None, peak RSS KiB or
        None). The last two are exact when started through rusage_run."""
        rc = self.proc.wait(timeout)
        cpu = rss = None
        if self.ru_file and os.path.exists(self.ru_file):
            kv = dict(x.split("=") for x in open(self.ru_file).read().split())
            os.unlink(self.ru_file)
            cpu, rss, rc = float(kv["cpu_s"]), int(kv["maxrss_kib"]), int(kv["status"])
        return rc, cpu, rss

    @classmethod
    def cleanup(cls):
        for d in reversed(cls._made):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        cls._made = []


def vm_kib(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def task_cpu_ns(pid):
    """CPU time of pid's live threads in ns (schedstat), 0 when gone."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return total


def children(pid):
    """Direct children of pid (all threads)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                out += [int(x) for x in open(f"/proc/{pid}/task/{tid}/children").read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def descendants(pid):
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children(p)
    return seen


def _stat_ticks(pid, with_children):
    try:
        s = open(f"/proc/{pid}/stat").read()
        f = s[s.rindex(")") + 2:].split()
        t = int(f[11]) + int(f[12])  # utime stime
        if with_children:
            t += int(f[13]) + int(f[14])  # cutime cstime (waited-for children)
        return t
    except (OSError, ValueError, IndexError):
        return 0


def tree_ticks(pid):
    return sum(_stat_ticks(p, True) for p in descendants(pid))


def wait_child(pid, timeout=10.0):
    """The first child pid of pid (gpuscope's job), waiting up to timeout seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        c = children(pid)
        if c:
            return c[0]
        time.sleep(0.02)
    return None


def stop(proc, sig=signal.SIGTERM, timeout=15):
    """Stops a Popen (and its process group when it leads one); returns its exit status."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    try:
        proc.send_signal(sig)
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


# ---- peers from Debian ----


def ensure_packages(pkgs, binaries):
    """Installs the Debian packages whose binary is missing. Returns the list still missing."""
    missing = [p for p, b in zip(pkgs, binaries) if not (shutil.which(b) or os.path.exists(b))]
    if not missing:
        return []
    line = "apt-get install -y --no-install-recommends " + " ".join(missing)
    if os.geteuid() != 0:
        print(f"bench: not root; to measure the peers run: sudo {line}", flush=True)
        return missing
    print(f"bench: installing peers: {line}", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(line.split(), env=env, capture_output=True, text=True)
    if r.returncode:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        r = subprocess.run(line.split(), env=env, capture_output=True, text=True)
    if r.returncode:
        print(f"bench: apt-get failed:\n{r.stderr[-2000:]}", flush=True)
    return [p for p, b in zip(pkgs, binaries) if not (shutil.which(b) or os.path.exists(b))]


def median_spread(xs):
    """(median, min, max) of a non-empty list."""
    return statistics.median(xs), min(xs), max(xs)


def per_hour(cpu_s, wall_s):
    return cpu_s * 3600.0 / wall_s if wall_s > 0 else float("nan")
