# SPDX-License-Identifier: MIT
"""`pyrsprof export FILE --format speedscope`: the JSON validates against the file-format schema
that the speedscope npm package ships (checked with ajv, driven by node: tests/schema), and it
holds the same samples as the folded export of the same profile (an independent code path), one
profile per thread, named by the thread ids and names the target prints about itself."""

import json
from collections import Counter

import pytest

from conftest import assert_clean, thread_tids, total



@pytest.fixture(scope="module")
def export_ss(run_prs):
    """export_ss(src, out, view) -> the parsed JSON; skips if the CLI lacks the format."""
    def export(src, out, view="cpu"):
        res = run_prs(["export", src, "--format", "speedscope", "--view", view, "-o", out],
                      timeout=120)
        if res.rc != 0 and "unknown format" in res.err:
            pytest.skip("`pyrsprof export --format speedscope` is not wired into the CLI yet")
        assert_clean(res)
        assert res.rc == 0, res.describe()
        return json.loads(out.read_bytes())
    return export


@pytest.fixture(scope="module")
def cpu_rec(record):
    return record("cpu_split", 1.5, rate=200)


@pytest.fixture(scope="module")
def blocked_rec(record):
    return record("blocked", 1.5, rate=100)


def ss_stacks(doc):
    """Counter of (profile name, stack names root first) -> total weight."""
    frames = doc["shared"]["frames"]
    out = Counter()
    for p in doc["profiles"]:
        for s, w in zip(p["samples"], p["weights"]):
            out[(p["name"], tuple(frames[i]["name"] for i in s))] += w
    return out


def folded_leaves(records):
    """Counter of leaf frame name -> samples, kernel marks dropped."""
    c = Counter()
    for frames, n in records:
        c[frames[-1].name.removesuffix("_[k]")] += n
    return c


def test_validator_is_not_vacuous(validate, tmp_path):
    """The validator rejects what the schema forbids, and a frame index out of range."""
    bad1 = tmp_path / "no_schema.json"
    bad1.write_text(json.dumps({"profiles": [], "shared": {"frames": []}}))
    bad2 = tmp_path / "bad_index.json"
    bad2.write_text(json.dumps({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": "a"}]},
        "profiles": [{"type": "sampled", "name": "t", "unit": "none", "startValue": 0,
                      "endValue": 1, "samples": [[0, 1]], "weights": [1]}]}))
    bad3 = tmp_path / "bad_unit.json"
    bad3.write_text(json.dumps({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": "a"}]},
        "profiles": [{"type": "sampled", "name": "t", "unit": "parsecs", "startValue": 0,
                      "endValue": 1, "samples": [[0]], "weights": [1]}]}))
    good = tmp_path / "good.json"
    good.write_text(json.dumps({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": "a"}]},
        "profiles": [{"type": "sampled", "name": "t", "unit": "none", "startValue": 0,
                      "endValue": 1, "samples": [[0]], "weights": [1]}]}))
    for bad in (bad1, bad2, bad3):
        r = validate(bad)
        assert r.returncode == 1, f"{bad.name} passed validation: {r.stderr}"
    r = validate(good)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("view", ["cpu", "wall"])
def test_speedscope_valid_and_equal_to_folded(validate, export_ss, export_folded, cpu_rec,
                                              tmp_path, view):
    out = tmp_path / f"{view}.speedscope.json"
    doc = export_ss(cpu_rec.pyrs, out, view)
    r = validate(out)
    assert r.returncode == 0, f"schema validation failed:\n{r.stderr}"
    assert doc["exporter"] == "pyrsprof"
    assert "cpu_split" in doc["name"]       # the command
    prof = doc["profiles"]
    assert len(prof) >= 1
    assert all(p["unit"] == "nanoseconds" for p in prof)
    period = 1e9 / 200
    folded = export_folded(cpu_rec.pyrs, view=view, lines=False)
    n_ss = sum(sum(p["weights"]) for p in prof) / period
    assert round(n_ss) == total(folded), (n_ss, total(folded))
    for p in prof:
        assert abs(p["endValue"] - sum(p["weights"])) < 1e-3 * max(1, p["endValue"])
    # the same samples per leaf function as the folded export
    leaves = Counter()
    for (_, stack), w in ss_stacks(doc).items():
        leaves[stack[-1]] += w / period
    assert {k: round(v) for k, v in leaves.items()} == dict(folded_leaves(folded))
    # and the known truth of the target: hot_a (70 % by design) outweighs hot_b
    def on_stack(name):
        return sum(w for (_, s), w in ss_stacks(doc).items() if name in s)
    assert on_stack("hot_a") > on_stack("hot_b") > 0


def test_speedscope_one_profile_per_thread(validate, export_ss, export_folded, blocked_rec,
                                           tmp_path):
    out = tmp_path / "wall.json"
    doc = export_ss(blocked_rec.pyrs, out, "wall")
    r = validate(out)
    assert r.returncode == 0, r.stderr
    tids = thread_tids(blocked_rec.res.out)           # {"sleeper": tid, "reader": tid}
    names = [p["name"] for p in doc["profiles"]]
    for name, tid in tids.items():
        assert f"thread {tid} ({name})" in names, names
    assert len(names) == len(set(names))
    # the reader thread is blocked in read(): its profile's leaves are mostly "[read]"
    frames = doc["shared"]["frames"]
    reader = next(p for p in doc["profiles"] if p["name"] == f"thread {tids['reader']} (reader)")
    in_read = sum(w for s, w in zip(reader["samples"], reader["weights"])
                  if frames[s[-1]]["name"] == "[read]")
    assert in_read > 0.8 * sum(reader["weights"])
    # per-thread totals agree with the per-thread folded export
    folded = export_folded(blocked_rec.pyrs, view="wall", lines=False, per_thread=True)
    per_thread = Counter()
    for frames_, n in folded:
        per_thread[frames_[0].name] += n
    for p in doc["profiles"]:
        assert round(sum(p["weights"]) / 1e7) == per_thread[p["name"]], (p["name"], per_thread)


def test_speedscope_hostile_names(validate, export_ss, tmp_path):
    """Names with invalid UTF-8, quotes, backslashes and markup still give valid JSON."""
    src = tmp_path / "hostile.folded"
    src.write_bytes(b'main;bad\xff\xfename;"quoted" \\back\\ <script>x</script> 7\n'
                    b'main;caf\xc3\xa9 3\n')
    out = tmp_path / "h.json"
    doc = export_ss(src, out)
    r = validate(out)
    assert r.returncode == 0, r.stderr
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert "bad\ufffd\ufffdname" in names
    assert '"quoted" \\back\\ <script>x</script>' in names
    assert "caf\u00e9" in names
    assert doc["profiles"][0]["unit"] == "none"          # folded input: counts, no rate
    assert sum(doc["profiles"][0]["weights"]) == 10
