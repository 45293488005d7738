# SPDX-License-Identifier: MIT
# A loopback HTTP load generator without dependencies: N client threads, each sending GET / on a
# new connection (no keep-alive) and reading the whole answer, for T seconds. Prints one JSON
# line: {"answered": requests with a 200 and the full body, "failed": errors or bad answers,
# "seconds": the measured time, "rps": answered per second}.
# Usage: python loadgen.py PORT [N=8] [T=5]
import json
import socket
import sys
import threading
import time

REQ = b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"


def one(port):
    """True if the server answered 200 with the body its Content-Length announced."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(REQ)
        data = b""
        while True:
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep or not head.startswith(b"HTTP/1.0 200"):
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) == int(v)
    return False


def client(port, end, counts, lock):
    ok = bad = 0
    while time.monotonic() < end:
        try:
            if one(port):
                ok += 1
            else:
                bad += 1
        except OSError:
            bad += 1
    with lock:
        counts[0] += ok
        counts[1] += bad


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    counts, lock = [0, 0], threading.Lock()
    t0 = time.monotonic()
    ths = [threading.Thread(target=client, args=(port, t0 + secs, counts, lock)) for _ in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    dt = time.monotonic() - t0
    print(json.dumps({"answered": counts[0], "failed": counts[1], "seconds": round(dt, 3),
                      "rps": round(counts[0] / dt, 1)}))


main()
