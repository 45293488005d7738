/* SPDX-License-Identifier: MIT */
/* The subcommands' shared pieces (src/cli/cli.c): messages made safe for the terminal. */
#include <criterion/criterion.h>
#include <string.h>

#include "cli/cli.h"

/* A hot spot's name from the target (a co_name set with code.replace()) reaches the summary:
 * no escape sequence, line end or C1 control may reach the terminal; other UTF-8 is kept. */
Test(cli, messages_are_one_safe_terminal_line)
{
	char s[] = "evil\x1b[31mRED\x1b[0m\xe2\x80\xa8next\nline\r\ttab\x7f\x07 csi\xc2\x9b" "2J caf\xc3\xa9 \xc2\xa0";

	cli_text_clean(s);
	cr_assert_str_eq(s, "evil?[31mRED?[0m\xe2\x80\xa8next line  tab?? csi?2J caf\xc3\xa9 \xc2\xa0");
}

/* dump and top show target text through the same test: C0 (not NUL), DEL and C1 in UTF-8
 * are controls; other multi-byte characters are not. */
Test(cli, control_characters_by_length)
{
	cr_assert_eq(cli_control_len("\x1b["), 1);
	cr_assert_eq(cli_control_len("\x7f"), 1);
	cr_assert_eq(cli_control_len("\xc2\x9b" "2J"), 2);
	cr_assert_eq(cli_control_len("\xc2\x85"), 2);
	cr_assert_eq(cli_control_len("\xc2\xa0"), 0);
	cr_assert_eq(cli_control_len("\xc3\xa9"), 0);
	cr_assert_eq(cli_control_len("\xe2\x80\xa8"), 0);
	cr_assert_eq(cli_control_len("a"), 0);
	cr_assert_eq(cli_control_len(""), 0);
}
