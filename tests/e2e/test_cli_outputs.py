# SPDX-License-Identifier: MIT
"""Outputs that are whole or clearly not, and what a new user meets first (issue 13, item 6).

- Every file pyrsprof writes appears whole or not at all: when a write fails midway (the file size
  limit, as a full disk would), the command says so on one line and exits 1, the file that was
  there before is untouched, and no half file or temporary file is left.
- A profile cut short or damaged is said to be so by `report`, on the flame graphs, and by
  `export`; a damaged one keeps the samples before the damage (the truth: the same recording
  read whole).
- `-o -` is standard output where the format is one stream; a terminal is refused for binary
  output; commands that write a folder refuse it.
- `run -o DIR` does not overwrite an earlier recording without --force.
- Options are exact: an abbreviation is refused, naming the option it could mean.
- `report` accepts a recording's folder; `dump` of a kernel thread says what it is.
"""

import gzip
import os
import pty
import subprocess
import time
from pathlib import Path

import pytest

from conftest import assert_bad_input, assert_clean, parse_folded, total


@pytest.fixture(scope="module")
def rec(record):
    """A real recording: 3 s of a native program at 200 Hz, flushed every second (a zstd frame
    each, docs/pyrs-format.md), then the symbols and the end in a last frame."""
    r = record("cpu_split", 3, rate=200)
    assert len(frame_starts(r.pyrs.read_bytes())) >= 3
    return r


def listing(d: Path):
    return sorted(p.name for p in d.iterdir())


# ---- whole or not at all -------------------------------------------------------------------

# A write that fails midway: the file size limit of 100 bytes (SIGXFSZ ignored, so the write
# returns EFBIG as a full disk returns ENOSPC).
FSIZE = ["sh", "-c", 'trap "" XFSZ; exec prlimit --fsize=100 "$@"', "sh"]


@pytest.mark.parametrize("kind", ["flamegraph", "folded", "speedscope", "pprof", "report", "diff"])
def test_failed_write_leaves_the_old_file(run_prs, rec, outdir, kind):
    dest = outdir / "out"
    dest.mkdir()
    name, args = {
        "flamegraph": ("g.svg", ["flamegraph", rec.pyrs, "-o", dest / "g.svg"]),
        "folded": ("p.folded", ["export", rec.pyrs, "--format", "folded", "-o", dest / "p.folded"]),
        "speedscope": ("p.json", ["export", rec.pyrs, "--format", "speedscope", "-o", dest / "p.json"]),
        "pprof": ("p.pb.gz", ["export", rec.pyrs, "--format", "pprof", "-o", dest / "p.pb.gz"]),
        "report": ("cpu.svg", ["report", rec.pyrs, "-o", dest]),
        "diff": ("diff.md", ["diff", rec.pyrs, rec.pyrs, "-o", dest]),
    }[kind]
    old = b"OLD CONTENT\n"
    (dest / name).write_bytes(old)
    before = listing(dest)
    res = run_prs(args, prefix=FSIZE, timeout=60)
    assert_clean(res)
    assert res.rc == 1, res.describe()
    lines = [l for l in res.err.splitlines() if l.strip()]
    assert lines and all(l.startswith("pyrsprof: ") for l in lines), res.describe()
    assert any("too large" in l or "write" in l.lower() for l in lines), res.describe()
    assert (dest / name).read_bytes() == old, "the earlier file was replaced by a failed write"
    # nothing half-written, no temporary file left beside it
    assert listing(dest) == before, f"{listing(dest)} != {before}\n{res.describe()}"


def test_written_file_appears_whole(run_prs, rec, outdir):
    """The same commands without the limit write the files, with no temporary file left."""
    res = run_prs(["export", rec.pyrs, "--format", "folded", "-o", outdir / "p.folded"])
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert listing(outdir) == ["p.folded"]
    assert total(parse_folded((outdir / "p.folded").read_text())) > 0
    assert oct((outdir / "p.folded").stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


# ---- cut short, damaged ----------------------------------------------------------------------

def frame_starts(data: bytes):
    """Where each zstd frame of a profile.pyrs starts (its magic number)."""
    return [i for i in range(16, len(data) - 3) if data[i:i + 4] == b"\x28\xb5\x2f\xfd"]


def flipped_middle(data: bytes) -> bytes:
    """64 bytes flipped in the middle of the last frame of samples (the one before the frame that
    holds the symbols and the end)."""
    f = frame_starts(data)
    mid = (f[-2] + f[-1]) // 2 - 32
    d = bytearray(data)
    for i in range(64):
        d[mid + i] ^= 0xFF
    return bytes(d)


def wall_total(run_prs, path) -> tuple:
    res = run_prs(["export", path, "--format", "folded", "--view", "wall"])
    assert_clean(res)
    assert res.rc == 0, res.describe()
    return total(parse_folded(res.out)), res


def test_damaged_profile_keeps_what_precedes(run_prs, rec, outdir):
    """64 flipped bytes in the middle: the samples before the damaged frame are kept (before the
    one-frame-per-flush writer, none were), every one of them as recorded, and it is said."""
    whole, _ = wall_total(run_prs, rec.pyrs)
    bad = outdir / "damaged.pyrs"
    bad.write_bytes(flipped_middle(rec.pyrs.read_bytes()))
    kept, res = wall_total(run_prs, bad)
    assert 0 < kept < whole, f"kept {kept} of {whole}\n{res.describe()}"
    line = [l for l in res.err.splitlines() if l.strip()]
    assert len(line) == 1 and "damaged at byte" in line[0], res.describe()
    assert f"after {kept} samples; showing what precedes" in line[0], res.describe()
    # what is kept is what was recorded: every kept stack's count is at most its count in the whole
    def stacks(path):
        res = run_prs(["export", path, "--format", "folded", "--view", "wall"])
        return {line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
                for line in res.out.splitlines() if line.strip()}
    whole_stacks = stacks(rec.pyrs)
    for stack, n in stacks(bad).items():
        assert n <= whole_stacks.get(stack, 0), stack


@pytest.mark.parametrize("how", ["cut", "damaged"])
def test_report_names_an_incomplete_profile(run_prs, rec, outdir, how):
    data = rec.pyrs.read_bytes()
    p = outdir / f"{how}.pyrs"
    p.write_bytes(data[: len(data) // 2] if how == "cut" else flipped_middle(data))
    res = run_prs(["report", p, "-o", outdir / "r"])
    assert_clean(res)
    assert res.rc == 0, res.describe()
    own = res.own_lines()
    word = "truncated" if how == "cut" else "damaged at byte"
    assert any(word in l for l in own), res.describe()
    assert any("wrote" in l and ("cut short" in l or "damage" in l) for l in own), res.describe()
    for svg in ("cpu.svg", "wall.svg"):
        text = (outdir / "r" / svg).read_text()
        assert ("cut short: the recording did not finish" if how == "cut" else
                "damaged at byte") in text, f"{svg} does not say the profile is incomplete"
    # a whole profile says neither
    res = run_prs(["report", rec.pyrs, "-o", outdir / "w"])
    assert res.rc == 0 and "cut short" not in (outdir / "w" / "cpu.svg").read_text()


# ---- standard output ------------------------------------------------------------------------

def on_terminal(prs, args, cwd):
    """Runs pyrsprof with stdout (and stderr) on a pseudo-terminal; returns (rc, output)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execv(str(prs), [str(prs), *map(str, args)])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out


@pytest.mark.parametrize("out", [None, "-"])
def test_pprof_refuses_a_terminal(prs, rec, outdir, out):
    rc, text = on_terminal(prs, ["export", rec.pyrs, "--format", "pprof",
                                 *(["-o", out] if out else [])], outdir)
    assert rc == 2, text
    assert b"\x1f\x8b" not in text, "gzip written to the terminal"
    lines = [l for l in text.decode(errors="replace").splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("pyrsprof: ") and "-o" in lines[0], text
    assert listing(outdir) == []


def test_dash_is_standard_output(run_prs, rec, outdir):
    res = run_prs(["export", rec.pyrs, "--format", "folded", "-o", "-"], cwd=outdir)
    assert res.rc == 0 and total(parse_folded(res.out)) > 0, res.describe()
    res = run_prs(["export", rec.pyrs, "--format", "pprof", "-o", "-"], cwd=outdir)
    assert res.rc == 0, res.describe()
    assert gzip.decompress(res.stdout), "not gzip'd profile.proto"
    res = run_prs(["export", rec.pyrs, "--format", "speedscope", "-o", "-"], cwd=outdir)
    assert res.rc == 0 and res.out.startswith("{"), res.describe()
    res = run_prs(["flamegraph", rec.pyrs, "-o", "-"], cwd=outdir)
    assert res.rc == 0 and "<svg" in res.out, res.describe()
    assert listing(outdir) == [], "a file named '-' was made"


@pytest.mark.parametrize("args", [["report", "{p}", "-o", "-"], ["diff", "{p}", "{p}", "-o", "-"],
                                  ["run", "-o", "-", "--", "touch", "started"]])
def test_dash_refused_where_a_folder_is_written(run_prs, rec, outdir, args):
    res = run_prs([str(a).replace("{p}", str(rec.pyrs)) for a in args], cwd=outdir)
    assert_bad_input(res, 2, "folder")
    assert listing(outdir) == [], "the command ran or made '-'"


# ---- run -o DIR twice -----------------------------------------------------------------------

def test_run_does_not_overwrite_a_recording(run_prs, targets, outdir):
    d = outdir / "rec"
    res = run_prs(["run", "-o", d, "--", targets / "exitwith", "0", "0.3"])
    assert res.rc == 0, res.describe()
    first = (d / "profile.pyrs").read_bytes()
    marker = outdir / "started"
    res = run_prs(["run", "-o", d, "--", "touch", marker])
    assert_bad_input(res, 2, str(d), "--force")
    assert not marker.exists(), "the command ran although the folder was refused"
    assert (d / "profile.pyrs").read_bytes() == first
    files = listing(d)
    (d / "phase1.md").unlink()  # --force removes a recording's files before recording again:
    (d / "wall.svg").write_text("stale")  # the folder never mixes two recordings
    res = run_prs(["run", "-o", d, "--force", "--", targets / "exitwith", "0", "0.5"])
    assert res.rc == 0, res.describe()
    assert (d / "profile.pyrs").read_bytes() != first
    assert listing(d) == files
    assert "stale" not in (d / "wall.svg").read_text()



def test_force_keeps_the_recording_when_nothing_replaces_it(run_prs, targets, outdir):
    """--force replaces a recording only once the new one has begun: a command that cannot be run,
    or a pid that cannot be attached, leaves the old recording whole (it was deleted before)."""
    d = outdir / "rec"
    res = run_prs(["run", "-o", d, "--", targets / "exitwith", "0", "0.3"])
    assert res.rc == 0, res.describe()
    before = {f: (d / f).read_bytes() for f in listing(d)}
    res = run_prs(["run", "-o", d, "--force", "--", outdir / "no-such-program"])
    assert res.rc == 127 and "no-such-program" in res.err, res.describe()
    dead = subprocess.Popen(["true"])
    dead.wait()
    res = run_prs(["attach", "-o", d, "--force", dead.pid])
    assert res.rc != 0, res.describe()
    assert {f: (d / f).read_bytes() for f in listing(d)} == before
    res = run_prs(["run", "-o", d, "--force", "--", targets / "exitwith", "3", "0.3"])
    assert res.rc == 3, res.describe()  # the program ran: the old recording is gone
    assert listing(d) == sorted(before) and (d / "profile.pyrs").read_bytes() != before["profile.pyrs"]

def test_default_folders_do_not_collide(run_prs, targets, outdir):
    for _ in range(2):
        res = run_prs(["run", "--", targets / "exitwith", "0", "0.05"], cwd=outdir)
        assert res.rc == 0, res.describe()
    folders = listing(outdir)
    assert len(folders) == 2, folders
    for f in folders:
        assert (outdir / f / "profile.pyrs").is_file()


# ---- options are exact ----------------------------------------------------------------------

@pytest.mark.parametrize("args,means", [
    (["run", "--native", "--", "touch", "{m}"], "--native-all"),
    (["run", "--rat", "50", "--", "touch", "{m}"], "--rate"),
    (["run", "--dur=1", "--", "touch", "{m}"], "--duration"),
    (["run", "--s", "--", "touch", "{m}"], "--stats"),
    (["attach", "--out", "x", "1"], "--output"),
    (["flamegraph", "{p}", "-o", "{o}/g.svg", "--per"], "--per-thread"),
    (["export", "{p}", "--form", "folded"], "--format"),
    (["report", "{p}", "--out", "{o}/r"], "--output"),
    (["diff", "{p}", "{p}", "-o", "{o}/d", "--vi", "wall"], "--view"),
    (["dump", "--debug", "{o}", "1"], "--debug-dir"),
    (["calibrate", "--sh"], "--show"),
    (["sweep", "--dim", "n=1,2", "--rep", "2", "-o", "{o}/s", "--", "touch", "{m}"], "--repeat"),
])
def test_abbreviations_are_refused(run_prs, rec, outdir, args, means):
    marker = outdir / "started"
    res = run_prs([a.replace("{m}", str(marker)).replace("{p}", str(rec.pyrs))
                   .replace("{o}", str(outdir)) for a in args])
    assert_bad_input(res, 2, "not abbreviated", means)
    assert listing(outdir) == [], "the command ran"


# ---- report DIR, dump of a kernel thread ------------------------------------------------------

def test_report_accepts_a_recording_folder(run_prs, rec, outdir):
    svg = rec.dir / "cpu.svg"
    old = svg.stat().st_mtime_ns
    time.sleep(0.05)
    res = run_prs(["report", rec.dir])
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert svg.stat().st_mtime_ns != old, "cpu.svg was not written into the folder"
    res = run_prs(["export", rec.dir, "--format", "folded"])
    assert res.rc == 0 and total(parse_folded(res.out)) > 0, res.describe()
    empty = outdir / "empty"
    empty.mkdir()
    res = run_prs(["report", empty])
    assert_bad_input(res, 1, "profile.pyrs")


def kernel_thread():
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[6]) & 0x00200000:  # PF_KTHREAD
                return int(d.name)
    return None


def test_dump_of_a_kernel_thread(run_prs):
    pid = kernel_thread()
    if pid is None:
        pytest.skip("no kernel thread visible in /proc (a container)")
    res = run_prs(["dump", pid], timeout=20)
    assert_bad_input(res, 1, str(pid), "kernel thread")
    assert "run as root" not in res.err
