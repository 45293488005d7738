/* SPDX-License-Identifier: MIT */
/*
 * How a session gets its first target (the root): a program launched as a traced child, or a
 * live process attached to. The only code that knows a session starts with one process.
 */
#include "pyrsprof/sampler.h"

#include <errno.h>
#include <stdio.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/task.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/* A new session with an empty root target (its pid set later). */
static int new_with_root(enum prs_sampler_mode mode, const struct prs_sampler_opts *opts,
			 struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s;
	struct prs_target *tg;
	int rc = prs_session_new(mode, opts, rec, &s, err);

	if (rc)
		return rc;
	tg = prs_target_new(s, 0);
	if (!tg || prs_session_add_target(s, tg) != 0) {
		prs_sampler_free(s);
		return prs_err_set(err, -ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

/* Launches argv as the root with the session's source, which may prepare the launch. */
static int launch_root(struct prs_sampler *s, char *const argv[], pid_t *pid, struct prs_err *err)
{
	struct prs_target *root = s->targets[0];
	int rc = 0;

	if (s->src->launch_prepare)
		rc = s->src->launch_prepare(s, root, argv, err);
	if (rc == 0)
		rc = prs_ptrace_launch(argv, s->src->traces ? s->seize_options : 0, pid, err);
	if (s->src->launch_done)
		s->src->launch_done(s, root);
	return rc;
}

/* --mode auto: ptrace, unless it is refused (before the program ran: the child is killed at
 * its exec gate). Then the program is launched again with the preload agent. */
static int launch_auto(struct prs_sampler *s, char *const argv[], pid_t *pid, struct prs_err *err)
{
	int rc = launch_root(s, argv, pid, err);

	if (s->opts.source != PRS_SOURCE_AUTO || (rc != -EPERM && rc != -ENOSYS) || *pid > 0)
		return rc;
	prs_session_note(s, "ptrace is not permitted here (%s): sampling from inside the program "
			 "with the LD_PRELOAD agent (--mode preload)%s", err->msg,
			 s->opts.subprocesses ? ", each child process with a ring of its own" : "");
	/* preload's refusal of the program says so, not "use --mode ptrace" (the ptrace note is
	 * never printed when the session ends here, before its notes are) */
	snprintf(s->ptrace_refused, sizeof(s->ptrace_refused), "%s", err->msg);
	err->msg[0] = '\0';
	s->src = &prs_source_preload;
	return launch_root(s, argv, pid, err);
}

int prs_sampler_launch(char *const argv[], const struct prs_sampler_opts *opts,
		       struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s;
	struct prs_target *root;
	pid_t pid = 0;
	int rc = new_with_root(PRS_SAMPLE_LAUNCH, opts, rec, &s, err);

	if (rc)
		return rc;
	root = s->targets[0];
	rc = launch_auto(s, argv, &pid, err);
	if (rc) {
		prs_sampler_free(s);
		return rc;
	}
	prs_target_set_pid(root, pid);
	root->seized = s->src->traces;
	/* Seized before its exec, it runs pyrsprof's image until its exec event. */
	root->own_image = !root->seized;
	s->st.processes = 1;
	if (!root->seized)
		prs_tree_record_command(s, root); /* (else at its exec) */
	if (!prs_thr_add(&root->thr, pid)) {
		prs_sampler_free(s);
		return prs_err_set(err, -ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

int prs_sampler_attach(pid_t pid, const struct prs_sampler_opts *opts, struct prs_recorder *rec,
		       struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s;
	struct prs_target *root;
	int rc;

	if (pid <= 0 || !prs_proc_exists(pid))
		return prs_err_set(err, -ESRCH, "no process with pid %d", (int)pid);
	rc = new_with_root(PRS_SAMPLE_ATTACH, opts, rec, &s, err);
	if (rc)
		return rc;
	root = s->targets[0];
	prs_target_set_pid(root, pid);
	root->own_image = true;
	if (!s->src->attach) {
		prs_sampler_free(s);
		return prs_err_set(err, -EINVAL, "--mode %s needs the program started by pyrsprof run "
				   "(attach with --mode ptrace or vm)", s->src->name);
	}
	rc = s->src->attach(s, root, err);
	if (rc == 0 && opts->subprocesses)
		rc = prs_tree_attach(s, err);
	if (rc) {
		prs_sampler_free(s);
		return rc;
	}
	s->st.processes++;
	prs_tree_record_command(s, root);
	if (!opts->subprocesses) {
		uint64_t self;

		prs_proc_cpu(pid, &self, &s->root_cutime0);
	}
	*out = s;
	return 0;
}
