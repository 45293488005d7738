# SPDX-License-Identifier: MIT
# Threads that wait for the GIL, and a thread that waits on a lock, for the GIL-wait tests. Usage:
#   python gil.py gil N SECONDS     N threads of pure-Python work ("worker-0".."worker-N-1")
#   python gil.py lock N SECONDS    the same, beside "waiter" blocked on a threading.Lock that
#                                   "holder" keeps while it sleeps
# Prints "ready" once every thread runs; the main thread then joins them (itself a lock wait).
import sys
import threading
import time

MODE = sys.argv[1]


def spin(deadline):
    s = 0
    while time.monotonic() < deadline:
        for i in range(20000):  # GIL-WORK
            s = (s + i * i) % 1000003
    return s


def main():
    if MODE not in ("gil", "lock"):
        sys.exit("gil.py: unknown mode " + MODE)
    n, secs = int(sys.argv[2]), float(sys.argv[3])
    deadline = time.monotonic() + secs
    threads = [threading.Thread(target=spin, args=(deadline,), name="worker-%d" % i) for i in range(n)]
    if MODE == "lock":
        lock = threading.Lock()
        held = threading.Event()

        def holder():
            with lock:
                held.set()
                time.sleep(secs)

        def waiter():
            held.wait()
            with lock:  # LOCK-WAIT
                pass

        threads += [threading.Thread(target=holder, name="holder"),
                    threading.Thread(target=waiter, name="waiter")]
    for t in threads:
        t.start()
    time.sleep(0.2)
    print("ready", flush=True)
    for t in threads:
        t.join()
    print("done", flush=True)


main()
