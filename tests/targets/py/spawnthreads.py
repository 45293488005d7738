# SPDX-License-Identifier: MIT
# Thread creation's cost: ROUNDS rounds of 1000 threads started and joined one after the other
# (each does nothing), after "ready" and a 1 s pause (time for a profiler to attach).
# Usage: python3 spawnthreads.py ROUNDS. Prints "round <ms> cpu <ms>" per round of 1000 threads:
# its wall time, and the CPU time of the whole process meanwhile (user + system, every thread).
import sys
import threading
import time

print("ready", flush=True)
time.sleep(1.0)
for _ in range(int(sys.argv[1])):
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(1000):
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
    print("round %.1f cpu %.1f" % ((time.perf_counter() - t0) * 1e3,
                                   (time.process_time() - c0) * 1e3), flush=True)
