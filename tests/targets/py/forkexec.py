# SPDX-License-Identifier: MIT
# Forks and execs while being sampled: spins a little, forks a child that spins and exits 3, waits
# for it, then execs itself as "forkexec.py final" which spins and exits 5. Usage: python
# forkexec.py. The exit status (5) is the truth the test checks.
import os
import sys
import time


def spin(secs):
    end = time.time() + secs
    n = 0
    while time.time() < end:
        n += 1
    return n


if len(sys.argv) > 1 and sys.argv[1] == "final":
    spin(0.5)
    sys.exit(5)
spin(0.5)
pid = os.fork()
if pid == 0:
    spin(0.3)
    os._exit(3)
_, status = os.waitpid(pid, 0)
assert os.WEXITSTATUS(status) == 3
os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "final"])
