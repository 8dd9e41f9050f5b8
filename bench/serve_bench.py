#!/usr/bin/env python3
"""bench/serve_bench: `gpuscope serve`'s figures (issue 14), printed beside their targets.

Over a stored run of DAYS at 10 Hz on GPUS GPUs (bench/serve_gen makes it, as store_bench would):
  - a 1,000-point window of one series over the whole run: server time (Server-Timing: a series
    answer is streamed, so this is its check before the series is built) p50 and p99, HTTP on
    loopback p50 and p99, the whole answer (targets < 10 ms p50, < 25 ms p99);
  - a one-hour zoom (target < 5 ms);
  - the run page painted in headless Chromium (target < 1 s), when puppeteer-core is installed;
  - a sample on screen after the agent took it: the live stream's lag behind a live run
    (target <= 2 s; the agent commits once per flush period, 1 s by default);
  - serve idle with no browser: CPU-s per hour and RSS (targets < 0.5 CPU-s/h, < 30 MiB).
usage: serve_bench.py [--build DIR] [--days D] [--gpus G] [--metrics M] [--idle-s S]"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "../build"))
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--metrics", type=int, default=2)
    ap.add_argument("--idle-s", type=float, default=60)
    ap.add_argument("--requests", type=int, default=300)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    gs = os.path.join(a.build, "gpuscope")
    d = tempfile.mkdtemp(prefix="gs-serve-bench-")
    store = "sqlite://" + os.path.join(d, "gs.db")
    env = dict(os.environ, GPUSCOPE_STORE=store, XDG_DATA_HOME=os.path.join(d, "xdg"))
    try:
        t0 = time.time()
        subprocess.run([os.path.join(a.build, "bench/serve_gen"), "--url", store, "--days", str(a.days), "--gpus",
                        str(a.gpus), "--metrics", str(a.metrics), "--dip-at", "300000.3", "--name", "week"],
                       check=True, stdout=subprocess.DEVNULL)
        npts = int(a.days * 86400 * 10) * a.gpus * a.metrics
        print(f"run: {a.days:g} days at 10 Hz, {a.gpus} GPUs x {a.metrics} metrics = {npts / 1e6:.0f} M points "
              f"(made in {time.time() - t0:.0f} s)")
        srv = subprocess.Popen([gs, "serve", "--listen", "127.0.0.1:0"], env=env, stdout=subprocess.PIPE, text=True)
        port = int(srv.stdout.readline().rsplit(":", 1)[1].strip().strip("/"))
        c = http.client.HTTPConnection("127.0.0.1", port)

        def get(path):
            t = time.perf_counter()
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            dt = (time.perf_counter() - t) * 1e3
            srv_ms = float(r.getheader("Server-Timing", "app;dur=nan").split("=")[1])
            if r.status != 200:
                raise SystemExit(f"GET {path}: {r.status} {body[:200]}")
            return json.loads(body), dt, srv_ms

        run, dt, sm = get("/api/runs/week")
        print(f"run answer (first, loads the view): {sm:.0f} ms server, {dt:.0f} ms HTTP")
        sid = next(s["id"] for s in run["series"] if s["name"] == "gpu.util_pct" and s["labels"] == "gpu=0")
        mid = run["run"]["duration_s"] / 2
        for label, q, target in (("whole run, 1,000 points", "", "< 10 ms p50, < 25 ms p99 HTTP"),
                                 ("one-hour zoom, 1,000 points", f"&from={mid}&to={mid + 3600}", "< 5 ms")):
            http_ms, srv_ms = [], []
            for _ in range(a.requests):
                _, dt, sm = get(f"/api/runs/week/series?id={sid}&points=1000{q}")
                http_ms.append(dt)
                srv_ms.append(sm)
            # a series answer is streamed: Server-Timing is its check and look-up, HTTP the whole answer
            print(f"{label}: server (check, before streaming) p50 {statistics.median(srv_ms):.2f} ms "
                  f"p99 {pct(srv_ms, 0.99):.2f} ms; "
                  f"HTTP p50 {statistics.median(http_ms):.2f} ms p99 {pct(http_ms, 0.99):.2f} ms   (target {target})")
        c.close()

        paint = os.path.join(HERE, "serve_paint.mjs")
        mods = os.path.join(a.build, "tests/e2e/node_modules/puppeteer-core")
        if shutil.which("node") and os.path.exists(mods) and os.path.exists("/usr/bin/chromium"):
            p = subprocess.run(["node", paint, f"http://127.0.0.1:{port}/#/run/week", mods, d],
                               capture_output=True, text=True, timeout=120)
            print((p.stdout.strip() or p.stderr.strip()) + "   (target < 1 s)")
        else:
            print("run page paint: not measured (node, puppeteer-core in the build or chromium missing)")

        # the live lag: a live run watched over the stream
        live = subprocess.Popen([gs, "run", "--quiet", "--name", "live", "--", "sleep", "12"], env=env)
        for _ in range(100):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/api/runs/live")
            r = c.getresponse()
            body = r.read()
            if r.status == 200:
                break
            time.sleep(0.1)
        start = json.loads(body)["run"]["start"]
        c.request("GET", "/api/runs/live/live")
        r = c.getresponse()
        lags, worst = [], []
        for line in r:
            line = line.decode()
            if line.startswith("data: {\"series\""):
                ser = [s for s in json.loads(line[6:])["series"] if s["t"]]
                now = time.time() - start
                lags.append(now - max(max(s["t"]) for s in ser))
                worst.append(now - min(min(s["t"]) for s in ser))
            if line.startswith("event: status"):
                break
        live.wait()
        c.close()
        worst = worst[1:]  # the first event holds what was committed before the stream began
        print(f"live: the newest sample of an event reaches the stream {statistics.median(lags):.2f} s after the agent "
              f"took it (median), the oldest {max(worst):.2f} s at most, over {len(lags)} events   "
              f"(target <= 2 s, plus one frame in the browser)")

        time.sleep(2)
        c0, t0 = cpu_s(srv.pid), time.time()
        time.sleep(a.idle_s)
        used = cpu_s(srv.pid) - c0
        print(f"idle, no browser: {used / (time.time() - t0) * 3600:.2f} CPU-s/h over {a.idle_s:.0f} s, "
              f"RSS {rss_mib(srv.pid):.1f} MiB   (targets < 0.5 CPU-s/h, < 30 MiB)")
        srv.terminate()
        srv.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
