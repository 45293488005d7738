# SPDX-License-Identifier: MIT
# The flame graph renderer's build pieces (owner: h-flamegraph):
# - tools/embed turns flamegraph/fg.js and fg.css into $(GEN)/fg_assets.c (linked into the library);
# - bench/fg_bench: the render-speed benchmark (200k unique stacks, 2M samples), run by `make bench`.

FG_EMBED := $(BUILD)/tools/embed
FG_ASSETS := flamegraph/fg.js flamegraph/fg.css
GEN_SRCS += $(GEN)/fg_assets.c

$(FG_EMBED): tools/embed.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -std=gnu11 -O2 $(WARN) -Isrc -o $@ $<

$(GEN)/fg_assets.c: $(FG_EMBED) $(FG_ASSETS)
	@mkdir -p $(dir $@)
	$(call say,EMBED,$@)$(FG_EMBED) $@ prs_fg_asset_js flamegraph/fg.js prs_fg_asset_css flamegraph/fg.css

$(BUILD)/bench/fg_bench: $(BUILD)/tests/bench/fg_bench.o $(BUILD)/libpyrsprof.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libpyrsprof.a $(LDLIBS)

.PHONY: fg-bench
fg-bench: $(BUILD)/bench/fg_bench
bench: $(BUILD)/bench/fg_bench

# bench/fg_shapes: `pyrsprof flamegraph` on a generated family of folded inputs (sorted or not,
# 5-200 frames, 1k-1M names, names up to 300 bytes, dominant or flat), wall/CPU/peak RSS per shape
$(BUILD)/bench/fg_shapes: $(BUILD)/tests/bench/fg_shapes.o
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $< -lm

fg-bench: $(BUILD)/bench/fg_shapes
bench: $(BUILD)/bench/fg_shapes
