"""What a hostile or unlucky run does to gpuscope (issue 11, items 5 and 6): a flood of steps leaves
the agent's memory bounded and the run says how many steps it did not keep; socket directories of
killed agents are cleaned at the next start; an over-long name or tag is refused with its real reason;
the job's client reports what it dropped and the report warns; a hung GPU call is a note and no
"healthy" verdict; a client channel that cannot open is a note; a descriptor limit gives a clear
error with README's exit code, never a hang."""
import glob
import os
import resource
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")
SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")

# A job that sends steps as fast as it can for SECONDS, 60 to a datagram, blocking when the socket is
# full (the agent must keep up or the job waits: the worst case for the agent's memory).
FLOOD = r'''
import os, socket, sys, time
secs = float(sys.argv[1])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
path = os.environ["GPUSCOPE_SOCKET"]
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    lines = [f"gs1 step {i} data=0.001 compute=0.002 samples=8" for i in range(n, n + 60)]
    n += 60
    s.sendto("\n".join(lines).encode(), path)
print(n)
'''


def params(sb, ref="last"):
    return sb.json("show", ref, "--params", "--json")


def test_step_flood_keeps_memory_bounded_and_says_what_it_kept():
    sb = Sandbox()
    job = os.path.join(sb.dir, "flood.py")
    open(job, "w").write(FLOOD)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = subprocess.run([BIN, "run", "--name", "flood", "--", PYTHON, job, "3"], env=sb.env, capture_output=True,
                       text=True, timeout=120)
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    check(p.returncode == 0, p.stderr)
    sent = int(p.stdout.split()[-1])
    prm = params(sb, "flood")
    over = int(prm.get("ingest.steps_over_cap", "0"))
    steps = sb.json("metrics", "flood", "--json")
    kept = next(m["count"] for m in steps if m["name"] == "step.n" and m["labels"] == "")
    dur = sb.json("runs", "--json")[0]["duration_s"]
    print(f"     flood: {sent} steps sent, {kept} kept, {over} over the cap, {dur:.1f} s, peak RSS {rss_kib} KiB")
    check(kept <= 1000 * (dur + 1), f"{kept} steps kept in {dur:.1f} s: over the cap of 1000 a second")
    check(over > 0 and kept + over <= sent, f"over the cap {over}, kept {kept}, sent {sent}")
    check("steps not stored" in p.stderr, f"the summary must say so: {p.stderr}")
    check(any("steps not stored" in n for n in sb.ok("show", "flood", "--notes").splitlines()), "note")
    # the biggest child was the agent or the flooding job; 200 MiB is ten times what either needs
    check(before < 200 * 1024 and rss_kib < 200 * 1024, f"peak RSS {rss_kib} KiB")
    sb.close()


METRIC_FLOOD = FLOOD.replace('f"gs1 step {i} data=0.001 compute=0.002 samples=8"', 'f"gs1 metric loss {i}"')


def test_metric_flood_is_capped_too():
    sb = Sandbox()
    job = os.path.join(sb.dir, "mflood.py")
    open(job, "w").write(METRIC_FLOOD)
    p = subprocess.run([BIN, "run", "--name", "mflood", "--", PYTHON, job, "2"], env=sb.env, capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, p.stderr)
    sent = int(p.stdout.split()[-1])
    over = int(params(sb, "mflood").get("ingest.metrics_over_cap", "0"))
    kept = next(m["count"] for m in sb.json("metrics", "mflood", "--json") if m["name"] == "loss")
    dur = sb.json("runs", "--json")[0]["duration_s"]
    print(f"     metric flood: {sent} values sent, {kept} kept, {over} over the cap, {dur:.1f} s")
    check(kept <= 1000 * (dur + 1) and over > 0 and kept + over == sent, f"kept {kept}, over {over}, sent {sent}")
    check("metric values not stored" in p.stderr, p.stderr)
    sb.close()


def test_socket_dirs_of_killed_agents_are_cleaned_at_the_next_start():
    sb = Sandbox()
    tmp = os.path.join(sb.dir, "tmp")
    os.mkdir(tmp)
    env = {"TMPDIR": tmp}
    e = dict(sb.env, **env)
    for i in range(3):
        p = subprocess.Popen([BIN, "run", "--quiet", "--", "sleep", "30"], env=e, start_new_session=True)
        deadline = time.time() + 20
        while len(glob.glob(os.path.join(tmp, "gpuscope-*", "sock"))) <= i and time.time() < deadline:
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    # each start removed the directory the agent killed before it left: one is left, not three
    check(len(glob.glob(os.path.join(tmp, "gpuscope-*"))) == 1, f"stale dirs: {os.listdir(tmp)}")
    # a live agent's directory must survive the next start's cleaning
    live = subprocess.Popen([BIN, "run", "--quiet", "--", "sleep", "4"], env=e)
    time.sleep(1.0)
    sb.ok("run", "--quiet", "--", "true", env=env)
    left = glob.glob(os.path.join(tmp, "gpuscope-*"))
    check(len(left) == 1, f"the killed agent's directory should be gone, the live one kept: {left}")
    check(live.wait(timeout=60) == 0, "the live run was disturbed")
    check(not glob.glob(os.path.join(tmp, "gpuscope-*")), "the live run's directory is removed at its end")
    runs = sb.json("runs", "--json")
    check(sum(r["status"] == "crashed" for r in runs) == 3, str([r["status"] for r in runs]))
    sb.close()


def test_long_name_and_long_tag_are_refused_with_the_reason():
    sb = Sandbox()
    rc, _, err = sb.gs("run", "--name", "n" * 10240, "--", "true")
    check(rc == 2 and "--name" in err and "127" in err and len(err.strip().splitlines()) == 1, f"{rc} {err!r}")
    rc, _, err = sb.gs("run", "--tag", "k=" + "v" * 1100, "--", "true")
    check(rc == 2 and "too many tags" not in err and "1023" in err, f"{rc} {err!r}")
    rc, _, err = sb.gs("run", *sum((["--tag", f"k{i}=" + "v" * 100] for i in range(12)), []), "--", "true")
    check(rc == 2 and "too many tags" in err, f"{rc} {err!r}")
    sb.ok("run", "--quiet", "--name", "n" * 127, "--", "true")
    check(sb.json("runs", "--json")[0]["name"] == "n" * 127, "a 127-byte name is kept whole")
    sb.close()


# A job using the Python client that stops the agent, so the socket fills and the client drops, then
# lets it go on; it prints how many messages the client says it dropped.
DROPPER = r'''
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
import gpuscope
agent = os.getppid()
for i in range(5):
    gpuscope.watch  # imported
os.kill(agent, signal.SIGSTOP)
try:
    for i in range(20000):
        gpuscope.log("x", i)
        if i % 100 == 0:
            gpuscope.flush()
finally:
    os.kill(agent, signal.SIGCONT)
time.sleep(0.3)
gpuscope.flush()  # nothing pending: the drops are reported all the same
print(gpuscope.dropped())
'''


def test_python_client_reports_its_drops_and_the_report_warns():
    sb = Sandbox()
    job = os.path.join(sb.dir, "dropper.py")
    open(job, "w").write(DROPPER)
    rc, out, err = sb.gs("run", "--name", "drops", "--", PYTHON, job, CLIENT)
    check(rc == 0, err)
    dropped = int(out.split()[-1])
    check(dropped > 0, "the test did not make the client drop")
    prm = params(sb, "drops")
    check(prm.get("ingest.client_dropped") == str(dropped), f"agent: {prm.get('ingest.client_dropped')}, "
                                                              f"client: {dropped}")
    check("dropped by the job's client" in err, err)
    print(f"     the client dropped {dropped} messages while the agent was stopped; the agent was told {dropped}")
    text = sb.ok("report", "drops", "--no-color")
    check("dropped" in text and str(dropped) in text, f"the report must warn:\n{text}")
    sb.close()


def test_hung_gpu_call_is_a_note_and_not_healthy():
    check(os.path.exists(SIM), f"{SIM} is not built")
    sb = Sandbox()
    env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": os.path.join(SCN, "hang.scn")}
    rc, out, err = sb.gs("run", "--name", "hung", "--", "sleep", "8", env=env, timeout=60)
    check(rc == 0, err)
    notes = sb.ok("show", "hung", "--notes")
    check("no GPU data after" in notes, f"notes:\n{notes}")
    print("     " + next(n for n in notes.splitlines() if "no GPU data after" in n))
    check("nvml.data_stopped_at_s" in params(sb, "hung"), "param")
    check("no GPU data" in err, f"stderr: {err}")
    text = sb.ok("report", "hung", "--no-color")
    check("Healthy" not in text.split("notes")[0] or "GPU data stopped" in text,
          f"a run whose GPU data stopped must not read as healthy:\n{text}")
    sb.close()


def test_client_channel_that_cannot_open_is_a_note():
    sb = Sandbox()
    rc, _, err = sb.gs("run", "--quiet", "--name", "nosock", "--", "true", env={"TMPDIR": "/nonexistent/dir"})
    check(rc == 0, err)
    check("client channel off" in err, err)
    check("client channel off" in sb.ok("show", "nosock", "--notes"), "note")
    sb.close()


def nofile(n):
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return pre


def test_descriptor_limits_give_a_clear_error_and_readme_exit_codes():
    # At every limit from 4 to 24 descriptors: it runs, or it says why in one line and exits 3 when
    # the store cannot be opened or written, 1 otherwise; never a hang.
    sb = Sandbox()
    sb.ok("run", "--quiet", "--", "true")  # the store exists
    seen = {}
    for n in range(4, 25):
        try:
            p = subprocess.run([BIN, "run", "--quiet", "--", "true"], env=sb.env, preexec_fn=nofile(n),
                               capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"with {n} descriptors gpuscope hung")
        lines = p.stderr.strip().splitlines()
        seen[n] = p.returncode
        check(p.returncode in (0, 1, 3), f"{n} descriptors: exit {p.returncode}: {p.stderr}")
        if p.returncode:
            check(lines and lines[-1].startswith("gpuscope: "), f"{n}: {p.stderr!r}")
        if p.returncode == 3:  # README: 3 is for a store that cannot be opened, created or written
            check("store" in lines[-1], f"{n} descriptors: exit 3 for a failure that is not the store's: {p.stderr!r}")
        if p.returncode == 1:
            check("store" not in lines[-1], f"{n} descriptors: exit 1 for the store: {p.stderr!r}")
    print(f"     exit code by descriptor limit: {seen}")
    check(seen[24] == 0, "24 descriptors are enough")
    runs = sb.json("runs", "--json")
    check(not any(r["status"] == "running" for r in runs), "a run that could not start was left running")
    sb.close()


if __name__ == "__main__":
    run_tests(globals())
