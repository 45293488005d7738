# SPDX-License-Identifier: MIT
# A thread that sleeps in two places in turn, with a measured truth (the Python twin of
# tests/targets/waits.c). For the sampler's handling of sleeping threads, which are not read
# again while they have not moved: a thread that moves between two waits must still be seen in the
# right one, in both modes.
#
# Usage: python waits.py [SECONDS]. Thread "waiter" loops: wait_a() then wait_b(), each an
# os.read of one byte from the same pipe (from 3.11 on, both block under the same C frames of the
# eval loop: only the Python frames tell them apart). Thread "feeder" writes a byte after a random
# 20-40 ms (ending wait_a) and after 5-15 ms (ending wait_b). Prints "tid N name" for each thread,
# "ready", and at the end "truth wait_a=X wait_b=Y": the wall-time fractions the waiter measured.
import ctypes
import os
import random
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
r, w = os.pipe()
lock = threading.Lock()
ready = threading.Barrier(3)


def announce(name):
    with lock:
        sys.stdout.write("tid %d %s\n" % (libc.syscall(186), name))  # SYS_gettid
        sys.stdout.flush()


def wait_a():
    return os.read(r, 1)  # WAIT-a


def wait_b():
    return os.read(r, 1)  # WAIT-b


def waiter():
    announce("waiter")
    ready.wait()
    ta = tb = 0.0
    while True:
        t0 = time.monotonic()
        if not wait_a():
            break
        t1 = time.monotonic()
        if not wait_b():
            break
        t2 = time.monotonic()
        ta += t1 - t0
        tb += t2 - t1
    with lock:
        sys.stdout.write("truth wait_a=%.4f wait_b=%.4f\n" % (ta / (ta + tb), tb / (ta + tb)))
        sys.stdout.flush()


def feeder():
    announce("feeder")
    ready.wait()
    rnd = random.Random(12345)
    end = time.monotonic() + SECS
    while time.monotonic() < end:
        time.sleep(rnd.uniform(0.020, 0.040))
        os.write(w, b"a")
        time.sleep(rnd.uniform(0.005, 0.015))
        os.write(w, b"b")
    os.close(w)  # ends the waiter's read


announce("main")
threads = [threading.Thread(target=waiter, name="waiter"), threading.Thread(target=feeder, name="feeder")]
for t in threads:
    t.start()
ready.wait()
sys.stdout.write("ready\n")
sys.stdout.flush()
for t in threads:
    t.join()
