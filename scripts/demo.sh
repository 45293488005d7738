#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make demo`: profile the bundled Rust target (tests/targets/cpu_split_rs.rs: two hot functions,
# 70/30, one with an inlined helper) with bin/pyrsprof for 3 s, then print where the flame graphs
# and the hot frames are. Run after `make all targets` (make demo does both).
set -euo pipefail

cd "$(dirname "$0")/.."
prs=${PYRSPROF:-bin/pyrsprof}
target=build/targets/cpu_split_rs
out=${DEMO_DIR:-build/demo}

for f in "$prs" "$target"; do
  if [ ! -x "$f" ]; then
    echo "demo: $f is missing: run \`make all targets\` first" >&2
    exit 1
  fi
done

rm -rf "$out"
echo "demo: $prs run -r 200 -o $out -- $target 3"
"$prs" run -r 200 -o "$out" -- "$target" 3

echo
echo "demo: hottest stacks (CPU view, innermost 4 frames):"
"$prs" export "$out/profile.pyrs" --format folded |
  awk '{ n = $NF; $NF = ""; sub(/ $/, ""); k = split($0, f, ";"); s = (k > 4 ? "...;" : "")
         for (i = (k > 4 ? k - 3 : 1); i <= k; i++) s = s f[i] (i < k ? ";" : "")
         print n "\t" s }' | sort -rn |
  awk -F'\t' 'NR <= 5 { printf "  %6d  %s\n", $1, $2 }'

echo
echo "demo: open these in a browser (interactive: click to zoom, Ctrl-F to search):"
for f in cpu.svg wall.svg; do
  echo "  file://$(realpath "$out/$f")"
done
echo "  profile: $(realpath "$out/profile.pyrs")   stats: $(realpath "$out/stats.json")"
