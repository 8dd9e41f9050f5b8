#!/usr/bin/python3
"""Step 1 of the case study: a small image set, made once. A few hundred real JPEG files the size
of phone photos (500x375), each a smooth random background with one coloured shape whose colour is
its class, so the CNN has something to learn. A folder that already holds the set is reused.

    images.py DIR [--count 400]
"""
import argparse
import os
import random

from PIL import Image, ImageDraw, ImageFilter

W, H = 500, 375
COLOURS = [(220, 40, 40), (40, 160, 60), (40, 80, 220), (230, 200, 40), (160, 60, 200),
           (40, 200, 210), (240, 130, 30), (120, 120, 120), (250, 250, 250), (20, 20, 20)]


def make_image(i):
    rnd = random.Random(i)
    # A 5x4 random image blown up to photo size: smooth light and colour like a real scene.
    small = Image.new("RGB", (5, 4))
    small.putdata([tuple(rnd.randrange(256) for _ in range(3)) for _ in range(20)])
    img = small.resize((W, H), Image.BICUBIC)
    label = i % len(COLOURS)
    x, y, r = rnd.randrange(80, W - 80), rnd.randrange(80, H - 80), rnd.randrange(40, 80)
    ImageDraw.Draw(img).ellipse((x - r, y - r, x + r, y + r), fill=COLOURS[label])
    # Sensor-like grain, so the JPEG has the detail (and the decoding cost) of a photo.
    grain = Image.effect_noise((W, H), 24).convert("RGB")
    return Image.blend(img, grain, 0.15).filter(ImageFilter.SMOOTH), label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--count", type=int, default=400)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    names = [f"img{i:04d}_c{i % len(COLOURS)}.jpg" for i in range(a.count)]
    if all(os.path.exists(os.path.join(a.dir, n)) for n in names):
        print(f"step 1: {a.count} JPEGs already in {a.dir}, reused")
        return
    for i, name in enumerate(names):
        img, _ = make_image(i)
        tmp = os.path.join(a.dir, name + ".tmp")
        img.save(tmp, "JPEG", quality=90)
        os.replace(tmp, os.path.join(a.dir, name))  # a killed run never leaves half a file
    print(f"step 1: wrote {a.count} JPEGs ({W}x{H}) to {a.dir}")


if __name__ == "__main__":
    main()
