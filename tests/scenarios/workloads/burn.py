#!/usr/bin/python3
"""A CPU load generator in the spirit of `stress --cpu N`: N processes spin on arithmetic for a fixed
time. It sends nothing to gpuscope: a job the doctor sees only through the host and the process tree.

    burn.py --procs 1 --seconds 10"""
import argparse
import multiprocessing
import time


def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(20000):
            x = (x * 31 + i) % 1000003


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args()
    ps = [multiprocessing.Process(target=spin, args=(a.seconds,)) for _ in range(a.procs - 1)]
    for p in ps:
        p.start()
    spin(a.seconds)
    for p in ps:
        p.join()
    print("done")


if __name__ == "__main__":
    main()
