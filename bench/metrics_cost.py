"""bench/metrics_cost: what Prometheus scraping costs `gpuscope agent` (issue 16).

Three node agents at --interval 1s watch the same simulated 8 x H200 node (tests/gpusim,
busy8_h200.scn) at once: one never scraped, one scraped every 15 s, one every 1 s (a curl loop,
as bench/agents.py scrapes node-exporter); beside them Debian's prometheus-node-exporter with its
1 s curl scraper when installed. Each is measured in CPU-seconds per hour over the same window
(benchlib.Meter: its own cgroup, so threads and the scraper's curls count), and the targets are
checked: the agent scraped every second costs at most 1.3x the unscraped one, and at least 10x less
than node-exporter + its scraper. The simulator's own CPU is inside each agent (it is the agent's
libnvidia-ml), so the gpuscope figures include it.

usage: bench/metrics_cost.py [--build DIR] [--minutes M]"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from agents import free_port, wait_http  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--minutes", type=float, default=5, help="measured window (default 5)")
    ap.add_argument("--warmup", type=float, default=10, help="seconds before the window")
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gpuscope = bl.program(build, "gpuscope")
    sim = bl.program(build, "tests/gpusim/libnvidia-ml.so.1")
    bl.Meter.use_launcher(build)
    missing = bl.ensure_packages(["prometheus-node-exporter", "curl"], ["prometheus-node-exporter", "curl"])
    if "curl" in missing:
        sys.exit("metrics_cost: curl is needed for the scrapers")
    env = dict(os.environ, GPUSIM_SCENARIO=os.path.join(bl.REPO, "tests/gpusim/scenarios/busy8_h200.scn"),
               GPUSCOPE_NVML_LIB=sim)
    window = a.minutes * 60
    tmp = tempfile.mkdtemp(prefix="gs-metrics-cost-")
    rows = []  # (label, meter)
    print(f"metrics_cost: agents at 1 s on 8 simulated GPUs, measured for {window:g} s, at once")
    print(f"machine: {bl.machine_facts()}", flush=True)

    def start(label, argv, **kw):
        m = bl.Meter(re.sub(r"[^a-z0-9]+", "-", label))
        log = open(os.path.join(tmp, m.name + ".log"), "w")
        m.popen(argv, stdout=log, stderr=log, **kw)
        rows.append((label, m))
        return m

    def scraper(label, url, every):
        start(label, ["/bin/sh", "-c", f"while :; do curl -s -o /dev/null {url}; sleep {every}; done"])

    simcpu = {}
    t_start = time.monotonic()
    try:
        urls = {}
        agents = (("agent, not scraped", True), ("agent, scraped every 15 s", True), ("agent, scraped every 1 s", True),
                  ("host-only agent, scraped every 1 s", False))
        for i, (label, gpus) in enumerate(agents):
            port = free_port()
            e = dict(env, GPUSIM_CPU_FILE=os.path.join(tmp, f"sim{i}.cpu")) if gpus else \
                dict(os.environ, GPUSCOPE_NVML_LIB=os.path.join(tmp, "no-nvml.so"))
            if gpus:
                simcpu[label] = e["GPUSIM_CPU_FILE"]
            start(label, [gpuscope, "agent", "--quiet", "--interval", "1s", "--listen", f"127.0.0.1:{port}"], env=e)
            urls[label] = f"http://127.0.0.1:{port}/metrics"
            if wait_http(urls[label]) is None:
                sys.exit(f"metrics_cost: {label} did not answer; see {tmp}")
        scraper("  its scraper (curl every 15 s)", urls["agent, scraped every 15 s"], 15)
        scraper("  its scraper (curl every 1 s)", urls["agent, scraped every 1 s"], 1)
        scraper("  its scraper (curl every 1 s) (host-only)", urls["host-only agent, scraped every 1 s"], 1)
        if "prometheus-node-exporter" not in missing:
            port = free_port()
            start("node-exporter", ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}"])
            url = f"http://127.0.0.1:{port}/metrics"
            if wait_http(url) is not None:
                scraper("  its scraper (curl every 1 s) (node-exporter)", url, 1)
        body = urllib.request.urlopen(urls["agent, scraped every 1 s"], timeout=10).read()
        time.sleep(a.warmup)
        c1 = {id(m): m.cpu_s() for _, m in rows}
        t1 = time.monotonic()
        while time.monotonic() - t1 < window:
            time.sleep(min(30, window - (time.monotonic() - t1)))
            print(f"  ... {(time.monotonic() - t1) / 60:.1f} of {window / 60:.1f} min", file=sys.stderr, flush=True)
        c2 = {id(m): m.cpu_s() for _, m in rows}
        wall = time.monotonic() - t1
    finally:
        for _, m in rows:
            bl.stop(m.proc, timeout=10)
        life = time.monotonic() - t_start
        bl.Meter.cleanup()
    cost = {label: bl.per_hour(c2[id(m)] - c1[id(m)], wall) for label, m in rows}
    # The simulator's CPU (written at the agent's exit: its whole life, per hour of that life) is the driver's, not the agent's.
    sim = {}
    for label, path in simcpu.items():
        try:
            ns = int(open(path).read().split()[0])
            sim[label] = ns / 1e9 / life * 3600
        except (OSError, ValueError, IndexError):
            pass
    lines = body.count(b"\n")
    print(f"\none scrape: {len(body)} bytes, {lines} lines\n")
    print(f"{'process':48} {'CPU-s/h':>9} {'of it the simulated driver':>28}")
    for label, _ in rows:
        extra = f"{sim[label]:28.2f}" if label in sim else ""
        print(f"{label:48} {cost[label]:9.2f}{extra}")
    base = cost["agent, not scraped"]
    s1 = cost["agent, scraped every 1 s"]
    s15 = cost["agent, scraped every 15 s"]
    own = {k: cost[k] - sim[k] for k in sim}
    print(f"\nscraped every 15 s / not scraped: {s15 / base:.2f}x")
    print(f"scraped every 1 s  / not scraped: {s1 / base:.2f}x   (target <= 1.3x): "
          f"{'met' if s1 <= 1.3 * base else 'NOT met'}")
    if len(own) == 3:
        print(f"without the simulated driver: {own['agent, not scraped']:.2f} / {own['agent, scraped every 15 s']:.2f} / "
              f"{own['agent, scraped every 1 s']:.2f} CPU-s/h (not / 15 s / 1 s)")
    if "node-exporter" in cost:
        ne = cost["node-exporter"] + cost["  its scraper (curl every 1 s) (node-exporter)"]
        for label, scr in (("agent, scraped every 1 s", "  its scraper (curl every 1 s)"),
                           ("host-only agent, scraped every 1 s", "  its scraper (curl every 1 s) (host-only)")):
            ours = cost[label] + cost[scr]
            print(f"node-exporter + scraper / {label} + scraper: {ne / ours:.1f}x   (target >= 10x): "
                  f"{'met' if ne >= 10 * ours else 'NOT met'}")
            print(f"node-exporter alone / {label} alone: {cost['node-exporter'] / cost[label]:.1f}x")
    else:
        print("node-exporter: not installed (Debian package prometheus-node-exporter); no comparison")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
