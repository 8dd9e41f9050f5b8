"""cpufirst: fixed CPU for a pair of runs that are compared, on a shared machine.

A speed-up measured as the throughput of one run over another's is the fix's only if both runs got
the same CPU; on a machine other work shares, they do not (one run gets 0.6 cores, the next 1.0).
CpuFirst makes a CPU cgroup whose weight puts its processes before every other task, so a job run in
it gets the CPUs whenever it is runnable. The scenario tests (tests/scenarios/scenlib.py), the
estimates bench (bench/estimates.py) and the case study (examples/case_study/run.py) use this one
copy; it needs only the standard library.

    with CpuFirst() as cg:
        subprocess.run(cmd, preexec_fn=cg.join if cg.path else None)

As a program, `python3 scripts/cpufirst.py CMD ARGS...` runs CMD and everything it starts in such a
cgroup (where none can be made, as it is, saying why on stderr) and exits with CMD's status: ctest
runs the tests that measure the machine this way. With `--procs-env VAR`, CMD itself runs beside the
cgroup, with VAR naming the cgroup's cgroup.procs, and moves into it only the processes it chooses:
the tests that hold the agent's sampling to its tick grid (tests/integration) put only gpuscope
there (gstest.BIN), so a neighbour's CPU cannot make a tick late, and their servers, harness and
readers do not take the CPUs from a test that measures.
"""
import os


class CpuFirst:
    """A CPU cgroup of the caller's own, a child of the cgroup this process is in, whose weight puts its
    processes before every other task on the machine (cgroup v1 cpu.shares 262144, v2 cpu.weight
    10000): a job run in it gets the CPUs whenever it is runnable, however loaded the machine
    (tests/load.sh's burners then only fill what it leaves), so a speed-up it measures is the same on
    a busy machine as on an idle one. Needs root (or a delegated cgroup); `with CpuFirst() as cg:`
    then cg.path (None, with cg.why, where it cannot be made). Removed on exit: only the cgroup this
    made, never another."""

    V1 = "/sys/fs/cgroup/cpu"

    def __enter__(self):
        self.path, self.why, self.procs = None, "", None
        try:
            with open("/proc/self/cgroup") as f:
                lines = [line.rstrip("\n").split(":", 2) for line in f]
        except OSError as e:
            self.why = f"/proc/self/cgroup: {e}"
            return self
        v1 = [p for _, ctl, p in lines if "cpu" in ctl.split(",")]
        v2 = [p for h, ctl, p in lines if h == "0" and ctl == ""]
        name = f"gs-cpufirst-{os.getpid()}"
        if v1 and os.path.isdir(os.path.join(self.V1, v1[0].lstrip("/"))):
            base, knob, value = os.path.join(self.V1, v1[0].lstrip("/")), "cpu.shares", "262144"
        elif v2 and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            base, knob, value = os.path.join("/sys/fs/cgroup", v2[0].lstrip("/")), "cpu.weight", "10000"
        else:
            self.why = "no cpu cgroup controller mounted"
            return self
        path = os.path.join(base, name)
        try:
            os.mkdir(path)
        except OSError as e:
            self.why = f"cannot make {path}: {e.strerror} (needs root or a delegated cgroup)"
            return self
        self.path = path
        try:
            with open(os.path.join(path, knob), "w") as f:
                f.write(value)
        except OSError as e:
            self.why = f"cannot set {knob} of {path}: {e.strerror}"
            self._remove()
        self.procs = os.path.join(path, "cgroup.procs") if self.path else None
        return self

    def join(self):
        """Moves the calling process into the cgroup (a preexec_fn, in the child before exec)."""
        with open(self.procs, "w") as f:
            f.write(str(os.getpid()))

    def _remove(self):
        import time
        for i in range(50):  # the last processes of a run may take a moment to be reaped
            if i == 30:
                self.evict()  # still there after 3 s: what is left goes to the parent cgroup
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        self.path = None

    # The cost: a task of another cgroup that has run waits for this one's vruntime to catch up with
    # its own, up to 256 times as long as it ran: at ctest -j4 a neighbour test's 30 ms sleep came
    # back after 1.17 s. Tests beside a CPU-first one hold no phase to a wall-time band for that.
    # At 16 times (tried) the job waited enough beside tests/load.sh's burners for the doctor's
    # contention guard to call a 40 ms host sync healthy.

    def evict(self):
        """Moves what is left in the cgroup (a daemon the command left behind) to the parent cgroup, so
        that the cgroup can be removed."""
        parent = os.path.join(os.path.dirname(self.path), "cgroup.procs")
        try:
            with open(self.procs) as f:
                pids = f.read().split()
            for pid in pids:
                with open(parent, "w") as f:
                    f.write(pid)
        except OSError:
            pass

    def __exit__(self, *exc):
        if self.path:
            self._remove()
        return False


def main(argv):
    import signal
    import subprocess
    import sys
    procs_env = None
    if argv[:1] == ["--procs-env"] and len(argv) >= 2:
        procs_env, argv = argv[1], argv[2:]
    if not argv:
        print("usage: cpufirst.py [--procs-env VAR] CMD [ARGS...]", file=sys.stderr)
        return 2
    with CpuFirst() as cg:
        if not cg.path:
            print(f"cpufirst: {cg.why}: {argv[0]} shares the CPU", file=sys.stderr)
        env = None
        if procs_env:  # CMD runs beside the cgroup, and moves into it only what it names there
            env = dict(os.environ)
            if cg.path:
                env[procs_env] = cg.procs
        p = subprocess.Popen(argv, preexec_fn=cg.join if cg.path and not procs_env else None, env=env)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda n, _f: p.send_signal(n))
        rc = p.wait()
        if cg.path:
            cg.evict()
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:]))
