// SPDX-License-Identifier: MIT
/*
 * Finding a binary's separate debug file, as libdwfl's find_debuginfo callback. In order:
 *   1. by build id in each debug folder: DIR/.build-id/xx/yyyy.debug (the --debug-dir folders,
 *      then the target root's /usr/lib/debug, where Debian's -dbg and -dbgsym packages install);
 *   2. by .gnu_debuglink name: next to the file, in its .debug/ folder, then DIR/<file's folder>/
 *      NAME and DIR/NAME in each debug folder; a candidate is used only when its build id is the
 *      binary's;
 *   3. through debuginfod, when the symbolizer's options allow it: libdebuginfod asks the servers
 *      of DEBUGINFOD_URLS by build id and keeps what they send in its cache
 *      (~/.cache/debuginfod_client, or DEBUGINFOD_CACHE_PATH).
 * dwz's shared file (.gnu_debugaltlink, used by Debian's debug packages) is found by its name
 * (an absolute /usr/lib/debug/... one also under each debug folder), then by its own build id the
 * same ways.
 *
 * libdebuginfod is loaded with dlopen on the first query, as libdwfl does: it pulls in libcurl
 * and TLS, which every other run of pyrsprof would load for nothing.
 *
 * We do not use dwfl_standard_find_debuginfo: it cost 30-66 ms for a libc without debug info here
 * (it looks in more places, and asks debuginfod whenever DEBUGINFOD_URLS is set), this 0.8 ms.
 */
#include "symbol/symbol-internal.h"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/symbol.h"
#include "util/banned.h"

#define PATH_MAX_LEN 4096
#define MAX_DEBUG_DIRS 64

/*
 * libdebuginfod's entry points, loaded once per process and never unloaded (as libdwfl does): it
 * brings libcurl and a TLS library, whose global state does not survive a dlclose.
 */
static struct {
	debuginfod_client *(*begin)(void);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*end)(debuginfod_client *);
} api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
	void *lib = dlopen(DEBUGINFOD_SONAME, RTLD_LAZY | RTLD_LOCAL);

	if (!lib)
		return;
	*(void **)&api.begin = dlsym(lib, "debuginfod_begin");
	*(void **)&api.find_debuginfo = dlsym(lib, "debuginfod_find_debuginfo");
	*(void **)&api.end = dlsym(lib, "debuginfod_end");
	if (!api.begin || !api.find_debuginfo || !api.end)
		api.begin = NULL;
}

/* Makes d's debuginfod client. Returns false when libdebuginfod is missing or fails. */
static bool debuginfod_open(struct prs_debugsearch *d)
{
	pthread_once(&api_once, api_load);
	return api.begin && (d->client = api.begin()) != NULL;
}

int prs_debugsearch_init(struct prs_debugsearch *d, const struct prs_symbol_opts *o)
{
	size_t n = o && o->debug_dirs ? o->ndebug_dirs : 0, len;
	const char *root = o && o->root ? o->root : "";

	memset(d, 0, sizeof(*d));
	if (n > MAX_DEBUG_DIRS)
		return -E2BIG;
	len = strnlen(root, PATH_MAX_LEN);
	while (len > 0 && root[len - 1] == '/')
		len--; /* "/" and "" are the same root: none */
	d->root = strndup(root, len);
	d->dirs = calloc(n + 1, sizeof(*d->dirs));
	if (!d->root || !d->dirs)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		const char *dir = o->debug_dirs[i];

		if (!dir || !dir[0]) {
			prs_debugsearch_release(d);
			return -EINVAL;
		}
		if (!(d->dirs[d->ndirs++] = strndup(dir, PATH_MAX_LEN)))
			goto nomem;
	}
	if (asprintf(&d->dirs[d->ndirs], "%s/usr/lib/debug", d->root) < 0) {
		d->dirs[d->ndirs] = NULL;
		goto nomem;
	}
	d->ndirs++;
	d->debuginfod = o && o->debuginfod;
	return 0;
nomem:
	prs_debugsearch_release(d);
	return -ENOMEM;
}

void prs_debugsearch_release(struct prs_debugsearch *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->ndirs; i++)
		free(d->dirs[i]);
	free(d->dirs);
	free(d->root);
	if (d->client)
		api.end(d->client);
	memset(d, 0, sizeof(*d));
}

/* Opens path when its build id is id (any file when idlen is 0). Returns an fd or -1. */
static int open_if_build_id(const char *path, const uint8_t *id, size_t idlen)
{
	uint8_t got[PRS_BUILD_ID_MAX_SYM];
	size_t len = 0;

	if (idlen && (prs_elf_build_id(path, got, sizeof(got), &len) != 0 || len != idlen ||
		      memcmp(got, id, idlen) != 0))
		return -1;
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Writes "DIR/.build-id/xx/yyyy.debug" into path. Returns false when it does not fit. */
static bool build_id_path(char *path, size_t size, const char *dir, const uint8_t *id, size_t idlen)
{
	int off = snprintf(path, size, "%s/.build-id/%02x/", dir, id[0]);

	for (size_t i = 1; i < idlen && off > 0 && (size_t)off + 3 < size; i++)
		off += snprintf(path + off, size - (size_t)off, "%02x", id[i]);
	if (off <= 0 || (size_t)off + sizeof(".debug") > size)
		return false;
	memcpy(path + off, ".debug", sizeof(".debug"));
	return true;
}

/*
 * Asks the debuginfod servers for the debug file of build id id. Returns an fd (its path in the
 * client's cache written into path) or -1.
 */
static int from_debuginfod(struct prs_debugsearch *d, const uint8_t *id, size_t idlen, char *path,
			   size_t size)
{
	char *got = NULL;
	int fd;

	if (!d->debuginfod)
		return -1;
	if (!d->client && !debuginfod_open(d)) {
		d->debuginfod = false;
		return -1;
	}
	d->st_queries++;
	fd = api.find_debuginfo(d->client, id, (int)idlen, &got);
	if (fd >= 0 && (!got || snprintf(path, size, "%s", got) >= (int)size)) {
		close(fd);
		fd = -1;
	}
	free(got);
	if (fd < 0)
		return -1;
	close(fd); /* what a server sent is checked like a local file */
	fd = open_if_build_id(path, id, idlen);
	if (fd >= 0)
		d->st_fetched++;
	return fd;
}

/* By build id in every debug folder. */
static int local_by_build_id(const struct prs_debugsearch *d, const uint8_t *id, size_t idlen,
			     char *path, size_t size)
{
	int fd = -1;

	if (idlen < 2 || idlen > PRS_BUILD_ID_MAX_SYM)
		return -1;
	for (size_t i = 0; i < d->ndirs && fd < 0; i++)
		if (build_id_path(path, size, d->dirs[i], id, idlen))
			fd = open_if_build_id(path, id, idlen);
	return fd;
}

/* By .gnu_debuglink name, for the file file_name (which carries the root). */
static int by_debuglink(struct prs_debugsearch *d, const char *file_name, const char *link,
			const uint8_t *id, size_t idlen, char *path, size_t size)
{
	const char *slash = strrchr(file_name, '/');
	size_t dlen = slash ? (size_t)(slash - file_name) : 0, rlen = strlen(d->root);
	/* the debug folders mirror the target's tree: the file's folder without the root */
	const char *rel = dlen >= rlen && strncmp(file_name, d->root, rlen) == 0 ? file_name + rlen
										  : file_name;
	int rel_len = (int)(dlen - (size_t)(rel - file_name)), fd = -1, n;

	for (size_t k = 0; k < 2 + 2 * d->ndirs && fd < 0; k++) {
		const char *dir = k >= 2 ? d->dirs[(k - 2) / 2] : NULL;

		if (k == 0)
			n = snprintf(path, size, "%.*s/%s", (int)dlen, file_name, link);
		else if (k == 1)
			n = snprintf(path, size, "%.*s/.debug/%s", (int)dlen, file_name, link);
		else if (k % 2 == 0)
			n = snprintf(path, size, "%s%.*s/%s", dir, rel_len, rel, link);
		else
			n = snprintf(path, size, "%s/%s", dir, link);
		if (n <= 0 || (size_t)n >= size || strcmp(path, file_name) == 0)
			continue;
		fd = open_if_build_id(path, id, idlen);
	}
	return fd;
}

/* The build id in the .gnu_debugaltlink section of path (a name, a NUL, the id). */
static size_t altlink_id(const char *path, uint8_t *id, size_t max)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		goto out;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *data;
		const char *nul;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(name, ".gnu_debugaltlink") != 0)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf || !(nul = memchr(data->d_buf, '\0', data->d_size)))
			break;
		len = data->d_size - (size_t)(nul + 1 - (const char *)data->d_buf);
		if (len > max)
			len = 0;
		else
			memcpy(id, nul + 1, len);
		break;
	}
out:
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	return len;
}

/*
 * Opens the altlink name link: a relative one next to the debug file file_name; an absolute one
 * in the target's tree, and, when it is under /usr/lib/debug (Debian's /usr/lib/debug/.dwz/...),
 * under each debug folder as well, which is where an unpacked debug package has it.
 */
static int altlink_by_name(const struct prs_debugsearch *d, const char *file_name, const char *link,
			   const uint8_t *id, size_t idlen, char *path, size_t size)
{
	static const char usr_debug[] = "/usr/lib/debug/";
	const char *slash = file_name ? strrchr(file_name, '/') : NULL;
	int n, fd = -1;

	if (link[0] != '/') {
		if (!slash)
			return -1;
		n = snprintf(path, size, "%.*s/%s", (int)(slash - file_name), file_name, link);
		return n > 0 && (size_t)n < size ? open_if_build_id(path, id, idlen) : -1;
	}
	if (strncmp(link, usr_debug, sizeof(usr_debug) - 1) == 0)
		for (size_t i = 0; i < d->ndirs && fd < 0; i++) {
			n = snprintf(path, size, "%s/%s", d->dirs[i], link + sizeof(usr_debug) - 1);
			if (n > 0 && (size_t)n < size)
				fd = open_if_build_id(path, id, idlen);
		}
	if (fd < 0) {
		n = snprintf(path, size, "%s%s", d->root, link);
		if (n > 0 && (size_t)n < size)
			fd = open_if_build_id(path, id, idlen);
	}
	return fd;
}

/* dwz's shared file, named by the debug file file_name's .gnu_debugaltlink: by name, then by its
 * own build id. */
static int altlink(struct prs_debugsearch *d, const char *file_name, const char *link, char *path,
		   size_t size)
{
	uint8_t id[PRS_BUILD_ID_MAX_SYM] = { 0 };
	size_t idlen = file_name ? altlink_id(file_name, id, sizeof(id)) : 0;
	int fd = altlink_by_name(d, file_name, link, idlen ? id : NULL, idlen, path, size);

	if (fd < 0)
		fd = local_by_build_id(d, id, idlen, path, size);
	return fd >= 0 || idlen < 2 ? fd : from_debuginfod(d, id, idlen, path, size);
}

int prs_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink, GElf_Word crc,
		       char **debuginfo_file_name)
{
	struct prs_debugsearch *d = userdata ? *userdata : NULL;
	const unsigned char *bits = NULL;
	char path[PATH_MAX_LEN];
	GElf_Addr vaddr;
	size_t idlen;
	int fd, n;

	(void)modname;
	(void)base;
	if (!d)
		return -1;
	if (debuglink && debuglink[0] && crc == 0) {
		/* libdwfl asks for the .gnu_debugaltlink (dwz) file so: its name, and no CRC */
		fd = altlink(d, file_name, debuglink, path, sizeof(path));
		goto out;
	}
	n = dwfl_module_build_id(mod, &bits, &vaddr);
	idlen = n > 0 ? (size_t)n : 0;
	fd = local_by_build_id(d, bits, idlen, path, sizeof(path));
	if (fd < 0 && debuglink && debuglink[0] && !strchr(debuglink, '/') && file_name)
		fd = by_debuglink(d, file_name, debuglink, idlen ? bits : NULL, idlen, path, sizeof(path));
	if (fd < 0 && idlen > 1)
		fd = from_debuginfod(d, bits, idlen, path, sizeof(path));
out:
	if (fd >= 0) {
		d->st_found++;
		if (debuginfo_file_name && !(*debuginfo_file_name = strdup(path))) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}
