"""The /metrics endpoint without Prometheus: `gpuscope run --listen` exports the job's steps, its
GPU processes and its process tree; the Grafana dashboard under contrib/ queries only metrics the
endpoint really exports; the token rules are serve's; --host-label picks the host label's name;
the scrapes of one tick share one render; the systemd unit under contrib/ passes systemd-analyze."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
BUSY8 = os.path.join(SRC, "tests/gpusim/scenarios/busy8_h200.scn")
DASHBOARD = os.path.join(SRC, "contrib/grafana/gpuscope-dashboard.json")
UNIT = os.path.join(SRC, "contrib/systemd/gpuscope-agent.service")
SYSTEMD_ANALYZE = os.environ.get("GS_SYSTEMD_ANALYZE") or shutil.which("systemd-analyze")


def sim_env(sb):
    return dict(sb.env, GPUSIM_SCENARIO=BUSY8, GPUSCOPE_NVML_LIB=SIM)


def get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.read().decode()


def status_of(url, token=None):
    try:
        return get(url, token)[0]
    except urllib.error.HTTPError as e:
        return e.code


def names(body):
    return {l.split("{")[0].split(" ")[0] for l in body.splitlines() if l and not l.startswith("#")}


def samples(body, name):
    """[(labels dict, value)] of one family in a text exposition."""
    out = []
    for l in body.splitlines():
        if l.startswith(name + "{") or l.startswith(name + " "):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', l.split("}")[0])) if "{" in l else {}
            out.append((labels, float(l.rsplit(" ", 1)[1])))
    return out


def wait_for(cond, limit, msg):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.3)
    raise AssertionError(msg)


def start_agent(sb, *args, env=None):
    p = subprocess.Popen([BIN, "agent", *args], env=env or sim_env(sb), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    check(" metrics at http://" in line, f"no address line: {line!r}; stderr: {p.stderr.read() if p.poll() is not None else ''}")
    return p, line.strip().rsplit(" ", 1)[1]


def stop(p):
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    check(rc == 0, f"exit status {rc}")


_state = {}

# A job reporting every phase (data wait, host-to-device copy, compute) over gs1, as the clients do.
_JOB = r"""
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
path = os.environ.get("GPUSCOPE_SOCKET")
for i in range(int(sys.argv[1])):
    t0 = time.monotonic(); time.sleep(0.05); t1 = time.monotonic(); time.sleep(0.01); t2 = time.monotonic()
    while time.monotonic() - t2 < 0.04:
        pass
    t3 = time.monotonic()
    if path:
        s.sendto(f"gs1 step {i} data={t1 - t0:.6f} h2d={t2 - t1:.6f} compute={t3 - t2:.6f} samples=32 t={t3:.6f}".encode(), path)
"""


def setup(sb):
    # A job of 0.05 s waiting for data, 0.01 s copying and 0.04 s computing per step, under `run --listen`.
    script = os.path.join(sb.dir, "phases_job.py")
    with open(script, "w") as f:
        f.write(_JOB)
    job = subprocess.Popen([BIN, "run", "--listen", "127.0.0.1:0", "--interval", "200ms", "--",
                            PYTHON, script, "200"], env=sim_env(sb), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    url = None
    for _ in range(50):
        line = job.stderr.readline()
        if "metrics at http://" in line:
            url = line.strip().rsplit(" ", 1)[1]
            break
    check(url, "run --listen printed no address")
    body = wait_for(lambda: (lambda b: b if all(n in b for n in ("gpuscope_step_h2d_ratio", "gpuscope_gpu_proc_mem_bytes",
                                                                 "gpuscope_gpu_proc_sm_ratio", "gpuscope_tree_dstate"))
                              else None)(get(url)[1]), 60, "no step or GPU process metrics from run --listen")
    _state["run_body"] = body
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=60)
    # A recording node agent: the doctor's findings after its first two flushes.
    agent, aurl = start_agent(sb, "--listen", "127.0.0.1:0", "--interval", "100ms", "--record")
    _state["agent_body"] = wait_for(lambda: (lambda b: b if "gpuscope_finding{" in b else None)(get(aurl)[1]), 60,
                                    "no gpuscope_finding from agent --record")
    stop(agent)


sandbox = shared_sandbox(setup)


def test_run_listen_exports_the_step_phases():
    sandbox()
    body = _state["run_body"]
    for name, lo, hi in (("gpuscope_step_data_wait_ratio", 0.25, 0.75), ("gpuscope_step_h2d_ratio", 0.02, 0.3),
                         ("gpuscope_step_compute_ratio", 0.15, 0.6)):
        vals = samples(body, name)
        check(len(vals) == 1 and lo < vals[0][1] < hi, f"{name}: {vals} (the job's phases: 0.05 / 0.01 / 0.04 s)")
        check(f"# HELP {name} " in body and f"# TYPE {name} gauge" in body, f"{name}: HELP/TYPE")
    sps = samples(body, "gpuscope_samples_per_second")
    check(len(sps) == 1 and 100 < sps[0][1] < 640, f"samples/s {sps} (32 samples per ~0.1 s step)")


def test_run_listen_exports_the_jobs_gpu_processes_and_tree():
    sandbox()
    body = _state["run_body"]
    procs = samples(body, "gpuscope_gpu_proc_mem_bytes")
    check(len(procs) == 8 and all(v == 118 * 2**30 for _, v in procs), f"per-process GPU memory: {procs}")
    check(len({l["pid"] for l, _ in procs}) == 1, f"one job process on every GPU: {procs}")
    check(samples(body, "gpuscope_tree_procs") and samples(body, "gpuscope_tree_cpu_ratio"), "no process-tree families")


def test_dashboard_queries_only_exported_metrics():
    sandbox()
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exported = names(_state["run_body"]) | names(_state["agent_body"])
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dash["templating"]["list"] if v.get("definition")]
    check(len(exprs) >= 10, f"only {len(exprs)} queries")
    ident = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[|\)|,|$|\s*/)")
    for e in exprs:
        used = {m for m in re.findall(r"\b(gpuscope_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)\b", e)}
        check(used, f"a query naming no gpuscope metric: {e}")
        missing = used - exported
        check(not missing, f"{e}: {sorted(missing)} not exported")
        # nothing else that looks like a metric name (a node-exporter name, a typo) outside the functions
        others = {m for m in ident.findall(e)} - used - {"by", "instance", "avg", "label_values", "sum", "rate",
                                                          "max", "min", "without"}
        check(not others, f"{e}: names {sorted(others)} that the endpoint does not export")


def test_finding_carries_its_rule_and_speedup():
    sandbox()
    f = samples(_state["agent_body"], "gpuscope_finding")
    check(f and all(l.get("rule") and v >= 1 for l, v in f), f"findings: {f}")


def test_non_loopback_needs_a_token():
    sb = sandbox()
    rc, out, err = sb.gs("agent", "--listen", "0.0.0.0:0", env={"GPUSIM_SCENARIO": BUSY8, "GPUSCOPE_NVML_LIB": SIM,
                                                                "GPUSCOPE_TOKEN": ""})
    check(rc == 2 and "needs a token" in err, f"rc {rc}: {err}")
    rc, out, err = sb.gs("agent", "--listen", "0.0.0.0:0", "--token", "x",
                         env={"GPUSIM_SCENARIO": BUSY8, "GPUSCOPE_NVML_LIB": SIM}, timeout=10)
    check(rc == 2 and "16 to 256 bytes" in err, f"a 1-byte token: rc {rc}: {err}")
    p, url = start_agent(sb, "--listen", "0.0.0.0:0", "--token", "s3cret-token-0123456")
    url = url.replace("0.0.0.0", "127.0.0.1")
    try:
        check(status_of(url) == 401, "no token: not refused")
        try:
            get(url)
        except urllib.error.HTTPError as e:
            check(e.headers.get("WWW-Authenticate", "").startswith("Bearer"), f"a 401 names the scheme: {e.headers}")
        check(status_of(url, "wrong-token!") == 401, "a wrong token: not refused")
        check(status_of(url, "s3cret-token-0123456") == 200, "the token: refused")
        for i in range(10):
            status_of(url, f"wrong-token-{i}")
        check(status_of(url, "s3cret-token-0123456") == 429, "after 10 wrong tokens the address waits")
    finally:
        stop(p)


def test_host_label_name_is_chosen():
    sb = sandbox()
    for flag, want, other in ((["--host-label", "Hostname"], "Hostname", "hostname"), ([], "hostname", "Hostname")):
        p, url = start_agent(sb, "--listen", "127.0.0.1:0", *flag)
        try:
            body = wait_for(lambda: (lambda b: b if "DCGM_FI_DEV_POWER_USAGE{" in b else None)(get(url)[1]), 30,
                            "no GPU metrics")
        finally:
            stop(p)
        rows = samples(body, "DCGM_FI_DEV_POWER_USAGE")
        check(all(want in l and other not in l for l, _ in rows), f"{flag}: {rows[0][0]}")


def test_scrapes_of_one_tick_share_one_render():
    sb = sandbox()
    p, url = start_agent(sb, "--listen", "127.0.0.1:0", "--interval", "5s")
    try:
        wait_for(lambda: "DCGM_FI_DEV_POWER_USAGE{" in get(url)[1], 30, "no GPU metrics")
        bodies = {get(url)[1] for _ in range(20)}
    finally:
        stop(p)
    # Twenty scrapes in well under one 5 s tick: one render (two should they straddle a tick).
    check(len(bodies) <= 2, f"{len(bodies)} different answers within one tick")


def test_a_scraper_keeps_its_connection():
    # HTTP/1.1 keep-alive: a scraper (Prometheus) sends every scrape on one connection, so a scrape
    # costs no connection and no thread of the agent's.
    import http.client
    sb = sandbox()
    p, url = start_agent(sb, "--listen", "127.0.0.1:0")
    try:
        u = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        socks = []
        for _ in range(3):
            conn.request("GET", u.path)
            r = conn.getresponse()
            body = r.read()
            check(r.status == 200 and len(body) == int(r.getheader("Content-Length", "-1")),
                  f"status {r.status}, Content-Length {r.getheader('Content-Length')} for {len(body)} bytes")
            check((r.getheader("Connection") or "").lower() != "close" and conn.sock is not None,
                  f"the agent closes the connection after a scrape (Connection: {r.getheader('Connection')})")
            socks.append(conn.sock)
        check(all(s is socks[0] for s in socks), "a new connection per scrape")
        conn.close()
    finally:
        stop(p)


def test_systemd_unit_verifies():
    sb = sandbox()
    if not SYSTEMD_ANALYZE:
        skip("systemd-analyze is not installed (Debian package systemd)")
    with open(UNIT) as f:
        text = f.read()
    check("ExecStart=/usr/bin/gpuscope agent" in text, "ExecStart")
    # verify wants ExecStart's binary to exist: the built one stands in for /usr/bin/gpuscope.
    unit = os.path.join(sb.dir, "gpuscope-agent.service")
    with open(unit, "w") as f:
        f.write(text.replace("/usr/bin/gpuscope", os.path.abspath(BIN)))
    p = subprocess.run([SYSTEMD_ANALYZE, "verify", unit], capture_output=True, text=True)
    check(p.returncode == 0 and not p.stderr.strip() and not p.stdout.strip(),
          f"systemd-analyze verify: rc {p.returncode}\n{p.stdout}{p.stderr}")
    # and the check can fail: a misspelt value is reported
    bad = os.path.join(sb.dir, "gpuscope-bad.service")
    with open(bad, "w") as f:
        f.write(text.replace("/usr/bin/gpuscope", os.path.abspath(BIN)).replace("Type=simple", "Type=simpel"))
    q = subprocess.run([SYSTEMD_ANALYZE, "verify", bad], capture_output=True, text=True)
    check(q.returncode != 0 or q.stderr.strip(), "a broken unit passed systemd-analyze verify")


if __name__ == "__main__":
    run_tests(globals())
