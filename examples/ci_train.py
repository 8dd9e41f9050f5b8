#!/usr/bin/python3
"""A short training for a CI job to run under gpuscope and gate with `gpuscope check` (docs/ci.md):
an MLP on synthetic tensors read through a DataLoader, for a fixed number of steps. `--slow-transform
S` makes the read of each sample sleep S seconds, the regression a gate must catch (a read from slow
storage, a remote bucket instead of a local cache): the job then waits for its data instead of
computing, and the doctor finds input_latency (the loader's CPU idle while it waits).

    gpuscope run --name ci-main -- /usr/bin/python3 examples/ci_train.py --steps 30
    gpuscope check last --baseline ci-main --min-speedup 0.95 --max-data-wait 20% \
        --forbid input_bound,input_latency

Runs standalone too (the gpuscope client is then a no-op). The loop is examples/watched_loop.py."""
import argparse
import time

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from watched_loop import device, done, gpuscope, train_pass


class Batches(Dataset):
    """n synthetic samples of 256 features and a class, read a batch at a time (the sampler hands over a
    batch's indices: one indexing per batch, as a dataset over a tensor file or a database reads);
    each read sleeps `slow` seconds per sample first (the storage)."""

    def __init__(self, n, slow):
        g = torch.Generator().manual_seed(0)
        self.x, self.y, self.slow = torch.randn(n, 256, generator=g), torch.randint(0, 10, (n,), generator=g), slow

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        if self.slow > 0:
            time.sleep(self.slow * len(idx))
        return self.x[idx], self.y[idx]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=256, help="hidden layer width")
    ap.add_argument("--slow-transform", type=float, default=0, metavar="S", help="seconds each sample's read sleeps")
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    dev = device()
    data = Batches(4096, a.slow_transform)
    loader = DataLoader(data, sampler=BatchSampler(RandomSampler(data), a.batch, drop_last=True), batch_size=None,
                        num_workers=a.workers, pin_memory=dev == "cuda")
    w = a.width
    model = torch.nn.Sequential(torch.nn.Linear(256, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                                torch.nn.Linear(w, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gpuscope.param(model=f"mlp{w}x2", device=dev, precision="fp32", workload="ci_train")
    steps = epoch = 0
    while steps < a.steps:
        gpuscope.mark("epoch", epoch)
        steps = train_pass(loader, model, opt, dev, float("inf"), steps, a.steps)
        epoch += 1
    done("ci_train", steps, dev)


if __name__ == "__main__":
    main()
