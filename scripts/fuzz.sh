#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the fuzz targets (mk/fuzz.mk). Usage:
#   fuzz.sh check BINDIR SECONDS TARGET...  replay every seed and past crash, then fuzz each target
#                                           SECONDS on a scratch corpus (what `make test` runs)
#   fuzz.sh run BINDIR SECONDS TARGET...    fuzz each target SECONDS in turn, niced, keeping its
#                                           corpus in build/fuzz/corpus/TARGET (what `make fuzz` runs)
# A finding (crash, sanitizer report, leak, timeout, out-of-memory) stops with a non-zero exit and
# leaves the input in build/fuzz/artifacts/TARGET/; add it to tests/fixtures/fuzz/crashes/TARGET/
# once fixed, so that every later `make test` replays it.
set -uo pipefail

mode=$1 bindir=$2 secs=$3
shift 3
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
seeds=tests/fixtures/fuzz
work=build/fuzz
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# one input may take at most 10 s and 2 GiB: more is a finding (a hang, or memory from a claimed size)
opts=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1)

fail=0
for t in "$@"; do
  bin=$bindir/fuzz_$t
  mkdir -p "$work/artifacts/$t" "$seeds/$t"
  dirs=("$seeds/$t")
  [ -d "$seeds/crashes/$t" ] && dirs+=("$seeds/crashes/$t")
  case $mode in
    check)
      scratch=$work/smoke/$t
      rm -rf "$scratch" && mkdir -p "$scratch"
      log=$work/smoke/$t.log
      if "$bin" "${opts[@]}" -max_total_time="$secs" -artifact_prefix="$work/artifacts/$t/" \
           "$scratch" "${dirs[@]}" >"$log" 2>&1; then
        printf '  %-10s %s\n' "$t" "$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$') runs, ok"
      else
        echo "fuzz: $t failed (log: $log; input in $work/artifacts/$t/):" >&2
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 >&2
        fail=1
      fi
      ;;
    run)
      corpus=$work/corpus/$t
      mkdir -p "$corpus"
      log=$work/$t.$(date +%Y%m%d-%H%M%S).log
      echo "fuzz: $t for $secs s (log: $log)"
      if ! nice -n 15 "$bin" "${opts[@]}" -max_total_time="$secs" \
           -artifact_prefix="$work/artifacts/$t/" "$corpus" "${dirs[@]}" >"$log" 2>&1; then
        echo "fuzz: $t found something (log: $log; input in $work/artifacts/$t/):" >&2
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 >&2
        fail=1
      fi
      grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" | sed "s/^/  $t /"
      ;;
    *) echo "usage: fuzz.sh check|run BINDIR SECONDS TARGET..." >&2; exit 2 ;;
  esac
done
exit $fail
