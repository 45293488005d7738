# SPDX-License-Identifier: MIT
# Fixed work in a process pool, timed (the slowdown benchmark, tests/bench/bench_ticks.py): a
# multiprocessing Pool of 4 workers (fork) runs 4 tasks of ITERS pure-Python loop turns each.
# Usage: python poolwork.py [ITERS]. Prints "wall=<seconds>" (pool created to pool joined, the
# monotonic clock) and "check=<n>" (the tasks' results, so the work cannot be skipped).
import multiprocessing
import sys
import time


def task(iters):
    s = 0
    for i in range(iters):
        s = (s + i * i) % 1000003
    return s


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    t0 = time.monotonic()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        res = pool.map(task, [iters] * 4, chunksize=1)
    wall = time.monotonic() - t0
    print("wall=%.4f" % wall)
    print("check=%d" % sum(res))


if __name__ == "__main__":
    main()
