# SPDX-License-Identifier: MIT
"""kalloc: NumPy allocations whose page zeroing is kernel work, for the kernel-stack tests.
alloc() makes a fresh 32 MiB array of ones (malloc maps new pages; filling them faults each one
in, and the kernel zeroes it: clear_page_*); spin() is pure Python. Usage: kalloc.py SECONDS"""
import sys
import time

import numpy as np


def alloc():
    a = np.ones(32 << 20, dtype=np.uint8)  # LINE:alloc
    return int(a[0])


def spin():
    x = 0
    for i in range(200000):  # LINE:spin
        x += i
    return x


def main():
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 2)
    while time.monotonic() < end:
        alloc()
        spin()
    print("done")


main()
