# SPDX-License-Identifier: MIT
# Target with a known call chain: <module> -> main -> a -> b -> c, where c spins until the deadline
# with most of its time on the line marked "WORK" (the inner loop's body is several times the
# bytecode of its "for" line). Usage: python chain.py [SECONDS]. Prints "ready" once the loop runs.
# The tests find the expected line numbers by searching this file for the markers.
import sys
import time


def c(deadline):
    n = 0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while time.time() < deadline:
        for i in range(20000):
            n = (n + i * i * 3 + (i ^ 5) * 7) % 1000003  # WORK
    return n


def b(deadline):
    return c(deadline)  # CALL-C


def a(deadline):
    return b(deadline)  # CALL-B


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    a(time.time() + secs)  # CALL-A


if __name__ == "__main__":
    main()  # CALL-MAIN
