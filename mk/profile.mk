# SPDX-License-Identifier: MIT
# The profile model's benchmarks (owner: h-profile): bench/profile_bench prints a table of the
# hot-path cost (stack intern + sample on a warm 30-deep stack) and of recorder flush / reader
# throughput; bench/view_bench the time of each consumer (view, exports, flame graph, diff) on a
# large recording-shaped profile. Built by `make bench` (or `make profile-bench`).

$(BUILD)/bench/profile_bench: $(BUILD)/tests/bench/profile_bench.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

$(BUILD)/bench/view_bench: $(BUILD)/tests/bench/view_bench.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

.PHONY: profile-bench
profile-bench: $(BUILD)/bench/profile_bench $(BUILD)/bench/view_bench
bench: $(BUILD)/bench/profile_bench $(BUILD)/bench/view_bench

# `pyrs_size FILE.pyrs...`: bytes per sample of profile.pyrs as the sampler writes it (flushed
# every second), for comparing writers on the same recordings.
$(BUILD)/bench/pyrs_size: $(BUILD)/tests/bench/pyrs_size.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

# bench/long_bench: a 10-minute, 50-thread, 100 Hz recording driven through the model and the
# recorder with synthetic samples: RSS per minute, bytes per sample, the end of the recording.
$(BUILD)/bench/long_bench: $(BUILD)/tests/bench/long_bench.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

profile-bench: $(BUILD)/bench/long_bench
bench: $(BUILD)/bench/long_bench
