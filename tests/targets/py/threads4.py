# SPDX-License-Identifier: MIT
# Four named threads with different stacks, plus the main thread. Usage:
#   python threads4.py sleep [SECONDS]   each thread sleeps on its own marked line (SLEEP-<name>)
#   python threads4.py cpu [SECONDS]     each thread spins in pure Python (GIL contention)
# Prints "tid <native tid> <name>" for every thread (kernel tid from gettid(), read the same way on
# every version) and then "ready".
import ctypes
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
MODE = sys.argv[1] if len(sys.argv) > 1 else "sleep"
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
started = threading.Barrier(5)
lock = threading.Lock()


def gettid():
    return libc.syscall(186)  # SYS_gettid on x86_64


def announce(name):
    with lock:
        sys.stdout.write("tid %d %s\n" % (gettid(), name))
        sys.stdout.flush()


def spin(deadline):
    n = 0
    while time.time() < deadline:
        for i in range(5000):
            n += i  # SPIN
    return n


def alpha(deadline):
    announce("alpha")
    started.wait()
    if MODE == "cpu":
        return spin(deadline)
    time.sleep(deadline - time.time())  # SLEEP-alpha


def beta_inner(deadline):
    time.sleep(deadline - time.time())  # SLEEP-beta


def beta(deadline):
    announce("beta")
    started.wait()
    if MODE == "cpu":
        return spin(deadline)
    beta_inner(deadline)


def gamma(deadline):
    announce("gamma")
    started.wait()
    if MODE == "cpu":
        return spin(deadline)
    time.sleep(deadline - time.time())  # SLEEP-gamma


def delta(deadline):
    announce("delta")
    started.wait()
    if MODE == "cpu":
        return spin(deadline)
    time.sleep(deadline - time.time())  # SLEEP-delta


def main():
    deadline = time.time() + SECS
    ts = [threading.Thread(target=f, args=(deadline,), name=f.__name__)
          for f in (alpha, beta, gamma, delta)]
    for t in ts:
        t.start()
    announce("main")
    started.wait()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for t in ts:
        t.join()  # JOIN


main()
