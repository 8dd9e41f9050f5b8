#!/usr/bin/python3
"""How long the Python client takes to send to a socket whose reader has stopped reading (an agent
that hangs): N messages, each flushed on its own datagram, into a bound socket never read, so its
queue fills after a few and every later send is dropped and counted. The target is that the job
never waits: all N sends within --max-s (default 5 s for 500; a blocking send would wait forever).
A benchmark, not a test (docs/benchmarks.md): tests/integration/test_client_never_hurts.py proves
by counts that nothing blocks (delivered + dropped = sent, and the job ends); this prints the time.

    /usr/bin/python3 bench/client_full_socket.py [--messages 500] [--repeats 5] [--max-s 5]

Exits 1 when the slowest repeat is over --max-s."""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "clients", "python")

FLOOD = r"""
import sys, time
import gpuscope
n = int(sys.argv[1])
t0 = time.perf_counter()
for i in range(n):
    gpuscope.log("flood", i, i)
    gpuscope.flush()
print(gpuscope.dropped(), time.perf_counter() - t0)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-s", type=float, default=5.0)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gs-bench-")
    times, drops = [], []
    try:
        for r in range(a.repeats):
            path = os.path.join(d, f"sock{r}")
            sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sink.bind(path)  # bound, never read: its queue fills
            try:
                p = subprocess.run([sys.executable, "-c", FLOOD, str(a.messages)], capture_output=True, text=True,
                                   timeout=120, env=dict(os.environ, PYTHONPATH=CLIENT, GPUSCOPE_SOCKET=path))
            finally:
                sink.close()
            if p.returncode != 0:
                print(f"the flood exited {p.returncode}: {p.stderr.strip()}")
                return 1
            dropped, secs = p.stdout.split()
            drops.append(int(dropped))
            times.append(float(secs))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    worst, best = max(times), min(times)
    print(f"full socket: {a.messages} sends in {best * 1e3:.1f} ms best, {worst * 1e3:.1f} ms worst of {a.repeats} "
          f"({worst / a.messages * 1e6:.1f} us per send at worst); dropped {min(drops)}-{max(drops)} of {a.messages}")
    met = worst <= a.max_s
    print(f"target {a.messages} sends to a full socket < {a.max_s:g} s: {worst:.3f} s -> {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
