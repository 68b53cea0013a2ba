/*
 * tests/test_rest.c — repo/rest.c against a real REST server: `rclone serve restic` (Debian's
 * rclone; scripts/deps.sh installs it), started on a free local port and stopped by the test.
 *
 * Cases: the backend operations (write, stat, read ranges, a read past the end, list, remove,
 * missing files, create twice); a whole repository over REST (init, save, flush, reopen, load,
 * check --read-data) that the real restic then checks and reads over the same server; and a
 * server that went away: RIX_EIO with curl's message, never a crash.
 */
#include <errno.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "testutil.h"


#define PW "rest pw"

static pid_t server = -1;
static char root[256];
static char base[128]; /* http://127.0.0.1:<port>/ */
static char addr_used[64];

/* Starts rclone serve restic over a fresh directory; waits until it answers. */
static int start_server(void **state)
{
	(void)state;
	if (system("command -v rclone >/dev/null 2>&1") != 0) {
		fprintf(stderr, "rclone is missing (scripts/deps.sh installs it)\n");
		return -1;
	}
	rix_test_mkdtemp(root, sizeof(root), "rix-rest");
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int attempt = 0; attempt < 10; attempt++) {
		int port = 20000 + rand() % 20000;
		char addr[64];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
		snprintf(base, sizeof(base), "http://%s/", addr);
		snprintf(addr_used, sizeof(addr_used), "%s", addr);
		server = fork();
		if (server == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even one that failed */
			int devnull = open("/dev/null", O_WRONLY);
			dup2(devnull, 1);
			dup2(devnull, 2);
			execlp("rclone", "rclone", "serve", "restic", "--addr", addr, root, (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 100; i++) { /* up to 10 s */
			usleep(100000);
			int st;
			if (waitpid(server, &st, WNOHANG) == server) { /* exited: port taken? */
				server = -1;
				break;
			}
			/* Up once it answers at all (404 for the missing repository, not a refused connection). */
			rix_backend *b = NULL;
			char probe[200];
			snprintf(probe, sizeof(probe), "rest:%sprobe/", base);
			rix_rest_options once = RIX_REST_OPTIONS_INIT;
			once.tries = 1;
			int rc = rix_backend_rest_open_opts(&b, probe, 0, &once);
			rix_backend_free(b);
			if (rc != RIX_EIO) {
				int st2;
				if (waitpid(server, &st2, WNOHANG) == 0) /* ours answered: still running */
					return 0;
				server = -1; /* something else holds the port and ours has exited */
				break;
			}
		}
		if (server > 0) {
			kill(server, SIGTERM);
			waitpid(server, NULL, 0);
			server = -1;
		}
	}
	fprintf(stderr, "rclone serve restic did not start\n");
	return -1;
}

static int stop_server(void **state)
{
	(void)state;
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
		server = -1;
	}
	rix_test_rmtree(root);
	return 0;
}

static void url_for(char *buf, size_t cap, const char *repo)
{
	snprintf(buf, cap, "rest:%s%s/", base, repo);
}

static int count(void *arg, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	++*(int *)arg;
	return 0;
}

static void test_backend_ops(void **state)
{
	(void)state;
	char url[256];
	url_for(url, sizeof(url), "ops");
	rix_backend *b;
	assert_int_equal(rix_backend_rest_open(&b, url, 0), RIX_ENOTFOUND);
	MUST(rix_backend_rest_open(&b, url, 1));
	assert_string_equal(rix_backend_kind(b), "rest");
	assert_null(rix_backend_temp_dir(b));
	MUST(rix_backend_write(b, RIX_FILE_CONFIG, NULL, "cfg", 3));
	rix_backend_free(b);
	assert_int_equal(rix_backend_rest_open(&b, url, 1), RIX_EEXISTS);
	MUST(rix_backend_rest_open(&b, url, 0));
	uint64_t st = 3;
	static uint8_t data[300000];
	rix_test_fill_random(data, sizeof(data), &st);
	rix_id id;
	char name[65];
	rix_sha256(&id, data, sizeof(data));
	rix_id_to_hex(name, &id);
	for (int t = RIX_FILE_KEY; t < RIX_FILE_TYPES; t++) {
		MUST(rix_backend_write(b, (rix_file_type)t, name, data, sizeof(data)));
		uint64_t size;
		MUST(rix_backend_stat(&size, b, (rix_file_type)t, name));
		assert_int_equal(size, sizeof(data));
		uint8_t got[5000];
		MUST(rix_backend_read(b, (rix_file_type)t, name, 123456, got, sizeof(got)));
		assert_memory_equal(got, data + 123456, sizeof(got));
		assert_int_equal(rix_backend_read(b, (rix_file_type)t, name, sizeof(data) - 10, got, 20), RIX_ECORRUPT);
		int n = 0;
		MUST(rix_backend_list(b, (rix_file_type)t, count, &n));
		assert_int_equal(n, 1);
		MUST(rix_backend_remove(b, (rix_file_type)t, name));
		assert_int_equal(rix_backend_stat(&size, b, (rix_file_type)t, name), RIX_ENOTFOUND);
		/* A missing file's read is "not found", whatever error page the server sends. */
		assert_int_equal(rix_backend_read(b, (rix_file_type)t, name, 0, got, 4), RIX_ENOTFOUND);
		n = 0;
		MUST(rix_backend_list(b, (rix_file_type)t, count, &n));
		assert_int_equal(n, 0);
	}
	/* A pack sent from its file descriptor (as the packer hands it over). */
	char tmp[] = "/tmp/rix-rest-XXXXXX";
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	bool taken = true; /* write_file must say false */
	MUST(rix_backend_write_file(&taken, b, RIX_FILE_PACK, name, fd, tmp, sizeof(data)));
	assert_int_equal(taken, 0);
	close(fd);
	unlink(tmp);
	uint8_t *all;
	size_t an;
	MUST(rix_backend_read_all(&all, &an, b, RIX_FILE_PACK, name, sizeof(data)));
	assert_int_equal(an, sizeof(data));
	assert_memory_equal(all, data, an);
	rix_free(all);
	rix_backend_free(b);
	assert_int_equal(rix_backend_rest_open(&b, "ftp://nowhere/", 0), RIX_EINVAL);
	/* Credentials in the URL are sent apart and never appear in a message. */
	char cred[300];
	snprintf(cred, sizeof(cred), "rest:http://user:s3cret@%smissing/", base + strlen("http://"));
	assert_int_equal(rix_backend_rest_open(&b, cred, 0), RIX_ENOTFOUND);
	assert_null(strstr(rix_error_last(), "s3cret"));
	assert_non_null(strstr(rix_error_last(), "missing"));
}

static void test_repository_over_rest(void **state)
{
	(void)state;
	rix_test_need_restic();
	char url[256];
	url_for(url, sizeof(url), "repo");
	rix_backend *b;
	MUST(rix_backend_rest_open(&b, url, 1));
	rix_repo_options o = { .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO, .repo_version = 2, .pack_size = 4 << 20, .scrypt_n = 128, .scrypt_r = 1, .scrypt_p = 1 };
	rix_repo *r;
	MUST(rix_repo_init(&r, b, PW, strlen(PW), &o));
	enum { N = 40 };
	static uint8_t *blobs[N];
	static size_t lens[N];
	static rix_id ids[N];
	uint64_t st = 5;
	for (int i = 0; i < N; i++) {
		lens[i] = i == 7 ? (5u << 20) : 1000 + (size_t)(rix_test_next(&st) % 300000);
		blobs[i] = malloc(lens[i]);
		rix_test_fill_random(blobs[i], lens[i], &st);
		if (i % 2)
			memset(blobs[i], 'z', lens[i] / 2);
		MUST(rix_repo_save_blob(&ids[i], NULL, r, RIX_BLOB_DATA, blobs[i], lens[i]));
	}
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	MUST(rix_backend_rest_open(&b, url, 0));
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &o));
	rix_repo_load_stats ls;
	MUST(rix_repo_load_index(&ls, r, NULL, NULL));
	assert_int_equal(ls.blobs, N);
	for (int i = 0; i < N; i++) {
		uint8_t *out;
		size_t n;
		MUST(rix_repo_load_blob(&out, &n, r, RIX_BLOB_DATA, &ids[i]));
		assert_int_equal(n, lens[i]);
		assert_memory_equal(out, blobs[i], n);
		rix_free(out);
	}
	rix_repo_free(r);
	MUST(rix_backend_rest_open(&b, url, 0));
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &o));
	rix_check_report rep;
	MUST(rix_repo_check(&rep, r, &(rix_check_options){ .version = RIX_CHECK_OPTIONS_VERSION, .read_data = true }));
	assert_int_equal(rep.blobs, N);
	rix_repo_free(r);
	/* The real restic, over the same server. */
	char *out = NULL;
	size_t on;
	int rc = rix_test_run(&out, &on, "RESTIC_PASSWORD='%s' restic --no-cache -r '%s' check --read-data 2>&1", PW, url);
	if (rc != 0 || strstr(out, "no errors were found") == NULL)
		fail_msg("restic check --read-data over REST: %s", out);
	if (getenv("RIX_TEST_VERBOSE"))
		fprintf(stderr, "%s", out);
	free(out);
	char hex[65];
	rix_id_to_hex(hex, &ids[3]);
	rc = rix_test_run(&out, &on, "RESTIC_PASSWORD='%s' restic --no-cache -r '%s' cat blob %s", PW, url, hex);
	assert_int_equal(rc, 0);
	assert_int_equal(on, lens[3]);
	assert_memory_equal(out, blobs[3], on);
	free(out);
	for (int i = 0; i < N; i++)
		free(blobs[i]);
}

/*
 * The server goes away for a moment (rclone stopped, started again on the same port 0.6 s
 * later): a request is tried again with growing waits and succeeds once it is back.
 */
static void test_server_back(void **state)
{
	(void)state;
	char url[256];
	url_for(url, sizeof(url), "ops");
	rix_rest_options o = RIX_REST_OPTIONS_INIT;
	o.tries = 8;
	o.first_delay_ms = 100; /* waits 0.1, 0.15, 0.225, ... s: about 5 s over 8 tries */
	rix_backend *b;
	MUST(rix_backend_rest_open_opts(&b, url, 0, &o));
	kill(server, SIGTERM);
	waitpid(server, NULL, 0);
	server = fork();
	if (server == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even one that failed */
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		dup2(devnull, 2);
		usleep(600000);
		execlp("rclone", "rclone", "serve", "restic", "--addr", addr_used, root, (char *)NULL);
		_exit(127);
	}
	uint64_t size;
	MUST(rix_backend_stat(&size, b, RIX_FILE_CONFIG, NULL));
	rix_backend_free(b);
}

/*
 * A busy server (a Python one answering 503 twice, then 404): with 2 tries the request fails
 * naming HTTP 503 and the tries; with more it gets through to the 404 (not tried again: a 4xx
 * is an answer).
 */
static void test_server_busy(void **state)
{
	(void)state;
	char dir[300], script[400], ready[400];
	rix_test_mkdtemp(dir, sizeof(dir), "rix-busy");
	snprintf(script, sizeof(script), "%s/busy.py", dir);
	snprintf(ready, sizeof(ready), "%s/ready", dir);
	static const char py[] =
		"import http.server, sys\n"
		"n = [0]\n"
		"class H(http.server.BaseHTTPRequestHandler):\n"
		"    def answer(self):\n"
		"        n[0] += 1\n"
		"        self.send_response(503 if n[0] <= 2 else 404)\n"
		"        self.send_header('Content-Length', '0')\n"
		"        self.end_headers()\n"
		"    do_HEAD = answer\n"
		"    do_GET = answer\n"
		"    def log_message(self, *a): pass\n"
		"s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
		"open(sys.argv[1] + '.tmp', 'w').write(str(s.server_address[1]))\n"
		"import os; os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
		"s.serve_forever()\n";
	rix_test_put_file(dir, "busy.py", py, sizeof(py) - 1);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even one that failed */
		execlp("python3", "python3", script, ready, (char *)NULL);
		_exit(127);
	}
	char *port = NULL;
	for (int i = 0; i < 100 && (port = rix_test_read_file(ready, &(size_t){ 0 })) == NULL; i++)
		usleep(50000);
	assert_non_null(port);
	char url[200];
	snprintf(url, sizeof(url), "rest:http://127.0.0.1:%s/busy/", port);
	free(port);
	rix_rest_options o = RIX_REST_OPTIONS_INIT;
	o.tries = 2;
	o.first_delay_ms = 20;
	rix_backend *b = NULL;
	assert_int_equal(rix_backend_rest_open_opts(&b, url, 0, &o), RIX_EIO);
	assert_non_null(strstr(rix_error_last(), "HTTP 503 (2 tries"));
	o.tries = 5;
	assert_int_equal(rix_backend_rest_open_opts(&b, url, 0, &o), RIX_ENOTFOUND);
	assert_null(strstr(rix_error_last(), "tries"));
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	rix_test_rmtree(dir);
}

/* Last: the server goes away; every call fails cleanly with curl's reason, after its tries. */
static void test_server_gone(void **state)
{
	char url[256];
	url_for(url, sizeof(url), "ops");
	rix_rest_options o = RIX_REST_OPTIONS_INIT;
	o.tries = 3;
	o.first_delay_ms = 50;
	rix_backend *b;
	MUST(rix_backend_rest_open_opts(&b, url, 0, &o));
	stop_server(state);
	uint64_t size;
	assert_int_equal(rix_backend_stat(&size, b, RIX_FILE_CONFIG, NULL), RIX_EIO);
	assert_non_null(strstr(rix_error_last(), "rest: stat"));
	assert_non_null(strstr(rix_error_last(), "(3 tries over 0.1 s)"));
	uint8_t x[4];
	assert_int_equal(rix_backend_read(b, RIX_FILE_CONFIG, NULL, 0, x, 4), RIX_EIO);
	assert_int_equal(rix_backend_write(b, RIX_FILE_CONFIG, NULL, "c", 1), RIX_EIO);
	rix_backend_free(b);
	assert_int_equal(rix_backend_rest_open_opts(&b, url, 0, &o), RIX_EIO);
	assert_non_null(strstr(rix_error_last(), "connect"));
	o.version = 99;
	assert_int_equal(rix_backend_rest_open_opts(&b, url, 0, &o), RIX_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend_ops),
		cmocka_unit_test(test_repository_over_rest),
		cmocka_unit_test(test_server_busy),
		cmocka_unit_test(test_server_back),
		cmocka_unit_test(test_server_gone),
	};
	return cmocka_run_group_tests(tests, start_server, stop_server);
}
