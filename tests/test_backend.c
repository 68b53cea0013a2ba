/*
 * tests/test_backend.c — repo/: the backend interface and the local backend.
 *
 * Cases: create and open (restic's folders; refusing a second create, a path without a config);
 * write, stat, read ranges, read_all, list, remove for every file type; names that are not 64
 * hex digits refused (no path escapes); a read past the end is RIX_ECORRUPT; missing files are
 * RIX_ENOTFOUND; files end read-only and no temporary file is ever listed; write_file by rename
 * (same file system) and by copy (from /dev/shm, another file system); a full disk
 * (RLIMIT_FSIZE) gives RIX_ENOSPC and leaves the old file whole and no temporary file;
 * allocation failure at every allocation; the rate limiter (rix_backend_limit): reads from two
 * threads together, writes and write_file take at least bytes / rate, what is read is what is
 * stored (reads cut into pieces), errors pass through, and a failed wrap leaves the backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "testutil.h"


static void name_of(const void *data, size_t n, char hex[65])
{
	rix_id id;
	rix_sha256(&id, data, n);
	rix_id_to_hex(hex, &id);
}

struct seen {
	char names[64][65];
	uint64_t sizes[64];
	size_t n;
};

static int collect(void *arg, const char *name, uint64_t size)
{
	struct seen *s = arg;
	if (s->n == 64)
		return RIX_ELIMIT;
	snprintf(s->names[s->n], 65, "%s", name);
	s->sizes[s->n++] = size;
	return 0;
}

static int stop_at_first(void *arg, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	++*(int *)arg;
	return 42;
}

/* Files, with no temporary leftovers, anywhere under dir (find's count). */
static int count_temp_files(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "find '%s' -name '.*-tmp-*' | wc -l", dir);
	FILE *f = popen(cmd, "r");
	int n = -1;
	assert_int_equal(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

static void test_create_open(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	char sub[600];
	rix_backend *b = (rix_backend *)1;
	assert_int_equal(rix_backend_local_open(&b, dir, 0), RIX_ENOTFOUND);
	assert_null(b);
	assert_non_null(strstr(rix_error_last(), "not a repository"));
	MUST(rix_backend_local_open(&b, dir, 1));
	assert_string_equal(rix_backend_kind(b), "local");
	static const char *const folders[] = { "keys", "locks", "snapshots", "index", "data/00", "data/7f", "data/ff",
					       ".rix-tmp" };
	for (size_t i = 0; i < sizeof(folders) / sizeof(folders[0]); i++) {
		struct stat st;
		snprintf(sub, sizeof(sub), "%s/%s", dir, folders[i]);
		assert_int_equal(stat(sub, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
	}
	snprintf(sub, sizeof(sub), "%s/.rix-tmp", dir);
	assert_string_equal(rix_backend_temp_dir(b), sub);
	MUST(rix_backend_write(b, RIX_FILE_CONFIG, NULL, "cfg", 3));
	rix_backend_free(b);
	/* A second create is refused; open works. */
	assert_int_equal(rix_backend_local_open(&b, dir, 1), RIX_EEXISTS);
	MUST(rix_backend_local_open(&b, dir, 0));
	uint8_t *data;
	size_t n;
	MUST(rix_backend_read_all(&data, &n, b, RIX_FILE_CONFIG, NULL, 100));
	assert_int_equal(n, 3);
	assert_memory_equal(data, "cfg", 3);
	rix_free(data);
	rix_backend_free(b);
	rix_backend_free(NULL);
	assert_int_equal(rix_backend_local_open(&b, "/nonexistent/rix/repo", 0), RIX_ENOTFOUND);
	assert_int_equal(rix_backend_local_open(&b, "", 0), RIX_EINVAL);
	rix_test_free_dir(dir);
}

static void test_files(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	uint64_t st = 7;
	for (int t = RIX_FILE_KEY; t < RIX_FILE_TYPES; t++) {
		struct seen seen = { 0 };
		char names[5][65];
		uint8_t bufs[5][3000];
		for (int i = 0; i < 5; i++) {
			size_t n = 100 + 600 * (size_t)i;
			rix_test_fill_random(bufs[i], n, &st);
			name_of(bufs[i], n, names[i]);
			MUST(rix_backend_write(b, (rix_file_type)t, names[i], bufs[i], n));
			uint64_t size;
			MUST(rix_backend_stat(&size, b, (rix_file_type)t, names[i]));
			assert_int_equal(size, n);
			/* A range, and the whole. */
			uint8_t got[3000];
			MUST(rix_backend_read(b, (rix_file_type)t, names[i], 50, got, n - 60));
			assert_memory_equal(got, bufs[i] + 50, n - 60);
			uint8_t *all;
			size_t an;
			MUST(rix_backend_read_all(&all, &an, b, (rix_file_type)t, names[i], 1 << 20));
			assert_int_equal(an, n);
			assert_memory_equal(all, bufs[i], n);
			rix_free(all);
			/* Past the end: corrupt (a pack shorter than its index says), not a short read. */
			assert_int_equal(rix_backend_read(b, (rix_file_type)t, names[i], n - 10, got, 11), RIX_ECORRUPT);
			assert_non_null(strstr(rix_error_last(), "ends before"));
			/* Bigger than the caller allows. */
			assert_int_equal(rix_backend_read_all(&all, &an, b, (rix_file_type)t, names[i], n - 1), RIX_ECORRUPT);
			assert_null(all);
		}
		/* Read-only on disk, as restic leaves its files. */
		char path[700];
		if (t == RIX_FILE_PACK)
			snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, names[0], names[0]);
		else
			snprintf(path, sizeof(path), "%s/%s/%s", dir, t == RIX_FILE_KEY ? "keys" : t == RIX_FILE_LOCK ? "locks" : t == RIX_FILE_SNAPSHOT ? "snapshots" : "index", names[0]);
		struct stat sb;
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 0777, 0400);
		/* A stray file that is not an ID is not listed. */
		char stray[800];
		snprintf(stray, sizeof(stray), "%s.bak", path);
		FILE *f = fopen(stray, "w");
		assert_non_null(f);
		fclose(f);
		MUST(rix_backend_list(b, (rix_file_type)t, collect, &seen));
		assert_int_equal(seen.n, 5);
		for (int i = 0; i < 5; i++) {
			int found = 0;
			for (size_t k = 0; k < seen.n; k++)
				if (strcmp(seen.names[k], names[i]) == 0) {
					found = 1;
					assert_int_equal(seen.sizes[k], 100 + 600 * (uint64_t)i);
				}
			assert_true(found);
		}
		int calls = 0;
		assert_int_equal(rix_backend_list(b, (rix_file_type)t, stop_at_first, &calls), 42);
		assert_int_equal(calls, 1);
		unlink(stray);
		/* Replacing a file is atomic too; removing it makes it gone. */
		MUST(rix_backend_write(b, (rix_file_type)t, names[0], "new", 3));
		uint64_t size;
		MUST(rix_backend_stat(&size, b, (rix_file_type)t, names[0]));
		assert_int_equal(size, 3);
		for (int i = 0; i < 5; i++)
			MUST(rix_backend_remove(b, (rix_file_type)t, names[i]));
		assert_int_equal(rix_backend_remove(b, (rix_file_type)t, names[0]), RIX_ENOTFOUND);
		assert_int_equal(rix_backend_stat(&size, b, (rix_file_type)t, names[0]), RIX_ENOTFOUND);
		uint8_t x;
		assert_int_equal(rix_backend_read(b, (rix_file_type)t, names[0], 0, &x, 1), RIX_ENOTFOUND);
		seen.n = 0;
		MUST(rix_backend_list(b, (rix_file_type)t, collect, &seen));
		assert_int_equal(seen.n, 0);
	}
	assert_int_equal(count_temp_files(dir), 0);
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

static void test_bad_names(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	static const char *const bad[] = {
		"",
		"../../../../etc/passwd",
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",   /* 63 */
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0", /* 65 */
		"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", /* upper case */
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde/",
	};
	uint64_t size;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(rix_backend_write(b, RIX_FILE_INDEX, bad[i], "x", 1), RIX_EINVAL);
		assert_int_equal(rix_backend_stat(&size, b, RIX_FILE_PACK, bad[i]), RIX_EINVAL);
		assert_int_equal(rix_backend_remove(b, RIX_FILE_KEY, bad[i]), RIX_EINVAL);
	}
	assert_int_equal(rix_backend_write(b, RIX_FILE_INDEX, NULL, "x", 1), RIX_EINVAL);
	assert_int_equal(rix_backend_write(b, (rix_file_type)9, bad[2], "x", 1), RIX_EINVAL);
	assert_int_equal(rix_backend_list(b, RIX_FILE_CONFIG, collect, NULL), RIX_EINVAL);
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

/* A pack file handed over whole: renamed on the same file system, copied from another. */
static void test_write_file(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	uint64_t st = 9;
	size_t n = 3 << 20;
	uint8_t *data = malloc(n);
	rix_test_fill_random(data, n, &st);
	char name[65];
	name_of(data, n, name);
	const char *tmpdirs[2] = { rix_backend_temp_dir(b), "/dev/shm" };
	/* The copy half needs another file system: /dev/shm, unless it is the repository's own. */
	struct stat s0, s1;
	int rounds = stat(tmpdirs[0], &s0) == 0 && stat(tmpdirs[1], &s1) == 0 && s0.st_dev != s1.st_dev ? 2 : 1;
	for (int k = 0; k < rounds; k++) {
		char src[600];
		snprintf(src, sizeof(src), "%s/rix-test-XXXXXX", tmpdirs[k]);
		int fd = mkstemp(src);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, data, n), (ssize_t)n);
		bool taken = k != 0; /* the opposite of what write_file must say */
		assert_int_equal(rix_backend_write_file(&taken, b, RIX_FILE_PACK, name, fd, src, n + 1), RIX_EINVAL);
		MUST(rix_backend_write_file(&taken, b, RIX_FILE_PACK, name, fd, src, n));
		close(fd);
		struct stat sb;
		assert_int_equal(taken, k == 0);
		assert_int_equal(stat(src, &sb) == 0, k == 1); /* copied: the source stays */
		unlink(src);
		uint8_t *all;
		size_t an;
		MUST(rix_backend_read_all(&all, &an, b, RIX_FILE_PACK, name, n));
		assert_int_equal(an, n);
		assert_memory_equal(all, data, n);
		rix_free(all);
		MUST(rix_backend_remove(b, RIX_FILE_PACK, name));
	}
	assert_int_equal(count_temp_files(dir), 0);
	free(data);
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

/* Disk full mid-write: RIX_ENOSPC, the old file unchanged, no temporary file left. */
static void test_disk_full(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	char name[65];
	name_of("old", 3, name);
	MUST(rix_backend_write(b, RIX_FILE_INDEX, name, "old", 3));
	size_t n = 2 << 20;
	uint8_t *old_back;
	size_t old_n;
	uint8_t *big = calloc(1, n);
	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = 1 << 20;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	int rc = rix_backend_write(b, RIX_FILE_INDEX, name, big, n);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", rix_error_last());
	int rc_old = rix_backend_read_all(&old_back, &old_n, b, RIX_FILE_INDEX, name, n);
	/* The copy path of write_file too. */
	char src[] = "/dev/shm/rix-test-XXXXXX";
	int fd = mkstemp(src);
	assert_true(fd >= 0);
	int rc2 = 0;
	bool taken = false;
	if (write(fd, big, 1 << 19) == 1 << 19)
		rc2 = rix_backend_write_file(&taken, b, RIX_FILE_INDEX, name, fd, NULL, 1 << 19);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, oldsig);
	close(fd);
	unlink(src);
	assert_int_equal(rc, RIX_ENOSPC);
	assert_int_equal(rc_old, 0); /* the failed write left the old file whole */
	assert_int_equal(old_n, 3);
	assert_memory_equal(old_back, "old", 3);
	rix_free(old_back);
	assert_non_null(strstr(msg, "cannot write"));
	assert_int_equal(rc2, 0); /* 512 KiB fits under the limit */
	uint8_t *all;
	size_t an;
	MUST(rix_backend_read_all(&all, &an, b, RIX_FILE_INDEX, name, n));
	assert_int_equal(an, 1 << 19); /* the copy replaced it whole */
	rix_free(all);
	assert_int_equal(count_temp_files(dir), 0);
	free(big);
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

static int oom_backend(void *arg)
{
	const char *dir = arg;
	rix_backend *b;
	int rc = rix_backend_local_open(&b, dir, 0);
	if (rc != 0)
		return rc;
	char name[65];
	name_of("x", 1, name);
	rc = rix_backend_write(b, RIX_FILE_SNAPSHOT, name, "x", 1);
	uint8_t *all = NULL;
	size_t an;
	if (rc == 0)
		rc = rix_backend_read_all(&all, &an, b, RIX_FILE_SNAPSHOT, name, 10);
	rix_free(all);
	rix_backend_free(b);
	return rc;
}

static void test_allocation_failure(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	MUST(rix_backend_write(b, RIX_FILE_CONFIG, NULL, "c", 1));
	rix_backend_free(b);
	rix_test_oom_loop("local backend", oom_backend, dir, 100);
	rix_test_free_dir(dir);
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct whole_read {
	rix_backend *b;
	const char *name;
	const uint8_t *want;
	size_t n;
	int rc, same;
};

static void *read_whole(void *arg)
{
	struct whole_read *w = arg;
	uint8_t *buf = malloc(w->n);
	w->rc = rix_backend_read(w->b, RIX_FILE_PACK, w->name, 0, buf, w->n);
	w->same = w->rc == 0 && memcmp(buf, w->want, w->n) == 0;
	free(buf);
	return NULL;
}

/*
 * rix_backend_limit over the local backend: two threads reading a 300 KiB file whole at once
 * under 512 KiB/s take 600/512 s at least (one clock for both); a write and a write_file of
 * 128 KiB under 256 KiB/s half a second each; the bytes are the file's (pieces of 64 KiB put
 * together at their offsets); a missing file and a read past the end fail as without the
 * limiter; a wrap that fails for memory leaves the backend to the caller.
 */
static void test_limit(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-backend");
	rix_backend *b, *l;
	MUST(rix_backend_local_open(&b, dir, 1));
	enum { N = 300 << 10, W = 128 << 10 };
	static uint8_t data[N];
	uint64_t st = 5;
	rix_test_fill_random(data, N, &st);
	char name[65], wname[65], fname[65];
	name_of(data, N, name);
	MUST(rix_backend_write(b, RIX_FILE_CONFIG, NULL, "c", 1));
	MUST(rix_backend_write(b, RIX_FILE_PACK, name, data, N));
	MUST(rix_backend_limit(&l, b, 256 << 10, 512 << 10)); /* l owns b */
	assert_string_equal(rix_backend_kind(l), "local");
	double t0 = seconds();
	struct whole_read w[2] = { { l, name, data, N, -1, 0 }, { l, name, data, N, -1, 0 } };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, read_whole, &w[1]), 0);
	read_whole(&w[0]);
	pthread_join(th, NULL);
	double took = seconds() - t0;
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_true(w[0].same && w[1].same);
	if (took < 2.0 * N / (512 << 10))
		fail_msg("two reads of %d bytes under 512 KiB/s took %.3f s", N, took);
	/* a range across pieces */
	static uint8_t part[200000];
	MUST(rix_backend_read(l, RIX_FILE_PACK, name, 1000, part, sizeof(part)));
	assert_memory_equal(part, data + 1000, sizeof(part));
	assert_int_equal(rix_backend_read(l, RIX_FILE_PACK, name, N - 10, part, 100), RIX_ECORRUPT);
	char none[65];
	memset(none, 'a', 64);
	none[64] = '\0';
	assert_int_equal(rix_backend_read(l, RIX_FILE_PACK, none, 0, part, 10), RIX_ENOTFOUND);
	/* uploads: write, then write_file from a file elsewhere (copied) */
	name_of(data, W, wname);
	t0 = seconds();
	MUST(rix_backend_write(l, RIX_FILE_INDEX, wname, data, W));
	took = seconds() - t0;
	if (took < (double)W / (256 << 10))
		fail_msg("a write of %d bytes under 256 KiB/s took %.3f s", W, took);
	name_of(data + 1, W, fname);
	FILE *tf = tmpfile();
	assert_non_null(tf);
	assert_int_equal(fwrite(data + 1, 1, W, tf), W);
	assert_int_equal(fflush(tf), 0);
	bool taken;
	t0 = seconds();
	MUST(rix_backend_write_file(&taken, l, RIX_FILE_PACK, fname, fileno(tf), NULL, W));
	took = seconds() - t0;
	fclose(tf);
	if (took < (double)W / (256 << 10))
		fail_msg("a write_file of %d bytes under 256 KiB/s took %.3f s", W, took);
	uint8_t *back;
	size_t n;
	MUST(rix_backend_read_all(&back, &n, l, RIX_FILE_PACK, fname, W));
	assert_int_equal(n, W);
	assert_memory_equal(back, data + 1, W);
	rix_free(back);
	rix_backend_free(l); /* and b */
	/* out of memory: the backend is still the caller's (ASan: no leak, no double free) */
	MUST(rix_backend_local_open(&b, dir, 0));
	rix_test_failalloc_install(1);
	int rc = rix_backend_limit(&l, b, 1, 1);
	rix_test_failalloc_remove();
	assert_int_equal(rc, RIX_ENOMEM);
	assert_null(l);
	rix_test_failalloc_install(2);
	rc = rix_backend_limit(&l, b, 1, 1);
	rix_test_failalloc_remove();
	assert_int_equal(rc, RIX_ENOMEM);
	assert_null(l);
	MUST(rix_backend_stat(&(uint64_t){ 0 }, b, RIX_FILE_PACK, name));
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_open),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_write_file),
		cmocka_unit_test(test_disk_full),
		cmocka_unit_test(test_allocation_failure),
		cmocka_unit_test(test_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
