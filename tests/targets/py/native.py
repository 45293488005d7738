# SPDX-License-Identifier: MIT
# Work inside C-implemented calls: python native.py sort|zlib|hash|all [SECONDS] (all: the three
# kinds in turn, a quarter of a second each, so that one recording holds all three).
# do_sort: sorted() of a large list (list_sort in libpython); do_zlib: zlib.compress (libz);
# do_hash: hashlib.sha256 over a large buffer (OpenSSL or the _sha256 module). Each call is on the
# line marked CALL-<kind>. Prints "ready".
import hashlib
import random
import sys
import time
import zlib

KIND = sys.argv[1] if len(sys.argv) > 1 else "sort"
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
random.seed(7)
DATA = [random.random() for _ in range(200000)]
BLOB = bytes(random.getrandbits(8) for _ in range(1 << 16)) * 16


def do_sort():
    return sorted(DATA)  # CALL-sort


def do_zlib():
    return zlib.compress(BLOB, 9)  # CALL-zlib


def do_hash():
    return hashlib.sha256(BLOB).digest()  # CALL-hash


def main():
    kinds = {"sort": do_sort, "zlib": do_zlib, "hash": do_hash}
    fns = list(kinds.values()) if KIND == "all" else [kinds[KIND]]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    end = time.time() + SECS
    while time.time() < end:
        for fn in fns:
            turn = min(time.time() + 0.25, end)
            while time.time() < turn:
                fn()


main()
