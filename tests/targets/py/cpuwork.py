# SPDX-License-Identifier: MIT
# A fixed pure-Python CPU workload that times itself (for overhead benchmarks). Usage:
#   python cpuwork.py [ITERATIONS] [DEPTH]   runs the loop ITERATIONS times at call depth DEPTH,
# prints "ready" first and "elapsed <wall seconds> cpu <process CPU seconds>" of the loop at the end.
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000000
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 10


def work(n):
    s = 0
    for i in range(n):
        s = (s + i * i) % 1000003
    return s


def down(d, n):
    if d > 1:
        return down(d - 1, n)
    return work(n)


sys.stdout.write("ready\n")
sys.stdout.flush()
t0 = time.perf_counter()
c0 = time.process_time()
down(DEPTH, N)
sys.stdout.write("elapsed %.6f cpu %.6f\n" % (time.perf_counter() - t0, time.process_time() - c0))
