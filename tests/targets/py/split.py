# SPDX-License-Identifier: MIT
# A two-function CPU workload with a measured truth: the main loop alternates hot_a and hot_b
# (hot_b does about twice the work), and measures the thread CPU time spent in each with
# clock_gettime(CLOCK_THREAD_CPUTIME_ID) around every call. Usage: python split.py [SECONDS]. Prints "ready" at the
# start and "truth hot_a=<fraction> hot_b=<fraction> cpu_s=<seconds in both>" at the end.
import sys
import time

cpu = lambda: time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0


def hot_a(n):
    s = 0
    for i in range(n):
        s += i * i  # HOT:hot_a
    return s


def hot_b(n):
    s = 0
    for i in range(n):
        s ^= i * 3  # HOT:hot_b
    return s


def main():
    ta = tb = 0.0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    end = time.time() + SECS
    while time.time() < end:
        t0 = cpu()
        hot_a(20000)
        t1 = cpu()
        hot_b(40000)
        t2 = cpu()
        ta += t1 - t0
        tb += t2 - t1
    tot = ta + tb
    sys.stdout.write("truth hot_a=%.4f hot_b=%.4f cpu_s=%.3f\n" % (ta / tot, tb / tot, tot))
    sys.stdout.flush()


main()
