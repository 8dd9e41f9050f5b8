#!/usr/bin/python3
"""A real PyTorch training loop (CPU; a small CNN on synthetic 32x32 images) whose bottleneck the
scenario suite chooses with flags, so each doctor rule meets the situation it is written for:

  --work N        CPU-costly augmentation: N blur+flip passes per sample (input-bound loading)
  --work-ms X     CPU-costly augmentation by CPU time: each sample burns X ms of the loading
                  process's CPU (time.thread_time), so its cost against --sync-ms is the same on a
                  fast CPU and a slow one (--work's passes take half as long on a CPU twice as fast)
  --workers N     DataLoader worker processes
  --latency-ms X  each sample waits X ms, using no CPU (remote storage, a slow network filesystem)
  --io-file F     each sample reads --io-kib KiB from F with O_DIRECT (storage-bound loading)
  --sync-ms X     the loop body blocks X ms per step without using the CPU (a sync point)
  --eval-every S  every S seconds of training, an "eval" pass of --eval-s seconds (a periodic stall)
  --width W       model width: the compute per step
  --ddp N         N ranks of torch.distributed data parallel (gloo, CPU), launched as torchrun does
                  (each its own process with RANK and WORLD_SIZE); --slow-rank-work K adds K passes of
                  the augmentation on the last rank only (one rank's input pipeline is slower)

It reports steps, params and marks through tests/scenarios/workloads/gsclient.py (the real client,
never a stand-in) and prints its throughput on the last line as `throughput SAMPLES_PER_S`."""
import argparse
import mmap
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader, Dataset

import gsclient


class Synthetic(Dataset):
    def __init__(self, n, a):
        self.n, self.a = n, a
        self.fd, self.buf = None, None

    def __len__(self):
        return self.n

    def _read(self, i):
        # Opened lazily so each worker process has its own descriptor and aligned buffer.
        if self.fd is None:
            self.fd = os.open(self.a.io_file, os.O_RDONLY | os.O_DIRECT)
            self.buf = mmap.mmap(-1, self.a.io_kib * 1024)
        size = os.fstat(self.fd).st_size
        blocks = max(1, size // len(self.buf))
        off = ((i * 2654435761) % blocks) * len(self.buf)
        os.preadv(self.fd, [self.buf], off)
        return self.buf[0]

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, 32, 32, generator=g)
        if self.a.io_file:
            x[0, 0, 0] = self._read(i) / 255.0
        if self.a.latency_ms:
            time.sleep(self.a.latency_ms / 1000.0)
        for _ in range(self.a.work):
            x = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0).flip(-1)
        if self.a.work_ms:
            end = time.thread_time() + self.a.work_ms / 1000.0
            while time.thread_time() < end:
                x = x.flip(-1)
        return x, i % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--work", type=int, default=0)
    ap.add_argument("--work-ms", type=float, default=0)
    ap.add_argument("--latency-ms", type=float, default=0)
    ap.add_argument("--io-file", default="")
    ap.add_argument("--io-kib", type=int, default=1024)
    ap.add_argument("--sync-ms", type=float, default=0)
    ap.add_argument("--eval-every", type=float, default=0)
    ap.add_argument("--eval-s", type=float, default=1.0)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", default="")
    ap.add_argument("--pin-memory", default="")
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--ddp", type=int, default=0)
    ap.add_argument("--slow-rank-work", type=int, default=0)
    a = ap.parse_args()
    if a.ddp and "RANK" not in os.environ:
        return launch(a.ddp)
    dist = None
    if a.ddp:
        import torch.distributed as dist
        rank = int(os.environ["RANK"])
        dist.init_process_group("gloo", init_method="file://" + os.environ["GS_DDP_INIT"], rank=rank,
                                world_size=a.ddp)
        if rank == a.ddp - 1:
            a.work += a.slow_rank_work
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    w = a.width
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, w, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(w, 2 * w, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(2 * w, 10))
    if dist:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(Synthetic(1 << 20, a), batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        persistent_workers=a.persistent and a.workers > 0)
    extra = {"model": "smallcnn", "device": "cpu"}
    if a.precision:
        extra["precision"] = a.precision
    if a.pin_memory:
        extra["pin_memory"] = a.pin_memory  # as a GPU job would report it (gpusim scenarios)
    batches = gsclient.watch(loader)
    t_start = time.monotonic()
    t_end = t_start + a.seconds
    next_eval = t_start + a.eval_every if a.eval_every else None
    steps = 0
    first = None
    for x, y in batches:
        if first is None:
            first = time.monotonic()
            gsclient.param(**extra)  # after watch() sent the loader's, so these win
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.sync_ms:
            time.sleep(a.sync_ms / 1000.0)
        steps += 1
        now = time.monotonic()
        if next_eval and now >= next_eval:
            gsclient.mark("eval", steps)
            with torch.no_grad():
                t_eval = time.monotonic() + a.eval_s
                while time.monotonic() < t_eval:
                    model(torch.rand(a.batch, 3, 32, 32))
            next_eval = time.monotonic() + a.eval_every
        stop = now > t_end
        if dist:  # every rank stops at the same step, or the others would wait in all-reduce forever
            flag = torch.tensor([1 if stop else 0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            stop = bool(flag.item())
        if stop:
            break
    dt = time.monotonic() - (first or t_start)
    print(f"steps {steps}")
    print(f"throughput {steps * a.batch / dt:.2f}")


def launch(n):
    """Starts n ranks of this script the way torchrun does (RANK, WORLD_SIZE, LOCAL_RANK per process)
    and waits for them all; the exit status is the worst of theirs."""
    d = tempfile.mkdtemp(prefix="gs-ddp-")
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n),
                   GS_DDP_INIT=os.path.join(d, "init"))
        procs.append(subprocess.Popen([sys.executable, *sys.argv], env=env))
    rc = max(p.wait() for p in procs)
    try:
        os.remove(os.path.join(d, "init"))
    except OSError:
        pass
    os.rmdir(d)
    return rc


if __name__ == "__main__":
    sys.exit(main())
