# SPDX-License-Identifier: MIT
# A parent that exits while its children still work: forks 2 children that each spin in
# child_work for SECONDS (default 2) and then print "child PID done cpu=<its CPU seconds>"; the
# parent prints
# "child PID" for each, spins briefly in parent_work and exits 7 at once, without waiting.
# Usage: python orphans.py [SECONDS].
import os
import sys
import time

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0


def child_work(secs):
    end = time.time() + secs
    n = 0
    while time.time() < end:
        for i in range(2000):
            n += i * i  # HOT:child_work
    return n


def parent_work(secs):
    end = time.time() + secs
    n = 0
    while time.time() < end:
        n += 1
    return n


for _ in range(2):
    pid = os.fork()
    if pid == 0:
        child_work(SECS)
        print("child %d done cpu=%.3f" % (os.getpid(), time.process_time()), flush=True)
        os._exit(0)
    print("child %d" % pid, flush=True)
parent_work(0.2)
os._exit(7)
