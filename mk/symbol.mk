# SPDX-License-Identifier: MIT
# src/symbol: test programs for the symbolizer's unit tests and its benchmark, built from
# tests/fixtures/symbol into $(BUILD)/symbol. The unit tests find them through the compiled-in
# PRS_SYMBOL_FIXTURES directory (or the environment variable of the same name).

SYM_FIX := $(BUILD)/symbol
SYM_FIX_BINS := $(SYM_FIX)/symtest_c $(SYM_FIX)/symtest_c2 $(SYM_FIX)/symtest_cpp $(SYM_FIX)/symtest_utf8 \
	$(SYM_FIX)/symtest_rs $(SYM_FIX)/symtest_rs_v0

$(SYM_FIX)/symtest_c: tests/fixtures/symbol/symtest.c
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) -O2 -g -o $@ $<

# the same program, rebuilt with different code: another build id (the mismatch test)
$(SYM_FIX)/symtest_c2: tests/fixtures/symbol/symtest.c
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) -O2 -g -DSYMTEST_VARIANT=3 -o $@ $<

$(SYM_FIX)/symtest_utf8: tests/fixtures/symbol/symtest_utf8.c
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) -O2 -g -o $@ $<

$(SYM_FIX)/symtest_cpp: tests/fixtures/symbol/symtest.cpp
	@mkdir -p $(dir $@)
	$(call say,CXX,$@)g++ -O2 -g -o $@ $<

$(SYM_FIX)/symtest_rs: tests/fixtures/symbol/symtest.rs
	@mkdir -p $(dir $@)
	$(call say,RUSTC,$@)$(RUSTC) -O -g --edition 2021 --crate-name symtest -o $@ $<

$(SYM_FIX)/symtest_rs_v0: tests/fixtures/symbol/symtest.rs
	@mkdir -p $(dir $@)
	$(call say,RUSTC,$@)$(RUSTC) -O -g --edition 2021 --crate-name symtest -C symbol-mangling-version=v0 -o $@ $<

$(SYM_FIX)/bench-symbol: tests/fixtures/symbol/bench_symbol.c $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

$(BUILD)/tests/unit/test_symbol.o $(BUILD)/tests/unit/test_symbol_stripped.o \
	$(BUILD)/tests/unit/symbol_fixture.o $(BUILD)/tests/unit/test_demangle.o: \
	CFLAGS += -DPRS_SYMBOL_FIXTURES='"$(abspath $(SYM_FIX))"' \
		-DPRS_SYMBOL_SRC='"$(abspath tests/fixtures/symbol)"'
$(BUILD)/unit-tests: $(SYM_FIX_BINS)

# `make BUILD=... bench-symbol [BENCH_SYMBOL_LIBS="FILE... PROFILE.pyrs..."]` prints a table.
.PHONY: bench-symbol
bench-symbol: $(SYM_FIX)/bench-symbol $(SYM_FIX)/symtest_rs
	$(Q)$(SYM_FIX)/bench-symbol $(SYM_FIX)/symtest_rs $(BENCH_SYMBOL_LIBS)

BENCH_SYMBOL_LIBS ?= $(wildcard $(HOME)/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0) \
	$(wildcard /usr/lib/x86_64-linux-gnu/libc.so.6) $(wildcard /usr/bin/python3.11)
