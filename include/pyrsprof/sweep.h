/* SPDX-License-Identifier: MIT */
/*
 * The numbers and the files of `pyrsprof sweep`: the empirical scaling of a command along one
 * dimension (the playbook's Phase 3 "sweep the dominating dimension to confirm the scaling", and
 * the "grows?" column of its Phase-1 dimensions table).
 *
 * The command was run at each value of the dimension, `repeat` times, each run recorded by
 * `pyrsprof run` into its own folder (src/cli/sweep.c does that). Per value, the runs that
 * succeeded give a median and a min-max spread of the wall time, the CPU time (user + sys of the
 * process tree) and the peak RSS. The scaling is the least-squares fit of log(time) on log(value)
 * over the fastest run of each value: time = coef * value^exponent, with R^2 of that log-log line.
 * Why the fastest (the playbook's "best of k"): other work on the machine only ever adds time, to
 * CPU time too (a busy hyperthread sibling, steal). Measured on this 2-vCPU VM at load 8: three
 * runs of 11000^2 to 22000^2 steps gave a median-fitted CPU exponent of 2.12, the fastest 1.99.
 *
 * An exponent is named by a common order (O(1), O(sqrt n), O(n), O(n^2), O(n^3)) when it lies
 * within PRS_SWEEP_ORDER_TOL of it and, except for O(1), the fit is good (R^2 >= PRS_SWEEP_MIN_R2,
 * or only two values, which have no R^2); otherwise the exponent is said as it is ("n^1.45").
 * Why 0.1: timing noise of a few percent on a factor-4 range of values moves the slope by about
 * log(1.05)/log(4) = 0.035, so 0.1 leaves room for noise yet keeps n^1.5 from reading as n or n^2.
 *
 * Nothing here is thread-safe on a shared object; nothing allocates except where noted.
 */
#ifndef PYRSPROF_SWEEP_H
#define PYRSPROF_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PRS_SWEEP_VERSION 1      /* "version" of sweep.json (docs/sweep.schema.json) */
#define PRS_SWEEP_MAX_VALUES 64  /* values of one dimension */
#define PRS_SWEEP_MAX_REPEAT 100 /* runs per value */
#define PRS_SWEEP_NAME_MAX 32    /* bytes of a dimension name: [A-Za-z_][A-Za-z0-9_]* */
#define PRS_SWEEP_TEXT_MAX 32    /* bytes of a value's text */
#define PRS_SWEEP_VERDICT_MAX 128
#define PRS_SWEEP_ORDER_TOL 0.1  /* an exponent this close to a common order is named by it */
#define PRS_SWEEP_MIN_R2 0.9     /* a worse fit names no order (but O(1)) */
#define PRS_SWEEP_SHORT_S 0.05   /* a run shorter than this measures start-up as much as work */

/* A least-squares fit of log(y) = log(coef) + exponent * log(x). */
struct prs_fit {
	int status;      /* 0 fitted; -EINVAL fewer than 2 distinct x; -EDOM an x or y <= 0 */
	size_t n;        /* points given */
	size_t distinct; /* distinct x among them */
	double exponent, coef;
	double r2;       /* 1 - SS_res/SS_tot in log space; 1 when every y is equal (an exact fit) */
	bool has_r2;     /* distinct >= 3 (two points always lie on a line) */
};

/*
 * Fits x[i], y[i] (n points) in log-log space. Always fills *f (status says whether it fitted)
 * and returns f->status. Exact on exact power laws up to rounding.
 */
int prs_fit_loglog(const double *x, const double *y, size_t n, struct prs_fit *f);

/*
 * The order of a fit along dimension dim, into buf: "O(n²)", "O(√n)", "O(1)" when named (returns
 * true and sets *nominal, if not NULL, to 2, 0.5, 0...), else the exponent as measured, "n^1.45"
 * (returns false; *nominal = NAN). A fit that failed writes "" and returns false. UTF-8.
 */
bool prs_fit_order(const struct prs_fit *f, const char *dim, char *buf, size_t size, double *nominal);

/*
 * One sentence for a fit of metric ("wall", "CPU") along dim, into buf:
 *   "wall ∝ n^1.98 (R² 0.999): O(n²) along n"
 *   "wall ∝ n^1.45 (R² 0.998): n^1.45 along n, no common order within ±0.1"
 *   "wall ∝ n^1.30 (R² 0.620): poor fit, no order named"
 *   "wall ∝ n^2.01 (2 values, no R²): O(n²) along n"
 *   "wall: no fit (needs 2 distinct values of n, has 1)"
 * Returns buf.
 */
const char *prs_fit_text(const struct prs_fit *f, const char *metric, const char *dim, char *buf,
			 size_t size);

/* Median and range of the figures of the runs that succeeded; n == 0: none. */
struct prs_spread {
	double median, min, max;
	size_t n;
};

/* One run of the command at one value. */
struct prs_sweep_run {
	bool done;     /* the run was carried out (false: not reached, the sweep was interrupted) */
	int status;    /* exit status as a shell gives it (0 ok, 128+N killed by signal N); -1 unknown */
	bool measured; /* the figures below were obtained (the recording and the usage exist) */
	double wall_s; /* the recording's duration: from the exec of the command to its exit */
	double user_s, sys_s; /* CPU of the process tree (the command and what it waited for) */
	uint64_t rss_kb;      /* peak RSS of the largest process of the tree */
	char verdict[PRS_SWEEP_VERDICT_MAX]; /* from the recording's phase1.json; "" without one */
	char problem[128];    /* why a run is not ok ("exit 3", "no stats.json"), "" when ok */
};

/* A run counts when the command exited 0 and its figures were measured. */
bool prs_sweep_run_ok(const struct prs_sweep_run *r);

struct prs_sweep_point {
	double value;
	char text[PRS_SWEEP_TEXT_MAX]; /* what replaced {NAME}: "1000" (integral) or "0.25" */
	struct prs_sweep_run *runs;    /* repeat entries, owned (prs_sweep_release) */
	/* filled by prs_sweep_summarize() */
	size_t ok;                        /* runs that count */
	struct prs_spread wall, cpu, rss_kb;
	const char *verdict; /* most frequent verdict among the runs that count ("" none); borrowed */
};

enum prs_sweep_metric { PRS_SWEEP_WALL, PRS_SWEEP_CPU, PRS_SWEEP_METRICS };

struct prs_sweep {
	char dim[PRS_SWEEP_NAME_MAX + 1];
	const char *const *argv; /* the command with its {NAME} placeholders, NULL-terminated; borrowed */
	double rate_hz;
	size_t repeat;
	struct prs_sweep_point *points; /* ascending values; owned */
	size_t npoints;
	size_t runs_done; /* runs carried out in all (less than npoints * repeat when interrupted) */
	bool interrupted;
	/* the machine: online CPUs and the 1-minute load average before and after (0: unknown) */
	unsigned cpus;
	double load_start, load_end;
	/* filled by prs_sweep_summarize() */
	struct prs_fit fit[PRS_SWEEP_METRICS];
	bool any_verdict; /* some run had a phase1.json */
};

/*
 * Sets up s with npoints points of repeat runs each (every run status -1, not measured). The
 * caller fills dim, argv, rate_hz and each point's value and text. Returns 0 or -ENOMEM/-EINVAL
 * (npoints or repeat out of range); release with prs_sweep_release() in every case.
 */
int prs_sweep_init(struct prs_sweep *s, size_t npoints, size_t repeat);
/* Frees what s owns. */
void prs_sweep_release(struct prs_sweep *s);

/*
 * The folder of run `run` (0-based) of point `point`, relative to the sweep's folder:
 * "n=1000/run1". Returns the length written (snprintf's).
 */
int prs_sweep_run_dir(const struct prs_sweep *s, size_t point, size_t run, char *buf, size_t size);

/*
 * True when the machine was busier than its CPUs (a load average above the CPU count before or
 * after the sweep): the command then waited for a CPU, and wall times hold that wait.
 */
bool prs_sweep_busy(const struct prs_sweep *s);

/*
 * The shortest fitted wall time when it is below PRS_SWEEP_SHORT_S (process start-up, loading and
 * timer noise then weigh on the slope: the playbook's "big enough that the dominating cost
 * dominates"), else 0.
 */
double prs_sweep_too_short(const struct prs_sweep *s);

/* Computes each point's spreads and verdict, and the two fits over the points with runs ok. */
void prs_sweep_summarize(struct prs_sweep *s);

/*
 * The next verdict change along the sweep after point index *from: sets *from and *to to the two
 * points (consecutive among those with a verdict) whose verdicts differ and returns true, or
 * returns false. Start with *from = 0 and *to ignored; continue with *from = *to.
 */
bool prs_sweep_next_change(const struct prs_sweep *s, size_t *from, size_t *to);

/*
 * Reads the verdict from a recording's phase1.json (untrusted): "verdict" as a string, or as an
 * object's "label", "bound", "id", "name" or "kind" (the first string of these; pyrsprof's own
 * phase1.json has label "CPU-bound (native code)" and id "cpu"). The text is cut
 * to size - 1 bytes at a UTF-8 boundary, control characters replaced by spaces. Returns 0,
 * -ENOENT (no file), -EINVAL (not JSON, or no verdict in it) or -EIO.
 */
int prs_sweep_verdict_read(const char *path, char *buf, size_t size);

/*
 * The three files, each written to f (the caller makes the write atomic): sweep.md (the table of
 * points, the fits, the dimensions-table row, verdict changes and failures), sweep.json (version
 * PRS_SWEEP_VERSION, docs/sweep.schema.json) and sweep.svg (a log-log plot of the fastest
 * runs with their spread, the medians and the fitted lines). Every text that comes from the user's command is
 * escaped for its format. Call prs_sweep_summarize() first. Return 0, -EIO (write error) or
 * -ENOMEM.
 */
int prs_sweep_write_md(FILE *f, const struct prs_sweep *s);
int prs_sweep_write_json(FILE *f, const struct prs_sweep *s);
int prs_sweep_write_svg(FILE *f, const struct prs_sweep *s);

#endif
