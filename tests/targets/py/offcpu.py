# SPDX-License-Identifier: MIT
# One thread on the CPU, two off it, for the same wall time, each measuring itself (the Python
# twin of tests/targets/offcpu.c). Usage: python offcpu.py [SECONDS]. main spins in spin();
# thread "napper" sleeps in nap() (time.sleep(0.02) in a loop); thread "piper" blocks in
# wait_pipe() (os.read on a pipe main writes one byte to at the end). Prints
# "thread NAME tid=N" for each, then "truth spin_cpu=S spin_wall=S nap=S pipe=S" (main's CPU
# time and wall time in spin(), the wall time of the other two in their functions).
import os
import sys
import threading
import time

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
stop = False
took = {}
r, w = os.pipe()


def announce(name):
    tid = threading.get_native_id() if hasattr(threading, "get_native_id") else -1
    sys.stdout.write("thread %s tid=%d\n" % (name, tid))
    sys.stdout.flush()


def nap():
    while not stop:
        time.sleep(0.02)  # NAP


def wait_pipe():
    return os.read(r, 1)  # PIPE


def napper():
    announce("napper")
    t0 = time.monotonic()
    nap()
    took["nap"] = time.monotonic() - t0


def piper():
    announce("piper")
    t0 = time.monotonic()
    wait_pipe()
    took["pipe"] = time.monotonic() - t0


def spin(until):
    x = 0
    while time.monotonic() < until:
        for i in range(1000):
            x ^= i * 7  # SPIN
    return x


def main():
    global stop
    threads = [threading.Thread(target=napper, name="napper"),
               threading.Thread(target=piper, name="piper")]
    for t in threads:
        t.start()
    c0 = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
    w0 = time.monotonic()
    spin(w0 + SECS)
    cpu = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - c0
    wall = time.monotonic() - w0
    stop = True
    os.write(w, b"x")
    for t in threads:
        t.join()
    sys.stdout.write("truth spin_cpu=%.4f spin_wall=%.4f nap=%.4f pipe=%.4f\n"
                     % (cpu, wall, took["nap"], took["pipe"]))
    sys.stdout.flush()


main()
