/* SPDX-License-Identifier: MIT */
/* Snapshots of a recording while it runs: see snapshot.h. */
#include "cli/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/outputs.h"
#include "pyrsprof/util.h"
#include "util/banned.h"

/* Set by the SIGUSR1 handler, cleared by the snapshot it asked for. */
static volatile sig_atomic_t usr1_pending;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_pending = 1;
}

/* Reads the file at path into b. Returns 0 or -errno. */
static int read_file(const char *path, struct prs_buf *b)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if ((rc = prs_buf_reserve(b, 1 << 20)) != 0)
			break;
		n = read(fd, b->data + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		b->len += (size_t)n;
	}
	close(fd);
	return rc;
}

/* Writes len bytes to path, whole or not at all. Returns 0 or -1 (printed). */
static int write_bytes(const char *path, const void *data, size_t len)
{
	struct cli_atomic a;
	FILE *f = cli_atomic_open(&a, path);

	if (!f)
		return -1;
	return cli_atomic_close(&a, fwrite(data, 1, len, f) == len) == 0 ? 0 : -1;
}

/* The files a snapshot folder may hold (to clear a failed one). */
static const char *const snapshot_files[] = { "profile.pyrs", "cpu.svg",     "wall.svg",   "stats.json",
					       "phase1.md",    "phase1.json", "phase4.md",  "phase4.json" };

static void remove_folder(const char *dir)
{
	char path[4200];

	for (size_t i = 0; i < sizeof(snapshot_files) / sizeof(snapshot_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, snapshot_files[i]);
		unlink(path);
	}
	rmdir(dir);
}

int cli_snapshots_remove(const char *dir)
{
	char parent[4200], sub[4500];
	struct dirent *e;
	DIR *d;

	snprintf(parent, sizeof(parent), "%s/snapshots", dir);
	d = opendir(parent);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", parent, e->d_name);
		remove_folder(sub);
	}
	closedir(d);
	return rmdir(parent) == 0 ? 0 : -errno;
}

/*
 * Writes the profile so far and its outputs into tmp: profile.pyrs as the recorder flushed it
 * (a reader sees it cut short, which it is), then what the end of the recording writes, from
 * a copy of it read back and symbolized. Returns 0 or -1 (printed).
 */
static int write_snapshot(struct cli_snapshot *c, const char *tmp, double elapsed_s)
{
	struct prs_sampler_stats st;
	struct prs_symbolize_stats sym;
	struct prs_profile *p = NULL;
	struct prs_err err = { 0 };
	struct cli_written w;
	struct prs_buf b;
	char path[4200];
	int rc;

	prs_buf_init(&b);
	snprintf(path, sizeof(path), "%s/profile.pyrs", c->dir);
	if ((rc = read_file(path, &b)) != 0) {
		cli_msg("snapshot: cannot read '%s': %s", path, strerror(-rc));
		goto out;
	}
	if (prs_pyrs_read_mem(b.data, b.len, &p, NULL, 0, &err) != 0) {
		cli_err(&err, "snapshot");
		rc = -1;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/profile.pyrs", tmp);
	if ((rc = write_bytes(path, b.data, b.len)) != 0)
		goto out;
	if (!c->symbolizer)
		c->symbolizer = cli_symbolizer_new(c->sym);
	cli_symbolize_with(c->symbolizer, p, &sym);
	prs_sampler_get_stats(c->s, &st);
	st.duration_s = elapsed_s;
	cli_write_recording(p, tmp, &st, c->rate_hz, &sym, c->graphs, false, &w);
	rc = w.graphs && w.stats && w.reports ? 0 : -1;
out:
	prs_profile_free(p);
	prs_buf_release(&b);
	return rc;
}

/* Takes snapshot number c->taken + 1 into DIR/snapshots/NNN-<elapsed>s. */
static void take(struct cli_snapshot *c, double elapsed_s)
{
	char parent[4200], tmp[4300], final[4300];
	uint64_t t0 = prs_now_ns(), ns;
	unsigned n = c->taken + c->failed + 1;

	snprintf(parent, sizeof(parent), "%s/snapshots", c->dir);
	snprintf(tmp, sizeof(tmp), "%s/.%03u.tmp", parent, n);
	snprintf(final, sizeof(final), "%s/%03u-%.1fs", parent, n, elapsed_s);
	if ((mkdir(parent, 0755) != 0 && errno != EEXIST) || (mkdir(tmp, 0755) != 0 && errno != EEXIST)) {
		cli_msg("snapshot: cannot create '%s': %s", tmp, strerror(errno));
		c->failed++;
		return;
	}
	if (write_snapshot(c, tmp, elapsed_s) != 0) {
		cli_msg("snapshot %u failed; recording goes on", n);
		remove_folder(tmp);
		c->failed++;
		return;
	}
	if (rename(tmp, final) != 0) {
		cli_msg("snapshot %u: cannot rename '%s' to '%s': %s; recording goes on", n, tmp, final,
			strerror(errno));
		remove_folder(tmp);
		c->failed++;
		return;
	}
	ns = prs_now_ns() - t0;
	c->taken++;
	c->pause_ns += ns;
	if (ns > c->max_pause_ns)
		c->max_pause_ns = ns;
	cli_msg("snapshot %u at %.1f s: %s (sampling paused %.0f ms, ~%.0f ticks, counted as missed)", n,
		elapsed_s, final, (double)ns / 1e6, (double)ns / 1e9 * c->rate_hz);
}

static void progress(void *arg, double elapsed_s, uint64_t samples, size_t threads)
{
	struct cli_snapshot *c = arg;
	bool due = c->every_s > 0 && elapsed_s + 0.05 >= c->next_s;

	if (usr1_pending || due) {
		usr1_pending = 0;
		take(c, elapsed_s);
		while (c->every_s > 0 && c->next_s <= elapsed_s + 0.05)
			c->next_s += c->every_s;
	}
	if (c->chain)
		c->chain(c->chain_arg, elapsed_s, samples, threads);
}

void cli_snapshot_hook(struct cli_snapshot *c, struct prs_sampler_opts *so, const char *dir,
		       const struct cli_symopts *sym, double rate_hz, struct cli_graph_choice graphs,
		       double every_s)
{
	memset(c, 0, sizeof(*c));
	c->dir = dir;
	c->sym = sym;
	c->rate_hz = rate_hz;
	c->graphs = graphs;
	c->every_s = every_s;
	c->next_s = every_s;
	c->chain = so->progress;
	c->chain_arg = so->progress_arg;
	so->progress = progress;
	so->progress_arg = c;
}

void cli_snapshot_start(struct cli_snapshot *c, const struct prs_sampler *s)
{
	struct sigaction sa;

	c->s = s;
	usr1_pending = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	/* restart the sampler's reads and waits; its sigtimedwait returns early, harmlessly */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

void cli_snapshot_end(struct cli_snapshot *c)
{
	signal(SIGUSR1, SIG_IGN);
	prs_symbolizer_free(c->symbolizer);
	c->symbolizer = NULL;
	if (c->taken)
		cli_msg("%u snapshot%s paused sampling %.0f ms in all (longest %.0f ms)", c->taken,
			c->taken == 1 ? "" : "s", (double)c->pause_ns / 1e6, (double)c->max_pause_ns / 1e6);
}
