#!/usr/bin/python3
"""What the Python client costs a training loop, in microseconds per step: a loop over in-memory
batches with and without gpuscope.watch() (plus one phase() and one log() per step), reporting to a
real socket that a thread drains, best of several repeats. The target is < 20 us per step (the last
line says whether it is met). A benchmark, not a test (docs/benchmarks.md): bench/run_all.sh runs it.

    PYTHONPATH=clients/python /usr/bin/python3 bench/client_overhead.py [--steps 20000] [--max-us 20]

Exits 1 when watch()'s overhead is above --max-us (default 20)."""
import argparse
import os
import socket
import sys
import tempfile
import threading
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-us", type=float, default=20.0)
    a = ap.parse_args()

    d = tempfile.mkdtemp(prefix="gs-bench-")
    path = os.path.join(d, "sock")
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(path)
    rx.settimeout(0.1)
    state = {"stop": False, "datagrams": 0}

    def drain():
        while not state["stop"]:
            try:
                rx.recv(65536)
                state["datagrams"] += 1
            except socket.timeout:
                pass

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    os.environ["GPUSCOPE_SOCKET"] = path
    try:
        import gpuscope
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
        import gpuscope
    try:
        import torch
        batches = [(torch.zeros(32, 4), torch.zeros(32)) for _ in range(64)]
        kind = "torch tensors"
    except ImportError:
        batches = [([0.0] * 32, [0] * 32) for _ in range(64)]
        kind = "lists"
    loader = batches * (a.steps // len(batches))
    n = len(loader)

    def plain():
        for x, y in loader:
            pass

    def watched():
        for x, y in gpuscope.watch(loader):
            pass

    def full():
        i = 0
        for x, y in gpuscope.watch(loader):
            with gpuscope.phase("h2d"):
                pass
            gpuscope.log("loss", 0.5, i)
            i += 1

    def best(fn):
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    base = best(plain)
    w = (best(watched) - base) / n * 1e6
    f = (best(full) - base) / n * 1e6
    state["stop"] = True
    t.join()
    rx.close()
    os.unlink(path)
    os.rmdir(d)
    print(f"watch(): {w:.1f} us/step ({n} steps of {kind}, best of {a.repeats})")
    print(f"watch() + phase() + log() per step: {f:.1f} us/step")
    print(f"{state['datagrams']} datagrams, {gpuscope.dropped()} messages dropped (at this rate the reader thread,"
          " which shares the GIL with the loop, cannot keep up; a real agent is another process)")
    met = w <= a.max_us
    print(f"target watch() < {a.max_us:g} us/step: {w:.1f} us -> {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
