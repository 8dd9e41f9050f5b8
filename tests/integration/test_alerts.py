"""Alerts from the agent (src/alert/, docs/alerts.md): a loopback webhook receiver (http.server on
port 0) gets one "firing" when a simulated GPU goes idle and one "resolved" when it recovers; a
receiver that hangs (accepts, never answers) or refuses costs dropped or failed alerts, counted, and
not one tick of the agent's; a job that stops stepping fires the hang alert; a crash fires the exit
alert once, and --alert-cmd gets it as JSON on stdin; a malformed alerts.ini line is one line naming
the file and the line. The simulated GPU's scenario moves only when the test has seen the store hold
what the previous step produced (GPUSIM_CLOCK)."""
import csv
import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gstest import *

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")

INTERVAL = 0.1  # s: the sampling interval of every run here

_SCENARIO = """device 0-{last}
  name NVIDIA H100 PCIe
  cc 9.0
  memory 81559MiB
  power_limit 350
  max_clocks 1755 1593
  at 0 util={u0} mem_util=40 mem_used=20GiB power=300 temp=60
  at 10 util=1 mem_util=0 power=60
  at 20 util=95 mem_util=40 power=300
"""


class Receiver:
    """A webhook on 127.0.0.1 that answers 200 and keeps every POST as (path, JSON)."""

    def __init__(self):
        self.posts, self.lock = [], threading.Lock()
        recv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with recv.lock:
                    recv.posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def got(self, path=None):
        with self.lock:
            return [b for p, b in self.posts if path is None or p == path]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Hanging:
    """Accepts connections and never reads or answers."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(64)
        self.url = f"http://127.0.0.1:{self.s.getsockname()[1]}/hook"
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.conns.append(self.s.accept()[0])
            except OSError:
                return

    def close(self):
        self.s.close()
        for c in self.conns:
            c.close()


def refused_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}/hook"


class Watched:
    """`gpuscope run` of a job that waits for a stop file (or of cmd), on the simulated GPUs at the
    scenario time this test sets."""

    def __init__(self, sb, name, args, gpus=1, u0=95, cmd=None, scenario=_SCENARIO):
        check(os.path.exists(SIM), f"{SIM} is not built")
        self.sb, self.name = sb, name
        self.clock, self.stop = os.path.join(sb.dir, name + ".clock"), os.path.join(sb.dir, name + ".stop")
        scn = os.path.join(sb.dir, name + ".scn")
        with open(scn, "w") as f:
            f.write(scenario.format(last=gpus - 1, u0=u0))
        self.set(0)
        env = dict(sb.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=scn, GPUSIM_CLOCK=self.clock)
        self.err = open(os.path.join(sb.dir, name + ".err"), "w+")
        cmd = cmd or ["sh", "-c", f"while [ ! -e '{self.stop}' ]; do sleep 0.05; done"]
        self.p = subprocess.Popen([BIN, "run", "--name", name, "--interval", f"{INTERVAL}s", "--flush", "0.4s",
                                   "--alert-every", "0.4s", *args, "--", *cmd],
                                  env=env, stdout=self.err, stderr=self.err)

    def set(self, t):
        with open(self.clock + ".tmp", "w") as f:
            f.write(f"{t}\n")
        os.replace(self.clock + ".tmp", self.clock)

    def rows(self, *args):
        rc, out, _ = self.sb.gs("show", self.name, "--csv", *args)
        return list(csv.DictReader(io.StringIO(out))) if rc == 0 else []

    def wait(self, cond, what):
        return wait_until(cond, what, timeout=120, proc=self.p, every=0.1)

    def finish(self):
        open(self.stop, "w").close()
        rc = self.p.wait(timeout=120)
        self.err.seek(0)
        self.out = self.err.read()
        return rc

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.close()


def util_at(w, value):
    return any(r["name"] == "gpu.util_pct" and float(r["value"]) == value
               for r in w.rows("--metric", "gpu.util_pct"))


def params(sb, name):
    return {r["key"]: r["value"] for r in sb.csv("show", name, "--params", "--csv")}


def ticks_match_the_run(w):
    """The agent's own ticks: host.mem.used_bytes is read once per tick; a sampling loop held by a
    delivery would skip ticks (it never shifts its grid: it skips the missed ones)."""
    ts = sorted(float(r["t_s"]) for r in w.rows("--metric", "host.mem.used_bytes"))
    check(len(ts) >= 10, f"the run has {len(ts)} ticks")
    expected = round((ts[-1] - ts[0]) / INTERVAL) + 1
    check(len(ts) >= expected - max(2, expected // 4),
          f"{len(ts)} ticks where {expected} were due over {ts[-1] - ts[0]:.1f} s: sampling was held")


def test_an_idle_gpu_fires_one_alert_and_one_resolved():
    sb, rx = Sandbox(), Receiver()
    w = Watched(sb, "idle", ["--alert", "gpu_idle<10%:for=1s", "--alert-webhook", rx.url + "/json",
                             "--alert-slack", rx.url + "/slack"])
    try:
        w.wait(lambda: util_at(w, 95), "the busy GPU in the store")
        w.set(10)
        w.wait(lambda: rx.got("/json"), "the alert when the GPU goes idle")
        w.set(20)
        w.wait(lambda: len(rx.got("/json")) >= 2, "the alert resolved when the GPU is busy again")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        got = rx.got("/json")
        check([(b["state"], b["rule"], b["labels"]) for b in got] ==
              [("firing", "gpu_idle", "gpu=0"), ("resolved", "gpu_idle", "gpu=0")], f"one firing, one resolved: {got}")
        check("GPU 0 idle" in got[0]["title"] and got[0]["run"]["name"] == "idle", got[0])
        slack = rx.got("/slack")
        check(len(slack) == 2 and list(slack[0]) == ["text"] and "FIRING" in slack[0]["text"], f"Slack: {slack}")
        ev = [r for r in w.rows("--events") if r["kind"] == "alert"]
        check(len(ev) == 2 and ev[0]["text"].startswith("firing") and ev[1]["text"].startswith("resolved"),
              f"both in the run's events: {ev}")
    finally:
        w.close()
        rx.close()
        sb.close()


def _unanswered(make_url, what):
    """Four idle GPUs fire four alerts at once into a receiver that does not take them."""
    sb = Sandbox()
    url, srv = make_url()
    w = Watched(sb, "dead", ["--alert", "gpu_idle<10%:for=1s", "--alert-webhook", url, "--alert-set", "timeout=1s",
                             "--alert-set", "retries=1", "--alert-set", "queue=1"], gpus=4, u0=0)
    try:
        w.wait(lambda: len([r for r in w.rows("--events") if r["kind"] == "alert"]) == 4, "four alerts in the events")
        w.wait(lambda: len(w.rows("--metric", "host.mem.used_bytes")) >= 30, "a few more ticks")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        ticks_match_the_run(w)
        p = params(sb, "dead")
        check(p.get("alert.fired") == "4" and int(p.get("alert.dropped", "0")) >= 2,
              f"4 fired, the queue of 1 dropped some ({what}): {p}")
        check(p.get("alert.sent") == "0", f"none sent to a receiver that {what}: {p}")
        check("dropped" in w.out and "alerts: 4 fired" in w.out, "the summary says so:\n" + w.out)
        return p
    finally:
        w.close()
        if srv:
            srv.close()
        sb.close()


def test_a_receiver_that_hangs_costs_dropped_alerts_not_ticks():
    def hanging():
        h = Hanging()
        return h.url, h
    _unanswered(hanging, "never answers")


def test_a_receiver_that_refuses_costs_failed_and_dropped_alerts_not_ticks():
    p = _unanswered(lambda: (refused_url(), None), "refuses")
    check(int(p.get("alert.failed", "0")) >= 1, f"a refused delivery counts as failed: {p}")


_HOT_AND_FULL = """device 0
  name NVIDIA H100 PCIe
  memory 81559MiB
  at 0 util=95 mem_util=40 mem_used=78GiB power=340 temp=90 throttle=SwThermalSlowdown|HwThermalSlowdown
"""


def test_a_throttled_gpu_with_its_memory_nearly_full_fires_both_alerts():
    sb, rx = Sandbox(), Receiver()
    w = Watched(sb, "hot", ["--alert", "throttle>50%:for=1s", "--alert", "gpu_mem>95%:for=1s", "--alert",
                            "gpu_idle<10%:for=1s", "--alert-webhook", rx.url], scenario=_HOT_AND_FULL)
    try:
        w.wait(lambda: len(rx.got()) >= 2, "the throttle and memory alerts")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        firing = sorted((b["rule"], b["labels"]) for b in rx.got() if b["state"] == "firing")
        check(firing == [("gpu_mem", "gpu=0"), ("throttle", "gpu=0")], f"both, and not idle: {rx.got()}")
        mem = [b for b in rx.got() if b["rule"] == "gpu_mem"][0]
        check(97 < mem["value"] < 99, f"78 GiB of 79.6 GiB: {mem}")
    finally:
        w.close()
        rx.close()
        sb.close()


_STEPS_THEN_HANG = r'''
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(30):  # each step waits 60 ms for data with its CPU idle, then computes 20 ms
    t0 = time.monotonic(); time.sleep(0.06); t1 = time.monotonic()
    while time.monotonic() - t1 < 0.02:
        pass
    s.sendto(f"gs1 step {i} data={t1 - t0:.6f} compute={time.monotonic() - t1:.6f} samples=32 "
             f"t={time.monotonic():.6f}".encode(), os.environ["GPUSCOPE_SOCKET"])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
'''


def test_an_input_bound_job_that_stops_stepping_fires_the_finding_then_the_hang():
    sb, rx = Sandbox(), Receiver()
    job = os.path.join(sb.dir, "hang_job.py")
    with open(job, "w") as f:
        f.write(_STEPS_THEN_HANG)
    w = Watched(sb, "hung", ["--alert", "hang:for=1s", "--alert", "finding:gain=1.5", "--alert-webhook", rx.url],
                cmd=[PYTHON, job, os.path.join(sb.dir, "hung.stop")])
    try:
        w.wait(lambda: any(b["rule"] == "hang" for b in rx.got()), "the hang alert")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        got = rx.got()
        firing = [b for b in got if b["state"] == "firing" and b["rule"] == "hang"]
        check(len(firing) == 1 and "no step for" in firing[0]["text"], f"one hang alert: {got}")
        check("GPUs busy" in firing[0]["text"], "it says the GPUs were busy: " + firing[0]["text"])
        found = [b for b in got if b["state"] == "firing" and b["rule"] == "finding"]
        check(len(found) == 1 and found[0]["key"].startswith("finding input_"), f"one finding alert: {got}")
        check(found[0]["speedup"] >= 1.5 and found[0]["cost_s"] > 0 and found[0]["fix"], f"its cost and fix: {found}")
    finally:
        w.close()
        rx.close()
        sb.close()


def test_a_crash_fires_once_and_the_command_gets_the_json_though_the_webhook_refuses():
    sb = Sandbox()
    out, env = os.path.join(sb.dir, "alerts.jsonl"), os.path.join(sb.dir, "env.txt")
    cfg = os.path.join(sb.dir, "config", "gpuscope")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "alerts.ini"), "w") as f:
        f.write("; every run of this user\n[alerts]\nrule = exit\n")
    try:
        rc, _, err = sb.gs("run", "--interval", "0.2s", "--alert-webhook", refused_url(), "--alert-set", "retries=0",
                           "--alert-cmd",
                           f"cat >> '{out}'; echo \"$GPUSCOPE_ALERT_RULE $GPUSCOPE_ALERT_STATE\" >> '{env}'",
                           "--", "sh", "-c", "sleep 0.5; kill -SEGV $$")
        check(rc == 128 + 11, f"the run exits with the job's status: {rc}\n{err}")
        check(os.path.exists(out), "the command ran, though the webhook before it refused:\n" + err)
        with open(out) as f:
            got = [json.loads(l) for l in f if l.strip()]
        check(len(got) == 1 and got[0]["rule"] == "exit" and got[0]["state"] == "firing", f"one exit alert: {got}")
        check("signal 11" in got[0]["text"] and got[0]["title"] == "the run was killed", got[0])
        with open(env) as f:
            check(f.read() == "exit firing\n", "the command's environment names the alert")
    finally:
        sb.close()


def test_a_webhook_goes_through_the_proxy_the_environment_names():
    sb, rx = Sandbox(), Receiver()
    try:
        rc, _, err = sb.gs("run", "--alert", "exit", "--alert-webhook", "http://alerts.invalid/hook", "--", "sh", "-c",
                           "exit 3", env={"http_proxy": rx.url, "no_proxy": ""})
        check(rc == 3, f"the run exits with the job's status: {rc}\n{err}")
        with rx.lock:
            paths = [p for p, _ in rx.posts]
        check(paths == ["http://alerts.invalid/hook"], f"the proxy got the absolute URL, once: {paths}\n{err}")
        check(rx.got()[0]["title"] == "the run failed" and "status 3" in rx.got()[0]["text"], rx.got())
    finally:
        rx.close()
        sb.close()


def test_an_https_webhook_with_a_certificate_no_one_trusts_is_refused():
    import shutil
    import ssl
    openssl = shutil.which("openssl")
    if not openssl:
        skip("openssl (Debian's openssl) makes the test's certificate")
    sb, rx = Sandbox(), Receiver()
    try:
        key, crt = os.path.join(sb.dir, "k.pem"), os.path.join(sb.dir, "c.pem")
        subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                        "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        rx.srv.socket = ctx.wrap_socket(rx.srv.socket, server_side=True)
        port = rx.srv.server_address[1]
        rc, _, err = sb.gs("run", "--alert", "exit", "--alert-webhook", f"https://127.0.0.1:{port}/hook",
                           "--alert-set", "retries=0", "--", "sh", "-c", "exit 4")
        check(rc == 4, f"the run exits with the job's status: {rc}\n{err}")
        check(not rx.got() and "1 failed" in err and "certificate" in err.lower(),
              "the self-signed receiver never got the alert; the summary says why:\n" + err)
    finally:
        rx.close()
        sb.close()


def test_a_malformed_config_line_is_one_error_naming_the_line():
    sb = Sandbox()
    cfg = os.path.join(sb.dir, "config", "gpuscope")
    os.makedirs(cfg)
    path = os.path.join(cfg, "alerts.ini")
    try:
        for text, line, what in (("[alerts]\nrule = exit\nthis is not a setting\n", 3, "not a 'key = value'"),
                                 ("[alerts]\n\nrule = gpu_idle<lots\n", 3, "percentage"),
                                 ("[alerts]\nevery = 5s\nwebhook = ftp://x\n", 3, "http://"),
                                 ("[other]\nrule = exit\n", 2, "[alerts]")):
            with open(path, "w") as f:
                f.write(text)
            rc, _, err = sb.gs("run", "--", "true")
            lines = [l for l in err.splitlines() if l.strip()]
            check(rc == 2 and len(lines) == 1 and f"{path}:{line}:" in lines[0] and what in lines[0],
                  f"exit 2 and one line naming {path}:{line} ({what}): exit {rc}\n{err}")
        rc, _, err = sb.gs("run", "--alert", "gpu_idle>5%", "--alert-config", "none", "--", "true")
        check(rc == 2 and "gpu_idle takes '<'" in err and len(err.strip().splitlines()) == 1, f"a bad flag: {err}")
    finally:
        sb.close()


run_tests(globals())
