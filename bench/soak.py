#!/usr/bin/python3
"""bench/soak: gpuscope for a long while against a PostgreSQL store that keeps failing (issue 22).

    /usr/bin/python3 bench/soak.py --minutes N [--restart-every S] [--build DIR]

One `gpuscope run --interval 100ms --listen 127.0.0.1:0` on 8 simulated H200s (tests/gpusim,
busy8_h200.scn) writing into a real PostgreSQL server (tests/pg/pgserver.py), its job sending a
numbered tick 10 times a second (the ground truth); `gpuscope serve` on the same store with 10 live
viewers of the run (/api/runs/soak/live, each read as it streams); the agent's /metrics scraped
every second; the server shut down with `pg_ctl -m immediate` every --restart-every seconds
(default 180) and started again 5 s later. Every 30 s it prints the RSS and the open descriptors of
the agent and of serve; at the end the ticks the store holds against the ticks sent (lost, twice),
the run's status, and each process's memory first and last (target: flat memory, 0 lost, 0 twice,
`finished`). A benchmark, not a test: it takes as long as it is told.
"""
import argparse
import csv
import http.client
import io
import json
import shutil
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pg"))
import benchlib as bl  # noqa: E402
from pgserver import PgServer  # noqa: E402

TICK_JOB = r'''
import os, socket, sys, time
n, period = int(sys.argv[1]), float(sys.argv[2])
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t0 = time.monotonic()
for i in range(n):
    while time.monotonic() < t0 + i * period:
        time.sleep(0.005)
    if path:
        s.sendto(f"gs1 metric tick {i}".encode(), path)
'''


def proc_facts(pid):
    """(RSS KiB, open descriptors) of a live process, or (None, None)."""
    try:
        rss = bl.vm_kib(pid, "VmRSS")
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds
    except OSError:
        return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--restart-every", type=float, default=180, help="seconds between immediate shutdowns")
    ap.add_argument("--viewers", type=int, default=10)
    ap.add_argument("--build", default=None)
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gs = bl.program(build, "gpuscope")
    sim = bl.program(build, "tests/gpusim/libnvidia-ml.so.1")
    scn = os.path.join(bl.REPO, "tests/gpusim/scenarios/busy8_h200.scn")
    print(f"soak: {a.minutes:g} min, 8 simulated GPUs at 100 ms into PostgreSQL, serve with {a.viewers} live "
          f"viewers, /metrics every 1 s, pg_ctl -m immediate every {a.restart_every:g} s")
    print("machine: " + bl.machine_facts())
    d = tempfile.mkdtemp(prefix="gs-soak-")
    job = os.path.join(d, "tick_job.py")
    with open(job, "w") as f:
        f.write(TICK_JOB)
    n_ticks = int(a.minutes * 60 * 10)
    stop = threading.Event()
    with PgServer() as pg:
        env = pg.env(dict(os.environ, GPUSCOPE_STORE=pg.url("soak"), GPUSCOPE_SPOOL_DIR=os.path.join(d, "spool"),
                          XDG_DATA_HOME=os.path.join(d, "xdg"), GPUSCOPE_NVML_LIB=sim, GPUSIM_SCENARIO=scn))
        procs = []  # stopped whatever happens (a ^C, a failure), so nothing is left running
        try:
            agent_err = open(os.path.join(d, "agent.err"), "w+")
            agent = subprocess.Popen([gs, "run", "--name", "soak", "--interval", "100ms", "--listen", "127.0.0.1:0", "--",
                                      "/usr/bin/python3", job, str(n_ticks), "0.1"], env=env, stderr=agent_err,
                                     stdout=subprocess.DEVNULL)
            procs.append(agent)
            metrics_port = None
            for _ in range(600):
                agent_err.seek(0)
                for line in agent_err.read().splitlines():
                    if "metrics at http://" in line:
                        metrics_port = int(line.rsplit(":", 1)[1].split("/")[0])
                if metrics_port or agent.poll() is not None:
                    break
                time.sleep(0.1)
            if not metrics_port:
                agent_err.seek(0)
                sys.exit("soak: the agent did not say its /metrics address:\n" + agent_err.read())
            srv = subprocess.Popen([gs, "serve", "--listen", "127.0.0.1:0"], env=env, stdout=subprocess.PIPE, text=True,
                                   stderr=subprocess.DEVNULL)
            procs.append(srv)
            serve_port = int(srv.stdout.readline().rsplit(":", 1)[1].strip().strip("/"))
            counts = {"scrapes": 0, "scrape_fail": 0, "live_events": 0, "live_reconnects": 0, "restarts": 0}
            lock = threading.Lock()

            def scraper():
                while not stop.is_set():
                    try:
                        c = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10)
                        c.request("GET", "/metrics")
                        r = c.getresponse()
                        r.read()
                        with lock:
                            counts["scrapes" if r.status == 200 else "scrape_fail"] += 1
                        c.close()
                    except OSError:
                        with lock:
                            counts["scrape_fail"] += 1
                    stop.wait(1.0)

            def viewer():
                while not stop.is_set():
                    try:
                        c = http.client.HTTPConnection("127.0.0.1", serve_port, timeout=60)
                        c.request("GET", "/api/runs/soak/live")
                        r = c.getresponse()
                        for line in r:
                            if line.startswith(b"data: "):
                                with lock:
                                    counts["live_events"] += 1
                            if stop.is_set() or line.startswith(b"event: status"):
                                break
                        c.close()
                    except OSError:
                        pass
                    with lock:
                        counts["live_reconnects"] += 1
                    stop.wait(1.0)

            def restarter():
                while not stop.wait(a.restart_every):
                    try:
                        pg._run("pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "-t", "60", "stop")
                        stop.wait(5)
                        pg.start()
                        with lock:
                            counts["restarts"] += 1
                    except RuntimeError as e:
                        print(f"soak: restart failed: {e}")

            threads = [threading.Thread(target=scraper, daemon=True), threading.Thread(target=restarter, daemon=True)]
            threads += [threading.Thread(target=viewer, daemon=True) for _ in range(a.viewers)]
            for t in threads:
                t.start()
            t0 = time.monotonic()
            first = {}
            last = {}
            print(f"{'t_min':>6} {'agent_rss_kib':>13} {'agent_fds':>9} {'serve_rss_kib':>13} {'serve_fds':>9} "
                  f"{'scrapes':>7} {'live_events':>11} {'restarts':>8}")
            while agent.poll() is None:
                now = time.monotonic() - t0
                ar, af = proc_facts(agent.pid)
                sr, sf = proc_facts(srv.pid)
                if ar is not None:
                    first.setdefault("agent", (ar, af))
                    last["agent"] = (ar, af)
                first.setdefault("serve", (sr, sf))
                last["serve"] = (sr, sf)
                with lock:
                    c = dict(counts)
                print(f"{now / 60:6.1f} {ar or 0:13d} {af or 0:9d} {sr or 0:13d} {sf or 0:9d} {c['scrapes']:7d} "
                      f"{c['live_events']:11d} {c['restarts']:8d}", flush=True)
                for _ in range(300):
                    if agent.poll() is not None:
                        break
                    time.sleep(0.1)
            stop.set()
            rc = agent.wait()
            wall = time.monotonic() - t0
            if not os.path.exists(os.path.join(pg.data, "postmaster.pid")):
                pg.start()
            agent_err.seek(0)
            err = agent_err.read()
            # the next run replays what the last outage left, if the run ended in one
            subprocess.run([gs, "run", "--quiet", "--name", "after", "--", "true"], env=env, capture_output=True)
            r = subprocess.run([gs, "show", "soak", "--metric", "tick", "--csv"], env=env, capture_output=True, text=True)
            values = [float(row["value"]) for row in csv.DictReader(io.StringIO(r.stdout))]
            runs = json.loads(subprocess.run([gs, "runs", "--json"], env=env, capture_output=True, text=True).stdout or "[]")
            soak = [x for x in runs if x.get("name") == "soak"]
            srv.terminate()
            srv.wait()
            distinct = len(set(values))
            print(f"ran {wall / 60:.1f} min; agent exit {rc}; {counts['restarts']} immediate shutdowns; "
                  f"{counts['scrapes']} scrapes ({counts['scrape_fail']} failed); {counts['live_events']} live events")
            print(f"ticks: {n_ticks} sent, {distinct} stored, {n_ticks - distinct} lost, {len(values) - distinct} twice"
                  f"   (target 0 lost, 0 twice)")
            print(f"run: {soak[0]['status'] if soak else '?'}, exit {soak[0].get('exit_code') if soak else '?'}"
                  f"   (target finished, exit 0)")
            for k in ("agent", "serve"):
                if k in first:
                    print(f"{k}: RSS {first[k][0]} -> {last[k][0]} KiB, descriptors {first[k][1]} -> {last[k][1]}"
                          f"   (target flat)")
            notes = [line for line in err.splitlines() if line.startswith("gpuscope:")]
            for line in notes[:6]:
                print("  agent said: " + line)
        finally:
            stop.set()
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait()
            if not os.environ.get("GS_KEEP"):
                shutil.rmtree(d, ignore_errors=True)

    return 0


if __name__ == "__main__":
    sys.exit(main())
