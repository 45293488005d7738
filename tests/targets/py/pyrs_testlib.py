# SPDX-License-Identifier: MIT
"""Helpers for the CPython reader's end-to-end tests (tests/e2e/test_python_*.py).

Interpreters: every pyenv CPython 3.6+ (a missing one is skipped with its name), Debian's
/usr/bin/python3 (stripped, non-PIE, libpython linked in) and a venv made from it. Targets are the
scripts next to this file; expected line numbers come from the marker comments in them, never from
pyrsprof's own output.
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VERSIONS = ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
# One interpreter per frame-layout family, for the tests whose point is not the version (sampling
# statistics, a second sample source, process events) so that the suite keeps its time budget:
# 3.6-3.9 share PyFrameObject with co_lnotab, 3.10 has the PEP 626 line table and instruction
# indexes, 3.11, 3.12 and 3.13 each their own _PyInterpreterFrame, and Debian's python3 is the
# stripped non-PIE build. The reader's per-version tests keep every interpreter.
LAYOUT_IDS = ("pyenv-3.6", "pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-python3")


def pyenv_root():
    r = os.environ.get("PYENV_ROOT")
    if r:
        return Path(r)
    exe = shutil.which("pyenv")
    if exe:
        try:
            return Path(subprocess.check_output([exe, "root"], text=True).strip())
        except (OSError, subprocess.CalledProcessError):
            pass
    return Path.home() / ".pyenv"


def pyenv_python(minor: str):
    """The newest pyenv python of version 3.x (e.g. "3.12"), or None."""
    vers = pyenv_root() / "versions"
    found = sorted((d for d in vers.glob(minor + ".*") if re.fullmatch(re.escape(minor) + r"\.\d+", d.name)),
                   key=lambda d: int(d.name.split(".")[2])) if vers.is_dir() else []
    for d in reversed(found):
        exe = d / "bin" / ("python" + minor)
        if exe.exists():
            return exe
    return None


_VENV = None


def venv_python():
    """A venv of Debian's python3 (made once per session under /tmp), or None."""
    global _VENV
    if _VENV is None:
        d = Path("/tmp/pyrsprof-test-venv-%d" % os.getuid())
        exe = d / "bin" / "python"
        if not exe.exists():
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(d)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _VENV = exe if exe.exists() else False
    return _VENV or None


def interpreters():
    """(id, path or None, reason) for pytest parametrization."""
    out = []
    for v in VERSIONS:
        out.append(("pyenv-" + v, pyenv_python(v), "pyenv CPython %s is not installed" % v))
    deb = Path("/usr/bin/python3")
    out.append(("debian-python3", deb if deb.exists() else None, "/usr/bin/python3 missing"))
    out.append(("venv", "venv", "cannot make a venv of /usr/bin/python3"))
    return out


def resolve(py):
    if py == "venv":
        return venv_python()
    return py


def python_or_skip(py):
    """The interpreter's path (resolve), or the test is skipped naming it."""
    exe = resolve(py)
    if not exe:
        import pytest
        pytest.skip("interpreter not available: %s" % py)
    return exe


def marker_line(script: str, tag: str) -> int:
    for i, line in enumerate((HERE / script).read_text(encoding="utf-8").splitlines(), 1):
        if line.rstrip().endswith("# " + tag):
            return i
    raise KeyError(tag)


class Target:
    """A Python target started in the background; waits for its "ready" line."""

    def __init__(self, py, script, *args, timeout=20.0):
        self.lines = []
        self.proc = subprocess.Popen([str(py), str(HERE / script)] + [str(a) for a in args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline().decode("utf-8", "replace")
            if not line:
                raise RuntimeError("target %s exited: %s" % (script, self.proc.stderr.read()[-2000:]))
            self.lines.append(line.rstrip("\n"))
            if line.strip() == "ready":
                time.sleep(0.1)
                return
        raise RuntimeError("target %s not ready" % script)

    @property
    def pid(self):
        return self.proc.pid

    def tids(self):
        """{name: tid} from the "tid N name" lines."""
        return {l.split()[2]: int(l.split()[1]) for l in self.lines if l.startswith("tid ")}

    def rest(self, timeout=60):
        out, _ = self.proc.communicate(timeout=timeout)
        return out.decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def pystacks_path():
    p = os.environ.get("PYSTACKS")
    if p:
        return Path(p)
    prs = os.environ.get("PYRSPROF")
    if prs:
        c = Path(prs).resolve().parent / "tools" / "pystacks"
        if c.exists():
            return c
    for c in sorted(REPO.glob("build/*/tools/pystacks")):
        return c
    return None


FRAME = re.compile(r"^    (?P<name>.*) \((?P<file>.*):(?P<line>\d+)\)$")


def pystacks_dump(pid, env=None):
    """Runs `pystacks PID`; returns (rc, [threads], stderr); each thread is a dict with tid, gil and
    frames [(name, basename, line)] innermost first."""
    exe = pystacks_path()
    r = subprocess.run([str(exe), "--stats", str(pid)], capture_output=True, timeout=30,
                       env=dict(os.environ, **(env or {})))
    threads = []
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("thread "):
            w = line.split()
            threads.append({"tid": int(w[1]), "gil": w[5] == "yes", "frames": [],
                            "truncated": "truncated" in w})
        else:
            m = FRAME.match(line)
            if m and threads:
                threads[-1]["frames"].append((m.group("name"), os.path.basename(m.group("file")),
                                              int(m.group("line"))))
    return r.returncode, threads, r.stderr.decode("utf-8", "replace")


def pystacks_sample(pid, hz, secs, env=None):
    """vm-mode sampling with pystacks; returns [(tid, held_gil, [(name, basename, line)] root first)]."""
    exe = pystacks_path()
    r = subprocess.run([str(exe), "-r", str(hz), "-d", str(secs), str(pid)], capture_output=True,
                       timeout=secs + 30, env=dict(os.environ, **(env or {})))
    out = []
    fr = re.compile(r"^(?P<name>.*) \((?P<file>.*):(?P<line>\d+)\)$")
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        tid, gil, rest = line.split(" ", 2) if line.count(" ") >= 2 else (line, "0", "")
        frames = []
        for part in rest.split(";") if rest.strip() else []:
            m = fr.match(part)
            if m:
                frames.append((m.group("name"), os.path.basename(m.group("file")), int(m.group("line"))))
        out.append((int(tid), gil == "1", frames))
    return r.returncode, out, r.stderr.decode("utf-8", "replace")


def stopped_threads(pid):
    """Threads of pid in a ptrace stop or a job-control stop ('t' or 'T' in their stat)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        if stat.rpartition(")")[2].split()[0] in ("t", "T"):
            out.append(int(tid))
    return out
