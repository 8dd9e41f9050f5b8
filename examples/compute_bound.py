#!/usr/bin/python3
"""A compute-bound training job: the whole data set is tensors in memory (no transform), feeding a
large MLP. Nearly all of every step is compute, which gpuscope should report as a data-wait share
well under a tenth of the step.

    gpuscope run -- /usr/bin/python3 examples/compute_bound.py [--seconds 5]

Runs standalone too (the gpuscope client is then a no-op). The loop is examples/watched_loop.py."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from watched_loop import device, done, gpuscope, train_pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--steps", type=int, default=None, help="stop after this many steps too (tests: a count, not a time)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=1024, help="hidden layer width")
    a = ap.parse_args()
    dev = device()
    data = TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=0, pin_memory=dev == "cuda")
    w = a.width
    model = torch.nn.Sequential(torch.nn.Linear(512, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                                torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gpuscope.param(model=f"mlp{w}x3", device=dev, precision="fp32", workload="compute_bound")
    t_end = time.monotonic() + a.seconds
    steps = epoch = 0
    while time.monotonic() < t_end and (a.steps is None or steps < a.steps):
        gpuscope.mark("epoch", epoch)
        steps = train_pass(loader, model, opt, dev, t_end, steps, a.steps)
        epoch += 1
    done("compute_bound", steps, dev)


if __name__ == "__main__":
    main()
