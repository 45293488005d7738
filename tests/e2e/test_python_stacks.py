# SPDX-License-Identifier: MIT
"""
`--stacks python` (the Python stack view, src/profile/view_python.c) on real recordings: a Rust
cdylib called through ctypes (ffi_rust.py) and a two-function split (split.py). Against the
merged view of the same profile: the interpreter's frames (known CPython functions, present in
the merged view) are gone from every stack with a Python frame, the Python line and the
extension's native frames stay in order below it, the sample total is unchanged, the split
between hot_a and hot_b is the same within 1 point; the flame graph honours it; an export format
that does not do it yet refuses it with a one-line error.
"""
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402
from pyrs_testlib import python_or_skip  # noqa: E402
from conftest import assert_clean  # noqa: E402
from test_python_cli import FFI, PARAMS, ffi_rust_recording, python_cli, record_py  # noqa: E402,F401

# CPython's own functions (python executable or libpython, 3.6-3.13), and the libc frames that
# start a process; _ctypes' (PyCFuncPtr_call) are an extension's and stay
INTERP = re.compile(r"^(_Py\w+|Py_\w+|PyEval_\w+|PyObject_\w+|call_function|pymain_\w+|_start|"
                    r"__libc_start\w*)$")


def has_python(frames):
    return any(f.file.endswith(".py") for f in frames if f.file)


@pytest.mark.parametrize("py", PARAMS)
def test_ffi_rust_python_stacks(py, python_cli, shared, run_prs, export_folded, tmp_path_factory):
    exe = python_or_skip(py)
    if not FFI.exists():
        pytest.skip("build/targets/py/libpyrs_ffi.so not built (make targets)")
    # the recording of test_python_cli.py's Rust-through-ctypes test, read in the Python view
    res, pyrs = ffi_rust_recording(shared, run_prs, tmp_path_factory, exe)
    merged = export_folded(pyrs, view="wall", lines=True)
    python = export_folded(pyrs, view="wall", lines=True, stacks="python")
    assert sum(c for _, c in merged) == sum(c for _, c in python) >= 100
    # the merged view has the interpreter's frames (else this test could not fail)
    assert any(INTERP.match(f.name) for fr, _ in merged for f in fr), merged[:3]
    for fr, c in python:
        if has_python(fr):
            # _ctypes is an extension: from its entry down, CPython's header functions inlined
            # into it (Py_XDECREF, _Py_DECREF...) are its own code and kept by the mapping rule
            names = [f.name for f in fr]
            ext = names.index("PyCFuncPtr_call") if "PyCFuncPtr_call" in names else len(names)
            assert not [n for n in names[:ext] if INTERP.match(n)], names
    under = [(fr, c) for fr, c in python if any(f.name == "call_rust" for f in fr)]
    n = sum(c for _, c in under)
    assert n >= 100, python[:5]
    good = 0
    for fr, c in under:
        names = [f.name for f in fr]
        i = names.index("call_rust")
        assert fr[i].line == T.marker_line("ffi_rust.py", "CALL-RUST")
        assert names[i - 1] == "main" and names[i - 2] == "<module>", names
        if "pyrs_ffi::pyrs_spin" in names[i + 1:]:
            j = names.index("pyrs_ffi::pyrs_spin")
            if "pyrs_ffi::hot::mix" in names[j + 1:]:
                good += c
    assert good / n >= 0.8, (good, n, [[f.name for f in fr] for fr, _ in under[:3]])


def test_split_unchanged_and_flamegraph(python_cli, run_prs, export_folded, outdir):
    exe = python_or_skip(T.pyenv_python("3.12") or "/usr/bin/python3")
    res, pyrs = record_py(run_prs, outdir, [exe, T.HERE / "split.py", 3], rate=500)
    shares = []
    for stacks in (None, "python"):
        recs = export_folded(pyrs, view="cpu", lines=False, stacks=stacks)
        a = sum(c for fr, c in recs if any(f.name == "hot_a" for f in fr))
        b = sum(c for fr, c in recs if any(f.name == "hot_b" for f in fr))
        assert a + b >= 200, (a, b)
        shares.append((a / (a + b), sum(c for _, c in recs)))
    assert abs(shares[0][0] - shares[1][0]) <= 0.01, shares
    assert shares[0][1] == shares[1][1], shares
    # the widest interpreter function under a Python line in the merged view, absent from the
    # Python view: in the merged flame graph, not in the Python one
    merged = export_folded(pyrs, view="cpu", lines=False)
    kept = {f.name for fr, _ in export_folded(pyrs, view="cpu", lines=False, stacks="python") for f in fr}
    width = {}
    for fr, c in merged:
        if any(f.name in ("hot_a", "hot_b", "main") for f in fr):
            for name in {f.name for f in fr if INTERP.match(f.name)}:
                width[name] = width.get(name, 0) + c
    assert width, merged[:3]
    widest = max(width, key=width.get)
    assert widest not in kept, widest
    for stacks, want in ((None, True), ("python", False)):
        svg = outdir / ("%s.svg" % stacks)
        r = run_prs(["flamegraph", pyrs, "-o", svg] + (["--stacks", stacks] if stacks else []), timeout=60)
        assert_clean(r)
        assert r.rc == 0, r.describe()
        text = svg.read_text()
        assert "hot_a" in text and "hot_b" in text
        assert (widest in text) == want, (widest, stacks)


def test_stacks_bad_input(run_prs, outdir):
    pyrs = outdir / "x.folded"
    pyrs.write_text("main;work 3\n")
    r = run_prs(["export", pyrs, "--format", "folded", "--stacks", "pythn"], timeout=30)
    assert r.rc == 2 and "--stacks" in r.err and len(r.err.strip().splitlines()) == 1, r.describe()
    # folded input has no mappings: shown as is
    r = run_prs(["export", pyrs, "--format", "folded", "--stacks", "python"], timeout=30)
    assert r.rc == 0 and r.out == "main;work 3\n", r.describe()


def test_run_report_exports_and_dump_in_the_python_view(python_cli, run_prs, export_folded, pprof,
                                                        validate_schema, outdir):
    """run --stacks python draws its graphs and phase 4's hot spots in the Python view and says
    so; report redraws them merged by default (and says that), or in the Python view when asked;
    the exports follow --stacks; dump prints a sorting thread's stack with list_sort's frames
    (merged) or ending in the Python line (Python view)."""
    exe = python_or_skip(T.pyenv_python("3.12") or "/usr/bin/python3")
    d = outdir / "rec"
    res = run_prs(["run", "-r", 500, "-o", d, "--stacks", "python", "--", exe, T.HERE / "native.py", "sort", 1.5],
                  timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert "(graphs: Python view, the interpreter's frames folded into the Python lines)" in res.err, res.err
    # the sorting's own functions (in libpython) are under do_sort's line in the merged view only
    # (those under at least 5 % of the samples: a flame graph leaves out frames too narrow to draw)
    merged = export_folded(d / "profile.pyrs", view="cpu", lines=False)
    weight = {}
    for fr, c in merged:
        if any(f.name == "do_sort" for f in fr):
            for name in {f.name for f in fr} & {"list_sort", "list_sort_impl", "unsafe_float_compare",
                                                 "builtin_sorted"}:
                weight[name] = weight.get(name, 0) + c
    sorting = {n for n, w in weight.items() if w >= 0.05 * sum(c for _, c in merged)}
    assert sorting, merged[:3]

    def graph_is_python_view():
        text = (d / "cpu.svg").read_text()
        assert "do_sort" in text
        shown = [n for n in sorting if n in text]
        assert len(shown) in (0, len(sorting)), (shown, sorting)  # all of them or none
        # phase 4 in the same view: its top CPU function by self is do_sort's line's owner in
        # the Python view, a sorting function in the merged one
        p4 = json.loads((d / "phase4.json").read_text())
        top = p4["views"]["cpu"]["functions"]["by_self"][0]["name"]
        assert p4["stacks"] == ("merged" if shown else "python"), p4["stacks"]
        assert (top == "do_sort") == (not shown) and (top in sorting or not shown), (top, shown)
        assert ("Stacks: the Python view" in (d / "phase4.md").read_text()) == (not shown)
        r = validate_schema("phase4.schema.json", d / "phase4.json")
        assert r.returncode == 0, r.stdout + r.stderr
        return not shown

    assert graph_is_python_view()
    assert "hot (CPU, self): do_sort (native.py)" in res.err, res.err
    for args, said, python in (([], "graphs: merged native + Python stacks", False),
                               (["--stacks", "python"], "graphs: Python view", True)):
        r = run_prs(["report", d, *args], timeout=60)
        assert_clean(r)
        assert r.rc == 0, r.describe()
        assert said in r.err, r.err
        assert graph_is_python_view() == python
    # the speedscope and pprof exports, in both views (speedscope's frame table; pprof's traces
    # as `go tool pprof` reads them)
    for stacks, python in (("merged", False), ("python", True)):
        ss, pb = outdir / f"{stacks}.speedscope.json", outdir / f"{stacks}.pb.gz"
        for fmt, out in (("speedscope", ss), ("pprof", pb)):
            r = run_prs(["export", d, "--format", fmt, "--stacks", stacks, "-o", out], timeout=60)
            assert_clean(r)
            assert r.rc == 0, r.describe()
        names = {f["name"] for f in json.loads(ss.read_text())["shared"]["frames"]}
        traces = pprof("-traces", pb)
        assert "do_sort" in names and "do_sort" in traces
        assert (not (sorting & names)) == python, (stacks, sorting & names)
        assert (not [n for n in sorting if n in traces]) == python, stacks
    t = T.Target(exe, "native.py", "sort", 30)
    try:
        dumps = {}
        for stacks in ("merged", "python"):
            r = run_prs(["dump", "--stacks", stacks, t.pid], timeout=60)
            assert_clean(r)
            assert r.rc == 0, r.describe()
            dumps[stacks] = [l.strip() for l in r.out.splitlines() if l.startswith("    ")]
        # a sampled instant: the thread is in do_sort's sorted() call in each dump (it loops on it)
        # or briefly between calls; the merged one shows native frames, the Python one only lines
        py = dumps["python"]
        assert py and all(re.search(r"\(.*native\.py:\d+\)$", l) for l in py), py
        assert [l.split(" ")[0] for l in py[-2:]] == ["main", "<module>"], py
        assert any(not re.search(r"\.py:\d+\)$", l) for l in dumps["merged"]), dumps
        r = run_prs(["dump", "--stacks", "pyton", t.pid], timeout=30)
        assert r.rc == 2 and "--stacks" in r.err and len(r.err.strip().splitlines()) == 1, r.describe()
    finally:
        t.stop()
