"""`gpuscope run` end to end with the real binary: exit statuses as a shell gives them, the
environment the job sees, bad input, orphans, concurrent runs, a killed agent, signal forwarding."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from gstest import BIN, Sandbox, check, run_tests, wait_file, wait_until


def test_run_exits_with_child_status():
    sb = Sandbox()
    rc, out, err = sb.gs("run", "--", "sh", "-c", "exit 3")
    check(rc == 3, f"rc {rc}: {err}")
    runs = sb.json("runs", "--json")
    check(runs[0]["status"] == "failed" and runs[0]["exit_code"] == 3, str(runs))
    sb.close()


def test_run_killed_child_gives_128_plus_signal():
    sb = Sandbox()
    rc, _, err = sb.gs("run", "--", "sh", "-c", "kill -9 $$")
    check(rc == 137, f"rc {rc}: {err}")
    check(sb.json("runs", "--json")[0]["status"] == "killed")
    sb.close()


def test_run_not_found_127_not_executable_126():
    sb = Sandbox()
    rc, _, err = sb.gs("run", "--", "no-such-command-xyz")
    check(rc == 127 and "command not found" in err, f"rc {rc}: {err}")
    script = os.path.join(sb.dir, "noexec.sh")
    open(script, "w").write("#!/bin/sh\necho hi\n")
    os.chmod(script, 0o644)
    rc, _, err = sb.gs("run", "--", script)
    check(rc == 126, f"rc {rc}: {err}")
    sb.close()


def test_run_sets_run_id_and_socket_env():
    sb = Sandbox()
    out = sb.ok("run", "--quiet", "--", "sh", "-c", 'echo "id=$GPUSCOPE_RUN_ID"')
    run_id = sb.json("runs", "--json")[0]["id"]
    check(f"id={run_id}" in out, out)
    sb.close()


def test_run_double_dash_is_optional():
    sb = Sandbox()
    out = sb.ok("run", "--quiet", "echo", "hello")
    check("hello" in out, out)
    sb.close()


def test_run_rejects_bad_input_with_one_line():
    sb = Sandbox()
    cases = [
        (["run"], "no command"),
        (["run", "--"], "no command"),
        (["run", "--bogus", "--", "true"], "unknown option"),
        (["run", "--interval", "abc", "--", "true"], "not a duration"),
        (["run", "--interval", "5ms", "--", "true"], "10ms"),
        (["run", "--interval", "-1s", "--", "true"], "not a duration"),
        (["run", "--flush", "50ms", "--", "true"], "100ms..60s"),
        (["run", "--flush", "2m", "--", "true"], "100ms..60s"),
        (["run", "--flush", "soon", "--", "true"], "not a duration"),
        (["run", "--tag", "novalue", "--", "true"], "KEY=VALUE"),
        (["run", "--interval"], "needs a value"),
        (["frobnicate"], "unknown command"),
    ]
    for args, words in cases:
        rc, out, err = sb.gs(*args)
        check(rc == 2, f"{args}: rc {rc}")
        lines = err.strip().splitlines()
        check(len(lines) == 1 and words in lines[0], f"{args}: {err!r}")
    check(not os.path.exists(sb.db) or sb.json("runs", "--json") == [], "a rejected run left a run behind")
    sb.close()


def test_run_unwritable_store_is_a_clear_error():
    sb = Sandbox()
    marker = os.path.join(sb.dir, "ran")
    rc, _, err = sb.gs("run", "--store", "sqlite:///dev/null/x.db", "--", "touch", marker)
    check(rc == 3 and "store" in err and len(err.strip().splitlines()) == 1, f"rc {rc}: {err!r}")
    check(not os.path.exists(marker), "the job ran although its run could not be kept")
    sb.close()


def test_run_corrupt_store_is_never_overwritten():
    sb = Sandbox()
    junk = b"this is not a database\x00\x01" * 100
    open(sb.db, "wb").write(junk)
    rc, _, err = sb.gs("run", "--", "true")
    check(rc == 3 and "not a gpuscope store" in err, f"rc {rc}: {err!r}")
    for cmd in (["runs"], ["show", "last"], ["metrics", "last"]):
        rc, _, err = sb.gs(*cmd)
        check(rc == 3 and len(err.strip().splitlines()) == 1, f"{cmd}: rc {rc} {err!r}")
    check(open(sb.db, "rb").read() == junk, "the corrupt file was modified")
    sb.close()


def test_run_command_that_exits_at_once_is_kept():
    sb = Sandbox()
    sb.ok("run", "--name", "quick", "--", "true")
    runs = sb.json("runs", "--json")
    check(runs[0]["name"] == "quick" and runs[0]["status"] == "finished", str(runs))
    metrics = sb.json("metrics", "quick", "--json")
    check(any(m["name"] == "host.mem.used_bytes" and m["count"] >= 1 for m in metrics), str(metrics)[:500])
    sb.close()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not alive
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def test_run_orphans_stay_in_tree_and_are_counted():
    sb = Sandbox()
    pidfile, go = os.path.join(sb.dir, "pid"), os.path.join(sb.dir, "go")
    # the shell leaves once the store shows the agent saw the orphan start (not after a fixed 1.2 s)
    p = subprocess.Popen([BIN, "run", "--", "sh", "-c", f"sleep 60 >/dev/null 2>&1 & echo $! > {pidfile}; "
                          f"while [ ! -e {go} ]; do sleep 0.05; done; exit 0"], env=sb.env,
                         stderr=subprocess.PIPE, text=True)
    pid = int(wait_file(pidfile, "the job did not start", proc=p))

    def seen():
        rc, out, _ = sb.gs("show", "last", "--events", "--json")
        return rc == 0 and any(e["kind"] in ("proc_start", "proc_exec") and int(e["value"]) == pid
                               for e in json.loads(out))
    try:
        wait_until(seen, "the agent never recorded the orphan", proc=p, every=0.1)
    finally:
        open(go, "w").close()
    err = p.communicate(timeout=60)[1]
    check(p.returncode == 0, err)
    check(alive(pid), "the orphan should still run: gpuscope does not wait without --wait-tree")
    check("1 process of the job still running" in err, err)
    # the orphan was watched while the run lasted
    events = sb.json("show", "last", "--events", "--json")
    check(any(e["kind"] in ("proc_start", "proc_exec") and e["name"] == "sleep" and int(e["value"]) == pid
              for e in events), str(events))
    check(not any(e["kind"] == "proc_exit" and int(e["value"]) == pid for e in events), "orphan marked as exited")
    os.kill(pid, signal.SIGKILL)
    sb.close()


def test_run_wait_tree_waits_for_orphans():
    sb = Sandbox()
    pidfile = os.path.join(sb.dir, "pid")
    rc, _, err = sb.gs("run", "--wait-tree", "--", "sh", "-c", f"sleep 2 & echo $! > {pidfile}; exit 0")
    check(rc == 0, err)
    pid = int(open(pidfile).read())
    check(not alive(pid), "gpuscope returned before the orphan ended")
    events = sb.json("show", "last", "--events", "--json")
    check(any(e["kind"] == "proc_exit" and int(e["value"]) == pid for e in events), str(events))
    sb.close()


def test_two_runs_at_once_on_one_store_are_both_kept():
    sb = Sandbox()
    stop = os.path.join(sb.dir, "stop")
    # both write at once until each has committed 20 samples (a count, not 2.5 s of wall time)
    procs = [subprocess.Popen([BIN, "run", "--quiet", "--name", f"r{i}", "--", "sh", "-c",
                               f"while [ ! -e {stop} ]; do sleep 0.05; done"], env=sb.env) for i in range(2)]
    try:
        for i, p in enumerate(procs):
            wait_until(lambda: committed(sb, f"r{i}") >= 20, f"r{i}: 20 samples committed", proc=p, every=0.1)
    finally:
        open(stop, "w").close()
    for p in procs:
        check(p.wait(timeout=60) == 0)
    runs = sb.json("runs", "--json")
    check(sorted(r["name"] for r in runs) == ["r0", "r1"], str(runs))
    for r in runs:
        check(r["status"] == "finished", str(r))
        rows = sb.csv("show", r["id"], "--metric", "host.mem.used_bytes", "--csv")
        check(len(rows) >= 20, f"{r['name']}: only {len(rows)} samples")
        ts = [float(x["t_s"]) for x in rows]
        check(ts == sorted(ts) and len(set(ts)) == len(ts), "samples repeated or out of order")
    sb.close()


def test_signal_to_gpuscope_is_forwarded():
    sb = Sandbox()
    ready = os.path.join(sb.dir, "ready")
    # the shell says when its trap is set: the signal is sent once there is a trap to run
    p = subprocess.Popen([BIN, "run", "--", "sh", "-c", f'trap "exit 42" TERM; echo ok > {ready}; '
                          'while :; do sleep 0.1; done'], env=sb.env, stderr=subprocess.PIPE, text=True)
    wait_file(ready, "the job did not set its trap", proc=p)
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    check(rc == 42, f"rc {rc}: {p.stderr.read()}")
    sb.close()


def committed(sb, name, metric="host.mem.used_bytes"):
    """Samples of the run's series the store holds now (what the agent has committed), 0 before."""
    rc, out, _ = sb.gs("show", name, "--metric", metric, "--csv")
    return max(0, len(out.strip().splitlines()) - 1) if rc == 0 else 0


def wait_committed(sb, name, more_than, deadline_s=60):
    """Polls the store until the run holds more than `more_than` samples; returns the count."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        n = committed(sb, name)
        if n > more_than:
            return n
        time.sleep(0.05)
    raise AssertionError(f"{name}: no more than {more_than} samples committed in {deadline_s} s")


# The two tests below kill the agent once the store shows what it committed, and compare counts — what
# the agent wrote — rather than what a wall-clock sleep should have let it write on a loaded machine.
def test_killed_agent_keeps_data_and_shows_crashed():
    sb = Sandbox()
    p = subprocess.Popen([BIN, "run", "--quiet", "--name", "doomed", "--", "sleep", "30"], env=sb.env,
                         start_new_session=True)
    seen = wait_committed(sb, "doomed", 0)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    runs = sb.json("runs", "--json")
    check(runs[0]["name"] == "doomed" and runs[0]["status"] == "crashed", str(runs))
    n = committed(sb, "doomed")
    check(n >= seen, f"{n} samples survived, {seen} were committed before the kill")
    sb.close()


def test_killed_agent_loses_at_most_one_flush_period():
    # --flush 2s: the store grows a commit at a time. Killed right after the second commit shows, the
    # run keeps both commits and at most one more (the one that may land before the kill), never the
    # ticks taken after the last commit.
    sb = Sandbox()
    p = subprocess.Popen([BIN, "run", "--quiet", "--flush", "2s", "--name", "doomed2", "--", "sleep", "30"],
                         env=sb.env, start_new_session=True)
    first = wait_committed(sb, "doomed2", 0)
    second = wait_committed(sb, "doomed2", first)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    n = committed(sb, "doomed2")
    step = second - first  # one commit's samples, as the agent wrote them
    check(step >= 2, f"commits of {first} then {step} samples: the writer commits per tick, not per 2 s")
    check(second <= n <= second + step + 2, f"{n} samples survived; commits of {first} and {step} were seen")
    sb.close()


def test_slow_interval_keeps_every_sample_at_exit():
    # at 1 s the writer commits every 10 s; a 3 s job's samples all arrive with the final flush
    sb = Sandbox()
    sb.ok("run", "--quiet", "--interval", "1s", "--", "sleep", "3")
    rows = sb.csv("show", "last", "--metric", "host.load1", "--csv")
    # Every tick the agent took up to the end of the run it recorded, one second apart, and at most
    # the final sample taken when the job exited: none left behind in the writer.
    dur = sb.json("runs", "--json")[0]["duration_s"]
    ts = [float(r["t_s"]) for r in rows]
    ticks = [t for t in ts if abs((t - ts[0]) - round(t - ts[0])) < 2e-6]  # exact: scheduled ticks
    final = [t for t in ts if t not in ticks]
    check(len(ticks) >= 3 and [round(t - ts[0]) for t in ticks] == list(range(len(ticks))) and len(final) <= 1
          and ticks[-1] >= dur - 1.05 and ts[-1] <= dur + 0.05, f"{len(rows)} samples at {ts} of a {dur} s run")
    sb.close()


def test_interval_sets_sample_spacing():
    sb = Sandbox()
    sb.ok("run", "--quiet", "--interval", "50ms", "--", "sleep", "1")
    rows = sb.csv("show", "last", "--metric", "host.load1", "--csv")
    ts = [float(r["t_s"]) for r in rows]
    gaps = [round(b - a, 6) for a, b in zip(ts, ts[1:])]
    # Samples carry their scheduled tick: every gap is a whole number of 50 ms ticks (a loaded machine
    # may skip a tick, never shift one) but the last, to the final sample taken when the job exited
    # (any time after the last tick, skipped ticks before it included); the ticks cover the 1 s job.
    # How many ticks come on time is the machine's speed, not this test's business.
    on_grid = lambda g: g > 0 and abs(g / 0.05 - round(g / 0.05)) < 1e-4  # noqa: E731
    whole = all(on_grid(g) for g in gaps[:-1]) and gaps[-1] > 0
    odd = any(round(g / 0.05) % 2 == 1 for g in gaps[:-1])  # the grid is 50 ms, not 100 ms
    check(whole and ts[-1] - ts[0] >= 0.9 and odd, f"{len(ts)} samples, gaps {gaps}")
    sb.close()


def test_a_suspended_agent_skips_ticks_on_its_grid():
    # The agent stopped for 0.15 s (SIGSTOP, as a debugger or a starved CPU does) falls three ticks
    # behind: it skips them and goes on at the next tick of the same 50 ms grid. It used to start a
    # new grid from the moment it woke (0.132 s, then 50 ms steps off the old ticks, under load).
    sb = Sandbox()
    ready = os.path.join(sb.dir, "ready")
    p = subprocess.Popen([BIN, "run", "--quiet", "--interval", "50ms", "--", "sh", "-c", f"echo ok > {ready}; sleep 1.5"],
                         env=sb.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_file(ready, proc=p)
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.15)  # the fault's length, not a wait for a state
    os.kill(p.pid, signal.SIGCONT)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 0, err)
    ts = [float(r["t_s"]) for r in sb.csv("show", "last", "--metric", "host.load1", "--csv")]
    gaps = [round(b - a, 6) for a, b in zip(ts, ts[1:])]
    ticks = [round((t - ts[0]) / 0.05, 4) for t in ts[:-1]]
    check(all(t == int(t) for t in ticks) and max(gaps[:-1]) >= 0.15, f"{len(ts)} samples, gaps {gaps}")
    sb.close()


def test_tags_become_params():
    sb = Sandbox()
    sb.ok("run", "--quiet", "--tag", "team=vision", "--tag", "exp=7", "--", "true")
    params = sb.json("show", "last", "--params", "--json")
    check(params.get("tag.team") == "vision" and params.get("tag.exp") == "7", str(params))
    sb.close()


def test_live_line_only_on_a_tty():
    import pty
    sb = Sandbox()
    # not a TTY: stderr holds the summary only
    rc, _, err = sb.gs("run", "--", "sleep", "1.5")
    check(rc == 0 and "[gpuscope]" not in err, err)
    # a TTY: the live line (elapsed, CPU, memory) is drawn and cleared
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(BIN, [BIN, "run", "--", "sleep", "2.5"], sb.env)
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    _, status = os.waitpid(pid, 0)
    text = buf.decode(errors="replace")
    check(os.WEXITSTATUS(status) == 0, text)
    check("[gpuscope]" in text and "CPU" in text and "mem" in text, text)
    sb.close()


if __name__ == "__main__":
    run_tests(globals())
