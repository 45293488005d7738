# SPDX-License-Identifier: MIT
# Signal masks against the agent's signal (SIGRTMIN+8). A worker thread blocks every signal, as
# worker threads often do, and spins 0.5 s of its CPU time in blocked_spin; the main thread
# blocks SIGRTMIN+8 itself, sends it to itself (its handler must not run while blocked), unblocks
# it (the handler runs once), then spins 0.5 s in main_spin. Prints the truth line:
#   truth before=0 after=1 main_view=True worker_view=True
# (the handler's calls before and after the unblock; whether each thread sees SIGRTMIN+8 in its
# own mask after blocking it). Usage: python sigmask.py
import signal
import threading
import time

RT = signal.SIGRTMIN + 8
seen = {}


def spin(secs):
    end = time.thread_time() + secs
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def blocked_spin():
    return spin(0.5)


def main_spin():
    return spin(0.5)


def worker():
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    seen["worker_view"] = RT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    blocked_spin()


got = []
signal.signal(RT, lambda s, f: got.append(s))
signal.pthread_sigmask(signal.SIG_BLOCK, [RT])
seen["main_view"] = RT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
signal.pthread_kill(threading.main_thread().ident, RT)
spin(0.02)  # a handler that ran would be called here, at the eval loop's next check
before = len(got)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [RT])
spin(0.02)
after = len(got)
t = threading.Thread(target=worker)
t.start()
main_spin()
t.join()
print(f"truth before={before} after={after} main_view={seen['main_view']} "
      f"worker_view={seen['worker_view']}", flush=True)
