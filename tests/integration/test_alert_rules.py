"""contrib/prometheus: the alerting rules on the node agent's metrics pass promtool's checks and
their own unit tests (gpuscope-alerts.test.yml: what fires, and what must not — a free GPU, a brief
spike, an absent series), and the Alertmanager routing beside them is valid and sends each alert
where docs/deploy.md says. promtool and amtool come from Debian's prometheus and
prometheus-alertmanager (found by tests/metrics/CMakeLists.txt)."""
import subprocess

from gstest import *

CONTRIB = os.path.join(SRC, "contrib", "prometheus")
PROMTOOL = os.environ.get("GS_PROMTOOL", "promtool")
AMTOOL = os.environ.get("GS_AMTOOL", "amtool")


def _run(*cmd):
    p = subprocess.run(cmd, cwd=CONTRIB, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_the_rules_are_valid():
    rc, out = _run(PROMTOOL, "check", "rules", "gpuscope-alerts.yml")
    check(rc == 0 and "8 rules found" in out, out)


def test_the_rules_do_what_their_tests_say():
    rc, out = _run(PROMTOOL, "test", "rules", "gpuscope-alerts.test.yml")
    check(rc == 0 and "SUCCESS" in out, out)


def test_a_changed_threshold_fails_the_rule_tests():
    """The rule tests can fail: the idle threshold lowered to 1 % leaves the idle GPU unreported."""
    import shutil, tempfile
    d = tempfile.mkdtemp(prefix="gs-alerts-")
    try:
        with open(os.path.join(CONTRIB, "gpuscope-alerts.yml")) as f:
            rules = f.read()
        check("GPU_UTIL[10m]) < 10" in rules, "the idle threshold is where the test expects it")
        with open(os.path.join(d, "gpuscope-alerts.yml"), "w") as f:
            f.write(rules.replace("GPU_UTIL[10m]) < 10", "GPU_UTIL[10m]) < 1"))
        shutil.copy(os.path.join(CONTRIB, "gpuscope-alerts.test.yml"), d)
        p = subprocess.run([PROMTOOL, "test", "rules", "gpuscope-alerts.test.yml"], cwd=d, capture_output=True,
                           text=True, timeout=120)
        check(p.returncode != 0 and "GpuscopeGpuIdle" in p.stdout + p.stderr, p.stdout + p.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_alertmanager_routing_is_valid():
    rc, out = _run(AMTOOL, "check-config", "alertmanager.yml")
    check(rc == 0 and "SUCCESS" in out, out)


def test_each_alert_goes_where_the_docs_say():
    cases = [
        (["alertname=GpuscopeTargetDown", "instance=n1:9733"], "on-call"),
        (["alertname=GpuscopeGpuXid", "instance=n1:9733", "gpu=3", "xid=79"], "on-call"),
        (["alertname=GpuscopeGpuMemoryErrors", "instance=n1:9733", "gpu=1"], "on-call"),
        (["alertname=GpuscopeNvlinkErrors", "instance=n1:9733", "gpu=1"], "ml-team"),
        (["alertname=GpuscopeGpuIdle", "instance=n1:9733", "gpu=0"], "ml-team"),
        (["alertname=GpuscopeNodeIdle", "instance=n1:9733"], "ml-team"),
        (["alertname=GpuscopeInputBound", "instance=n1:9733"], "ml-team"),
        (["alertname=GpuscopeFinding", "severity=critical", "rule=straggler"], "ml-team"),
        (["alertname=GpuscopeFinding", "severity=info", "rule=loader_workers"], "ml-team-digest"),
    ]
    for labels, receiver in cases:
        rc, out = _run(AMTOOL, "config", "routes", "test", "--config.file=alertmanager.yml", *labels)
        got = [l.strip() for l in out.splitlines() if l.strip() and not l.startswith("Warning")]
        check(rc == 0 and got == [receiver], f"{labels}: expected {receiver}, got {out!r}")


run_tests(globals())
