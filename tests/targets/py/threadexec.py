# SPDX-License-Identifier: MIT
# A thread that execs as soon as it starts: before a sampler that finds threads at its ticks has
# seized it, so the process's new image comes with no exec event (the thread takes the leader's
# pid untraced). Usage: python threadexec.py PROGRAM ARGS... (the program the process becomes).
import os
import sys
import threading


def go():
    os.execv(sys.argv[1], sys.argv[1:])


threading.Thread(target=go).start()
threading.Event().wait()  # (the exec ends it)
