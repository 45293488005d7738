# SPDX-License-Identifier: MIT
"""Threads and off-CPU time: threads4 (four named spinning threads, a function each) and blocked
(one thread in nanosleep, one in read on a silent pipe). The truth is the tids and names the
targets print about themselves."""

import pytest

from conftest import count_where, has_frame, thread_root, thread_tids

WORKERS = {"worker-a": "work_a", "worker-b": "work_b", "worker-c": "work_c", "worker-d": "work_d"}
SLEEP_LEAVES = ("[clock_nanosleep]", "[nanosleep]")


def by_thread(records):
    """{tid: (name, [(frames without the root, count)])} from a --per-thread export."""
    out = {}
    for fr, c in records:
        root = thread_root(fr)
        assert root, f"per-thread stack without a thread root: {fr[0].name!r}"
        tid, name = root
        out.setdefault(tid, [name, []])[1].append((fr[1:], c))
    return out


@pytest.fixture(scope="module")
def t4(record):
    return record("threads4", 3, rate=100)


def test_threads4_each_thread_its_function(t4, export_folded):
    """Under each worker's own thread root (tid and name as the target printed them), its own
    work_X function, and never another worker's."""
    tids = thread_tids(t4.res.out)
    assert set(tids) == set(WORKERS), t4.res.out
    threads = by_thread(export_folded(t4.pyrs, view="cpu", per_thread=True))
    for wname, fn in WORKERS.items():
        tid = tids[wname]
        assert tid in threads, f"no samples under thread {tid} ({wname}); roots: {sorted(threads)}"
        name, recs = threads[tid]
        assert name == wname, f"thread {tid} is named {name!r}, expected {wname!r}"
        n = sum(c for _, c in recs)
        own = count_where(recs, has_frame(fn))
        others = [o for o in WORKERS.values() if o != fn and count_where(recs, has_frame(o))]
        assert not others, f"{wname} has samples in {others}"
        # 3 s at 100 Hz is ~300 ticks; 4 spinning threads on 2 CPUs are each on CPU about half
        # the time, so ~150 CPU samples each; 50 is a loose floor.
        assert n >= 50, f"only {n} CPU samples for {wname}"
        assert own >= 0.9 * n, f"{fn} in {own} of {n} samples of {wname}"


def test_threads4_stats_threads(t4):
    st = t4.stats()
    assert st["threads"] == 5, f"4 workers + main expected: {st}"


@pytest.fixture(scope="module")
def blocked(record):
    return record("blocked", 3, rate=100)


def test_blocked_wall_view_syscalls(blocked, export_folded):
    """Wall view: the sleeper's samples end in [clock_nanosleep]/[nanosleep] above its function
    `sleeper`; the reader's in [read] above `reader`."""
    tids = thread_tids(blocked.res.out)
    assert set(tids) == {"sleeper", "reader"}, blocked.res.out
    threads = by_thread(export_folded(blocked.pyrs, view="wall", per_thread=True))
    for tname, leaves, fn in (("sleeper", SLEEP_LEAVES, "sleeper"), ("reader", ("[read]",), "reader")):
        tid = tids[tname]
        assert tid in threads, f"no wall samples for {tname} (tid {tid}); roots {sorted(threads)}"
        name, recs = threads[tid]
        assert name == tname
        n = sum(c for _, c in recs)
        # 3 s at 100 Hz: ~300 wall ticks, and a blocked thread is sampled on each.
        assert n >= 200, f"only {n} wall samples for {tname}"
        in_call = count_where(recs, lambda fr: fr and fr[-1].name in leaves)
        assert in_call >= 0.9 * n, \
            f"{tname}: leaf {leaves} in {in_call} of {n}; leaves seen: " \
            f"{sorted({fr[-1].name for fr, _ in recs if fr})}"
        with_fn = count_where(recs, lambda fr: fr and fr[-1].name in leaves and has_frame(fn)(fr))
        assert with_fn >= 0.9 * in_call, f"{tname}: function {fn} under the syscall in " \
            f"{with_fn} of {in_call}"


def test_blocked_cpu_view_excludes_blocked(blocked, export_folded):
    """CPU view: (almost) none of the blocked threads' samples, and no syscall leaves."""
    tids = thread_tids(blocked.res.out)
    wall = by_thread(export_folded(blocked.pyrs, view="wall", per_thread=True))
    cpu = by_thread(export_folded(blocked.pyrs, view="cpu", per_thread=True))
    for tname in ("sleeper", "reader"):
        tid = tids[tname]
        n_wall = sum(c for _, c in wall.get(tid, [None, []])[1])
        n_cpu = sum(c for _, c in cpu.get(tid, [None, []])[1])
        assert n_wall > 0
        assert n_cpu <= max(3, 0.03 * n_wall), f"{tname}: {n_cpu} CPU vs {n_wall} wall samples"
    leaves = {fr[-1].name for _, recs in cpu.values() for fr, _ in recs if fr}
    assert not leaves & {"[read]", *SLEEP_LEAVES}, f"syscall leaves in the CPU view: {leaves}"


def test_blocked_main_in_futex(blocked, export_folded):
    """main waits in pthread_join: its wall samples are off-CPU too, with a [futex] leaf."""
    blocked_main = None
    for line in blocked.res.out.splitlines():
        if line.startswith("main tid="):
            blocked_main = int(line.split("=")[1])
    assert blocked_main
    wall = by_thread(export_folded(blocked.pyrs, view="wall", per_thread=True))
    assert blocked_main in wall, f"main thread {blocked_main} missing; roots {sorted(wall)}"
    recs = wall[blocked_main][1]
    n = sum(c for _, c in recs)
    fut = count_where(recs, lambda fr: fr and fr[-1].name == "[futex]")
    assert fut >= 0.8 * n, \
        f"[futex] leaf in {fut} of {n}: {sorted({fr[-1].name for fr, _ in recs if fr})}"
