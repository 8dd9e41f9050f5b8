"""Integration: `gpuscope top` driven in a real terminal (tmux: send-keys, resize-window, capture-pane)
against a simulated-GPU run (tests/gpusim, busy8_h200: eight H200s, GPU 3 straggling at 40 %) of a
real PyTorch input-bound job with two loader workers (examples/input_bound.py). Every screen a test
looks at is kept under the build folder (top-captures/) for people to read."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios/busy8_h200.scn")
CAPTURES = os.path.join(BUILD, "top-captures")
TMUX = shutil.which("tmux")


class Term:
    """One tmux server of our own (-L) with one window of a given size running a command."""

    def __init__(self, box, cmd, w=80, h=24, env=None):
        self.sock = f"gstest-top-{os.getpid()}-{id(self)}"
        e = dict(box.env)
        e.update({"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": SCN, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                  "PYTHONPATH": os.path.join(SRC, "clients", "python"), "OMP_NUM_THREADS": "1"})
        e.pop("NO_COLOR", None)
        e.pop("TMUX", None)
        if env:
            e.update(env)
        self.env = e
        script = os.path.join(box.dir, f"term-{id(self)}.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n")
            for k in ("GPUSCOPE_STORE", "XDG_DATA_HOME", "GPUSCOPE_NVML_LIB", "GPUSIM_SCENARIO", "LANG", "LC_ALL",
                      "PYTHONPATH", "OMP_NUM_THREADS", "NO_COLOR", "PGPASSFILE", "GPUSCOPE_SPOOL_DIR"):
                if k in e:
                    f.write(f"export {k}='{e[k]}'\n")
            f.write(" ".join(f"'{a}'" for a in cmd) + "\n")
            f.write("echo EXIT=$?\nsleep 600\n")
        os.chmod(script, 0o755)
        self.tmux("new-session", "-d", "-s", "t", "-x", str(w), "-y", str(h), script)

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.sock, *args], capture_output=True, text=True, env=self.env,
                              timeout=30)

    def screen(self, escapes=False):
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "t").stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def resize(self, w, h):
        self.tmux("resize-window", "-t", "t", "-x", str(w), "-y", str(h))

    def wait_for(self, pred, what, timeout=60):
        """Polls the screen until pred(screen) holds; returns that screen."""
        end = time.monotonic() + timeout
        s = ""
        while time.monotonic() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{s}")

    def close(self):
        self.tmux("kill-server")


def keep(name, text):
    os.makedirs(CAPTURES, exist_ok=True)
    with open(os.path.join(CAPTURES, name), "w") as f:
        f.write(text)


def gpu_line(screen, g):
    return next((l for l in screen.splitlines() if re.match(rf"^[ >]GPU{g}\b", l)), "")


def ready(s):
    """The screen of the job in full flow: every GPU, steps with a rate, and the doctor's word."""
    return (all(gpu_line(s, g) for g in range(8)) and re.search(r"steps \d+ +[\d.]+/s", s)
            and "doctor  input_bound" in s and len(re.findall(r"^ +\d+ .* python3", s, re.M)) >= 3)


def test_top_follows_a_simulated_gpu_run_through_keys_and_resizes():
    box = Sandbox()
    job = [PYTHON, os.path.join(SRC, "examples/input_bound.py"), "--seconds", "120", "--workers", "2"]
    term = Term(box, [BIN, "top", "--", *job])
    try:
        s = term.wait_for(ready, "GPUs, steps, processes and the finding at 80x24", timeout=90)
        keep("80x24.txt", s)
        lines = s.splitlines()
        check(len(lines) <= 24 and all(len(l) <= 80 for l in lines), "the screen fits 80x24")
        check("util[" in gpu_line(s, 0) and "97%" in gpu_line(s, 0), f"GPU 0 at 97 %: {gpu_line(s, 0)}")
        check("40%" in gpu_line(s, 3), f"GPU 3 straggles at 40 %: {gpu_line(s, 3)}")
        for fig in ("sm[", "mem[", "120G", "pow[", "640W", "temp[", "66C"):
            check(fig in gpu_line(s, 5), f"{fig} on GPU 5's line: {gpu_line(s, 5)}")
        check(re.search(r"data \d+% h2d \d+% compute \d+%", s), "the step breakdown")
        check(re.search(r"\d+ samples/s", s), "samples per second")
        check(re.search(r"doctor  input_bound, est\. [\d.]+x faster: ", s), "the finding with its estimated gain")
        procs = re.findall(r"^ +(\d+) +(\S+) +(\S+) +(\S+)  python3(.*)$", s, re.M)
        check(len(procs) >= 3, f"the training process and its two loader workers: {procs}")
        check("(launched)" in procs[0][4], f"the launched process first: {procs}")
        check(">GPU0" in s and "GPU0 util, last" in s, "GPU 0 selected first")
        s = term.wait_for(lambda x: re.search(r"^ +\d+ .*  python3  trainer", x, re.M) and
                          len(re.findall(r"^ +\d+ .*  python3  loader worker", x, re.M)) == 2,
                          "the doctor names the training process and its two loader workers")
        keep("80x24-roles.txt", s)

        term.keys("g")
        s = term.wait_for(lambda x: ">GPU1" in x and "GPU1 util, last" in x, "g selects GPU 1")
        keep("80x24-g.txt", s)

        term.resize(200, 60)
        s = term.wait_for(lambda x: "NVIDIA H200" in x and len(x.splitlines()) > 40 and ready(x), "a 200x60 screen")
        keep("200x60.txt", s)
        lines = s.splitlines()
        check(all(len(l) <= 200 for l in lines), "lines fit 200 columns")
        check(max(len(l) for l in lines) > 150, "a wide terminal is used across")
        check(sum(l.startswith("    \u2502") for l in lines) >= 4, "the history graph grows with the rows")

        term.resize(80, 24)
        s = term.wait_for(lambda x: len(x.splitlines()) <= 24 and ready(x) and "NVIDIA H200" not in x,
                          "back to 80x24")
        keep("80x24-after-resize.txt", s)
        check(all(len(l) <= 80 for l in s.splitlines()), "no line left over from the wide screen")

        term.keys("h")
        s = term.wait_for(lambda x: "gpuscope top: keys" in x, "the help box")
        keep("80x24-help.txt", s)
        term.keys("x")
        term.wait_for(lambda x: "gpuscope top: keys" not in x, "any key closes the help")

        term.keys("q")
        s = term.wait_for(lambda x: "EXIT=" in x, "q quits", timeout=60)
        keep("after-q.txt", s)
        check("EXIT=143" in s, f"quitting stopped the job (SIGTERM: 143): {s}")
        check("the job's output and the run's summary are in" in s.replace("\n", ""), "top names the job's log")
        runs = box.json("runs", "--json")
        check(runs and runs[0]["status"] in ("killed", "failed"), f"the run was closed: {runs[:1]}")
    finally:
        term.close()
        box.close()


def test_a_mig_gpu0_without_util_hides_no_gpu_after_it():
    # mig4.scn: GPU 0 in MIG mode has no util series; GPUs 1-3 run at 81, 62 and 43 %.
    box = Sandbox()
    term = Term(box, [BIN, "top", "--", "sleep", "120"],
                env={"GPUSIM_SCENARIO": os.path.join(SRC, "tests/gpusim/scenarios/mig4.scn")})
    try:
        s = term.wait_for(lambda x: all("%" in gpu_line(x, g) for g in (1, 2, 3)), "GPUs 1-3 with their util")
        keep("80x24-mig4.txt", s)
        for g, util in ((1, "81%"), (2, "62%"), (3, "43%")):
            check(util in gpu_line(s, g), f"GPU {g} at {util}: {gpu_line(s, g)}")
        check(re.search(r"util\[ *— *\]", gpu_line(s, 0)), f"GPU 0's util unknown, as —: {gpu_line(s, 0)}")
        term.keys("q")
        term.wait_for(lambda x: "EXIT=" in x, "q quits", timeout=60)
    finally:
        term.close()
        box.close()


def test_a_finished_run_stays_on_screen_finished_and_escaped():
    box = Sandbox()
    try:
        # A run name and a process name with an escape sequence in them (a symlink to sleep).
        evil = os.path.join(box.dir, "sl\x1b[31mp")
        os.symlink(shutil.which("sleep"), evil)
        box.ok("run", "--quiet", "--name", "bad\x1b]0;pwned\x07name", "--", evil, "1.5",
               env={"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": SCN})
        term = Term(box, [BIN, "top", "last"])
        try:
            s = term.wait_for(lambda x: "finished" in x and "doctor  " in x and "no finding yet" not in x,
                              "the finished run with its finding")
            keep("finished.txt", s)
            raw = term.screen(escapes=True)
            check("\x1b]0;" not in raw and "pwned\x07" not in raw, "the run name's OSC sequence is not sent")
            check("bad?]0;pwned?name" in s, f"the run name is shown escaped: {s.splitlines()[0]}")
            check(s.splitlines()[0].rstrip().endswith("finished"), f"marked finished: {s.splitlines()[0]}")
            term.keys("q")
            s = term.wait_for(lambda x: "EXIT=" in x, "q quits")
            check("EXIT=0" in s, f"top of a finished run exits 0: {s}")
        finally:
            term.close()
    finally:
        box.close()


def test_a_diagnosis_that_fails_shows_its_cause_on_the_doctor_line():
    # The host CPU series' chunks damaged: the doctor cannot read them. Before, top said "no finding
    # yet (the first diagnosis comes after a few seconds of data)" for ever.
    import sqlite3
    box = Sandbox()
    try:
        box.ok("run", "--quiet", "--name", "dmg", "--", "sleep", "1")
        db = sqlite3.connect(box.db)
        db.execute("UPDATE chunks SET data = x'0102' WHERE series_id IN (SELECT id FROM series "
                   "WHERE name = 'host.cpu.busy_pct' AND labels = 'cpu=total')")
        db.execute("DELETE FROM rollups")
        db.commit()
        db.close()
        term = Term(box, [BIN, "top", "dmg"], w=160)
        try:
            s = term.wait_for(lambda x: "doctor  the diagnosis could not run: " in x, "the doctor's failure")
            keep("diagnosis-failed.txt", s)
            check("corrupt" in s, f"its cause: {s}")
            term.keys("q")
            term.wait_for(lambda x: "EXIT=" in x, "q quits")
        finally:
            term.close()
    finally:
        box.close()


def test_the_process_list_scrolls_with_arrows_and_pages():
    box = Sandbox()
    try:
        box.ok("run", "--quiet", "--name", "many", "--", "sh", "-c", "for i in $(seq 20); do sleep 2 & done; wait",
               env={"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": SCN})
        term = Term(box, [BIN, "top", "many"])
        try:
            first = term.wait_for(lambda x: re.search(r" 1-\d+ of (\d+)\b", x), "a list longer than the screen")
            total = int(re.search(r" 1-\d+ of (\d+)\b", first).group(1))
            check(total >= 21, f"sh and its 20 sleeps: {total}")
            keep("scroll-top.txt", first)
            pids = lambda x: re.findall(r"^ +(\d+) ", x.split("COMMAND", 1)[1], re.M)
            shown = pids(first)
            term.keys("Down")
            s = term.wait_for(lambda x: re.search(rf" 2-\d+ of {total}\b", x), "Down scrolls one")
            check(pids(s)[0] == shown[1], f"one row down: {pids(s)[:2]} after {shown[:2]}")
            term.keys("NPage")
            term.keys("NPage")
            s = term.wait_for(lambda x: re.search(rf" (\d+)-{total} of {total}\b", x), "PgDn reaches the end")
            keep("scroll-end.txt", s)
            term.keys("PPage")
            term.keys("PPage")
            term.keys("Up")
            s = term.wait_for(lambda x: re.search(rf" 1-\d+ of {total}\b", x), "PgUp and Up go back to the top")
            check(pids(s) == shown, "the same rows as at first")
            check(re.search(r"^ +\d+ .*  sh  \(launched\)$", s, re.M), f"the launched shell is first: {s}")
            term.keys("q")
            term.wait_for(lambda x: "EXIT=0" in x, "q quits")
        finally:
            term.close()
    finally:
        box.close()


def test_no_color_means_no_colour_sequences():
    box = Sandbox()
    try:
        box.ok("run", "--quiet", "--", "sleep", "1", env={"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": SCN})
        seen = {}
        for nc in ("", "1"):
            term = Term(box, [BIN, "top", "last"], env={"NO_COLOR": nc} if nc else None)
            try:
                term.wait_for(lambda x: "doctor  " in x and "finished" in x, "the screen")
                seen[nc] = term.screen(escapes=True)
                keep(f"colour-{'off' if nc else 'on'}.txt", seen[nc])
            finally:
                term.close()
        colour = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7])(;[0-9]+)*m")
        check(colour.search(seen[""]), "colours are used when NO_COLOR is unset")
        check(not colour.search(seen["1"]), "NO_COLOR=1: no colour at all")
    finally:
        box.close()


def test_top_needs_a_terminal_and_a_run():
    box = Sandbox()
    try:
        rc, out, err = box.gs("top", input="")
        check(rc == 2 and "needs a terminal" in err, f"not a terminal: {rc} {err}")
        box.ok("run", "--quiet", "--", "true", env={"GPUSCOPE_NVML_LIB": "/nonexistent"})  # finished: not running
        term = Term(box, [BIN, "top"])
        try:
            s = term.wait_for(lambda x: "EXIT=" in x, "top with nothing running")
            check("EXIT=2" in s and "no running run" in s, f"nothing to watch: {s}")
        finally:
            term.close()
        rc, out, err = box.gs("top", "a", "b")
        check(rc == 2 and "one RUN at most" in err, f"two runs: {rc} {err}")
        missing = os.path.join(box.dir, "missing.db")
        term = Term(box, [BIN, "top", "--store", "sqlite://" + missing])
        try:
            s = term.wait_for(lambda x: "EXIT=" in x, "top on a store that does not exist")
            check("EXIT=3" in s, f"no store: exit 3: {s}")
            check(not os.path.exists(missing), "top only reads: it created no store")
        finally:
            term.close()
    finally:
        box.close()


if __name__ == "__main__":
    if not TMUX:
        skip_script("tmux is not installed (Debian package tmux)")
    if not os.path.exists(SIM):  # built by the same tree as gpuscope: never a skip
        print(f"FAIL: the simulated NVML library is not built ({SIM}): build the tests' tree "
              "(cmake --build with BUILD_TESTING on builds tests/gpusim)")
        sys.exit(1)
    run_tests(globals())
