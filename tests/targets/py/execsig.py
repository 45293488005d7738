# SPDX-License-Identifier: MIT
# What an exec keeps of SIGRTMIN+8 (the agent's signal): stage 0 spins and execs stage 1, which
# prints its action (SIG_DFL: the exec of a program that never touched it), ignores the signal,
# blocks it and execs stage 2, which prints its action (SIG_IGN, kept by exec) and whether it
# is blocked (True, inherited), sends it to itself (ignored: it lives on) and spins in
# stage2_spin. Prints "stage1 0" (SIG_DFL) and "stage2 1 True" (SIG_IGN, blocked), exits 0.
# Usage: python execsig.py
import os
import signal
import sys
import time

RT = signal.SIGRTMIN + 8


def spin(secs):
    end = time.thread_time() + secs
    while time.thread_time() < end:
        pass


def stage2_spin():
    spin(0.3)


def again(stage):
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), stage])


stage = sys.argv[1] if len(sys.argv) > 1 else "0"
if stage == "0":
    spin(0.2)
    again("1")
elif stage == "1":
    print("stage1", int(signal.getsignal(RT)), flush=True)
    signal.signal(RT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [RT])
    spin(0.2)
    again("2")
else:
    print("stage2", int(signal.getsignal(RT)), RT in signal.pthread_sigmask(signal.SIG_BLOCK, []), flush=True)
    os.kill(os.getpid(), RT)
    stage2_spin()
