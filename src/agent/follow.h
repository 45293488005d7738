/* SPDX-License-Identifier: MIT */
/*
 * --subprocesses in preload mode: every process of the tree samples into a ring of its own. The
 * launched process gets its ring from pyrsprof (ring.h, PRS_AGENT_FD_ENV); any other process the
 * agent starts in (a forked child, in the fork's child handler; an exec'ed child, in the new
 * image's constructor) makes one itself (a memfd of the same geometry) and announces it: the
 * descriptor is sent with SCM_RIGHTS on a connection of its own to pyrsprof's abstract unix
 * seqpacket socket, with the process's parent in the payload; the kernel tells pyrsprof who
 * connected (SO_PEERCRED: pid and uid). The agent then closes its descriptor (only the mapping stays: a program that
 * closes every descriptor does not take the ring away) and pyrsprof maps it. With pyrsprof gone,
 * the send fails and the process runs unprofiled: no ring, no clock.
 *
 * The configuration travels in the environment (PRS_FOLLOW_ENV), so an exec'ed image finds it
 * even when the descriptor of the launched process's ring was closed: "NAME,PERIOD,NSLOTS,CAP,CLOCK".
 * Parsing it runs in the agent's constructor: no allocation, bounded, and hostile input is refused.
 */
#ifndef PYRSPROF_AGENT_FOLLOW_H
#define PYRSPROF_AGENT_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PRS_FOLLOW_ENV "PYRSPROF_AGENT_FOLLOW"
#define PRS_FOLLOW_NAME_MAX 64      /* the socket's abstract name, [A-Za-z0-9-] */
#define PRS_FOLLOW_MAGIC 0x70727366u /* the announcement's first word */
#define PRS_FOLLOW_NSLOTS_MAX 4096
#define PRS_FOLLOW_CAP_MAX (1u << 20)
#define PRS_FOLLOW_EXIT_WAIT_NS 5000000000ull /* a process's wait at its exit, at most
						* (follow-agent.h prs_follow_await_reader) */

/* What a process needs to make and announce its own ring. */
struct prs_follow_cfg {
	char name[PRS_FOLLOW_NAME_MAX + 1]; /* abstract socket name, without the leading NUL */
	uint64_t period_ns;
	uint32_t nslots, stack_cap, clock;
};

/* The announcement's payload (the descriptor rides in its SCM_RIGHTS). */
struct prs_follow_msg {
	uint32_t magic;  /* PRS_FOLLOW_MAGIC */
	int32_t ppid;    /* the parent of the sender when it made the ring */
	uint32_t forked; /* 1: made in a fork's child; 0: at an image's start (exec) */
	uint32_t pad;
};

/* The environment value for cfg into buf. Returns false if it does not fit. */
static inline bool prs_follow_format(char *buf, size_t size, const struct prs_follow_cfg *cfg)
{
	int n = snprintf(buf, size, "%s,%llu,%u,%u,%u", cfg->name, (unsigned long long)cfg->period_ns,
			 cfg->nslots, cfg->stack_cap, cfg->clock);

	return n > 0 && (size_t)n < size;
}

/* One decimal number ending at sep (',' or '\0') from *p, at most max. */
static inline bool prs_follow_num(const char **p, char sep, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > max)
			return false;
	}
	if (*s != sep)
		return false;
	*p = sep ? s + 1 : s;
	*out = v;
	return true;
}

/* Parses an environment value (s may be NULL). Returns false for anything malformed. */
static inline bool prs_follow_parse(const char *s, struct prs_follow_cfg *cfg)
{
	uint64_t slots, cap, clock;
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n] && s[n] != ','; n++) {
		char c = s[n];

		if (n >= PRS_FOLLOW_NAME_MAX || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
						   (c >= '0' && c <= '9') || c == '-'))
			return false;
		cfg->name[n] = c;
	}
	cfg->name[n] = '\0';
	if (n == 0 || s[n] != ',')
		return false;
	s += n + 1;
	return prs_follow_num(&s, ',', 1000000000000ull, &cfg->period_ns) && cfg->period_ns > 0 &&
	       prs_follow_num(&s, ',', PRS_FOLLOW_NSLOTS_MAX, &slots) && slots > 0 &&
	       prs_follow_num(&s, ',', PRS_FOLLOW_CAP_MAX, &cap) &&
	       prs_follow_num(&s, '\0', 1, &clock) && ((cfg->nslots = (uint32_t)slots),
						       (cfg->stack_cap = (uint32_t)cap),
						       (cfg->clock = (uint32_t)clock), true);
}

#endif
