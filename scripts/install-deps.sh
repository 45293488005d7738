#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages pyrsprof builds and tests with (see ../shared/DESIGN.md).
# Idempotent: packages already present are left alone; prints what it installs.
set -euo pipefail

pkgs=(
  build-essential pkg-config
  libdw-dev libelf-dev elfutils      # CFI unwinding, DWARF lines and inlines; eu-stack as an oracle
  libdebuginfod-dev                  # debuginfod client's header (the library is dlopen'd when used)
  debuginfod xz-utils dwz            # tests: a debuginfod server on loopback; MiniDebugInfo; dwz files
  libunwind-dev                      # benchmarks only: unwind_bench, unwind_handler_bench (comparisons)
  libzstd-dev                        # profile.pyrs stream
  zstd                               # tests: the e2e tests read profile.pyrs's records (pyrs_acct.py)
  libiberty-dev                      # Rust (legacy, v0) and C++ demangling
  zlib1g-dev                         # gzip'd pprof
  libprotobuf-c-dev protobuf-c-compiler
  golang-github-google-pprof-dev     # pprof's own profile.proto, compiled with protoc-c (mk/pprof.mk)
  libjansson-dev                     # JSON (speedscope, phase reports)
  libcriterion-dev                   # C unit tests
  clang-14 libclang-rt-14-dev        # fuzz targets: libFuzzer, ASan, UBSan (mk/fuzz.mk)
  python3 python3-pytest             # end-to-end tests (Debian's python3)
  python3-numpy                      # e2e: NumPy page zeroing shows as kernel frames under its line
  python3-pytest-rerunfailures       # e2e: a sampling test that failed is run once more (2-CPU VM noise)
  golang-go                          # go tool pprof reads our pprof in tests
  chromium                           # browser checks of the SVGs
  librsvg2-bin                       # rsvg-convert: the SVGs drawn by a viewer without script
  nodejs                             # playwright-core (npm) drives chromium
  gdb
  tmux                               # `top` driven in a terminal: send-keys, capture-pane
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to apt-get install; run: sudo $0" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

# npm pieces, each folder pinning its own package-lock.json: tests/schema (the speedscope file-format
# schema and ajv, for the speedscope export tests) and tests/browser (playwright-core, which drives
# Debian's chromium in the flame graph tests). Installed when missing or older than the lock file.
here="$(cd "$(dirname "$0")/.." && pwd)"
for d in tests/schema tests/browser; do
  lock="$here/$d/package-lock.json"
  stamp="$here/$d/node_modules/.package-lock.json"
  [ -f "$lock" ] || continue
  if ! command -v npm >/dev/null; then
    echo "install-deps: npm is missing: cannot install $d (its tests will skip)" >&2
    continue
  fi
  if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
    echo "install-deps: npm ci in $d"
    (cd "$here/$d" && npm ci --no-audit --no-fund --silent >/dev/null)
  fi
done
