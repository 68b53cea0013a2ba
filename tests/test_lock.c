/*
 * tests/test_lock.c — repo/lock.c: restic-compatible locks, with the real restic as the oracle.
 *
 * Cases: shared locks coexist and an exclusive one excludes them (both ways); restic sees and
 * reads rix's exclusive lock; a refresh replaces the file; stale locks (older than 30 minutes,
 * or a gone PID on this host) do not block, a live one of another host does, naming its holder;
 * unlock removes the stale ones, --remove-all every one; a lock file that cannot be read is
 * ignored (restic 0.14) and left by unlock, removed by --remove-all. rix and
 * restic take turns on one repository, each waiting for the other's lock. A lock whose refresh
 * keeps failing is lost: its holder learns it, and save, flush and check stop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "faultbackend.h"
#include "repo_fixture.h"
#include "testutil.h"

/* A lock file as restic writes it, with a time of our choosing. */
static void put_lock(rix_repo *r, const char *time, int exclusive, long pid, const char *host)
{
	char json[512];
	snprintf(json, sizeof(json),
		 "{\"time\":\"%s\",\"exclusive\":%s,\"hostname\":\"%s\",\"username\":\"other\",\"pid\":%ld,"
		 "\"uid\":1000,\"gid\":1000}",
		 time, exclusive ? "true" : "false", host, pid);
	MUST(rix_repo_write_file(NULL, r, RIX_FILE_LOCK, json, strlen(json)));
}

static void now_rfc3339(char *buf, size_t cap, long delta)
{
	time_t t = time(NULL) + delta;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%S.123456789Z", &tm);
}

/* rix_repo_options.warn: the messages, one line each. */
struct warned {
	int n;
	char last[512];
};

static void on_warn(void *payload, const char *msg)
{
	struct warned *w = payload;
	w->n++;
	snprintf(w->last, sizeof(w->last), "%s", msg);
}

static void test_locks(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2), *r2 = open_repo(dir, NULL);
	rix_lock *a, *b, *x;
	/* Shared locks coexist; an exclusive one excludes them, and they exclude it. */
	MUST(rix_lock_acquire(&a, r, 0));
	MUST(rix_lock_acquire(&b, r2, 0));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 2);
	assert_int_equal(rix_lock_acquire(&x, r2, 1), RIX_ELOCKED);
	assert_null(x);
	assert_non_null(strstr(rix_error_last(), "already locked"));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 2); /* the failed one left nothing */
	MUST(rix_lock_free(b));
	MUST(rix_lock_free(a));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 0);
	MUST(rix_lock_acquire(&x, r, 1));
	assert_int_equal(rix_lock_acquire(&a, r2, 0), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "exclusively"));
	/* restic sees rix's exclusive lock and reads its file. */
	char *out = NULL;
	assert_true(rix_test_restic(dir, PW, "check", &out) != 0);
	assert_non_null(strstr(out, "locked"));
	free(out);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, "list locks --no-lock", &out), 0);
	char id[65] = "";
	assert_int_equal(sscanf(out, "%64s", id), 1);
	free(out);
	char args[100];
	snprintf(args, sizeof(args), "cat lock %s --no-lock", id);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, args, &out), 0);
	assert_non_null(strstr(out, "\"exclusive\": true"));
	assert_non_null(strstr(out, "\"username\": \"tester\"")); /* the repository's user */
	free(out);
	/* Refresh: a new file, the old one gone. */
	MUST(rix_lock_refresh(x));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, "list locks --no-lock", &out), 0);
	assert_null(strstr(out, id));
	free(out);
	MUST(rix_lock_free(x));
	out = NULL;
	if (rix_test_restic(dir, PW, "check", &out) != 0)
		fail_msg("restic check after release: %s", out);
	free(out);
	/* Stale: older than 30 minutes, or this host and a PID that is gone; neither blocks. */
	char when[64];
	now_rfc3339(when, sizeof(when), -31 * 60);
	put_lock(r, when, 1, 1, "elsewhere");
	char host[256];
	gethostname(host, sizeof(host));
	now_rfc3339(when, sizeof(when), -10);
	put_lock(r, when, 1, 999999999, host);
	MUST(rix_lock_acquire(&x, r, 1));
	MUST(rix_lock_free(x));
	/* A live lock of another host blocks, with its holder in the message. */
	put_lock(r, when, 0, 4242, "otherhost");
	assert_int_equal(rix_lock_acquire(&x, r, 1), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "PID 4242 on otherhost by other"));
	MUST(rix_lock_acquire(&a, r, 0)); /* shared with shared */
	MUST(rix_lock_free(a));
	/* unlock removes the two stale ones; --remove-all the live one too. */
	size_t removed;
	MUST(rix_lock_remove(&removed, r, 0));
	assert_int_equal(removed, 2);
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1);
	MUST(rix_lock_remove(&removed, r, 1));
	assert_int_equal(removed, 1);
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 0);
	/* A lock file rix cannot read is ignored, as restic 0.14 ignores it: shared and exclusive
	 * locks are taken beside it; unlock leaves it (its age is unknown), --remove-all not. */
	char junk[65];
	memset(junk, 'a', 64);
	junk[64] = '\0';
	MUST(rix_backend_write(rix_repo_backend(r), RIX_FILE_LOCK, junk, "junk", 4));
	MUST(rix_lock_acquire(&a, r, 0));
	MUST(rix_lock_free(a));
	/* ... and said, through the options' warn (version 2); version 1 options, which end before
	 * warn, still open a repository; an unknown version does not. */
	struct warned w = { 0 };
	rix_repo_options wo = RIX_REPO_OPTIONS_INIT;
	wo.warn = on_warn;
	wo.payload = &w;
	rix_repo *r3 = open_repo(dir, &wo);
	MUST(rix_lock_acquire(&x, r3, 0));
	MUST(rix_lock_free(x));
	assert_int_equal(w.n, 1);
	assert_non_null(strstr(w.last, junk));
	assert_non_null(strstr(w.last, "cannot be read"));
	rix_repo_free(r3);
	wo.version = 1;
	r3 = open_repo(dir, &wo);
	MUST(rix_lock_acquire(&x, r3, 0));
	MUST(rix_lock_free(x));
	assert_int_equal(w.n, 1); /* a version 1 caller has no warn */
	rix_repo_free(r3);
	rix_backend *be;
	MUST(rix_backend_local_open(&be, dir, false));
	wo.version = RIX_REPO_OPTIONS_VERSION + 1;
	assert_int_equal(rix_repo_open(&r3, be, PW, strlen(PW), &wo), RIX_EINVAL);
	rix_backend_free(be);
	MUST(rix_lock_acquire(&a, r, 1));
	MUST(rix_lock_free(a));
	MUST(rix_lock_remove(&removed, r, 0));
	assert_int_equal(removed, 0);
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1);
	MUST(rix_lock_remove(&removed, r, 1));
	assert_int_equal(removed, 1);
	/* An empty lock file (a failed upload) is no lock, as with restic 0.16+. */
	MUST(rix_backend_write(rix_repo_backend(r), RIX_FILE_LOCK, junk, "", 0));
	MUST(rix_lock_acquire(&a, r, 1));
	MUST(rix_lock_free(a));
	MUST(rix_lock_remove(&removed, r, 1));
	rix_repo_free(r2);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

/*
 * rix and restic take turns on one repository: rix stores blobs, restic backs up files (some of
 * whose content rix stored already), rix stores more and deduplicates against restic's index;
 * a lock held by one makes the other wait (fail); both check clean at the end.
 */
static void test_turns_with_restic(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	uint8_t a[40000], bb[50000];
	uint64_t seed = 21;
	rix_test_fill_random(a, sizeof(a), &seed);
	rix_test_fill_random(bb, sizeof(bb), &seed);
	rix_id ida;
	MUST(rix_repo_save_blob(&ida, NULL, r, RIX_BLOB_DATA, a, sizeof(a)));
	MUST(rix_repo_flush(r));
	/* While rix holds an exclusive lock, restic cannot back up. */
	rix_lock *x;
	MUST(rix_lock_acquire(&x, r, 1));
	char src[700];
	snprintf(src, sizeof(src), "%s.src", dir);
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "small.bin", bb, sizeof(bb)); /* under restic's 512 KiB minimum: one blob */
	char args[800];
	snprintf(args, sizeof(args), "backup '%s'", src);
	char *out = NULL;
	assert_true(rix_test_restic(dir, PW, args, &out) != 0);
	assert_non_null(strstr(out, "locked"));
	free(out);
	MUST(rix_lock_free(x));
	out = NULL;
	if (rix_test_restic(dir, PW, args, &out) != 0)
		fail_msg("restic backup: %s", out);
	free(out);
	rix_repo_free(r);
	/* rix again: restic's blob is known (dedup), a new one is stored. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	bool stored = true; /* save_blob must clear it */
	MUST(rix_repo_save_blob(NULL, &stored, r, RIX_BLOB_DATA, bb, sizeof(bb)));
	assert_int_equal(stored, 0);
	MUST(rix_repo_save_blob(NULL, &stored, r, RIX_BLOB_DATA, a, sizeof(a)));
	assert_int_equal(stored, 0);
	uint8_t c[30000];
	rix_test_fill_random(c, sizeof(c), &seed);
	MUST(rix_repo_save_blob(NULL, &stored, r, RIX_BLOB_DATA, c, sizeof(c)));
	assert_int_equal(stored, 1);
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	out = NULL;
	if (rix_test_restic(dir, PW, "check --read-data", &out) != 0)
		fail_msg("restic check: %s", out);
	free(out);
	struct lines l;
	rix_check_report rep = run_check(dir, 1, 0, &l);
	assert_int_equal(rep.errors, 0);
	assert_int_equal(rep.index_files, 3);
	rix_test_remove_tree(src);
	rix_test_free_dir(dir);
}

static int first_lock(void *arg, const char *name, uint64_t size)
{
	(void)size;
	snprintf(arg, 65, "%s", name);
	return 0;
}

/* A lock whose refresh keeps failing is lost: the holder learns it, and long operations stop. */
/*
 * A lock file the backend fails to read (EIO after its retries, a server going away) may be a
 * live lock: no lock is taken past it (a junk file, which reads but does not decode, is passed
 * over: test_locks). Another handle holds a shared lock; with every read failing, an exclusive
 * lock is refused with RIX_EIO and leaves no file of its own.
 */
static void test_lock_unreadable_read(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2), *holder = open_repo(dir, NULL);
	rix_lock *held, *x = NULL;
	MUST(rix_lock_acquire(&held, holder, 0));
	rix_test_fault f;
	rix_test_fault_init(&f);
	rix_backend *inner, *b;
	MUST(rix_backend_local_open(&inner, dir, 0));
	MUST(rix_test_fault_backend(&b, inner, &f));
	rix_repo *faulty;
	MUST(rix_repo_open(&faulty, b, PW, strlen(PW), NULL));
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_READ, 1, RIX_TEST_FAULT_FROM, RIX_TEST_FAULT_EIO });
	assert_int_equal(rix_lock_acquire(&x, faulty, 1), RIX_EIO);
	assert_null(x);
	assert_true(rix_test_fault_injected(&f) > 0);
	rix_test_fault_arm(&f, NULL);
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1); /* the holder's alone */
	rix_repo_free(faulty);
	rix_test_fault_destroy(&f);
	MUST(rix_lock_free(held));
	rix_repo_free(holder);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

static void test_lock_lost(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	const char data[] = "a blob, so that check has a pack to look at";
	MUST(rix_repo_save_blob(NULL, NULL, r, RIX_BLOB_DATA, data, sizeof(data)));
	MUST(rix_repo_flush(r));
	rix_lock *l;
	MUST(rix_lock_acquire(&l, r, 0));
	char before[65] = "", after[65] = "";
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_LOCK, first_lock, before));
	rix_lock_set_intervals(l, 20, 20, 300);
	/* Refreshed: a new file replaced the old one (polled: the machine may be slow). */
	int refreshed = 0;
	for (int i = 0; i < 1000 && !refreshed; i++) {
		usleep(10 * 1000);
		MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_LOCK, first_lock, after));
		refreshed = strcmp(before, after) != 0;
	}
	assert_true(refreshed);
	rix_lock_set_intervals(l, 3600 * 1000, 3600 * 1000, 3600 * 1000); /* quiet, to count */
	size_t files = 0;
	for (int i = 0; i < 1000 && (files = count_files(r, RIX_FILE_LOCK)) != 1; i++)
		usleep(10 * 1000); /* a refresh under way finishes */
	assert_int_equal(files, 1);
	MUST(rix_lock_check(l));

	/* A file where the locks folder was: every refresh fails from now on. */
	char locks[4096], saved[4200];
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	snprintf(saved, sizeof(saved), "%s/locks.saved", dir);
	assert_int_equal(rename(locks, saved), 0);
	rix_test_put_file(dir, "locks", "x", 1);
	rix_lock_set_intervals(l, 20, 20, 300);
	int rc = 0;
	for (int i = 0; i < 300 && rc == 0; i++) {
		usleep(10 * 1000);
		rc = rix_lock_check(l);
	}
	assert_int_equal(rc, RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "lost"));
	assert_non_null(strstr(rix_error_last(), "refreshed"));
	const char other[] = "another blob";
	assert_int_equal(rix_repo_save_blob(NULL, NULL, r, RIX_BLOB_DATA, other, sizeof(other)), RIX_ELOCKED);
	assert_int_equal(rix_repo_flush(r), RIX_ELOCKED);
	assert_int_equal(rix_repo_check(NULL, r, NULL), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "lost"));

	/* The folder back: the lock stays lost (its holder must start again), a new one works. */
	char path[4200];
	snprintf(path, sizeof(path), "%s/locks", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rename(saved, locks), 0);
	usleep(100 * 1000);
	assert_int_equal(rix_lock_check(l), RIX_ELOCKED);
	rix_lock_free(l);
	MUST(rix_lock_acquire(&l, r, 0));
	MUST(rix_repo_save_blob(NULL, NULL, r, RIX_BLOB_DATA, other, sizeof(other)));
	MUST(rix_repo_flush(r));
	MUST(rix_repo_check(NULL, r, NULL));
	MUST(rix_lock_free(l));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 0);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}


int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_locks),
		cmocka_unit_test(test_turns_with_restic),
		cmocka_unit_test(test_lock_lost),
		cmocka_unit_test(test_lock_unreadable_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
