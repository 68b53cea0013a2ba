/*
 * tests/test_cli_ops.c — the rix command as restic users expect it to behave around the work
 * itself, restic beside it where it defines the behaviour:
 *   test_signal_releases_lock        SIGINT/SIGTERM/SIGHUP mid check --read-data: 130/143/129,
 *                                    no lock left, restic check passes; a reader gone (SIGPIPE)
 *   test_locks_and_no_lock           shared/exclusive locks per command (exit 11), --no-lock on
 *                                    a repository whose locks/ cannot be written or that is
 *                                    mounted read-only, a lock file that cannot be read ignored
 *                                    by rix and restic 0.14 alike
 *   test_exit_codes_and_damage       10, 12, 1; a missing pack named by cat blob; a damaged index
 *                                    file fails list/find-blob/stats with --no-cache
 *                                    and check (not through the index cache); permission denied
 *   test_secrets_not_printed         user:***@ in init/check/errors, text and JSON; REST retries
 *   test_passwords_and_repository_file  password command/file/stdin/CRLF, --repository-file,
 *                                    --new-password-file
 *   test_missing_empty_folders       a repository without its empty folders: check, save, flush
 *   test_help_and_flags              help, unknown flags/commands named, restic's global flags
 *   test_tls_options                 https REST with --cacert / --insecure-tls
 *   test_readme_usage                every command and flag `rix help` lists is in README's usage
 *   test_stats_missing_blobs         stats (--json and text) counts a data blob a snapshot names
 *                                    that the index lacks
 *   test_rest_gone_mid_check         the REST server killed during check (--read-data, --json,
 *                                    plain): one line naming the failed operation, no damage, 1
 *   test_limits                      --limit-download / --limit-upload on a local repository: all
 *                                    transfers together take at least bytes / rate
 *
 * The repositories are made through the library (repo_fixture: a cheap scrypt, password PW).
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

static char work[256];

static int setup(void **state)
{
	(void)state;
	rix_test_mkdtemp(work, sizeof(work), "rix-cli-ops");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "umount '%s/ro' 2>/dev/null", work); /* a test that failed with it mounted */
	if (system(cmd) != 0) {
		/* not mounted: the usual case */
	}
	rix_test_rmtree(work);
	return 0;
}

/* Files in dir (-1: no such folder). */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* `rix <args>` with PW in the environment (2>&1 into *out); its exit status. */
#define rix(out, ...)                                                                                      \
	rix_test_tool(out, NULL, NULL, "RIX_PASSWORD='" PW "' RESTIC_PASSWORD= RIX_REST_TRIES=3 RIX_REST_FIRST_DELAY_MS=50 '" RIX_CLI_PATH "'", \
		      NULL, " 2>&1", __VA_ARGS__)

/* A repository in <work>/name with about mib MiB of random data (version 1: no compression). */
static void make_repo(char *dir, size_t cap, const char *name, int sets)
{
	snprintf(dir, cap, "%s/%s", work, name);
	assert_int_equal(mkdir(dir, 0700), 0);
	rix_repo *r = init_repo(dir, 1);
	for (int i = 0; i < sets; i++) {
		struct blobs s;
		make_blobs(&s, 400, 1000 + (uint64_t)i);
		save_all(r, &s);
		free_blobs(&s);
	}
	assert_int_equal(rix_repo_flush(r), 0);
	rix_repo_free(r);
}

/*
 * Starts `rix -r dir check --read-data`, waits for its lock file, sends sig while it is stopped
 * (so that it arrives mid-check), and returns the exit status.
 */
static int check_interrupted(const char *dir, int sig)
{
	char locks[300];
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even one that failed */
		setenv("RIX_PASSWORD", PW, 1);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl(RIX_CLI_PATH, "rix", "-r", dir, "check", "--read-data", (char *)NULL);
		_exit(127);
	}
	struct timespec ms = { 0, 1000000 };
	int seen = 0;
	for (int i = 0; i < 30000 && !seen; i++) {
		seen = count_entries(locks) > 0;
		if (!seen)
			nanosleep(&ms, NULL);
	}
	assert_true(seen);
	kill(pid, SIGSTOP);
	kill(pid, sig);
	kill(pid, SIGCONT);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* SIGINT, SIGTERM, SIGHUP during check --read-data: exit 130 / 143 / 129, no lock left, restic check passes. */
static void test_signal_releases_lock(void **state)
{
	(void)state;
	rix_test_need_restic();
	char dir[300], locks[320];
	make_repo(dir, sizeof(dir), "sig", 4);
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	assert_int_equal(check_interrupted(dir, SIGINT), 130);
	assert_int_equal(count_entries(locks), 0);
	assert_int_equal(check_interrupted(dir, SIGTERM), 143);
	assert_int_equal(count_entries(locks), 0);
	assert_int_equal(check_interrupted(dir, SIGHUP), 129);
	assert_int_equal(count_entries(locks), 0);
	/* A reader that goes away (SIGPIPE): the lock is released all the same. */
	char *head = NULL;
	assert_int_equal(rix_test_run(&head, &(size_t){ 0 }, "RIX_PASSWORD='%s' '%s' -r '%s' list blobs | head -c 10", PW, RIX_CLI_PATH, dir),
			 0);
	free(head);
	assert_int_equal(count_entries(locks), 0);
	char *out = NULL;
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' check 2>&1", PW, dir), 0);
	free(out);
}

/*
 * Locks: list, cat, stats, find-blob, check and key add take a shared lock (they run beside a
 * held shared lock; an exclusive holder stops them with exit 11); key passwd and key remove an
 * exclusive one (a shared holder stops them); --no-lock takes none, so a
 * repository whose locks/ cannot be written (a file in its place) can still be read and checked.
 */
static void test_locks_and_no_lock(void **state)
{
	(void)state;
	rix_test_need_restic();
	char dir[300], locks[320];
	make_repo(dir, sizeof(dir), "locks", 1);
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	char *out = NULL, newpw[320], blob[65];
	rix_test_put_file(work, "locks-newpw", "another one", 11);
	snprintf(newpw, sizeof(newpw), "%s/locks-newpw", work);
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 0);
	assert_int_equal(sscanf(out, "%*s %64s", blob), 1);
	free(out);
	/* A live exclusive lock (ours: this process) blocks readers and key add with exit 11. */
	rix_repo *r = open_repo(dir, NULL);
	rix_lock *l;
	assert_int_equal(rix_lock_acquire(&l, r, true), 0);
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 11);
	assert_non_null(strstr(out, "locked exclusively"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' find-blob %s", dir, blob), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' key add --new-password-file '%s'", dir, newpw), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' cat config", dir), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' stats", dir), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' check", dir), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' --no-lock check", dir), 0);
	free(out);
	assert_int_equal(rix_lock_free(l), 0);
	/* A shared one lets them and key add (shared) run, and stops key passwd / remove (exclusive). */
	assert_int_equal(rix_lock_acquire(&l, r, false), 0);
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 0);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' find-blob %s", dir, blob), 0);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' list keys", dir), 0);
	assert_int_equal(strlen(out), 65); /* one key */
	free(out);
	assert_int_equal(rix(&out, "-r '%s' key add --new-password-file '%s'", dir, newpw), 0);
	assert_non_null(strstr(out, "saved new key"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' list keys", dir), 0);
	assert_int_equal(strlen(out), 2 * 65); /* two */
	free(out);
	assert_int_equal(rix(&out, "-r '%s' key passwd --new-password-file '%s'", dir, newpw), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' list keys", dir), 0);
	assert_int_equal(strlen(out), 2 * 65); /* passwd changed nothing */
	free(out);
	assert_int_equal(rix(&out, "-r '%s' key remove 0000000000000000000000000000000000000000000000000000000000000000", dir), 11);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' --no-lock key remove 0000000000000000000000000000000000000000000000000000000000000000", dir),
			 11); /* key commands lock anyway */
	free(out);
	assert_int_equal(rix_lock_free(l), 0);
	rix_repo_free(r);
	assert_int_equal(count_entries(locks), 0);
	/* locks/ a file: with a lock, reading fails; --no-lock reads and checks. */
	assert_int_equal(rmdir(locks), 0);
	rix_test_put_file(dir, "locks", "x", 1);
	assert_int_not_equal(rix(&out, "-r '%s' check", dir), 0);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' --no-lock check", dir), 0);
	assert_non_null(strstr(out, "no errors were found"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' list blobs --no-lock", dir), 0);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' --no-lock stats --json", dir), 0);
	assert_non_null(strstr(out, "\"missing_blobs\":0"));
	free(out);
	assert_int_equal(unlink(locks), 0);
	assert_int_equal(mkdir(locks, 0700), 0);
	/* A read-only repository (a read-only bind mount, where this may mount): --no-lock checks it. */
	char ro[320];
	snprintf(ro, sizeof(ro), "%s/ro", work);
	assert_int_equal(mkdir(ro, 0700), 0);
	if (rix_test_run(&out, &(size_t){ 0 }, "mount --bind '%s' '%s' 2>/dev/null && mount -o remount,ro,bind '%s' 2>/dev/null", dir,
			 ro, ro) == 0) {
		free(out);
		assert_int_not_equal(rix(&out, "-r '%s' check", ro), 0);
		assert_non_null(strstr(out, "Read-only file system"));
		free(out);
		assert_int_equal(rix(&out, "-r '%s' --no-lock check --read-data", ro), 0);
		assert_non_null(strstr(out, "no errors were found"));
		free(out);
		assert_int_equal(rix(&out, "-r '%s' --no-lock list blobs", ro), 0);
		free(out);
		assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "umount '%s'", ro), 0);
	} else {
		fprintf(stderr, "(no read-only bind mount here: that part is skipped)\n");
	}
	free(out);
	/*
	 * A lock file that cannot be read or decoded: ignored by rix as by restic 0.14 beside it,
	 * shared and exclusive alike, with a warning naming it (restic 0.14 says nothing; the issue
	 * asks for it to be reported clearly); plain unlock leaves it (both), --remove-all removes it.
	 */
	rix_test_put_file(locks, "abababababababababababababababababababababababababababababababab", "junk", 4);
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 0);
	assert_non_null(strstr(out, "rix: warning: lock file abababababababababababababababababababababababababababababababab cannot be read"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' check", dir), 0);
	assert_non_null(strstr(out, "no errors were found"));
	assert_non_null(strstr(out, "ignored; `unlock --remove-all` removes it"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' -q backup '%s/index'", dir, dir), 0); /* any files will do */
	free(out);
	assert_int_equal(rix(&out, "-r '%s' key passwd --new-password-file '%s'", dir, newpw), 0); /* exclusive */
	free(out);
	static const char *const restic_runs[] = { "list blobs", "check", "backup -q %s/keys", "unlock" };
	for (size_t i = 0; i < sizeof(restic_runs) / sizeof(restic_runs[0]); i++) {
		char args[600];
		snprintf(args, sizeof(args), restic_runs[i], dir);
		assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RESTIC_PASSWORD='another one' restic --no-cache -r '%s' %s 2>&1", dir,
					      args),
				 0);
		free(out);
	}
	assert_int_equal(count_entries(locks), 1); /* restic's unlock left it */
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='another one' '%s' -r '%s' unlock 2>&1", RIX_CLI_PATH, dir), 0);
	free(out);
	assert_int_equal(count_entries(locks), 1); /* and rix's */
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='another one' '%s' -r '%s' snapshots 2>&1", RIX_CLI_PATH, dir), 0);
	assert_non_null(strstr(out, "2 snapshots")); /* rix's and restic's */
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='another one' '%s' -r '%s' unlock --remove-all 2>&1", RIX_CLI_PATH, dir),
			 0);
	free(out);
	assert_int_equal(count_entries(locks), 0);
}

/* The first file of a folder, its path into path. */
static void first_file(const char *dir, char *path, size_t cap)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	path[0] = '\0';
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (e->d_name[0] != '.') {
			snprintf(path, cap, "%s/%s", dir, e->d_name);
			break;
		}
	closedir(d);
	assert_true(path[0] != '\0');
}

/*
 * Exit codes and what the errors say: no repository 10, wrong password 12, usage 1; a damaged
 * index file fails list blobs, find-blob and stats (exit 1, the file named) where they printed
 * part of the blobs with 0; cat blob of a blob whose pack is gone says the pack is missing.
 */
static void test_exit_codes_and_damage(void **state)
{
	(void)state;
	char dir[300], sub[340], path[700];
	char *out = NULL;
	assert_int_equal(rix(&out, "-r '%s/none' list blobs", work), 10);
	free(out);
	make_repo(dir, sizeof(dir), "codes", 1);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD=wrong '%s' -r '%s' list keys 2>&1", RIX_CLI_PATH, dir), 12);
	assert_non_null(strstr(out, "wrong password"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' list", dir), 1);
	free(out);
	/* A blob and its pack, then the pack removed. */
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 0);
	char type[8], id[65];
	assert_int_equal(sscanf(out, "%7s %64s", type, id), 2);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' find-blob %s", dir, id), 0);
	char *in = strstr(out, "in pack ");
	assert_non_null(in);
	char pack[65];
	assert_int_equal(sscanf(in, "in pack %64[0-9a-f]", pack), 1);
	free(out);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rix(&out, "-r '%s' cat blob %s", dir, id), 1);
	assert_non_null(strstr(out, pack));
	assert_non_null(strstr(out, "missing"));
	free(out);
	/* A damaged index file. The index cache the commands above wrote holds what the file held
	 * (as restic's cache of index files does): a command reading through it does not see the
	 * damage, one with --no-cache (or check) does. */
	snprintf(sub, sizeof(sub), "%s/index", dir);
	first_file(sub, path, sizeof(path));
	flip_byte(path, 40);
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 0);
	free(out);
	assert_int_equal(rix(&out, "--no-cache -r '%s' list blobs", dir), 1);
	assert_non_null(strstr(out, "could not be read"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='%s' '%s' --no-cache -r '%s' --json list blobs 2>/dev/null", PW,
				      RIX_CLI_PATH, dir),
			 1);
	assert_string_equal(out, ""); /* nothing on stdout, not part of the blobs */
	free(out);
	assert_int_equal(rix(&out, "--no-cache -r '%s' find-blob %s", dir, id), 1);
	free(out);
	assert_int_equal(rix(&out, "--no-cache -r '%s' stats --json", dir), 1);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' check", dir), 1);
	assert_non_null(strstr(out, strrchr(path, '/') + 1)); /* "index <its name>: ..." */
	free(out);
	/* Permission denied is said so, not "not a repository" (as another user: the tests run as root). */
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 },
				      "cd / && RIX_PASSWORD=x setpriv --reuid=65534 --regid=65534 --clear-groups '%s' -r '%s' list keys 2>&1",
				      RIX_CLI_PATH, dir),
			 1);
	assert_non_null(strstr(out, "Permission denied"));
	assert_null(strstr(out, "not a repository"));
	free(out);
}

/*
 * rclone serve restic over root with user "u", password "s3cr:et@x" (a ':' and an '@' in it);
 * https with cert and key when cert is not NULL; its requests logged (-vv) into the file log
 * when log is not NULL. Its URL (rest:..., ending in '/') into base.
 */
static pid_t start_rest_logged(const char *root, char *base, size_t cap, const char *cert, const char *key,
			       const char *log)
{
	assert_int_equal(system("command -v rclone >/dev/null 2>&1"), 0);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int attempt = 0; attempt < 10; attempt++) {
		int port = 20000 + rand() % 20000;
		char addr[64];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
		snprintf(base, cap, "rest:%s://u:s3cr%%3Aet%%40x@%s/", cert != NULL ? "https" : "http", addr);
		pid_t pid = fork();
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even one that failed */
			int devnull = open("/dev/null", O_WRONLY);
			dup2(devnull, 1);
			dup2(log != NULL ? open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600) : devnull, 2);
			const char *v = log != NULL ? "-vv" : "-q";
			if (cert != NULL)
				execlp("rclone", "rclone", "serve", "restic", v, "--addr", addr, "--user", "u", "--pass", "s3cr:et@x",
				       "--cert", cert, "--key", key, root, (char *)NULL);
			else
				execlp("rclone", "rclone", "serve", "restic", v, "--addr", addr, "--user", "u", "--pass", "s3cr:et@x",
				       root, (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 100; i++) {
			usleep(100000);
			int st;
			if (waitpid(pid, &st, WNOHANG) == pid)
				break;
			char probe[300];
			snprintf(probe, sizeof(probe), "%sprobe/", base);
			rix_backend *b = NULL;
			rix_rest_options once = RIX_REST_OPTIONS_INIT;
			once.tries = 1;
			once.cacert = cert;
			int rc = rix_backend_rest_open_opts(&b, probe, 0, &once);
			rix_backend_free(b);
			if (rc != RIX_EIO)
				return pid;
		}
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
	fail_msg("rclone serve restic did not start");
	return -1;
}

static pid_t start_rest_tls(const char *root, char *base, size_t cap, const char *cert, const char *key)
{
	return start_rest_logged(root, base, cap, cert, key, NULL);
}

static pid_t start_rest(const char *root, char *base, size_t cap)
{
	return start_rest_tls(root, base, cap, NULL, NULL);
}

/* https: the server's certificate is refused unless --cacert names its CA, or --insecure-tls. */
static void test_tls_options(void **state)
{
	(void)state;
	char root[300], base[200], cert[320], key[320];
	snprintf(root, sizeof(root), "%s/tls", work);
	assert_int_equal(mkdir(root, 0700), 0);
	snprintf(cert, sizeof(cert), "%s/cert.pem", work);
	snprintf(key, sizeof(key), "%s/key.pem", work);
	char *out = NULL;
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 },
				      "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
				      "-days 2 -keyout '%s' -out '%s' 2>&1",
				      key, cert),
			 0);
	free(out);
	pid_t srv = start_rest_tls(root, base, sizeof(base), cert, key);
	assert_int_equal(rix(&out, "-r '%srepo' init", base), 1);
	assert_null(strstr(out, "s3cr"));
	free(out);
	assert_int_equal(rix(&out, "--cacert '%s' -r '%srepo' init", cert, base), 0);
	free(out);
	assert_int_equal(rix(&out, "--insecure-tls -r '%srepo' list keys", base), 0);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RESTIC_CACERT='%s' RIX_PASSWORD='%s' '%s' -r '%srepo' list keys 2>&1", cert,
				      PW, RIX_CLI_PATH, base),
			 0);
	free(out);
	assert_int_equal(rix(&out, "--cacert '%s/none.pem' -r '%srepo' list keys", work, base), 1);
	assert_non_null(strstr(out, "none.pem"));
	free(out);
	kill(srv, SIGTERM);
	waitpid(srv, NULL, 0);
}

/* A REST URL's password never shows: init, check, errors, text and --json. */
static void test_secrets_not_printed(void **state)
{
	(void)state;
	char root[300], base[200];
	snprintf(root, sizeof(root), "%s/rest", work);
	assert_int_equal(mkdir(root, 0700), 0);
	pid_t srv = start_rest(root, base, sizeof(base));
	char *out = NULL;
	assert_int_equal(rix(&out, "-r '%srepo' init", base), 0);
	assert_null(strstr(out, "s3cr"));
	assert_non_null(strstr(out, "u:***@"));
	free(out);
	assert_int_equal(rix(&out, "-r '%srepo' init --json", base), 1); /* exists */
	assert_null(strstr(out, "s3cr"));
	free(out);
	assert_int_equal(rix(&out, "-r '%srepo2' --json init", base), 0);
	assert_null(strstr(out, "s3cr"));
	assert_non_null(strstr(out, "u:***@"));
	free(out);
	char filled[340];
	make_repo(filled, sizeof(filled), "rest/filled", 1); /* (an empty repository's check trips UBSan in check.c) */
	assert_int_equal(rix(&out, "-r '%sfilled' check", base), 0);
	assert_null(strstr(out, "s3cr"));
	assert_non_null(strstr(out, "u:***@"));
	free(out);
	assert_int_equal(rix(&out, "-r '%snone' list keys", base), 10);
	assert_null(strstr(out, "s3cr"));
	free(out);
	kill(srv, SIGTERM);
	waitpid(srv, NULL, 0);
	/* The server gone: tried again (here 3 times), then one line naming the operation. */
	assert_int_equal(rix(&out, "-r '%srepo' list keys", base), 1);
	assert_null(strstr(out, "s3cr"));
	assert_non_null(strstr(out, "rest: stat"));
	assert_non_null(strstr(out, "3 tries"));
	assert_null(strchr(strchr(out, '\n') + 1, '\n'));
	free(out);
	assert_int_equal(rix(&out, "-r 'xx://u:s3cr@h/' list keys"), 1);
	assert_null(strstr(out, "s3cr"));
	free(out);
}

/* `sh -c cmd` without a controlling terminal, without RIX_/RESTIC_ variables; its status. */
static int bare(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bare(char **out, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return rix_test_run(out, &(size_t){ 0 },
			    "env -u RIX_PASSWORD -u RESTIC_PASSWORD -u RIX_REPOSITORY -u RESTIC_REPOSITORY setsid -w sh -c '%s' 2>&1",
			    cmd);
}

/*
 * Passwords and repositories as restic takes them: a password file ending in CRLF, a password
 * command (option and variables), the password on standard input, --repository-file and
 * RESTIC_REPOSITORY_FILE, key add's --new-password-file (restic opens with it) and the message
 * naming it when there is none.
 */
static void test_passwords_and_repository_file(void **state)
{
	(void)state;
	rix_test_need_restic();
	char dir[300], f[400], f2[400], rf[400];
	make_repo(dir, sizeof(dir), "pw", 0);
	char *out = NULL;
	rix_test_put_file(work, "crlf", PW "\r\n", strlen(PW) + 2);
	snprintf(f, sizeof(f), "%s/crlf", work);
	assert_int_equal(bare(&out, "%s -r %s --password-file %s list keys", RIX_CLI_PATH, dir, f), 0);
	free(out);
	assert_int_equal(bare(&out, "RESTIC_PASSWORD_FILE=%s %s -r %s list keys", f, RIX_CLI_PATH, dir), 0);
	free(out);
	assert_int_equal(bare(&out, "%s -r %s --password-command \"cat %s\" list keys", RIX_CLI_PATH, dir, f), 0);
	free(out);
	assert_int_equal(bare(&out, "RESTIC_PASSWORD_COMMAND=\"cat %s\" %s -r %s list keys", f, RIX_CLI_PATH, dir), 0);
	free(out);
	assert_int_equal(bare(&out, "RIX_PASSWORD_COMMAND=false %s -r %s list keys", RIX_CLI_PATH, dir), 1);
	assert_non_null(strstr(out, "password command failed"));
	free(out);
	assert_int_equal(bare(&out, "%s -r %s --password-file %s --password-command true list keys", RIX_CLI_PATH, dir, f), 1);
	assert_non_null(strstr(out, "mutually exclusive"));
	free(out);
	assert_int_equal(bare(&out, "printf \"%s\\r\\n\" | %s -r %s list keys", PW, RIX_CLI_PATH, dir), 0);
	free(out);
	assert_int_equal(bare(&out, "%s -r %s list keys </dev/null", RIX_CLI_PATH, dir), 1);
	assert_non_null(strstr(out, "no password"));
	free(out);
	/* The repository from a file. */
	rix_test_put_file(work, "repofile", dir, strlen(dir));
	snprintf(rf, sizeof(rf), "%s/repofile", work);
	assert_int_equal(bare(&out, "%s --repository-file %s --password-file %s list keys", RIX_CLI_PATH, rf, f), 0);
	free(out);
	assert_int_equal(bare(&out, "RESTIC_REPOSITORY_FILE=%s %s --password-file %s list keys", rf, RIX_CLI_PATH, f), 0);
	free(out);
	assert_int_equal(bare(&out, "%s -r %s --repository-file %s --password-file %s list keys", RIX_CLI_PATH, dir, rf, f), 1);
	assert_non_null(strstr(out, "mutually exclusive"));
	free(out);
	/* key add: no new password names --new-password-file; with it, restic opens with the new one. */
	assert_int_equal(bare(&out, "%s -r %s --password-file %s key add", RIX_CLI_PATH, dir, f), 1);
	assert_non_null(strstr(out, "--new-password-file"));
	free(out);
	rix_test_put_file(work, "newpw", "new one\r\n", 9);
	snprintf(f2, sizeof(f2), "%s/newpw", work);
	assert_int_equal(bare(&out, "%s -r %s --password-file %s key add --new-password-file %s", RIX_CLI_PATH, dir, f, f2), 0);
	free(out);
	assert_int_equal(bare(&out, "restic --no-cache -q -r %s --password-file %s cat config >/dev/null", dir, f2), 0);
	free(out);
}

/*
 * A repository without its empty folders (as copied through object storage): rix check takes
 * its lock (locks/ made again), the library saves and flushes (data/xx/, index/, snapshots/
 * made as needed), and restic checks the result.
 */
static void test_missing_empty_folders(void **state)
{
	(void)state;
	rix_test_need_restic();
	char dir[300];
	make_repo(dir, sizeof(dir), "bare", 1);
	char *out = NULL;
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "find '%s' -mindepth 1 -type d -empty -delete && ls '%s'", dir, dir), 0);
	assert_null(strstr(out, "locks"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' check", dir), 0);
	assert_non_null(strstr(out, "no errors were found"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "find '%s' -mindepth 1 -type d -empty -delete", dir), 0);
	free(out);
	rix_repo *r = open_repo(dir, NULL);
	rix_lock *l;
	assert_int_equal(rix_lock_acquire(&l, r, false), 0);
	struct blobs s;
	make_blobs(&s, 60, 4242);
	save_all(r, &s);
	free_blobs(&s);
	assert_int_equal(rix_repo_flush(r), 0);
	assert_int_equal(rix_lock_free(l), 0);
	rix_repo_free(r);
	assert_int_equal(rix(&out, "-r '%s' check --read-data", dir), 0);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' check 2>&1", PW, dir), 0);
	free(out);
}

/* Help on standard output; unknown flags and commands named; restic's global flags accepted or refused clearly. */
static void test_help_and_flags(void **state)
{
	(void)state;
	char *out = NULL;
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' help 2>/dev/null", RIX_CLI_PATH), 0);
	static const char *const cmds[] = { "init", "list", "cat", "find-blob", "stats", "key", "check", "unlock" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		assert_non_null(strstr(out, cmds[i]));
	assert_non_null(strstr(out, "--password-command"));
	assert_non_null(strstr(out, "130/143/129 interrupted (SIGINT/SIGTERM/SIGHUP)")); /* the codes test_signal_releases_lock sees */
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' help check 2>/dev/null", RIX_CLI_PATH), 0);
	assert_non_null(strstr(out, "--read-data"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' check --help 2>/dev/null", RIX_CLI_PATH), 0);
	assert_non_null(strstr(out, "--read-data"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' key -h 2>/dev/null", RIX_CLI_PATH), 0);
	assert_non_null(strstr(out, "--new-password-file"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' --help 2>/dev/null", RIX_CLI_PATH), 0);
	assert_non_null(strstr(out, "commands:"));
	free(out);
	assert_int_equal(rix(&out, "check --bogus"), 1);
	assert_non_null(strstr(out, "--bogus"));
	free(out);
	assert_int_equal(rix(&out, "frob"), 1);
	assert_non_null(strstr(out, "frob"));
	free(out);
	assert_int_equal(rix(&out, "help frob"), 1);
	assert_non_null(strstr(out, "frob"));
	free(out);
	assert_int_equal(rix(&out, "list keys --cache-dir"), 1); /* it takes a folder */
	assert_non_null(strstr(out, "--cache-dir needs a value"));
	free(out);
	assert_int_equal(rix(&out, "-o rest.connections=2 list keys"), 1);
	assert_non_null(strstr(out, "-o"));
	free(out);
	assert_int_equal(rix(&out, "--limit-download lots list keys"), 1);
	assert_non_null(strstr(out, "--limit-download"));
	free(out);
	char dir[300];
	make_repo(dir, sizeof(dir), "flags", 0);
	assert_int_equal(rix(&out, "-r '%s' --no-cache -v list keys", dir), 0);
	free(out);
	assert_int_equal(rix(&out, "--limit-upload 100 --limit-download=200 -q -r '%s' list keys", dir), 0);
	free(out);
	assert_int_equal(rix(&out, "version"), 0);
	assert_non_null(strstr(out, "rix "));
	free(out);
}

/*
 * A snapshot of two files of one blob each; one blob dropped from the index (its pack still
 * holds it): stats says "missing_blobs":1 (0 before), and the text names it.
 */
static void test_stats_missing_blobs(void **state)
{
	(void)state;
	char dir[300], src[300];
	make_repo(dir, sizeof(dir), "stats", 0);
	snprintf(src, sizeof(src), "%s/stats-src", work);
	assert_int_equal(mkdir(src, 0700), 0);
	uint64_t st = 77;
	uint8_t buf[3000];
	rix_test_fill_random(buf, sizeof(buf), &st);
	rix_test_put_file(src, "a", buf, 1000);
	rix_test_put_file(src, "b", buf + 1000, 2000);
	char *out = NULL;
	assert_int_equal(rix(&out, "-r '%s' -q backup '%s'", dir, src), 0);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' stats --json", dir), 0);
	assert_non_null(strstr(out, "\"missing_blobs\":0}"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' list blobs", dir), 0);
	char *line = strstr(out, "data ");
	assert_non_null(line);
	rix_id id;
	MUST(rix_id_from_hex(&id, line + 5, 64));
	free(out);
	assert_int_equal(drop_from_index(dir, &id), 1);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='%s' '%s' -r '%s' stats --json", PW, RIX_CLI_PATH, dir), 0);
	assert_non_null(strstr(out, "\"data_blobs\":1,"));
	assert_non_null(strstr(out, "\"missing_blobs\":1}"));
	free(out);
	assert_int_equal(rix(&out, "-r '%s' stats", dir), 0);
	assert_non_null(strstr(out, "Missing data blobs:       1 "));
	free(out);
}

/* `rix <args>` started in the background (PW, 3 tries from 50 ms), stdout and stderr into
 * <work>/bg.out and <work>/bg.err; its pid. */
static pid_t rix_bg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static pid_t rix_bg(const char *fmt, ...)
{
	char args[2048], cmd[3000];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd),
		 "RIX_PASSWORD='%s' RESTIC_PASSWORD= RIX_REST_TRIES=3 RIX_REST_FIRST_DELAY_MS=50 exec '%s' %s >'%s/bg.out' 2>'%s/bg.err'",
		 PW, RIX_CLI_PATH, args, work, work);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even one that failed */
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits (up to 30 s) until the file holds text. */
static void wait_for_text(const char *path, const char *text)
{
	struct timespec ms = { 0, 1000000 };
	for (int i = 0; i < 30000; i++) {
		char *t = rix_test_read_file(path, &(size_t){ 0 });
		int found = t != NULL && strstr(t, text) != NULL;
		free(t);
		if (found)
			return;
		nanosleep(&ms, NULL);
	}
	fail_msg("\"%s\" did not appear in %s", text, path);
}

/*
 * The REST server killed while `rix check` runs: the check stops at the first request that
 * fails after its tries, and says so once, naming the operation ("check stopped: ... rest:
 * read <url>: ... (3 tries ...)"), exit 1; nothing reported as damage (no "error:" lines, no
 * "damaged", no summary, no broken_packs); the only other line allowed is the one saying the
 * lock file could not be removed (the server is gone). The server's log says where rix is:
 * --read-data (text and --json): killed while packs are read (a download limit keeps it
 * reading); plain: rix stopped (SIGSTOP) as soon as it lists the index files, the server
 * killed, rix resumed.
 */
static void test_rest_gone_mid_check(void **state)
{
	(void)state;
	char root[300], dir[300], base[200], locks[320], path[400], log[300];
	snprintf(root, sizeof(root), "%s/gone", work);
	assert_int_equal(mkdir(root, 0700), 0);
	make_repo(dir, sizeof(dir), "gone/repo", 4);
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	static const char *const runs[] = { "check --read-data", "--json check --read-data", "check" };
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		int plain = strstr(runs[k], "--read-data") == NULL, json = strstr(runs[k], "--json") != NULL;
		rix_test_rmtree(locks); /* the lock the last run could not remove */
		assert_int_equal(mkdir(locks, 0700), 0);
		snprintf(log, sizeof(log), "%s/rclone.log", work);
		pid_t srv = start_rest_logged(root, base, sizeof(base), NULL, NULL, log);
		pid_t pid = rix_bg("--limit-download 2048 -r '%srepo' %s", base, runs[k]);
		if (plain) {
			wait_for_text(log, "GET /repo/index/");
			kill(pid, SIGSTOP);
		} else {
			wait_for_text(log, "GET /repo/data/");
			usleep(300000); /* reading packs: 60 MiB at 2 MiB/s */
		}
		kill(srv, SIGKILL);
		assert_int_equal(waitpid(srv, NULL, 0), srv);
		if (plain)
			kill(pid, SIGCONT);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		snprintf(path, sizeof(path), "%s/bg.err", work);
		char *err = rix_test_must_read(path, &(size_t){ 0 });
		snprintf(path, sizeof(path), "%s/bg.out", work);
		char *out = rix_test_must_read(path, &(size_t){ 0 });
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
			fail_msg("%s: status %d\n%s%s", runs[k], st, out, err);
		int stopped = 0;
		for (char *save = NULL, *line = strtok_r(err, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
			static const char want[] = "rix: check stopped: the repository could not be read: rest: ";
			if (strncmp(line, want, sizeof(want) - 1) == 0) {
				stopped++;
				if (strstr(line, "(3 tries over") == NULL)
					fail_msg("%s: %s", runs[k], line);
				if (!plain && (strstr(line, "rest: read ") == NULL || strstr(line, "/data/") == NULL))
					fail_msg("%s: not a pack's read: %s", runs[k], line); /* killed while packs were read */
			} else if (strncmp(line, "rix: the lock file could not be removed", 39) != 0) {
				fail_msg("%s: another line: %s", runs[k], line);
			}
		}
		assert_int_equal(stopped, 1);
		assert_null(strstr(out, "no errors were found"));
		assert_null(strstr(out, "damaged"));
		if (json)
			assert_string_equal(out, ""); /* no summary, so no broken_packs */
		free(err);
		free(out);
	}
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The bytes of the files under dir. */
static long long tree_bytes(const char *dir)
{
	char *out = NULL;
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "find '%s' -type f -printf '%%s\\n' | awk '{ s += $1 } END { print s }'", dir), 0);
	long long n = atoll(out);
	free(out);
	assert_true(n > 0);
	return n;
}

/*
 * The limits act on every backend, local too, and on all transfers together (check reads packs
 * on two threads and more): a limited check --read-data takes at least the packs' bytes / rate,
 * a limited backup at least the bytes it stores / rate. Lower bounds only: a slow machine only
 * makes them truer.
 */
static void test_limits(void **state)
{
	(void)state;
	char dir[300], data[320], src[300];
	make_repo(dir, sizeof(dir), "limits", 1);
	snprintf(data, sizeof(data), "%s/data", dir);
	long long packs = tree_bytes(data);
	int npacks = 0;
	char *out = NULL;
	assert_int_equal(rix(&out, "-r '%s' list packs", dir), 0);
	for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++)
		npacks++;
	free(out);
	assert_true(npacks >= 2); /* so that several threads read at once */
	long kib = (long)(packs / 1024 / 2); /* about 2 s */
	double t0 = now_seconds();
	assert_int_equal(rix(&out, "--limit-download %ld -r '%s' check --read-data", kib, dir), 0);
	double took = now_seconds() - t0;
	assert_non_null(strstr(out, "no errors were found"));
	free(out);
	if (took < (double)packs / (double)(kib * 1024))
		fail_msg("check --read-data of %lld bytes of packs at %ld KiB/s took %.2f s", packs, kib, took);
	/* uploads: a backup of 3 MiB of random data */
	snprintf(src, sizeof(src), "%s/limits-src", work);
	assert_int_equal(mkdir(src, 0700), 0);
	static uint8_t buf[3 << 20];
	uint64_t st = 99;
	rix_test_fill_random(buf, sizeof(buf), &st);
	rix_test_put_file(src, "random", buf, sizeof(buf));
	t0 = now_seconds();
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='%s' '%s' --limit-upload 1024 -q --json -r '%s' backup '%s'", PW,
				      RIX_CLI_PATH, dir, src),
			 0);
	took = now_seconds() - t0;
	const char *at = strstr(out, "\"data_added_packed\":");
	assert_non_null(at);
	long long stored = atoll(at + 20);
	free(out);
	assert_true(stored >= (long long)sizeof(buf));
	if (took < (double)stored / (1024 * 1024))
		fail_msg("a backup storing %lld bytes at 1024 KiB/s took %.2f s", stored, took);
}

/* Whether text holds tok as a word of the command line (not inside a longer flag or word). */
static int has_word(const char *text, const char *tok)
{
	size_t n = strlen(tok);
	for (const char *p = text; (p = strstr(p, tok)) != NULL; p++) {
		int before = p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-');
		int after = isalnum((unsigned char)p[n]) || p[n] == '-';
		if (!before && !after)
			return 1;
	}
	return 0;
}

/*
 * The flags of a help text: on each line whose first non-blank is '-', the column before the
 * description (up to two spaces), split at spaces and commas, each word that begins with '-'.
 * Each must be a word of readme; the flags seen counted in *seen.
 */
static void flags_in_readme(const char *help, const char *readme, const char *what, int *seen)
{
	for (const char *line = help; *line;) {
		size_t len = strcspn(line, "\n");
		const char *p = line + strspn(line, " ");
		if (*p == '-') {
			const char *end = strstr(p, "  ");
			if (end == NULL || end > line + len)
				end = line + len;
			while (p < end) {
				size_t w = strcspn(p, " ,");
				if (p + w > end)
					w = (size_t)(end - p);
				if (*p == '-') {
					char flag[64];
					snprintf(flag, sizeof(flag), "%.*s", (int)w, p);
					if (!has_word(readme, flag))
						fail_msg("README's usage section lacks %s (%s)", flag, what);
					++*seen;
				}
				p += w;
				p += strspn(p, " ,");
			}
		}
		line += len + (line[len] == '\n');
	}
}

/*
 * README's usage section ("## The rix command") names every command `rix help` lists and every
 * flag of each command's help and of the global options: help prints the parser's own tables
 * (main.c), so a flag the parser takes and README lacks fails here.
 */
static void test_readme_usage(void **state)
{
	(void)state;
	char path[600];
	snprintf(path, sizeof(path), "%s/../../README.md", rix_test_data_dir());
	char *readme = rix_test_must_read(path, &(size_t){ 0 });
	char *from = strstr(readme, "\n## The rix command\n");
	assert_non_null(from);
	char *to = strstr(from + 1, "\n## ");
	if (to != NULL)
		*to = '\0';
	char *help = NULL;
	assert_int_equal(rix_test_run(&help, &(size_t){ 0 }, "'%s' help 2>/dev/null", RIX_CLI_PATH), 0);
	int seen = 0, ncmds = 0;
	flags_in_readme(help, from, "global options", &seen);
	const char *cmds = strstr(help, "commands:\n");
	assert_non_null(cmds);
	for (const char *line = cmds + 10; strncmp(line, "  ", 2) == 0; line = strchr(line, '\n') + 1) {
		char name[32], want[48], *sub = NULL;
		assert_int_equal(sscanf(line, " %31s", name), 1);
		snprintf(want, sizeof(want), "rix %s", name);
		if (!has_word(from, want))
			fail_msg("README's usage section lacks `%s`", want);
		assert_int_equal(rix_test_run(&sub, &(size_t){ 0 }, "'%s' help %s 2>/dev/null", RIX_CLI_PATH, name), 0);
		flags_in_readme(sub, from, name, &seen);
		free(sub);
		ncmds++;
	}
	assert_true(ncmds >= 13);
	assert_true(seen > 60); /* the parse found the flags (globals counted once per help) */
	free(help);
	free(readme);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signal_releases_lock),
		cmocka_unit_test(test_locks_and_no_lock),
		cmocka_unit_test(test_exit_codes_and_damage),
		cmocka_unit_test(test_secrets_not_printed),
		cmocka_unit_test(test_passwords_and_repository_file),
		cmocka_unit_test(test_missing_empty_folders),
		cmocka_unit_test(test_help_and_flags),
		cmocka_unit_test(test_tls_options),
		cmocka_unit_test(test_readme_usage),
		cmocka_unit_test(test_stats_missing_blobs),
		cmocka_unit_test(test_rest_gone_mid_check),
		cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
