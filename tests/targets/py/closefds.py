# SPDX-License-Identifier: MIT
# Children that close every descriptor they inherited, as daemons do at start: the first closes
# all of them (stdio too) and spins in closed_spin, exiting 4; the second closes all but stdio and
# execs Python again ("exec" mode), which spins in exec_spin and exits 6. The parent waits for both
# and prints "closefds ok PID1 PID2" if their statuses are right. Usage: python closefds.py [SECONDS].
import os
import sys
import time


def spin(secs):
    end = time.time() + secs
    n = 0
    while time.time() < end:
        n += 1
    return n


def closed_spin(secs):
    return spin(secs)


def exec_spin(secs):
    return spin(secs)


if len(sys.argv) > 2 and sys.argv[1] == "exec":
    exec_spin(float(sys.argv[2]))
    sys.exit(6)
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
kids = []
a = os.fork()
if a == 0:
    os.closerange(0, 65536)
    closed_spin(secs)
    os._exit(4)
b = os.fork()
if b == 0:
    os.closerange(3, 65536)
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "exec", str(secs)])
sa, sb = os.waitpid(a, 0)[1], os.waitpid(b, 0)[1]
if os.WEXITSTATUS(sa) == 4 and os.WEXITSTATUS(sb) == 6:
    print("closefds ok %d %d" % (a, b), flush=True)
else:
    print("closefds bad %#x %#x" % (sa, sb), flush=True)
