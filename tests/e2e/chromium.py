# SPDX-License-Identifier: MIT
"""One headless Chromium per test module, for the flame graph browser tests.

Chromium.start() runs tests/browser/session.mjs (Debian's /usr/bin/chromium driven by
playwright-core from npm) and talks to it over its stdin and stdout, one JSON line each way; it
skips the calling tests with a reason when node, chromium or playwright-core is missing (install
the latter with `cd tests/browser && npm ci`, or `make deps`). conftest.py's module-scoped
fixture `browser` gives a test module one.
"""

import json
import os
import selectors
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BROWSER = REPO / "tests" / "browser"


class Chromium:
    def __init__(self, proc, stderr):
        self.proc = proc
        self.stderr = stderr
        self.buf = b""

    @classmethod
    def start(cls):
        if not shutil.which("node"):
            pytest.skip("node is not installed")
        if not os.access("/usr/bin/chromium", os.X_OK):
            pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)")
        if not (BROWSER / "node_modules" / "playwright-core").is_dir():
            pytest.skip("playwright-core is not installed: cd tests/browser && npm ci")
        stderr = tempfile.TemporaryFile()
        proc = subprocess.Popen(["node", str(BROWSER / "session.mjs")], cwd=BROWSER,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        return cls(proc, stderr)

    def _readline(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while b"\n" not in self.buf:
                if not sel.select(timeout):
                    raise AssertionError(f"the browser did not answer in {timeout} s{self._stderr()}")
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise AssertionError(f"the browser exited (rc {self.proc.poll()}){self._stderr()}")
                self.buf += chunk
        finally:
            sel.close()
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def _stderr(self):
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        return f"; its stderr:\n{text[-3000:]}" if text else ""

    def call(self, op, timeout=60, **args):
        """Runs one command of session.mjs; its value, or AssertionError with the browser's error."""
        self.proc.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        self.proc.stdin.flush()
        reply = json.loads(self._readline(timeout))
        if "error" in reply:
            raise AssertionError(f"browser: {op}: {reply['error']}")
        return reply["ok"]

    def open(self, path, width, height, ready=True):
        """A new page showing the file at path, in a window of width x height px."""
        return self.call("open", path=str(path), width=width, height=height, ready=ready)

    def eval(self, js, arg=None):
        """The result of the JS function (source text) js called on arg in the page."""
        return self.call("eval", js=js, arg=arg)

    def resize(self, width, height):
        return self.call("resize", width=width, height=height)

    def shot(self, path):
        """Saves a screenshot of the window as a PNG at path; returns the path."""
        self.call("shot", path=str(path))
        return Path(path)

    def click(self, x, y):
        return self.call("mouse", action="click", x=x, y=y)

    def move(self, x, y):
        return self.call("mouse", action="move", x=x, y=y)

    def key(self, key):
        return self.call("key", key=key)

    def answer(self, text):
        """The text the page's next prompt() gets."""
        return self.call("answer", text=text)

    def log(self):
        """Console errors, page errors, network requests and dialogs since the page was opened."""
        return self.call("log")

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()
