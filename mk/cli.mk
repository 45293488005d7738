# SPDX-License-Identifier: MIT
# The subcommands' shared pieces (src/cli/cli.c: messages, option values, atomic writes) depend
# only on the library: the unit tests link them (tests/unit/test_cli.c).
UNIT_CLI_OBJS += $(BUILD)/src/cli/cli.o
