"""The training loop examples/compute_bound.py and examples/input_bound.py share: steps timed by
gpuscope.watch(), the host-to-device copy as an explicit h2d phase, the loss logged every 10 steps.
Imports the gpuscope client from clients/python when it is not installed (it is a no-op outside
`gpuscope run`)."""
import os
import sys
import time

import torch

try:
    import gpuscope
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
    import gpuscope


def device():
    """Seeds torch, keeps it to one CPU thread, and returns the device to train on: "cuda" or "cpu"."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return "cuda" if torch.cuda.is_available() else "cpu"


def train_pass(loader, model, opt, dev, t_end, steps=0, max_steps=None):
    """One pass over loader (classification batches x, y), stopping early once time.monotonic()
    passes t_end or `max_steps` steps are done (a count, so a test means the same on a loaded
    machine). steps: those done before; returns the count after this pass."""
    for x, y in gpuscope.watch(loader):
        with gpuscope.phase("h2d"):
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if steps % 10 == 0:
            gpuscope.log("loss", loss.item(), steps)
        if time.monotonic() > t_end or (max_steps is not None and steps >= max_steps):
            break
    return steps


def done(name, steps, dev):
    """Prints the job's last line: steps run, the device, and client messages dropped."""
    print(f"{name}: {steps} steps on {dev}, {gpuscope.dropped()} client messages dropped", flush=True)
