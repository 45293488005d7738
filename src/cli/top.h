/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof top`: the live table of what a program runs, function by function (or line by line),
 * as py-spy's top shows it. top_table.c sums the samples a profile gains into the table and
 * writes it as text; top.c runs the sampler, the terminal and the keys.
 */
#ifndef PYRSPROF_CLI_TOP_H
#define PYRSPROF_CLI_TOP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"

/* The sort columns, as keys 1-4 choose them. */
enum cli_top_sort { TOP_SORT_OWN_PCT, TOP_SORT_TOTAL_PCT, TOP_SORT_OWN_TIME, TOP_SORT_TOTAL_TIME };

/* Which samples the table counts. */
struct cli_top_filter {
	int32_t pid;      /* only this process (0: all) */
	int32_t tid;      /* only this thread (0: all) */
	int32_t root_pid; /* the process of samples recorded with pid 0 (one process) */
	bool idle;        /* also the samples of threads that were not running */
	bool gil;         /* only the samples of threads holding the GIL */
	bool native;      /* every frame; otherwise Python frames where a stack has any (py-spy's) */
};

/* One row: a function (name, file) or a line (name, file, line). */
struct cli_top_row {
	uint32_t frame;            /* a frame of the profile it stands for (its label) */
	uint32_t stamp;            /* the last sample that counted it in total (once per sample) */
	uint64_t own_now, total_now; /* samples since the last refresh */
	uint64_t own, total;       /* samples since the start or the last reset */
};

struct cli_top_rows {
	struct cli_top_row *v;
	size_t n, cap;
	struct prs_map64 index; /* key -> row */
};

struct cli_top_table {
	struct cli_top_filter filter;
	struct cli_top_rows rows[2]; /* [0] functions, [1] lines: both kept, so L switches at once */
	size_t next;                 /* the first sample of the profile not summed yet */
	uint32_t stamp;
	/* since the last refresh: samples counted, holding the GIL, waiting for it, running */
	uint64_t now, now_gil, now_gil_wait, now_active;
	uint64_t total;              /* samples counted since the start or the last reset */
	uint32_t frames[PRS_MAX_STACK_FRAMES];
};

void cli_top_table_init(struct cli_top_table *t, const struct cli_top_filter *f);
void cli_top_table_release(struct cli_top_table *t);

/* Sums the samples p gained since the last call (only those) into the table, after the counts
 * "since the last refresh" are cleared. Returns 0 or -ENOMEM. */
int cli_top_table_add(struct cli_top_table *t, const struct prs_profile *p);

/* Clears every count (key R); samples already summed are not summed again. */
void cli_top_table_reset(struct cli_top_table *t);

struct cli_top_view {
	enum cli_top_sort sort;
	bool reverse;   /* ascending */
	bool lines;     /* a row per line rather than per function */
	double rate_hz; /* samples per second per thread: a sample stands for 1/rate_hz s */
	int rows;       /* at most this many rows (0: all) */
	int width;      /* cut lines to this many columns (0: no cut) */
	const char *eol; /* written at the end of each line ("\n", or "\033[K\n" on a terminal) */
	bool cumulative; /* %Own and %Total of every sample since the start (the last table) */
};

/* Writes the column heads and the rows, sorted, to f. Names are printed with their control
 * characters replaced (they come from the target). */
void cli_top_table_write(struct cli_top_table *t, const struct prs_profile *p, const struct cli_top_view *v,
			 FILE *f);

#endif
