#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Records the CPython fuzz target's seeds (`make py-seeds`): for each installed pyenv CPython 3.x
# and Debian's python3, starts tests/fuzz/py_seed_target.py (named threads, a few frames deep,
# one of them in a C call), records what the reader reads of it (py_seed), and stops it.
# Usage: record-py-seeds.sh PY_SEED OUTDIR
set -euo pipefail
seed=$1 out=$2
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
pythons=()
for v in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.*; do
  [ -x "$v/bin/python3" ] && pythons+=("$v/bin/python3")
done
[ -x /usr/bin/python3 ] && pythons+=(/usr/bin/python3)
for py in "${pythons[@]}"; do
  ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  name=cpython-$ver
  [ "$py" = /usr/bin/python3 ] && name=debian-python$ver
  "$py" "$here/py_seed_target.py" &
  pid=$!
  sleep 1.5
  "$seed" "$pid" "$out/$name.bin" || echo "record-py-seeds: $py: failed" >&2
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
ls -l "$out"
