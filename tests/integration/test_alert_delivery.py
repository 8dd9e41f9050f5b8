"""The shipped alerting rule for an idle GPU, end to end: a real Prometheus (Debian's prometheus)
scrapes `gpuscope agent` on a simulated four-GPU node (tests/gpusim/scenarios/idle_held4.scn: GPU 2
idle with 40 GiB allocated, GPU 3 idle and free, 0 and 1 busy), evaluates
contrib/prometheus/gpuscope-alerts.yml and sends to a real Alertmanager (Debian's
prometheus-alertmanager) routed by contrib/prometheus/alertmanager.yml, which delivers to a
loopback HTTP receiver in this script: exactly one firing GpuscopeGpuIdle, for GPU 2 only, with the
rule's own summary and description (and no GpuscopeNodeIdle: one GPU of four is not the node);
then, once GPU 2 computes again (the simulator's clock moved), exactly one "resolved"; the Xid GPU 1
reports meanwhile (at 30 s of the scenario) one GpuscopeGpuXid page at the on-call receiver, a
generic webhook, with the code as a label; and once the agent is killed (kill -9), one
GpuscopeTargetDown page there.

Only the waits are shortened, in copies: the rules' `for:` (15 min -> 2 s; every other line of the
rule file byte-identical, which the test asserts) and Alertmanager's group_wait and group_interval;
the receivers' URLs point at the loopback receiver. Prometheus evaluates every second. Every daemon
listens on 127.0.0.1 on a free port, keeps its data in the sandbox and is killed at the end."""
import atexit
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401

PROMETHEUS = os.environ.get("GS_PROMETHEUS", "/usr/bin/prometheus")
ALERTMANAGER = os.environ.get("GS_ALERTMANAGER", "/usr/bin/prometheus-alertmanager")
CONTRIB = os.path.join(SRC, "contrib", "prometheus")
SCN = os.path.join(SRC, "tests/gpusim/scenarios/idle_held4.scn")
SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
FOR = "2s"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Receiver:
    """A loopback HTTP server that keeps every POST as (path, JSON body)."""

    def __init__(self):
        got = self.got = []
        lock = self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    got.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def messages(self):
        with self.lock:
            return list(self.got)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def start(sb, name, cmd, ready_url):
    log = open(os.path.join(sb.dir, name + ".log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    _state.setdefault("procs", []).append((p, log))

    def ready():
        check(p.poll() is None, f"{name} exited ({p.returncode}); see {name}.log in the sandbox (GS_KEEP=1)")
        try:
            with urllib.request.urlopen(ready_url, timeout=5):
                return True
        except OSError:
            return False
    wait_until(ready, f"{name} ready at {ready_url}", timeout=90, every=0.2)
    return p


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def rules_copy(sb):
    """The shipped rules with every `for:` shortened; returns the copy's path after checking that
    nothing else changed (so the expressions are the shipped ones, byte for byte)."""
    with open(os.path.join(CONTRIB, "gpuscope-alerts.yml")) as f:
        shipped = f.read()
    copy = re.sub(r"(?m)^(\s+for: )\S+$", r"\g<1>" + FOR, shipped)
    a, b = shipped.splitlines(), copy.splitlines()
    changed = [(x, y) for x, y in zip(a, b) if x != y]
    check(len(a) == len(b) and len(changed) == 5 and all(re.fullmatch(r"\s+for: \S+", x) for x, _ in changed),
          f"the copy differs from the shipped rules elsewhere than in the 5 rules' for: {changed}")
    check("avg_over_time(DCGM_FI_DEV_GPU_UTIL[10m]) < 10\n            and on (instance, gpu) DCGM_FI_DEV_FB_USED > 1024"
          in copy, "GpuscopeGpuIdle's expression is not the one this test was written for")
    path = os.path.join(sb.dir, "gpuscope-alerts.yml")
    with open(path, "w") as f:
        f.write(copy)
    return path


def routing_copy(sb, receiver):
    """contrib/prometheus/alertmanager.yml with the receivers' URLs on the loopback receiver and the
    grouping waits at 1 s; the routes, matchers, inhibitions and templates are the shipped ones."""
    with open(os.path.join(CONTRIB, "alertmanager.yml")) as f:
        cfg = f.read()
    subs = [(r"url: http://pager\.example\.internal/hooks/gpuscope", f"url: {receiver}/on-call", 1),
            (r"api_url: https://hooks\.slack\.com/services/\S+", f"api_url: {receiver}/slack", 2),
            (r"group_wait: \d+[smh]", "group_wait: 1s", 2), (r"group_interval: \d+[smh]", "group_interval: 1s", 2)]
    for pattern, repl, n in subs:
        cfg, done = re.subn(pattern, repl, cfg)
        check(done == n, f"alertmanager.yml: {pattern} replaced {done} times, expected {n}")
    path = os.path.join(sb.dir, "alertmanager.yml")
    with open(path, "w") as f:
        f.write(cfg)
    return path


def set_clock(sb, t):
    tmp = os.path.join(sb.dir, "clock.tmp")
    with open(tmp, "w") as f:
        f.write(str(t))
    os.replace(tmp, _state["clock"])


_state = {}


def setup(sb):
    receiver = _state["receiver"] = Receiver()
    _state["clock"] = os.path.join(sb.dir, "clock")
    set_clock(sb, 0)
    env = dict(sb.env, GPUSIM_SCENARIO=SCN, GPUSCOPE_NVML_LIB=SIM, GPUSIM_CLOCK=_state["clock"])
    agent = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:0", "--interval", "1s"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    _state.setdefault("procs", []).append((agent, None))
    _state["agent"] = agent
    line = agent.stdout.readline()
    check(line.startswith("gpuscope agent: metrics at http://127.0.0.1:"), f"no address line: {line!r}")
    _state["target"] = urllib.parse.urlparse(line.strip().rsplit(" ", 1)[1]).netloc

    am_port = free_port()
    start(sb, "alertmanager", [ALERTMANAGER, f"--config.file={routing_copy(sb, receiver.url)}",
                               f"--storage.path={os.path.join(sb.dir, 'am')}",
                               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
          f"http://127.0.0.1:{am_port}/-/ready")
    prom_port = free_port()
    cfg = os.path.join(sb.dir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                f"rule_files: ['{rules_copy(sb)}']\n"
                f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n"
                "scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n"
                f"      - targets: ['{_state['target']}']\n")
    start(sb, "prometheus", [PROMETHEUS, f"--config.file={cfg}", f"--web.listen-address=127.0.0.1:{prom_port}",
                             f"--storage.tsdb.path={os.path.join(sb.dir, 'tsdb')}"],
          f"http://127.0.0.1:{prom_port}/-/ready")


def close():
    for p, log in reversed(_state.get("procs", [])):
        if p.poll() is None:
            stop(p)
        if log:
            log.close()
    if "receiver" in _state:
        _state["receiver"].close()


sandbox = shared_sandbox(setup)
atexit.register(close)


def notifications(status=None):
    """The Slack messages the receiver got, as (channel, status, title, text)."""
    out = []
    for path, body in _state["receiver"].messages():
        if path == "/on-call":
            continue  # the pages: test_ab's and test_b's
        check(path == "/slack", f"a message to {path}: {body}")
        for a in body.get("attachments", []):
            st = "firing" if a.get("fallback", "").startswith("[FIRING") else "resolved"
            if status in (None, st):
                out.append((body.get("channel"), st, a.get("title"), a.get("text")))
    return out


def test_a_an_idle_gpu_fires_once_then_resolves_once():
    sb = sandbox()
    firing = wait_until(lambda: notifications("firing"), "a firing alert at the receiver", timeout=120)
    target = _state["target"]
    check(firing == [("#ml-training", "firing", f"GPU 2 of {target} idle with memory allocated",
                      f"GPU 2 (NVIDIA H100 80GB HBM3) on {target} averaged 2 % utilisation over 10 min while a "
                      "process holds its memory. `gpuscope report` on the run says why.\n")],
          f"firing: {firing}")
    set_clock(sb, 60)  # GPU 2 computes again: its 10-minute average climbs over 10 %
    resolved = wait_until(lambda: notifications("resolved"), "a resolved alert at the receiver", timeout=180)
    check([r[:3] for r in resolved] == [("#ml-training", "resolved", f"GPU 2 of {target} idle with memory allocated")],
          f"resolved: {resolved}")
    # nothing else was ever sent: no second firing, no alert for the free GPU 3 or the busy ones
    check(len(notifications()) == 2, f"all messages: {_state['receiver'].messages()}")


def pages(alertname):
    """The firing pages at the on-call receiver whose alerts are all alertname's."""
    return [b for p, b in _state["receiver"].messages()
            if p == "/on-call" and b["status"] == "firing" and
            all(a["labels"]["alertname"] == alertname for a in b["alerts"])]


def test_ab_an_xid_pages_the_on_call_webhook_with_its_code():
    sb = sandbox()
    set_clock(sb, 60)  # past GPU 1's Xid (test_a moved it there already when run before)
    got = wait_until(lambda: pages("GpuscopeGpuXid"), "the Xid page at the on-call webhook", timeout=120)
    target = _state["target"]
    alerts = got[0]["alerts"]
    check([(a["labels"]["gpu"], a["labels"]["xid"], a["labels"]["severity"]) for a in alerts] == [("1", "79", "critical")],
          f"alerts: {alerts}")
    check(alerts[0]["annotations"]["summary"] == f"GPU 1 of {target} reported Xid 79", f"alerts: {alerts}")


def test_b_an_agent_killed_pages_the_on_call_webhook():
    """kill -9 of the agent: Prometheus's scrapes fail (up == 0), GpuscopeTargetDown fires and the
    routing sends it to the on-call receiver, a generic webhook (Alertmanager's JSON, version 4)."""
    sandbox()
    agent = _state["agent"]
    _state["killed"] = True
    agent.kill()
    agent.wait()

    got = wait_until(lambda: pages("GpuscopeTargetDown"), "a page at the on-call webhook", timeout=120)
    target = _state["target"]
    check(len(got) == 1 and got[0]["version"] == "4", f"pages: {got}")
    alerts = got[0]["alerts"]
    check([(a["labels"]["alertname"], a["labels"]["instance"], a["labels"]["severity"]) for a in alerts] ==
          [("GpuscopeTargetDown", target, "critical")], f"alerts: {alerts}")
    check(alerts[0]["annotations"]["summary"] == f"gpuscope agent on {target} is down", f"alerts: {alerts}")


if __name__ == "__main__":
    run_tests(globals())
