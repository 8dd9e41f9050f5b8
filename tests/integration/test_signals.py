"""Signals and `gpuscope run` (issue 11, item 3): a signal gpuscope inherited as ignored (nohup,
`trap '' HUP`) stays ignored for the job and for gpuscope; a signal sent to gpuscope reaches the job's
whole tree, so a job behind `sh -c` leaves nothing running; SIGQUIT, SIGUSR1, SIGUSR2 are passed on
and SIGPIPE is ignored instead of killing gpuscope and orphaning the job."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from gstest import BIN, Sandbox, check, run_tests


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(path, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.05)
    return False


def sig_ignored(status_text, sig):
    """Whether sig is set in the SigIgn mask of a /proc/PID/status text."""
    for line in status_text.splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    raise AssertionError("no SigIgn line")


def ignoring(*sigs):
    def pre():
        for s in sigs:
            signal.signal(s, signal.SIG_IGN)
    return pre


def test_nohup_hangup_stays_ignored_for_the_job():
    sb = Sandbox()
    status = os.path.join(sb.dir, "status")
    # the job copies its own /proc/self/status (cat's, which inherits the job's dispositions)
    rc, out, err = sb.gs("run", "--quiet", "--", "nohup", "sh", "-c", f"cat /proc/self/status > {status}")
    check(rc == 0, f"nohup under gpuscope: rc {rc} {err}")
    p = subprocess.run([BIN, "run", "--quiet", "--", "sh", "-c", f"cat /proc/self/status > {status}"],
                       env=sb.env, preexec_fn=ignoring(signal.SIGHUP), capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, p.stderr)
    check(sig_ignored(open(status).read(), signal.SIGHUP), "SIGHUP was ignored for gpuscope but not for the job")
    # and what was not ignored is not made ignored
    check(not sig_ignored(open(status).read(), signal.SIGTERM), "SIGTERM became ignored")
    sb.close()


def test_hangup_to_an_ignoring_gpuscope_leaves_the_job_running():
    sb = Sandbox()
    ready = os.path.join(sb.dir, "ready")
    p = subprocess.Popen([BIN, "run", "--quiet", "--", "sh", "-c", f"echo $$ > {ready}; sleep 1.5; exit 7"],
                         env=sb.env, preexec_fn=ignoring(signal.SIGHUP), stderr=subprocess.DEVNULL)
    check(wait_for(ready), "the job did not start")
    p.send_signal(signal.SIGHUP)  # what `kill -HUP` or a closing session sends to a nohup'ed gpuscope
    rc = p.wait(timeout=60)
    check(rc == 7, f"rc {rc}: the job should finish by itself")
    sb.close()


def test_term_reaches_the_work_behind_sh_c():
    sb = Sandbox()
    pidfile = os.path.join(sb.dir, "pid")
    # two commands, so the shell forks the sleep instead of exec'ing it
    p = subprocess.Popen([BIN, "run", "--quiet", "--", "sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait; echo x"],
                         env=sb.env, stderr=subprocess.DEVNULL)
    check(wait_for(pidfile), "the job did not start")
    pid = int(open(pidfile).read())
    # no pause: the pid file is written after the fork, and gpuscope lists the tree when it forwards
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=60)
    check(rc == 128 + signal.SIGTERM, f"rc {rc}")
    deadline = time.time() + 5
    while alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    left = alive(pid)
    if left:
        os.kill(pid, signal.SIGKILL)
    check(not left, "the job's real work (sleep behind sh -c) kept running after gpuscope exited")
    sb.close()


def forwarded(sig):
    sb = Sandbox()
    got = os.path.join(sb.dir, "got")
    name = signal.Signals(sig).name[3:]
    errf = open(os.path.join(sb.dir, "err"), "w+")  # not a pipe: an orphaned job would hold it open
    p = subprocess.Popen([BIN, "run", "--quiet", "--", "sh", "-c",
                          f'trap "echo {name} > {got}; exit 42" {name}; echo $$ > {got}.r; '
                          f'while :; do sleep 0.05; done'],
                         env=sb.env, stderr=errf, text=True)
    check(wait_for(got + ".r"), "the job did not start")
    job = int(open(got + ".r").read())
    p.send_signal(sig)  # the trap is set before the shell writes its pid: no pause needed
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    if alive(job):
        os.kill(job, signal.SIGKILL)
    errf.seek(0)
    check(rc == 42, f"{name}: gpuscope exited {rc} (the job's trap exits 42): {errf.read()}")
    check(open(got).read().strip() == name, f"{name} did not reach the job")
    runs = sb.json("runs", "--json")
    check(runs[0]["status"] == "failed" and runs[0]["exit_code"] == 42, str(runs))
    sb.close()


def test_quit_is_forwarded_not_fatal():
    forwarded(signal.SIGQUIT)


def test_usr1_is_forwarded_not_fatal():
    forwarded(signal.SIGUSR1)


def test_usr2_is_forwarded_not_fatal():
    forwarded(signal.SIGUSR2)


def test_sigpipe_to_gpuscope_does_not_orphan_the_job():
    sb = Sandbox()
    ready = os.path.join(sb.dir, "ready")
    p = subprocess.Popen([BIN, "run", "--quiet", "--", "sh", "-c", f"echo $$ > {ready}; sleep 1; exit 5"],
                         env=sb.env, stderr=subprocess.DEVNULL)
    check(wait_for(ready), "the job did not start")
    p.send_signal(signal.SIGPIPE)
    rc = p.wait(timeout=30)
    check(rc == 5, f"rc {rc}: SIGPIPE should neither kill gpuscope nor reach the job")
    check(sb.json("runs", "--json")[0]["status"] == "failed", "the run was not closed")
    sb.close()


def test_closed_stderr_does_not_kill_gpuscope():
    sb = Sandbox()
    r, w = os.pipe()
    os.close(r)  # the summary goes to a pipe nobody reads: EPIPE, not death by SIGPIPE
    p = subprocess.Popen([BIN, "run", "--", "sh", "-c", "exit 4"], env=sb.env, stderr=w,
                         restore_signals=True)
    os.close(w)
    rc = p.wait(timeout=60)
    check(rc == 4, f"rc {rc}")
    check(sb.json("runs", "--json")[0]["exit_code"] == 4, "the run was not kept")
    sb.close()


def test_term_during_wait_tree_reaches_the_orphans():
    sb = Sandbox()
    pidfile = os.path.join(sb.dir, "pid")
    p = subprocess.Popen([BIN, "run", "--quiet", "--wait-tree", "--", "sh", "-c",
                          f"sleep 300 >/dev/null 2>&1 & echo $! $$ > {pidfile}; exit 0"],
                         env=sb.env, stderr=subprocess.DEVNULL)
    check(wait_for(pidfile), "the job did not start")
    pid, shell = map(int, open(pidfile).read().split())
    # the state under test: the shell has exited and gpuscope has reaped it (its /proc entry is gone),
    # so gpuscope is waiting for the orphan alone
    deadline = time.time() + 60
    while os.path.exists(f"/proc/{shell}") and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    check(not os.path.exists(f"/proc/{shell}"), "gpuscope did not reap the job's shell")
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        p.wait(timeout=20)
        raise AssertionError("SIGTERM during --wait-tree did not reach the job's orphan")
    check(rc == 0 and not alive(pid), f"rc {rc} (the job's own), orphan alive: {alive(pid)}")
    sb.close()


def test_terminal_ctrl_c_reaches_the_job_once():
    import pty
    sb = Sandbox()
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(BIN, [BIN, "run", "--quiet", "--", "sh", "-c",
                        "trap 'echo GOT-INT; exit 9' INT; echo READY; while :; do sleep 0.05; done"], sb.env)
    import select
    out, deadline = b"", time.time() + 20
    while b"READY" not in out and time.time() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            out += os.read(fd, 4096)
    check(b"READY" in out, f"the job did not start: {out!r}")
    time.sleep(0.3)
    os.write(fd, b"\x03")  # the terminal sends SIGINT to the foreground group: gpuscope and the job
    st = None
    while time.time() < deadline:
        if not select.select([fd], [], [], 0.5)[0]:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                st = status
                break
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    else:
        os.kill(pid, signal.SIGKILL)
    if st is None:
        _, st = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(st)
    check(rc == 9 and out.count(b"GOT-INT") == 1, f"rc {rc}, output {out!r}: ^C must reach the job once")
    sb.close()


if __name__ == "__main__":
    run_tests(globals())
