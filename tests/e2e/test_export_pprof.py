# SPDX-License-Identifier: MIT
"""`pyrsprof export FILE --format pprof`: a real pprof consumer (`go tool pprof` from Debian's
golang-go, offline, with its caches in a temporary HOME) reads the file, and its -raw, -top and
-traces outputs hold the same samples as our folded export of the same profile (an independent
code path): the same stacks with the same counts, the same flat counts per function, the same
totals; wall and cpu nanoseconds follow from the rate; thread labels name the threads the target
printed."""

import re
from collections import Counter

import pytest

from conftest import assert_clean, parse_raw, read_pprof, thread_tids, total


@pytest.fixture(scope="module")
def export_pprof(run_prs):
    def export(src, out, view="cpu"):
        res = run_prs(["export", src, "--format", "pprof", "--view", view, "-o", out], timeout=120)
        if res.rc != 0 and "unknown format" in res.err:
            pytest.skip("`pyrsprof export --format pprof` is not wired into the CLI yet")
        assert_clean(res)
        assert res.rc == 0, res.describe()
        assert out.read_bytes()[:2] == b"\x1f\x8b", "not gzip"
        return out
    return export


@pytest.fixture(scope="module")
def c_rec(record):
    return record("cpu_split", 1.5, rate=200)


@pytest.fixture(scope="module")
def rs_rec(record):
    return record("cpu_split_rs", 1.5, rate=200)


@pytest.fixture(scope="module")
def blocked_rec(record):
    return record("blocked", 1.5, rate=100)


def _sum_folded(records):
    c = Counter()
    for frames, n in records:
        c[tuple(f.name.removesuffix("_[k]") for f in frames)] += n
    return c


@pytest.mark.parametrize("which", ["c", "rust"])
def test_pprof_raw_has_the_folded_samples(pprof, export_pprof, export_folded, c_rec, rs_rec,
                                          tmp_path, which):
    rec = c_rec if which == "c" else rs_rec
    out = export_pprof(rec.pyrs, tmp_path / "cpu.pb.gz", "cpu")
    types, samples, head = parse_raw(pprof("-raw", out))
    assert types == ["samples/count", "wall/nanoseconds", "cpu/nanoseconds"]
    assert head["PeriodType"] == "cpu nanoseconds"
    assert int(head["Period"]) == 5_000_000          # 1e9 / 200 Hz
    folded = export_folded(rec.pyrs, view="cpu", lines=False)
    got = Counter()
    for vals, stack, _ in samples:
        got[stack] += vals[0]
        assert vals[1] == vals[0] * 5_000_000        # wall = weight x period
        assert vals[2] == vals[1]                    # the CPU view: all on CPU
    assert sum(got.values()) == total(folded)
    assert got == _sum_folded(folded)
    # the program's own known split: hot_a (70 % by design) outweighs hot_b
    hot = {n: sum(c for s, c in got.items() if any(f.endswith(n) for f in s))
           for n in ("hot_a", "hot_b")}
    assert hot["hot_a"] > hot["hot_b"] > 0, hot


def test_pprof_top_and_traces_agree_with_folded(pprof, export_pprof, export_folded, c_rec,
                                                tmp_path):
    out = export_pprof(c_rec.pyrs, tmp_path / "cpu.pb.gz", "cpu")
    folded = export_folded(c_rec.pyrs, view="cpu", lines=False)
    n = total(folded)
    leaves = Counter()
    for frames, c in folded:
        leaves[frames[-1].name.removesuffix("_[k]")] += c
    top = pprof("-top", "-sample_index=samples", "-nodefraction=0", "-nodecount=100000", out)
    m = re.search(r"of (\d+) total", top)
    assert m and int(m.group(1)) == n, top
    flat = Counter()
    rows = top.split("flat%")[1].splitlines()[1:]
    for l in rows:
        f = l.split(None, 5)
        if len(f) == 6:
            flat[f[5].removesuffix(" (inline)")] += int(f[0])
    assert {k: v for k, v in flat.items() if v} == dict(leaves)
    # the same top function
    assert flat.most_common(1)[0][0] == leaves.most_common(1)[0][0] == "hot_a"
    traces = pprof("-traces", "-sample_index=samples", out)
    counts = [int(x) for x in re.findall(r"^-+\+-+\n(?:\s*\w+:\s.*\n)*\s+(\d+)\s", traces, re.M)]
    assert sum(counts) == n, traces[:2000]


def test_pprof_wall_view_threads_and_off_cpu(pprof, export_pprof, export_folded, blocked_rec,
                                             tmp_path):
    out = export_pprof(blocked_rec.pyrs, tmp_path / "wall.pb.gz", "wall")
    types, samples, head = parse_raw(pprof("-raw", out))
    assert head["PeriodType"] == "wall nanoseconds"
    period = int(head["Period"])
    assert period == 10_000_000
    wall = export_folded(blocked_rec.pyrs, view="wall", lines=False)
    cpu = export_folded(blocked_rec.pyrs, view="cpu", lines=False)
    assert sum(v[0] for v, _, _ in samples) == total(wall)
    assert sum(v[1] for v, _, _ in samples) == total(wall) * period
    # cpu nanoseconds only for the running samples (0 for the off-CPU ones)
    assert sum(v[2] for v, _, _ in samples) == total(cpu) * period
    for vals, stack, _ in samples:
        if stack[-1].startswith("[") and stack[-1] not in ("[unknown]", "[empty stack]") \
                and "+0x" not in stack[-1]:
            assert vals[2] == 0, (stack, vals)
    # thread labels: the tids and names the target printed
    tids = thread_tids(blocked_rec.res.out)
    by_thread = Counter()
    for vals, stack, labels in samples:
        by_thread[(int(labels["thread"]), labels.get("thread_name"))] += vals[0]
    for name, tid in tids.items():
        assert by_thread[(tid, name)] > 0, by_thread
    reader = [(v, s) for v, s, l in samples if l.get("thread") == str(tids["reader"])]
    in_read = sum(v[0] for v, s in reader if s[-1] == "[read]")
    assert in_read > 0.8 * sum(v[0] for v, s in reader)


def test_pprof_of_one_process_lists_each_mapping_once(export_pprof, c_rec, tmp_path):
    """A recording of one process (decoded by read_pprof): each mapped range once, as the
    profile holds it (a tree's kernel mapping is copied per process, never for one process),
    ids 1..N with the program first, every location's mapping listed, one pid."""
    out = export_pprof(c_rec.pyrs, tmp_path / "wall.pb.gz", "wall")
    doc = read_pprof(out)
    maps = doc["mappings"]
    ranges = Counter((m["file"], m["start"], m["limit"], m["offset"]) for m in maps.values())
    assert ranges and max(ranges.values()) == 1, ranges
    assert sorted(maps) == list(range(1, len(maps) + 1))
    assert maps[1]["file"].endswith("/cpu_split"), maps[1]
    assert all(m in maps for m, _ in doc["locations"].values() if m)
    assert len({labels["pid"] for _, _, labels in doc["samples"]}) == 1


def test_pprof_from_folded_counts_only(pprof, export_pprof, tmp_path):
    src = tmp_path / "in.folded"
    src.write_bytes(b"main;work;hot 60\nmain;work 30\nmain;bad\xffname 10\n")
    out = export_pprof(src, tmp_path / "f.pb.gz")
    types, samples, head = parse_raw(pprof("-raw", out))
    assert types == ["samples/count"]
    got = Counter()
    for vals, stack, labels in samples:
        got[stack] += vals[0]
        assert labels == {}
    assert got == {("main", "work", "hot"): 60, ("main", "work"): 30,
                   ("main", "bad\ufffdname"): 10}


def test_pprof_keeps_names_in_angle_brackets(pprof, export_pprof, tmp_path):
    # pprof strips <...> from names that look like demangled C++: Python's "<module>" became
    # "<unknown>" and Rust's "<T as Trait>::fmt" became "::fmt"; an ordinary C++ name keeps
    # pprof's usual shortening
    src = tmp_path / "in.folded"
    src.write_bytes(b"main;<module>;work 40\nmain;<module>;<lambda> 20\n"
                    b"main;<alloc::string::String as core::fmt::Display>::fmt 30\n"
                    b"main;std::vector<int>::push_back 10\n")
    out = export_pprof(src, tmp_path / "a.pb.gz")
    top = pprof("-top", out)
    flat = {}
    for line in top.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+)$", line)
        if m:
            flat[m.group(2).strip()] = int(m.group(1))
    assert flat.get("<lambda>") == 20, top
    assert flat.get("work") == 40, top
    assert flat.get("<alloc::string::String as core::fmt::Display>::fmt") == 30, top
    assert "<unknown>" not in flat and "::fmt" not in flat, top
    _, samples, _ = parse_raw(pprof("-raw", out))
    stacks = {stack for _, stack, _ in samples}
    assert ("main", "<module>", "work") in stacks, stacks
