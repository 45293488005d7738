# SPDX-License-Identifier: MIT
# Thread creation's cost: ROUNDS rounds of 1000 threads started and joined one after the other
# (each does nothing), after "ready" and a 1 s pause (time for a profiler to attach).
# Usage: python3 spawnthreads.py ROUNDS. Prints "round <ms>" per round of 1000 threads.
import sys
import threading
import time

print("ready", flush=True)
time.sleep(1.0)
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    for _ in range(1000):
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
    print("round %.1f" % ((time.perf_counter() - t0) * 1e3), flush=True)
