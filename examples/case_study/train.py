#!/usr/bin/python3
"""Steps 2-4 of the case study: one CNN, three ways to feed it. Only the input pipeline changes.

  --step baseline     the Dataset opens, decodes, resizes, random-crops, flips and normalises each
                      JPEG per sample, in the training process (DataLoader num_workers=0)
  --step processes    the same Dataset in --workers loader processes (the doctor says how many)
  --step predecoded   the JPEGs decoded and resized once, offline (predecode.py), into a uint8 file
                      that is memory-mapped: only the cheap random crop and flip are done per sample

    gpuscope run --name baseline -- /usr/bin/python3 train.py --step baseline --images DIR
    train.py --step predecoded --predecoded FILE [--seconds 25] [--workers N] [--batch 32]

Trains on the GPU when there is one, unchanged; on the CPU otherwise, with one thread for the model
so that the loading, not PyTorch's own threads, decides how the cores are used. Steps go to
gpuscope through its client (clients/python on PYTHONPATH): gpuscope.watch times each step's wait
for its batch and its compute."""
import argparse
import glob
import json
import os
import time

import numpy as np
import torch
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import DataLoader, Dataset

import gpuscope

SHORT_SIDE, CROP = 160, 128  # resize the short side to 160, train on 128x128 random crops
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
REPEAT = 1000  # the set is small: each "epoch" of the loader visits it this many times


def label_of(path):
    return int(path.rsplit("_c", 1)[1].split(".")[0])  # img0042_c2.jpg -> class 2


class JpegFiles(Dataset):
    """Steps 2 and 3: all the work per sample, at training time."""

    def __init__(self, folder):
        self.files = sorted(glob.glob(os.path.join(folder, "*.jpg")))
        self.augment = T.Compose([T.Resize(SHORT_SIDE), T.RandomCrop(CROP), T.RandomHorizontalFlip(),
                                  T.ToTensor(), T.Normalize(MEAN, STD)])

    def __len__(self):
        return len(self.files) * REPEAT

    def __getitem__(self, i):
        path = self.files[i % len(self.files)]
        with Image.open(path) as img:
            return self.augment(img.convert("RGB")), label_of(path)


class Predecoded(Dataset):
    """Step 4: the decoded pixels memory-mapped from one file; a random crop and flip per sample."""

    def __init__(self, path):
        with open(path + ".json") as f:
            meta = json.load(f)
        self.pixels = np.memmap(path, dtype=np.uint8, mode="r", shape=tuple(meta["shape"]))
        self.labels = meta["labels"]
        self.mean = torch.tensor(MEAN).view(3, 1, 1) * 255
        self.std = torch.tensor(STD).view(3, 1, 1) * 255

    def __len__(self):
        return len(self.labels) * REPEAT

    def __getitem__(self, i):
        i %= len(self.labels)
        _, _, h, w = self.pixels.shape
        # torch's generator, not numpy's: DataLoader seeds it apart in each worker process.
        top, left = int(torch.randint(h - CROP + 1, ())), int(torch.randint(w - CROP + 1, ()))
        x = torch.from_numpy(np.array(self.pixels[i, :, top:top + CROP, left:left + CROP]))
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
        return (x.float() - self.mean) / self.std, self.labels[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", choices=["baseline", "processes", "predecoded"], required=True)
    ap.add_argument("--images", help="the JPEG folder (baseline, processes)")
    ap.add_argument("--predecoded", help="the uint8 pixel file (predecoded)")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    data = Predecoded(a.predecoded) if a.step == "predecoded" else JpegFiles(a.images)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, drop_last=True, num_workers=a.workers,
                        persistent_workers=a.workers > 0, pin_memory=dev == "cuda")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gpuscope.param(model="cnn3", device=dev, precision="fp32", step=a.step)
    steps, t_end = 0, time.monotonic() + a.seconds
    for x, y in gpuscope.watch(loader):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if steps % 25 == 0:
            gpuscope.log("loss", loss.item(), steps)
        if time.monotonic() > t_end:
            break
    print(f"{a.step}: {steps} steps of {a.batch} on {dev}, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
