#!/usr/bin/python3
"""bench/job_train: the training job of the job-cost benchmark (bench/job_cost.py) — a real PyTorch
CPU training loop with a fixed seed and a fixed number of steps: an MLP on synthetic MNIST-sized
data, SGD with momentum, every core in use (so an agent's CPU is taken from the job). It times every step and prints one JSON line:
{"steps": N, "median_ms": ..., "mean_ms": ..., "p90_ms": ..., "total_s": ..., "cpu_s": ...,
"client": bool} (cpu_s: the job's own CPU time, all threads), after a {"event": "start"} line printed
as the training loop begins.

With --client and the gpuscope Python client importable (PYTHONPATH=clients/python), the batches
go through gpuscope.watch() and the loss is logged each step, as a real job using the client would.
Run by Debian's /usr/bin/python3 (python3-torch)."""
import argparse
import json
import os
import resource
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20, help="steps not timed")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (default: every core)")
    ap.add_argument("--client", action="store_true")
    a = ap.parse_args()
    gs = None
    if a.client:
        try:
            import gpuscope as gs
        except ImportError:
            gs = None
    torch.manual_seed(0)
    torch.set_num_threads(a.threads or os.cpu_count())
    n = 8192
    x_all = torch.randn(n, 784)
    y_all = torch.randint(0, 10, (n,))
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    order = torch.randint(0, n - a.batch, (a.warmup + a.steps,), generator=g).tolist()
    batches = ((x_all[i:i + a.batch], y_all[i:i + a.batch]) for i in order)
    if gs:
        batches = gs.watch(batches)
    times = []
    print(json.dumps({"event": "start"}), flush=True)  # job_cost.py measures the agent from here
    t_start = time.perf_counter()
    last = t_start
    for step, (x, y) in enumerate(batches):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if gs:
            gs.log("loss", float(loss), step)
        now = time.perf_counter()
        if step >= a.warmup:
            times.append(now - last)
        last = now
    total = time.perf_counter() - t_start
    ru = resource.getrusage(resource.RUSAGE_SELF)
    times.sort()
    print(json.dumps({"steps": len(times), "median_ms": statistics.median(times) * 1e3,
                      "mean_ms": statistics.fmean(times) * 1e3, "p90_ms": times[int(len(times) * 0.9)] * 1e3,
                      "total_s": total, "cpu_s": ru.ru_utime + ru.ru_stime, "client": gs is not None}))


if __name__ == "__main__":
    main()
