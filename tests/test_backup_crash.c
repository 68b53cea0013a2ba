/*
 * tests/test_backup_crash.c — `rix backup` killed with SIGKILL at many points in time: after each
 * kill the repository checks clean with restic (after `restic unlock`, which restic itself
 * needs after its own crash) and with rix, every snapshot that exists is whole (restic reads
 * all its data), and the next backup completes and reuses what the killed ones indexed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "testutil.h"

#define PW "crash-test"

static void make_source(const char *src)
{
	assert_int_equal(mkdir(src, 0755), 0);
	uint64_t st = 99;
	size_t n = 3u << 20;
	uint8_t *buf = malloc(n);
	for (int d = 0; d < 4; d++) {
		char dir[4300];
		snprintf(dir, sizeof(dir), "%s/d%d", src, d);
		assert_int_equal(mkdir(dir, 0755), 0);
		for (int f = 0; f < 6; f++) {
			rix_test_fill_random(buf, n, &st);
			char name[32];
			snprintf(name, sizeof(name), "f%d", f);
			rix_test_put_file(dir, name, buf, n - (size_t)f * 100000);
		}
	}
	free(buf);
}

static size_t count(const char *dir)
{
	char ids[512][65];
	return rix_test_list_ids(dir, ids, 512);
}

static void test_kill_anywhere(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-crash");
	char src[4200], repo[4200], snaps[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(repo, sizeof(repo), "%s/repo", work);
	snprintf(snaps, sizeof(snaps), "%s/snapshots", repo);
	make_source(src);
	setenv("RIX_PASSWORD", PW, 1);
	setenv("RESTIC_PASSWORD", PW, 1);
	assert_int_equal(rix_test_run(NULL, NULL, "'%s' -q -r '%s' init", RIX_CLI_PATH, repo), 0);
	/* Kill points from early (listing, first packs) to late (index, snapshot). */
	static const int ms[] = { 5, 30, 80, 150, 250, 400, 600, 900 };
	size_t snapshots = 0, cut_short = 0;
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			execl(RIX_CLI_PATH, "rix", "-q", "-r", repo, "backup", src, (char *)NULL);
			_exit(127);
		}
		struct timespec t = { 0, ms[i] * 1000000L };
		nanosleep(&t, NULL);
		kill(pid, SIGKILL);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		/* Killed, or finished before the kill: nothing else (an exec that failed exits 127). */
		int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		assert_true(killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
		/* At most one more snapshot (a kill after it was written, before exit: it is whole). */
		size_t now = count(snaps);
		assert_true(now == snapshots || now == snapshots + 1);
		cut_short += killed && now == snapshots;
		snapshots = now;
		/* Every snapshot written is whole, the rest checks clean. */
		assert_int_equal(rix_test_run(NULL, NULL, "restic --no-cache -q -r '%s' unlock >/dev/null 2>&1", repo), 0);
		if (rix_test_run(NULL, NULL, "restic --no-cache -q -r '%s' check %s >/dev/null", repo,
				 i + 1 == sizeof(ms) / sizeof(ms[0]) ? "--read-data" : "") != 0)
			fail_msg("restic check fails after a kill at %d ms", ms[i]);
		if (rix_test_run(NULL, NULL, "'%s' -q -r '%s' check", RIX_CLI_PATH, repo) != 0)
			fail_msg("rix check fails after a kill at %d ms", ms[i]);
	}
	/* Some kills must have cut a backup short, or the test tested nothing. */
	if (cut_short == 0)
		fail_msg("every backup finished before its kill: the source is too small for this machine");
	/* The next backup completes, and restic restores it whole. */
	assert_int_equal(rix_test_run(NULL, NULL, "'%s' -q -r '%s' backup '%s'", RIX_CLI_PATH, repo, src), 0);
	assert_int_equal(count(snaps), snapshots + 1);
	assert_int_equal(rix_test_run(NULL, NULL, "restic --no-cache -q -r '%s' check --read-data >/dev/null", repo), 0);
	char out[4300];
	snprintf(out, sizeof(out), "%s/out", work);
	assert_int_equal(rix_test_run(NULL, NULL, "restic --no-cache -q -r '%s' restore latest --target '%s' >/dev/null && "
						  "diff -r '%s' '%s%s'",
				      repo, out, src, out, src),
			 0);
	rix_test_free_dir(work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_anywhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
