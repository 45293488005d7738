# SPDX-License-Identifier: MIT
# Test targets that need flags other than the Makefile's defaults (owner: h-tests).

# The Rust twin of cpu_split.c: a different file name (build/targets/cpu_split is the C one), but
# the same crate name, so its functions demangle as cpu_split::hot_a.
RUSTFLAGS_cpu_split_rs := --crate-name cpu_split

# The benchmark's 30-frame native stack: CFI-only, as a profiler meets most -O2 code.
$(TARGET_DIR)/deep30: tests/targets/deep30.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -O2 -g -fomit-frame-pointer -pthread -o $@ $< -lm
