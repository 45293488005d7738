# SPDX-License-Identifier: MIT
# A process pool of 4 workers, each with a known CPU split between two functions: worker k runs
# part_a for SHARES[k][0] and part_b for SHARES[k][1] slices of 10 ms of its own CPU time, in
# turn, until SECONDS of wall time have passed; each call is timed with the thread's CPU clock.
# Usage: python pool.py fork|spawn|forkserver|executor [SECONDS]. The parent prints "ready" once
# the pool runs, then for each task "worker PID part_a=<seconds> part_b=<seconds>" (the CPU
# time its worker measured in each) and "done" at the end. Slices longer than a sampling period
# make the expected split exact to a sample per slice, not a binomial guess; many short cycles,
# not a few long ones: 4 workers share 2 CPUs, and when a worker gets a CPU is tied to its phase
# (spawn at 400 Hz, 5 runs each, deviations of the 20 workers from their truth: 40 ms slices
# -4.3..+5.9 points, 10 ms -3.2..+2.1; the (2, 3) worker's 10 cycles of 200 ms strayed 6-9 points
# in CI runs).
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

SHARES = [(1, 1), (1, 3), (3, 1), (2, 3)]
SLICE_S = 0.01
cpu = lambda: time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def part_a(secs):
    end = cpu() + secs
    s = 0
    while cpu() < end:
        for i in range(3000):
            s += i * i  # HOT:part_a
    return s


def part_b(secs):
    end = cpu() + secs
    s = 0
    while cpu() < end:
        for i in range(3000):
            s ^= i * 7  # HOT:part_b
    return s


def work(args):
    k, secs = args
    ka, kb = SHARES[k]
    ta = tb = 0.0
    end = time.time() + secs
    while time.time() < end:
        t0 = cpu()
        part_a(SLICE_S * ka)
        t1 = cpu()
        part_b(SLICE_S * kb)
        t2 = cpu()
        ta += t1 - t0
        tb += t2 - t1
    return os.getpid(), ta, tb


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "fork"
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    tasks = [(k, secs) for k in range(len(SHARES))]
    if how == "executor":
        pool = ProcessPoolExecutor(max_workers=4, mp_context=multiprocessing.get_context("fork"))
        results = pool.map(work, tasks)
    else:
        pool = multiprocessing.get_context(how).Pool(4)
        results = pool.imap(work, tasks, chunksize=1)
    print("ready", flush=True)
    for pid, ta, tb in results:
        print("worker %d part_a=%.4f part_b=%.4f" % (pid, ta, tb), flush=True)
    if how == "executor":
        pool.shutdown()
    else:
        pool.close()
        pool.join()
    print("done", flush=True)


if __name__ == "__main__":
    main()
