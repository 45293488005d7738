# SPDX-License-Identifier: MIT
"""scripts/demo.sh (`make demo`): profiles the Rust target and prints where the flame graphs
are; the printed files exist and show the Rust hot functions."""

import os
import re
import subprocess
from pathlib import Path

from conftest import REPO


def test_demo_prints_existing_svgs(prs, targets, tmp_path):
    env = dict(os.environ, PYRSPROF=str(prs), DEMO_DIR=str(tmp_path / "demo"))
    p = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], capture_output=True,
                       text=True, timeout=60, env=env, cwd=REPO)
    assert p.returncode == 0, p.stdout + p.stderr
    svgs = re.findall(r"file://(\S+\.svg)", p.stdout)
    assert {Path(s).name for s in svgs} == {"cpu.svg", "wall.svg"}, p.stdout
    for s in svgs:
        assert "cpu_split::hot_a" in Path(s).read_text(), f"{s} lacks cpu_split::hot_a"
    assert "cpu_split::hot_a" in p.stdout, "the hottest stacks were not printed"
