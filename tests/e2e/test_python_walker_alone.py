# SPDX-License-Identifier: MIT
"""The CPython frame walker can be linked where nothing else of pyrsprof can (the LD_PRELOAD
agent links only src/util and its own code): its objects, and those of the str and line-table
decoders it may run with, need no symbol from outside the C library's mem* functions (nor from
anything of pyrsprof: no profile, libelf, /proc readers or allocation). Checked with nm -u on the
objects of the build that made $PYRSPROF."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

OBJS = ["src/python/walk.o", "src/python/str.o", "src/python/linetable.o"]
LIBC = {"memcpy", "memset", "memcmp"}
SANITIZERS = ("__asan_", "__ubsan_", "__sanitizer_")


def build_dir():
    prs = os.environ.get("PYRSPROF")
    return Path(prs).resolve().parent if prs else None


@pytest.mark.parametrize("obj", OBJS)
def test_walker_objects_need_nothing_but_libc_mem(obj):
    d = build_dir()
    if d is None or not (d / obj).exists():
        pytest.skip("no object %s next to $PYRSPROF" % obj)
    if not shutil.which("nm"):
        pytest.skip("nm is not installed")
    out = subprocess.run(["nm", "-u", str(d / obj)], capture_output=True, text=True, check=True).stdout
    undefined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    foreign = sorted(s for s in undefined if s not in LIBC and not s.startswith(SANITIZERS))
    assert not foreign, "%s needs %s" % (obj, foreign)
