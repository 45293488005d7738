# SPDX-License-Identifier: MIT
"""`pyrsprof diff BEFORE AFTER -o DIR`: the table of per-function changes (DIR/diff.md and
DIR/diff.json) on pairs whose truth follows from their construction: folded stacks with known
shares (a;b 70, a;c 30 -> a;b 30, a;c 70: b -40 pt, c +40 pt, both beyond noise), an identical
pair (nothing moves), a recording against itself and against its own folded export."""

import json
import math

import pytest

from conftest import assert_clean


@pytest.fixture(scope="module")
def diff(run_prs, validate_schema):
    """diff(before, after, outdir, *opts) -> (diff.json parsed, diff.md text, Result); diff.json
    is checked against docs/diff.schema.json."""
    def run(before, after, outdir, *opts):
        res = run_prs(["diff", before, after, "-o", outdir, *opts], timeout=120)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        v = validate_schema("diff.schema.json", outdir / "diff.json")
        assert v.returncode == 0, v.stderr
        return (json.loads((outdir / "diff.json").read_text()), (outdir / "diff.md").read_text(),
                res)
    return run


def functions(doc):
    """Every function of diff.json: the changes beyond noise, then the others."""
    return doc["changes"] + doc["noise"]


def fn(doc, name):
    found = [f for f in functions(doc) if f["name"] == name]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def pt(f, measure, what):
    """A share of diff.json in percent (points): pt(f, "self", "delta")."""
    return 100 * f[measure][f"{what}_share"]


def sigma_pt(kb, nb, ka, na):
    pb, pa = kb / nb, ka / na
    return 100 * math.sqrt(pb * (1 - pb) / nb + pa * (1 - pa) / na)


def test_diff_swapped_shares(diff, tmp_path):
    before = tmp_path / "before.folded"
    after = tmp_path / "after.folded"
    before.write_text("a;b 70\na;c 30\n")
    after.write_text("a;b 30\na;c 70\n")
    doc, md, _ = diff(before, after, tmp_path / "out")
    b, c, a = fn(doc, "b"), fn(doc, "c"), fn(doc, "a")
    assert not doc["timed"] and doc["unit"] == "share"  # folded stacks have no times
    assert pt(b, "total", "delta") == pytest.approx(-40) and pt(b, "self", "delta") == pytest.approx(-40)
    assert pt(c, "total", "delta") == pytest.approx(40)
    assert b["significant"] and c["significant"]
    assert b["status"] == "shrank" and c["status"] == "grew"
    assert pt(b, "self", "sigma") == pytest.approx(sigma_pt(70, 100, 30, 100), rel=1e-4)
    assert pt(a, "total", "before") == pytest.approx(100) and pt(a, "total", "delta") == pytest.approx(0)
    assert not a["significant"] and a["total"]["delta_s"] is None
    assert doc["summary"]["changed"] == 2
    assert doc["summary"]["grew"] == 1 and doc["summary"]["shrank"] == 1
    # the changes first, then the noise
    assert [f["name"] for f in functions(doc)][2] == "a" and doc["noise"] == [a]
    # the Markdown table has both movers, with their direction
    rows = {l.split("|")[1].strip().strip("*"): l for l in md.splitlines()
            if l.startswith("| ") and not l.startswith("| function") and not l.startswith("| ---")}
    assert "-40.0" in rows["b"] and "shrank" in rows["b"]
    assert "+40.0" in rows["c"] and "grew" in rows["c"]
    assert not list((tmp_path / "out").glob(".*")), "temporary files left behind"


def test_diff_identical_pair_has_nothing_significant(diff, tmp_path):
    text = "main;work;hot 600\nmain;work 250\nmain;io 150\n"
    (tmp_path / "x.folded").write_text(text)
    (tmp_path / "y.folded").write_text(text)
    doc, md, _ = diff(tmp_path / "x.folded", tmp_path / "y.folded", tmp_path / "out")
    assert doc["summary"]["changed"] == 0 and doc["changes"] == []
    assert all(f["total"]["delta_share"] == 0 and f["self"]["delta_share"] == 0
               for f in functions(doc))
    assert "No function changed beyond noise." in md


def test_diff_small_change_is_noise_large_is_not(diff, tmp_path):
    # 100 samples each: 48 -> 52 % is 4 pt with sigma ~7 pt (noise);
    # 10000 samples each: 48 -> 52 % has sigma ~0.7 pt (4 pt is beyond 3 sigma)
    (tmp_path / "s1").write_text("m;f 48\nm;g 52\n")
    (tmp_path / "s2").write_text("m;f 52\nm;g 48\n")
    (tmp_path / "l1").write_text("m;f 4800\nm;g 5200\n")
    (tmp_path / "l2").write_text("m;f 5200\nm;g 4800\n")
    small, _, _ = diff(tmp_path / "s1", tmp_path / "s2", tmp_path / "o1")
    large, _, _ = diff(tmp_path / "l1", tmp_path / "l2", tmp_path / "o2")
    assert pt(fn(small, "f"), "self", "delta") == pytest.approx(4)
    assert not fn(small, "f")["significant"] and fn(small, "f")["status"] == "unchanged"
    assert pt(fn(large, "f"), "self", "delta") == pytest.approx(4)
    assert fn(large, "f")["significant"]


def test_diff_recording_against_itself_and_its_folded_export(diff, record, export_folded,
                                                             run_prs, tmp_path):
    rec = record("cpu_split", 1.0, rate=200)
    doc, _, _ = diff(rec.pyrs, rec.pyrs, tmp_path / "same")
    assert doc["summary"]["changed"] == 0 and doc["timed"]
    assert doc["speedup"]["wall"]["speedup"] == pytest.approx(1)
    assert any(f["name"] == "hot_a" and pt(f, "total", "before") > 30 for f in functions(doc))
    res = run_prs(["export", rec.pyrs, "--format", "folded", "-o", tmp_path / "rec.folded"])
    assert res.rc == 0, res.describe()
    doc, _, _ = diff(rec.pyrs, tmp_path / "rec.folded", tmp_path / "vs-folded")
    assert doc["summary"]["changed"] == 0
    assert doc["matching"]["by"] == "name" and not doc["timed"]
    assert all(abs(f["total"]["delta_share"]) < 1e-9 for f in functions(doc))


def test_diff_hostile_names_stay_in_their_cell(diff, tmp_path):
    (tmp_path / "b").write_bytes(b"main;x|y\xff 10\nmain;z 90\n")
    (tmp_path / "a").write_bytes(b"main;x|y\xff 90\nmain;z 10\n")
    doc, md, _ = diff(tmp_path / "b", tmp_path / "a", tmp_path / "out")
    assert fn(doc, "x|y\ufffd")["significant"]
    row = next(l for l in md.splitlines() if l.startswith("| ") and "x\\|y" in l)
    # 10 cells: the name's '|' is escaped
    assert len([i for i, ch in enumerate(row) if ch == "|" and row[i - 1:i] != "\\"]) == 11


def test_diff_wall_view_has_off_cpu_leaves(diff, record, tmp_path):
    """In the wall view the off-CPU leaves are functions too: the blocked target's reader thread
    spends its life in read(), so "[read]" holds about a third of the samples (3 threads)."""
    rec = record("blocked", 1.0, rate=100)
    doc, md, _ = diff(rec.pyrs, rec.pyrs, tmp_path / "wall", "--view", "wall")
    assert doc["view"] == "wall"
    assert doc["summary"]["changed"] == 0
    read = fn(doc, "[read]")
    assert read["kind"] == "off-io"
    assert 20 < pt(read, "self", "before") < 45, read
    assert "\\[read\\]" in md
