# SPDX-License-Identifier: MIT
"""The accounting records (types 11..19) of a profile.pyrs, read as docs/pyrs-format.md specifies
them (the zstd stream decompressed by the zstd tool), independently of src/classify: a second
consumer of the file, for the tests."""

import subprocess
from pathlib import Path

THREAD = 15
PHASE_START, PHASE_END, PHASE_EXIT = 0, 1, 2
# enum prs_task_field (include/pyrsprof/acct.h)
TASK_MONO_NS, TASK_SOURCE, TASK_CPU_NS, TASK_RUNQ_NS = 0, 1, 2, 3
SRC_PROC, SRC_RUSAGE, SRC_TASKSTATS, SRC_SAMPLER = 1, 2, 3, 4


def uleb(b, off):
    """The ULEB128 at b[off:] (as a protobuf varint): (value, the offset after it)."""
    v = shift = 0
    while True:
        c = b[off]
        off += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, off


def records(pyrs: Path):
    """[(type, phase, id, {field: value}, [strings])] of every accounting record, in file order."""
    raw = Path(pyrs).read_bytes()
    assert raw[:8] == b"PYRSPROF", f"{pyrs} is not a profile"
    data = subprocess.run(["zstd", "-dcq"], input=raw[16:], capture_output=True, check=True).stdout
    out, off = [], 0
    while off < len(data):
        typ = data[off]
        n, off = uleb(data, off + 1)
        p, end = off, off + n
        off = end
        if not 11 <= typ <= 19:
            continue
        phase, p = uleb(data, p)
        zz, p = uleb(data, p)
        have, p = uleb(data, p)
        fields = {}
        for f in range(64):
            if have >> f & 1:
                fields[f], p = uleb(data, p)
        nstr, p = uleb(data, p)
        strs = []
        for _ in range(nstr):
            ln, p = uleb(data, p)
            strs.append(data[p:p + ln].decode())
            p += ln
        out.append((typ, phase, (zz >> 1) ^ -(zz & 1), fields, strs))
    return out
