# SPDX-License-Identifier: MIT
"""`pyrsprof report`, `flamegraph` and `export` on a saved profile and on folded stacks."""

import shutil
import xml.etree.ElementTree as ET

import pytest

from conftest import assert_clean, parse_folded, total

SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def rec(record):
    return record("cpu_split", 1.5, rate=200)


def svg_text(path):
    """All text of an SVG (it must parse as XML), for name checks."""
    root = ET.parse(path).getroot()
    assert root.tag in ("svg", SVG_NS + "svg"), root.tag
    return " ".join(t for el in root.iter() for t in (el.text, el.tail) if t)


def test_report_rerenders_svgs(run_prs, rec, tmp_path):
    d = tmp_path / "copy"
    d.mkdir()
    shutil.copy(rec.pyrs, d / "profile.pyrs")
    res = run_prs(["report", d / "profile.pyrs"], timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    for svg in ("cpu.svg", "wall.svg"):
        assert "hot_a" in svg_text(d / svg)
    other = tmp_path / "other"
    res = run_prs(["report", d / "profile.pyrs", "-o", other], timeout=60)
    assert res.rc == 0, res.describe()
    assert (other / "cpu.svg").is_file() and (other / "wall.svg").is_file()


@pytest.mark.parametrize("opts", [[], ["--view", "wall"], ["--icicle"], ["--per-thread"],
                                  ["--width", "600", "--min-width", "2"]])
def test_flamegraph_from_pyrs(run_prs, rec, tmp_path, opts):
    out = tmp_path / "f.svg"
    res = run_prs(["flamegraph", rec.pyrs, "-o", out, *opts], timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    text = svg_text(out)
    assert "hot_a" in text and "hot_b" in text
    if "--width" in opts:
        assert ET.parse(out).getroot().get("width", "").startswith("600")


def test_flamegraph_title_escaped(run_prs, rec, tmp_path):
    out = tmp_path / "f.svg"
    title = 'a <b> & "c" </svg>'
    res = run_prs(["flamegraph", rec.pyrs, "-o", out, "--title", title], timeout=60)
    assert res.rc == 0, res.describe()
    assert title in svg_text(out)   # parses as XML, and the title survives as text


def test_flamegraph_from_folded_hostile_names(run_prs, tmp_path):
    """Folded input with hostile frame names renders to well-formed SVG with the names as text."""
    src = tmp_path / "in.folded"
    names = ["<script>alert(1)</script>", "a&b", "q\"uote'", "]]>", "ünï ✓"]
    src.write_text("".join(f"main;{n} {i + 1}\n" for i, n in enumerate(names)) +
                   "main;plain 10\n", encoding="utf-8")
    out = tmp_path / "f.svg"
    res = run_prs(["flamegraph", src, "-o", out], timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    text = svg_text(out)
    for n in names:
        assert n in text, f"{n!r} missing from the SVG text"
    assert "<script>alert(1)" not in out.read_text(encoding="utf-8")


def test_export_folded_consistent(run_prs, export_folded, rec, tmp_path):
    """The wall view holds every thread-sample of stats.json; the CPU view is a subset; without
    --lines frames carry no location; -o writes what stdout gets."""
    st = rec.stats()
    wall = export_folded(rec.pyrs, view="wall", lines=False)
    cpu = export_folded(rec.pyrs, view="cpu", lines=False)
    assert 0.95 * st["thread_samples"] <= total(wall) <= st["thread_samples"], \
        f"wall total {total(wall)} vs thread_samples {st['thread_samples']}"
    assert total(cpu) <= total(wall)
    assert all(f.file is None for fr, _ in wall for f in fr)
    out = tmp_path / "x.folded"
    res = run_prs(["export", rec.pyrs, "--format", "folded", "--view", "wall", "-o", out])
    assert res.rc == 0, res.describe()
    assert sorted(parse_folded(out.read_text()), key=repr) == sorted(wall, key=repr)


def test_export_then_flamegraph_roundtrip(run_prs, rec, tmp_path):
    folded = tmp_path / "x.folded"
    res = run_prs(["export", rec.pyrs, "--format", "folded", "--lines", "-o", folded])
    assert res.rc == 0, res.describe()
    out = tmp_path / "f.svg"
    res = run_prs(["flamegraph", folded, "-o", out], timeout=60)
    assert res.rc == 0, res.describe()
    assert "hot_a" in svg_text(out)
