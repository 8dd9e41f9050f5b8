#!/usr/bin/env python3
"""bench/live_viewers: what `gpuscope serve` costs while VIEWERS browsers watch one live run (issue 22),
printed beside its target (< 10 % of a core for 200 viewers).

A live run of eight simulated GPUs (tests/gpusim, the busy8_h200 scenario) sampled at 100 ms by
`gpuscope run`, watched over /api/runs/RUN/live by VIEWERS connections that read every event (one
thread, non-blocking sockets). Once every viewer has had its first samples, serve's CPU time over
SECONDS (utime + stime of /proc/PID/stat, all its threads) is the figure; also what it is with no
viewer (the baseline), the events and bytes each viewer got, and serve's RSS. Not a test: it
prints, it asserts nothing.
usage: live_viewers.py [--build DIR] [--viewers N] [--seconds S]"""
import argparse
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


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


def get_status(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        got = s.recv(64)
        return int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.") else 0
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--viewers", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    gs = os.path.join(build, "gpuscope")
    sim = os.path.join(build, "tests/gpusim/libnvidia-ml.so.1")
    for p in (gs, sim):
        if not os.path.exists(p):
            sys.exit(f"live_viewers: {p} is missing: build first (cmake --build {build})")
    d = tempfile.mkdtemp(prefix="gs-live-bench-")
    env = dict(os.environ, GPUSCOPE_STORE="sqlite://" + os.path.join(d, "gs.db"), XDG_DATA_HOME=os.path.join(d, "xdg"),
               GPUSIM_SCENARIO=os.path.join(REPO, "tests/gpusim/scenarios/busy8_h200.scn"), GPUSCOPE_NVML_LIB=sim)
    seconds = a.seconds
    job = subprocess.Popen([gs, "run", "--quiet", "--interval", "100ms", "--name", "live", "--", "sleep",
                            str(int(3 * seconds + 60))], env=env)
    viewers, srv = [], None
    try:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(d, "gs.db")):  # the run makes the store
            if time.time() > deadline:
                sys.exit("live_viewers: the run made no store")
            time.sleep(0.2)
        srv = subprocess.Popen([gs, "serve", "--listen", "127.0.0.1:0"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        port = int(srv.stdout.readline().rsplit(":", 1)[1].strip().strip("/"))
        deadline = time.time() + 30
        while get_status(port, "/api/runs/live") != 200:
            if time.time() > deadline:
                sys.exit("live_viewers: the live run never appeared")
            time.sleep(0.2)
        time.sleep(2)  # serve has read the run once (its view) before the baseline
        c0, t0 = cpu_s(srv.pid), time.monotonic()
        time.sleep(seconds)
        idle = (cpu_s(srv.pid) - c0) / (time.monotonic() - t0)

        sel = selectors.DefaultSelector()
        got = {}
        for i in range(a.viewers):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /api/runs/live/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
            viewers.append(s)
            got[i] = [0, 0, False]  # bytes, events, had samples

        def pump(until):
            while time.monotonic() < until:
                for key, _ in sel.select(timeout=0.2):
                    try:
                        data = key.fileobj.recv(1 << 16)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    g = got[key.data]
                    g[0] += len(data)
                    g[1] += data.count(b"event: ")
                    g[2] = g[2] or b"event: samples" in data

        deadline = time.monotonic() + 60
        while not all(g[2] for g in got.values()) and time.monotonic() < deadline:
            pump(time.monotonic() + 0.5)
        ready = sum(g[2] for g in got.values())
        for g in got.values():
            g[0] = g[1] = 0
        c0, t0 = cpu_s(srv.pid), time.monotonic()
        pump(t0 + seconds)
        busy = (cpu_s(srv.pid) - c0) / (time.monotonic() - t0)
        ev = sorted(g[1] for g in got.values())
        kb = sum(g[0] for g in got.values()) / max(1, len(got)) / 1024
        print(f"serve with no viewer of the live run: {100 * idle:.1f} % of a core")
        print(f"{a.viewers} viewers of one live run (8 GPUs at 100 ms), {ready} streaming: {100 * busy:.1f} % of a core "
              f"over {seconds:g} s   (target < 10 %)")
        print(f"  each viewer got {ev[len(ev) // 2]} events ({ev[0]}..{ev[-1]}), {kb:.0f} KiB; serve RSS "
              f"{rss_mib(srv.pid):.1f} MiB")
    finally:
        for s in viewers:
            s.close()
        if srv:
            srv.terminate()
            srv.wait(timeout=30)
        job.terminate()
        job.wait(timeout=30)
        subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
