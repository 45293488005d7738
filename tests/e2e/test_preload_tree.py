# SPDX-License-Identifier: MIT
"""`--mode preload --subprocesses`: every process of the tree samples into a ring of its own
(src/agent/follow.c, src/sample/preload_follow.c) and is a process of the profile, as with ptrace.

Truths: the CPU times each pool worker measures and prints (tests/targets/py/pool.py), the exit
statuses the targets check and print (closefds.py: children that close every descriptor they
inherited), the shell's exit code, and after a kill -9 of pyrsprof, /proc and the pool's output.
One recording serves most tests (the suite's time budget): a shell that starts the four kinds of
pools (fork, spawn, forkserver, concurrent.futures over fork) and closefds.py at once, and exits 3."""
import re

import pytest

from conftest import assert_clean, steady_run
from test_subprocesses import PY, PYT, by_process, count, kill9_during_pool, pool_truth

PRELOAD = ["--mode", "preload", "--subprocesses"]
HOWS = ["fork", "spawn", "forkserver", "executor"]
SECONDS = 1.5


def record_tree(run_prs, outdir):
    """The shared recording: sh -c starting the 4 pools and closefds.py in the background, at
    1000 Hz of CPU time (about 20 busy processes on 2 CPUs: ~0.15 s of CPU per worker)."""
    jobs = [f"{PY} {PYT / 'pool.py'} {how} {SECONDS} &" for how in HOWS]
    jobs.append(f"{PY} {PYT / 'closefds.py'} {SECONDS} &")
    d = outdir / "tree"
    outdir.mkdir(parents=True, exist_ok=True)
    res = run_prs(["run", *PRELOAD, "-r", "1000", "-o", d, "--", "sh", "-c",
                   " ".join(jobs) + " wait; exit 3"], timeout=120)
    assert_clean(res)
    res.dir = d
    return res


@pytest.fixture
def tree(shared, run_prs, outdir):
    return shared("preload-tree", lambda: steady_run(lambda: record_tree(run_prs, outdir)))


def test_tree_runs_unharmed(tree):
    """The shell's exit code is pyrsprof's; every pool finished with all its results; the
    children that closed every descriptor exited as they should (checked by their parent); no
    process was left unfollowed. No process is said to have exec'ed a program without the agent:
    the spawn and forkserver pools exec Python from vfork children (CPython's _posixsubprocess),
    whose exec wrapper wrote its word in the parent's ring (their memory is the parent's), and
    the note named the pool's parent."""
    assert tree.rc == 3, tree.describe()
    assert tree.out.count("done") == len(HOWS), tree.describe()
    assert re.search(r"^closefds ok \d+ \d+$", tree.out, re.M), tree.describe()
    assert not [l for l in tree.own_lines() if "unprofiled" in l], tree.describe()
    assert not [l for l in tree.own_lines() if "did not start in" in l], tree.describe()


def split_errors(rec, export_folded):
    """The workers of recording rec whose split is off, those with no CPU sample of their work,
    and whether pyrsprof was starved in rec (a ring was full, or a sample's code objects were gone
    when it was named: read after the worker's exit)."""
    truth = pool_truth(rec.out)
    assert len(truth) >= 3 * len(HOWS), rec.describe()  # (a worker may run two of its pool's tasks)
    procs = by_process(export_folded(rec.dir / "profile.pyrs", view="cpu", lines=False))
    starved = any("ring was full" in l for l in rec.own_lines())
    errors, unsampled = [], []
    for pid, (ta, tb) in truth.items():
        assert pid in procs, f"worker {pid} missing: processes {sorted(procs)}"
        a, b = count(procs[pid][1], "part_a"), count(procs[pid][1], "part_b")
        starved |= count(procs[pid][1], "<code object freed before naming>") > 0
        if a + b == 0:
            unsampled.append((pid, ta, tb))
        elif a + b < 40 or abs(a / (a + b) - ta / (ta + tb)) > 0.05:
            errors.append((pid, a, b, ta, tb))
    return errors, unsampled, starved


@pytest.mark.xfail(strict=False, reason="load-bound on this 2-CPU VM (Dec 8): pyrsprof is one of "
                   "~28 busy tasks and gets 1/28 of the CPUs; the workers' samples are now read "
                   "before their exit and thinned, not dropped, when read late (0 workers without "
                   "samples and 14-16 of 16 within 5 points at load 7.6-9.2, against 4-12 and 1-7 "
                   "with main's build), but at load 10-13 a worker gets ~0.1 s of CPU and its "
                   "thinned samples weigh several periods: 1-2 splits 6-19 points off")
def test_tree_every_worker_with_its_split(tree, run_prs, outdir, export_folded):
    """Every worker of the four pools is a process of the profile, its CPU samples split between
    part_a and part_b within 5 points of the CPU times it measured (at least 40 samples). The
    clocks are the workers' own CPU time, so a starved worker has fewer samples, not a skewed
    split: slices of 10 ms of CPU at 1 ms periods err by a sample per slice. A recording where
    pyrsprof itself was starved (ASan on a machine at load 10: rings full, samples named after
    their worker's exit) is taken again once, and said. (Workers with no CPU sample at all are
    test_tree_every_worker_has_cpu_samples's.)"""
    errors, _, starved = split_errors(tree, export_folded)
    if errors and starved:
        print("pyrsprof starved (rings full or names read after exit); recording again:", errors)
        errors, _, starved = split_errors(record_tree(run_prs, outdir / "again"), export_folded)
    assert not errors, (errors, starved)


@pytest.mark.xfail(strict=False, reason="load-bound on this 2-CPU VM (Dec 8): a worker waits at its "
                   "exit (at most 5 s) for pyrsprof to read its samples; passed 3 of 4 runs at load "
                   "9-12 (0 of 16 workers without samples in 4 runs at load 7.6-8.2, 4-12 with "
                   "main's build), but at load 15-24 pyrsprof's rounds over ~27 new processes "
                   "outlast the wait")
def test_tree_every_worker_has_cpu_samples(tree, export_folded):
    """Every worker that did its work has CPU samples of it."""
    _, unsampled, _ = split_errors(tree, export_folded)
    assert not unsampled, unsampled


def test_tree_shell_python_chain(tree, export_folded):
    """sh -c → Python (the shell's forks exec'ed Python: the new image announces a ring of its
    own) → workers: the shell waiting, each pool's parent by its command, spawn's workers (fork and
    exec of Python by the pool) by theirs, one process root each."""
    procs = by_process(export_folded(tree.dir / "profile.pyrs", view="wall", lines=False))
    cmds = {pid: cmd for pid, (cmd, _) in procs.items()}
    sh = [p for p, c in cmds.items() if c.startswith("sh -c")]
    assert len(sh) == 1, sorted(cmds.items())
    # the shell only waits (dash's wait builtin: in sigsuspend until SIGCHLD)
    waits = count(procs[sh[0]][1], "[wait4]") + count(procs[sh[0]][1], "[rt_sigsuspend]")
    assert waits >= 0.5 * sum(n for _, n in procs[sh[0]][1]), procs[sh[0]][1][:5]
    for how in HOWS:
        assert [p for p, c in cmds.items() if c == f"{PY} {PYT / 'pool.py'} {how} {SECONDS}"], \
            (how, sorted(cmds.items()))
    spawned = [p for p, c in cmds.items() if "multiprocessing.spawn" in c]
    assert len(spawned) >= 3, sorted(cmds.items())


def test_tree_children_that_close_every_descriptor(tree, export_folded):
    """closefds.py's first child closes every descriptor (the agent's clock too: it re-arms on a
    POSIX timer) and spins in closed_spin; the second closes all but stdio and execs Python, whose
    agent finds its configuration in the environment, not in a descriptor: both are sampled."""
    a, b = map(int, re.search(r"^closefds ok (\d+) (\d+)$", tree.out, re.M).groups())
    procs = by_process(export_folded(tree.dir / "profile.pyrs", view="cpu", lines=False))
    assert a in procs and count(procs[a][1], "closed_spin") >= 20, (a, sorted(procs))
    assert b in procs and count(procs[b][1], "exec_spin") >= 20, (b, sorted(procs))


def test_tree_without_the_flag_children_unprofiled(run_prs, outdir, export_folded):
    """Without --subprocesses the children's agent stays quiet (no ring, no clock): the profile
    holds the launched process alone, and the children run unharmed (closefds ok)."""
    d = outdir / "one"
    res = run_prs(["run", "--mode", "preload", "-r", "200", "-o", d, "--", PY, PYT / "closefds.py",
                   "0.5"], timeout=60)
    assert_clean(res)
    assert res.rc == 0 and "closefds ok" in res.out, res.describe()
    recs = export_folded(d / "profile.pyrs", view="cpu", lines=False)
    assert not any(f.name in ("closed_spin", "exec_spin") for fr, _ in recs for f in fr), recs[:5]


def test_child_exiting_while_pyrsprof_is_late(run_prs, outdir, export_folded):
    """A forked child works 0.3 s of its CPU and exits (os._exit) while pyrsprof reads nothing
    (late_reader.py stops it: what a pyrsprof starved of CPU is to the tree). Its samples are
    named from its memory, so it waits at its exit until pyrsprof has read them (pyrsprof
    resumed 0.5 s later); its ring, full after 128 samples, keeps one in several periods
    instead of dropping the rest. Truth: the CPU time the child measured in `work`. Before, its
    128 samples were read after its exit: no `work` frame, no command, 172 dropped."""
    d = outdir / "late"
    res = run_prs(["run", *PRELOAD, "-r", "1000", "-o", d, "--", PY, PYT / "late_reader.py",
                   "0.3", "0.5"], timeout=60)
    assert_clean(res)
    assert res.rc == 0 and "done 0" in res.out, res.describe()
    child, secs = re.search(r"^child (\d+) cpu=([0-9.]+)$", res.out, re.M).groups()
    procs = by_process(export_folded(d / "profile.pyrs", view="cpu", lines=False))
    assert int(child) in procs, sorted(procs)
    cmd, recs = procs[int(child)]
    assert "late_reader.py" in cmd, cmd
    work = count(recs, "work")
    # weights are periods of 1 ms of its CPU: the thinned samples weigh what they stand for
    assert 0.85 * float(secs) * 1000 <= work <= 1.15 * float(secs) * 1000, (work, secs, recs[:3])
    assert count(recs, "<code object freed before naming>") == 0, recs[:3]
    assert not [l for l in res.own_lines() if "ring was full" in l], res.describe()


def test_tree_kill9_of_pyrsprof(prs, outdir):
    """kill -9 of pyrsprof while it samples a fork pool from inside: every process of the tree
    runs on to completion (the rings fill and drop; a child forked later finds no one to announce
    its ring to and runs unprofiled), with all its output and exit code 0."""
    kill9_during_pool(prs, outdir, ["--mode", "preload"], 2, 0.5)
