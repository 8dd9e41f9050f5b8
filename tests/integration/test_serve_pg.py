"""`gpuscope serve` and `gpuscope top` on a PostgreSQL store (a real server, tests/pg/pgserver.py; the
password travels in a libpq password file, PGPASSFILE, never in a URL or on screen).

The same runs are made in a SQLite store and in the server by bench/serve_gen (deterministic values,
the same start times: a run, and a group of two nodes' runs), and serve's API answers the same on
both — the runs list, a run, a run's series downsampled, a group, compare — once the ids each store
gives are mapped to names. A live run is written by an agent (its own connection) while serve reads
it from the server, beside the same job's run in SQLite: listed as running with the same series and
figures, a series window with data, the live stream's samples; `top --store postgresql://...` in tmux
shows its eight GPUs."""
import http.client
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
from gstest import *  # noqa: E402,F401,F403
from pgserver import PASSWORD, PgServer  # noqa: E402
from test_serve_api import Server  # noqa: E402
from test_top import SCN, SIM, TMUX, Term, gpu_line, keep  # noqa: E402

GEN = os.path.join(BUILD, "bench/serve_gen")
T0 = 1764547200.0  # 2025-12-01 00:00 UTC: every generated run's start, in both stores
LIVE_STEPS = 400


def gen(sb, url, name, *args):
    p = subprocess.run([GEN, "--url", url, "--name", name, *args], capture_output=True, text=True, env=sb.env,
                       timeout=300)
    check(p.returncode == 0, f"serve_gen {name} on {url}: {p.stderr}")
    return p.stdout.strip()


_made = {}


def setup():
    if _made:
        return _made
    pg = PgServer()
    _made["pg"] = pg
    sb = Sandbox()
    sb.env = pg.env(sb.env)
    sb.env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
    _made["sb"] = sb
    urls = {"sqlite": sb.store, "pg": pg.url("serve")}
    _made["urls"] = urls
    ids = {}
    for kind, url in urls.items():
        ids[kind] = {
            gen(sb, url, "synth", "--hours", "0.5", "--gpus", "2", "--hz", "10", "--metrics", "6", "--dip-at", "600",
                "--start", str(T0)): "synth",
            gen(sb, url, "pair-a", "--hours", "0.1", "--gpus", "2", "--group", "pair", "--host", "nodea", "--start",
                str(T0 + 3600)): "pair-a",
            gen(sb, url, "pair-b", "--hours", "0.1", "--gpus", "2", "--group", "pair", "--host", "nodeb", "--start",
                str(T0 + 3605)): "pair-b",
        }
    _made["ids"] = ids
    _made["servers"] = {kind: Server(sb, "--store", url) for kind, url in urls.items()}
    return _made


def normal(doc, ids):
    """The answer with each store's run ids replaced by the run's name, series ids by their identity."""
    text = json.dumps(doc, sort_keys=True)
    for rid, name in ids.items():
        text = text.replace(rid, "RUN:" + name)
    doc = json.loads(text)

    def walk(x):
        if isinstance(x, dict):
            if "id" in x and "name" in x and "labels" in x and isinstance(x["id"], int):
                x["id"] = f"{x.get('source', '')}/{x['name']}/{x['labels']}"
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return doc


def both(path):
    m = setup()
    got = {kind: normal(sv.json(path), m["ids"][kind]) for kind, sv in m["servers"].items()}
    return got["sqlite"], got["pg"]


def same(path):
    lite, pg = both(path)
    if lite != pg:
        a, b = json.dumps(lite, sort_keys=True, indent=1).splitlines(), json.dumps(pg, sort_keys=True, indent=1).splitlines()
        diff = [f"  sqlite: {x}\n  pg:     {y}" for x, y in zip(a, b) if x != y][:8]
        check(False, f"GET {path} differs between SQLite and PostgreSQL:\n" + "\n".join(diff))
    return pg


def test_runs_list_is_the_same_on_both_stores():
    doc = same("/api/runs")
    names = sorted(r["name"] for r in doc["runs"])
    check(names == ["pair-a", "pair-b", "synth"], f"runs: {names}")


def test_a_run_and_its_series_are_the_same_on_both_stores():
    run = same("/api/runs/synth")
    check(len(run["gpus"]) == 2 and run["gpus"][0]["util"] is not None, f"the run's GPUs: {run['gpus']}")
    check(len(run["series"]) == 12, f"2 GPUs x 6 metrics: {len(run['series'])}")
    s = same("/api/runs/synth/series?name=gpu.util_pct&labels=gpu=0&points=300")
    ser = s["series"][0]
    check(0 < len(ser["t"]) <= 300 and min(v for v in ser["min"] if v is not None) == 0,
          f"the window keeps the dip: {len(ser['t'])} points, min {min(v for v in ser['min'] if v is not None)}")
    same("/api/runs/synth/series?name=gpu.power_w&from=590&to=620&points=2000")
    same("/api/runs/synth/findings")


def test_a_group_is_the_same_on_both_stores():
    g = same("/api/runs/pair")
    check(g["run"]["host"] == "nodea, nodeb" and len(g["gpus"]) == 4, f"the group's hosts and GPUs: {g['run']}")
    check(g["params"].get("group.gpu.3.host") == "nodeb", f"GPU 3 on nodeb: {g['params']}")
    same("/api/runs/pair/series?name=gpu.util_pct&labels=gpu=3&points=100")
    cmp = same("/api/compare?runs=pair,synth")
    check([r["id"] for r in cmp["runs"]] == ["pair", "RUN:synth"], f"compare: {[r['id'] for r in cmp['runs']]}")


def test_serve_never_prints_a_password_from_the_url():
    m = setup()
    url = f"postgresql://gpuscope:{PASSWORD}@127.0.0.1:{m['pg'].port}/nosuchdb"
    rc, out, err = m["sb"].gs("serve", "--listen", "127.0.0.1:0", "--store", url, timeout=60)
    check(rc == 3 and err.startswith("gpuscope: "), f"serve on a missing database: rc {rc}, {err!r}")
    check(PASSWORD not in out + err, f"the password was printed: {err!r}")


def wait_store(sb, url):
    deadline = time.time() + 60
    while time.time() < deadline:
        if sb.gs("runs", "--store", url)[0] == 0:
            return
        time.sleep(0.2)
    check(False, f"no store at {url} after a minute")


def test_a_live_run_on_postgresql_reads_as_on_sqlite():
    m = setup()
    sb, pg = m["sb"], m["pg"]
    # stores of their own: the lists the other tests compare stay without it
    urls = {"sqlite": "sqlite://" + os.path.join(sb.dir, "live.db"), "pg": pg.url("live")}
    jobs, servers = {}, {}
    for kind, url in urls.items():
        e = dict(sb.env, GPUSCOPE_STORE=url, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=SCN)
        jobs[kind] = subprocess.Popen([BIN, "run", "--quiet", "--interval", "200ms", "--name", "live", "--",
                                       *sb.step_job(0.01, 0.02, LIVE_STEPS)], env=e, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
    try:
        for kind, url in urls.items():
            wait_store(sb, url)
            servers[kind] = Server(sb, "--store", url)
        check_live(m, servers)
        check_live_stream(servers["pg"])
        check_top(sb, urls["pg"])
    finally:
        for p in jobs.values():
            p.wait(timeout=120)
    for kind, p in jobs.items():
        check(p.returncode == 0, f"the {kind} agent exited {p.returncode}: {p.stderr.read()}")
    try:
        fin = {kind: sv.json("/api/runs/live") for kind, sv in servers.items()}
        for kind, r in fin.items():
            check(r["run"]["status"] == "finished", f"{kind}: finished: {r['run']['status']}")
        names = {k: sorted({(s["source"], s["name"]) for s in r["series"]}) for k, r in fin.items()}
        check(names["pg"] == names["sqlite"], f"the finished runs' series: {set(names['pg']) ^ set(names['sqlite'])}")
    finally:
        for sv in servers.values():
            sv.p.terminate()
            sv.p.wait(timeout=30)


def check_live(m, servers):
    """Both stores' live run, while its agent writes it: running, the same GPU series, data in a window."""
    runs = {}
    deadline = time.time() + 60
    while time.time() < deadline and len(runs) < 2:
        for kind, sv in servers.items():
            st, _, body = sv.get("/api/runs/live")
            r = json.loads(body) if st == 200 else None
            if r and all(any(s["name"] == n and s["count"] > 3 for s in r["series"])
                         for n in ("step.total_s", "gpu.util_pct")):
                runs[kind] = r
        time.sleep(0.3)
    check(len(runs) == 2, f"the live run did not show up on both stores: {list(runs)}")
    for kind, r in runs.items():
        check(r["run"]["status"] == "running", f"{kind}: the live run is running: {r['run']['status']}")
    # the GPUs' own series (a process's carry its pid, which differs between the two jobs)
    ident = {k: sorted((s["source"], s["name"], s["labels"]) for s in r["series"]
                       if s["source"] == "nvml" and "pid=" not in s["labels"]) for k, r in runs.items()}
    check(ident["pg"] == ident["sqlite"] and len(ident["pg"]) >= 8,
          f"the live run's GPU series differ: {set(ident['pg']) ^ set(ident['sqlite'])}")
    check(len(runs["pg"]["gpus"]) == 8 and runs["pg"]["gpus"][0]["util"] is not None,
          f"the live run's GPUs on PostgreSQL: {runs['pg']['gpus']}")
    for kind, sv in servers.items():
        row = next(r for r in sv.json("/api/runs")["runs"] if r["name"] == "live")
        check(row["status"] == "running" and row["gpus"] == 8, f"{kind}: the runs list's live row: {row}")
        s = sv.json("/api/runs/live/series?name=gpu.util_pct&labels=gpu=0")["series"][0]
        check(any(v is not None for v in s["mean"]), f"{kind}: a live series window has data: {s}")


def check_live_stream(sv):
    """The live stream of the run still being written, from the server: new samples come."""
    c = http.client.HTTPConnection("127.0.0.1", sv.port, timeout=30)
    c.request("GET", "/api/runs/live/live")
    r = c.getresponse()
    check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream", f"live -> {r.status}")
    events, n = [], 0
    for line in r:
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            events.append(line[7:])
        elif line.startswith("data: ") and events and events[-1] == "samples":
            n += sum(len(s["t"]) for s in json.loads(line[6:])["series"])
        if events.count("samples") >= 2:
            break
    c.close()
    check(n > 0, f"the live stream sent samples from the server: {events}")


def check_top(sb, url):
    """`top --store postgresql://...` in tmux: the live run's eight GPUs."""
    if not TMUX:
        return
    term = Term(sb, [BIN, "top", "--store", url, "live"])
    try:
        s = term.wait_for(lambda x: all(gpu_line(x, g) for g in range(8)) and "97%" in gpu_line(x, 0),
                          "top on PostgreSQL shows the live run's eight GPUs", timeout=60)
        keep("postgresql-live.txt", s)
        check("running" in s.splitlines()[0], f"the run is live: {s.splitlines()[0]}")
        check(PASSWORD not in term.screen(escapes=True), "the password is on top's screen")
        check(re.search(r"steps \d+", s), f"the live run's steps: {s}")
        term.keys("q")
        s = term.wait_for(lambda x: "EXIT=" in x, "q quits")
        check("EXIT=0" in s, f"top of a run it did not launch exits 0: {s}")
    finally:
        term.close()


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a ctest timeout still stops the server
    try:
        run_tests(globals())
    finally:
        for sv in _made.get("servers", {}).values():
            sv.p.terminate()
            sv.p.wait(timeout=30)
        if "sb" in _made:
            _made["sb"].close()
        if "pg" in _made:
            _made["pg"].close()
