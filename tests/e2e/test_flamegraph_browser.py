# SPDX-License-Identifier: MIT
"""Flame graph SVGs in headless Chromium (one browser for the module: chromium.py, driving Debian's
/usr/bin/chromium through playwright-core from tests/browser): the file loads with no console error
and no network request, hostile names never run as script, a hover shows the frame's details, a
click on a frame makes it fill the plot width and shows "Reset Zoom", Esc and the Reset Zoom button
reset, Ctrl-F searches and the "Matched" share equals the share computed here from the folded input.
Screenshots are kept in tests/e2e/artifacts/ (git-ignored).

Skips with a reason when $PYRSPROF, node, chromium or playwright-core is missing (install the latter
with `cd tests/browser && npm ci`).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "e2e" / "artifacts"
HIGHLIGHT = "rgb(230,0,230)"


@pytest.fixture(scope="module")
def prs():
    exe = os.environ.get("PYRSPROF") or str(REPO / "bin" / "pyrsprof")
    if not os.access(exe, os.X_OK):
        pytest.skip(f"no pyrsprof binary at {exe} (set PYRSPROF)")
    if subprocess.run([exe, "flamegraph", "--help"], capture_output=True, timeout=20).returncode:
        pytest.skip("`pyrsprof flamegraph` is not available yet")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return exe


# A frame's index, its rect's width (the file's number) and where it is on the screen.
FRAME = """(name) => {
  const frames = window.prsFlameGraph.frames, i = frames.findIndex((f) => f.name === name);
  if (i < 0) return { i };
  const r = frames[i].rect.getBoundingClientRect();
  return { i, x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width,
           width: Number(frames[i].rect.getAttribute("width")) };
}"""

STATE = """() => ({
  plotw: Number(document.getElementById("frames").getAttribute("data-plotw")),
  frames: window.prsFlameGraph.frames.length,
  injected: window.__pyrsprof_pwned === true,
  details: document.getElementById("details").textContent,
  matched: document.getElementById("matched").textContent,
  unzoom_visible: !document.getElementById("unzoom").classList.contains("hide"),
  hidden: window.prsFlameGraph.frames.filter((f) => f.g.classList.contains("hide")).length,
  highlighted: window.prsFlameGraph.frames.filter((f) => f.rect.getAttribute("fill") === "%s")
    .map((f) => f.name),
})""" % HIGHLIGHT


def drive(b, svg, name, click=None, search=None):
    """Loads svg (1300x900), hovers and clicks the frame named click, resets with Esc and with the
    Reset Zoom button, searches with Ctrl-F; what it saw at each step, screenshots in ARTIFACTS."""
    b.open(svg, 1300, 900)
    res = {"screenshots": [], **b.eval(STATE)}

    def shot(step):
        res["screenshots"].append(b.shot(ARTIFACTS / f"{name}-{step}.png"))

    shot("loaded")
    if click:
        f = b.eval(FRAME, click)
        res["click_index"] = f["i"]
        if f["i"] >= 0:
            res["width_before"] = f["w"]
            b.move(f["x"], f["y"])
            res["details"] = b.eval(STATE)["details"]
            b.click(f["x"], f["y"])
            s = b.eval(STATE)
            res["width_after"] = b.eval(FRAME, click)["width"]
            res["unzoom_visible"], res["hidden_after_zoom"] = s["unzoom_visible"], s["hidden"]
            shot("zoomed")
            b.key("Escape")
            res["width_reset"] = b.eval(FRAME, click)["width"]
            # the same with the Reset Zoom button, clicked where it is on the screen
            f = b.eval(FRAME, click)
            b.click(f["x"], f["y"])
            u = b.eval("() => { const r = document.getElementById('unzoom').getBoundingClientRect();"
                       " return [r.x + r.width / 2, r.y + r.height / 2]; }")
            b.click(*u)
            res["width_reset_button"] = b.eval(FRAME, click)["width"]
            res["unzoom_hidden_after_reset"] = not b.eval(STATE)["unzoom_visible"]
    if search is not None:
        b.move(5, 5)
        b.answer(search)
        b.key("Control+f")
        s = b.eval(STATE)
        res["matched"], res["highlighted"] = s["matched"], s["highlighted"]
        shot("search")
        b.key("Escape")
        res["matched_after_reset"] = b.eval(STATE)["matched"]
    log = b.log()
    res.update(console_errors=log["console_errors"], page_errors=log["page_errors"],
               requests=log["requests"], injected=b.eval(STATE)["injected"])
    return res


def render(prs, tmp_path, data: bytes, name, *opts):
    src = tmp_path / f"{name}.folded"
    src.write_bytes(data)
    out = tmp_path / f"{name}.svg"
    r = subprocess.run([prs, "flamegraph", str(src), "-o", str(out), *opts], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    shutil.copy(out, ARTIFACTS / f"{name}.svg")
    return out


STACKS = [
    ("main;parse_args", 20),
    ("main;run;compute;dot_product", 300),
    ("main;run;compute;dot_product;simd_kernel", 120),
    ("main;run;compute;normalize", 80),
    ("main;run;load;read_file;read_[k]", 150),
    ("main;run;load;decode_json", 90),
    ("main;run;save;compute_checksum", 40),
    ("main;<script>window.__pyrsprof_pwned=true</script>", 5),
    ("main;<img src=x onerror=\"window.__pyrsprof_pwned=true\">", 5),
    ("main;quote\" & amp ]]> end", 5),
]


def folded(stacks):
    return "".join(f"{s} {c}\n" for s, c in stacks).encode()


def matched_share(stacks, regex):
    """Share of samples whose stack has a frame matching regex (each sample counted once)."""
    total = sum(c for _, c in stacks)
    hit = 0
    for s, c in stacks:
        names = [re.sub(r"_\[k\]$", "", f) for f in s.split(";")]
        if any(re.search(regex, n) for n in names):
            hit += c
    return 100.0 * hit / total


def test_click_zoom_search_and_no_errors(prs, browser, tmp_path):
    svg = render(prs, tmp_path, folded(STACKS), "browser-basic", "--title", "browser <check> & zoom")
    regex = "compute"
    res = drive(browser, svg, "browser-basic", click="load", search=regex)
    assert res["console_errors"] == [] and res["page_errors"] == [], res
    assert res["requests"] == [], "the SVG must not touch the network"
    assert res["injected"] is False
    # click: the frame fills the plot width (within a pixel), ancestors kept, others hidden
    assert res["click_index"] >= 0
    assert res["width_before"] < res["plotw"] * 0.5
    assert abs(res["width_after"] - res["plotw"]) < 1.0, res
    assert res["unzoom_visible"] is True
    assert res["hidden_after_zoom"] > 0
    assert res["details"].startswith("load"), res["details"]
    load = sum(c for st, c in STACKS if st.startswith("main;run;load;"))
    run = sum(c for st, c in STACKS if st.startswith("main;run;"))
    total = sum(c for _, c in STACKS)
    want = f"{load} samples, {100 * load / total:.2f}% of total, {100 * load / run:.2f}% of parent"
    assert want in res["details"], (want, res["details"])
    assert abs(res["width_reset"] - 240 / total * res["plotw"]) < 0.01, "Esc restores the widths"
    assert abs(res["width_reset_button"] - 240 / total * res["plotw"]) < 0.01, "so does Reset Zoom"
    assert res["unzoom_hidden_after_reset"] is True
    # search: the matched share is what the input says; every highlighted frame matches
    want = matched_share(STACKS, regex)
    got = float(re.search(r"Matched: ([0-9.]+)%", res["matched"]).group(1))
    assert abs(got - want) < 0.006, (got, want)
    assert sorted(res["highlighted"]) == ["compute", "compute_checksum"]
    assert res["matched_after_reset"].strip() == ""
    for p in res["screenshots"]:
        assert Path(p).stat().st_size > 5000


def test_nested_matches_counted_once(prs, browser, tmp_path):
    # "a" matches at two depths in the same stacks: the share must not double count
    stacks = [("x;a;b;a", 10), ("x;a", 30), ("x;c", 60)]
    svg = render(prs, tmp_path, folded(stacks), "browser-nested")
    res = drive(browser, svg, "browser-nested", search="^a$")
    assert res["console_errors"] == [] and res["page_errors"] == []
    got = float(re.search(r"Matched: ([0-9.]+)%", res["matched"]).group(1))
    assert abs(got - matched_share(stacks, "^a$")) < 0.006  # 40%, not 50%


def test_icicle_and_many_frames_load_cleanly(prs, browser, tmp_path):
    lines = [(f"main;mod_{i % 20};fn_{i % 300};leaf_{i}", 1 + (i % 50 == 0) * 200) for i in range(20000)]
    svg = render(prs, tmp_path, folded(lines), "browser-icicle", "--icicle", "--width", "1280")
    res = drive(browser, svg, "browser-icicle", click="mod_3", search="fn_1[0-9]$")
    assert res["console_errors"] == [] and res["page_errors"] == [] and res["requests"] == []
    assert abs(res["width_after"] - res["plotw"]) < 1.0
    assert res["frames"] > 100
