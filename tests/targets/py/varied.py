# SPDX-License-Identifier: MIT
# A pure-Python workload doing varied work, so that a profile spends its time in many of the
# interpreter's own C functions (dicts, sets, str, bytes, re, json, sorting, ints, floats, closures)
# rather than in one eval loop. Usage: python varied.py [SECONDS] (default 3). Prints "done N".
import json
import re
import sys
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
WORD = re.compile(r"[a-z]+(\d+)")


def dicts(n):
    d = {}
    for i in range(n):
        d["k%d" % i] = i
    return sum(v for k, v in d.items() if k.endswith("7"))


def sets(n):
    a = set(range(0, n, 2))
    b = set(range(0, n, 3))
    return len(a & b) + len(a | b) + len(a ^ b)


def strings(n):
    parts = [("%05d" % i).upper() + "x" * (i % 7) for i in range(n)]
    joined = ",".join(parts)
    return len(joined.split(",")) + joined.count("X") + len(joined.lower().replace("x", "yz"))


def regexes(n):
    text = " ".join("word%d" % i for i in range(n))
    return sum(int(m.group(1)) for m in WORD.finditer(text))


def jsons(n):
    obj = [{"id": i, "name": "n%d" % i, "tags": ["a", "b", str(i)], "v": i / 3} for i in range(n)]
    return len(json.loads(json.dumps(obj)))


def sorting(n):
    data = [(i * 7919) % 1009 for i in range(n)]
    return sorted(data, key=lambda x: -x)[0] + sorted(map(str, data))[0].__len__()


def arith(n):
    s, f = 1, 0.0
    for i in range(1, n):
        s = (s * i) % 1000000007
        f += i ** 0.5
    return s + int(f) + (1 << 200) // 12345


def closures(n):
    fs = [(lambda k: lambda x: x + k)(i) for i in range(n)]
    return sum(f(1) for f in fs)


def byteswork(n):
    b = bytearray()
    for i in range(n):
        b += i.to_bytes(4, "little")
    return len(bytes(b).hex())


WORK = (dicts, sets, strings, regexes, jsons, sorting, arith, closures, byteswork)

end = time.monotonic() + SECONDS
rounds = 0
while time.monotonic() < end:
    for fn in WORK:
        fn(2000)
    rounds += 1
print("done", rounds)
