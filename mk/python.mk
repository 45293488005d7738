# SPDX-License-Identifier: MIT
# src/python: the developer tools tools/pystacks (every thread's Python stack of a PID, by memory
# reads only) and tools/floor (the platform's cost of a sample, for the benchmark), the Rust cdylib called through ctypes by tests/targets/py/ffi_rust.py, and the
# command that regenerates the committed layout table.

PY_TOOLS := $(BUILD)/tools/pystacks $(BUILD)/tools/floor
PY_TARGETS := build/targets/py/libpyrs_ffi.so

# (with the CLI's reading of the PYRSPROF_PY_* variables, src/cli/pyenv.c)
$(BUILD)/tools/pystacks: tools/pystacks.c $(BUILD)/src/cli/pyenv.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/src/cli/pyenv.o $(BUILD)/libpyrsprof.a $(LDLIBS)

# what a sample costs on this machine before reading anything (tests/bench/bench_python.py)
$(BUILD)/tools/floor: tools/floor.c
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

# the reader of an older build against this one's, in one process (tools/reader_ab.c):
#   make reader-ab BASE_LIB=/path/to/old/build/release/libpyrsprof.a
$(BUILD)/tools/reader_ab: tools/reader_ab.c $(BUILD)/libpyrsprof.a $(BASE_LIB)
	@test -n "$(BASE_LIB)" || { echo "reader-ab: BASE_LIB=OLD/libpyrsprof.a is needed"; exit 2; }
	@mkdir -p $(dir $@)
	nm --defined-only -g $(BASE_LIB) 2>/dev/null | awk 'NF == 3 { print $$3 " old_" $$3 }' | sort -u >$@.syms
	objcopy --redefine-syms=$@.syms $(BASE_LIB) $@.old.a
	$(call say,LD,$@)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $@.old.a $(LDLIBS)
.PHONY: reader-ab
reader-ab: $(BUILD)/tools/reader_ab

build/targets/py/libpyrs_ffi.so: tests/targets/py/pyrs_ffi.rs
	@mkdir -p $(dir $@)
	$(call say,RUSTC,$@)$(RUSTC) -C opt-level=1 -g --edition 2021 --crate-type cdylib --crate-name pyrs_ffi -o $@ $<

.PHONY: python-tools python-layouts
python-tools: $(PY_TOOLS) $(PY_TARGETS)
targets: $(PY_TARGETS)
# tests/e2e/test_python_reader.py drives $(BUILD)/tools/pystacks (found next to $PYRSPROF)
e2e: $(PY_TOOLS)

# Regenerates src/python/layouts.gen.c from the installed CPythons' headers (commit the result).
python-layouts:
	sh tools/gen-layouts/gen.sh > src/python/layouts.gen.c

# the unit tests read the line-table fixtures from here (or from $PRS_PY_FIXTURES)
$(BUILD)/tests/unit/test_python_%.o: CFLAGS += -DPRS_PY_FIXTURES='"$(abspath tests/fixtures/python)"'

# Regenerates the line-table fixtures with every installed CPython 3.x (commit the result).
.PHONY: python-fixtures
python-fixtures:
	for v in $$(ls -d $$(pyenv root)/versions/3.*); do $$v/bin/python3 tests/fixtures/python/gen_linetables.py; done

# The thread-name reading benchmark (bench/names_bench), run by `make bench` with the others.
$(BUILD)/bench/names_bench: $(BUILD)/tests/bench/names_bench.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)
bench: $(BUILD)/bench/names_bench $(PY_TOOLS)
