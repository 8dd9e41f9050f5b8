"""Real cgroup v1 limits (issue 36), on a v1 or hybrid host such as the ones gpuscope is built on: a
real PyTorch job in a 0.5-core CPU quota is found input-bound with the quota named and no advice for
more loader workers than it allows; a real job over a 700 MiB memory limit ends OOM-killed, said in
the summary, the report, the run's params (so `runs --where` finds it) and the `exit` alert.

Each test makes its cgroups only as children of this process's own cgroup for that controller (its
line of /proc/self/cgroup, below the hierarchy's mount in /proc/self/mountinfo) and removes them
after, also when it fails: what is still in them is killed first, and the test waits until they are
empty. Needs root and the v1 cpu, cpuacct and memory controllers: else the script is a skip."""
import contextlib
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT_ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}


def v1_dir(ctl):
    """This process's cgroup folder for controller ctl on a v1 hierarchy, or None."""
    path = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctls, p = line.rstrip("\n").split(":", 2)
            if ctl in ctls.split(","):
                path = p
    if path is None:
        return None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, sup = left.split(), right.split()
            if len(sup) < 3 or sup[0] != "cgroup" or ctl not in sup[2].split(","):
                continue
            root, point = fields[3], fields[4]
            if root == "/":
                rel = path
            elif path == root or path.startswith(root + "/"):
                rel = path[len(root):]
            else:
                continue
            return point + ("" if rel in ("", "/") else rel)
    return None


def _empty(d):
    with open(os.path.join(d, "cgroup.procs")) as f:
        return not f.read().split()


def _remove(d):
    with open(os.path.join(d, "cgroup.procs")) as f:
        for pid in f.read().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    wait_until(lambda: _empty(d), f"{d} empty")
    os.rmdir(d)


@contextlib.contextmanager
def child_cgroups(ctls):
    """A child of this process's own cgroup for each controller: {ctl: folder}, removed at the end."""
    made = {}
    try:
        for ctl in ctls:
            base = v1_dir(ctl)
            check(base and os.path.isdir(base), f"no cgroup v1 {ctl} folder for this process ({base})")
            d = os.path.join(base, f"gstest-{os.getpid()}")  # one name: as co-mounted controllers have
            os.mkdir(d)
            made[ctl] = d
        yield made
    finally:
        for d in reversed(list(made.values())):
            _remove(d)


def run_in(sb, dirs, *args, env=None, timeout=300):
    """gpuscope ARGS started inside the cgroups dirs (the agent and so its job)."""
    e = dict(sb.env)
    e.update(env or {})
    # the folders are the script's arguments up to "--", gpuscope's after it
    script = ('n=0; for d in "$@"; do n=$((n+1)); [ "$d" = -- ] && break; echo $$ > "$d/cgroup.procs" || exit 99; '
              'done; shift $n; exec "$GS_BIN" "$@"')
    e["GS_BIN"] = BIN
    p = subprocess.run(["sh", "-c", script, "sh", *dirs, "--", *args], capture_output=True, text=True, env=e,
                       timeout=timeout)
    check(p.returncode != 99, f"could not enter {dirs}: {p.stderr}")
    return p


def test_a_job_in_a_half_core_v1_quota_is_input_bound_with_the_quota_named():
    sb = Sandbox()
    try:
        with child_cgroups(["cpu", "cpuacct"]) as cg:
            with open(os.path.join(cg["cpu"], "cpu.cfs_quota_us"), "w") as f:
                f.write("50000")  # of the 100 ms period: half a core
            p = run_in(sb, [cg["cpu"], cg["cpuacct"]], "run", "--name", "quota", "--", PYTHON,
                       os.path.join(SRC, "examples", "input_bound.py"), "--steps", "12", "--seconds", "300",
                       env=CLIENT_ENV)
        check(p.returncode == 0, p.stderr)
        check("quota 0.5 cores" in p.stderr, f"the summary names the quota: {p.stderr}")
        rep = sb.json("report", "quota", "--json")
        found = {f["rule"]: f for f in rep["findings"]}
        check("input_bound" in found, f"findings: {sorted(found)}")
        fix = found["input_bound"]["fix"]
        check("0.5 cores its cgroup's CPU quota allows" in fix, f"the fix names the quota: {fix}")
        check("loader_workers" not in found,
              f"no advice for more workers than 0.5 cores allow: {json.dumps(found.get('loader_workers'))}")
        lim = sb.csv("show", "quota", "--metric", "host.cgroup.cpu_limit_cores", "--csv")
        check(lim and all(abs(float(r["value"]) - 0.5) < 1e-9 for r in lim), f"cpu_limit_cores: {lim[:3]}")
        used = [float(r["value"]) for r in sb.csv("show", "quota", "--metric", "host.cgroup.cpu_used_pct_of_limit",
                                                   "--csv")]
        # per tick the kernel's periods and the ticks do not line up; over the run the quota's own
        # cgroup stays near 100 % (the whole host's CPU read as the cgroup's would be far over it)
        check(used and sum(used) / len(used) < 125, f"CPU used of the quota: {used}")
    finally:
        sb.close()


def test_a_job_over_a_700_mib_v1_limit_ends_oom_killed():
    sb = Sandbox()
    try:
        with child_cgroups(["memory"]) as cg:
            with open(os.path.join(cg["memory"], "memory.limit_in_bytes"), "w") as f:
                f.write(str(700 << 20))
            swap = os.path.join(cg["memory"], "memory.memsw.limit_in_bytes")
            if os.path.exists(swap):  # swap accounting on: no way out through swap either
                with open(swap, "w") as f:
                    f.write(str(700 << 20))
            p = run_in(sb, [cg["memory"]], "run", "--name", "oom", "--alert", "exit", "--", PYTHON, "-c",
                       "x = [bytearray(50 << 20) for i in range(40)]")
        check(p.returncode == 137, f"exit {p.returncode}: {p.stderr}")
        check("OOM-killed at 700 MiB" in p.stderr, f"the summary says so: {p.stderr}")
        rep = sb.ok("report", "oom")
        check("killed, OOM-killed at 700 MiB (peak" in rep.splitlines()[0], rep.splitlines()[0])
        prm = {r["key"]: r["value"] for r in sb.csv("show", "oom", "--params", "--csv")}
        check(prm.get("exit.oom_killed") == "1" and prm.get("exit.oom_limit_bytes") == str(700 << 20), prm)
        runs = sb.json("runs", "--where", "param.exit.oom_killed = 1", "--json")
        check([r["name"] for r in runs] == ["oom"], runs)
        ev = sb.json("show", "oom", "--events", "--json")
        alerts = [e for e in ev if e.get("kind") == "alert"]
        check(any("killed by the OOM killer at 700 MiB" in json.dumps(e) for e in alerts), f"alert events: {alerts}")
    finally:
        sb.close()


if __name__ == "__main__":
    if os.geteuid() != 0:
        skip_script("needs root to make child cgroups")
    missing = [c for c in ("cpu", "cpuacct", "memory") if not v1_dir(c)]
    if missing:
        skip_script(f"no cgroup v1 {', '.join(missing)} hierarchy here (a v2-only host: the fixture trees of "
                    "test_collect cover v2)")
    run_tests(globals())
