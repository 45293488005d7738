# SPDX-License-Identifier: MIT
# `pyrsprof top`'s table (src/cli/top_table.c) depends only on the profile model: the unit tests
# link it (tests/unit/test_top_table.c).
UNIT_CLI_OBJS += $(BUILD)/src/cli/top_table.o
