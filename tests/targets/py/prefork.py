# SPDX-License-Identifier: MIT
# A small pre-fork HTTP server: the parent opens a listening socket on 127.0.0.1 (an ephemeral
# port), forks WORKERS (default 3) that each accept and answer requests one at a time, and waits
# for them. Each request costs some CPU in handle() and is answered "pid PID n N". The parent
# prints "port PORT" and "worker PID" for each worker; SIGTERM to the parent stops the workers.
# Usage: python prefork.py [WORKERS].
import os
import signal
import socket
import sys

WORKERS = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def handle(conn, n):
    s = 0
    for i in range(30000):
        s += i * i  # HOT:handle
    conn.recv(4096)
    body = b"pid %d n %d\n" % (os.getpid(), n)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def serve(sock):
    n = 0
    while True:
        conn, _ = sock.accept()
        n += 1
        with conn:
            handle(conn, n)


def main():
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print("port %d" % sock.getsockname()[1], flush=True)
    pids = []
    for _ in range(WORKERS):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            serve(sock)
        pids.append(pid)
        print("worker %d" % pid, flush=True)

    def stop(*_):
        for p in pids:
            os.kill(p, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    for p in pids:
        while True:
            try:
                os.waitpid(p, 0)
                break
            except InterruptedError:
                continue


main()
