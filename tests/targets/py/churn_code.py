# SPDX-License-Identifier: MIT
# Code objects created and freed in a loop: each iteration compiles a new function k<K>_<I>
# (K = I mod 3), runs it for a short while from call_k<K>, and drops it, so that its code
# object's memory is freed and reused by the next iterations' code objects (CPython's allocator
# hands the last freed block out first). A sample named by a code object that reused the address
# of the one sampled shows a function of another kind under call_k<K>: the mismatch is the
# misnaming a profiler can make by naming a frame after the sample (only a reuse by a function of
# the same kind, three iterations later or more, would not show). Usage: python churn_code.py
# [SECONDS]. Prints "functions=N" at the end.
import sys
import time

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
SRC = "def k%d_%d():\n    x = 0\n    for j in range(2000):\n        x ^= j * %d\n    return x\n"


def call_k0(f):
    return f()


def call_k1(f):
    return f()


def call_k2(f):
    return f()


CALLERS = (call_k0, call_k1, call_k2)


def main():
    end = time.monotonic() + SECS
    i = 0
    while time.monotonic() < end:
        k = i % 3
        g = {}
        exec(compile(SRC % (k, i, i), "<churn>", "exec"), g)
        f = g.pop("k%d_%d" % (k, i))  # (no cycle: the function is freed at once below)
        CALLERS[k](f)
        del f, g
        i += 1
    print("functions=%d" % i)


main()
