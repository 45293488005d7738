# SPDX-License-Identifier: MIT
# A forked child that works and exits while pyrsprof is late: the parent stops pyrsprof (its own
# parent: SIGSTOP is to the program what a pyrsprof starved of CPU is, it reads nothing), forks a
# child that spins in `work` for WORK_S seconds of its CPU time and exits with os._exit (as a
# forked multiprocessing worker does), and resumes pyrsprof LATE_S seconds after the child has
# finished its work. Prints "child PID cpu=SECONDS" (the child's CPU time in `work`).
# Usage: python late_reader.py [WORK_S] [LATE_S]
import os
import signal
import sys
import time

cpu = lambda: time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def work(secs):
    end = cpu() + secs
    s = 0
    while cpu() < end:
        for i in range(1000):
            s += i  # HOT:work
    return s


def main():
    work_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
    late_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    prof = os.getppid()
    done_r, done_w = os.pipe()
    os.kill(prof, signal.SIGSTOP)
    try:
        pid = os.fork()
        if pid == 0:
            os.close(done_r)
            t0 = cpu()
            work(work_s)
            print("child %d cpu=%.4f" % (os.getpid(), cpu() - t0), flush=True)
            os.write(done_w, b"x")
            os._exit(0)
        os.close(done_w)
        os.read(done_r, 1)  # the child's work is done: it exits now, pyrsprof still stopped
        time.sleep(late_s)
    finally:
        os.kill(prof, signal.SIGCONT)
    _, status = os.waitpid(pid, 0)
    print("done", status, flush=True)


if __name__ == "__main__":
    main()
