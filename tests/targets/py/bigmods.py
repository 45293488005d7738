# SPDX-License-Identifier: MIT
# A program with CPython, NumPy and a large Rust library loaded: rustc's own librustc_driver and
# its LLVM (~350 MB of code) from the Rust toolchain, if found (argument 2: its lib folder).
# Usage: python3 bigmods.py SECONDS [RUST_LIB_DIR]. Works for SECONDS in NumPy (matrix product,
# sort, FFT) and pure Python, then prints "end <time.time()>" as its last act.
import ctypes
import glob
import os
import sys
import time

import numpy as np


def load_rust(libdir):
    """Loads LLVM and rustc's driver (they need more static TLS than glibc leaves for dlopen:
    the caller sets GLIBC_TUNABLES=glibc.rtld.optional_static_tls)."""
    for pat in ("libLLVM.so.*", "librustc_driver-*.so"):
        for lib in sorted(glob.glob(os.path.join(libdir, pat)))[:1]:
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
            print("loaded", lib, flush=True)


def py_part(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def main():
    secs = float(sys.argv[1])
    if len(sys.argv) > 2:
        load_rust(sys.argv[2])
    a = np.random.rand(300, 300)
    end = time.time() + secs
    while time.time() < end:
        a @ a
        np.sort(np.random.rand(100000))
        np.fft.fft(np.random.rand(65536))
        py_part(20000)
    print("end %.6f" % time.time(), flush=True)


if __name__ == "__main__":
    main()
