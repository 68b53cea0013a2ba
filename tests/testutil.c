/*
 * tests/testutil.c — see testutil.h.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "testutil.h"

uint64_t rix_test_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void rix_test_fill_random(void *buf, size_t n, uint64_t *state)
{
	unsigned char *p = buf;
	while (n > 0) {
		uint64_t x = rix_test_next(state);
		size_t k = n < 8 ? n : 8;
		memcpy(p, &x, k);
		p += k;
		n -= k;
	}
}

void rix_test_random_id(rix_id *id, uint64_t *state)
{
	rix_test_fill_random(id->b, sizeof(id->b), state);
}

/* Atomic: code under test allocates from worker threads (restore, backup). */
static atomic_long fail_at_n, calls, live;

static int fa_fails(void)
{
	return atomic_fetch_add(&calls, 1) + 1 == atomic_load(&fail_at_n);
}

static void *fa_malloc(size_t n, void *ctx)
{
	(void)ctx;
	if (fa_fails())
		return NULL;
	void *p = malloc(n);
	if (p)
		atomic_fetch_add(&live, 1);
	return p;
}

static void *fa_calloc(size_t n, size_t s, void *ctx)
{
	(void)ctx;
	if (fa_fails())
		return NULL;
	void *p = calloc(n, s);
	if (p)
		atomic_fetch_add(&live, 1);
	return p;
}

static void *fa_realloc(void *p, size_t n, void *ctx)
{
	(void)ctx;
	if (fa_fails())
		return NULL;
	void *q = realloc(p, n);
	if (q && p == NULL)
		atomic_fetch_add(&live, 1);
	return q;
}

static void fa_free(void *p, void *ctx)
{
	(void)ctx;
	if (p) {
		atomic_fetch_sub(&live, 1);
		free(p);
	}
}

void rix_test_failalloc_install(long fail_at)
{
	atomic_store(&fail_at_n, fail_at);
	atomic_store(&calls, 0);
	atomic_store(&live, 0);
	rix_allocator a = { fa_malloc, fa_calloc, fa_realloc, fa_free, NULL };
	rix_allocator_set(&a);
}

long rix_test_failalloc_count(void)
{
	return atomic_load(&calls);
}

long rix_test_failalloc_live(void)
{
	return atomic_load(&live);
}

void rix_test_failalloc_remove(void)
{
	rix_allocator_set(NULL);
}

long rix_test_oom_run(const rix_test_oom *o)
{
	for (long at = 1;; at++) {
		if (at > o->max)
			fail_msg("%s: still failing with allocation %ld (at most %ld)", o->what, at, o->max);
		if (o->setup != NULL)
			o->setup(o->arg);
		rix_error_clear();
		rix_test_failalloc_install(at);
		rix_test_oom_round r = { .at = at };
		r.rc = o->run(o->arg);
		r.calls = rix_test_failalloc_count();
		r.live = rix_test_failalloc_live();
		rix_test_failalloc_remove();
		if (r.rc != 0 && r.rc != RIX_ENOMEM)
			fail_msg("%s, allocation %ld failing: %d (%s)", o->what, at, r.rc, rix_error_last());
		if (r.rc != 0 && rix_error_last()[0] == '\0')
			fail_msg("%s, allocation %ld failing: RIX_ENOMEM without a message", o->what, at);
		int check_live = o->live == RIX_TEST_OOM_LIVE_ZERO || (o->live == RIX_TEST_OOM_LIVE_ON_FAILURE && r.rc != 0);
		if (check_live && r.live != 0)
			fail_msg("%s, allocation %ld failing: %ld allocations leaked", o->what, at, r.live);
		if (o->must_fail && r.rc == 0 && r.calls >= at)
			fail_msg("%s: allocation %ld failed, and it succeeded", o->what, at);
		if (o->check != NULL)
			o->check(o->arg, &r);
		if (r.rc == 0 && r.calls < at) {
			if (getenv("RIX_TEST_OOM_VERBOSE") != NULL)
				fprintf(stderr, "%s: %ld rounds\n", o->what, at);
			return at;
		}
	}
}

long rix_test_oom_loop(const char *what, int (*run)(void *arg), void *arg, long max)
{
	rix_test_oom o = { .what = what, .run = run, .arg = arg, .max = max };
	return rix_test_oom_run(&o);
}

void *rix_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	char *buf = NULL;
	long n = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		n = ftell(f);
	if (n >= 0 && fseek(f, 0, SEEK_SET) == 0)
		buf = malloc((size_t)n + 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

void *rix_test_must_read(const char *path, size_t *len)
{
	void *buf = rix_test_read_file(path, len);
	if (buf == NULL)
		fail_msg("cannot read %s", path);
	return buf;
}

const char *rix_test_data_dir(void)
{
	const char *d = getenv("RIX_TEST_DATA");
	return d != NULL ? d : "tests/data";
}

void *rix_test_data_file(const char *rel, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", rix_test_data_dir(), rel);
	return rix_test_must_read(path, len);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

size_t rix_test_list_ids(const char *dir, char names[][65], size_t max)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strlen(e->d_name) == 64 && n < max)
			memcpy(names[n++], e->d_name, 65);
	closedir(d);
	qsort(names, n, 65, cmp_name);
	return n;
}

void rix_test_put_file(const char *dir, const char *name, const void *data, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL)
		fail_msg("cannot create %s", path);
	if (fwrite(data, 1, n, f) != n)
		fail_msg("cannot write %s", path);
	if (fclose(f) != 0)
		fail_msg("cannot close %s", path);
}

int rix_test_run(char **out, size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = rix_test_vrun(out, len, fmt, ap);
	va_end(ap);
	return rc;
}

int rix_test_tool(char **out, size_t *len, const char *dir, const char *cmd, const char *repo, const char *redir,
		  const char *fmt, ...)
{
	char args[8192];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= sizeof(args))
		fail_msg("arguments too long: %.200s...", args);
	return rix_test_run(out, len, "%s%s%s%s%s%s%s %s%s", dir != NULL ? "cd '" : "", dir != NULL ? dir : "",
			    dir != NULL ? "' && " : "", cmd, repo != NULL ? " -r '" : "", repo != NULL ? repo : "",
			    repo != NULL ? "'" : "", args, redir);
}

void rix_test_sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = rix_test_vrun(NULL, NULL, fmt, ap);
	va_end(ap);
	assert_int_equal(rc, 0);
}

int rix_test_vrun(char **out, size_t *len, const char *fmt, va_list ap)
{
	char cmd[16384];
	size_t len_;
	if (len == NULL)
		len = &len_;
	int k = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	if (k < 0 || (size_t)k >= sizeof(cmd))
		fail_msg("command too long: %.200s...", cmd);
	if (out != NULL) {
		*out = NULL;
		*len = 0;
	}
	fflush(NULL);
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	size_t n = 0, cap = 65536;
	char *buf = malloc(cap);
	assert_non_null(buf);
	size_t r;
	while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += r;
		if (cap - n - 1 == 0) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	buf[n] = '\0';
	int st = pclose(p);
	int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (out != NULL) {
		*out = buf;
		*len = n;
	} else {
		if (rc != 0)
			fprintf(stderr, "%s\n-> %d:\n%s\n", cmd, rc, buf);
		free(buf);
	}
	return rc;
}

void rix_test_need_restic(void)
{
	char *out;
	size_t len;
	int rc = rix_test_run(&out, &len, "command -v restic 2>&1");
	free(out);
	if (rc != 0)
		fail_msg("the restic binary is missing (scripts/deps.sh installs it)");
}

/*
 * The temporary directories made and not yet removed: a failed cmocka assertion leaves its test
 * at once, past the test's own cleanup, so whatever it made is removed when the process exits
 * (by the process that made it, not a forked child; RIX_TEST_KEEP=1 keeps them to look at).
 * Any thread may make and remove them (temp_mu).
 */
#define MAX_TEMP_DIRS 512
static char *temp_dirs[MAX_TEMP_DIRS];
static pid_t temp_owner;
static pthread_mutex_t temp_mu = PTHREAD_MUTEX_INITIALIZER;

static void remove_left_dirs(void)
{
	if (getpid() != temp_owner || getenv("RIX_TEST_KEEP") != NULL)
		return;
	for (size_t i = 0; i < MAX_TEMP_DIRS; i++) {
		pthread_mutex_lock(&temp_mu);
		char *d = temp_dirs[i];
		temp_dirs[i] = NULL;
		pthread_mutex_unlock(&temp_mu);
		if (d != NULL) {
			rix_test_remove_tree(d); /* and rix_test_restic's d.out */
			free(d);
		}
	}
}

static void remember_dir(const char *dir)
{
	pthread_mutex_lock(&temp_mu);
	if (temp_owner == 0) {
		temp_owner = getpid();
		atexit(remove_left_dirs);
	}
	for (size_t i = 0; i < MAX_TEMP_DIRS; i++)
		if (temp_dirs[i] == NULL) {
			temp_dirs[i] = strdup(dir);
			break;
		}
	pthread_mutex_unlock(&temp_mu);
}

static void forget_dir(const char *dir)
{
	pthread_mutex_lock(&temp_mu);
	for (size_t i = 0; i < MAX_TEMP_DIRS; i++)
		if (temp_dirs[i] != NULL && strcmp(temp_dirs[i], dir) == 0) {
			free(temp_dirs[i]);
			temp_dirs[i] = NULL;
		}
	pthread_mutex_unlock(&temp_mu);
}

void rix_test_mkdtemp(char *dir, size_t size, const char *prefix)
{
	const char *tmp = getenv("TMPDIR");
	int k = snprintf(dir, size, "%s/%s-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", prefix);
	if (k < 0 || (size_t)k >= size || mkdtemp(dir) == NULL)
		fail_msg("cannot make a temporary directory for %s", prefix);
	remember_dir(dir);
}

void rix_test_rmtree(const char *dir)
{
	if (dir[0] == '\0' || strchr(dir, '\'') != NULL)
		return;
	forget_dir(dir);
	/* restic leaves its files read-only: make them writable, then remove. */
	rix_test_run(NULL, NULL, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
}

void rix_test_remove_tree(const char *dir)
{
	char out[4200];
	snprintf(out, sizeof(out), "%s.out", dir);
	rix_test_rmtree(dir);
	rix_test_rmtree(out);
}

int rix_test_restic(const char *dir, const char *password, const char *args, char **output)
{
	rix_test_need_restic();
	char out[4200];
	snprintf(out, sizeof(out), "%s.out", dir);
	int rc = rix_test_run(NULL, NULL, "RESTIC_PASSWORD='%s' restic --no-cache -r '%s' %s > '%s' 2>&1", password,
			      dir, args, out);
	if (output != NULL) {
		size_t n;
		*output = rix_test_read_file(out, &n);
		if (*output == NULL)
			*output = strdup("(no output)");
	}
	return rc;
}

void rix_test_restic_cat_config_equals(const char *dir, const char *password, const char *want_json,
				       size_t want_len)
{
	char *got_text = NULL;
	if (rix_test_restic(dir, password, "cat config", &got_text) != 0)
		fail_msg("restic cat config failed: %s", got_text);
	json_t *got = json_loads(got_text, 0, NULL), *want = json_loadb(want_json, want_len, 0, NULL);
	if (got == NULL || want == NULL || !json_equal(got, want))
		fail_msg("restic cat config printed %s, want %.*s", got_text, (int)want_len, want_json);
	json_decref(got);
	json_decref(want);
	free(got_text);
}

char *rix_test_new_dir(const char *prefix)
{
	char *d = malloc(256);
	assert_non_null(d);
	rix_test_mkdtemp(d, 256, prefix);
	return d;
}

void rix_test_free_dir(char *dir)
{
	rix_test_remove_tree(dir);
	free(dir);
}

/* ---- comparing two trees ------------------------------------------------------------------- */

static int cmp_xattrs(const char *a, const char *b, const char *rel)
{
	char la[8192], lb[8192];
	ssize_t na = llistxattr(a, la, sizeof(la)), nb = llistxattr(b, lb, sizeof(lb));
	if (na < 0)
		na = 0;
	if (nb < 0)
		nb = 0;
	int d = 0;
	for (ssize_t i = 0; i < na; i += (ssize_t)strlen(la + i) + 1) {
		if (strncmp(la + i, "user.", 5) != 0)
			continue;
		char va[4096], vb[4096];
		ssize_t xa = lgetxattr(a, la + i, va, sizeof(va)), xb = lgetxattr(b, la + i, vb, sizeof(vb));
		if (xa != xb || (xa > 0 && memcmp(va, vb, (size_t)xa) != 0)) {
			fprintf(stderr, "compare: %s: xattr %s differs (%zd / %zd bytes)\n", rel, la + i, xa, xb);
			d++;
		}
	}
	for (ssize_t i = 0; i < nb; i += (ssize_t)strlen(lb + i) + 1)
		if (strncmp(lb + i, "user.", 5) == 0 && lgetxattr(a, lb + i, NULL, 0) < 0) {
			fprintf(stderr, "compare: %s: xattr %s only in the copy\n", rel, lb + i);
			d++;
		}
	return d;
}

static int cmp_content(const char *a, const char *b, const char *rel)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int d = 0;
	if (fa == NULL || fb == NULL) {
		fprintf(stderr, "compare: %s: cannot open\n", rel);
		d = 1;
	} else {
		static char ba[1 << 16], bb[1 << 16];
		for (;;) {
			size_t x = fread(ba, 1, sizeof(ba), fa), y = fread(bb, 1, sizeof(bb), fb);
			if (x != y || memcmp(ba, bb, x) != 0) {
				fprintf(stderr, "compare: %s: content differs\n", rel);
				d = 1;
				break;
			}
			if (x == 0)
				break;
		}
	}
	if (fa != NULL)
		fclose(fa);
	if (fb != NULL)
		fclose(fb);
	return d;
}

static int cmp_entry(const char *a, const char *b, const char *rel, unsigned flags, int depth);

static int cmp_dir(const char *a, const char *b, const char *rel, unsigned flags, int depth)
{
	int d = 0;
	DIR *da = opendir(a), *db = opendir(b);
	if (da == NULL || db == NULL) {
		fprintf(stderr, "compare: %s: cannot list\n", rel);
		if (da)
			closedir(da);
		if (db)
			closedir(db);
		return 1;
	}
	for (struct dirent *e; (e = readdir(da)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		size_t la = strlen(a) + strlen(e->d_name) + 2, lb = strlen(b) + strlen(e->d_name) + 2,
		       lr = strlen(rel) + strlen(e->d_name) + 2;
		char *pa = malloc(la), *pb = malloc(lb), *pr = malloc(lr);
		snprintf(pa, la, "%s/%s", a, e->d_name);
		snprintf(pb, lb, "%s/%s", b, e->d_name);
		snprintf(pr, lr, "%s/%s", rel, e->d_name);
		d += cmp_entry(pa, pb, pr, flags, depth + 1);
		free(pa);
		free(pb);
		free(pr);
	}
	for (struct dirent *e; (e = readdir(db)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		size_t la = strlen(a) + strlen(e->d_name) + 2;
		char *pa = malloc(la);
		snprintf(pa, la, "%s/%s", a, e->d_name);
		struct stat st;
		if (lstat(pa, &st) != 0) {
			fprintf(stderr, "compare: %s/%s: only in the copy\n", rel, e->d_name);
			d++;
		}
		free(pa);
	}
	closedir(da);
	closedir(db);
	return d;
}

static int cmp_entry(const char *a, const char *b, const char *rel, unsigned flags, int depth)
{
	struct stat sa, sb;
	if (lstat(a, &sa) != 0) {
		fprintf(stderr, "compare: %s: missing in the original\n", rel);
		return 1;
	}
	if (lstat(b, &sb) != 0) {
		fprintf(stderr, "compare: %s: missing in the copy\n", rel);
		return 1;
	}
	int d = 0;
#define CMP(what, x, y)                                                                                        \
	do {                                                                                                   \
		if ((x) != (y)) {                                                                              \
			fprintf(stderr, "compare: %s: %s %lld / %lld\n", rel, what, (long long)(x), (long long)(y)); \
			d++;                                                                                   \
		}                                                                                              \
	} while (0)
	CMP("type", sa.st_mode & S_IFMT, sb.st_mode & S_IFMT);
	if (d > 0)
		return d;
	if (depth > 0) {
		if (!S_ISLNK(sa.st_mode))
			CMP("mode", sa.st_mode & 07777, sb.st_mode & 07777);
		CMP("uid", sa.st_uid, sb.st_uid);
		CMP("gid", sa.st_gid, sb.st_gid);
		if (!(S_ISDIR(sa.st_mode) && (flags & RIX_CMP_NO_DIR_MTIME))) {
			CMP("mtime", sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
			CMP("mtime ns", sa.st_mtim.tv_nsec, sb.st_mtim.tv_nsec);
		}
		if (!S_ISDIR(sa.st_mode) && !(flags & RIX_CMP_NO_LINKS))
			CMP("links", sa.st_nlink, sb.st_nlink);
		d += cmp_xattrs(a, b, rel);
	}
	if (S_ISREG(sa.st_mode)) {
		CMP("size", sa.st_size, sb.st_size);
		if (d == 0)
			d += cmp_content(a, b, rel);
		if (flags & RIX_CMP_SPARSE)
			if (sb.st_blocks > sa.st_blocks) {
				fprintf(stderr, "compare: %s: %lld blocks, the original %lld\n", rel, (long long)sb.st_blocks,
					(long long)sa.st_blocks);
				d++;
			}
	} else if (S_ISLNK(sa.st_mode)) {
		static char ta[4096], tb[4096]; /* static: not on the stack of each level */
		ssize_t x = readlink(a, ta, sizeof(ta)), y = readlink(b, tb, sizeof(tb));
		if (x != y || x < 0 || memcmp(ta, tb, (size_t)x) != 0) {
			fprintf(stderr, "compare: %s: link target differs\n", rel);
			d++;
		}
	} else if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) {
		CMP("device", sa.st_rdev, sb.st_rdev);
	} else if (S_ISDIR(sa.st_mode)) {
		d += cmp_dir(a, b, rel, flags, depth);
	}
#undef CMP
	return d;
}

int rix_test_compare_trees(const char *a, const char *b, unsigned flags)
{
	return cmp_entry(a, b, "", flags, 0);
}
