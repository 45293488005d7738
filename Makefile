# SPDX-License-Identifier: MIT
# pyrsprof: one plain GNU Makefile. `make help` lists the targets.
#
# Objects go to build/$(VARIANT)/ (one tree per flag set), with automatic header dependencies.
# VARIANT=release (default) or asan (ASan + UBSan). Subsystems that generate sources add rules in
# mk/*.mk, which this file includes.

VARIANT ?= release
V ?= 0
WERROR ?= 1
PREFIX ?= /usr/local
# pytest runs under Debian's python3, not pyenv's (which comes first in PATH).
PYTHON ?= /usr/bin/python3

CC ?= cc
# rustc without make's MAKEFLAGS: it would look for a jobserver whose descriptors make passes only
# to recipes marked '+' (under -j, a warning per target: "failed to connect to jobserver").
RUSTC := env -u MAKEFLAGS -u MFLAGS rustc
# BUILD may be overridden so that several people can build one tree at once (make BUILD=build/me).
BUILD ?= build/$(VARIANT)
GEN := $(BUILD)/gen

PKGS := libdw libelf libzstd libunwind-ptrace jansson libprotobuf-c zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
	-Wpointer-arith -Wwrite-strings -Wundef -Wno-missing-field-initializers -Wno-format-truncation
ifeq ($(WERROR),1)
WARN += -Werror
endif
ifeq ($(VARIANT),fuzz)
WARN += -Wno-unknown-warning-option # clang: gcc's -Wno-format-truncation
endif

CFLAGS_release := -O2 -g
CFLAGS_asan := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS_asan := -fsanitize=address,undefined
# the fuzz targets' tree (mk/fuzz.mk), built by clang
CFLAGS_fuzz := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined
LDFLAGS_fuzz := -fsanitize=address,undefined

CFLAGS := -std=gnu11 $(CFLAGS_$(VARIANT)) $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -I$(GEN) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := $(LDFLAGS_$(VARIANT)) $(EXTRA_LDFLAGS)
LDLIBS := $(PKG_LIBS) -liberty -lpthread -lm

ifeq ($(V),0)
Q := @
say = @printf '  %-6s %s\n' $(1) $(2);
else
Q :=
say :=
endif

# Sources: every .c under src/ (but the CLI and the agent) and flamegraph/ goes into the library.
LIB_SRCS := $(filter-out src/cli/% src/agent/%,$(shell find src -name '*.c' | sort)) \
	$(sort $(wildcard flamegraph/*.c))
CLI_SRCS := $(sort $(wildcard src/cli/*.c))
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
GEN_SRCS :=   # appended to by mk/*.mk

-include $(sort $(wildcard mk/*.mk))

LIB_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS)) $(patsubst $(GEN)/%.c,$(GEN)/%.o,$(GEN_SRCS))
CLI_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRCS))
UNIT_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(UNIT_SRCS)) $(UNIT_CLI_OBJS)
LIB := $(BUILD)/libpyrsprof.a
PROG := $(BUILD)/pyrsprof
UNIT := $(BUILD)/unit-tests

.PHONY: all deps test unit e2e asan bench demo clean install check-headers help targets
.DEFAULT_GOAL := all

all: bin/pyrsprof

help:
	@echo "make            build bin/pyrsprof"
	@echo "make deps       install the Debian packages the build and tests need (idempotent)"
	@echo "make test       deps, build, C unit tests, end-to-end tests, fuzz targets briefly (what CI runs)"
	@echo "make asan       the same tests on an ASan+UBSan build"
	@echo "make bench      benchmarks, printed as tables"
	@echo "make fuzz       each fuzz target for FUZZ_SECONDS (default 300) with ASan+UBSan"
	@echo "make demo       profile a bundled Rust program and print where the flame graphs are"
	@echo "make install PREFIX=/usr/local"
	@echo "make clean"

deps:
	$(Q)bash scripts/install-deps.sh

bin/pyrsprof: $(PROG)
	$(Q)mkdir -p bin && cp $< $@

$(PROG): $(CLI_OBJS) $(LIB)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(LIB) $(LDLIBS)

$(LIB): $(LIB_OBJS)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

$(GEN)/%.o: $(GEN)/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -Wno-missing-prototypes -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

$(UNIT): $(UNIT_OBJS) $(LIB)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJS) $(LIB) $(LDLIBS) -lcriterion

# Test targets (programs with known hot spots), built for the e2e tests and benchmarks.
TARGET_DIR := build/targets
C_TARGETS := $(patsubst tests/targets/%.c,$(TARGET_DIR)/%,$(wildcard tests/targets/*.c))
RS_TARGETS := $(patsubst tests/targets/%.rs,$(TARGET_DIR)/%,$(wildcard tests/targets/*.rs))
targets: $(C_TARGETS) $(RS_TARGETS)

$(TARGET_DIR)/%: tests/targets/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -O2 -g -fno-omit-frame-pointer -pthread -o $@ $< -lm

$(TARGET_DIR)/%: tests/targets/%.rs
	@mkdir -p $(dir $@)
	$(call say,RUSTC,$<)$(RUSTC) -O -g --edition 2021 $(RUSTFLAGS_$*) -o $@ $<

unit: $(UNIT)
	$(Q)$(UNIT) --jobs 2

# A failed e2e test is run once more before it counts: sample counts and splits of a 2-CPU VM
# move with the host's load and steal; a test that fails twice fails the suite.
E2E_RERUNS ?= --reruns 1
# The 20 slowest tests are listed at the end: the suite's time is budgeted (make test < 15 min).
e2e: bin/pyrsprof targets
	$(Q)PYRSPROF=$(abspath $(PROG)) $(PYTHON) -m pytest -q -p no:cacheprovider --durations=20 \
		$(E2E_RERUNS) tests/e2e $(PYTEST_ARGS)

# The builds use every CPU (CI runs a plain `make test`); the e2e suite runs one test at a time.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) unit
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) bin/pyrsprof targets $(PY_TOOLS)
	$(Q)$(MAKE) --no-print-directory e2e
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) fuzz-check

# LeakSanitizer reports leaks inside libraries we link (suppressed there); ours fail the run.
ASAN_ENV := ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
asan:
	$(Q)$(ASAN_ENV) $(MAKE) --no-print-directory VARIANT=asan unit
	$(Q)$(ASAN_ENV) $(MAKE) --no-print-directory VARIANT=asan e2e

bench: bin/pyrsprof targets
	$(Q)PYRSPROF=$(abspath $(PROG)) $(PYTHON) tests/bench/run.py $(BENCH_ARGS)

demo: deps
	$(Q)$(MAKE) --no-print-directory all targets
	$(Q)bash scripts/demo.sh

check-headers:
	$(Q)for h in include/pyrsprof/*.h $$(find src -name '*.h'); do \
		printf '#include "%s"\n' "$${h#include/}" | sed 's|"src/|"|' | \
		$(CC) $(CFLAGS) -x c -fsyntax-only - || exit 1; done; echo "headers ok"

install: bin/pyrsprof
	install -D -m 755 bin/pyrsprof $(DESTDIR)$(PREFIX)/bin/pyrsprof

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
