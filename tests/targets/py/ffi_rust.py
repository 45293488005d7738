# SPDX-License-Identifier: MIT
# Calls a Rust cdylib (pyrs_ffi.rs, built by `make targets` into build/targets/py/libpyrs_ffi.so,
# or the path in $PYRS_FFI) through ctypes, from call_rust() on the line marked CALL-RUST, in a
# loop for SECONDS. Usage: python ffi_rust.py [SECONDS]. Prints "ready".
import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("PYRS_FFI") or os.path.join(HERE, "..", "..", "..", "build", "targets", "py",
                                                 "libpyrs_ffi.so")
lib = ctypes.CDLL(LIB)
lib.pyrs_spin.argtypes = [ctypes.c_uint64]
lib.pyrs_spin.restype = ctypes.c_uint64


def call_rust():
    return lib.pyrs_spin(20000000)  # CALL-RUST


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    end = time.time() + secs
    while time.time() < end:
        call_rust()


main()
