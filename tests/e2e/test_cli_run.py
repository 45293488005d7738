# SPDX-License-Identifier: MIT
"""`pyrsprof run`: exit status passthrough, stdin/stdout/stderr passthrough, Ctrl-C, -d, kill -9
of pyrsprof mid-recording, the artifacts folder and its summary line."""

import ctypes
import json
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import (ARTIFACTS, PREFIX, Result, assert_clean, check_echo_output, fnv1a,
                      pid_gone, proc_state, wait_child)


def summary_names_dir(res: Result, d):
    own = res.own_lines()
    assert own, f"no pyrsprof: lines\n{res.describe()}"
    assert str(d) in own[-1] or os.path.basename(str(d)) in own[-1], \
        f"last message does not name {d}: {own[-1]!r}"


# ---- exit status -----------------------------------------------------------------------------

def test_exit_code_passthrough(record):
    rec = record("exitwith", 7, 0.5, expect_rc=7)
    assert rec.res.out == "exitwith: 7\n"
    summary_names_dir(rec.res, rec.dir)


def test_exit_code_zero(record):
    rec = record("exitwith", 0, 0.3, expect_rc=0)
    assert rec.res.out == "exitwith: 0\n"


def test_killed_by_sigterm_is_143(record):
    rec = record("exitwith", "TERM", 0.5, expect_rc=143)
    assert rec.res.out == "exitwith: signal 15\n"


def test_killed_by_sigsegv_is_139(record):
    rec = record("exitwith", "SEGV", 0.3, expect_rc=139)
    assert rec.res.out == "exitwith: signal 11\n"


# ---- passthrough -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "preload"])
def test_stdout_stderr_byte_exact(run_prs, targets, outdir, mode):
    """The target's stdout is byte-for-byte what it prints unprofiled; its stderr too, once
    pyrsprof's own "pyrsprof: " lines are set aside. (preload: sampled from inside at 1000 Hz.)"""
    argv = [str(targets / "echo_output"), "1.5", "40", "3"]
    direct = subprocess.run(argv, capture_output=True, timeout=30)
    assert direct.returncode == 3
    res = run_prs(["run", "--mode", mode, "-r", 1000 if mode == "preload" else 100, "-o", outdir / "p",
                   "--", *argv], timeout=60)
    assert_clean(res)
    assert res.rc == 3, res.describe()
    assert res.stdout == direct.stdout
    check_echo_output(res.stdout, 60)
    theirs = [l for l in res.stderr.split(b"\n") if not l.startswith(PREFIX.encode())]
    assert theirs == direct.stderr.split(b"\n")


def test_stdin_passthrough(run_prs, targets, outdir):
    data = bytes(range(256)) * 64 + b"no newline at the end"
    res = run_prs(["run", "-o", outdir / "p", "--", targets / "echo_output", "--stdin"],
                  input=data, timeout=60)
    assert res.rc == 0, res.describe()
    assert res.stdout.startswith(data)
    assert res.stdout[len(data):] == \
        f"checksum bytes={len(data)} fnv={fnv1a(data):016x}\n".encode()


# ---- artifacts -------------------------------------------------------------------------------

def test_artifacts_folder(record):
    """profile.pyrs, cpu.svg, wall.svg (well-formed SVG naming the hot function), stats.json."""
    rec = record("cpu_split", 1, rate=100)
    for a in ARTIFACTS:
        assert (rec.dir / a).stat().st_size > 0, f"{a} is empty"
    for svg in ("cpu.svg", "wall.svg"):
        root = ET.parse(rec.dir / svg).getroot()
        assert root.tag.endswith("svg"), f"{svg} root is {root.tag}"
        assert "hot_a" in (rec.dir / svg).read_text(), f"{svg} does not show hot_a"
    json.loads((rec.dir / "stats.json").read_text())
    summary_names_dir(rec.res, rec.dir)


def test_default_output_dir(run_prs, targets, tmp_path):
    """Without -o: ./pyrsprof-<prog>-<YYYYmmdd-HHMMSS>/ in the current directory."""
    res = run_prs(["run", "--", targets / "exitwith", "0", "0.2"], cwd=tmp_path, timeout=60)
    assert res.rc == 0, res.describe()
    dirs = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(dirs) == 1 and re.fullmatch(r"pyrsprof-exitwith-\d{8}-\d{6}", dirs[0].name), dirs
    for a in ARTIFACTS:
        assert (dirs[0] / a).is_file(), f"{a} missing"
    summary_names_dir(res, dirs[0].name)


# ---- -d: stop sampling, let the command run on ------------------------------------------------

def test_duration_detaches_and_lets_command_finish(run_prs, targets, outdir):
    """-d 1 on a 3 s program: sampling stops after ~1 s, the program runs to its end with its
    output intact, and pyrsprof still passes its exit code through."""
    t0 = time.monotonic()
    res = run_prs(["run", "-d", 1, "-o", outdir / "p", "--", targets / "echo_output", "3", "20", "5"],
                  timeout=60)
    assert res.rc == 5, res.describe()
    assert time.monotonic() - t0 >= 2.9
    check_echo_output(res.stdout, 60)
    st = json.loads((outdir / "p" / "stats.json").read_text())
    assert st["duration_s"] <= 1.6, f"sampled {st['duration_s']} s with -d 1"


# ---- Ctrl-C ----------------------------------------------------------------------------------

def test_ctrl_c_reaches_command_and_artifacts_written(prs, targets, outdir):
    """SIGINT to the process group of pyrsprof + child: the child gets it (its handler prints and
    exits 130), pyrsprof waits for it, passes 130 through and writes its artifacts."""
    d = outdir / "p"
    p = subprocess.Popen([prs, "run", "-o", d, "--", targets / "echo_output", "20", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("pyrsprof did not end within 20 s of Ctrl-C")
    res = Result(p.args, p.returncode, out, err)
    assert_clean(res)
    assert b"echo_output: got signal 2" in err, res.describe()
    assert res.rc == 130, res.describe()
    body_lines = out.count(b"\n") - 1
    check_echo_output(out, body_lines)
    for a in ARTIFACTS:
        assert (d / a).is_file(), f"{a} missing after Ctrl-C\n{res.describe()}"


# ---- kill -9 of pyrsprof during run ----------------------------------------------------------

PR_SET_CHILD_SUBREAPER = 36


@pytest.mark.parametrize("mode", ["auto", "preload"])
def test_kill9_during_run_target_completes(prs, targets, outdir, mode):
    """kill -9 of pyrsprof mid-recording: its child (re-parented to us: we are a subreaper for
    this test) is not left stopped, runs to completion with complete output and its exit code.
    (preload: the agent keeps writing into a ring nobody reads: full, it drops.)"""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        out_path = outdir / "child.out"
        with open(out_path, "wb") as out:
            p = subprocess.Popen([prs, "run", "--mode", mode, "-r", "1000", "-o", outdir / "p", "--",
                                  targets / "echo_output", "3", "20", "4"],
                                 stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)
        child = wait_child(p.pid)
        time.sleep(1.0)
        assert not pid_gone(child)
        p.kill()
        p.wait()
        # The kernel detaches the tracees of a dead tracer; the child must not stay stopped.
        time.sleep(0.3)
        if not pid_gone(child):
            assert proc_state(child) not in ("T", "t"), f"child left {proc_state(child)} (stopped)"
        _, status = os.waitpid(child, 0)   # ours now, as subreaper
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 4, f"status {status:#x}"
        check_echo_output(out_path.read_bytes(), 60)
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


# ---- signals sent to pyrsprof or the command ------------------------------------------------

def test_sigterm_to_pyrsprof_is_forwarded(prs, targets, outdir):
    """SIGTERM to pyrsprof alone is passed on to the command (its handler reports it and exits
    143); pyrsprof passes 143 through and still writes its artifacts."""
    d = outdir / "p"
    p = subprocess.Popen([prs, "run", "-o", d, "--", targets / "echo_output", "20", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    wait_child(p.pid)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("pyrsprof did not end within 20 s of SIGTERM")
    res = Result(p.args, p.returncode, out, err)
    assert_clean(res)
    assert b"echo_output: got signal 15" in err, res.describe()
    assert res.rc == 143, res.describe()
    check_echo_output(out, out.count(b"\n") - 1)
    for a in ARTIFACTS:
        assert (d / a).is_file(), f"{a} missing after SIGTERM\n{res.describe()}"


def test_job_control_stop_and_continue(prs, targets, outdir):
    """SIGSTOP to the profiled command stops it for real (no output while stopped: the profiler
    must not resume a group-stopped tracee), SIGCONT resumes it, and it completes intact."""
    out_path = outdir / "child.out"
    with open(out_path, "wb") as out:
        p = subprocess.Popen([prs, "run", "-o", outdir / "p", "--", targets / "echo_output",
                              "2", "25"], stdout=out, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        child = wait_child(p.pid)
        time.sleep(0.6)
        os.kill(child, signal.SIGSTOP)
        time.sleep(0.3)
        size = out_path.stat().st_size
        time.sleep(0.8)
        assert out_path.stat().st_size == size, "the command kept printing while SIGSTOPped"
        os.kill(child, signal.SIGCONT)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    res = Result(p.args, p.returncode, b"", err)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    check_echo_output(out_path.read_bytes(), 50)
