# SPDX-License-Identifier: MIT
# Fuzz targets (tests/fuzz): libFuzzer with ASan+UBSan, one binary per reader of untrusted input,
# built by clang in their own tree (build/fuzz, VARIANT=fuzz), so the normal build is untouched.
#   make fuzz            runs each target for FUZZ_SECONDS (corpus kept in build/fuzz/corpus/)
#   make fuzz-check      replays the seeds and past crashes, then fuzzes each for FUZZ_SMOKE_SECONDS
#                        (part of `make test`)
#   make py-seeds        records the CPython target's seeds from the installed pyenv CPythons
# Seeds: tests/fixtures/fuzz/<target>/; inputs that once crashed: tests/fixtures/fuzz/crashes/<target>/.

FUZZ_TARGETS := pyrs folded symbol python maps stat schedstat syscall status
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 1

# (CFLAGS_fuzz and LDFLAGS_fuzz are set in the Makefile, before CFLAGS is.)
FUZZ_BINS := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
FUZZ_COMMON := $(BUILD)/tests/fuzz/fuzz_common.o

$(BUILD)/fuzz/fuzz_python: $(BUILD)/tests/fuzz/py_mem.o
$(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_COMMON) $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o,$^) $(BUILD)/libpyrsprof.a $(LDLIBS)

# the seed recorder of the CPython target, built with the normal flags
$(BUILD)/tools/py_seed: $(BUILD)/tests/fuzz/py_seed.o $(BUILD)/tests/fuzz/py_mem.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libpyrsprof.a $(LDLIBS)

.PHONY: fuzz fuzz-check fuzz-bins py-seeds
fuzz-bins: $(FUZZ_BINS)

fuzz:
	$(Q)$(MAKE) --no-print-directory VARIANT=fuzz CC=$(FUZZ_CC) fuzz-bins
	$(Q)bash scripts/fuzz.sh run build/fuzz/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-check:
	$(Q)$(MAKE) --no-print-directory VARIANT=fuzz CC=$(FUZZ_CC) fuzz-bins
	$(Q)bash scripts/fuzz.sh check build/fuzz/fuzz $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

py-seeds: $(BUILD)/tools/py_seed
	$(Q)bash tests/fuzz/record-py-seeds.sh $(BUILD)/tools/py_seed tests/fixtures/fuzz/python
