# SPDX-License-Identifier: MIT
# A thread-per-request HTTP server (http.server.ThreadingHTTPServer on 127.0.0.1, an ephemeral
# port): every GET gets a small body computed in Python (WORK iterations), so each request is a
# new thread that runs Python briefly and exits. Prints "port N" once listening; serves until
# killed (SIGTERM/SIGINT: exits 0). Usage: python threadserver.py [WORK]
import http.server
import signal
import sys

WORK = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


def answer(n):
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFF
    return acc


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection: a thread per request

    def do_GET(self):
        body = ("%d\n" % answer(WORK)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    sys.stdout.write("port %d\n" % srv.server_address[1])
    sys.stdout.flush()
    try:
        srv.serve_forever(poll_interval=0.05)
    except (KeyboardInterrupt, SystemExit):
        pass
    srv.server_close()


main()
