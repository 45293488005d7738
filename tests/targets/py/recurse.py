# SPDX-License-Identifier: MIT
# Recursion of a known depth: rec(depth) calls itself DEPTH times (default 300), then the innermost
# call sleeps on the line marked SLEEP. Usage: python recurse.py [DEPTH] [SECONDS]. Prints "ready".
import sys
import time

sys.setrecursionlimit(10000)
DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 300
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0


def rec(n):
    if n > 1:
        return rec(n - 1)  # RECURSE
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(SECS)  # SLEEP


rec(DEPTH)
