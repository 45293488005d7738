# SPDX-License-Identifier: MIT
"""Bad input: every case ends with one "pyrsprof: " line on stderr, the documented exit code
(2 for usage errors, 1 for others, 127 for a command that does not exist), and no crash, hang or
traceback. Where a usage error is given to `run`, the command must not have been started."""

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import Result, assert_bad_input, assert_clean, check_echo_output


@pytest.fixture(scope="module")
def good_pyrs(record):
    """A real, small profile to corrupt."""
    return record("cpu_split", 0.5, rate=100).pyrs


def dead_pid() -> int:
    """A pid that existed a moment ago and has been reaped: no such process now."""
    p = subprocess.Popen(["true"])
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}")
    return p.pid


# ---- processes -------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["attach", "dump"])
def test_no_such_pid(run_prs, cmd):
    pid = dead_pid()
    res = run_prs([cmd, pid, *(["-d", 1] if cmd == "attach" else [])], timeout=20)
    assert_bad_input(res, 1, str(pid))


@pytest.mark.parametrize("pid", ["abc", "-5", "0", "12x", ""])
def test_attach_bad_pid_is_usage_error(run_prs, pid):
    res = run_prs(["attach", pid, "-d", 1], timeout=20)
    assert_bad_input(res, 2)


@pytest.fixture
def nobody_prs(prs):
    """A copy of pyrsprof that user nobody can execute (the repo or pytest's tmp dirs may not be
    reachable for it)."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) missing")
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to nobody")
    d = Path(tempfile.mkdtemp(prefix="pyrsprof-e2e-nobody-", dir="/tmp"))
    os.chmod(d, 0o755)
    dst = d / "pyrsprof"
    shutil.copy2(prs, dst)
    os.chmod(dst, 0o755)
    yield dst
    shutil.rmtree(d, ignore_errors=True)


SETPRIV = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.parametrize("cmd", ["attach", "dump"])
def test_eperm_says_why_and_what_to_do(nobody_prs, targets, tmp_path, cmd):
    """As user nobody against a root-owned process: EPERM, and the message names the cause
    (CAP_SYS_PTRACE / ptrace_scope / other owner) and what to do."""
    t = subprocess.Popen([targets / "echo_output", "10", "5"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        argv = [*SETPRIV, nobody_prs, cmd, str(t.pid)]
        if cmd == "attach":
            argv += ["-d", "1", "-o", "/tmp/pyrsprof-nobody-never-written"]
        r = subprocess.run(argv, capture_output=True, timeout=20, cwd="/tmp")
        res = Result(argv, r.returncode, r.stdout, r.stderr)
        assert_bad_input(res, 1, str(t.pid))
        msg = res.err.lower()
        assert any(w in msg for w in ("cap_sys_ptrace", "ptrace_scope")), \
            f"message does not say why\n{res.describe()}"
        assert any(w in msg for w in ("run it as", "as root", "sudo", "--cap-add", "setcap")), \
            f"message does not say what to do\n{res.describe()}"
        assert t.poll() is None, "target died from a refused attach"
    finally:
        t.kill()
        t.wait()


# ---- commands --------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["/nonexistent/no-such-program", "no-such-program-pyrsprof-e2e"])
def test_command_not_found_is_127(run_prs, outdir, cmd):
    res = run_prs(["run", "-o", outdir / "p", "--", cmd], timeout=20)
    assert_bad_input(res, 127, cmd.rsplit("/", 1)[-1])


def test_command_not_executable_is_126(run_prs, outdir):
    f = outdir / "notexec.sh"
    f.write_text("#!/bin/sh\necho hi\n")
    f.chmod(0o644)
    res = run_prs(["run", "-o", outdir / "p", "--", f], timeout=20)
    assert_clean(res)
    # A shell says 126 for "found but cannot execute"; 127 is accepted as "could not run".
    assert res.rc in (126, 127), res.describe()
    assert res.err.strip().startswith("pyrsprof: ")


def test_no_arguments(run_prs):
    res = run_prs([], timeout=20)
    assert_clean(res)
    assert res.rc == 2, res.describe()


@pytest.mark.parametrize("args", [["run"], ["run", "--"], ["attach"], ["dump"],
                                  ["frobnicate"], ["report"], ["flamegraph"], ["export"],
                                  ["run", "--no-such-option", "--", "true"]])
def test_usage_errors(run_prs, args):
    res = run_prs(args, timeout=20)
    assert_bad_input(res, 2)


# ---- rates and durations ---------------------------------------------------------------------

BAD_RATES = ["0", "-5", "10001", "1e9", "abc", "", "nan", "inf", "100x"]
BAD_DURATIONS = ["-1", "abc", "", "nan", "-inf", "5s5"]


@pytest.mark.parametrize("rate", BAD_RATES)
def test_bad_rate_run(run_prs, outdir, rate):
    marker = outdir / "started"
    res = run_prs(["run", "-r", rate, "-o", outdir / "p", "--", "touch", marker], timeout=20)
    assert_bad_input(res, 2)
    assert not marker.exists(), "the command ran despite a usage error"


@pytest.mark.parametrize("dur", BAD_DURATIONS)
def test_bad_duration_run(run_prs, outdir, dur):
    marker = outdir / "started"
    res = run_prs(["run", "-d", dur, "-o", outdir / "p", "--", "touch", marker], timeout=20)
    assert_bad_input(res, 2)
    assert not marker.exists(), "the command ran despite a usage error"


@pytest.mark.parametrize("opt,val", [("-r", "0"), ("-r", "-1"), ("-r", "20000"), ("-d", "-3"),
                                     ("-d", "x")])
def test_bad_rate_duration_attach(run_prs, opt, val):
    victim = subprocess.Popen(["sleep", "30"])
    try:
        res = run_prs(["attach", victim.pid, opt, val], timeout=20)
        assert_bad_input(res, 2)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


# ---- output paths ----------------------------------------------------------------------------

def unwritable_dirs(base: Path):
    f = base / "a-file"
    f.write_text("x")
    return [f / "sub", Path("/proc/pyrsprof-e2e-cannot-exist")]


def test_run_unwritable_output(run_prs, targets, outdir):
    for d in unwritable_dirs(outdir):
        res = run_prs(["run", "-o", d, "--", targets / "exitwith", "0", "0.1"], timeout=20)
        assert_bad_input(res, 1, str(d))


def test_flamegraph_export_unwritable_output(run_prs, good_pyrs, outdir):
    for d in unwritable_dirs(outdir):
        res = run_prs(["flamegraph", good_pyrs, "-o", d / "out.svg"], timeout=20)
        assert_bad_input(res, 1, str(d))
        res = run_prs(["export", good_pyrs, "--format", "folded", "-o", d / "out.folded"],
                      timeout=20)
        assert_bad_input(res, 1, str(d))
        res = run_prs(["report", good_pyrs, "-o", d], timeout=20)
        assert_bad_input(res, 1, str(d))


# ---- input files -----------------------------------------------------------------------------

def bad_files(base: Path, good: Path):
    """{label: path} of inputs that are no profile and no folded stacks."""
    rnd = random.Random(1234)
    files = {
        "empty": b"",
        "random": bytes(rnd.randrange(256) for _ in range(4096)),
        "elf": Path("/bin/true").read_bytes(),
        "json": b'{"samples": [1, 2, 3]}\n',
        "header-then-garbage": good.read_bytes()[:16] + bytes(rnd.randrange(256) for _ in range(2000)),
        "zeros": bytes(8192),
    }
    out = {}
    for label, data in files.items():
        p = base / f"{label}.pyrs"
        p.write_bytes(data)
        out[label] = p
    return out


LABELS = ["empty", "random", "elf", "json", "header-then-garbage", "zeros"]


@pytest.mark.parametrize("label", LABELS)
def test_bad_profile_files(run_prs, good_pyrs, outdir, label):
    path = bad_files(outdir, good_pyrs)[label]
    for args in (["report", path, "-o", outdir / "r"],
                 ["flamegraph", path, "-o", outdir / "f.svg"],
                 ["export", path, "--format", "folded"]):
        res = run_prs(args, timeout=20)
        assert_bad_input(res, 1, path.name)


@pytest.mark.parametrize("text", ["main;foo\n", "main;foo bar\n", "main;foo -3\n",
                                  "main;foo 99999999999999999999999999\n"])
def test_bad_folded_input(run_prs, outdir, text):
    """Folded-looking text that is not valid folded stacks (no count, a negative or absurd count,
    empty frames): rejected with a message naming the file, not rendered."""
    p = outdir / "in.folded"
    p.write_text(text)
    res = run_prs(["flamegraph", p, "-o", outdir / "f.svg"], timeout=20)
    assert_bad_input(res, 1, p.name)
    assert not (outdir / "f.svg").exists() or (outdir / "f.svg").stat().st_size == 0


def test_missing_input_file(run_prs, outdir):
    p = outdir / "does-not-exist.pyrs"
    for args in (["report", p], ["flamegraph", p, "-o", outdir / "f.svg"],
                 ["export", p, "--format", "folded"]):
        res = run_prs(args, timeout=20)
        assert_bad_input(res, 1, p.name)


def test_truncated_profile_is_read_and_said(run_prs, record, outdir):
    """A 3 s profile cut at 2/3 (as if pyrsprof was killed mid-write) is read up to the cut, and
    pyrsprof says it was truncated (DESIGN: "the reader accepts a truncated file and says so";
    the writer flushes as sampling goes)."""
    data = record("cpu_split", 3, rate=200).pyrs.read_bytes()
    p = outdir / "cut.pyrs"
    p.write_bytes(data[: len(data) * 2 // 3])
    res = run_prs(["export", p, "--format", "folded"], timeout=20)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert "truncat" in res.err.lower(), res.describe()
    assert res.out.strip(), "nothing read before the cut"
    assert all(l.startswith("pyrsprof: ") for l in res.err.splitlines() if l.strip())


@pytest.mark.parametrize("rate", ["1", "10000", "250.5"])
def test_rate_bounds_accepted(run_prs, targets, outdir, rate):
    """The edges of the valid range are accepted (the absurd-rate check is not off by one), and
    --stats adds only "pyrsprof: " lines."""
    res = run_prs(["run", "-r", rate, "-d", "0.5", "--stats", "-o", outdir / "p", "--",
                   targets / "exitwith", "0", "0.3"], timeout=30)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert res.out == "exitwith: 0\n"
    assert all(l.startswith("pyrsprof: ") for l in res.err.splitlines() if l.strip()), \
        res.describe()


def test_eperm_another_tracer(prs, run_prs, targets, outdir):
    """A second pyrsprof on a process that one is already profiling: one line saying another
    tracer holds it (naming its pid, from /proc/PID/status TracerPid); the first run is unharmed."""
    t = subprocess.Popen([targets / "echo_output", "3", "20"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    first = None
    try:
        time.sleep(0.2)
        first = subprocess.Popen([prs, "attach", str(t.pid), "-d", "2", "-o", outdir / "one"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        tracer = 0
        end = time.monotonic() + 5
        while tracer == 0 and time.monotonic() < end:
            status = Path(f"/proc/{t.pid}/status").read_text()
            tracer = int(re.search(r"^TracerPid:\s+(\d+)", status, re.M).group(1))
            time.sleep(0.02)
        assert tracer == first.pid, f"first pyrsprof is not the tracer ({tracer})"
        res = run_prs(["attach", t.pid, "-d", 1, "-o", outdir / "two"], timeout=20)
        assert_bad_input(res, 1, str(t.pid))
        assert "trac" in res.err.lower(), res.describe()
        assert str(first.pid) in res.err, f"the tracer's pid {first.pid} is not named\n" + \
            res.describe()
        assert first.wait(timeout=20) == 0, first.stderr.read().decode()
        out, _ = t.communicate(timeout=20)
        assert t.returncode == 0
        check_echo_output(out, 60)
    finally:
        for p in (first, t):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
