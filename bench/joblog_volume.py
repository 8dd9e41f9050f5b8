#!/usr/bin/env python3
"""bench/joblog_volume: a job that prints a lot under `gpuscope run` (docs/runs.md, "The job's
output"). The job writes --gib GiB of numbered 1 KiB lines to its stdout, a pipe this script reads
and hashes as fast as it can; the agent passes them on and keeps the last --log-max bytes. Prints
the agent's peak RSS (exact: started through bench/rusage_run), the bytes delivered (all of them,
unchanged: the hash of what was written), what the store kept against the bound, and the throughput
with and without gpuscope in between, each against its target:

  peak RSS of the agent < 2 x --log-max + 4 MiB above the same agent passing 1 MB, whatever the
  volume (flat: the agent holds at most the buffer's bound and the flush being written)
  kept bytes <= --log-max, and the kept bytes are the stream's tail
  every byte delivered, in order

usage: bench/joblog_volume.py [--gib 1] [--log-max 8M] [--build build]"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
JOB = r"""
import sys
o = sys.stdout.buffer
pad = b"x" * 1014
for i in range(%d):
    o.write(b"%%08d " %% i + pad + b"\n")
o.flush()
"""
LINE = 1024  # bytes a line: 8 digits, a space, 1014 x, a newline


def run(argv, env, rusage):
    """Runs argv (through rusage_run into rusage when given) reading its stdout; returns
    (seconds, bytes, sha256 hex, rusage dict or None)."""
    cmd = ([rusage[0], rusage[1]] if rusage else []) + argv
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    h, n = hashlib.sha256(), 0
    while True:
        d = p.stdout.read(1 << 20)
        if not d:
            break
        h.update(d)
        n += len(d)
    err = p.stderr.read()
    rc = p.wait()
    dt = time.monotonic() - t0
    if rc != 0:
        sys.exit(f"{' '.join(argv[:4])} exited {rc}: {err.decode(errors='replace')}")
    usage = None
    if rusage:
        with open(rusage[1]) as f:
            usage = dict(kv.split("=", 1) for kv in f.read().split())
    return dt, n, h.hexdigest(), usage


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--log-max", default="8M")
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    a = ap.parse_args()
    gs, ru = os.path.join(a.build, "gpuscope"), os.path.join(a.build, "bench/rusage_run")
    for f in (gs, ru):
        if not os.access(f, os.X_OK):
            sys.exit(f"{f} is not built (cmake --build {a.build})")
    py = "/usr/bin/python3"
    lines = int(a.gib * (1 << 30)) // LINE
    d = tempfile.mkdtemp(prefix="gs-joblog-bench-")
    try:
        env = dict(os.environ, GPUSCOPE_STORE="sqlite://" + os.path.join(d, "gs.db"),
                   XDG_DATA_HOME=os.path.join(d, "xdg"), GPUSCOPE_NVML_LIB="/nonexistent/libnvidia-ml.so.1")
        out = os.path.join(d, "rusage.txt")
        want = hashlib.sha256()
        for i in range(lines):
            want.update(b"%08d " % i + b"x" * 1014 + b"\n")
        alone, n0, _, _ = run([py, "-c", JOB % lines], env, None)
        _, _, _, small = run([gs, "run", "-q", "--log-max", a.log_max, "--", py, "-c", JOB % 1000], env, (ru, out))
        watched, n1, h1, big = run([gs, "run", "-q", "--log-max", a.log_max, "--", py, "-c", JOB % lines], env,
                                   (ru, out))
        runs = json.loads(subprocess.run([gs, "runs", "--json"], capture_output=True, env=env).stdout)
        par = json.loads(subprocess.run([gs, "show", runs[0]["id"], "--params", "--json"], capture_output=True,
                                        env=env).stdout)
        kept = subprocess.run([gs, "log", "--raw", runs[0]["id"]], capture_output=True, env=env).stdout
        bound = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(a.log_max[-1:].upper(), 1)
        bound *= float(a.log_max[:-1] if a.log_max[-1:].isalpha() else a.log_max)
        bound = int(bound)
        first = max(0, lines - (len(kept) + LINE - 1) // LINE)  # the kept bytes may start inside a line
        tail = b"".join(b"%08d " % i + b"x" * 1014 + b"\n" for i in range(first, lines))
        tail_ok = len(kept) > 0 and tail.endswith(kept)
        rss_small, rss_big = int(small["maxrss_kib"]), int(big["maxrss_kib"])
        print(f"job output: {n1 / (1 << 30):.2f} GiB in {lines} lines through gpuscope run --log-max {a.log_max}")
        same = h1 == want.hexdigest() and n1 == lines * LINE
        print(f"  delivered: {n1} bytes, {'unchanged' if same else 'CHANGED'} (target: every byte, in order)")
        print(f"  throughput: {n0 / alone / 1e6:.0f} MB/s alone, {n1 / watched / 1e6:.0f} MB/s under gpuscope"
              f" ({watched / alone:.2f}x the time)")
        print(f"  agent peak RSS: {rss_big / 1024:.1f} MiB passing {a.gib:g} GiB, {rss_small / 1024:.1f} MiB passing"
              f" 1 MB: +{(rss_big - rss_small) / 1024:.1f} MiB (target < 2 x --log-max + 4 MiB ="
              f" {(2 * bound + (4 << 20)) / (1 << 20):.0f} MiB: {'met' if (rss_big - rss_small) * 1024 < 2 * bound + (4 << 20) else 'MISSED'})")
        print(f"  agent CPU: {float(big['cpu_s']):.2f} s")
        print(f"  kept: {len(kept)} bytes (log.kept_bytes {par.get('log.kept_bytes')}, log.bytes {par.get('log.bytes')},"
              f" dropped before the store {par.get('log.dropped_bytes')}) against the bound {int(bound)}: "
              f"{'met' if len(kept) <= bound else 'MISSED'}; the stream's tail: {'yes' if tail_ok else 'NO'}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
