# SPDX-License-Identifier: MIT
# A fork from a thread just started: one that a sampler finding new threads at its ticks has not
# seized yet when it forks, so the child starts untraced (no fork event) and must be found later.
# Main starts a thread that forks at once; the child spins in child_spin for SECONDS of its CPU
# time (default 1) and prints "child PID cpu=<its CPU seconds>"; the thread waits for it, main
# joins the thread and prints "done". Usage: python threadfork.py [SECONDS].
import os
import sys
import threading
import time

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def child_spin(secs):
    n = 0
    while time.process_time() < secs:
        for i in range(2000):
            n += i * i
    return n


def forker():
    pid = os.fork()
    if pid == 0:
        child_spin(SECS)
        print(f"child {os.getpid()} cpu={time.process_time():.3f}", flush=True)
        os._exit(0)
    os.waitpid(pid, 0)


t = threading.Thread(target=forker)
t.start()
t.join()
print("done", flush=True)
