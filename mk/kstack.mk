# SPDX-License-Identifier: MIT
# bench/kcost: what each per-thread perf event of the classifier's collection (kernel stacks,
# switch records, the task-clock counter) costs the thread, measured within one process
# (tests/bench/kcost.c; bench_classify.py prints it beside the runs of pyrsprof).

$(BUILD)/bench/kcost: $(BUILD)/tests/bench/kcost.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

bench: $(BUILD)/bench/kcost
