/*
 * tests/fuzz/fuzz_restore_checks.h — the property of the fuzz_restore target (the restorer,
 * backup/restorer.c, given hostile trees), shared with tests/test_fuzz_replay.c. Header-only,
 * static inline; rix_fuzz_check_restore returns NULL when the property holds, or a description
 * of the violation.
 *
 * The input is parts separated by NUL bytes (at most RIX_FUZZ_RESTORE_PARTS; a raw NUL cannot
 * be in a tree's JSON):
 *   part 0      the root tree blob's bytes
 *   part k > 0  stored both as a tree blob and as a data blob (the same bytes, the same ID), so
 *               that a node may name it as its subtree or in its content
 *   "$k"        (k a digit) in part i < k: replaced by the 64 hex digits of part k's ID before
 *               part i is stored (the parts are stored last first: no cycle can be written, and
 *               trees nest at most as deep as there are parts); any other "$k" stays
 *   "!..."      a part that starts with '!' holds options and is not stored: on its first line,
 *               letters (d --delete, v --verify, s --sparse, r --dry-run, m a plan budget of one
 *               byte: a batch per file, o ownership by name, c --overwrite if-changed, n never,
 *               w if-newer, 2 part 1 restored as a second root into the same target after part
 *               0), then lines "+PATTERN" (--include), "-PATTERN" (--exclude), "*PATTERN"
 *               (--iinclude), "/PATTERN" (--iexclude), at most 8 of each
 *   "~..."      a part k > 0 that starts with '~': stored without it, each '#' a NUL byte (runs
 *               of zeros for --sparse)
 *
 * The directories, in R (made once, rix-fuzz-restore-<pid> under $RIX_FUZZ_RESTORE_DIR, /dev/shm
 * or /tmp; removed at exit, or by the next process when this one did not exit):
 *   R/repo               the repository (version 2, a cheap scrypt), shared by up to 1000 inputs
 *                        (only an input's own blobs can be named: their IDs come from its bytes)
 *   R/b                  B, a fresh one each input (removed after):
 *   B/l1/l2/l3/target    the target, made empty before the restore
 *   B/l1/s1, B/l1/l2/s2, B/l1/l2/l3/s3, B/out/f, B/l1/l2/l3/d/   what it must not touch: "../s3",
 *                        "../../s2", "../../../s1", "../../../../out/f" from the target
 *
 * RIX_FUZZ_RESTORE_VERBOSE set: each restore's answer, errors and the target's listing on stderr.
 *
 * The property:
 *   - rix_restore returns 0 with no error reported, or RIX_EIO with at least one; each error
 *     reported once (the callbacks count sum.errors) with a path that starts with '/' and a
 *     message; RIX_EINVAL only for includes given with excludes or a dry run with verify;
 *     otherwise only a root tree that
 *     cannot be loaded (RIX_ENOTFOUND, RIX_ECORRUPT, RIX_EAUTH) or RIX_ENOMEM;
 *   - nothing outside the target changed: every entry of B but the target,
 *     before and after (type, mode, owner, size, mtime, inode, link count, a file's content, a
 *     symlink's target), so no write through a symlink and no hard link to anything outside.
 */
#ifndef RIX_FUZZ_RESTORE_CHECKS_H
#define RIX_FUZZ_RESTORE_CHECKS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "rix/rix.h"

#define RIX_FUZZ_RESTORE_PARTS 8
#define RIX_FUZZ_RESTORE_PATTERNS 8

/* ---- the directory ------------------------------------------------------------------------- */

/* Removes name under dfd, whatever it is (directories made writable and searchable first). */
static inline void rix_fuzz_restore_rm(int dfd, const char *name, int depth)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT || depth > 64)
		return;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		(void)fchmodat(dfd, name, 0700, 0);
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd >= 0) {
		(void)fchmod(fd, 0700);
		DIR *d = fdopendir(fd);
		if (d == NULL) {
			close(fd);
		} else {
			/* names first: removing while reading could skip some */
			char **names = NULL;
			size_t n = 0, cap = 0;
			for (struct dirent *e; (e = readdir(d)) != NULL;) {
				if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
					continue;
				if (n == cap) {
					cap = cap ? 2 * cap : 16;
					char **v = realloc(names, cap * sizeof(*v));
					if (v == NULL)
						break;
					names = v;
				}
				if ((names[n] = strdup(e->d_name)) != NULL)
					n++;
			}
			for (size_t i = 0; i < n; i++) {
				rix_fuzz_restore_rm(dirfd(d), names[i], depth + 1);
				free(names[i]);
			}
			free(names);
			closedir(d);
		}
	}
	(void)unlinkat(dfd, name, AT_REMOVEDIR);
}

/* A growing text: what a walk saw. */
struct rix_fuzz_restore_text {
	char *s;
	size_t n, cap;
	bool nomem;
};

static inline void rix_fuzz_restore_put(struct rix_fuzz_restore_text *t, const void *p, size_t n)
{
	if (t->nomem)
		return;
	if (t->n + n + 1 > t->cap) {
		size_t c = t->cap ? t->cap : 4096;
		while (c < t->n + n + 1)
			c *= 2;
		char *s = realloc(t->s, c);
		if (s == NULL) {
			t->nomem = true;
			return;
		}
		t->s = s;
		t->cap = c;
	}
	memcpy(t->s + t->n, p, n);
	t->n += n;
	t->s[t->n] = '\0';
}

static int rix_fuzz_restore_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Appends a line per entry beneath dfd/name (rel: its path from B) to t, in name order, never
 * through a symlink; skips the target.
 */
static inline void rix_fuzz_restore_walk(struct rix_fuzz_restore_text *t, int dfd, const char *name, const char *rel,
					 int depth)
{
	if (strcmp(rel, "l1/l2/l3/target") == 0 || depth > 16)
		return;
	struct stat st;
	char line[8192];
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		snprintf(line, sizeof(line), "%s: lstat %d\n", rel, errno);
		rix_fuzz_restore_put(t, line, strlen(line));
		return;
	}
	int n = snprintf(line, sizeof(line), "%s: mode %o uid %u gid %u size %lld mtime %lld.%09ld ino %llu links %llu", rel,
			 (unsigned)st.st_mode, (unsigned)st.st_uid, (unsigned)st.st_gid, (long long)st.st_size,
			 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (unsigned long long)st.st_ino,
			 (unsigned long long)st.st_nlink);
	rix_fuzz_restore_put(t, line, (size_t)n);
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t k = readlinkat(dfd, name, target, sizeof(target));
		rix_fuzz_restore_put(t, " -> ", 4);
		if (k > 0)
			rix_fuzz_restore_put(t, target, (size_t)k);
	} else if (S_ISREG(st.st_mode)) {
		int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		char buf[256];
		ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
		if (fd >= 0)
			close(fd);
		rix_fuzz_restore_put(t, " content ", 9);
		if (k > 0)
			rix_fuzz_restore_put(t, buf, (size_t)k);
	}
	rix_fuzz_restore_put(t, "\n", 1);
	if (!S_ISDIR(st.st_mode))
		return;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		rix_fuzz_restore_put(t, "(unreadable)\n", 13);
		return;
	}
	char **names = NULL;
	size_t cnt = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 16;
			char **v = realloc(names, cap * sizeof(*v));
			if (v == NULL) {
				t->nomem = true;
				break;
			}
			names = v;
		}
		if ((names[cnt] = strdup(e->d_name)) == NULL) {
			t->nomem = true;
			break;
		}
		cnt++;
	}
	if (cnt > 0)
		qsort(names, cnt, sizeof(*names), rix_fuzz_restore_cmp_names);
	for (size_t i = 0; i < cnt; i++) {
		char sub[4096];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
		rix_fuzz_restore_walk(t, dirfd(d), names[i], sub, depth + 1);
		free(names[i]);
	}
	free(names);
	closedir(d);
}

/* The root of the inputs' directories, made once (removed at exit); "" when it cannot be. */
static char rix_fuzz_restore_root[4096];
/* The repository, R/repo, and how many inputs it took (made anew every RIX_FUZZ_RESTORE_REUSE:
 * making its 256 pack folders costs more than the rest of an input). */
static rix_repo *rix_fuzz_restore_repo;
static unsigned rix_fuzz_restore_uses;
#define RIX_FUZZ_RESTORE_REUSE 1000u

static inline void rix_fuzz_restore_cleanup(void)
{
	rix_repo_free(rix_fuzz_restore_repo);
	rix_fuzz_restore_repo = NULL;
	if (rix_fuzz_restore_root[0] != '\0')
		rix_fuzz_restore_rm(AT_FDCWD, rix_fuzz_restore_root, 0);
}

/* The repository for one more input (a fresh one every RIX_FUZZ_RESTORE_REUSE), or NULL; *why
 * set when making it failed otherwise than for memory. */
static inline rix_repo *rix_fuzz_restore_get_repo(const char **why)
{
	if (rix_fuzz_restore_repo != NULL && rix_fuzz_restore_uses++ < RIX_FUZZ_RESTORE_REUSE)
		return rix_fuzz_restore_repo;
	rix_repo_free(rix_fuzz_restore_repo);
	rix_fuzz_restore_repo = NULL;
	rix_fuzz_restore_uses = 1;
	char repo[4200];
	snprintf(repo, sizeof(repo), "%s/repo", rix_fuzz_restore_root);
	rix_fuzz_restore_rm(AT_FDCWD, repo, 0);
	rix_backend *be;
	if (mkdir(repo, 0700) != 0 || rix_backend_local_open(&be, repo, true) != 0) {
		*why = "cannot open the repository's folder";
		return NULL;
	}
	rix_repo_options ro = RIX_REPO_OPTIONS_INIT;
	ro.repo_version = 2;
	ro.scrypt_n = 128;
	ro.scrypt_r = 1;
	ro.scrypt_p = 1;
	ro.username = "fuzz";
	ro.hostname = "fuzz";
	rix_repo *r;
	int rc = rix_repo_init(&r, be, "pw", 2, &ro);
	if (rc != 0) {
		rix_backend_free(be);
		*why = rc == RIX_ENOMEM ? NULL : "cannot make the repository";
		return NULL;
	}
	if ((rc = rix_repo_load_index(NULL, r, NULL, NULL)) != 0) {
		rix_repo_free(r);
		*why = rc == RIX_ENOMEM ? NULL : "cannot load the empty index";
		return NULL;
	}
	rix_fuzz_restore_repo = r;
	return r;
}

/*
 * R: <base>/rix-fuzz-restore-<pid>. A process that crashes (what a fuzzer's finding does) or
 * ends with _exit (libFuzzer's merge and time limit) leaves its R behind: those of processes
 * no longer running are removed here.
 */
static inline const char *rix_fuzz_restore_root_dir(void)
{
	if (rix_fuzz_restore_root[0] != '\0')
		return rix_fuzz_restore_root;
	const char *base = getenv("RIX_FUZZ_RESTORE_DIR");
	if (base == NULL || base[0] == '\0')
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = bfd >= 0 ? fdopendir(bfd) : NULL;
	if (d == NULL && bfd >= 0)
		close(bfd);
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
		char *end;
		if (strncmp(e->d_name, "rix-fuzz-restore-", 17) != 0 || e->d_name[17] == '\0')
			continue;
		long pid = strtol(e->d_name + 17, &end, 10);
		if (*end == '\0' && pid > 0 && (pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)))
			rix_fuzz_restore_rm(dirfd(d), e->d_name, 0);
	}
	if (d != NULL)
		closedir(d);
	snprintf(rix_fuzz_restore_root, sizeof(rix_fuzz_restore_root), "%s/rix-fuzz-restore-%ld", base, (long)getpid());
	if (mkdir(rix_fuzz_restore_root, 0700) != 0) {
		rix_fuzz_restore_root[0] = '\0';
		return NULL;
	}
	atexit(rix_fuzz_restore_cleanup);
	return rix_fuzz_restore_root;
}

/* B and what is in it but the target's content: 0, or -1. */
static inline int rix_fuzz_restore_layout(const char *b)
{
	char p[4200];
	static const char *const dirs[] = { "", "/l1", "/l1/l2", "/l1/l2/l3", "/l1/l2/l3/d", "/l1/l2/l3/target", "/out" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", b, dirs[i]);
		if (mkdir(p, 0755) != 0)
			return -1;
	}
	static const char *const files[] = { "/l1/s1", "/l1/l2/s2", "/l1/l2/l3/s3", "/out/f" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", b, files[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		bool ok = write(fd, "sentinel\n", 9) == 9;
		close(fd);
		if (!ok)
			return -1;
	}
	return 0;
}

/* ---- the input ------------------------------------------------------------------------------- */

struct rix_fuzz_restore_input {
	const uint8_t *part[RIX_FUZZ_RESTORE_PARTS];
	size_t len[RIX_FUZZ_RESTORE_PARTS];
	size_t nparts;
	bool stored[RIX_FUZZ_RESTORE_PARTS]; /* a blob (not options) */
	rix_id id[RIX_FUZZ_RESTORE_PARTS];
	/* options */
	bool delete_extra, verify, sparse, dry_run, tiny, by_name, second;
	rix_restore_overwrite overwrite;
	char *pat[4][RIX_FUZZ_RESTORE_PATTERNS]; /* include, exclude, iinclude, iexclude */
	size_t npat[4];
};

static inline void rix_fuzz_restore_options(struct rix_fuzz_restore_input *in, const uint8_t *p, size_t n)
{
	size_t i = 1;
	for (; i < n && p[i] != '\n'; i++) {
		switch (p[i]) {
		case 'd': in->delete_extra = true; break;
		case 'v': in->verify = true; break;
		case 's': in->sparse = true; break;
		case 'r': in->dry_run = true; break;
		case 'm': in->tiny = true; break;
		case 'o': in->by_name = true; break;
		case 'c': in->overwrite = RIX_OVERWRITE_IF_CHANGED; break;
		case 'n': in->overwrite = RIX_OVERWRITE_NEVER; break;
		case 'w': in->overwrite = RIX_OVERWRITE_IF_NEWER; break;
		case '2': in->second = true; break;
		default: break;
		}
	}
	while (i < n) {
		size_t start = ++i;
		while (i < n && p[i] != '\n')
			i++;
		if (start >= i)
			continue;
		const char *kinds = "+-*/";
		const char *k = memchr(kinds, p[start], 4);
		if (k == NULL)
			continue;
		size_t which = (size_t)(k - kinds);
		if (in->npat[which] == RIX_FUZZ_RESTORE_PATTERNS)
			continue;
		char *s = malloc(i - start);
		if (s == NULL)
			continue;
		memcpy(s, p + start + 1, i - start - 1);
		s[i - start - 1] = '\0';
		in->pat[which][in->npat[which]++] = s;
	}
}

/* Part k with its "$j" (j > k, a stored part) replaced, or a "~" part's bytes with '#' as NUL:
 * *out (malloc'd), *n bytes. */
static inline int rix_fuzz_restore_subst(const struct rix_fuzz_restore_input *in, size_t k, uint8_t **out, size_t *n)
{
	const uint8_t *p = in->part[k];
	size_t len = in->len[k];
	uint8_t *o = malloc(len * 32 + 1); /* "$j" (2 bytes) becomes 64 */
	if (o == NULL)
		return -1;
	size_t w = 0;
	if (k > 0 && len > 0 && p[0] == '~') {
		for (size_t i = 1; i < len; i++)
			o[w++] = p[i] == '#' ? 0 : p[i];
		*out = o;
		*n = w;
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '$' && i + 1 < len && p[i + 1] >= '1' && p[i + 1] <= '9') {
			size_t j = (size_t)(p[i + 1] - '0');
			if (j > k && j < in->nparts && in->stored[j]) {
				char hex[65];
				rix_id_to_hex(hex, &in->id[j]);
				memcpy(o + w, hex, 64);
				w += 64;
				i++;
				continue;
			}
		}
		o[w++] = p[i];
	}
	*out = o;
	*n = w;
	return 0;
}

/* ---- the check ------------------------------------------------------------------------------- */

struct rix_fuzz_restore_errs {
	uint64_t errors, items;
	const char *why;
};

static inline void rix_fuzz_restore_on_error(void *payload, const char *path, const char *msg)
{
	struct rix_fuzz_restore_errs *e = payload;
	e->errors++;
	if (getenv("RIX_FUZZ_RESTORE_VERBOSE") != NULL)
		fprintf(stderr, "fuzz_restore: error %s: %s\n", path ? path : "(null)", msg ? msg : "(null)");
	if (path == NULL || path[0] != '/')
		e->why = "an error reported without a path from the root";
	else if (msg == NULL || msg[0] == '\0')
		e->why = "an error reported without a message";
}

static inline void rix_fuzz_restore_on_warn(void *payload, const char *path, const char *msg)
{
	struct rix_fuzz_restore_errs *e = payload;
	if (path == NULL || path[0] != '/' || msg == NULL || msg[0] == '\0')
		e->why = "a warning without a path or a message";
}

static inline void rix_fuzz_restore_on_item(void *payload, const char *action, const char *path, bool file,
					    uint64_t size)
{
	struct rix_fuzz_restore_errs *e = payload;
	(void)file;
	(void)size;
	e->items++;
	if (action == NULL || path == NULL || path[0] != '/')
		e->why = "an item without an action or a path from the root";
}

/* One restore of root into the target and what it must answer. */
static inline const char *rix_fuzz_restore_once(const struct rix_fuzz_restore_input *in, rix_repo *r, const rix_id *root,
						const char *target)
{
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.includes = (const char *const *)in->pat[0];
	o.nincludes = in->npat[0];
	o.excludes = (const char *const *)in->pat[1];
	o.nexcludes = in->npat[1];
	o.iincludes = (const char *const *)in->pat[2];
	o.niincludes = in->npat[2];
	o.iexcludes = (const char *const *)in->pat[3];
	o.niexcludes = in->npat[3];
	o.delete_extra = in->delete_extra;
	o.verify = in->verify;
	o.sparse = in->sparse;
	o.dry_run = in->dry_run;
	o.ownership_by_name = in->by_name;
	o.overwrite = in->overwrite;
	o.memory = in->tiny ? 1 : 0;
	o.workers = 2;
	struct rix_fuzz_restore_errs e = { 0 };
	o.error = rix_fuzz_restore_on_error;
	o.warn = rix_fuzz_restore_on_warn;
	o.item = rix_fuzz_restore_on_item;
	o.payload = &e;
	rix_restore_summary sum;
	memset(&sum, 0xa5, sizeof(sum));
	int rc = rix_restore(&sum, r, root, target, &o);
	if (getenv("RIX_FUZZ_RESTORE_VERBOSE") != NULL) {
		fprintf(stderr, "fuzz_restore: rix_restore %d (%s): %llu errors, %llu items, %llu restored, %llu bytes\n", rc,
			rc ? rix_error_last() : "", (unsigned long long)e.errors, (unsigned long long)e.items,
			(unsigned long long)sum.files_restored, (unsigned long long)sum.bytes_restored);
		char cmd[4400];
		snprintf(cmd, sizeof(cmd), "cd '%s' && find . -printf '%%M %%n %%s %%p %%l\\n' >&2", target);
		if (system(cmd) != 0)
			fprintf(stderr, "fuzz_restore: (no listing)\n");
	}
	bool both = in->npat[0] + in->npat[2] > 0 && in->npat[1] + in->npat[3] > 0;
	if (e.why != NULL)
		return e.why;
	if (both || (in->dry_run && in->verify))
		return rc == RIX_EINVAL ? NULL : "includes with excludes, or a dry run with verify, not refused";
	if (rc == RIX_EINVAL)
		return "RIX_EINVAL for options that are valid";
	if (rc == RIX_ENOMEM)
		return NULL;
	if (e.errors != sum.errors)
		return "the errors reported are not the errors counted";
	if (rc == 0)
		return e.errors == 0 ? NULL : "errors reported, but 0 returned";
	if (rc == RIX_EIO)
		return e.errors > 0 ? NULL : "RIX_EIO with no error reported";
	if (rc == RIX_ENOTFOUND || rc == RIX_ECORRUPT || rc == RIX_EAUTH)
		return e.errors == 0 && e.items == 0 ? NULL : "a root tree that does not load, and entries restored";
	return "an unexpected return code";
}

static inline const char *rix_fuzz_check_restore(const uint8_t *data, size_t size)
{
	const char *root = rix_fuzz_restore_root_dir();
	if (root == NULL)
		return "cannot make the fuzz directory";
	struct rix_fuzz_restore_input in;
	memset(&in, 0, sizeof(in));
	/* the parts */
	size_t start = 0;
	for (size_t i = 0; i <= size && in.nparts < RIX_FUZZ_RESTORE_PARTS; i++) {
		if (i == size || data[i] == 0) {
			in.part[in.nparts] = data + start;
			in.len[in.nparts++] = i - start;
			start = i + 1;
		}
	}
	bool have_opts = false;
	for (size_t k = 0; k < in.nparts; k++) {
		if (k > 0 && !have_opts && in.len[k] > 0 && in.part[k][0] == '!') {
			rix_fuzz_restore_options(&in, in.part[k], in.len[k]);
			have_opts = true;
		} else {
			in.stored[k] = true;
		}
	}
	in.stored[0] = true;

	const char *why = NULL;
	char b[4200], target[4300];
	snprintf(b, sizeof(b), "%s/b", root);
	snprintf(target, sizeof(target), "%s/l1/l2/l3/target", b);
	rix_fuzz_restore_rm(AT_FDCWD, b, 0);
	rix_repo *r = NULL;
	struct rix_fuzz_restore_text before = { 0 }, after = { 0 };
	if (rix_fuzz_restore_layout(b) != 0) {
		why = "cannot lay out the fuzz directory";
		goto out;
	}
	if ((r = rix_fuzz_restore_get_repo(&why)) == NULL)
		goto out;
	/* the parts, last first */
	for (size_t k = in.nparts; k-- > 0;) {
		if (!in.stored[k])
			continue;
		uint8_t *p;
		size_t n;
		if (rix_fuzz_restore_subst(&in, k, &p, &n) != 0)
			goto out;
		int rc = rix_repo_save_blob(&in.id[k], NULL, r, RIX_BLOB_TREE, p, n);
		if (rc == 0 && k > 0)
			rc = rix_repo_save_blob(&in.id[k], NULL, r, RIX_BLOB_DATA, p, n);
		free(p);
		if (rc != 0) {
			why = rc == RIX_ENOMEM ? NULL : "cannot store a part";
			goto out;
		}
	}
	if (rix_repo_flush(r) != 0) {
		why = "cannot flush the repository";
		goto out;
	}
	rix_fuzz_restore_walk(&before, AT_FDCWD, b, "", 0);
	why = rix_fuzz_restore_once(&in, r, &in.id[0], target);
	if (why == NULL && in.second && in.nparts > 1 && in.stored[1])
		why = rix_fuzz_restore_once(&in, r, &in.id[1], target);
	rix_fuzz_restore_walk(&after, AT_FDCWD, b, "", 0);
	if (why == NULL && !before.nomem && !after.nomem &&
	    (before.n != after.n || memcmp(before.s, after.s, before.n) != 0)) {
		fprintf(stderr, "fuzz_restore: before:\n%s\nafter:\n%s\n", before.s, after.s);
		why = "something outside the target changed";
	}
out:
	free(before.s);
	free(after.s);
	for (size_t k = 0; k < 4; k++)
		for (size_t i = 0; i < in.npat[k]; i++)
			free(in.pat[k][i]);
	rix_fuzz_restore_rm(AT_FDCWD, b, 0);
	return why;
}

#endif
