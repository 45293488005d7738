# SPDX-License-Identifier: MIT
# The middle of a chain shell -> Python -> Rust: spins in py_part for SECONDS (default 1), then runs
# the Rust program RUST (cpu_split_rs) for SECONDS and waits for it, and prints "py PID" and the
# child's exit status. Usage: python chain_rs.py RUST [SECONDS].
import os
import subprocess
import sys
import time


def py_part(secs):
    end = time.time() + secs
    n = 0
    while time.time() < end:
        for i in range(2000):
            n += i * 3  # HOT:py_part
    return n


secs = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
print("py %d" % os.getpid(), flush=True)
py_part(secs)
rc = subprocess.run([sys.argv[1], str(secs)]).returncode
print("rust exited %d" % rc, flush=True)
