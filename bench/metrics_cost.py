"""bench/metrics_cost: what Prometheus scraping costs `gpuscope agent` (issue 16).

Node agents at --interval 1s, on the same simulated 8 x H200 node (tests/gpusim, busy8_h200.scn),
and Debian's prometheus-node-exporter (default collectors), all at once, each scraped its own way:

  never scraped (an 8-GPU agent only), every 15 s by a curl loop (8-GPU agent only), and, for each
  of the 8-GPU agent, a host-only agent (no NVML) and node-exporter, every 1 s by
  - curl: a loop forking `curl` for every scrape (bench/agents.py's scraper): a new process and
    a new connection each time;
  - keep-alive: a small stdlib Python loop (http.client) keeping one HTTP/1.1 connection open;
  - Prometheus: a real server (Debian's /usr/bin/prometheus, a temp data dir, loopback,
    scrape_interval 1s), one per target, so its CPU is that target's alone; beside them one
    Prometheus scraping nothing, whose CPU (its own upkeep) is taken off to give a target's share
    of a server that scrapes many nodes.

Each process is measured in CPU-seconds per hour over the same window (benchlib.Meter: its own
cgroup, so threads and the curls count). The kept-alive scrapers' connections are counted (from
/proc/net/tcp during the window and the Python loop's own count), so a server that closes after
each answer shows. Targets: the agent scraped every second costs at most 1.3x the unscraped one, and
it is at least 10x below node-exporter, with and without the scrapers. The simulator's own CPU is
inside each 8-GPU agent (it is the agent's libnvidia-ml; GPUSIM_CPU_FILE), so those figures are
also shown without it.

usage: bench/metrics_cost.py [--build DIR] [--minutes M] [--scrapers curl,keepalive,prometheus]"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from agents import free_port, wait_http  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"

# One HTTP/1.1 connection, a GET /metrics every EVERY s; at SIGTERM prints what it did.
KEEPALIVE = r"""
import http.client, signal, sys, time
host, port, every = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
st = {"scrapes": 0, "connections": 0, "errors": 0, "bytes": 0}
def end(*_):
    print(" ".join(f"{k}={v}" for k, v in st.items()), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, end)
conn, t = None, time.monotonic()
while True:
    try:
        if conn is None:
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.connect()
            st["connections"] += 1
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        st["bytes"] += len(r.read())
        st["scrapes"] += 1
        if r.will_close:
            conn.close()
            conn = None
    except (OSError, http.client.HTTPException):
        st["errors"] += 1
        if conn:
            conn.close()
        conn = None
    t += every
    time.sleep(max(0.0, t - time.monotonic()))
"""

TARGETS = ("agent", "host-only agent", "node-exporter")
IDLE = "Prometheus scraping nothing (its own upkeep)"


class Bench:
    def __init__(self, a, build):
        self.a = a
        self.gpuscope = bl.program(build, "gpuscope")
        self.env = dict(os.environ, GPUSIM_SCENARIO=os.path.join(bl.REPO, "tests/gpusim/scenarios/busy8_h200.scn"),
                        GPUSCOPE_NVML_LIB=bl.program(build, "tests/gpusim/libnvidia-ml.so.1"))
        self.tmp = tempfile.mkdtemp(prefix="gs-metrics-cost-")
        self.rows = []  # (label, meter)
        self.simcpu = {}  # label -> GPUSIM_CPU_FILE
        self.kept = {}  # label of a kept-alive scraper -> (target port, its log)
        self.proms = {}  # label of a Prometheus -> its URL
        self.seen = {}  # target port -> client ports seen in ESTABLISHED

    def start(self, label, argv, **kw):
        m = bl.Meter(re.sub(r"[^a-z0-9]+", "-", label))
        log = os.path.join(self.tmp, m.name + ".log")
        with open(log, "w") as f:
            m.popen(argv, stdout=f, stderr=f, **kw)
        self.rows.append((label, m))
        return log

    def exporter(self, label, kind):
        """Starts an exporter; returns (URL, port)."""
        port = free_port()
        if kind == "node-exporter":
            self.start(label, ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}"])
        else:
            gpus = kind == "agent"
            e = dict(self.env, GPUSIM_CPU_FILE=os.path.join(self.tmp, f"sim{len(self.rows)}.cpu")) if gpus else \
                dict(os.environ, GPUSCOPE_NVML_LIB=os.path.join(self.tmp, "no-nvml.so"))
            if gpus:
                self.simcpu[label] = e["GPUSIM_CPU_FILE"]
            self.start(label, [self.gpuscope, "agent", "--quiet", "--interval", "1s", "--listen", f"127.0.0.1:{port}"],
                       env=e)
        url = f"http://127.0.0.1:{port}/metrics"
        if wait_http(url) is None:
            sys.exit(f"metrics_cost: {label} did not answer; see {self.tmp}")
        return url, port

    def scraper(self, how, label, url, port, every=1):
        if how == "curl":
            self.start(label, ["/bin/sh", "-c", f"while :; do curl -s -o /dev/null {url}; sleep {every}; done"])
        elif how == "keepalive":
            script = os.path.join(self.tmp, "keepalive.py")
            with open(script, "w") as f:
                f.write(KEEPALIVE)
            self.kept[label] = (port, self.start(label, [sys.executable, script, "127.0.0.1", str(port), str(every)]))
            self.seen[port] = set()
        else:
            self.prometheus(label, port, every)

    def prometheus(self, label, port, every=1):
        """A Prometheus server scraping 127.0.0.1:port every `every` s (port None: nothing)."""
        d = os.path.join(self.tmp, re.sub(r"[^a-z0-9]+", "-", label))
        os.makedirs(d)
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write(f"global:\n  scrape_interval: {every}s\n  scrape_timeout: {every}s\n")
            if port:
                f.write("scrape_configs:\n  - job_name: bench\n    static_configs:\n"
                        f"      - targets: ['127.0.0.1:{port}']\n")
        web = free_port()
        self.start(label, [PROMETHEUS, f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/data",
                           f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"])
        if port:
            self.proms[label] = (f"http://127.0.0.1:{web}", port)
            self.seen[port] = set()

    def sample_connections(self):
        """Notes the client ports of the established connections to the kept-alive targets."""
        for path in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                lines = open(path).read().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                f = line.split()
                lport = int(f[1].rsplit(":", 1)[1], 16)
                if f[3] == "01" and lport in self.seen:
                    self.seen[lport].add(int(f[2].rsplit(":", 1)[1], 16))

    def prom_query(self, label, q):
        url = self.proms[label][0] + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            r = json.load(urllib.request.urlopen(url, timeout=10))["data"]["result"]
            return float(r[0]["value"][1]) if r else float("nan")
        except (OSError, ValueError, KeyError, IndexError):
            return float("nan")


def setup(b, scrapers):
    """Starts every exporter and scraper; returns the 8-GPU agent's URL scraped every 1 s (for one body)."""
    b.exporter("agent, not scraped", "agent")
    b.exporter("host-only agent, not scraped", "host-only agent")
    url, port = b.exporter("agent, scraped every 15 s (curl)", "agent")
    b.scraper("curl", "  its scraper: curl every 15 s", url, port, 15)
    if "prometheus" in scrapers:  # its upkeep, whatever it scrapes: what a target's share is measured against
        b.prometheus(IDLE, None)
    one = None
    for how in scrapers:
        for kind in TARGETS:
            if kind == "node-exporter" and not shutil.which("prometheus-node-exporter"):
                continue
            url, port = b.exporter(f"{kind}, every 1 s ({how})", kind)
            one = one or url
            b.scraper(how, f"  its scraper: {how} ({kind})", url, port)
    return one


def measure(b, window, warmup):
    time.sleep(warmup)
    c1 = {id(m): m.cpu_s() for _, m in b.rows}
    t1 = time.monotonic()
    next_note = t1 + 30
    while time.monotonic() - t1 < window:
        time.sleep(min(2, max(0.0, window - (time.monotonic() - t1))))
        b.sample_connections()
        if time.monotonic() >= next_note:
            print(f"  ... {(time.monotonic() - t1) / 60:.1f} of {window / 60:.1f} min", file=sys.stderr, flush=True)
            next_note += 30
    c2 = {id(m): m.cpu_s() for _, m in b.rows}
    wall = time.monotonic() - t1
    prom = {label: (b.prom_query(label, f'count_over_time(up{{job="bench"}}[{int(window)}s])'),
                    b.prom_query(label, f'avg_over_time(scrape_duration_seconds{{job="bench"}}[{int(window)}s])'),
                    b.prom_query(label, 'scrape_samples_scraped{job="bench"}')) for label in b.proms}
    return {label: bl.per_hour(c2[id(m)] - c1[id(m)], wall) for label, m in b.rows}, prom


def sim_per_hour(b, life):
    """The simulator's CPU (written at the agent's exit: its whole life, per hour of that life)."""
    sim = {}
    for label, path in b.simcpu.items():
        try:
            sim[label] = int(open(path).read().split()[0]) / 1e9 / life * 3600
        except (OSError, ValueError, IndexError):
            pass
    return sim


def report_table(b, cost, sim, prom):
    print(f"{'process':52} {'CPU-s/h':>9} {'of it the simulated driver':>28}")
    for label, _ in b.rows:
        extra = f"{sim[label]:28.2f}" if label in sim else ""
        print(f"{label:52} {cost[label]:9.2f}{extra}")
    print("\nkept-alive scrapers (connections seen in /proc/net/tcp during the window; the loop's own count):")
    for label, (port, log) in b.kept.items():
        own = open(log).read().strip().splitlines()
        print(f"  {label.strip():44} {len(b.seen.get(port, ())):3} seen   {own[-1] if own else '?'}")
    for label, (_, port) in b.proms.items():
        n, dur, smp = prom[label]
        print(f"  {label.strip():44} {len(b.seen.get(port, ())):3} seen   scrapes={n:.0f} "
              f"mean scrape {dur * 1000:.2f} ms, {smp:.0f} samples per scrape")


def report_ratios(cost, sim, scrapers):
    base, hbase = cost["agent, not scraped"], cost["host-only agent, not scraped"]
    own = {k: cost[k] - v for k, v in sim.items()}
    print(f"\nscraped every 15 s (curl) / not scraped: {cost['agent, scraped every 15 s (curl)'] / base:.2f}x")
    for how in scrapers:
        us, hus = f"agent, every 1 s ({how})", f"host-only agent, every 1 s ({how})"
        s1 = cost[us]
        print(f"scraped every 1 s ({how}) / not scraped: {s1 / base:.2f}x   (target <= 1.3x): "
              f"{'met' if s1 <= 1.3 * base else 'NOT met'}; host-only {cost[hus] / hbase:.2f}x")
        print(f"  agent CPU per scrape: host-only {(cost[hus] - hbase) / 3.6:.3f} ms, 8-GPU without the simulated "
              f"driver {(own[us] - own['agent, not scraped']) / 3.6:.3f} ms" if us in own else "")
    print("without the simulated driver: " + ", ".join(f"{k} {v:.2f}" for k, v in own.items()) + " CPU-s/h")
    for how in scrapers:
        ne, scr = f"node-exporter, every 1 s ({how})", f"  its scraper: {how} (node-exporter)"
        if ne not in cost:
            print("node-exporter: not installed (Debian package prometheus-node-exporter); no comparison")
            return
        for kind in ("agent", "host-only agent"):
            us, ours = f"{kind}, every 1 s ({how})", f"  its scraper: {how} ({kind})"
            alone = cost[us] - sim.get(us, 0)
            with_s = cost[ne] + cost[scr], cost[us] + cost[ours]
            print(f"{how:10} node-exporter / {kind}: alone {cost[ne] / cost[us]:.1f}x, with scrapers "
                  f"{with_s[0] / with_s[1]:.1f}x (target >= 10x: {'met' if with_s[0] >= 10 * with_s[1] else 'NOT met'})"
                  + (f"; without the simulated driver alone {cost[ne] / alone:.1f}x, with scrapers "
                     f"{with_s[0] / (alone + cost[ours]):.1f}x" if us in sim else ""))
            if how == "prometheus" and IDLE in cost:
                # One Prometheus scrapes many nodes: a target's share is what scraping it adds to the upkeep.
                idle = cost[IDLE]
                share = cost[ne] + cost[scr] - idle, cost[us] + cost[ours] - idle
                print(f"{'':10} ... with Prometheus' share (its CPU less one scraping nothing, {idle:.2f}): "
                      f"{share[0] / share[1]:.1f}x (target >= 10x: {'met' if share[0] >= 10 * share[1] else 'NOT met'})"
                      + (f"; without the simulated driver {share[0] / (share[1] - sim[us]):.1f}x" if us in sim else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--minutes", type=float, default=5, help="measured window (default 5)")
    ap.add_argument("--warmup", type=float, default=15, help="seconds before the window")
    ap.add_argument("--scrapers", default="curl,keepalive,prometheus", help="1 s scrapers to compare")
    a = ap.parse_args()
    scrapers = [s for s in a.scrapers.split(",") if s]
    if not shutil.which("curl"):
        sys.exit("metrics_cost: curl is needed for the scrapers")
    if "prometheus" in scrapers and not os.access(PROMETHEUS, os.X_OK):
        print("metrics_cost: /usr/bin/prometheus is missing (Debian package prometheus): no Prometheus scrapers")
        scrapers.remove("prometheus")
    build = bl.build_dir(a.build)
    bl.Meter.use_launcher(build)
    b = Bench(a, build)
    window = a.minutes * 60
    print(f"metrics_cost: agents at 1 s on 8 simulated GPUs and node-exporter, measured for {window:g} s, at once")
    print(f"machine: {bl.machine_facts()}", flush=True)
    t_start = time.monotonic()
    try:
        body = urllib.request.urlopen(setup(b, scrapers), timeout=10).read()
        cost, prom = measure(b, window, a.warmup)
        print(f"machine at the end: load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    finally:
        for _, m in b.rows:
            bl.stop(m.proc, timeout=10)
        life = time.monotonic() - t_start
        bl.Meter.cleanup()
    sim = sim_per_hour(b, life)
    lines = body.count(b"\n")
    print(f"\none scrape of the 8-GPU agent: {len(body)} bytes, {lines} lines\n")
    report_table(b, cost, sim, prom)
    report_ratios(cost, sim, scrapers)
    shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
