#!/usr/bin/python3
"""Step 4's offline part: decode every JPEG once, resize its short side as training would, and
store the pixels as one uint8 array file (N x 3 x H x W) that training memory-maps, with a small
JSON file beside it (shape, labels). Done again only when the image set is newer than the file.

    predecode.py IMAGES_DIR OUT_FILE
"""
import glob
import json
import os
import sys

import numpy as np
from PIL import Image

from train import CROP, SHORT_SIDE, label_of


def main():
    folder, out = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(folder, "*.jpg")))
    if not files:
        sys.exit(f"predecode.py: no JPEG files in {folder}")
    newest = max(os.path.getmtime(f) for f in files)
    if os.path.exists(out + ".json") and os.path.getmtime(out + ".json") >= newest:
        print(f"step 4: {out} is up to date, reused")
        return
    with Image.open(files[0]) as img:
        w, h = img.size
    # The short side becomes SHORT_SIDE, as T.Resize(SHORT_SIDE) does for the JPEG pipeline.
    size = (round(w * SHORT_SIDE / h), SHORT_SIDE) if h <= w else (SHORT_SIDE, round(h * SHORT_SIDE / w))
    assert min(size) >= CROP
    arr = np.memmap(out + ".tmp", dtype=np.uint8, mode="w+", shape=(len(files), 3, size[1], size[0]))
    for i, f in enumerate(files):
        with Image.open(f) as img:
            arr[i] = np.asarray(img.convert("RGB").resize(size, Image.BILINEAR)).transpose(2, 0, 1)
    arr.flush()
    del arr
    os.replace(out + ".tmp", out)
    with open(out + ".json.tmp", "w") as f:
        json.dump({"shape": [len(files), 3, size[1], size[0]], "labels": [label_of(p) for p in files]}, f)
    os.replace(out + ".json.tmp", out + ".json")
    print(f"step 4: decoded {len(files)} JPEGs once into {out} ({os.path.getsize(out) >> 20} MiB)")


if __name__ == "__main__":
    main()
