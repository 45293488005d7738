# SPDX-License-Identifier: MIT
"""--mode preload (the LD_PRELOAD agent, src/agent/) and --mode auto, end to end: the same
targets and truths as the ptrace-mode tests (the CPU split each target measures and prints, the
marker lines of the Python targets, demangled Rust with inlined frames, exit statuses, the byte
stream of echo_output), sampled from inside the program; auto choosing preload where a seccomp
filter forbids ptrace (tests/targets/noptrace); programs the agent cannot be loaded into refused in
one line. Running threads are sampled by CPU-time timers (the cpu view is compared), sleeping ones
from outside at each look of pyrsprof's, for what their schedstat says they slept since the last
(the wall view of the off-CPU tests).
Elsewhere in both modes: test_cli_run's byte-exact output and kill -9 of pyrsprof,
test_python_cli's exact frames and lines of chain.py and Rust cdylib under Python."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402
from pyrs_testlib import python_or_skip  # noqa: E402
from conftest import (assert_bad_input, assert_clean, body_range, enough_cpu_samples,  # noqa: E402
                      read_truth_cpu_s, read_truth_split,
                      steady_run, thread_root, thread_tids, total, TARGET_SRC)
from test_python_cli import PARAMS, record_py  # noqa: E402

PRELOAD = ["--mode", "preload"]
# CPU-time timers fire at the scheduler tick at best (250 Hz on the dev VM): 250 Hz and 4 s give a
# split enough samples on a loaded machine (about 500 at half a CPU: 2 points of noise).
RATE, SECONDS = 250, 4


def weight_in(recs, name):
    return sum(c for fr, c in recs if any(f.name == name for f in fr))


def share_a(recs, a, b):
    wa, wb = weight_in(recs, a), weight_in(recs, b)
    assert wa + wb > 0, recs[:5]
    return wa / (wa + wb), wa + wb


# ---- native: C and Rust ----------------------------------------------------------------------

def test_c_split_frames_and_lines(record, export_folded):
    """cpu_split in preload mode: every sample unwound to _start through main (the CFI unwinder
    over the agent's stack copy), hot_X's leaf lines inside hot_X, the split within 5 points of
    the target's own measure, and the CPU time weighed right (1 + the timer's overruns)."""
    rec = record("cpu_split", SECONDS, rate=RATE, extra=PRELOAD, steady=True)
    recs = export_folded(rec.pyrs, view="cpu", lines=True)
    truth_a, _ = read_truth_split(rec.res.out)
    got, n = share_a(recs, "hot_a", "hot_b")
    assert abs(got - truth_a) <= 0.05, (got, truth_a, n)
    whole = sum(c for fr, c in recs if fr[0].name == "_start" and any(f.name == "main" for f in fr))
    assert whole / total(recs) >= 0.98, [([f.name for f in fr], c) for fr, c in recs[:5]]
    for fn in ("hot_a", "hot_b"):
        body = body_range("cpu_split.c", fn)
        leaves = [(fr[-1], c) for fr, c in recs if fr[-1].name == fn]
        inside = sum(c for f, c in leaves if f.base == "cpu_split.c" and f.line in body)
        assert inside / sum(c for _, c in leaves) >= 0.95, leaves[:5]
    # the weight is the program's CPU time at RATE (its "cpu_s" line), within 15 %
    cpu_s = read_truth_cpu_s(rec.res.out)
    assert abs(n / RATE - cpu_s) <= 0.15 * cpu_s, (n, cpu_s)


def test_split_of_a_program_in_step_with_the_period(record, export_folded):
    """phased runs hot_a in the first quarter of every 4 ms of its CPU time, hot_b in the rest: a
    clock firing every 4 ms of CPU time (250 Hz) lands at one point of that cycle each time and
    read hot_a at 0 or ~0.9 (6 runs of the fixed-period agent: errors -0.25 to +0.65). The agent
    draws its periods (jitter_clock), so the split is the truth within its sample noise."""
    rec = record("phased", 4000, 3, rate=250, extra=PRELOAD, steady=True)
    recs = export_folded(rec.pyrs, view="cpu", lines=False)
    truth_a, _ = read_truth_split(rec.res.out)
    got, n = share_a(recs, "hot_a", "hot_b")
    assert n >= 100, (n, rec.res.out)
    tol = max(0.06, 4 * (truth_a * (1 - truth_a) / n) ** 0.5)
    assert abs(got - truth_a) <= tol, (got, truth_a, n, tol)


def test_rust_demangled_inlined_split(record, export_folded):
    rec = record("cpu_split_rs", SECONDS, rate=RATE, extra=PRELOAD, steady=True)
    recs = export_folded(rec.pyrs, view="cpu", lines=True)
    truth_a, _ = read_truth_split(rec.res.out)
    got, n = share_a(recs, "cpu_split::hot_a", "cpu_split::hot_b")
    assert abs(got - truth_a) <= 0.05, (got, truth_a, n)
    inlined = 0
    for fr, c in recs:
        names = [f.name for f in fr]
        if "cpu_split::mix" in names:
            i = names.index("cpu_split::mix")
            assert names[i - 1] == "cpu_split::hot_a", names
            assert fr[i].base == "cpu_split_rs.rs", fr[i]
            inlined += c
    assert inlined > 0, [[f.name for f in fr] for fr, _ in recs[:3]]


def test_threads_each_in_its_function(record, export_folded, run_prs):
    """threads4: each worker, armed as pthread_create starts it, is sampled in its own function
    under its own thread root, with its share of the CPU."""
    rec = record("threads4", 2, rate=200, extra=PRELOAD, steady=True)
    tids = thread_tids(rec.res.out)
    assert len(tids) == 4, rec.res.out
    recs = export_folded(rec.pyrs, view="cpu", lines=False, per_thread=True)
    per = {}
    for fr, c in recs:
        root = thread_root(fr)
        if root:
            per.setdefault(root[0], []).append((fr, c))
    all_w = total(recs)
    for name, tid in tids.items():
        fn = "work_" + name[-1]
        mine = per.get(tid, [])
        w = sum(c for _, c in mine)
        assert w >= 0.1 * all_w, (name, w, all_w)
        assert sum(c for fr, c in mine if any(f.name == fn for f in fr)) / w >= 0.95, (name, mine[:3])


# ---- the program's behaviour ----------------------------------------------------------------

@pytest.mark.parametrize("args,rc,out", [((7, 0.5), 7, "exitwith: 7\n"),
                                         (("TERM", 0.5), 143, "exitwith: signal 15\n"),
                                         (("SEGV", 0.3), 139, "exitwith: signal 11\n")])
def test_exit_status_passthrough(record, args, rc, out):
    rec = record("exitwith", *args, extra=PRELOAD, expect_rc=rc)
    assert rec.res.out == out


def test_ld_preload_appended(run_prs, outdir):
    """The user's LD_PRELOAD stays, first; the agent comes after it."""
    lib = "/usr/lib/x86_64-linux-gnu/libm.so.6"
    # (an ASan build of pyrsprof gets the LD_PRELOAD too: its runtime must not insist on being first)
    env = dict(os.environ, LD_PRELOAD=lib,
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    res = run_prs(["run", *PRELOAD, "-o", outdir / "p", "--", "sh", "-c",
                   'echo "$LD_PRELOAD"; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'],
                  env=env, timeout=60)
    assert res.rc == 0, res.describe()
    first, agent = res.out.strip().split(":")
    assert first == lib and agent.endswith("/libpyrsprof-agent.so") and os.path.isabs(agent)


# ---- where ptrace is forbidden -----------------------------------------------------------------

def test_auto_under_seccomp_without_ptrace(run_prs, targets, outdir, export_folded):
    """Under a seccomp filter that makes ptrace fail (noptrace): --mode ptrace fails, and the
    default --mode auto says in one line that it samples from inside, and gets the split."""
    jail = [targets / "noptrace"]
    # (LeakSanitizer stops the world with ptrace: an ASan build of pyrsprof checks no leaks here)
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    res = run_prs(["run", "--mode", "ptrace", "-o", outdir / "pt", "--", targets / "cpu_split", "0.3"],
                  prefix=jail, env=env, timeout=60)
    assert res.rc != 0 and "not permitted" in res.err, res.describe()

    def once():
        d = outdir / str(time.monotonic_ns())
        r = run_prs(["run", "-r", RATE, "-o", d, "--", targets / "cpu_split", SECONDS, "6"], prefix=jail,
                    env=env, timeout=60)
        r.dir = d
        return r
    res = steady_run(once)
    assert_clean(res)
    assert res.rc == 6, res.describe()
    said = [l for l in res.own_lines() if "ptrace is not permitted" in l]
    assert len(said) == 1 and "--mode preload" in said[0], res.describe()
    recs = export_folded(res.dir / "profile.pyrs", view="cpu", lines=False)
    truth_a, _ = read_truth_split(res.out)
    got, n = share_a(recs, "hot_a", "hot_b")
    assert abs(got - truth_a) <= 0.05, (got, truth_a, n)


# ---- programs the agent cannot be loaded into ---------------------------------------------------

def test_static_binary_refused(run_prs, targets, outdir):
    res = run_prs(["run", *PRELOAD, "-o", outdir / "p", "--", targets / "static_hello"], timeout=30)
    assert_bad_input(res, 1, "statically linked", "--mode ptrace")
    assert "static_hello" not in res.out  # not run


def test_exec_that_clears_ld_preload_is_said(run_prs, targets, outdir):
    """env -u LD_PRELOAD execs the program without the agent: the program runs and exits as it
    would, and one note says that nothing after the exec was sampled and what to use instead
    (it said only "0 samples"); a plain env, whose exec keeps the agent, gets no such note."""
    res = run_prs(["run", *PRELOAD, "-o", outdir / "u", "--", "env", "-u", "LD_PRELOAD",
                   targets / "cpu_split", "0.3"], timeout=30)
    assert_clean(res)
    assert res.rc == 0 and "split hot_a" in res.out, res.describe()
    notes = [l for l in res.err.splitlines() if "did not start in" in l]
    assert len(notes) == 1 and "LD_PRELOAD" in notes[0] and "--mode ptrace" in notes[0], res.err
    res = run_prs(["run", *PRELOAD, "-o", outdir / "e", "--", "env", targets / "cpu_split", "0.3"],
                  timeout=30)
    assert res.rc == 0 and "did not start in" not in res.err, res.describe()


def test_vfork_child_exec_is_not_the_process_exec(run_prs, outdir):
    """A spawn pool execs its workers from vfork children (CPython's _posixsubprocess): a vfork
    child shares its parent's memory, so its exec wrapper wrote the exec's word in the parent's
    ring, and pyrsprof said at the end that the pool's parent had exec'ed a program the agent
    did not start in. The parent never exec'ed: no such note, its samples to its end."""
    res = run_prs(["run", *PRELOAD, "-r", "200", "-o", outdir / "v", "--", "/usr/bin/python3",
                   TARGET_SRC / "py" / "pool.py", "spawn", "0.3"], timeout=60)
    assert_clean(res)
    assert res.rc == 0 and "done" in res.out, res.describe()
    assert "did not start in" not in res.err, res.err


def test_agent_path_from_the_environment(run_prs, targets, outdir):
    """PYRSPROF_AGENT, read by the CLI and passed to the sampler as an option: a path that is not
    a readable file is refused in one line before the program runs (127: it could not be run);
    the agent's real path works."""
    res = run_prs(["run", *PRELOAD, "-o", outdir / "p", "--", targets / "cpu_split", "0.2"],
                  env=dict(os.environ, PYRSPROF_AGENT="/nonexistent/agent.so"), timeout=30)
    assert_bad_input(res, 127, "PYRSPROF_AGENT=/nonexistent/agent.so", "not a readable file")
    assert "split hot_a" not in res.out  # not run
    agent = Path(os.environ["PYRSPROF"]).parent / "libpyrsprof-agent.so"
    res = run_prs(["run", *PRELOAD, "-o", outdir / "q", "--", targets / "cpu_split", "0.2"],
                  env=dict(os.environ, PYRSPROF_AGENT=str(agent)), timeout=30)
    assert res.rc == 0 and "split hot_a" in res.out, res.describe()


def test_static_binary_where_ptrace_is_forbidden(run_prs, targets, outdir):
    """--mode auto under noptrace falls back to preload, which cannot load into a static binary:
    one line says both, without suggesting the ptrace mode that was just refused."""
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    res = run_prs(["run", "-o", outdir / "p", "--", targets / "static_hello"],
                  prefix=[targets / "noptrace"], env=env, timeout=30)
    assert_bad_input(res, 1, "statically linked", "ptrace is not permitted", "neither mode")
    assert "use --mode ptrace" not in res.err, res.describe()
    assert "static_hello" not in res.out  # not run


def test_setuid_program_refused(run_prs, targets, tmp_path, outdir):
    prog = tmp_path / "suid_split"
    shutil.copy(targets / "cpu_split", prog)
    os.chmod(prog, 0o4755)
    res = run_prs(["run", *PRELOAD, "-o", outdir / "p", "--", prog, "0.2"], timeout=30)
    assert_bad_input(res, 1, "set-user-ID", "--mode ptrace")


def test_attach_preload_refused(run_prs):
    res = run_prs(["attach", str(os.getpid()), *PRELOAD], timeout=30)
    assert_bad_input(res, 2, "preload", "pyrsprof run")


# ---- Python -----------------------------------------------------------------------------------

# the split in preload mode on one interpreter per frame layout (pyrs_testlib.LAYOUT_IDS); exact
# frames and lines are test_python_cli.py's chain test, in both modes
SPLIT_PARAMS = [p for p in PARAMS if p.id in T.LAYOUT_IDS]


@pytest.mark.parametrize("py", SPLIT_PARAMS)
def test_python_split_within_5_points(py, run_prs, export_folded, outdir):
    exe = python_or_skip(py)
    res, pyrs = steady_run(lambda: record_py(run_prs, outdir / str(time.monotonic_ns()),
                                             [exe, T.HERE / "split.py", 3], rate=1000, extra=PRELOAD))
    line = [l for l in res.out.splitlines() if l.startswith("truth ")][0]
    truth = {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
    recs = export_folded(pyrs, view="cpu", lines=False)
    got, n = share_a(recs, "hot_a", "hot_b")
    why = enough_cpu_samples(n, truth["cpu_s"], 1000, least=500)  # (on CPU-time clocks)
    assert not why, why
    assert abs(got - truth["hot_a"]) <= 0.05, (got, truth)


@pytest.mark.parametrize("py", SPLIT_PARAMS)
def test_python_fork_exec_unharmed(py, run_prs, export_folded, outdir):
    """forkexec.py forks (the child runs unprofiled: exit 3 checked by the parent) and execs
    itself (the agent starts again in the new image): exit 5, and the final image is sampled."""
    exe = python_or_skip(py)
    res, pyrs = record_py(run_prs, outdir, [exe, T.HERE / "forkexec.py"], extra=PRELOAD, expect_rc=5)
    recs = export_folded(pyrs, view="cpu", lines=False)
    assert any(f.name == "spin" for fr, _ in recs for f in fr), recs[:5]
    # the child is not followed without --subprocesses: one process (no per-process roots)
    assert json.loads((pyrs.parent / "stats.json").read_text())["processes"] == 1


def test_auto_subprocesses_without_ptrace(run_prs, targets, outdir, export_folded):
    """--mode auto --subprocesses where ptrace is forbidden (noptrace): preload, saying in the
    same line that each child has a ring of its own; forkexec.py's child (spin, exit 3, checked by
    its parent) is a process of the profile, and the exec (exit 5) carries on in the same process."""
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    res = run_prs(["run", "--subprocesses", "-o", outdir / "p", "--", "/usr/bin/python3",
                   T.HERE / "forkexec.py"], prefix=[targets / "noptrace"], env=env, timeout=60)
    assert_clean(res)
    assert res.rc == 5, res.describe()
    said = [l for l in res.own_lines() if "ptrace is not permitted" in l]
    assert len(said) == 1 and "each child process with a ring of its own" in said[0], res.describe()
    recs = export_folded(outdir / "p" / "profile.pyrs", view="cpu", lines=False)
    roots = {fr[0].name for fr, _ in recs if any(f.name == "spin" for f in fr)}
    pids = {re.search(r" \[(\d+)\]$", r).group(1) for r in roots}
    # the parent, its forked child, and the parent after its exec (same pid, its new command)
    assert len(pids) == 2 and any(r.endswith("forkexec.py final [%s]" % p) for r in roots
                                  for p in pids), roots


def test_posix_timers_weigh_cpu_time(run_prs, targets, outdir, export_folded):
    """PYRSPROF_AGENT_CLOCK=posix (the clock where perf events are not allowed): at 1000 Hz the
    timers expire at the scheduler tick only, and each sample's weight (1 + overruns) still adds
    up to the program's CPU time; every stack is whole."""
    d = outdir / "p"
    res = run_prs(["run", *PRELOAD, "-r", "1000", "-o", d, "--", targets / "cpu_split", "3"],
                  env=dict(os.environ, PYRSPROF_AGENT_CLOCK="posix"), timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    recs = export_folded(d / "profile.pyrs", view="cpu", lines=False)
    cpu_s = read_truth_cpu_s(res.out)
    n = total(recs)
    assert abs(n / 1000 - cpu_s) <= 0.15 * cpu_s, (n, cpu_s)
    whole = sum(c for fr, c in recs if fr[0].name == "_start" and any(f.name == "main" for f in fr))
    assert whole / n >= 0.98, recs[:5]


# ---- off-CPU: sleeping threads sampled from outside, never signalled ----------------------------

SLEEP_LEAVES = ("[clock_nanosleep]", "[nanosleep]")
OFFCPU_FNS = ("spin", "nap", "wait_pipe")


def offcpu_truth(out):
    line = [l for l in out.splitlines() if l.startswith("truth ")][0]
    return {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}


def assert_offcpu_shares(recs, truth, where):
    """Each of spin/nap/wait_pipe's share of the wall samples of the three within 5 points of the
    truth, their wall times: spin's is its CPU time (the agent's samples) and its waits for a
    CPU (from its schedstat), the other two's their sleeps (seen from outside)."""
    want = {"spin": truth["spin_wall"], "nap": truth["nap"], "wait_pipe": truth["pipe"]}
    got = {fn: weight_in(recs, fn) for fn in OFFCPU_FNS}
    n, tot = sum(got.values()), sum(want.values())
    assert n >= 200, (got, where)
    for fn in OFFCPU_FNS:
        assert abs(got[fn] / n - want[fn] / tot) <= 0.05, (fn, got, want, where)


@pytest.fixture(scope="module")
def offcpu_c(record):
    return record("offcpu", 2, rate=100, extra=PRELOAD, steady=True)


def test_offcpu_wall_stacks_and_shares(offcpu_c, export_folded):
    """offcpu in preload mode: in the wall view the napper's samples end in the sleep syscall above
    nap(), the piper's in [read] above wait_pipe(), each a whole stack from clone3 (the frame
    pointers of the stack's own frame records: only SP and PC are known); and the split of
    spin/nap/wait_pipe within 5 points of the target's own measures. No signal reached the
    sleepers (nanosleep returns EINTR after any handler, SA_RESTART or not): eintr=0. Only the
    program's three threads are in the profile."""
    truth = offcpu_truth(offcpu_c.res.out)
    assert truth["eintr"] == 0, offcpu_c.res.out
    tids = thread_tids(offcpu_c.res.out)
    main_tid = int(offcpu_c.res.out.split("main tid=")[1].split()[0])
    recs = export_folded(offcpu_c.pyrs, view="wall", lines=False, per_thread=True)
    roots = {thread_root(fr)[0] for fr, _ in recs}
    assert roots == {main_tid, tids["napper"], tids["piper"]}, (roots, tids)
    for name, fn, leaves in (("napper", "nap", SLEEP_LEAVES), ("piper", "wait_pipe", ("[read]",))):
        mine = [(fr[1:], c) for fr, c in recs if thread_root(fr)[0] == tids[name]]
        n = sum(c for _, c in mine)
        assert n >= 150, (name, n)  # 2 s at 100 Hz: ~200 ticks, asleep on nearly all
        good = sum(c for fr, c in mine if fr[-1].name in leaves and fr[0].name == "clone3" and
                   any(f.name == fn for f in fr))
        assert good >= 0.9 * n, (name, good, n, mine[:4])
    assert_offcpu_shares([(fr[1:], c) for fr, c in recs], truth, offcpu_c.res.out)


def test_offcpu_missed_ticks_weighed(prs, targets, outdir, export_folded):
    """pyrsprof stopped for 1.5 s of a 3 s recording (SIGSTOP, SIGCONT): its ticks are missed,
    the agent's CPU samples are not (they wait in the ring); a sleeper seen after the gap is
    recorded for what its schedstat says it slept meanwhile, so the wall shares stay within 5
    points of the target's measures (without that the spinner's share came out about twice its
    truth)."""
    d = outdir / "p"
    p = subprocess.Popen([str(prs), "run", *PRELOAD, "-r", "100", "-o", str(d), "--", str(targets / "offcpu"),
                          "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        time.sleep(1.0)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(1.5)
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 0, err.decode(errors="replace")
    stats = json.loads((d / "stats.json").read_text())
    assert stats["missed_ticks"] >= 80, stats["missed_ticks"]
    recs = export_folded(d / "profile.pyrs", view="wall", lines=False)
    assert_offcpu_shares(recs, offcpu_truth(out.decode()), out.decode())


def test_wall_totals_at_1000_hz_with_fewer_looks(run_prs, targets, outdir, export_folded):
    """duty at 1000 Hz: its thread works 3 ms of CPU and sleeps 3 ms in turn, spells shorter than
    pyrsprof's look (every 10 ms at 1000 Hz: the agent's CPU samples wait in the ring, and what a
    thread slept between two looks is read from its schedstat). Per thread, the wall view is its
    life: the duty thread's samples x 1 ms within 7 % of the wall time it measured (what it slept
    since a look last found it asleep, and after pyrsprof's last look, is not recorded: 1-3 % at
    load 8 on 2 CPUs, 6.5 % once in 15 runs), its CPU samples within 5 % of its CPU time (every
    agent sample kept: no ring-full line), the rest (sleep and waits for a CPU) within 7 % of its
    wall less its CPU time; the samples asleep in
    nanosleep under snooze() at least 90 % of its naps x 3 ms and at most the time it measured
    in nanosleep (which has the waits for a CPU after each wake-up too) plus 5 % of its wall;
    main, asleep in pthread_join throughout, within 5 % of its wait.
    pyrsprof woke about 100 times a second, not 1000 (its ticks' delays counted per look)."""
    rate = 1000
    d = outdir / "p"
    res = run_prs(["run", *PRELOAD, "-r", rate, "-o", d, "--", targets / "duty", "2"], timeout=60)
    assert res.rc == 0, res.describe()
    assert not [l for l in res.own_lines() if "ring was full" in l], res.describe()
    truth = {k: float(v) for k, v in (kv.split("=") for kv in
                                      [l for l in res.out.splitlines() if l.startswith("truth ")][0].split()[1:])}
    tids = thread_tids(res.out)
    wall = export_folded(d / "profile.pyrs", view="wall", lines=False, per_thread=True)
    cpu = export_folded(d / "profile.pyrs", view="cpu", lines=False, per_thread=True)

    def of(recs, tid):
        return [(fr[1:], c) for fr, c in recs if thread_root(fr)[0] == tid]
    duty_wall, duty_cpu = of(wall, tids["duty"]), of(cpu, tids["duty"])
    n_wall, n_cpu = total(duty_wall) / rate, total(duty_cpu) / rate
    assert abs(n_wall - truth["duty_wall"]) <= 0.07 * truth["duty_wall"], (n_wall, truth)
    assert abs(n_cpu - truth["duty_cpu"]) <= 0.05 * truth["duty_cpu"], (n_cpu, truth)
    off = truth["duty_wall"] - truth["duty_cpu"]
    assert abs(n_wall - n_cpu - off) <= 0.07 * truth["duty_wall"], (n_wall - n_cpu, off, truth)
    asleep = sum(c for fr, c in duty_wall if fr[-1].name in SLEEP_LEAVES and
                 any(f.name == "snooze" for f in fr)) / rate
    assert 0.9 * truth["naps"] * 0.003 <= asleep <= truth["duty_sleep"] + 0.05 * truth["duty_wall"], (
        asleep, truth)
    n_main = total(of(wall, tids["main"])) / rate
    assert abs(n_main - truth["main_wall"]) <= 0.05 * truth["main_wall"], (n_main, truth)
    looks = json.loads((d / "stats.json").read_text())["ticks"]["delay_us"]["n"]
    assert looks <= 150 * truth["main_wall"], looks


def test_offcpu_not_in_cpu_view(offcpu_c, export_folded):
    recs = export_folded(offcpu_c.pyrs, view="cpu", lines=False)
    assert weight_in(recs, "spin") >= 0.9 * total(recs), recs[:5]
    leaves = {fr[-1].name for fr, _ in recs}
    assert not leaves & {"[read]", *SLEEP_LEAVES}, leaves


# one interpreter per frame layout family (PyFrameObject, _PyInterpreterFrame: pyrs_testlib.LAYOUT_IDS)
# and Debian's
OFFCPU_PY = [p for p in PARAMS if p.id in ("pyenv-3.10", "pyenv-3.12", "debian-python3")]


@pytest.mark.parametrize("py", OFFCPU_PY)
def test_offcpu_python_frames_and_shares(py, run_prs, export_folded, outdir):
    """offcpu.py in preload mode: the sleeping threads' Python frames (read from outside) merged
    with their native stacks at the exact lines, and the shares within 5 points."""
    exe = python_or_skip(py)
    res, pyrs = steady_run(lambda: record_py(run_prs, outdir / str(time.monotonic_ns()),
                                             [exe, T.HERE / "offcpu.py", 2], rate=100, extra=PRELOAD))
    recs = export_folded(pyrs, view="wall", lines=True)
    for fn, tag, leaves in (("nap", "NAP", SLEEP_LEAVES), ("wait_pipe", "PIPE", ("[read]",))):
        mine = [(fr, c) for fr, c in recs if any(f.name == fn for f in fr)]
        n = sum(c for _, c in mine)
        at = sum(c for fr, c in mine if any(f.name == fn and f.line == T.marker_line("offcpu.py", tag)
                                            for f in fr))
        assert at == n, (fn, at, n, mine[:3])
        if fn == "wait_pipe":  # (the napper also waits for the GIL the spinner holds)
            in_call = sum(c for fr, c in mine if fr[-1].name in leaves)
            assert in_call >= 0.9 * n, (fn, in_call, n, mine[:3])
    assert_offcpu_shares(recs, offcpu_truth(res.out), res.out)


def test_runqueue_waits_in_wall_view(run_prs, targets, outdir, export_folded):
    """runq: two threads that never block, pinned to one CPU, each waiting for it most of its
    life (wall - cpu, which each measures and prints). Neither the agent (CPU-time clocks) nor
    the sleeper view sees a runnable thread that waits: its waits come from its schedstat and
    are in the wall view only, as [waiting for a cpu] at its stack, each within 20 % of its truth
    (a wait still going on as the thread exits is not counted); none in the cpu view."""
    rate = 200
    res = run_prs(["run", *PRELOAD, "-r", rate, "-o", outdir / "p", "--", targets / "runq", "1"], timeout=60)
    assert res.rc == 0, res.describe()
    truth = {m.group(1): float(m.group(2)) - float(m.group(3)) for m in
             re.finditer(r"runq (spin_\w+) wall_s=([\d.]+) cpu_s=([\d.]+)", res.out)}
    assert set(truth) == {"spin_one", "spin_two"}, res.out
    pyrs = outdir / "p" / "profile.pyrs"
    wall = export_folded(pyrs, view="wall", lines=False)
    for fn, wait_s in truth.items():
        got = sum(c for fr, c in wall if any(f.name == fn for f in fr)
                  and fr[-1].name == "[waiting for a cpu]") / rate
        assert 0.8 * wait_s <= got <= 1.1 * wait_s + 0.02, (fn, got, wait_s)
    cpu = export_folded(pyrs, view="cpu", lines=False)
    assert not [fr for fr, _ in cpu if any(f.name == "[waiting for a cpu]" for f in fr)]


# ---- the program's own signals ------------------------------------------------------------------

@pytest.mark.parametrize("py", [p for p in PARAMS if p.id == "debian-python3"])
def test_program_signals_kept(py, run_prs, export_folded, outdir):
    """signals.py handles SIGUSR1, SIGPROF under ITIMER_PROF and SIGRTMIN+8 (the agent's own
    signal) with Python's signal.signal: each handler gets exactly what the program sent it
    (SIGPROF: its CPU time / 10 ms, within 25 %), the agent keeps sampling after each (CPU
    samples in the function run after it), and pyrsprof says it chained SIGRTMIN+8 and left
    SIGPROF to the program."""
    exe = python_or_skip(py)
    res, pyrs = record_py(run_prs, outdir, [exe, T.HERE / "signals.py", 0.5], rate=200, extra=PRELOAD)
    line = [l for l in res.out.splitlines() if l.startswith("truth ")][0]
    got = {k: tuple(int(x) for x in v.split("/")) for k, v in (kv.split("=") for kv in line.split()[1:])}
    assert got["usr1"][0] == got["usr1"][1] and got["rt"][0] == got["rt"][1], line
    assert got["prof"][1] > 0 and abs(got["prof"][0] - got["prof"][1]) <= 0.25 * got["prof"][1], line
    recs = export_folded(pyrs, view="cpu", lines=False)
    for fn in ("after_usr1", "with_prof", "after_rt"):  # 0.5 s of CPU at 200 Hz: ~100 each
        assert weight_in(recs, fn) >= 40, (fn, weight_in(recs, fn))
    said = res.own_lines()
    assert len([l for l in said if "own handler for SIGRTMIN+8" in l and "20 signals" in l]) == 1, said
    assert len([l for l in said if "handles SIGPROF itself" in l]) == 1, said


def test_program_signal_default_action(run_prs, outdir):
    """A program that sends itself SIGRTMIN+8 without handling it dies of it, as it does without
    the agent (the default action of a real-time signal): exit status 128 + the signal."""
    sig = signal.SIGRTMIN + 8
    prog = ["/usr/bin/python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGRTMIN + 8)"]
    res = run_prs(["run", *PRELOAD, "-o", outdir / "p", "--", *prog], timeout=60)
    assert res.rc == 128 + sig, res.describe()


@pytest.mark.parametrize("py", [p for p in PARAMS if p.id == "debian-python3"])
def test_program_signal_mask_kept(py, run_prs, export_folded, outdir):
    """sigmask.py: a worker thread that blocks every signal is still sampled (its 0.5 s of CPU
    in blocked_spin: it took no sample before pthread_sigmask was wrapped), and the program's
    view is as it set it: each thread sees SIGRTMIN+8 in its mask, and a SIGRTMIN+8 it sends
    itself while blocking it reaches its handler only once it unblocks it (0 calls, then 1)."""
    exe = python_or_skip(py)
    res, pyrs = record_py(run_prs, outdir, [exe, T.HERE / "sigmask.py"], extra=PRELOAD)
    assert "truth before=0 after=1 main_view=True worker_view=True" in res.out, res.describe()
    recs = export_folded(pyrs, view="cpu", lines=False)
    wb, wm = weight_in(recs, "blocked_spin"), weight_in(recs, "main_spin")
    assert wm >= 40, (wb, wm)  # 0.5 s of CPU at 200 Hz: ~100 each
    assert wb >= 0.5 * wm, (wb, wm)


@pytest.mark.parametrize("py", [p for p in PARAMS if p.id == "debian-python3"])
def test_exec_keeps_program_signal_action(py, run_prs, export_folded, outdir):
    """execsig.py execs twice while sampled: after the first exec SIGRTMIN+8's action is SIG_DFL
    (it was SIG_IGN: the agent's, set across the exec, leaked), after the program ignored and
    blocked it and exec'ed again, SIG_IGN and still blocked, as without the agent; the last
    image, which blocks the signal, is sampled (stage2_spin) and ignores the SIGRTMIN+8 it
    sends itself."""
    exe = python_or_skip(py)
    res, pyrs = record_py(run_prs, outdir, [exe, T.HERE / "execsig.py"], extra=PRELOAD)
    assert [l for l in res.out.splitlines() if l.startswith("stage")] == ["stage1 0", "stage2 1 True"], \
        res.describe()
    assert weight_in(export_folded(pyrs, view="cpu", lines=False), "stage2_spin") >= 20


FAULT_PY = r"""
import ctypes, faulthandler, sys, time
if sys.argv[1] == "faulthandler":
    faulthandler.enable()
def spin_then_fault():
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    print("faulting", flush=True)
    ctypes.string_at(8)
spin_then_fault()
"""


@pytest.mark.parametrize("how", ["faulthandler", "default"])
def test_program_segfault_is_its_own(how, run_prs, outdir):
    """The agent holds SIGSEGV and SIGBUS for its fault-tolerant loads (src/agent/safecopy.c),
    after the program has been sampled (walks with plain loads): a real segfault of the program
    still reaches the program's action. With faulthandler its handler prints the Python
    traceback of the faulting function; without, the default action kills it. Either way the
    exit status is that of SIGSEGV (128 + 11), as without the agent."""
    prog = ["/usr/bin/python3", "-c", FAULT_PY, how]
    bare = subprocess.run(prog, capture_output=True, text=True, timeout=60)
    assert bare.returncode == -signal.SIGSEGV, bare
    res = run_prs(["run", *PRELOAD, "-r", "1000", "-o", outdir / "p", "--", *prog], timeout=60)
    assert res.rc == 128 + signal.SIGSEGV, res.describe()
    assert "faulting" in res.out, res.describe()
    if how == "faulthandler":
        assert "Fatal Python error: Segmentation fault" in res.err, res.describe()
        assert 'in spin_then_fault' in res.err, res.describe()
    else:
        assert "Fatal Python error" not in res.err, res.describe()


def test_rust_stack_overflow_is_its_own(run_prs, targets, outdir):
    """overflow_rs, sampled, then overflows its stack: Rust's own SIGSEGV handler (on its
    alternate stack) still catches it behind the agent's, says so and aborts (128 + SIGABRT)."""
    res = run_prs(["run", *PRELOAD, "-r", "1000", "-o", outdir / "p", "--", targets / "overflow_rs", "0.3"],
                  timeout=60)
    assert res.rc == 128 + signal.SIGABRT, res.describe()
    assert "recursing" in res.out and "has overflowed its stack" in res.err, res.describe()


# ---- code objects freed before pyrsprof names them --------------------------------------------

CHURN_PY = [p for p in PARAMS if p.id in ("pyenv-3.10", "pyenv-3.12")]  # name hash; co_version


@pytest.mark.parametrize("py", CHURN_PY)
def test_freed_code_never_misnamed(py, run_prs, export_folded, outdir):
    """churn_code.py compiles, runs (about 0.2 ms) and frees a function per iteration, three kinds
    in turn, each kind called from its own call_k<K>: the code object sampled is freed and its
    address reused by the next ones before pyrsprof names the sample (27-66 % of these samples
    were misnamed before the agent took the code objects' identities). A leaf of another kind
    than its caller is a misnaming: at most 1 % of the samples; the frames whose object is gone
    are shown as such under the right caller."""
    exe = python_or_skip(py)
    res, pyrs = record_py(run_prs, outdir, [exe, T.HERE / "churn_code.py", 2], rate=1000,
                          extra=PRELOAD)
    assert int(res.out.split("functions=")[1]) > 500, res.out
    n = bad = shaped = 0
    for fr, c in export_folded(pyrs, view="cpu", lines=False):
        names = [f.name for f in fr]
        callers = [int(x[-1]) for x in names if x in ("call_k0", "call_k1", "call_k2")]
        if not callers:
            continue
        n += c
        below = names[names.index("call_k%d" % callers[-1]) + 1:]
        kinds = [int(m.group(1)) for m in map(re.compile(r"k([012])_\d+").fullmatch, below) if m]
        bad += c if kinds and kinds[0] != callers[-1] else 0
        shaped += c if (kinds and kinds[0] == callers[-1]) or \
            "<code object freed before naming>" in below else 0
    assert n >= 300, n
    assert bad <= 0.01 * n, (bad, n)
    assert shaped >= 0.95 * n, (shaped, n)


def test_interpreter_loaded_late_is_found(record, export_folded):
    """embedpy spins in C (no libpython mapped: no interpreter to find), then dlopen's pyenv's
    libpython 3.12 and runs a Python loop: the interpreter is looked for again once the program's
    maps change (not every 20 ms while none is found: target_python.c), so the Python phase's
    samples have their Python frames named from its first moments (only the load, the
    interpreter's start and its end are native-only)."""
    py = T.pyenv_python("3.12")
    lib = py.parent.parent / "lib" / "libpython3.12.so.1.0" if py else None
    if not lib or not lib.is_file():
        pytest.skip("pyenv's shared CPython 3.12 is not installed")
    rec = record("embedpy", lib, py.parent.parent, 0.5, 1.0, rate=RATE, extra=PRELOAD)
    named = unnamed = spin = 0
    for fr, c in export_folded(rec.pyrs, view="cpu", lines=False):
        names = [f.name for f in fr]
        if "embedded_hot" in names or "<module>" in names:
            named += c
        elif "python_phase" in names:
            unnamed += c
        elif "native_spin" in names:
            spin += c
    assert spin >= 0.5 * RATE * 0.5, (spin, named, unnamed)
    assert named >= 0.5 * RATE * 1.0, (spin, named, unnamed)
    assert unnamed <= 0.1 * (named + unnamed), (spin, named, unnamed)
