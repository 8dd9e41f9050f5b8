"""gpuscope check on real PyTorch CPU runs (examples/ci_train.py under /usr/bin/python3: an MLP fed by
a DataLoader): a run whose transform sleeps in __getitem__ (a read waiting on slow storage) breaks
the CI gate's budgets against the baseline (exit 1: the speed-up, the data wait and the forbidden
input finding named, each explained by the doctor's input finding — input_latency, as the loader's
CPU is idle while it waits, or input_bound where the doctor reads it so); a second run of
the same code holds them (exit 0; its speed-up budget 0.6x, not 0.95x: see SAME_BUDGETS); both JUnit files
validate against tests/data/junit.xsd (xmllint). The baseline and the second run of the same code
train at the same time, one thread each, each on a core of its own: the machine's speed, whatever
it is at that moment, weighs on each alike, and neither shares its core with the other (see _setup)."""
import subprocess
import xml.etree.ElementTree as ET

from gstest import *

XMLLINT = os.environ.get("GS_XMLLINT", "xmllint")
TRAIN = os.path.join(SRC, "examples", "ci_train.py")
ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}
STEPS = 400  # about 4 ms each: the pair's steps cover about 2 s, which a neighbour's burst barely moves
SLOW_STEPS = 30  # 32 x 8 ms asleep per batch: 0.26 s a step
INPUT = ("input_bound", "input_latency", "loader_workers")
BUDGETS = ["--min-speedup", "0.95", "--max-data-wait", "20%", "--forbid", "input_bound,input_latency,pageable_copies"]


def _train(sb, name, steps, extra=(), cpu=None):
    env = dict(sb.env, **ENV, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    return subprocess.Popen([BIN, "run", "--name", name, "--", PYTHON, TRAIN, "--steps", str(steps), *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pin)


def _wait(procs):
    for name, (p, steps) in procs.items():
        out, err = p.communicate(timeout=600)
        check(p.returncode == 0 and f"ci_train: {steps} steps on cpu" in out, f"{name}: exit {p.returncode}\n{out}{err}")


# Three runs trained at once, two threads each, on the 2-core machine beside another CPU-first test
# (under tests/load.sh) measured the same code at 0.43x its baseline: 60 steps of 4 ms covered 0.26 s,
# which one neighbour's burst could halve, and six threads on two cores stall each other at torch's
# barriers. So the pair runs one thread each, pinned to two cores where the test may use two (in turn
# where it has one), over 400 steps; the slowed run comes after, as its sleeps would take a core's
# share from one of the pair.
def _setup(sb):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        _wait({"main": (_train(sb, "main", STEPS, cpu=cpus[0]), STEPS),
               "same": (_train(sb, "same", STEPS, cpu=cpus[1]), STEPS)})
    else:
        for name in ("main", "same"):
            _wait({name: (_train(sb, name, STEPS), STEPS)})
    _wait({"slowed": (_train(sb, "slowed", SLOW_STEPS, ["--slow-transform", "0.008"]), SLOW_STEPS)})


SB = shared_sandbox(_setup)


def _check(run, junit, budgets=BUDGETS):
    sb = SB()
    path = os.path.join(sb.dir, junit)
    rc, out, err = sb.gs("check", run, "--baseline", "main", *budgets, "--junit", path)
    print(out, end="")
    p = subprocess.run([XMLLINT, "--noout", "--schema", os.path.join(SRC, "tests/data/junit.xsd"), path],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"the JUnit file of {run} does not validate: {p.stdout}{p.stderr}")
    return rc, out, err, ET.parse(path).getroot()


def test_a_slowed_transform_breaks_the_gate():
    rc, out, err, junit = _check("slowed", "slowed.xml")
    check(rc == 1, f"exit {rc}\n{out}{err}")
    lines = out.splitlines()
    speed = [l for l in lines if "speed-up vs baseline" in l]
    wait = [l for l in lines if "data wait" in l]
    forbid = [l for l in lines if "FAIL    finding input_" in l]
    check(len(speed) == len(wait) == 1 and forbid, out)
    for line in speed + wait + forbid:
        check(line.lstrip().startswith("FAIL") and any(f"— {r}: " in line for r in INPUT),
              f"not broken, or not explained by an input finding: {line}")
    check("budget >= 0.95x" in speed[0] and "budget <= 20.0 %" in wait[0], out)
    failed = sorted(c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None)
    check(failed[-2:] == ["max_data_wait", "min_speedup"] and failed[:-2] and
          all(f in ("forbid:input_bound", "forbid:input_latency") for f in failed[:-2]), f"JUnit failures: {failed}")
    check(junit.find("testsuite").get("failures") == str(len(failed)), ET.tostring(junit, encoding="unicode"))


# Two runs of the same CPU-bound code side by side on a 2-core machine that runs another test beside
# them measured 0.64x (±0.08) in one make check by the steps' own lengths, when they shared the cores
# (see _setup). Each on a core of its own, under tests/load.sh beside the three CPU-first tick-grid
# scripts, four runs measured 0.873x (±0.072) to 1.240x (±0.105): the neighbours' bursts land on one
# core more than the other. So the same code is held to 0.6x, which a real regression, as the slowed
# run's (0.02x ±0.003), breaks by far (an interval that spans the budget, "cannot tell", is
# test_check's).
SAME_BUDGETS = ["--min-speedup", "0.6"] + BUDGETS[2:]


def test_the_same_code_passes_the_gate():
    rc, out, err, junit = _check("same", "same.xml", SAME_BUDGETS)
    check(rc == 0 and "5 of 5 budgets hold: passed" in out, f"exit {rc}\n{out}{err}")
    cases = list(junit.iter("testcase"))
    check(len(cases) == 5 and all(len(c) == 0 for c in cases), ET.tostring(junit, encoding="unicode"))
    check(junit.find("testsuite").get("failures") == "0", ET.tostring(junit, encoding="unicode"))


run_tests(globals())
