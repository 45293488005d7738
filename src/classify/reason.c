/* SPDX-License-Identifier: MIT */
/*
 * Why a sampled thread was not running (design note §1.4), from what a sample holds: its state
 * (running, waiting for a CPU, D state, blocked, stopped), the syscall it was blocked in, and the
 * GIL-wait flag. A blocked read or write is a pipe, socket or terminal (a regular file's read
 * sleeps in D state, or in fsync/open: disk); futex waits are locks unless flagged as GIL waits;
 * wait4/waitid wait for a child process; asleep outside a syscall is a page fault (paging).
 */
#include "pyrsprof/classify.h"

#include <sys/syscall.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

static const struct {
	const char *name, *label;
} reasons[PRS_R__COUNT] = {
	[PRS_R_CPU] = { "cpu", "on-CPU" },
	[PRS_R_RUNQ] = { "runqueue", "waiting for a CPU" },
	[PRS_R_IO_DISK] = { "io_disk", "IO: disk" },
	[PRS_R_IO_NET] = { "io_net", "IO: network/event" },
	[PRS_R_GIL] = { "gil", "waiting for the GIL" },
	[PRS_R_LOCK] = { "lock", "lock waits" },
	[PRS_R_SLEEP] = { "sleep", "sleep" },
	[PRS_R_CHILD] = { "child", "waiting for a child process" },
	[PRS_R_PAGING] = { "paging", "paging" },
	[PRS_R_OTHER] = { "other", "other waits" },
	[PRS_R_UNSEEN] = { "unseen", "off-CPU, not caught by samples" },
};

const char *prs_reason_name(enum prs_reason r)
{
	return (unsigned)r < PRS_R__COUNT ? reasons[r].name : "?";
}

const char *prs_reason_label(enum prs_reason r)
{
	return (unsigned)r < PRS_R__COUNT ? reasons[r].label : "?";
}

static enum prs_reason blocked_reason(int nr)
{
	switch (nr) {
	case SYS_wait4:
	case SYS_waitid:
		return PRS_R_CHILD;
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_sync:
	case SYS_syncfs:
	case SYS_sync_file_range:
	case SYS_msync:
	case SYS_open:
	case SYS_openat:
	case SYS_fallocate:
		return PRS_R_IO_DISK;
	case SYS_ioctl:
		return PRS_R_OTHER;
	default:
		break;
	}
	switch (prs_syscall_kind(nr)) {
	case PRS_KIND_OFF_IO:
		return PRS_R_IO_NET;
	case PRS_KIND_OFF_LOCK:
		return PRS_R_LOCK;
	case PRS_KIND_OFF_SLEEP:
		return PRS_R_SLEEP;
	default:
		return PRS_R_OTHER;
	}
}

enum prs_reason prs_sample_reason(const struct prs_sample *s)
{
	switch (s->state) {
	case PRS_STATE_RUNNING:
		return PRS_R_CPU;
	case PRS_STATE_RUNQUEUE:
		return PRS_R_RUNQ;
	case PRS_STATE_DISK:
		return PRS_R_IO_DISK;
	case PRS_STATE_BLOCKED:
		if (s->flags & PRS_SAMPLE_GIL_WAIT)
			return PRS_R_GIL;
		return s->syscall < 0 ? PRS_R_PAGING : blocked_reason(s->syscall);
	default:
		return PRS_R_OTHER;
	}
}
