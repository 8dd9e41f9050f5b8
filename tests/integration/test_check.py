"""gpuscope check: the CI gate. A run slower than its baseline and waiting for data breaks those
budgets (exit 1, one line each with the measured figure, the budget and the finding that explains
it); a speed-up budget holds only when the measurement can tell (its interval wholly at or above the
budget; one that spans it "cannot tell", exit 1 and a JUnit <error>); a run against itself is exactly
1x; a figure the run did not measure breaks its budget as unknown; a GPU's utilisation (the simulated NVML) holds or breaks its budget; JUnit XML and JSON
carry the same verdict, whatever the run is named, and the JUnit file validates against the schema CI
systems read (tests/data/junit.xsd, xmllint from libxml2-utils); bad usage, a misspelt rule among
them, is exit 2."""
import re
import subprocess
import xml.etree.ElementTree as ET

from gstest import *


def _setup(sb):
    sb.ok("run", "--name", "base", "--", *sb.step_job(0.002, 0.01, 60))
    # a hostile name: XML's specials, a control character, invalid UTF-8 (bytes through the shell)
    sb.ok("run", "--name", "slow<&\"'>\x01", "--", *sb.step_job(0.03, 0.01, 40))


SB = shared_sandbox(_setup)
SLOW = "slow<&\"'>\x01"
XMLLINT = os.environ.get("GS_XMLLINT", "xmllint")
SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")


def test_a_slower_input_bound_run_breaks_its_budgets():
    rc, out, err = SB().gs("check", SLOW, "--baseline", "base", "--min-speedup", "0.95", "--max-data-wait", "20%",
                           "--forbid", "pageable_copies")
    check(rc == 1, f"exit {rc}\n{out}{err}")
    lines = out.splitlines()
    speed = [l for l in lines if "speed-up vs baseline" in l]
    wait = [l for l in lines if "data wait" in l]
    check(len(speed) == 1 and speed[0].lstrip().startswith("FAIL"), out)
    check(len(wait) == 1 and wait[0].lstrip().startswith("FAIL") and "budget <= 20.0 %" in wait[0], out)
    # the finding that explains it is named on the line
    check(any(r in wait[0] for r in ("input_bound", "input_latency", "loader_workers")), out)
    forbid = [l for l in lines if "pageable_copies" in l]
    check(len(forbid) == 1 and forbid[0].lstrip().startswith("ok"), out)
    check("\x01" not in out, "the run's name is escaped for the terminal")


def test_the_speed_up_is_measured_against_what_the_jobs_did():
    """The measured speed-up agrees with the jobs' own timing: the slow job's steps take about 40 ms,
    the base's about 12 ms (sleep + spin), so about 0.3x; a wide band, since the machine is shared."""
    out = SB().ok("check", SLOW, "--baseline", "base", "--max-data-wait", "100%", "--min-speedup", "0.01", "--json")
    j = json.loads(out)
    sp = [b for b in j["budgets"] if b["budget"] == "min_speedup"]
    check(len(sp) == 1, out)
    check(0.1 < sp[0]["measured"] < 0.7 and sp[0]["ci"] >= 0, out)
    check(j["passed"] is True and sp[0]["status"] == "ok", out)


def test_a_run_against_itself_holds_the_speed_up_budget():
    rc, out, err = SB().gs("check", "base", "--baseline", "base", "--min-speedup", "1.0")
    check(rc == 0 and "1 of 1 budgets hold: passed" in out, f"exit {rc}\n{out}{err}")


# A job whose first half of steps wait 50 ms for data and second half 5 ms (a cache that warms up):
# its throughput's spread, from batch means, is as wide as the throughput itself.
_BURSTY_JOB = r'''
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(36):
    t0 = time.monotonic(); time.sleep(0.05 if i < 18 else 0.005); t1 = time.monotonic()
    s.sendto(f"gs1 step {i} data={t1 - t0:.6f} compute=0 samples=32 t={t1:.6f}".encode(), os.environ["GPUSCOPE_SOCKET"])
'''


def test_a_speed_up_whose_interval_spans_the_budget_cannot_tell():
    """A budget holds only when the measurement can tell. The bursty run against the steady base, at
    a budget of exactly its measured speed-up, spans it: "cannot tell" (exit 1, a JUnit <error>), with
    its figures and how many steps would tell; a budget above its whole interval breaks (FAIL)."""
    sb = SB()
    job = os.path.join(sb.dir, "bursty_job.py")
    with open(job, "w") as f:
        f.write(_BURSTY_JOB)
    sb.ok("run", "--name", "bursty", "--", PYTHON, job)
    sp = json.loads(sb.gs("check", "bursty", "--baseline", "base", "--min-speedup", "0.01", "--json")[1])["budgets"][0]
    m, ci = sp["measured"], sp["ci"]
    check(m > 0 and ci > 0, str(sp))
    path = os.path.join(sb.dir, "cannot-tell.xml")
    rc, out, err = sb.gs("check", "bursty", "--baseline", "base", "--min-speedup", repr(m), "--junit", path)
    line = [l for l in out.splitlines() if "speed-up vs baseline" in l]
    check(rc == 1 and len(line) == 1 and line[0].lstrip().startswith("CANNOT TELL") and "cannot tell: " in line[0]
          and "spans the budget" in line[0] and "0 of 1 budgets hold" in out, f"exit {rc}\n{out}{err}")
    check(re.search(r"about \d+ steps of the run \(it has \d+\) would tell|the baseline needs more steps", line[0]),
          line[0])
    p = subprocess.run([XMLLINT, "--noout", "--schema", os.path.join(SRC, "tests/data/junit.xsd"), path],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"xmllint: {p.stdout}{p.stderr}")
    case = ET.parse(path).getroot().find(".//testcase")
    e = case.find("error")
    check(e is not None and e.get("type") == "cannot_tell" and case.find("failure") is None,
          ET.tostring(case, encoding="unicode"))
    j = json.loads(sb.gs("check", "bursty", "--baseline", "base", "--min-speedup", repr(m), "--json")[1])
    check(j["passed"] is False and j["budgets"][0]["status"] == "cannot_tell", str(j))
    rc, out, err = sb.gs("check", "bursty", "--baseline", "base", "--min-speedup", repr(2 * (m + ci)))
    check(rc == 1 and "FAIL    speed-up vs baseline" in out, f"exit {rc}\n{out}{err}")


def test_a_run_against_itself_measures_exactly_one():
    """The same steps on both sides: 1.000x without noise, which holds a budget of 1 and breaks one of 2."""
    rc, out, err = SB().gs("check", "base", "--baseline", "base", "--min-speedup", "2")
    check(rc == 1 and "FAIL    speed-up vs baseline 1.000x (±0.000)" in out and "its own baseline" in out,
          f"exit {rc}\n{out}{err}")


def test_what_was_not_measured_breaks_its_budget():
    rc, out, err = SB().gs("check", "base", "--min-gpu-util", "50%", "--json")
    check(rc == 1, f"exit {rc}\n{out}{err}")
    b = json.loads(out)["budgets"]
    check(len(b) == 1 and b[0]["status"] == "unknown" and b[0]["measured"] is None, out)


def test_junit_and_json_carry_the_verdict_whatever_the_name():
    path = os.path.join(SB().dir, "check.xml")
    rc, out, err = SB().gs("check", SLOW, "--baseline", "base", "--min-speedup", "0.95", "--max-data-wait", "0.2",
                           "--forbid", "input_bound,input_latency", "--junit", path, "--json")
    check(rc == 1, f"exit {rc}\n{err}")
    j = json.loads(out)
    check(j["passed"] is False and j["run"]["name"].startswith("slow<&"), out)
    root = ET.parse(path).getroot()  # valid XML despite the name
    cases = root.findall(".//testcase")
    check(len(cases) == len(j["budgets"]) == 4, ET.tostring(root, encoding="unicode"))
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    check(failed == [b["budget"] for b in j["budgets"] if b["status"] != "ok"], f"{failed} vs {j['budgets']}")
    check(int(root.get("failures")) == len(failed) >= 2, ET.tostring(root, encoding="unicode"))


def test_the_gpu_util_budget_is_judged_on_the_gpus_utilisation():
    """A job beside a simulated H100 at 97 % holds --min-gpu-util 80%; beside an idle one (0 %) it
    breaks it, with the measured figure on the line."""
    sb = SB()
    for name, scn in (("busy-gpu", "healthy_h100.scn"), ("idle-gpu", "idle1.scn")):
        sb.ok("run", "--name", name, "--", *sb.step_job(0.001, 0.01, 20),
              env={"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": os.path.join(SCN, scn)})
    rc, out, err = sb.gs("check", "busy-gpu", "--min-gpu-util", "80%")
    check(rc == 0 and "ok      GPU util 97.0 %, budget >= 80.0 %" in out, f"exit {rc}\n{out}{err}")
    rc, out, err = sb.gs("check", "idle-gpu", "--min-gpu-util", "80%")
    check(rc == 1 and "FAIL    GPU util 0.0 %, budget >= 80.0 %" in out, f"exit {rc}\n{out}{err}")


def test_junit_validates_and_an_unmeasured_budget_is_an_error():
    """The JUnit file validates against tests/data/junit.xsd; a budget whose figure was not measured
    (no GPU: --min-gpu-util) is an <error>, counted in errors, the broken ones <failure>s; the suite
    says when and where the run ran and carries both runs' ids."""
    sb = SB()
    path = os.path.join(sb.dir, "check-errors.xml")
    rc, out, err = sb.gs("check", SLOW, "--baseline", "base", "--min-speedup", "0.95", "--min-gpu-util", "50%",
                         "--forbid", "pageable_copies", "--junit", path)
    check(rc == 1, f"exit {rc}\n{out}{err}")
    p = subprocess.run([XMLLINT, "--noout", "--schema", os.path.join(SRC, "tests/data/junit.xsd"), path],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"xmllint: {p.stdout}{p.stderr}")
    suite = ET.parse(path).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    check(sorted(cases) == ["forbid:pageable_copies", "min_gpu_util", "min_speedup"], str(sorted(cases)))
    check(cases["min_gpu_util"].find("error") is not None and cases["min_gpu_util"].find("failure") is None,
          ET.tostring(cases["min_gpu_util"], encoding="unicode"))
    check(cases["min_speedup"].find("failure") is not None, ET.tostring(cases["min_speedup"], encoding="unicode"))
    check(list(cases["forbid:pageable_copies"]) == [], "a budget that holds is an empty testcase")
    check((suite.get("failures"), suite.get("errors"), suite.get("tests")) == ("1", "1", "3"), str(suite.attrib))
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    ids = json.loads(sb.gs("check", SLOW, "--baseline", "base", "--forbid", "pageable_copies", "--json")[1])
    check(props == {"run": ids["run"]["id"], "baseline": ids["baseline"]["id"]}, f"{props} vs {ids}")
    check(suite.get("hostname") and suite.get("timestamp") and float(suite.get("time")) > 0, str(suite.attrib))


def test_a_baseline_by_name_or_tag_is_the_newest_finished_run():
    """While the main branch's next run of the same name is still going, --baseline NAME (and
    tag:KEY=VALUE) means the newest *finished* run: a half-done run is no baseline. A tag that only
    a running run has is exit 2."""
    sb = SB()
    rc, out, err = sb.gs("run", "--name", "flow", "--tag", "pipeline=1", "--", *sb.step_job(0.001, 0.005, 10))
    check(rc == 0, err)
    done_id = re.search(r"gpuscope: run (\w+) \(", err).group(1)
    gate = os.path.join(sb.dir, "flow-go")
    job = [PYTHON, "-c", f"import os, time\nwhile not os.path.exists({gate!r}): time.sleep(0.05)"]
    p = subprocess.Popen([BIN, "run", "--name", "flow", "--tag", "pipeline=2", "--", *job], env=sb.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: [r for r in sb.json("runs", "--json") if r["name"] == "flow" and r["status"] == "running"],
                   "the second flow run is listed as running", proc=p)
        for ref in ("flow", "tag:pipeline=1"):
            rc, out, err = sb.gs("check", SLOW, "--baseline", ref, "--forbid", "pageable_copies", "--json")
            check(rc == 0 and json.loads(out)["baseline"]["id"] == done_id, f"--baseline {ref}: exit {rc}\n{out}{err}")
        rc, out, err = sb.gs("check", SLOW, "--baseline", "tag:pipeline=2", "--forbid", "pageable_copies")
        check(rc == 2 and "no finished run tagged 'pipeline=2'" in err, f"exit {rc}\n{out}{err}")
    finally:
        open(gate, "w").close()
        p.wait(timeout=120)


def test_junit_on_stdout_is_the_xml_alone():
    """--junit -: stdout parses as the JUnit XML (the text verdict on stderr); with --json as well,
    both would write to stdout: exit 2."""
    sb = SB()
    rc, out, err = sb.gs("check", SLOW, "--baseline", "base", "--min-speedup", "0.95", "--junit", "-")
    check(rc == 1 and "speed-up vs baseline" in err, f"exit {rc}\n{out}{err}")
    cases = ET.fromstring(out).findall(".//testcase")
    check([c.get("name") for c in cases] == ["min_speedup"] and cases[0].find("failure") is not None, out)
    rc, out, err = sb.gs("check", SLOW, "--baseline", "base", "--min-speedup", "0.95", "--junit", "-", "--json")
    check(rc == 2 and out == "" and "--junit - and --json" in err and len(err.splitlines()) == 1, f"exit {rc}\n{out}{err}")


def test_a_junit_file_that_cannot_be_written_fails_the_gate():
    """Every budget holds, but the JUnit file is not there: exit 1, saying why — a full disk
    (/dev/full: the write fails at the close) or a folder that does not exist."""
    sb = SB()
    for path, why in (("/dev/full", "No space left on device"),
                      (os.path.join(sb.dir, "no-such-dir", "check.xml"), "No such file or directory")):
        rc, out, err = sb.gs("check", "base", "--forbid", "pageable_copies", "--junit", path)
        check(rc == 1 and "1 of 1 budgets hold: passed" in out and err == f"gpuscope: check: cannot write {path}: {why}\n",
              f"exit {rc}\n{out}{err}")


def test_a_misspelt_forbidden_rule_is_bad_usage():
    """--forbid input_bond would never be found, so its budget would always hold: exit 2, naming it."""
    rc, out, err = SB().gs("check", SLOW, "--forbid", "pageable_copies,input_bond")
    check(rc == 2 and "'input_bond' is not a rule of the doctor" in err and len(err.splitlines()) == 1,
          f"exit {rc}\n{out}{err}")


def test_the_ci_docs_check_commands_are_understood():
    """Every `gpuscope check` command docs/ci.md shows (its shell and YAML blocks, continuation lines
    joined, the runs' names replaced by the sandbox's) is understood and judges the slow run as it
    should: exit 1, its speed-up and data wait broken, its GPU budget unknown (no GPU here)."""
    import re
    import shlex
    with open(os.path.join(SRC, "docs", "ci.md")) as f:
        text = re.sub(r"\\\n\s*", " ", f.read())
    cmds = re.findall(r"gpuscope check (.+)", text)
    cmds = [c for c in cmds if c.split()[0].startswith(('"', "$"))]  # the commands, not the prose
    check(len(cmds) >= 3, f"docs/ci.md shows {len(cmds)} check commands")
    sb = SB()
    for c in cmds:
        args = [{"smoke-main": "base", "gpuscope-check.xml": os.path.join(sb.dir, "docs.xml")}.get(a, a)
                for a in shlex.split(c)]
        args[0] = SLOW  # the run the pipeline named
        rc, out, err = sb.gs("check", *args)
        where = f"docs/ci.md: gpuscope check {c}\nexit {rc}\n{out}{err}"
        # the slow run (0.3x, three quarters of each step waiting for data, no GPU) breaks each budget
        # the command sets, and each line says how
        check(rc == 1 and "budgets hold" in out and "passed" not in out, where)
        lines = out.splitlines()
        for flag, line in (("--min-speedup", "FAIL    speed-up vs baseline"), ("--max-data-wait", "FAIL    data wait"),
                           ("--min-gpu-util", "UNKNOWN GPU util unknown")):
            check((flag in args) == any(l.lstrip().startswith(line) for l in lines), f"{flag}: {where}")


def test_bad_usage_is_exit_2():
    sb = SB()
    for args in (["check", "base"], ["check", "base", "--min-speedup", "0.9"],
                 ["check", "nope", "--max-data-wait", "20%"], ["check", "base", "--max-data-wait", "20"],
                 ["check", "base", "--forbid", "a;b"], ["check", "--max-data-wait", "20%"]):
        rc, out, err = sb.gs(*args)
        check(rc == 2 and err.startswith("gpuscope: check:") and len(err.splitlines()) == 1, f"{args}: {rc} {err}")


run_tests(globals())
