# SPDX-License-Identifier: MIT
# Python workloads for the classifier's end-to-end tests, each measuring itself. Usage:
#   python bounds.py loop SECONDS     a pure-Python loop (loop_work)
#   python bounds.py sleep SECONDS    time.sleep(0.01) in a loop
#   python bounds.py gil SECONDS      4 threads of pure-Python work (GIL contention)
# Prints "truth cpu=C" (process CPU time / wall time) or "truth wait=W" (share of wall time in
# time.sleep), then "done".
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "loop"
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0


def loop_work(n):  # HOT:loop_work
    s = 0
    for i in range(n):
        s = (s + i * i) % 1000003
    return s


def loop(deadline):
    while time.monotonic() < deadline:
        loop_work(20000)


t0, c0 = time.monotonic(), time.process_time()
if MODE == "loop":
    loop(t0 + SECS)
    print("truth cpu=%.3f" % ((time.process_time() - c0) / (time.monotonic() - t0)))
elif MODE == "sleep":
    slept = 0.0
    while time.monotonic() - t0 < SECS:
        s = time.monotonic()
        time.sleep(0.01)
        slept += time.monotonic() - s
    print("truth wait=%.3f" % (slept / (time.monotonic() - t0)))
elif MODE == "gil":
    threads = [threading.Thread(target=loop, args=(t0 + SECS,), name="worker-%d" % i) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("truth cpu=%.3f" % ((time.process_time() - c0) / (time.monotonic() - t0)))
else:
    sys.exit("bounds.py: unknown mode " + MODE)
print("done")
