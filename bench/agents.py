#!/usr/bin/python3
"""bench/agents: what watching a host costs, gpuscope beside the agents people already run (issue 6a).

All agents watch the same host at the same time for the same window, each started in its own
cgroup so its CPU is counted exactly (threads, exited threads and children included):

  floor            bench/procfs_floor.c: reads the procfs files and does nothing else (the limit)
  gpuscope         gpuscope run --interval 1s -- sleep ...   (and again at 100 ms, with its floor)
  sadc             sysstat's collector, as Debian's cron runs it (-S DISK), to a binary file
  collectd         cpu, memory, disk, interface plugins, written to CSV
  node-exporter    prometheus-node-exporter with Debian's default collectors ...
  + scraper        ... scraped by a curl loop at the same rate (counted separately)
  node-exp-same    node-exporter with only gpuscope's host families (cpu, meminfo, diskstats,
                   netdev, loadavg, pressure), with its own scraper
  glances          glances --quiet --export csv (default plugins)
  glances-same     glances with only cpu, percpu, mem, memswap, load, diskio, network (+ system, now)

Reported per agent: CPU-seconds per hour of monitoring over the window (start-up excluded), the
ratio to the floor, peak RSS, and which metric families it lacks that gpuscope has (per-process
job tree, PSI, cgroup quota, GPU). Peers are installed with apt-get when missing (root), else the
exact apt-get line is printed and those rows are skipped.

usage: bench/agents.py [--build DIR] [--minutes 5] [--warmup 15]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

PEERS = [  # Debian package, binary
    ("sysstat", "/usr/lib/sysstat/sadc"),
    ("collectd-core", "collectd"),
    ("prometheus-node-exporter", "prometheus-node-exporter"),
    ("glances", "glances"),
    ("curl", "curl"),
]

# What each lacks of gpuscope's families (job process tree, PSI, cgroup quota, GPU), and what it
# does that gpuscope does not — printed under the table and repeated in docs/benchmarks.md.
LACKS = {
    "floor": "-",
    "gpuscope": "-",
    "sadc": "job tree, cgroup, GPU",
    "collectd": "job tree, PSI, cgroup v2, GPU",
    "node-exporter": "job tree, cgroup, GPU",
    "node-exp-same": "job tree, cgroup, GPU",
    "scraper": "",
    "glances": "PSI, cgroup, GPU (without pynvml)",
    "glances-same": "job tree, PSI, cgroup, GPU",
}
NODE_SAME = ["--collector.disable-defaults", "--collector.cpu", "--collector.meminfo", "--collector.diskstats",
             "--collector.netdev", "--collector.loadavg", "--collector.pressure"]
GLANCES_OFF = ("alert,amps,cloud,connections,docker,folders,fs,gpu,help,ip,irq,ports,processcount,processlist,"
               "psutilversion,quicklook,raid,sensors,smart,uptime,wifi")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_http(url, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            return urllib.request.urlopen(url, timeout=2).read().decode()
        except OSError:
            time.sleep(0.2)
    return None


def collectd_conf(tmp, interval_s):
    d = os.path.join(tmp, "collectd")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(tmp, "collectd.conf")
    with open(path, "w") as f:
        f.write(f"""Hostname "bench"
FQDNLookup false
Interval {interval_s}
BaseDir "{d}"
PIDFile "{d}/collectd.pid"
PluginDir "/usr/lib/collectd"
TypesDB "/usr/share/collectd/types.db"
LoadPlugin cpu
LoadPlugin memory
LoadPlugin disk
LoadPlugin interface
LoadPlugin csv
<Plugin csv>
  DataDir "{d}/csv"
  StoreRates true
</Plugin>
""")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--minutes", type=float, default=5, help="measured window (default 5)")
    ap.add_argument("--warmup", type=float, default=15, help="seconds before the window (start-up)")
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gpuscope = bl.program(build, "gpuscope")
    floor = bl.program(build, "bench/procfs_floor")
    bl.Meter.use_launcher(build)
    missing = bl.ensure_packages([p for p, _ in PEERS], [b for _, b in PEERS])
    have = lambda pkg: pkg not in missing  # noqa: E731
    window = a.minutes * 60
    total = a.warmup + window + 8  # the jobs outlive the window a little
    tmp = tempfile.mkdtemp(prefix="gs-agents-")
    print(f"agents: every agent watches this host for {window:g} s (after {a.warmup:g} s of start-up), at once")
    print(f"machine: {bl.machine_facts()}", flush=True)
    rows = []  # (label, interval, meter)
    try:
        def start(label, interval, argv, **kw):
            m = bl.Meter(re.sub(r"[^a-z0-9]+", "-", f"{label}-{interval}"))
            log = open(os.path.join(tmp, m.name + ".log"), "w")
            kw.setdefault("stdout", log)
            kw.setdefault("stderr", log)
            m.popen(argv, **kw)
            rows.append((label, interval, m))
            return m

        jobs = {}
        for iv in ("1s", "100ms"):
            m = start("gpuscope", iv, [gpuscope, "run", "--interval", iv, "--store",
                                       f"sqlite://{tmp}/gpuscope-{iv}.db", "--", "sleep", f"{total:g}"])
            jobs[iv] = bl.wait_child(m.pid)
            ms = 1000 if iv == "1s" else 100
            start("floor", iv, [floor, str(ms), f"{total - 4:g}", str(jobs[iv])])
        if have("sysstat"):
            start("sadc", "1s", ["/usr/lib/sysstat/sadc", "-S", "DISK", "1", str(int(total)),
                                 os.path.join(tmp, "sa.data")])
        if have("collectd-core"):
            start("collectd", "1s", [shutil.which("collectd"), "-f", "-C", collectd_conf(tmp, 1)])
        urls = {}
        if have("prometheus-node-exporter"):
            for name, extra in (("node-exporter", []), ("node-exp-same", NODE_SAME)):
                port = free_port()
                start(name, "1s", ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}"] + extra)
                url = f"http://127.0.0.1:{port}/metrics"
                if wait_http(url) is None:
                    print(f"agents: {name} did not answer")
                    continue
                urls[name] = url
                if have("curl"):
                    start("scraper", name, ["/bin/sh", "-c",
                                            f"while :; do curl -s -o /dev/null {url}; sleep 1; done"])
        if have("glances"):
            for name, extra in (("glances", []), ("glances-same", ["--disable-plugin", GLANCES_OFF])):
                start(name, "1s", ["glances", "--quiet", "--export", "csv", "--export-csv-file",
                                   os.path.join(tmp, name + ".csv"), "-t", "1"] + extra)
        time.sleep(a.warmup)
        c1 = {id(m): m.cpu_s() for _, _, m in rows}
        scr1 = {n: scrapes(u) for n, u in urls.items()}
        t1 = time.monotonic()
        done = 0
        while done < window:
            time.sleep(min(60, window - done))
            done = time.monotonic() - t1
            print(f"  ... {done / 60:.1f} of {window / 60:.1f} min", file=sys.stderr, flush=True)
        c2 = {id(m): m.cpu_s() for _, _, m in rows}
        wall = time.monotonic() - t1
        scr2 = {n: scrapes(u) for n, u in urls.items()}
        hwm = {id(m): m.hwm_kib() for _, _, m in rows}
        for label, _, m in rows:
            if label not in ("gpuscope", "floor"):
                bl.stop(m.proc)
        for label, _, m in rows:
            rc, _, rss = m.wait(timeout=60)
            if rss:
                hwm[id(m)] = max(hwm[id(m)], rss) if label != "scraper" else hwm[id(m)]
            if label in ("gpuscope", "floor") and rc != 0:
                print(f"warning: {label} exited with {rc}: "
                      f"{open(os.path.join(tmp, m.name + '.log')).read()[-400:]}")
        report(rows, c1, c2, hwm, wall, scr1, scr2, missing)
        check_sadc_psi(tmp)
    finally:
        for _, _, m in rows:
            bl.stop(m.proc, timeout=5)
        bl.Meter.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def scrapes(url):
    if not url:
        return None
    try:
        txt = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return None
    m = re.search(r'^promhttp_metric_handler_requests_total\{code="200"\} (\S+)', txt, re.M)
    return float(m.group(1)) if m else None


def report(rows, c1, c2, hwm, wall, scr1, scr2, missing):
    per = {(label, iv): bl.per_hour(c2[id(m)] - c1[id(m)], wall) for label, iv, m in rows}
    meters = {m.kind for _, _, m in rows}
    print(f"meter: {', '.join(sorted(meters))}; window {wall:.0f} s")
    print(f"{'agent':<16}{'interval':>9}{'CPU-s/h':>10}{'x floor':>9}{'peak RSS':>11}  lacks (of gpuscope's families)")
    for label, iv, m in rows:
        f = per.get(("floor", iv)) or per.get(("floor", "1s"))
        v = per[(label, iv)]
        rss = f"{hwm[id(m)] / 1024:.1f} MiB" if hwm[id(m)] else "-"
        note = LACKS.get(label, "")
        shown_iv = iv
        if label == "scraper":
            a, b = scr1.get(iv), scr2.get(iv)
            rate = (b - a) / wall if a is not None and b is not None else float("nan")
            note = f"(curl loop for {iv}: {rate:.2f} scrapes/s)"
            shown_iv = "1s"
        print(f"{label:<16}{shown_iv:>9}{v:>10.2f}{v / f:>8.1f}x{rss:>11}  {note}")
    for pkg in missing:
        print(f"{pkg:<16} not measured (not installed)")
    g = per.get(("gpuscope", "1s"))
    f = per.get(("floor", "1s"))
    print("targets at 1 s:")
    print(f"  gpuscope within 1.5x of the floor: {g / f:.2f}x -> {'met' if g / f <= 1.5 else 'MISSED'}")
    for peer, want in (("sadc", 2.5), ("collectd", 5.0), ("node-exporter", 1.0), ("node-exp-same", 1.0),
                       ("glances", 1.0), ("glances-same", 1.0)):
        p = per.get((peer, "1s"))
        if p is None:
            continue
        print(f"  below {peer}{f' by >= {want:g}x' if want > 1 else ''}: {p / g:.1f}x below -> "
              f"{'met' if p / g >= want else 'MISSED'}")
    g100, f100 = per.get(("gpuscope", "100ms")), per.get(("floor", "100ms"))
    if g100 and f100:
        print(f"  at 100 ms: gpuscope {g100:.2f} CPU-s/h = {g100 / f100:.2f}x its floor "
              f"-> {'met' if g100 / f100 <= 1.5 else 'MISSED'}")


def check_sadc_psi(tmp):
    """Says whether this sysstat recorded PSI (sar -q PSI), so the table's claim is checked here."""
    sa = os.path.join(tmp, "sa.data")
    if not os.path.exists(sa) or not shutil.which("sar"):
        return
    r = subprocess.run(["sar", "-q", "PSI", "-f", sa], capture_output=True, text=True)
    has = "%scpu" in r.stdout
    print(f"note: sadc {'recorded' if has else 'did not record'} PSI in this run (sar -q PSI)")


if __name__ == "__main__":
    main()
