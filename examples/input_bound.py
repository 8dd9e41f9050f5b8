#!/usr/bin/python3
"""An input-bound training job: a DataLoader whose dataset runs a costly per-sample transform (a
chain of blurs and flips) with no worker processes, feeding a small CNN. Most of every step is spent
waiting for data, which gpuscope should report as a data-wait share well over half the step.

    gpuscope run -- /usr/bin/python3 examples/input_bound.py [--seconds 5] [--workers 0]

Runs standalone too (the gpuscope client is then a no-op). The loop is examples/watched_loop.py."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

from watched_loop import device, done, gpuscope, train_pass


class CostlyTransform(Dataset):
    """Synthetic 3x32x32 images, each put through `work` blur+flip passes on the CPU."""

    def __init__(self, n, work):
        self.n, self.work = n, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.rand(3, 32, 32, generator=torch.Generator().manual_seed(i))
        for _ in range(self.work):
            x = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0).flip(-1)
        return x, i % 10


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--steps", type=int, default=None, help="stop after this many steps too (tests: a count, not a time)")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--work", type=int, default=20, help="transform passes per sample")
    a = ap.parse_args()
    dev = device()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(CostlyTransform(1 << 20, a.work), batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        pin_memory=dev == "cuda")
    gpuscope.param(model="tinycnn", device=dev, precision="fp32", workload="input_bound")
    t_end = time.monotonic() + a.seconds
    steps = train_pass(loader, model, opt, dev, t_end, max_steps=a.steps)
    done("input_bound", steps, dev)


if __name__ == "__main__":
    main()
