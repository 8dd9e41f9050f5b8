#!/usr/bin/python3
"""A training job for `gpuscope tune --quality`: softmax regression on a fixed, seeded synthetic
task (20 features, 10 classes from a random teacher), plain SGD at the learning rate given, batches
drawn from a seeded stream, and the loss on a fixed held-out set logged after every step as
`val_loss`. At equal samples a big batch takes fewer steps: at the small batch's rate it learns
visibly less; with the rate scaled by the batch (the linear rule) it catches up.

    gpuscope tune --param batch_size=32,512 --samples 16384 --warmup 2 --quality val_loss \\
        --lr-base 0.05@32 --lr-rule linear -- \\
        /usr/bin/python3 examples/tune_lr.py --batch-size {batch_size} --lr {lr}

Runs standalone too (the gpuscope client is then a no-op); --max-samples ends it on its own."""
import argparse
import os
import time

import torch

from watched_loop import gpuscope


def task(n, gen, teacher):
    x = torch.randn(n, 20, generator=gen)
    return x, (x @ teacher).argmax(1)


def batches(batch, gen, teacher, limit):
    seen = 0
    while limit is None or seen < limit:
        yield task(batch, gen, teacher)
        seen += batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--max-samples", type=int, default=None)
    ap.add_argument("--step-overhead-ms", type=float, default=0.0,
                    help="host work per step that a bigger batch amortises (a sleep; default none)")
    ap.add_argument("--env-file", help="write CUDA_VISIBLE_DEVICES and the cores this job may use here")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if a.env_file:
        with open(a.env_file, "w") as f:
            f.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n{sorted(os.sched_getaffinity(0))}\n")
    teacher = torch.randn(20, 10, generator=torch.Generator().manual_seed(1))
    val_x, val_y = task(2048, torch.Generator().manual_seed(2), teacher)
    model = torch.nn.Linear(20, 10)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    gpuscope.param(model="softmax20x10", device="cpu", precision="fp32", workload="tune_lr")
    steps = 0
    for x, y in gpuscope.watch(batches(a.batch_size, torch.Generator().manual_seed(3), teacher, a.max_samples)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.step_overhead_ms > 0:
            time.sleep(a.step_overhead_ms / 1e3)
        steps += 1
        with torch.no_grad():
            gpuscope.log("val_loss", torch.nn.functional.cross_entropy(model(val_x), val_y).item(), steps)
    print(f"tune_lr: {steps} steps, val_loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
