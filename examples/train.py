#!/usr/bin/python3
"""The quick example (`make demo` runs the fuller case study, examples/case_study): a small real
PyTorch training loop (a CNN on synthetic 32x32 images) whose DataLoader does a costly per-sample
augmentation with no worker processes, so the run is input-bound — the most common way a GPU sits
idle. Runs on the GPU when there is one.

    PYTHONPATH=clients/python gpuscope run -- /usr/bin/python3 examples/train.py [--seconds 20] \
        [--workers 0] [--batch 64]

It reports its steps through the gpuscope client when the client is importable (clients/python on
PYTHONPATH) and runs exactly the same without it."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

try:
    import gpuscope
except ImportError:
    gpuscope = None


class Augmented(Dataset):
    """Synthetic images with a CPU-side augmentation chain (blur + flips), like a real pipeline."""

    def __init__(self, n, work):
        self.n, self.work = n, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, 32, 32, generator=g)
        for _ in range(self.work):
            x = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0).flip(-1)
        return x, i % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--work", type=int, default=12, help="augmentation passes per sample")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(Augmented(1 << 20, a.work), batch_size=a.batch, shuffle=True,
                        num_workers=a.workers, pin_memory=dev == "cuda")
    # model=: the client finds the run's precision itself (autocast, or the parameters' dtype)
    batches = gpuscope.watch(loader, model=model) if gpuscope else loader
    if gpuscope:
        gpuscope.param(model="smallcnn", device=dev, lr=0.05)
    t_end = time.monotonic() + a.seconds
    step = 0
    for x, y in batches:
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
            if gpuscope:
                gpuscope.log("loss", loss.item(), step)
        if time.monotonic() > t_end:
            break
    print(f"done: {step} steps on {dev}")


if __name__ == "__main__":
    main()
