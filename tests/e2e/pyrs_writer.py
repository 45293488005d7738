# SPDX-License-Identifier: MIT
"""A writer of constructed profile.pyrs files (docs/pyrs-format.md, version 1) for the e2e tests,
so that a test can give `pyrsprof` a recording whose content is known exactly: Python frames with
files and lines, one sample per tick at a chosen rate, the duration. Python has no zstd
compressor here, so the stream is one zstd frame of raw (stored) blocks (RFC 8878 3.1.1.2: block
type 0), which every zstd decoder reads.

    p = Profile(rate_hz=100, command="python3 app.py")
    p.add(["main (app.py:1)", "work (app.py:10)"], 150)   # 150 ticks of this stack
    p.write(path)
"""

import re
import struct

RUNNING, BLOCKED = 0, 1
KIND_PYTHON = 4
FRAME_RE = re.compile(r"^(.*) \((.*):(\d+)\)$")


def uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb(v):
    return uleb((v << 1) ^ (v >> 63) if v >= 0 else ((v << 1) ^ -1) & (2**64 - 1))


def zstd_stored(data):
    """One zstd frame holding data in raw blocks (no compression, no checksum)."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0xE0)  # 8-byte content size, single segment (the window is the content size)
    out += struct.pack("<Q", len(data))
    blocks = [data[i:i + 65536] for i in range(0, len(data), 65536)] or [b""]
    for i, b in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        out += struct.pack("<I", last | (0 << 1) | (len(b) << 3))[:3]
        out += b
    return bytes(out)


class Profile:
    """A recording of one thread (tid 1000) at rate_hz: each added tick is one sample, 1/rate_hz
    apart; duration_s is the ticks over the rate unless given."""

    def __init__(self, rate_hz, command="python3 app.py", duration_s=None):
        self.rate_hz = rate_hz
        self.command = command
        self.duration_s = duration_s
        self.ticks = []  # (frames root first, state, syscall)

    def add(self, frames, n, state=RUNNING, syscall=-1):
        """n ticks of the stack frames (root first; "name (file:line)" or a bare name)."""
        self.ticks += [(tuple(frames), state, syscall)] * n
        return self

    def encode(self):
        recs = bytearray()
        strings, frames, stacks = {"": 0}, {}, {(): 0}
        counts = {"samples": 0, "meta": 0}

        def rec(t, payload):
            recs.extend(bytes([t]) + uleb(len(payload)) + payload)

        def s(text):
            if text not in strings:
                strings[text] = len(strings)
                rec(1, text.encode())
            return strings[text]

        def frame(text):
            m = FRAME_RE.match(text)
            name, file, line = (m.group(1), m.group(2), int(m.group(3))) if m else (text, "", 0)
            key = (name, file, line)
            if key not in frames:
                n, f = s(name), s(file)
                frames[key] = len(frames)
                rec(3, uleb(0) + uleb(KIND_PYTHON) + uleb(0) + uleb(0) + uleb(n) + uleb(f) + uleb(line))
            return frames[key]

        def stack(fr):
            if fr not in stacks:
                parent = stack(fr[:-1])
                leaf = frame(fr[-1])
                stacks[fr] = len(stacks)
                rec(4, uleb(parent) + uleb(leaf))
            return stacks[fr]

        def meta(k, v):
            kk, vv = s(k), s(v)
            rec(7, uleb(kk) + uleb(vv))
            counts["meta"] += 1

        period_ns = round(1e9 / self.rate_hz)
        duration = self.duration_s if self.duration_s is not None else len(self.ticks) / self.rate_hz
        tname = s("MainThread")
        rec(6, sleb(1000) + uleb(tname))
        meta("command", self.command)
        meta("rate_hz", f"{self.rate_hz:g}")
        meta("duration_s", f"{duration:.9g}")
        meta("mode", "run")
        for i, (fr, state, sc) in enumerate(self.ticks):
            st = stack(fr)
            rec(5, sleb(1000) + sleb(period_ns if i else 0) + uleb(state) + uleb(sc + 1) + uleb(st) + uleb(1))
            counts["samples"] += 1
        rec(9, b"".join(uleb(v) for v in (len(strings), 0, len(frames), len(stacks),
                                          counts["samples"], 1, counts["meta"], 0)))
        return b"PYRSPROF" + struct.pack("<II", 1, 0) + zstd_stored(bytes(recs))

    def write(self, path):
        path.write_bytes(self.encode())
        return path
