/* SPDX-License-Identifier: MIT */
/*
 * The pprof export: a perftools.profiles.Profile (github.com/google/pprof/proto/profile.proto),
 * encoded by the protobuf-c code that mk/pprof.mk generates from pprof's own .proto, gzip'd with
 * zlib as `go tool pprof` expects. The profile is first built in plain arrays (strings, functions,
 * locations with their lines; the samples are the view's stacks), then packed straight into a
 * deflate stream, so the encoded profile is never held in memory whole: the samples one by one
 * (a Sample message each, for as many as the view has stacks: most of the profile), the rest
 * through the generated structs. The bytes are those protobuf-c packs for the whole Profile
 * message (its fields in number order: sample_type, then sample, then the others).
 *
 * pprof's conventions followed here (profile.proto's comments): string_table[0] is "", ids of
 * mappings, locations and functions start at 1, a sample's location_id list is leaf first, and
 * a location's lines are innermost first (the inlined callee, then its callers, the last line is
 * the function the address belongs to).
 *
 * Processes (a --subprocesses recording): profile.proto's Mapping has no pid, so a mapping says
 * its process through the samples that use it. Every sample has a `pid` label, and its locations
 * refer only to mappings of its own process: the model's mappings are per process already (the
 * same file in two processes is two mappings, and their frames two locations), and a mapping the
 * model keeps for all processes (pid 0: the kernel's, [kernel.kallsyms]) is written as one
 * Mapping per process whose samples use it, with locations of its own. This is how google's
 * perf_data_converter merges processes into one profile (mappings and locations per address
 * space). A consumer joins label -> location -> mapping; `go tool pprof` itself merges the
 * mappings of one binary (same build id or file, size and offset) when it loads a profile.
 */
#include "pyrsprof/export.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "pprof/profile.pb-c.h"

#include "util/banned.h"

#define MAX_ENTRIES ((size_t)INT32_MAX)

struct pp_func {
	int64_t name, file; /* string table indexes */
};

struct pp_line {
	uint64_t func; /* function id (1-based) */
	int64_t line;
};

/* frame_loc's mark of a frame in a mapping shared by processes: its locations are per process */
#define PER_PROCESS UINT32_MAX

struct pp_loc {
	uint64_t mapping; /* id, 0 = none */
	uint64_t addr;
	size_t first, nlines; /* in lines */
};

struct pp {
	const struct prs_profile *p;
	struct prs_profile_view *v;
	char **strs;
	size_t nstrs, cap_strs;
	struct prs_strmap smap;
	struct prs_buf scratch;
	struct pp_func *funcs;
	size_t nfuncs, cap_funcs;
	struct prs_map64 fmap; /* name << 32 | file -> function index */
	struct pp_loc *locs;
	size_t nlocs, cap_locs;
	struct pp_line *lines;
	size_t nlines, cap_lines;
	uint32_t *frame_loc; /* view frame id -> location id (0: none yet, PER_PROCESS) */
	uint32_t main_map; /* mapping index listed first (id 1) */
	/* the mappings shared by processes (pid 0), written once per process that uses them */
	struct prs_map64 proc_loc; /* pid << 32 | view frame id -> location id */
	struct prs_map64 proc_map; /* pid << 32 | mapping index -> mapping id */
	bool *map_taken;           /* a shared mapping's own id is a process's already */
	bool one_process;          /* the view's stacks are of one process: nothing to copy */
	uint32_t *copies;          /* the mapping index of each copy (ids after the model's) */
	size_t ncopies, cap_copies;
	uint64_t *ids; /* one sample's location ids */
	struct prs_buf sample; /* one Sample message's bytes (put_sample) */
	size_t nids, cap_ids;
};

/* The string table index of s[0..len) (cleaned to UTF-8), added if new. -1 on ENOMEM. */
static int64_t pp_str(struct pp *c, const char *s, size_t len)
{
	size_t n;
	const char *t = prs_utf8_clean(s, len, &c->scratch, &n);
	uint32_t v;
	char *copy;

	if (!t)
		return -1;
	v = prs_strmap_get(&c->smap, t, n);
	if (v != PRS_MAP_NONE)
		return v;
	if (c->nstrs >= MAX_ENTRIES ||
	    prs_array_grow((void **)&c->strs, &c->cap_strs, c->nstrs + 1, sizeof(*c->strs)))
		return -1;
	copy = malloc(n + 1);
	if (!copy)
		return -1;
	memcpy(copy, t, n);
	copy[n] = '\0';
	if (prs_strmap_put(&c->smap, copy, n, (uint32_t)c->nstrs)) {
		free(copy);
		return -1;
	}
	c->strs[c->nstrs] = copy;
	return (int64_t)c->nstrs++;
}

static int64_t pp_cstr(struct pp *c, const char *s)
{
	return pp_str(c, s, strlen(s));
}

/* The id (1-based) of the function (name, file); 0 on ENOMEM. */
static uint64_t pp_func(struct pp *c, const char *name, uint32_t file)
{
	int64_t n = pp_cstr(c, name[0] ? name : "[unknown]");
	int64_t f = file ? pp_str(c, c->p->strings[file], c->p->string_lens[file]) : 0;
	uint32_t idx;
	int r;

	if (n < 0 || f < 0)
		return 0;
	r = prs_map64_intern(&c->fmap, (uint64_t)n << 32 | (uint64_t)f, (uint32_t)c->nfuncs, &idx);
	if (r < 0)
		return 0;
	if (r == 1) {
		if (c->nfuncs >= MAX_ENTRIES ||
		    prs_array_grow((void **)&c->funcs, &c->cap_funcs, c->nfuncs + 1, sizeof(*c->funcs)))
			return 0; /* the map now points past the end: the export fails anyway */
		c->funcs[c->nfuncs].name = n;
		c->funcs[c->nfuncs].file = f;
		c->nfuncs++;
	}
	return (uint64_t)idx + 1;
}

static int pp_line(struct pp *c, uint64_t func, uint32_t line)
{
	if (!func || c->nlines >= MAX_ENTRIES ||
	    prs_array_grow((void **)&c->lines, &c->cap_lines, c->nlines + 1, sizeof(*c->lines)))
		return -ENOMEM;
	c->lines[c->nlines].func = func;
	c->lines[c->nlines++].line = line;
	return 0;
}

/* Starts a new location; returns its id, or 0 on ENOMEM. Lines are added after it. */
static uint64_t pp_loc_begin(struct pp *c, uint64_t mapping, uint64_t addr)
{
	if (c->nlocs >= MAX_ENTRIES ||
	    prs_array_grow((void **)&c->locs, &c->cap_locs, c->nlocs + 1, sizeof(*c->locs)))
		return 0;
	c->locs[c->nlocs].mapping = mapping;
	c->locs[c->nlocs].addr = addr;
	c->locs[c->nlocs].first = c->nlines;
	c->locs[c->nlocs].nlines = 0;
	return ++c->nlocs;
}

static void pp_loc_end(struct pp *c)
{
	struct pp_loc *l = &c->locs[c->nlocs - 1];

	l->nlines = c->nlines - l->first;
}

/* A location with one line naming `label` (no mapping). 0 on ENOMEM. */
static uint64_t pp_named_loc(struct pp *c, const char *label, uint32_t file, uint32_t line)
{
	uint64_t id = pp_loc_begin(c, 0, 0);

	if (!id || pp_line(c, pp_func(c, label, file), line))
		return 0;
	pp_loc_end(c);
	return id;
}

/* pprof id of mapping index i: main_map is 1, the others keep their order. */
static uint64_t mapping_id(const struct pp *c, uint32_t i)
{
	if (i == c->main_map)
		return 1;
	return (uint64_t)i + (i < c->main_map ? 2 : 1);
}

/*
 * The id of mapping index i, one the model shares between processes (pid 0), in the samples of
 * process pid: the first process that uses it has the mapping's own id, each other one a copy
 * of it (ids after the model's mappings). 0 on ENOMEM.
 */
static uint64_t process_mapping_id(struct pp *c, uint32_t i, int32_t pid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | i;
	uint32_t id = prs_map64_get(&c->proc_map, key);

	if (id != PRS_MAP_NONE)
		return id;
	if (!c->map_taken[i]) {
		c->map_taken[i] = true;
		id = (uint32_t)mapping_id(c, i);
	} else {
		uint64_t copy = (uint64_t)c->p->nmappings + c->ncopies + 1;

		if (copy >= UINT32_MAX ||
		    prs_array_grow((void **)&c->copies, &c->cap_copies, c->ncopies + 1,
				   sizeof(*c->copies)))
			return 0;
		c->copies[c->ncopies++] = i;
		id = (uint32_t)copy;
	}
	return prs_map64_put(&c->proc_map, key, id) ? 0 : id;
}

/* The location of raw frame id in mapping `mapping` (an id, 0 = none). 0 on ENOMEM. */
static uint64_t raw_loc(struct pp *c, uint32_t id, uint64_t mapping)
{
	const struct prs_profile *p = c->p;
	const struct prs_frame *f = &p->frames[id];
	char label[PRS_MAX_NAME + 64];
	uint32_t n, k;
	const uint32_t *ids = prs_profile_expansion(p, &id, &n);
	uint64_t loc = pp_loc_begin(c, mapping, f->addr);

	if (!loc)
		return 0;
	/* the expansion is outermost first; pprof wants the innermost line first */
	for (k = n; ids != &id && k-- > 0;) {
		const struct prs_frame *g = &p->frames[ids[k]];

		prs_profile_frame_label(p, ids[k], label, sizeof(label));
		if (pp_line(c, pp_func(c, label, g->file < p->nstrings ? g->file : 0), g->line))
			return 0;
	}
	if (c->nlines == c->locs[loc - 1].first) {
		/* unsymbolized: name it as the other exports do */
		prs_profile_frame_label(p, id, label, sizeof(label));
		if (pp_line(c, pp_func(c, label, 0), 0))
			return 0;
	}
	pp_loc_end(c);
	return loc;
}

/* The location of a raw frame of a mapping shared by processes, in the samples of process pid:
 * built once per process. 0 on ENOMEM. */
static uint64_t process_loc(struct pp *c, uint32_t id, int32_t pid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | id;
	uint32_t v = prs_map64_get(&c->proc_loc, key);
	uint64_t mapping, loc;

	if (v != PRS_MAP_NONE)
		return v;
	mapping = process_mapping_id(c, c->p->frames[id].mapping, pid);
	loc = mapping ? raw_loc(c, id, mapping) : 0;
	if (!loc || loc >= UINT32_MAX || prs_map64_put(&c->proc_loc, key, (uint32_t)loc))
		return 0;
	return loc;
}

/* frame_loc for a frame whose location is not made yet, or is per process. */
static uint64_t new_frame_loc(struct pp *c, uint32_t id, int32_t pid)
{
	const struct prs_profile *p = c->p;
	char label[PRS_MAX_NAME + 64];
	uint64_t loc;

	if (c->frame_loc[id] == PER_PROCESS)
		return process_loc(c, id, pid);
	if (id < p->nframes && p->frames[id].raw) {
		const struct prs_frame *f = &p->frames[id];

		if (!c->one_process && f->mapping < p->nmappings && p->mappings[f->mapping].pid == 0) {
			c->frame_loc[id] = PER_PROCESS;
			return process_loc(c, id, pid);
		}
		loc = raw_loc(c, id, f->mapping < p->nmappings ? mapping_id(c, f->mapping) : 0);
		if (!loc)
			return 0;
	} else {
		struct prs_view_frame vf;

		prs_view_frame(c->v, id, &vf, label, sizeof(label));
		prs_view_frame_label(c->v, id, label, sizeof(label));
		loc = pp_named_loc(c, label, vf.frame ? vf.frame->file : 0, vf.line);
		if (!loc)
			return 0;
	}
	if (loc >= UINT32_MAX)
		return 0;
	c->frame_loc[id] = (uint32_t)loc;
	return loc;
}

/* The location of view frame id in the samples of process pid: built once (once per process
 * for a frame of a mapping shared by processes). 0 on ENOMEM. The test for a location made
 * already is apart (inlined where it is called: the frames of every stack pass here). */
static inline uint64_t frame_loc(struct pp *c, uint32_t id, int32_t pid)
{
	uint32_t loc = c->frame_loc[id];

	return loc && loc != PER_PROCESS ? loc : new_frame_loc(c, id, pid);
}

/* The location ids of view stack i (vs[i]), leaf first, in c->ids[0..c->nids) (each location made
 * on first sight). 0 or -ENOMEM. */
static int sample_locs(struct pp *c, const struct prs_view_stack *vs, size_t i)
{
	const uint32_t *ids;
	size_t k = prs_view_frames(c->v, i, &ids, NULL);

	c->nids = 0;
	if (prs_array_grow((void **)&c->ids, &c->cap_ids, k, sizeof(*c->ids)))
		return -ENOMEM;
	while (k-- > 0) {
		uint64_t loc = frame_loc(c, ids[k], vs[i].pid);

		if (!loc)
			return -ENOMEM;
		c->ids[c->nids++] = loc;
	}
	return 0;
}

/*
 * Makes the locations of view stack i (of a walk over the stacks vs in order) as sample_locs
 * meets them, leaf first: the frames it shares with the stack before it (on the root side) have
 * theirs already, if that stack is of the same process. 0 or -ENOMEM.
 */
static int stack_new_locs(struct pp *c, const struct prs_view_stack *vs, size_t i)
{
	const uint32_t *ids;
	size_t shared, k = prs_view_frames(c->v, i, &ids, &shared);

	if (i > 0 && vs[i - 1].pid != vs[i].pid)
		shared = 0;
	while (k-- > shared)
		if (!frame_loc(c, ids[k], vs[i].pid))
			return -ENOMEM;
	return 0;
}

/* ---- gzip output: a ProtobufCBuffer that deflates into a FILE ---- */

struct gz_out {
	ProtobufCBuffer base;
	z_stream zs;
	FILE *out;
	int rc;
	size_t nin;
	uint8_t in[1u << 16];
	uint8_t obuf[1u << 16];
};

static void gz_deflate(struct gz_out *g, int flush)
{
	int zr;

	g->zs.next_in = g->in;
	g->zs.avail_in = (uInt)g->nin;
	do {
		size_t have;

		g->zs.next_out = g->obuf;
		g->zs.avail_out = sizeof(g->obuf);
		zr = deflate(&g->zs, flush);
		if (zr == Z_STREAM_ERROR) {
			g->rc = -EIO;
			return;
		}
		have = sizeof(g->obuf) - g->zs.avail_out;
		if (have && fwrite(g->obuf, 1, have, g->out) != have) {
			g->rc = -EIO;
			return;
		}
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
	g->nin = 0;
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct gz_out *g = (struct gz_out *)b;

	/* protobuf-c appends a field's tag or varint at a time (1 to 10 bytes): copied in place,
	 * without a call to memcpy, while they fit */
	if (len <= 16 && len < sizeof(g->in) - g->nin) {
		uint8_t *d = g->in + g->nin;

		g->nin += len;
		while (len--)
			*d++ = *data++;
		return;
	}
	while (len && !g->rc) {
		size_t k = sizeof(g->in) - g->nin;

		if (k > len)
			k = len;
		memcpy(g->in + g->nin, data, k);
		g->nin += k;
		data += k;
		len -= k;
		if (g->nin == sizeof(g->in))
			gz_deflate(g, Z_NO_FLUSH);
	}
}

/* ---- metadata ---- */

static int64_t start_time_ns(const struct prs_profile *p)
{
	const char *v = prs_profile_meta_get(p, "start_time");
	struct tm tm;
	const char *end;
	time_t t;

	if (!v)
		return 0;
	memset(&tm, 0, sizeof(tm));
	end = strptime(v, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!end || *end)
		return 0;
	t = timegm(&tm);
	if (t < 0 || t > (time_t)(INT64_MAX / 1000000000))
		return 0;
	return (int64_t)t * 1000000000;
}

static int64_t duration_ns(const struct prs_profile *p)
{
	const char *v = prs_profile_meta_get(p, "duration_s");
	char *end;
	double d;

	if (!v || !*v)
		return 0;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || !(d > 0) || d > 1e9)
		return 0;
	return (int64_t)(d * 1e9);
}

/* The basename of the first len bytes of path. */
static const char *base_of(const char *path, size_t *len)
{
	const char *b = path;
	size_t i;

	for (i = 0; i < *len; i++)
		if (path[i] == '/')
			b = path + i + 1;
	*len -= (size_t)(b - path);
	return b;
}

/* True when name[0..len) is prog[0..plen) followed by a version only ("python3.11" for
 * "python3" or "python"). */
static bool versioned(const char *name, size_t len, const char *prog, size_t plen)
{
	if (!plen || len <= plen || memcmp(name, prog, plen) != 0)
		return false;
	for (size_t i = plen; i < len; i++)
		if (!(name[i] >= '0' && name[i] <= '9') && name[i] != '.')
			return false;
	return true;
}

/*
 * The mapping to list first: pprof shows mapping[0] as "the main binary". The one named like the
 * command's program; else named like it with a version after (`python3 app.py` runs
 * python3.11, and under pyenv the shim's bash was mapped first, before its exec); else the first
 * file that is not a shared library or a [pseudo] mapping; else the first one.
 */
static uint32_t main_mapping(const struct prs_profile *p)
{
	const char *cmd = prs_profile_meta_get(p, "command");
	size_t clen = cmd ? strcspn(cmd, " ") : 0;
	const char *cbase = cmd ? base_of(cmd, &clen) : NULL;
	uint32_t i, version = UINT32_MAX, other = UINT32_MAX;

	for (i = 0; i < p->nmappings; i++) {
		uint32_t ps = p->mappings[i].path;
		size_t len = ps < p->nstrings ? p->string_lens[ps] : 0;
		const char *b = ps < p->nstrings ? base_of(p->strings[ps], &len) : "";

		if (cbase && clen && len == clen && memcmp(b, cbase, len) == 0)
			return i;
		if (version == UINT32_MAX && cbase && versioned(b, len, cbase, clen))
			version = i;
		if (other == UINT32_MAX && len && b[0] != '[' && !memmem(b, len, ".so", 3))
			other = i;
	}
	return version != UINT32_MAX ? version : other != UINT32_MAX ? other : 0;
}

/* ---- the export ---- */

/* Fills mm (all but its id) from pm. 0 or -ENOMEM. */
static int put_mapping(struct pp *c, Perftools__Profiles__Mapping *mm, const struct prs_mapping *pm)
{
	const struct prs_profile *p = c->p;
	char hex[2 * PRS_BUILD_ID_MAX + 1];
	size_t k, nb = pm->build_id_len > PRS_BUILD_ID_MAX ? PRS_BUILD_ID_MAX : pm->build_id_len;

	perftools__profiles__mapping__init(mm);
	for (k = 0; k < nb; k++)
		snprintf(hex + 2 * k, 3, "%02x", pm->build_id[k]);
	hex[2 * nb] = '\0';
	mm->memory_start = pm->start;
	mm->memory_limit = pm->end;
	mm->file_offset = pm->offset;
	mm->filename = pm->path < p->nstrings
		? pp_str(c, p->strings[pm->path], p->string_lens[pm->path]) : 0;
	mm->build_id = pp_cstr(c, hex);
	if (mm->filename < 0 || mm->build_id < 0)
		return -ENOMEM;
	/* every location carries its lines: pprof must not look for the binaries */
	mm->has_functions = mm->has_filenames = mm->has_line_numbers = mm->has_inline_frames = 1;
	return 0;
}

static void pp_release(struct pp *c)
{
	size_t i;

	for (i = 0; i < c->nstrs; i++)
		free(c->strs[i]);
	free(c->strs);
	prs_strmap_release(&c->smap);
	prs_buf_release(&c->scratch);
	prs_buf_release(&c->sample);
	free(c->funcs);
	prs_map64_release(&c->fmap);
	free(c->locs);
	free(c->lines);
	free(c->frame_loc);
	prs_map64_release(&c->proc_loc);
	prs_map64_release(&c->proc_map);
	free(c->map_taken);
	free(c->copies);
	free(c->ids);
	prs_view_free(c->v);
}

/* The generated structs of the whole profile, pointing into c's arrays. */
struct pp_msgs {
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType vt[3], period_type;
	Perftools__Profiles__ValueType *vtp[3];
	Perftools__Profiles__Mapping *maps;
	Perftools__Profiles__Mapping **mapp;
	int64_t comment;
	/* what each Sample needs (put_sample) */
	int64_t s_thread, s_tname, s_pid;
	uint64_t period;
};

static void msgs_free(struct pp_msgs *m)
{
	free(m->maps);
	free(m->mapp);
}

/* v as a varint at b (10 bytes at most); its length */
static size_t varint_at(uint8_t *b, uint64_t v)
{
	size_t n = 0;

	do {
		b[n++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
	return n;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v > 0x7f) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Appends v as a protobuf varint. */
static void put_varint(struct gz_out *g, uint64_t v)
{
	uint8_t b[10];

	gz_append(&g->base, varint_at(b, v), b);
}

/* A Label's bytes at b (the fields that are not 0, as protobuf-c packs a proto3 message): key,
 * str, num. Its length (at most 33). */
static size_t label_at(uint8_t *b, int64_t key, int64_t str, int64_t num)
{
	size_t n = 0;

	if (key) {
		b[n++] = 1u << 3 | PROTOBUF_C_WIRE_TYPE_VARINT;
		n += varint_at(b + n, (uint64_t)key);
	}
	if (str) {
		b[n++] = 2u << 3 | PROTOBUF_C_WIRE_TYPE_VARINT;
		n += varint_at(b + n, (uint64_t)str);
	}
	if (num) {
		b[n++] = 3u << 3 | PROTOBUF_C_WIRE_TYPE_VARINT;
		n += varint_at(b + n, (uint64_t)num);
	}
	return n;
}

/*
 * Packs view stack i as the Profile's next `sample` (field 2: its tag, length, then the Sample
 * message), byte for byte as protobuf-c packs it (packed location_id and value, one Label
 * message per label), written here: protobuf-c's generic packing (its size pass, then the
 * pack) was a fifth of the export's instructions. c->ids holds the locations. 0 or -ENOMEM.
 */
static int put_sample(struct pp *c, const struct pp_msgs *m, struct gz_out *g,
		      const struct prs_view_stack *vs)
{
	uint8_t lab[3][40], head[32];
	size_t nlab[3], nl = 0, locs = 0, vals = 0, body, h = 0, k;
	int64_t v[3];
	size_t tnlen = 0;
	const char *tn = prs_view_thread_name(c->v, vs->pid, vs->tid, &tnlen);
	uint64_t w = vs->weight;
	size_t nv = m->prof.n_sample_type;

	v[0] = w > INT64_MAX ? INT64_MAX : (int64_t)w;
	v[1] = v[2] = 0;
	if (m->period) {
		double ns = (double)w * (double)m->period;
		int64_t vns = ns >= 9.2e18 ? INT64_MAX : (int64_t)w * (int64_t)m->period;

		v[1] = vns;
		v[2] = vs->leaf != PRS_VIEW_NONE ? 0 : vns;
	}
	/* folded input has no threads (tid 0, no name): no labels then */
	if (vs->pid)
		nlab[nl] = label_at(lab[nl], m->s_pid, 0, vs->pid), nl++;
	if (vs->tid != 0 || tn)
		nlab[nl] = label_at(lab[nl], m->s_thread, 0, vs->tid), nl++;
	if (tn) {
		int64_t ts = pp_str(c, tn, tnlen);

		if (ts < 0)
			return -ENOMEM;
		nlab[nl] = label_at(lab[nl], m->s_tname, ts, 0), nl++;
	}
	for (k = 0; k < c->nids; k++)
		locs += varint_len(c->ids[k]);
	for (k = 0; k < nv; k++)
		vals += varint_len((uint64_t)v[k]);
	body = (locs ? 1 + varint_len(locs) + locs : 0) + (nv ? 1 + varint_len(vals) + vals : 0);
	for (k = 0; k < nl; k++)
		body += 1 + varint_len(nlab[k]) + nlab[k];
	if (prs_buf_reserve(&c->sample, body))
		return -ENOMEM;
	prs_buf_reset(&c->sample);
	head[h++] = 2u << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	h += varint_at(head + h, body);
	gz_append(&g->base, h, head);
	if (locs) {
		uint8_t *b = c->sample.data;
		size_t n = 0;

		b[n++] = 1u << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
		n += varint_at(b + n, locs);
		for (k = 0; k < c->nids; k++)
			n += varint_at(b + n, c->ids[k]);
		c->sample.len = n;
	}
	if (nv) {
		uint8_t *b = c->sample.data + c->sample.len;
		size_t n = 0;

		b[n++] = 2u << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
		n += varint_at(b + n, vals);
		for (k = 0; k < nv; k++)
			n += varint_at(b + n, (uint64_t)v[k]);
		c->sample.len += n;
	}
	for (k = 0; k < nl; k++) {
		uint8_t *b = c->sample.data + c->sample.len;
		size_t n = 0;

		b[n++] = 3u << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
		n += varint_at(b + n, nlab[k]);
		memcpy(b + n, lab[k], nlab[k]);
		c->sample.len += n + nlab[k];
	}
	gz_append(&g->base, c->sample.len, c->sample.data);
	return 0;
}

/*
 * The Profile's locations (field 4), then its functions (field 5), each message packed on its
 * own as protobuf-c packs a repeated message field: made one at a time from c's arrays, not
 * all as generated structs (13 MB of them for the 100k locations of a 1M-sample profile).
 * 0 or -ENOMEM.
 */
static int put_locs_funcs(const struct pp *c, struct gz_out *g)
{
	Perftools__Profiles__Line *lines = NULL, **linep = NULL;
	Perftools__Profiles__Location loc;
	Perftools__Profiles__Function fn;
	size_t cap = 0, cap_p = 0, i, k;

	for (i = 0; i < c->nlocs; i++) {
		const struct pp_loc *l = &c->locs[i];

		if (prs_array_grow((void **)&lines, &cap, l->nlines, sizeof(*lines)) ||
		    prs_array_grow((void **)&linep, &cap_p, l->nlines, sizeof(*linep))) {
			free(lines);
			free(linep);
			return -ENOMEM;
		}
		perftools__profiles__location__init(&loc);
		loc.id = i + 1;
		loc.mapping_id = l->mapping;
		loc.address = l->addr;
		loc.n_line = l->nlines;
		loc.line = linep;
		for (k = 0; k < l->nlines; k++) {
			perftools__profiles__line__init(&lines[k]);
			lines[k].function_id = c->lines[l->first + k].func;
			lines[k].line = c->lines[l->first + k].line;
			linep[k] = &lines[k];
		}
		put_varint(g, 4u << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
		put_varint(g, perftools__profiles__location__get_packed_size(&loc));
		perftools__profiles__location__pack_to_buffer(&loc, &g->base);
	}
	free(lines);
	free(linep);
	for (i = 0; i < c->nfuncs; i++) {
		perftools__profiles__function__init(&fn);
		fn.id = i + 1;
		fn.name = c->funcs[i].name;
		/* pprof "demangles" a function whose system name equals its name: one that looks like
		 * C++ loses its <...> parts, which leaves nothing of Python's "<module>" or
		 * "<lambda>" (shown as <unknown>) and "::method" of Rust's "<T as Trait>::method". A
		 * name that starts with '<' gets no system name, which pprof keeps as it is. */
		fn.system_name = c->strs[c->funcs[i].name][0] == '<' ? 0 : c->funcs[i].name;
		fn.filename = c->funcs[i].file;
		put_varint(g, 5u << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
		put_varint(g, perftools__profiles__function__get_packed_size(&fn));
		perftools__profiles__function__pack_to_buffer(&fn, &g->base);
	}
	return 0;
}

int prs_export_pprof(const struct prs_profile *p, enum prs_view view, FILE *out,
		     struct prs_err *err)
{
	return prs_export_pprof_view(p, &(struct prs_view_opts){ .view = view }, out, err);
}

int prs_export_pprof_view(const struct prs_profile *p, const struct prs_view_opts *vo, FILE *out,
			  struct prs_err *err)
{
	struct pp *c = calloc(1, sizeof(*c));
	struct pp_msgs *m = calloc(1, sizeof(*m));
	struct gz_out *g = NULL;
	const struct prs_view_stack *vs;
	uint64_t period = prs_profile_period_ns(p);
	size_t nsamp = 0, nmaps, i;
	Perftools__Profiles__Profile head;
	const char *command = prs_profile_meta_get(p, "command");
	unsigned nvt = period ? 3 : 1;
	int rc = 0;

	if (!c || !m) {
		free(c);
		free(m);
		return prs_err_set(err, -ENOMEM, "pprof export: out of memory");
	}
	c->p = p;
	prs_strmap_init(&c->smap);
	prs_buf_init(&c->scratch);
	prs_buf_init(&c->sample);
	prs_map64_init(&c->fmap);
	prs_map64_init(&c->proc_loc);
	prs_map64_init(&c->proc_map);
	if (pp_cstr(c, "") != 0)
		goto nomem;
	c->main_map = main_mapping(p);

	/* the view's stacks: samples per (process, thread, stack, leaf) */
	if ((rc = prs_view_new(p, &(struct prs_view_opts){ .view = vo->view, .by_thread = true,
							  .raw_frames = true,
							  .python_stacks = vo->python_stacks }, &c->v, err)))
		goto out;
	vs = prs_view_stacks(c->v, &nsamp);
	c->frame_loc = calloc(prs_view_nframes(c->v), sizeof(*c->frame_loc));
	c->map_taken = calloc(p->nmappings ? p->nmappings : 1, sizeof(*c->map_taken));
	if (!c->frame_loc || !c->map_taken)
		goto nomem;
	c->one_process = true;
	for (i = 1; i < nsamp && c->one_process; i++)
		c->one_process = vs[i].pid == vs[0].pid;
	/* the off-CPU leaves first, in the order the samples showed them: their locations have the
	 * first ids, as they always had */
	for (i = p->nframes; i < prs_view_nframes(c->v); i++) {
		enum prs_kind k = prs_view_frame_kind(c->v, (uint32_t)i);

		if (k >= PRS_KIND_OFF_IO && k <= PRS_KIND_OFF_OTHER && !frame_loc(c, (uint32_t)i, 0))
			goto nomem;
	}
	/* every location, in the order the samples show them (their ids); put_sample finds them */
	for (i = 0; i < nsamp; i++)
		if (stack_new_locs(c, vs, i))
			goto nomem;

	/* the generated structs */
	perftools__profiles__profile__init(&m->prof);
	for (i = 0; i < 3; i++) {
		perftools__profiles__value_type__init(&m->vt[i]);
		m->vtp[i] = &m->vt[i];
	}
	perftools__profiles__value_type__init(&m->period_type);
	m->vt[0].type = pp_cstr(c, "samples");
	m->vt[0].unit = pp_cstr(c, "count");
	m->vt[1].type = pp_cstr(c, "wall");
	m->vt[1].unit = m->vt[2].unit = pp_cstr(c, "nanoseconds");
	m->vt[2].type = pp_cstr(c, "cpu");
	if (period) {
		m->period_type = vo->view == PRS_VIEW_WALL ? m->vt[1] : m->vt[2];
		m->prof.period = (int64_t)period;
		m->prof.default_sample_type = vo->view == PRS_VIEW_WALL ? m->vt[1].type : m->vt[2].type;
	} else {
		m->period_type = m->vt[0];
		m->prof.period = 1;
	}
	m->s_thread = pp_cstr(c, "thread");
	m->s_tname = pp_cstr(c, "thread_name");
	m->comment = command ? pp_cstr(c, command) : 0;
	m->period = period;
	/* a pid label where the profile knows processes (folded input does not) */
	for (i = 0; i < nsamp && !m->s_pid; i++)
		if (vs[i].pid)
			m->s_pid = pp_cstr(c, "pid");
	if (m->vt[0].type < 0 || m->vt[0].unit < 0 || m->vt[1].type < 0 || m->vt[1].unit < 0 ||
	    m->vt[2].type < 0 || m->s_thread < 0 || m->s_tname < 0 || m->comment < 0 || m->s_pid < 0)
		goto nomem;
	m->prof.n_sample_type = nvt;
	m->prof.sample_type = m->vtp;
	m->prof.period_type = &m->period_type;
	m->prof.time_nanos = start_time_ns(p);
	m->prof.duration_nanos = duration_ns(p);
	if (m->comment) {
		m->prof.n_comment = 1;
		m->prof.comment = &m->comment;
	}

	nmaps = p->nmappings + c->ncopies;
	m->maps = calloc(nmaps ? nmaps : 1, sizeof(*m->maps));
	m->mapp = calloc(nmaps ? nmaps : 1, sizeof(*m->mapp));
	if (!m->maps || !m->mapp)
		goto nomem;
	for (i = 0; i < nmaps; i++) {
		Perftools__Profiles__Mapping *mm = &m->maps[i];
		uint32_t k = i < p->nmappings ? (uint32_t)i : c->copies[i - p->nmappings];

		if (put_mapping(c, mm, &p->mappings[k]))
			goto nomem;
		mm->id = i < p->nmappings ? mapping_id(c, k) : i + 1;
		m->mapp[mm->id - 1] = mm;
	}
	m->prof.n_mapping = nmaps;
	m->prof.mapping = m->mapp;

	g = calloc(1, sizeof(*g));
	if (!g)
		goto nomem;
	g->base.append = gz_append;
	g->out = out;
	/* 15 + 16: a gzip wrapper (what pprof's reader sniffs for). Level 1, as Go's runtime/pprof
	 * writes its profiles (gzip.BestSpeed): deflate at the default level 6 was 40 % of the
	 * export's time on a 1M-sample profile, for a file a little smaller */
	if (deflateInit2(&g->zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		g = NULL;
		goto nomem;
	}
	/* sample_type alone, the samples, then the rest: the fields in number order */
	perftools__profiles__profile__init(&head);
	head.n_sample_type = nvt;
	head.sample_type = m->vtp;
	perftools__profiles__profile__pack_to_buffer(&head, &g->base);
	for (i = 0; i < nsamp && !g->rc; i++)
		if (sample_locs(c, vs, i) || put_sample(c, m, g, &vs[i]))
			goto nomem_gz;
	assert(p->nmappings + c->ncopies == nmaps); /* stack_new_locs made every location */
	/* then the mappings (field 3): the Profile with nothing else */
	perftools__profiles__profile__init(&head);
	head.n_mapping = m->prof.n_mapping;
	head.mapping = m->prof.mapping;
	perftools__profiles__profile__pack_to_buffer(&head, &g->base);
	if (!g->rc && put_locs_funcs(c, g))
		goto nomem_gz;
	/* last, the fields after function (6 on): the samples' thread names may add strings */
	m->prof.n_sample_type = 0;
	m->prof.sample_type = NULL;
	m->prof.n_mapping = 0;
	m->prof.mapping = NULL;
	m->prof.n_string_table = c->nstrs;
	m->prof.string_table = c->strs;
	perftools__profiles__profile__pack_to_buffer(&m->prof, &g->base);
	if (!g->rc)
		gz_deflate(g, Z_FINISH);
	deflateEnd(&g->zs);
	if (g->rc || fflush(out) != 0 || ferror(out))
		rc = prs_err_set(err, -EIO, "pprof output: write error");
	goto out;
nomem_gz:
	deflateEnd(&g->zs);
nomem:
	rc = prs_err_set(err, -ENOMEM, "pprof export: out of memory");
out:
	free(g);
	msgs_free(m);
	free(m);
	pp_release(c);
	free(c);
	return rc;
}
