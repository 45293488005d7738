# SPDX-License-Identifier: MIT
"""The live CPython the fuzz seeds are recorded from (record-py-seeds.sh): the main thread a few
frames deep in a sleep, two named threads (one spinning in Python, one blocked in a lock), a
method and a nested function (qualnames), a non-ASCII name."""
import threading
import time


class Worker:
    def spin(self, stop):
        n = 0
        while not stop.is_set():
            n += 1
        return n


def blocked(lock):
    def inner():
        lock.acquire()
    inner()


def grüße(depth):
    if depth:
        return grüße(depth - 1)
    time.sleep(60)


def main():
    stop = threading.Event()
    lock = threading.Lock()
    lock.acquire()
    threading.Thread(target=Worker().spin, args=(stop,), name="spinner", daemon=True).start()
    threading.Thread(target=blocked, args=(lock,), name="waiter: ünï", daemon=True).start()
    grüße(3)


main()
