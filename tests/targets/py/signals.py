# SPDX-License-Identifier: MIT
# A program that uses signals itself, counting what its handlers get. Usage: python signals.py
# [SECONDS] (CPU seconds per phase, default 0.6). Three phases, each followed by SECONDS of CPU in
# its own function: SIGUSR1 handled and sent to itself N times (after_usr1); SIGPROF handled with
# ITIMER_PROF every 10 ms of process CPU time (with_prof); SIGRTMIN+8 handled and sent to itself
# M times (after_rt: the preload agent's own signal). Prints
#   truth usr1=GOT/N prof=GOT/EXPECTED rt=GOT/M
# EXPECTED: the process CPU time under the timer / 10 ms.
import os
import signal
import sys
import time

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 0.6
N, M, TICK = 50, 20, 0.01
got = {"usr1": 0, "prof": 0, "rt": 0}


def counter(key):
    def handler(signum, frame):
        got[key] += 1
    return handler


def spin(secs):
    c0, x = time.process_time(), 0
    while time.process_time() - c0 < secs:
        for i in range(1000):
            x ^= i * 7
    return x


def after_usr1():
    return spin(SECS)


def with_prof():
    return spin(SECS)


def after_rt():
    return spin(SECS)


def send(sig, key, n):
    for i in range(n):
        os.kill(os.getpid(), sig)
        end = time.monotonic() + 2
        while got[key] < i + 1 and time.monotonic() < end:
            pass


def main():
    signal.signal(signal.SIGUSR1, counter("usr1"))
    send(signal.SIGUSR1, "usr1", N)
    after_usr1()
    signal.signal(signal.SIGPROF, counter("prof"))
    c0 = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, TICK, TICK)
    with_prof()
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    expect = (time.process_time() - c0) / TICK
    rt = signal.SIGRTMIN + 8
    signal.signal(rt, counter("rt"))
    send(rt, "rt", M)
    after_rt()
    print("truth usr1=%d/%d prof=%d/%d rt=%d/%d" % (got["usr1"], N, got["prof"], expect, got["rt"], M))


main()
