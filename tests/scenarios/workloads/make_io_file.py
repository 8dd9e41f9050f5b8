#!/usr/bin/python3
"""Writes the data file the storage-bound scenario reads with O_DIRECT: real blocks on disk (not a
sparse file, whose holes would read without any I/O).  make_io_file.py PATH MIB"""
import os
import sys

path, mib = sys.argv[1], int(sys.argv[2])
if not (os.path.exists(path) and os.path.getsize(path) == mib << 20):
    block = bytes(range(256)) * 4096  # 1 MiB
    with open(path + ".tmp", "wb") as f:
        for _ in range(mib):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
