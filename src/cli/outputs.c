/* SPDX-License-Identifier: MIT */
/* What a recording writes besides profile.pyrs (its end, and each snapshot): graphs, stats, reports. */
#include "cli/outputs.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>

#include "cli/cli.h"
#include "cli/collect.h"
#include "cli/render.h"
#include "util/banned.h"

static json_t *dist_json(const struct prs_dist *d)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:I}", "median", d->median / 1000.0, "p10",
			 d->p10 / 1000.0, "p90", d->p90 / 1000.0, "p99", d->p99 / 1000.0, "max",
			 d->max / 1000.0, "n", (json_int_t)d->n);
}

int cli_write_stats(const char *dir, const struct prs_sampler_stats *st, double rate_hz,
		       const struct prs_symbolize_stats *sym)
{
	char path[4096];
	struct cli_atomic a;
	FILE *f;
	json_t *j;
	int rc;

	snprintf(path, sizeof(path), "%s/stats.json", dir);
	j = json_pack("{s:I, s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:o, s:o, s:o, s:o, s:I, s:o, s:{s:I, s:I, s:I, s:I, s:I}}",
		      "samples", (json_int_t)st->ticks, "thread_samples", (json_int_t)st->thread_samples,
		      "processes", (json_int_t)st->processes, "children_cpu_s",
		      st->children_cpu_ns / 1e9,
		      "threads", (json_int_t)st->threads_seen, "missed_ticks",
		      (json_int_t)st->missed_ticks, "duration_s", st->duration_s, "rate_hz", rate_hz,
		      "sample_cost_us", dist_json(&st->sample_cost), "stop_us", dist_json(&st->stop),
		      "python_us", dist_json(&st->python), "py_names_us", dist_json(&st->py_names),
		      "py_name_reads", (json_int_t)st->py_name_reads,
		      "unwind_us", dist_json(&st->unwind), "errors", "unwind",
		      (json_int_t)st->unwind_errors, "unwind_truncated", (json_int_t)st->unwind_truncated,
		      "read", (json_int_t)st->read_errors, "not_stopped", (json_int_t)st->not_stopped,
		      "signals_forwarded", (json_int_t)st->signals_forwarded);
	if (!j)
		return -ENOMEM;
	json_object_set_new(json_object_get(j, "errors"), "python",
			    json_pack("{s:I, s:I, s:I, s:I, s:I}", "read", (json_int_t)st->py_read_errors,
				      "bad_frames", (json_int_t)st->py_bad_frames, "truncated",
				      (json_int_t)st->py_truncated, "merge_mismatch",
				      (json_int_t)st->py_merge_mismatch, "stale_code",
				      (json_int_t)st->py_code_stale));
	json_object_set_new(j, "loop_cpu_s", json_pack("{s:f, s:f}", "user", st->loop_user_s, "sys",
						       st->loop_sys_s));
	json_object_set_new(j, "state_us", dist_json(&st->state));
	json_object_set_new(j, "check_us", dist_json(&st->check));
	json_object_set_new(j, "warm_us", dist_json(&st->warm));
	json_object_set_new(j, "ticks", json_pack("{s:I, s:I, s:I, s:o, s:o, s:f, s:I}", "taken",
						  (json_int_t)st->ticks, "missed", (json_int_t)st->missed_ticks,
						  "late", (json_int_t)st->late_ticks, "delay_us",
						  dist_json(&st->tick_delay), "stop_window_us",
						  dist_json(&st->stop_window), "stopped_share",
						  prs_sampler_stopped_share(st, rate_hz), "stops_in_other_traps",
						  (json_int_t)st->other_trap_stops));
	json_object_set_new(j, "skipped", json_pack("{s:I, s:I, s:I}", "late", (json_int_t)st->skipped_late,
						    "late_sampled", (json_int_t)st->late_sampled, "new",
						    (json_int_t)st->skipped_new));
	json_object_set_new(j, "found_at_ticks",
			    json_pack("{s:I, s:I, s:I, s:I}", "threads", (json_int_t)st->threads_found,
				      "threads_not_followed", (json_int_t)st->threads_not_followed,
				      "processes", (json_int_t)st->processes_adopted, "execs",
				      (json_int_t)st->execs_found));
	json_object_set_new(j, "kernel_stacks",
			    json_pack("{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I}", "perf_samples",
				      (json_int_t)st->kstack_perf_samples, "matched",
				      (json_int_t)st->kstack_matched, "lowered_samples",
				      (json_int_t)st->kstack_lowered_samples, "period_changes",
				      (json_int_t)st->kstack_period_changes, "perf_kernel_share",
				      st->kstack_perf_kernel_share, "threads_opened",
				      (json_int_t)st->kstack_opened, "young_samples",
				      (json_int_t)st->kstack_young, "held_samples",
				      (json_int_t)st->kstack_held_samples));
	json_object_set_new(j, "exit_accounting",
			    json_pack("{s:I, s:I}", "read", (json_int_t)st->exit_acct_read,
				      "left_to_taskstats", (json_int_t)st->exit_acct_taskstats));
	json_object_set_new(j, "switch_records",
			    json_pack("{s:I, s:I}", "threads_opened", (json_int_t)st->switches_opened,
				      "threads_without", (json_int_t)st->switches_without));
	json_object_set_new(j, "reused", json_pack("{s:I, s:I, s:I}", "samples", (json_int_t)st->reused_samples,
						   "native", (json_int_t)st->reused_native, "lost",
						   (json_int_t)st->reuse_lost));
	json_object_set_new(j, "read_asleep", json_integer((json_int_t)st->read_asleep));
	json_object_set_new(j, "cpu_samples_from_stops",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "all", (json_int_t)st->cpu_stopped,
				      "preempted", (json_int_t)st->cpu_preempted, "preempted_kept_stop",
				      (json_int_t)st->cpu_preempted_stop, "from_perf",
				      (json_int_t)st->cpu_from_perf, "from_perf_again",
				      (json_int_t)st->cpu_perf_reused, "contended_without_perf",
				      (json_int_t)st->cpu_without_perf));
	if (sym)
		json_object_set_new(j, "symbols",
				    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}",
					      "frames", (json_int_t)sym->frames, "symbolized",
					      (json_int_t)sym->symbolized, "by_range", (json_int_t)sym->by_range,
					      "with_lines", (json_int_t)sym->with_line, "inlined",
					      (json_int_t)sym->inlined, "build_id_mismatches",
					      (json_int_t)sym->build_id_mismatches, "files",
					      (json_int_t)sym->files, "files_missing",
					      (json_int_t)sym->files_missing, "debug_files",
					      (json_int_t)sym->debug_files, "debuginfod_queries",
					      (json_int_t)sym->debuginfod_queries, "debuginfod_fetched",
					      (json_int_t)sym->debuginfod_fetched, "time_s", sym->time_ns / 1e9));
	f = cli_atomic_open(&a, path);
	if (!f) {
		json_decref(j);
		return -EIO;
	}
	rc = json_dumpf(j, f, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? 0 : -EIO;
	fputc('\n', f);
	json_decref(j);
	return cli_atomic_close(&a, rc == 0);
}

void cli_write_recording(const struct prs_profile *p, const char *dir, const struct prs_sampler_stats *st,
			 double rate_hz, const struct prs_symbolize_stats *sym, struct cli_graph_choice g,
			 bool summary, struct cli_written *w)
{
	w->graphs = cli_render_recording(p, dir, g) == 0;
	w->stats = cli_write_stats(dir, st, rate_hz, sym) == 0;
	w->reports = cli_write_reports(p, dir, summary, g.python_stacks, NULL) == 0;
}
