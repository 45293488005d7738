# SPDX-License-Identifier: MIT
# h-export: C code for pprof's profile.proto, generated with protoc-c from the copy that Debian's
# golang-github-google-pprof-dev ships (never copied into this repository), into $(GEN):
# $(GEN)/pprof/profile.pb-c.{c,h}, included as "pprof/profile.pb-c.h".

PPROF_PROTO_DIR ?= /usr/share/gocode/src/github.com/google/pprof/proto
PPROF_GEN := $(GEN)/pprof
GEN_SRCS += $(PPROF_GEN)/profile.pb-c.c

$(PPROF_GEN)/profile.pb-c.c $(PPROF_GEN)/profile.pb-c.h: $(PPROF_PROTO_DIR)/profile.proto
	@mkdir -p $(PPROF_GEN)
	$(call say,PROTOC,$@)protoc-c --proto_path=$(PPROF_PROTO_DIR) --c_out=$(PPROF_GEN) $<

# the generated header must exist before the files that include it are compiled
$(BUILD)/src/profile/export_pprof.o $(BUILD)/tests/unit/test_export.o: $(PPROF_GEN)/profile.pb-c.h
