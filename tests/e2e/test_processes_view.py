# SPDX-License-Identifier: MIT
"""Which process each sample came from, through the CLI, on a profile of a process tree
(tests/fixtures/profile/tree.pyrs; its README lists its content: a shell exec'd into Python, two
forked workers, one thread waiting for the GIL). The truth is that content: every export and
graph names the process of each sample (folded: a root frame; pprof, read by `go tool pprof`: a
pid label; speedscope, checked against its schema: a profile per process and thread; flame
graphs: a root per process, or per command with --merge-processes), and a GIL wait is
"[waiting for the GIL]" everywhere a wait shows."""

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from conftest import REPO, assert_clean, parse_raw

TREE = REPO / "tests" / "fixtures" / "profile" / "tree.pyrs"
NS = {"s": "http://www.w3.org/2000/svg"}

# the samples per (command, pid, tid, frames root first): the fixture's README
WALL = {
    ("python3 pool.py", 100, 100, ("main", "wait", "[read]")): 10,
    ("python3 pool.py", 101, 101, ("main", "work", "PyEval")): 20,
    ("python3 pool.py", 102, 102, ("main", "work", "PyEval")): 20,
    ("python3 pool.py", 102, 103, ("main", "work", "[waiting for the GIL]")): 10,
    ("sh -c python3 pool.py", 100, 100, ("sh_main", "[wait4]")): 5,
}
NAMES = {100: "MainThread", 101: "MainThread", 102: "MainThread", 103: "worker"}


@pytest.fixture
def cli(run_prs):
    def run(*args):
        res = run_prs([*map(str, args)], timeout=120)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        return res
    return run


def folded_counts(text):
    out = Counter()
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        out[tuple(stack.split(";"))] += int(n)
    return out


@pytest.mark.parametrize("view", ["cpu", "wall"])
def test_folded_lines_start_with_the_process(cli, view):
    want = Counter()
    for (cmd, pid, tid, frames), n in WALL.items():
        if view == "wall" or not frames[-1].startswith("["):
            want[(f"{cmd} [{pid}]", f"thread {tid} ({NAMES[tid]})", *frames)] += n
    got = folded_counts(cli("export", TREE, "--format", "folded", "--view", view,
                            "--per-thread").out)
    assert got == want


def test_folded_merged_by_command(cli):
    want = Counter()
    for (cmd, pid, tid, frames), n in WALL.items():
        want[(cmd, *frames)] += n
    got = folded_counts(cli("export", TREE, "--format", "folded", "--view", "wall",
                            "--merge-processes").out)
    assert got == want
    assert got[("python3 pool.py", "main", "work", "PyEval")] == 40  # both workers


def test_pprof_labels_every_sample_with_its_pid(cli, pprof, tmp_path):
    out = tmp_path / "wall.pb.gz"
    cli("export", TREE, "--format", "pprof", "--view", "wall", "-o", out)
    types, samples, head = parse_raw(pprof("-raw", out))
    want = Counter()
    for (cmd, pid, tid, frames), n in WALL.items():
        want[(pid, tid, NAMES[tid], frames)] += n
    got = Counter()
    for vals, stack, labels in samples:
        got[(int(labels["pid"]), int(labels["thread"]), labels["thread_name"], stack)] += vals[0]
    assert got == want
    # pprof's own filter on the label: one worker's samples
    _, mine, _ = parse_raw(pprof("-raw", "-tagfocus=pid=101", out))
    assert sum(v[0] for v, _, _ in mine) == 20
    tags = pprof("-tags", out)
    assert re.search(r"pid: Total", tags) and re.search(r"\(46\.15%\): 102", tags), tags


def test_speedscope_a_profile_per_process_and_thread(cli, validate, tmp_path):
    out = tmp_path / "wall.json"
    cli("export", TREE, "--format", "speedscope", "--view", "wall", "-o", out)
    r = validate(out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    frames = doc["shared"]["frames"]
    got = Counter()
    for p in doc["profiles"]:
        m = re.fullmatch(r"(.*) \[(\d+)\]: thread (\d+) \((.*)\)", p["name"])
        assert m, p["name"]
        pid, tid = int(m.group(2)), int(m.group(3))
        assert m.group(4) == NAMES[tid]
        for s, w in zip(p["samples"], p["weights"]):
            got[(pid, tid, tuple(frames[i]["name"] for i in s))] += w / 10_000_000  # 100 Hz
    want = Counter()
    for (cmd, pid, tid, frames_), n in WALL.items():
        want[(pid, tid, frames_)] += n
    assert got == want
    assert len(doc["profiles"]) == 4


def roots(svg):
    """{name: samples} of the frames right above "all", and their kinds (a differential graph:
    the after samples, data-a; data-c is its layout width there)."""
    g = ET.parse(svg).getroot().find(".//s:g[@id='frames']", NS)
    out = {}
    for e in g.findall("s:g", NS):
        if e.get("data-d") == "1":
            title = e.find("s:title", NS).text
            assert "kind: process" in title, title
            out[title.split("\n")[0]] = int(e.get("data-a") or e.get("data-c"))
    return out


def test_flamegraph_a_root_per_process_or_per_command(cli, tmp_path):
    svg = tmp_path / "wall.svg"
    cli("flamegraph", TREE, "--view", "wall", "-o", svg)
    assert roots(svg) == {"python3 pool.py [100]": 10, "python3 pool.py [101]": 20,
                          "python3 pool.py [102]": 30, "sh -c python3 pool.py [100]": 5}
    text = svg.read_text()
    assert "[waiting for the GIL]" in text and "kind: off-gil" in text
    cli("flamegraph", TREE, "--view", "wall", "--merge-processes", "-o", svg)
    assert roots(svg) == {"python3 pool.py": 60, "sh -c python3 pool.py": 5}


def test_report_and_diff_name_the_processes(cli, tmp_path):
    cli("report", TREE, "-o", tmp_path / "rep", "--merge-processes")
    assert roots(tmp_path / "rep" / "cpu.svg") == {"python3 pool.py": 40}
    assert roots(tmp_path / "rep" / "wall.svg") == {"python3 pool.py": 60,
                                                    "sh -c python3 pool.py": 5}
    cli("report", TREE, "-o", tmp_path / "rep2")
    assert roots(tmp_path / "rep2" / "cpu.svg") == {"python3 pool.py [101]": 20,
                                                     "python3 pool.py [102]": 20}
    # two runs of a tree have other pids: the differential graph matches them by command
    cli("diff", TREE, TREE, "--view", "wall", "-o", tmp_path / "diff")
    assert roots(tmp_path / "diff" / "diff.svg") == {"python3 pool.py": 60,
                                                      "sh -c python3 pool.py": 5}
