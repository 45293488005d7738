# SPDX-License-Identifier: MIT
# Threads whose `threading` names the reader must find, one for each place a Thread's attributes
# can live and each kind of str. Usage:
#   python threadnames.py [SECONDS] [RENAME_AFTER]
# Prints "tid <native tid> <json name>" for every thread (the name threading holds for it, or
# null for the thread started with _thread, which threading does not know), then "ready". With
# RENAME_AFTER, the thread "early" is renamed "renamed-late" that many seconds after "ready".
import _thread
import ctypes
import json
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
RENAME_AFTER = float(sys.argv[2]) if len(sys.argv) > 2 else None
DEADLINE = time.time() + SECS
lock = threading.Lock()
started = []


def announce(name):
    with lock:
        sys.stdout.write("tid %d %s\n" % (libc.syscall(186), json.dumps(name)))  # SYS_gettid
        sys.stdout.flush()
        started.append(name)


def body():
    announce(threading.current_thread().name)
    while time.time() < DEADLINE:
        time.sleep(0.05)


def raw_body():
    announce(None)
    while time.time() < DEADLINE:
        time.sleep(0.05)


class ManyAttrs(threading.Thread):
    """A subclass setting 40 attributes of its own: more than the shared keys of 3.11+ hold, so
    its instances get a dict of their own."""

    def __init__(self, **kw):
        for i in range(40):
            setattr(self, "attr%02d" % i, i)
        threading.Thread.__init__(self, **kw)


def main():
    threads = [threading.Thread(target=body, name=n) for n in
               ("plain", "w\u00f6rker-\u540d", "spool-\U0001f9f5", "L" * 300, "dicted", "before", "early",
                "evil\x1b[2J\nline")]
    threads.append(ManyAttrs(target=body, name="many-attrs"))
    for t in threads:
        t.daemon = True
    for t in threads:
        if t.name == "before":
            t.start()
            while "before" not in started:
                time.sleep(0.005)
            t.name = "after"  # renamed after start: announced as "before", named "after" now
        else:
            t.start()
    vars(threads[4])  # "dicted": asking for __dict__ makes 3.11+ build a dict of its attributes
    _thread.start_new_thread(raw_body, ())
    while len(started) < len(threads) + 1:
        time.sleep(0.005)
    announce(threading.current_thread().name)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if RENAME_AFTER is not None:
        time.sleep(RENAME_AFTER)
        threads[6].name = "renamed-late"
    while time.time() < DEADLINE:
        time.sleep(0.05)


main()
