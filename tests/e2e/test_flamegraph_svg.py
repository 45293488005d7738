# SPDX-License-Identifier: MIT
"""`pyrsprof flamegraph` on folded stacks: the SVG parses as XML, every drawn frame's count equals
the sum of the input lines under its path (recomputed here from the input, the frame's path read
from the SVG's geometry), widths are proportional to counts, hostile names are escaped, the file
size follows --min-width rather than the number of stacks, and the options do what they say.

Uses $PYRSPROF (an absolute path); skips with a reason when its `flamegraph` command is missing.
"""

import os
import random
import re
import subprocess
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NS = {"s": "http://www.w3.org/2000/svg"}
SVG = "{http://www.w3.org/2000/svg}"


def _binary():
    return os.environ.get("PYRSPROF") or str(REPO / "bin" / "pyrsprof")


@pytest.fixture(scope="module")
def prs():
    exe = _binary()
    if not os.access(exe, os.X_OK):
        pytest.skip(f"no pyrsprof binary at {exe} (set PYRSPROF)")
    r = subprocess.run([exe, "flamegraph", "--help"], capture_output=True, timeout=20)
    if r.returncode != 0:
        pytest.skip(f"`{exe} flamegraph` is not available yet (rc {r.returncode})")
    return exe


def render(prs, folded: bytes, tmp_path, *opts, name="in.folded"):
    src = tmp_path / name
    src.write_bytes(folded)
    out = tmp_path / (name + ".svg")
    r = subprocess.run([prs, "flamegraph", str(src), "-o", str(out), *map(str, opts)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert b"Traceback" not in r.stderr and b"Sanitizer" not in r.stderr
    return out


class Frame:
    def __init__(self, g):
        self.g = g
        self.x = int(g.get("data-x"))
        self.c = int(g.get("data-c"))
        self.d = int(g.get("data-d"))
        self.title = g.find("s:title", NS).text or ""
        self.name = self.title.split("\n")[0]
        rect = g.find("s:rect", NS)
        self.rx = float(rect.get("x"))
        self.rw = float(rect.get("width"))
        self.label = g.find("s:text", NS).text or ""
        self.merged = "m" in g.get("class").split()
        self.path = None


def parse(svg_path):
    """Parses the SVG (it must be well-formed XML) and gives every frame its path from the root,
    found from the geometry: a frame's parent is the frame one level down whose range contains it."""
    root = ET.parse(svg_path).getroot()
    g = root.find(".//s:g[@id='frames']", NS)
    frames = [Frame(e) for e in g.findall("s:g", NS)]
    by_depth = defaultdict(list)
    for f in frames:
        by_depth[f.d].append(f)
    for d in sorted(by_depth):
        for f in by_depth[d]:
            if d == 0:
                f.path = ()
                continue
            parents = [p for p in by_depth[d - 1] if p.x <= f.x and f.x + f.c <= p.x + p.c and not p.merged]
            assert len(parents) == 1, f"{f.name} at depth {d} has {len(parents)} parents"
            f.path = parents[0].path + (f.name,)
    return root, g, frames


def folded_text(stacks):
    return "".join(";".join(s) + f" {c}\n" for s, c in stacks).encode()


def expected_totals(stacks):
    """The count under every path prefix, from the input alone."""
    tot = defaultdict(int)
    for s, c in stacks:
        for i in range(1, len(s) + 1):
            tot[tuple(s[:i])] += c
        tot[()] += c
    return tot


def random_stacks(seed, n, names=40, depth=(1, 9)):
    rng = random.Random(seed)
    seen = {}
    while len(seen) < n:
        s = tuple(f"fn_{rng.randrange(names)}" for _ in range(rng.randint(*depth)))
        seen[s] = seen.get(s, 0) + rng.choice([1, 1, 2, 3, 5, 8, 40, 300])
    return list(seen.items())


def test_counts_and_widths_match_the_input(prs, tmp_path):
    seed = 1234
    stacks = random_stacks(seed, 400)
    svg = render(prs, folded_text(stacks), tmp_path, "--min-width", "0.0001")
    root, g, frames = parse(svg)
    total = sum(c for _, c in stacks)
    truth = expected_totals(stacks)
    plotw = float(g.get("data-plotw"))
    assert int(g.get("data-total")) == total
    assert float(root.get("width")) == 1200
    drawn = [f for f in frames if not f.merged]
    # every distinct path is drawn at this min-width, each with the input's count
    assert len(drawn) == len(truth), f"seed {seed}"
    for f in drawn:
        assert f.c == truth[f.path], f"{f.path}: {f.c} != {truth[f.path]} (seed {seed})"
        assert abs(f.rw - f.c * plotw / total) < 0.006, f.path
        assert abs(f.rx - (10 + f.x * plotw / total)) < 0.006, f.path
        assert f"{f.c:,} samples" in f.title
    # siblings: sorted by name, packed from the parent's left edge
    kids = defaultdict(list)
    for f in drawn:
        if f.path:
            kids[f.path[:-1]].append(f)
    parent_x = {f.path: f.x for f in drawn}
    for p, ks in kids.items():
        ks.sort(key=lambda f: f.x)
        assert [k.name for k in ks] == sorted(k.name for k in ks)
        x = parent_x[p]
        for k in ks:
            assert k.x == x
            x += k.c


def test_hostile_names_are_escaped(prs, tmp_path):
    hostile = [
        b"<script>window.__pyrsprof_pwned=true</script>",
        b"\"quoted\" & 'single' <b>bold</b>",
        b"cdata ]]> end <![CDATA[ x",
        b"bad utf8 \xff\xfe \xc3\x28 \xed\xa0\x80 ok \xc3\xa9",
        b"ctrl \x01\x1b[31m\x7f end",
        b"<img src=x onerror=\"window.__pyrsprof_pwned=true\">",
    ]
    data = b"".join(b"main;" + h + b" 10\n" for h in hostile)
    svg = render(prs, data, tmp_path, "--title", "<script>alert(1)</script> & ]]>")
    raw = svg.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    root, g, frames = parse(svg)  # well-formed XML
    assert len(root.findall(".//s:script", NS)) == 1, "only the graph's own script"
    assert root.findall(".//s:img", NS) == [] and root.findall(".//s:b", NS) == []
    names = {f.name for f in frames}
    assert "<script>window.__pyrsprof_pwned=true</script>" in names
    assert "\"quoted\" & 'single' <b>bold</b>" in names
    assert "cdata ]]> end <![CDATA[ x" in names
    assert "bad utf8 \ufffd\ufffd \ufffd( \ufffd\ufffd\ufffd ok \u00e9" in names
    assert "ctrl [31m end" in names
    title = root.find(".//s:text[@id='title']", NS).text
    assert title == "<script>alert(1)</script> & ]]>"
    assert raw.count(b"]]>") == 2  # the style's and the script's CDATA ends, nothing else
    assert not re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", raw)


def test_names_clipped_to_fit(prs, tmp_path):
    long = "a_very_long_function_name_" * 6
    svg = render(prs, f"main;{long} 20\nmain;short 99\nmain;tiny 1\n".encode(), tmp_path)
    _, _, frames = parse(svg)
    f = next(f for f in frames if f.name == long)
    assert f.label.endswith("\u2026") and long.startswith(f.label[:-1]), f.label
    # Verdana/DejaVu at 12 px average 0.59 em, the ellipsis about two: the label must fit its box
    # with a 3 px margin (in a browser the script cuts it again to measured widths)
    assert (len(f.label) + 1) * 12 * 0.59 <= f.rw - 6 + 1e-6
    assert (len(f.label) + 2) * 12 * 0.59 > f.rw - 6, "the longest label that fits"
    t = next(f for f in frames if f.name == "tiny")
    assert t.rw < 12 and t.label == "", "no room for a character and the ellipsis"
    s = next(f for f in frames if f.name == "short")
    assert s.label == "short"


def test_size_follows_min_width_not_stacks(prs, tmp_path):
    rng = random.Random(7)
    lines = []
    for i in range(60000):
        lines.append((("main", f"mod_{i % 30}", f"fn_{i % 900}", f"leaf_{i}"), 1 + (i % 97 == 0) * 500))
    data = folded_text(lines)
    sizes = {}
    for mw in ("0.1", "1", "5"):
        svg = render(prs, data, tmp_path, "--min-width", mw, name=f"big-{mw}.folded")
        _, _, frames = parse(svg)
        sizes[mw] = (svg.stat().st_size, len(frames))
        # at most plotw / min_width boxes per level (4 levels + the root), whatever the stack count
        assert len(frames) <= 5 * 1180 / float(mw) + 1, (mw, len(frames))
        for f in frames:
            assert f.merged or f.rw >= float(mw) - 0.006, (f.name, f.rw)
    assert sizes["5"][0] < sizes["1"][0] < sizes["0.1"][0]
    assert sizes["1"][0] < len(data) / 2, sizes
    # the merged boxes keep the totals: every level's drawn boxes sum to at most the parent's count
    _, _, frames = parse(tmp_path / "big-5.folded.svg")
    assert any(f.merged for f in frames)
    total = sum(c for _, c in lines)
    assert sum(f.c for f in frames if f.d == 1) == total


def test_width_and_icicle(prs, tmp_path):
    stacks = [(("a", "b", "c"), 5), (("a", "d"), 3)]
    svg = render(prs, folded_text(stacks), tmp_path, "--width", "800", "--icicle")
    root, g, frames = parse(svg)
    assert root.get("width") == "800"
    assert float(g.get("data-plotw")) == 780
    assert g.get("data-icicle") == "1"
    y = {f.name: float(f.g.find("s:rect", NS).get("y")) for f in frames}
    assert y["all"] < y["a"] < y["b"] < y["c"], "icicle grows downwards"
    svg = render(prs, folded_text(stacks), tmp_path, name="flame.folded")
    _, _, frames = parse(svg)
    y = {f.name: float(f.g.find("s:rect", NS).get("y")) for f in frames}
    assert y["all"] > y["a"] > y["b"] > y["c"], "flame grows upwards"


def test_kernel_annotation_and_legend(prs, tmp_path):
    svg = render(prs, b"main;read_[k] 3\nmain;work 5\n", tmp_path)
    root, _, frames = parse(svg)
    k = next(f for f in frames if f.name == "read")
    assert "kind: kernel" in k.title
    legend = [t.text for t in root.findall(".//s:g[@id='legend']/s:text", NS)]
    assert "kernel" in legend


def test_bad_input_is_one_line_and_exit_1(prs, tmp_path):
    for name, data in (("empty", b""), ("junk", bytes(range(256)) * 4), ("nocount", b"a;b;c\n")):
        p = tmp_path / name
        p.write_bytes(data)
        r = subprocess.run([prs, "flamegraph", str(p), "-o", str(tmp_path / f"{name}.svg")],
                           capture_output=True, timeout=20)
        assert r.returncode == 1, (name, r.returncode, r.stderr)
        lines = r.stderr.decode(errors="replace").strip().splitlines()
        assert len(lines) >= 1 and lines[0].startswith("pyrsprof: "), (name, lines)
        assert b"Traceback" not in r.stderr and b"Sanitizer" not in r.stderr


def _record(prs, tmp_path, cmd):
    out = tmp_path / "rec"
    r = subprocess.run([prs, "run", "-r", "200", "-o", str(out), "--", *cmd], capture_output=True, timeout=60)
    if r.returncode != 0 or not (out / "wall.svg").exists():
        pytest.skip(f"`pyrsprof run` did not record here (rc {r.returncode}): "
                    f"{r.stderr.decode(errors='replace')[-300:]}")
    return out


def test_recording_views_and_per_thread(prs, tmp_path):
    # sleep(1) is blocked in a sleep syscall almost all the time: that is the truth here.
    rec = _record(prs, tmp_path, ["/bin/sleep", "1.2"])
    _, gw, wall = parse(rec / "wall.svg")
    _, gc, cpu = parse(rec / "cpu.svg")
    wall_total, cpu_total = int(gw.get("data-total")), int(gc.get("data-total"))
    assert wall_total > 100, wall_total  # ~1.2 s at 200 Hz, one thread at a time
    assert cpu_total < wall_total * 0.2, (cpu_total, wall_total)
    # Off-CPU leaves ("[syscall]", colored by reason) carry nearly all wall samples. (Which
    # syscall: a sleep interrupted by ptrace may be recorded as restart_syscall; the sampler's
    # business, tested in test_native_*.py. Here: the leaves, their kinds, their counts.)
    leaves = [f for f in wall if re.fullmatch(r"\[[a-z_0-9 ]+\]", f.name) and f.name != "[unknown]"]
    assert sum(f.c for f in leaves) > 0.7 * wall_total, sorted({f.name for f in wall})
    assert all(re.search(r"kind: off-(io|lock|gil|sleep|other)", f.title) for f in leaves)
    for f in leaves:
        if f.name in ("[clock_nanosleep]", "[nanosleep]"):
            assert "kind: off-sleep" in f.title
    assert not any(f.name == l.name for f in cpu for l in leaves)
    # per-thread roots, re-rendered from the saved profile
    out = tmp_path / "pt.svg"
    r = subprocess.run([prs, "flamegraph", str(rec / "profile.pyrs"), "-o", str(out), "--view", "wall",
                        "--per-thread"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    _, g, frames = parse(out)
    roots = [f for f in frames if f.d == 1]
    assert roots and all(re.fullmatch(r"thread \d+( \(.*\))?", f.name) for f in roots), [f.name for f in roots]
    assert all("kind: thread" in f.title for f in roots)
    assert sum(f.c for f in roots) == int(g.get("data-total")) == wall_total
