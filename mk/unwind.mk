# SPDX-License-Identifier: MIT
# h-unwind: unwinder test targets (C chain, Rust recursion) and the unwind benchmark.
# The unit tests find the targets in $(BUILD)/tests/unwind/ (or $PRS_UNWIND_TARGETS).
UNWIND_TDIR := $(BUILD)/tests/unwind
UNWIND_TARGETS := $(UNWIND_TDIR)/chain $(UNWIND_TDIR)/rec

$(UNWIND_TDIR)/chain: tests/fixtures/unwind/chain.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -O2 -g -fomit-frame-pointer -o $@ $<

$(UNWIND_TDIR)/rec: tests/fixtures/unwind/rec.rs
	@mkdir -p $(dir $@)
	$(call say,RUSTC,$<)$(RUSTC) -O -g --edition 2021 -o $@ $<

$(BUILD)/unit-tests: $(UNWIND_TARGETS)
unwind-targets: $(UNWIND_TARGETS)

$(BUILD)/bench/unwind_bench: $(BUILD)/tests/bench/unwind_bench.o $(BUILD)/tests/fixtures/unwind/harness.o $(BUILD)/libpyrsprof.a $(UNWIND_TARGETS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libpyrsprof.a $(LDLIBS) -lunwind-ptrace -lunwind-generic -lunwind

.PHONY: unwind-targets

# The harness (spawn a target, ptrace samples, eu-stack as the oracle) is linked into the unit tests.
UNIT_SRCS += tests/fixtures/unwind/harness.c

# Records tests/fixtures/unwind/<name>/ from a live target (see capture.c).
$(UNWIND_TDIR)/capture: $(BUILD)/tests/fixtures/unwind/capture.o $(BUILD)/tests/fixtures/unwind/harness.o
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^

# `make BUILD=build/me unwind-bench` builds and runs the unwind benchmark (prints the tables).
unwind-bench: $(BUILD)/bench/unwind_bench
	$(Q)$(BUILD)/bench/unwind_bench $(UNWIND_BENCH_SAMPLES)
.PHONY: unwind-bench
