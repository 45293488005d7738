# SPDX-License-Identifier: MIT
"""Kernel frames under the user stacks (issue 11 point 1; src/sample/kstack.c): where permitted
(root, CAP_PERFMON, kernel.perf_event_paranoid <= 1), the kernel's work for a running thread
shows as kernel frames (folded: NAME_[k]) under the user frame that trapped; the share of samples
with kernel frames is perf's (`perf record -e cpu-clock -g` of the same target, within 12
points); `--no-kernel-stacks` turns them off; and a pyrsprof not permitted says so in one line.
In --mode preload (the agent samples from inside, nothing is traced) pyrsprof opens the same
events on the program's threads and matches them with the agent's samples: the same frames, the
same share within the same tolerance.

Targets: kwork (C: touch_pages() faults fresh pages in, the kernel zeroes them; user_work()
spins in user space) and py/kalloc.py (np.ones of fresh memory: the page zeroing under the
Python line that allocated)."""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO, TARGET_SRC, assert_clean, markers, total

SECONDS = 4
# preload at 200 Hz: twice the samples of 100 Hz in the same 2 s (the share is the same at both
# rates: docs/classify.md section 6)
PRELOAD_SECONDS, PRELOAD_RATE = 2, 200
TOLERANCE = 0.12
CLEAR_PAGE = ("clear_page_erms", "clear_page_rep", "clear_page_orig")


def paranoid():
    return int(open("/proc/sys/kernel/perf_event_paranoid").read())


@pytest.fixture(scope="module")
def permitted():
    if os.geteuid() != 0 and paranoid() > 1:
        pytest.skip(f"kernel stacks need root, CAP_PERFMON or perf_event_paranoid <= 1 "
                    f"(it is {paranoid()})")


def kernel_frames(frames):
    return [f for f in frames if f.name.endswith("_[k]")]


def user_leaf(frames):
    user = [f for f in frames if not f.name.endswith("_[k]")]
    return user[-1] if user else None


def kernel_share(records):
    return sum(c for fr, c in records if kernel_frames(fr)) / max(1, total(records))


def perf_kernel_share(cmd, tmp_path):
    """The share of perf's cpu-clock samples of cmd taken in the kernel."""
    perf = shutil.which("perf")
    if not perf:
        pytest.skip("perf is not installed (linux-perf)")
    data = tmp_path / "perf.data"
    r = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-g", "-o", data, "--", *cmd],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([perf, "report", "-i", data, "--no-children", "--sort", "dso", "--stdio",
                        "-g", "none"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = re.search(r"^\s*([0-9.]+)%\s+\[kernel\.kallsyms\]", r.stdout, re.M)
    assert m, r.stdout
    return float(m.group(1)) / 100


@pytest.fixture(scope="module")
def perf_share(targets, tmp_path_factory):
    """perf's kernel share of kwork (one perf run for the ptrace and the preload checks; 2 s at
    perf's 4 kHz are thousands of samples, and kwork's phases last about 40 ms)."""
    return perf_kernel_share([targets / "kwork", "2"], tmp_path_factory.mktemp("perf"))


@pytest.fixture(scope="module")
def kwork(record, export_folded, permitted):
    r = record("kwork", SECONDS)
    return r, export_folded(r.pyrs, view="cpu", lines=False)


@pytest.fixture(scope="module")
def kwork_preload(record, export_folded, permitted):
    r = record("kwork", PRELOAD_SECONDS, rate=PRELOAD_RATE, extra=["--mode", "preload"])
    return r, export_folded(r.pyrs, view="cpu", lines=False)


def check_frames_under_the_faulting_user_frame(r, cpu):
    assert not [l for l in r.res.own_lines() if "kernel stacks" in l], r.res.describe()
    with_k = [(fr, c) for fr, c in cpu if kernel_frames(fr)]
    n = sum(c for _, c in with_k)
    assert n >= 20, f"only {n} samples with kernel frames\n{r.res.describe()}"
    # the page faults are touch_pages' (its store), the unmapping munmap's: together nearly all
    under = sum(c for fr, c in with_k if user_leaf(fr).name in ("touch_pages", "__GI_munmap",
                                                                 "munmap", "__munmap"))
    assert under >= 0.9 * n, with_k
    # user_work makes no syscall and faults no page: never the fault's or munmap's frames, at
    # most an interrupt's (a timer, or the reschedule IPI of a preemption: more on a busy host)
    in_user_work = [(fr, c) for fr, c in with_k if user_leaf(fr).name == "user_work"]
    assert all(kernel_frames(fr)[0].name.startswith(("asm_sysvec_", "asm_common_interrupt"))
               for fr, _ in in_user_work), in_user_work
    assert sum(c for _, c in in_user_work) <= 0.1 * n, with_k
    # a page fault: the kernel's entry right under the user frame, the zeroing deeper (or, as
    # anywhere, an interrupt's entry: a timer's, an IPI's, or a device's, asm_common_interrupt)
    faults = [(fr, c) for fr, c in with_k if user_leaf(fr).name == "touch_pages"]
    entries = [(kernel_frames(fr)[0].name, c) for fr, c in faults]
    assert faults and all(e == "asm_exc_page_fault_[k]" or
                          e.startswith(("asm_sysvec_", "asm_common_interrupt"))
                          for e, _ in entries), entries
    assert sum(c for e, c in entries if e == "asm_exc_page_fault_[k]") >= 0.9 * sum(
        c for _, c in entries), entries
    zeroing = sum(c for fr, c in with_k if any(f.name[:-4] in CLEAR_PAGE for f in fr))
    assert zeroing >= 1, with_k
    # stats.json counts them, and the perf samples they came from: 2 per tick of CPU time at
    # most (each is a timer interrupt in the target: the rate is the cost, bench_classify.py)
    ks = json.loads((r.dir / "stats.json").read_text())["kernel_stacks"]
    ticks = json.loads((r.dir / "stats.json").read_text())["ticks"]["taken"]
    assert ks["matched"] == n, (ks, n)
    assert n <= ks["perf_samples"] <= 2 * ticks + 2, (ks, ticks)
    # the kernel works for kwork every 40 ms: its event keeps the full rate, 2 per tick of CPU
    # time (kstack_rate.c lowers it only after 160 ms of user-only samples)
    assert ks["lowered_samples"] <= 0.05 * total(cpu), (ks, total(cpu))
    assert ks["perf_samples"] >= 1.5 * total(cpu), (ks, total(cpu))


def test_kernel_frames_under_the_faulting_user_frame(kwork):
    check_frames_under_the_faulting_user_frame(*kwork)


def test_kernel_share_is_perfs(kwork, perf_share):
    ours = kernel_share(kwork[1])
    assert abs(ours - perf_share) <= TOLERANCE, \
        f"kernel share {ours:.3f}, perf's {perf_share:.3f} (tolerance {TOLERANCE})"
    # the perf samples themselves (weighed by the CPU time their rate made each stand for) are
    # perf's own estimate: the matched share reads a few points under it (a tick counts only
    # when it and the perf sample before it agree), theirs must not
    rings = kwork[0].stats()["kernel_stacks"]["perf_kernel_share"]
    assert abs(rings - perf_share) <= TOLERANCE, \
        f"perf samples' kernel share {rings:.3f}, perf's {perf_share:.3f} (tolerance {TOLERANCE})"


def test_preload_mode_has_them_too(kwork_preload, perf_share):
    """--mode preload: the agent's samples get the kernel frames of the perf events pyrsprof
    opens on the program's threads, matched the same way (kstack.c)."""
    r, cpu = kwork_preload
    check_frames_under_the_faulting_user_frame(r, cpu)
    ours = kernel_share(cpu)
    assert abs(ours - perf_share) <= TOLERANCE, \
        f"preload: kernel share {ours:.3f}, perf's {perf_share:.3f} (tolerance {TOLERANCE})"


def test_pure_user_thread_is_sampled_at_the_lowered_rate(record, export_folded, permitted):
    """A thread that only computes in user space: its event starts at the probe's rate (1 per tick
    of CPU), and after 16 user-mode perf samples (160 ms of its CPU time) its period is raised 8
    times more (1 per 8 ticks, kstack_rate.c), so over 2 s of CPU it pays about 16 + 184 / 8 = 39
    timer interrupts instead of 2 per tick (400; 55 before the probe); kwork, which the kernel
    works for, keeps the full rate (check_frames_under_the_faulting_user_frame). (The bound allows
    twice the lowered rate: interrupts of its user code do not restore the full rate, kstack.c.)
    On a loaded host its stops find it preempted: in ptrace mode its event is then held at the
    probe's rate (its on-CPU samples take their native stacks from the perf samples:
    kstack_rate-internal.h, prs_krate_preempted), counted in held_samples, 1 per tick of CPU."""
    r = record("busy", "threads", "1", "2", extra=["--no-classify"])
    cpu = total(export_folded(r.pyrs, view="cpu", lines=False))  # ticks of its CPU time
    ks = r.stats()["kernel_stacks"]
    # a loaded host may give it a fraction of a CPU: enough that the probe (1 per tick of CPU)
    # and the lowered rate after the first 16 ticks stay far apart
    assert cpu >= 30, r.res.describe()
    probe, lowered, held = 16, cpu - 16, ks["held_samples"]
    assert ks["period_changes"] >= 1 or held, (ks, cpu)
    assert ks["lowered_samples"] + held >= lowered - 8, (ks, cpu)
    assert ks["perf_samples"] <= probe + 2 * (lowered - held) / 8 + 1.5 * held + 8, (ks, cpu)


def test_numpy_page_zeroing_under_the_allocating_line(run_prs, export_folded, outdir, permitted):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode != 0:
        pytest.skip("Debian's python3 has no numpy (python3-numpy)")
    res = run_prs(["run", "-o", outdir, "--", py, TARGET_SRC / "py" / "kalloc.py", SECONDS],
                  timeout=120)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    cpu = export_folded(outdir / "profile.pyrs", view="cpu", lines=True)
    line = markers("py/kalloc.py", "LINE:alloc")
    zeroing = [(fr, c) for fr, c in cpu if any(f.name[:-4] in CLEAR_PAGE for f in fr)]
    n = sum(c for _, c in zeroing)
    assert n >= 3, f"only {n} samples zeroing pages\n{res.describe()}"
    at_line = sum(c for fr, c in zeroing
                  if any(f.name == "alloc" and f.base == "kalloc.py" and f.line == line for f in fr))
    assert at_line >= 0.9 * n, zeroing
    # the kernel's share of the thread's CPU (its user/system ticks, phase1.json) is the one
    # process's (rusage): a third or more, the page faults' zeroing (perf: 44 %)
    p1 = json.loads((outdir / "phase1.json").read_text())
    t = next(t for t in p1["time_budget"]["threads"] if t["active"])
    f = p1["facts"]
    assert t["system_s"] is not None and abs(t["system_s"] - f["system_s"]) <= 0.1 * f["cpu_s"] + 0.02, (t, f)
    assert f["system_s"] >= 0.2 * f["cpu_s"], f


def test_no_kernel_stacks_opts_out(record, export_folded, permitted):
    r = record("kwork", 1, extra=["--no-kernel-stacks"])
    assert not [l for l in r.res.own_lines() if "kernel stacks" in l], r.res.describe()
    cpu = export_folded(r.pyrs, view="cpu", lines=False)
    assert total(cpu) > 0 and not any(kernel_frames(fr) for fr, _ in cpu)


def test_not_permitted_says_so_in_one_line(run_prs, export_folded, outdir, targets):
    if paranoid() <= 1:
        pytest.skip(f"perf_event_paranoid is {paranoid()}: kernel stacks are permitted to all")
    prefix = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            pytest.skip("setpriv (util-linux) is not installed")
        prefix = (setpriv, "--bounding-set=-perfmon,-sys_admin", "--")
    res = run_prs(["run", "-o", outdir, "--", targets / "kwork", 1], prefix=prefix, timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    why = [l for l in res.own_lines() if "kernel stacks" in l]
    assert len(why) == 1 and "not permitted" in why[0] and "CAP_PERFMON" in why[0], res.describe()
    cpu = export_folded(outdir / "profile.pyrs", view="cpu", lines=False)
    assert total(cpu) > 0 and not any(kernel_frames(fr) for fr, _ in cpu)
