#!/usr/bin/python3
"""A training job for `gpuscope tune`: a DataLoader whose per-sample transform is costly — mostly
waiting (a fetch from slow storage or a native decoder that releases the GIL, `--latency-ms`) plus a
little CPU work (`--work` blur passes) — feeding a small CNN. Loader worker processes overlap the
waits, so more workers are faster even on a busy machine; batch size sets the memory of each step
(`--mem-per-sample-mb` of activations, none by default), so a big enough batch runs out of memory
under a limit.

    gpuscope tune --param workers=0,2,4 --param batch_size=16,64 --steps 8 --warmup 2 -- \\
        /usr/bin/python3 examples/tune_costly.py --workers {workers} --batch-size {batch_size}

`--transform broken` makes the transform raise on the fifth sample (a crashing configuration).
Runs standalone too (the gpuscope client is then a no-op). The loop is examples/watched_loop.py."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

from watched_loop import device, done, gpuscope, train_pass


class CostlyTransform(Dataset):
    """Synthetic 3x16x16 images; each waits latency seconds and gets `work` blur+flip passes."""

    def __init__(self, n, latency, work, broken):
        self.n, self.latency, self.work, self.broken = n, latency, work, broken

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.broken and i % 997 == 5:
            raise ValueError(f"transform failed on sample {i}: corrupt record")
        time.sleep(self.latency)
        x = torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(i))
        for _ in range(self.work):
            x = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0).flip(-1)
        return x, i % 10


class Net(torch.nn.Module):
    """A tiny CNN that also holds mem_mb of activations per sample for the step (like a big model)."""

    def __init__(self, mem_mb):
        super().__init__()
        self.mem = int(mem_mb * (1 << 20) / 4)
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))

    def forward(self, x):
        if self.mem:
            act = torch.ones(x.shape[0], self.mem)  # the step's activations: batch x mem_mb
            x = x + act[:, :1].view(-1, 1, 1, 1) * 0
        return self.body(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=2.0, help="wait per sample")
    ap.add_argument("--work", type=int, default=1, help="blur passes per sample")
    ap.add_argument("--mem-per-sample-mb", type=float, default=0, help="activations held per sample")
    ap.add_argument("--transform", choices=["ok", "broken"], default="ok")
    a = ap.parse_args()
    dev = device()
    model = Net(a.mem_per_sample_mb).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ds = CostlyTransform(1 << 20, a.latency_ms / 1000, a.work, a.transform == "broken")
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=False, num_workers=a.workers,
                        pin_memory=dev == "cuda")
    gpuscope.param(model="tinycnn", device=dev, precision="fp32", workload="tune_costly")
    steps = train_pass(loader, model, opt, dev, time.monotonic() + a.seconds)
    done("tune_costly", steps, dev)


if __name__ == "__main__":
    main()
