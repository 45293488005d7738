# SPDX-License-Identifier: MIT
# Code-object churn: builds functions f_0, f_1, ... one after another with exec (each in its own
# code object, from the same-sized source so pymalloc tends to reuse the freed address), runs each
# for about 10 ms, then drops it. The N of the running function only grows, so a profiler that
# mislabels a reused code address would show an older N after a newer one.
# Usage: python churn.py [SECONDS]. Prints "ready".
import gc
import sys
import time

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
SRC = """
def f_%06d(deadline):
    n = 0
    while time.time() < deadline:
        n += 1
    return n
"""


def main():
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    end = time.time() + SECS
    n = 0
    while time.time() < end:
        ns = {"time": time}
        exec(compile(SRC % n, "churn_gen.py", "exec"), ns)
        ns["f_%06d" % n](time.time() + 0.01)
        del ns
        gc.collect()
        n += 1


main()
