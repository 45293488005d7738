# SPDX-License-Identifier: MIT
"""Flame graphs that fit the screen, in headless Chromium (one browser for the module, see
chromium.py) at 1366x768 and 1920x1080, with the scroll bars a user sees.

Two inputs, written here as folded stacks: a 300-deep recursion and a flat profile (400 siblings),
each as a flame graph (roots at the bottom) and an icicle (roots at the top). On load the SVG is as
wide as the window (the root element's clientWidth: the window without its vertical scroll bar)
and shows its roots: the root frame and the widest frame of each of the first rows are what the
browser finds at their centres (elementFromPoint: inside the window, not under the pinned title
bar). Every frame's x and width are its sample offset and count in the plot width; every label is
the name when the browser measures that it fits, else the longest prefix that fits with an
ellipsis, and never overflows its frame. The same after a resize to another width. Zoom into a deep
frame scrolls it into view, Reset Zoom (clicked where it is on the screen) and Esc return to the
roots, and a search's share is the one computed here from the input. Other viewers (an <img>,
rsvg-convert) draw the file at its nominal width, with each frame's fill where the file puts it.
Screenshots are saved in each test's tmp dir. Fixtures prs and browser: conftest.py.
"""

import base64
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

NS = {"s": "http://www.w3.org/2000/svg"}
VIEWPORTS = [(1366, 768), (1920, 1080)]
ELLIPSIS = "\u2026"
FIRST_ROWS = 20  # rows from the roots that must be in view on load (20 * 16 px: fits both windows)


def deep_stacks():
    """A 300-deep recursion under main;solve, its leaf alternating work and io_wait; a wide sibling."""
    stacks = [("main;load_input", 60)]
    for k in range(1, 301):
        leaf = "io_wait" if k % 3 == 0 else "work"
        stacks.append(("main;solve" + ";recurse" * k + ";" + leaf, 1 + 3 * (k % 7 == 0)))
    return stacks


def flat_stacks():
    """400 siblings under main;dispatch, names 12 to 50 characters, a few 100x wider than the rest."""
    stacks = []
    for i in range(400):
        name = f"handler_{i:03d}_" + "abcdefghij"[: i % 11] + "_request" * (i % 4)
        stacks.append((f"main;dispatch;{name}", 1 + i % 7 + (400 if i % 50 == 0 else 0)))
    return stacks


INPUTS = {"deep": deep_stacks, "flat": flat_stacks}


@pytest.fixture(scope="module")
def graphs(prs, tmp_path_factory):
    """(shape, orientation) -> the SVG's path, rendered once for the module."""
    d = tmp_path_factory.mktemp("fit")
    out = {}
    for shape, stacks in INPUTS.items():
        src = d / f"{shape}.folded"
        src.write_text("".join(f"{s} {c}\n" for s, c in stacks()))
        for orient in ("flame", "icicle"):
            svg = d / f"{shape}-{orient}.svg"
            r = subprocess.run([prs, "flamegraph", str(src), "-o", str(svg),
                                *(["--icicle"] if orient == "icicle" else [])],
                               capture_output=True, timeout=60)
            assert r.returncode == 0, r.stderr.decode(errors="replace")
            out[shape, orient] = svg
    return out


# Everything the checks need, read in one call: the window, the picture, the frames as drawn
# (every one, or with a stride of n the 1-px-wide ones and every n-th).
GEOMETRY = """(stride) => {
  const svg = document.documentElement, fg = window.prsFlameGraph;
  const vw = svg.clientWidth, vh = svg.clientHeight;
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
  const seen = (el) => {  // what the browser finds at el's centre is el itself
    const r = el.getBoundingClientRect(), x = r.x + r.width / 2, y = r.y + r.height / 2;
    return x >= 0 && y >= 0 && x < vw && y < vh && document.elementFromPoint(x, y) === el;
  };
  const byId = (id) => document.getElementById(id);
  return {
    inner: [innerWidth, innerHeight], client: [vw, vh], scroll_y: scrollY,
    scroll_size: [document.scrollingElement.scrollWidth, document.scrollingElement.scrollHeight],
    width: Number(svg.getAttribute("width")), svg_box: box(svg),
    plotw: Number(byId("frames").getAttribute("data-plotw")),
    xpad: Number(byId("frames").getAttribute("data-xpad")),
    total: Number(byId("frames").getAttribute("data-total")),
    unzoom_seen: !byId("unzoom").classList.contains("hide") && seen(byId("unzoom")),
    unzoom_box: box(byId("unzoom")), search_seen: seen(byId("search")),
    matched: byId("matched").textContent, matched_seen: seen(byId("matched")),
    legend: Array.from(byId("legend").children, box),
    frames: fg.frames.filter((f, i) => !stride || i % stride === 0 || f.c / fg.frames[0].c > 1e-3)
      .map((f) => ({
      name: f.name, d: f.d, x: f.x, c: f.c,
      hidden: f.g.classList.contains("hide"), parent: f.g.classList.contains("parent"),
      rx: Number(f.rect.getAttribute("x")), rw: Number(f.rect.getAttribute("width")),
      box: box(f.rect), label: f.text.textContent, text_box: f.text.textContent ? box(f.text) : null,
      // hit-tested only when 1 px wide or more (a hit test costs milliseconds on a big graph)
      seen: !f.g.classList.contains("hide") && f.rect.getBoundingClientRect().width >= 1 && seen(f.rect),
    })),
  };
}"""

# The browser's own widths (getComputedTextLength, in the labels' font) of each shown frame's name,
# label, and label with one more character of the name: the truth the labels are checked against.
WIDTHS = """() => {
  const frames = window.prsFlameGraph.frames, g = frames[0].text.parentNode.parentNode;
  const probes = document.createElementNS("http://www.w3.org/2000/svg", "g");
  probes.setAttribute("class", "f");  // the labels' style (white-space: pre), not drawn
  probes.setAttribute("visibility", "hidden");
  const probe = (s) => {  // all probes in the document at once: one layout for every measurement
    const t = frames[0].text.cloneNode(false);
    t.textContent = s;
    probes.appendChild(t);
    return t;
  };
  const todo = frames.map((f) => {
    if (f.g.classList.contains("hide")) return null;
    const name = Array.from(f.name), label = f.text.textContent;
    const kept = label.endsWith("\u2026") ? Array.from(label).length - 1 : 0;
    return [probe(f.name), probe(label), probe(name.slice(0, kept + 1).join("") + "\u2026")];
  });
  g.appendChild(probes);
  const w = (t) => t.textContent ? t.getComputedTextLength() : 0;
  const out = todo.map((p) => p && { name_w: w(p[0]), label_w: w(p[1]), next_w: w(p[2]) });
  probes.remove();
  return out;
}"""


def check_fits_window(g, scrolls):
    """The picture is the window's width, 1 user unit a px, and nothing scrolls sideways."""
    vw, vh = g["client"]
    assert g["width"] == vw, (g["width"], g["client"])
    assert 0 <= g["inner"][0] - vw <= 20, "at most a vertical scroll bar's width less than the window"
    if not scrolls:
        assert vw == g["inner"][0], "no scroll bar: the whole window's width"
    assert abs(g["svg_box"][2] - vw) < 0.01
    assert g["scroll_size"][0] <= vw, "no horizontal scrolling"
    assert g["plotw"] == vw - 2 * g["xpad"]
    assert g["legend"] and all(x >= 0 and x + w <= vw for x, _, w, _ in g["legend"]), g["legend"]


def check_frames(g, zoom=None):
    """Each shown frame's x and width from its sample offset and count (toFixed(2) in the file)."""
    k0, kc = (zoom["x"], zoom["c"]) if zoom else (0, g["total"])
    for f in g["frames"]:
        if f["hidden"]:
            continue
        if f["parent"]:
            want_x, want_w = g["xpad"], g["plotw"]
        else:
            want_x = g["xpad"] + (f["x"] - k0) / kc * g["plotw"]
            want_w = f["c"] / kc * g["plotw"]
        assert abs(f["rx"] - want_x) < 0.006 and abs(f["rw"] - want_w) < 0.006, (f["name"], f["d"], f)


def check_labels(b, g):
    """Labels never overflow their frame; each is the whole name when the browser measures that it
    fits, else the longest prefix that fits with an ellipsis (within the script's rounding of each
    character up to 1/64 px), or empty when not even one character does."""
    widths = b.eval(WIDTHS)
    kinds = {"whole": 0, "cut": 0, "empty": 0}
    for f, w in zip(g["frames"], widths):
        if f["hidden"]:
            continue
        room, name, label = f["rw"] - 6, f["name"], f["label"]
        slack = (len(name) + 1) / 64
        if f["text_box"]:
            tx, _, tw, _ = f["text_box"]
            bx, _, bw, _ = f["box"]
            assert tx >= bx - 0.01 and tx + tw <= bx + bw + 0.01, ("overflows", f["name"], f["rw"], label)
            assert w["label_w"] <= room + 0.01, (name, label, w, room)
        if w["name_w"] <= room - slack:
            assert label == name, (name, label, room, w)
        elif label == name:
            assert w["name_w"] <= room + 0.01, (name, room, w)
        elif label:
            assert label.endswith(ELLIPSIS) and name.startswith(label[:-1]), (name, label)
            assert w["next_w"] > room - slack, ("a longer prefix fits", name, label, room, w)
        else:
            assert w["next_w"] > room - slack, ("one character fits", name, room, w)
        kinds["whole" if label == name else "cut" if label else "empty"] += 1
    return kinds


def check_roots_in_view(g, orient, deep, rows=FIRST_ROWS):
    """The root and the widest frame of each of the first rows are seen; a deep flame graph is
    scrolled to them, an icicle is at the top."""
    frames = [f for f in g["frames"] if not f["hidden"]]
    root = next(f for f in frames if f["d"] == 0)
    assert root["name"] == "all" and root["seen"], root
    vh = g["client"][1]
    assert 0 <= root["box"][1] and root["box"][1] + root["box"][3] <= vh, root["box"]
    maxd = max(f["d"] for f in frames)
    for d in range(min(maxd, rows) + 1):
        widest = max((f for f in frames if f["d"] == d), key=lambda f: f["c"])
        assert widest["seen"], (d, widest["name"], widest["box"], g["scroll_y"])
    if orient == "icicle":
        assert g["scroll_y"] == 0
    elif deep:
        assert g["scroll_y"] > 0 and g["scroll_y"] >= g["scroll_size"][1] - vh - 1, "at the bottom"
    assert g["search_seen"], "the title bar stays in view"


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v[0]}x{v[1]}")
@pytest.mark.parametrize("orient", ["flame", "icicle"])
@pytest.mark.parametrize("shape", ["deep", "flat"])
def test_opens_on_the_roots_at_the_window_width(browser, graphs, tmp_path, shape, orient, viewport):
    w, h = viewport
    b = browser
    b.open(graphs[shape, orient], w, h)
    g = b.eval(GEOMETRY)
    deep = shape == "deep"
    check_fits_window(g, scrolls=deep)
    check_frames(g)
    check_roots_in_view(g, orient, deep)
    kinds = check_labels(b, g)
    # the inputs give every case: names that fit, names cut, frames too narrow for any character
    assert kinds["whole"] >= 3 and kinds["empty"] > 0, kinds
    if shape == "flat":
        assert kinds["cut"] > 0, kinds
    b.shot(tmp_path / f"{shape}-{orient}-{w}x{h}-loaded.png")

    # another width: the picture, the frames and the labels follow; the roots stay in view
    nw = w * 3 // 4
    b.resize(nw, h)
    g2 = b.eval(GEOMETRY)
    check_fits_window(g2, scrolls=deep)
    assert g2["width"] < g["width"] - 300
    check_frames(g2)
    root = next(f for f in g2["frames"] if f["d"] == 0)
    assert abs(root["rw"] - (g2["client"][0] - 2 * g2["xpad"])) < 0.006
    check_roots_in_view(g2, orient, deep)
    check_labels(b, g2)
    b.shot(tmp_path / f"{shape}-{orient}-{nw}x{h}-resized.png")
    log = b.log()
    assert log["console_errors"] == [] and log["page_errors"] == [], log
    assert log["requests"] == [], "the SVG must not touch the network"


TITLE = """() => {
  const t = document.getElementById("title"), r = t.getBoundingClientRect();
  return { text: t.textContent, x: Number(t.getAttribute("x")), width: r.width,
           svg_width: Number(document.documentElement.getAttribute("width")),
           search_left: document.getElementById("search").getBoundingClientRect().x,
           unzoom_right: (() => {  // shown for the measurement, as when zoomed
             const u = document.getElementById("unzoom");
             u.classList.remove("hide");
             const r = u.getBoundingClientRect();
             u.classList.add("hide");
             return r.x + r.width; })() };
}"""


def test_title_follows_the_width(prs, browser, tmp_path):
    # cut by the writer at the nominal 1200 px; whole in a 1920 px window, cut again in a narrow one
    title = "<b>profile</b> & \"friends\" of " + " ".join(f"worker_{i}" for i in range(9))
    src = tmp_path / "t.folded"
    src.write_text("main;a 3\nmain;b 1\n")
    svg = tmp_path / "t.svg"
    r = subprocess.run([prs, "flamegraph", str(src), "-o", str(svg), "--title", title],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    nominal = ET.parse(svg).getroot().find(".//s:text[@id='title']", NS)
    assert nominal.text.endswith(ELLIPSIS) and nominal.get("data-full") == title
    b = browser
    b.open(svg, 1920, 1080)
    t = b.eval(TITLE)
    assert t["text"] == title and t["x"] == t["svg_width"] / 2, t
    for w in (900, 420):
        b.resize(w, 1080)
        t = b.eval(TITLE)
        assert t["text"].endswith(ELLIPSIS) and title.startswith(t["text"][:-1]), t
        assert t["width"] <= w - 190 and t["x"] == w / 2, t
        assert t["x"] + t["width"] / 2 < t["search_left"] - 5, "clear of the Search button"
        assert t["x"] - t["width"] / 2 > t["unzoom_right"] + 5, "clear of the Reset Zoom button"
        b.shot(tmp_path / f"title-{w}.png")
    log = b.log()
    assert log["console_errors"] == [] and log["page_errors"] == [], log


def test_big_graph_follows_a_resize(prs, browser, tmp_path):
    # 20,000 frames of 0.12 px (drawn at the default --min-width of 0.1 px): a fit of this many
    # frames is what the script defers until a resize ends; the result must be the same
    src = tmp_path / "big.folded"
    src.write_text("".join(f"main;mod_{i % 50:02d}_{i};fn_{i} 1\n" for i in range(10000)))
    svg = tmp_path / "big.svg"
    r = subprocess.run([prs, "flamegraph", str(src), "-o", str(svg)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    b = browser
    b.open(svg, 1366, 768)
    assert b.eval("() => window.prsFlameGraph.frames.length") == 20002
    g = b.eval(GEOMETRY, 97)
    assert len(g["frames"]) > 200
    check_fits_window(g, scrolls=False)
    check_frames(g)
    check_roots_in_view(g, "flame", False, rows=0)  # the others are 0.2 px wide or less
    for w in (1000, 1600):
        b.resize(w, 768)
        g = b.eval(GEOMETRY, 97)
        check_fits_window(g, scrolls=False)
        check_frames(g)
        check_roots_in_view(g, "flame", False, rows=0)
    b.shot(tmp_path / "big-1600x768.png")
    log = b.log()
    assert log["console_errors"] == [] and log["page_errors"] == [], log


def centre(box):
    return box[0] + box[2] / 2, box[1] + box[3] / 2


def share(stacks, regex, under=None):
    """Percentage of the samples (of stacks through the frame path `under`, when given) whose stack
    has a frame matching regex."""
    hit = whole = 0
    for s, c in stacks:
        names = s.split(";")
        if under and names[: len(under)] != under:
            continue
        whole += c
        if any(re.search(regex, n) for n in names):
            hit += c
    return 100 * hit / whole


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v[0]}x{v[1]}")
@pytest.mark.parametrize("orient", ["flame", "icicle"])
def test_zoom_search_reset_on_a_deep_recursion(browser, graphs, tmp_path, orient, viewport):
    w, h = viewport
    b = browser
    b.open(graphs["deep", orient], w, h)
    g = b.eval(GEOMETRY)
    # depth 250 is far outside the window on load: a zoom into it scrolls it into view, with its
    # parent row (faded) next to it and Reset Zoom on the screen
    i = next(i for i, f in enumerate(g["frames"]) if f["d"] == 250 and f["name"] == "recurse")
    assert not g["frames"][i]["seen"]
    b.eval("(i) => window.prsFlameGraph.zoomTo(i)", i)
    z = b.eval(GEOMETRY)
    f = z["frames"][i]
    assert f["seen"] and abs(f["rw"] - z["plotw"]) < 0.006, f
    parent = next(p for p in z["frames"] if p["d"] == 249 and p["parent"])
    assert parent["seen"], parent
    assert z["unzoom_seen"]
    check_frames(z, zoom=g["frames"][i])
    check_labels(b, z)
    b.shot(tmp_path / f"deep-{orient}-{w}x{h}-zoomed.png")

    # Reset Zoom, clicked where the user sees it: back to the roots, widths as on load
    b.click(*centre(z["unzoom_box"]))
    r = b.eval(GEOMETRY)
    assert not r["unzoom_seen"] and not any(f["hidden"] for f in r["frames"])
    check_frames(r)
    check_roots_in_view(r, orient, True)

    # a click on a frame in view zooms into it; a search then counts within it
    d20 = max((f for f in r["frames"] if f["d"] == 20), key=lambda f: f["c"])
    j = r["frames"].index(d20)
    b.click(*centre(d20["box"]))
    z = b.eval(GEOMETRY)
    assert z["frames"][j]["seen"] and abs(z["frames"][j]["rw"] - z["plotw"]) < 0.006
    b.answer("^io_wait$")
    b.key("Control+f")
    s = b.eval(GEOMETRY)
    got = re.fullmatch(r"Matched: ([0-9.]+)% of the zoomed frame", s["matched"])
    assert got, s["matched"]
    path = ["main", "solve"] + ["recurse"] * 18  # depth 20: the 18th recursion level
    assert abs(float(got.group(1)) - share(deep_stacks(), "^io_wait$", path)) < 0.006
    assert s["matched_seen"], "the matched share is on the screen"
    b.shot(tmp_path / f"deep-{orient}-{w}x{h}-search.png")

    # Esc: search and zoom reset, the roots in view
    b.key("Escape")
    e = b.eval(GEOMETRY)
    assert e["matched"].strip() == "" and not e["unzoom_seen"]
    check_frames(e)
    check_roots_in_view(e, orient, True)
    log = b.log()
    assert log["console_errors"] == [] and log["page_errors"] == [] and log["requests"] == [], log


# The pixels an image decodes to at the given points, and its natural size.
PIXELS = """async (a) => {
  const img = new Image();
  img.src = a.src;
  await img.decode();
  const c = document.createElement("canvas");
  c.width = img.naturalWidth;
  c.height = img.naturalHeight;
  const ctx = c.getContext("2d");
  ctx.drawImage(img, 0, 0);
  return { w: img.naturalWidth, h: img.naturalHeight,
           px: a.points.map(([x, y]) => Array.from(ctx.getImageData(x, y, 1, 1).data.slice(0, 3))) };
}"""


def nominal_frames(svg):
    """The file's own size and its frames' rects: (width, height, [(name, depth, x, y, w, rgb)])."""
    root = ET.parse(svg).getroot()
    w, h = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {w:.0f} {h:.0f}"
    out = []
    for g in root.find(".//s:g[@id='frames']", NS).findall("s:g", NS):
        r = g.find("s:rect", NS)
        rgb = [int(v) for v in re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", r.get("fill")).groups()]
        out.append((g.find("s:title", NS).text.split("\n")[0], int(g.get("data-d")),
                    float(r.get("x")), float(r.get("y")), float(r.get("width")), rgb))
    return w, h, out


@pytest.mark.parametrize("case", [("deep", "flame"), ("flat", "icicle")], ids="-".join)
def test_other_viewers_draw_the_nominal_width(browser, graphs, tmp_path, case):
    svg = graphs[case]
    w, h, frames = nominal_frames(svg)
    assert w == 1200
    # a sample of frames, wide enough to sample: the root, and frames down to the deepest row
    wide = [f for f in frames if f[4] >= 8]
    picks = [f for f in wide if f[1] == 0] + wide[:: max(1, len(wide) // 12)]
    # 1 px below a frame's top edge, at its middle: inside the rect, above any glyph
    points = [[int(x + fw / 2), int(y) + 1] for _, _, x, y, fw, _ in picks]
    page = tmp_path / "img.html"
    data = base64.b64encode(svg.read_bytes()).decode()
    page.write_text(f'<!doctype html><body style="margin:0"><img src="data:image/svg+xml;base64,{data}">')
    b = browser
    b.open(page, 1366, 768, ready=False)
    sources = {"img": f"data:image/svg+xml;base64,{data}"}
    if shutil.which("rsvg-convert"):
        png = tmp_path / f"{svg.stem}.rsvg.png"
        r = subprocess.run(["rsvg-convert", str(svg), "-o", str(png)], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        sources["rsvg-convert"] = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    for viewer, src in sources.items():
        got = b.eval(PIXELS, {"src": src, "points": points})
        assert (got["w"], got["h"]) == (w, h), (viewer, got["w"], got["h"])
        for f, px in zip(picks, got["px"]):
            assert all(abs(a - e) <= 2 for a, e in zip(px, f[5])), (viewer, f[0], f[1], px, f[5])
    b.shot(tmp_path / f"{svg.stem}-img.png")
    log = b.log()
    assert log["console_errors"] == [] and log["page_errors"] == [] and log["requests"] == [], log
