# SPDX-License-Identifier: MIT
# bench/unwind_handler_bench (issue 12 point 2): copy-in-the-handler vs libunwind's local unwinder
# in the handler, with its helpers in $(BUILD)/bench-uhb/ (not in bench/: run.py runs every
# executable there). The helpers are loaded into targets, so they are built like the agent:
# position-independent, no sanitizers in any variant. Run by `make bench` or `make uhb-bench`.
UHB_DIR := $(BUILD)/bench-uhb
UHB_CFLAGS := -std=gnu11 -O2 -g -fPIC -fno-sanitize=all $(WARN) -D_GNU_SOURCE -Iinclude -Isrc

$(UHB_DIR)/%.o: tests/bench/uhb/%.c tests/bench/uhb/uhb.h
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(UHB_CFLAGS) -c -o $@ $<

$(UHB_DIR)/uhb_preload.so: $(UHB_DIR)/uhb_preload.o $(UHB_DIR)/uhb_handler.o
	$(call say,LD,$@)$(CC) -shared -Wl,-z,defs -o $@ $^ -lunwind -lpthread

$(UHB_DIR)/uhb_dso.so: $(UHB_DIR)/uhb_dso.o
	$(call say,LD,$@)$(CC) -shared -o $@ $^

$(UHB_DIR)/uhb_hazard: $(UHB_DIR)/uhb_hazard.o $(UHB_DIR)/uhb_handler.o
	$(call say,LD,$@)$(CC) -o $@ $^ -lunwind -ldl -lpthread

UHB_HELPERS := $(UHB_DIR)/uhb_preload.so $(UHB_DIR)/uhb_dso.so $(UHB_DIR)/uhb_hazard

$(BUILD)/bench/unwind_handler_bench: $(BUILD)/tests/bench/unwind_handler_bench.o $(BUILD)/libpyrsprof.a \
		$(UHB_HELPERS) $(UNWIND_TARGETS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libpyrsprof.a $(LDLIBS)

bench: $(BUILD)/bench/unwind_handler_bench

# `make uhb-bench [UHB_BENCH_ARGS="samples seconds"]` builds and runs it alone.
uhb-bench: $(BUILD)/bench/unwind_handler_bench
	$(Q)$< $(UHB_BENCH_ARGS)
.PHONY: uhb-bench
