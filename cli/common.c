/*
 * cli/common.c — what the commands share: errors, passwords, opening the repository and its index (cli.h).
 */
#include "cli.h"

#include <stdatomic.h>

struct cli_globals g = { .version = 2 };

int die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("rix: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

int fail(int rc)
{
	const char *m = rix_error_last();
	die("%s", m[0] ? m : rix_strerror(rc));
	return rc == RIX_ELOCKED ? EXIT_LOCKED : EXIT_FAIL;
}

/* ---- signals and the lock ------------------------------------------------------------------ */

/* The lock the command holds, and the mutex that orders its taking and release with a signal. */
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static rix_lock *held;
static sigset_t signals;

/* A signal while the first is being handled (a release stuck on a server that went away): out now. */
static void *second_signal(void *arg)
{
	(void)arg;
	int sig = 0;
	while (sigwait(&signals, &sig) != 0)
		;
	static const char msg[] = "rix: interrupted again: the lock may be left (`rix unlock` removes it)\n";
	if (write(2, msg, sizeof(msg) - 1) < 0) {
	}
	_exit(sig == SIGINT ? 130 : sig == SIGTERM ? 143 : 128 + sig);
}

static void *signal_thread(void *arg)
{
	(void)arg;
	int sig = 0;
	while (sigwait(&signals, &sig) != 0)
		;
	static const char msg[] = "rix: interrupted, cleaning up\n";
	if (write(2, msg, sizeof(msg) - 1) < 0) {
	}
	/*
	 * Taking held_mu waits for a lock being taken (its file is written) and keeps cli_unlock
	 * from freeing it meanwhile. The command runs on until _exit: the lock's release stops its
	 * refresh thread, waits for the workers looking at it (repo/lock.c counts them), and their
	 * next look finds none. A second signal meanwhile ends rix at once (second_signal).
	 */
	pthread_t t;
	if (pthread_create(&t, NULL, second_signal, NULL) == 0)
		pthread_detach(t);
	pthread_mutex_lock(&held_mu);
	if (held != NULL && rix_lock_free(held) != 0) {
		static const char left[] = "rix: the lock file could not be removed (`rix unlock` removes it)\n";
		if (write(2, left, sizeof(left) - 1) < 0) {
		}
	}
	_exit(sig == SIGINT ? 130 : sig == SIGTERM ? 143 : 128 + sig);
}

void signals_start(void)
{
	sigemptyset(&signals);
	sigaddset(&signals, SIGINT);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	/* A reader gone (`rix list blobs | head`): writes fail with EPIPE and the command ends as
	 * usual, releasing its lock, where SIGPIPE would have killed it holding the lock. */
	signal(SIGPIPE, SIG_IGN);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, signal_thread, NULL) != 0)
		pthread_sigmask(SIG_UNBLOCK, &signals, NULL); /* no thread: the default actions */
	pthread_attr_destroy(&a);
}

int cli_lock(rix_lock **out, rix_repo *r, bool exclusive)
{
	*out = NULL;
	if (g.no_lock)
		return 0;
	pthread_mutex_lock(&held_mu);
	int rc = rix_lock_acquire(out, r, exclusive);
	if (rc == 0)
		held = *out;
	pthread_mutex_unlock(&held_mu);
	return rc != 0 ? fail(rc) : 0;
}

void cli_unlock(rix_lock *l)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&held_mu);
	if (held == l)
		held = NULL;
	int rc = rix_lock_free(l);
	pthread_mutex_unlock(&held_mu);
	if (rc != 0)
		fprintf(stderr, "rix: the lock file could not be removed (`rix unlock` removes it): %s\n", rix_error_last());
}

/* ---- password ------------------------------------------------------------------------------ */

/* An environment variable, NULL when unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Leading and trailing white space (CR, LF, tabs, spaces) removed in place, as Go's TrimSpace. */
static void trim_space(char *buf)
{
	size_t n = strlen(buf), start = 0;
	while (n > 0 && strchr(" \t\r\n\v\f", buf[n - 1]) != NULL)
		buf[--n] = '\0';
	while (buf[start] != '\0' && strchr(" \t\r\n\v\f", buf[start]) != NULL)
		start++;
	memmove(buf, buf + start, n - start + 1);
}

/* Up to cap - 1 bytes of f into buf; 1 when there was more (buf wiped), else 0. */
static int read_all(FILE *f, char *buf, size_t cap)
{
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	if (n == cap - 1 && fgetc(f) != EOF) {
		sodium_memzero(buf, cap);
		return 1;
	}
	return 0;
}

/* The file's text less surrounding white space (a CRLF too), as restic reads a password file. */
int read_password_file(const char *path, char *buf, size_t cap)
{
	buf[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return die("cannot read password file %s: %s", path, strerror(errno));
	int big = read_all(f, buf, cap);
	fclose(f);
	if (big)
		return die("password file %s: over %zu bytes", path, cap - 1);
	trim_space(buf);
	return 0;
}

/* The standard output of `sh -c cmd`, less surrounding white space; it must exit 0. */
static int run_password_command(const char *cmd, char *buf, size_t cap)
{
	buf[0] = '\0';
	fflush(NULL);
	FILE *f = popen(cmd, "r");
	if (f == NULL)
		return die("password command: cannot run it: %s", strerror(errno));
	int big = read_all(f, buf, cap);
	int st = pclose(f);
	if (big || st != 0) {
		sodium_memzero(buf, cap);
		return big ? die("password command: over %zu bytes of output", cap - 1)
			   : die("password command failed (exit status %d)", st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	trim_space(buf);
	return 0;
}

/* One line of standard input (not a terminal), its LF or CRLF dropped. */
static int read_stdin_line(char *buf, size_t cap)
{
	if (fgets(buf, (int)cap, stdin) == NULL) {
		buf[0] = '\0';
		return die("no password: standard input is empty");
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
}

int prompt(const char *what, char *buf, size_t cap)
{
	buf[0] = '\0';
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return die("no password: use --password-file, --password-command or RIX_PASSWORD (no terminal to ask on)");
	struct termios old, quiet;
	int tty = tcgetattr(fd, &old) == 0;
	if (tty) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(fd, TCSAFLUSH, &quiet);
	}
	if (write(fd, what, strlen(what)) < 0) {
		/* nothing to do: the read below still works */
	}
	size_t n = 0;
	char c;
	while (n + 1 < cap && read(fd, &c, 1) == 1 && c != '\n')
		buf[n++] = c;
	buf[n] = '\0';
	c = 0;
	if (tty)
		tcsetattr(fd, TCSAFLUSH, &old);
	if (write(fd, "\n", 1) < 0) {
	}
	close(fd);
	return 0;
}

/* The same password twice on the terminal; with is_new, an empty one is refused. */
static int prompt_twice(const char *first, char *buf, size_t cap)
{
	if (prompt(first, buf, cap))
		return 1;
	char again[1024];
	int rc = prompt("enter password again: ", again, sizeof(again));
	if (rc == 0 && strcmp(buf, again) != 0)
		rc = die("passwords do not match");
	sodium_memzero(again, sizeof(again));
	if (rc != 0)
		sodium_memzero(buf, cap);
	return rc;
}

int get_password(char *buf, size_t cap, int is_new)
{
	buf[0] = '\0';
	const char *file = g.password_file, *cmd = g.password_command;
	if (file == NULL && cmd == NULL) { /* the environment's, when no option names one */
		file = env("RIX_PASSWORD_FILE") != NULL ? env("RIX_PASSWORD_FILE") : env("RESTIC_PASSWORD_FILE");
		cmd = env("RIX_PASSWORD_COMMAND") != NULL ? env("RIX_PASSWORD_COMMAND") : env("RESTIC_PASSWORD_COMMAND");
	}
	if (file != NULL && cmd != NULL)
		return die("a password file and a password command are mutually exclusive (--password-file, "
			   "--password-command and their RIX_/RESTIC_ variables)");
	if (file != NULL)
		return read_password_file(file, buf, cap);
	if (cmd != NULL)
		return run_password_command(cmd, buf, cap);
	const char *pw = env("RIX_PASSWORD") != NULL ? env("RIX_PASSWORD") : env("RESTIC_PASSWORD");
	if (pw != NULL) {
		if (strlen(pw) >= cap)
			return die("the password is over %zu bytes", cap - 1);
		snprintf(buf, cap, "%s", pw);
		return 0;
	}
	if (!isatty(0))
		return read_stdin_line(buf, cap);
	if (is_new)
		return prompt_twice("enter password for new repository: ", buf, cap);
	return prompt("enter password for repository: ", buf, cap);
}

int get_new_password(char *buf, size_t cap, const char *file)
{
	buf[0] = '\0';
	if (file == NULL)
		file = env("RIX_NEW_PASSWORD_FILE") != NULL ? env("RIX_NEW_PASSWORD_FILE") : env("RESTIC_NEW_PASSWORD_FILE");
	int rc;
	if (file != NULL) {
		rc = read_password_file(file, buf, cap);
	} else {
		int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return die("no new password: use --new-password-file FILE (or RIX_NEW_PASSWORD_FILE); there is "
				   "no terminal to ask on");
		close(fd);
		rc = prompt_twice("enter new password: ", buf, cap);
	}
	if (rc == 0 && buf[0] == '\0')
		rc = die("an empty password is not a password");
	return rc;
}

/* ---- the repository ------------------------------------------------------------------------ */

int resolve_repository(void)
{
	static char from_file[4096];
	const char *file = g.repository_file;
	if (g.repo != NULL && file != NULL)
		return die("-r and --repository-file are mutually exclusive");
	if (g.repo == NULL && file == NULL) {
		g.repo = env("RIX_REPOSITORY") != NULL ? env("RIX_REPOSITORY") : env("RESTIC_REPOSITORY");
		if (g.repo == NULL)
			file = env("RIX_REPOSITORY_FILE") != NULL ? env("RIX_REPOSITORY_FILE") : env("RESTIC_REPOSITORY_FILE");
	}
	if (file == NULL)
		return 0;
	FILE *f = fopen(file, "r");
	if (f == NULL)
		return die("cannot read repository file %s: %s", file, strerror(errno));
	int big = read_all(f, from_file, sizeof(from_file));
	fclose(f);
	if (big)
		return die("repository file %s: over %zu bytes", file, sizeof(from_file) - 1);
	trim_space(from_file);
	g.repo = from_file;
	return 0;
}

static rix_compression compression = RIX_COMPRESSION_AUTO;

rix_compression cli_compression(void)
{
	return compression;
}

int resolve_compression(void)
{
	const char *c = g.compression, *from = "--compression";
	if (c == NULL) {
		from = env("RIX_COMPRESSION") != NULL ? "RIX_COMPRESSION" : "RESTIC_COMPRESSION";
		c = env(from);
	}
	if (c == NULL || strcmp(c, "auto") == 0)
		compression = RIX_COMPRESSION_AUTO;
	else if (strcmp(c, "off") == 0)
		compression = RIX_COMPRESSION_OFF;
	else if (strcmp(c, "max") == 0)
		compression = RIX_COMPRESSION_MAX;
	else
		return die("%s: invalid compression mode \"%s\", must be one of (auto|off|max)", from, c);
	return 0;
}

/* ---- opening ------------------------------------------------------------------------------- */

/* s with the password of a URL's "user:password@" as "***" (into buf). */
static const char *redact(const char *s, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", s);
	char *scheme = strstr(buf, "://");
	if (scheme == NULL)
		return buf;
	char *host = scheme + 3, *end = host + strcspn(host, "/?#"), *at = NULL;
	for (char *p = host; p < end; p++)
		if (*p == '@')
			at = p; /* the last '@' before the path: a password may hold one */
	char *colon = at != NULL ? memchr(host, ':', (size_t)(at - host)) : NULL;
	if (colon == NULL)
		return buf;
	char rest[4096];
	snprintf(rest, sizeof(rest), "%s", at);
	snprintf(colon, cap - (size_t)(colon - buf), ":***%s", rest);
	return buf;
}

const char *repo_path(void)
{
	static char shown[4096];
	const char *r = repo_location();
	return r != NULL ? redact(r, shown, sizeof(shown)) : NULL;
}

const char *repo_location(void)
{
	const char *r = g.repo; /* resolve_repository set it */
	if (r != NULL && strncmp(r, "local:", 6) == 0)
		r += 6;
	return r;
}

static rix_rest_options rest_o = RIX_REST_OPTIONS_INIT;
static uint64_t limit_up, limit_down; /* every backend's transfers together, bytes/s (0: none) */

int rest_settings(const char *cacert, bool insecure_tls, uint64_t limit_upload, uint64_t limit_download)
{
	rest_o.cacert = cacert;
	rest_o.insecure_tls = insecure_tls;
	/* The totals are open_backend's limiter, which also paces reads (quarter-second pieces). A
	 * write is one transfer to it, so on REST curl paces each upload at the rate too, to flow
	 * evenly; curl pacing downloads as well would only add each piece's latency to its slot. */
	rest_o.limit_upload = limit_up = limit_upload;
	limit_down = limit_download;
	/* Tuning, for tests mostly: how often and how soon a failed request is tried again. */
	const char *t = env("RIX_REST_TRIES"), *d = env("RIX_REST_FIRST_DELAY_MS");
	rest_o.tries = t != NULL ? (unsigned)strtoul(t, NULL, 10) : 0;
	rest_o.first_delay_ms = d != NULL ? (unsigned)strtoul(d, NULL, 10) : 0;
	if (cacert != NULL && access(cacert, R_OK) != 0)
		return rix_error_set(RIX_EINVAL, "--cacert %s: %s", cacert, strerror(errno));
	return 0;
}

/*
 * The crash hook of the tests. With RIX_DEBUG_KILL_AFTER=N in the environment (N > 0) the backend
 * is wrapped so that the N-th operation that changes the repository (write, write_file and
 * remove, counted together from every thread since the opening) kills the process with SIGKILL
 * just before it is made, as a crash at that point would. The crash tests (test_prune) run a
 * command for N = 1, 2, ... and check what each run leaves. Without the variable nothing is
 * wrapped: one getenv per opening is all it costs.
 */
typedef struct killer {
	rix_backend_ops ops;            /* the inner backend's kind, these functions */
	rix_backend *inner;
	unsigned long at;               /* the operation to die before (1-based) */
	_Atomic unsigned long ops_done; /* mutating operations begun so far */
} killer;

static void kill_point(killer *k)
{
	if (atomic_fetch_add(&k->ops_done, 1) + 1 == k->at)
		kill(getpid(), SIGKILL);
}

static int kill_list(void *self, rix_file_type t, rix_backend_list_fn fn, void *payload)
{
	return rix_backend_list(((killer *)self)->inner, t, fn, payload);
}

static int kill_stat(void *self, rix_file_type t, const char *name, uint64_t *size)
{
	return rix_backend_stat(size, ((killer *)self)->inner, t, name);
}

static int kill_read(void *self, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len)
{
	return rix_backend_read(((killer *)self)->inner, t, name, off, buf, len);
}

static int kill_write(void *self, rix_file_type t, const char *name, const void *data, size_t n)
{
	kill_point(self);
	return rix_backend_write(((killer *)self)->inner, t, name, data, n);
}

static int kill_write_file(void *self, rix_file_type t, const char *name, int fd, const char *path, uint64_t size,
			   bool *taken)
{
	kill_point(self);
	return rix_backend_write_file(taken, ((killer *)self)->inner, t, name, fd, path, size);
}

static int kill_remove(void *self, rix_file_type t, const char *name)
{
	kill_point(self);
	return rix_backend_remove(((killer *)self)->inner, t, name);
}

static const char *kill_temp_dir(void *self)
{
	return rix_backend_temp_dir(((killer *)self)->inner);
}

static void kill_close(void *self)
{
	killer *k = self;
	rix_backend_free(k->inner);
	free(k);
}

/* *b wrapped by the crash hook when RIX_DEBUG_KILL_AFTER asks for it; on failure *b is freed. */
static int kill_hook(rix_backend **b)
{
	const char *v = getenv("RIX_DEBUG_KILL_AFTER");
	if (v == NULL)
		return 0;
	char *end;
	unsigned long at = strtoul(v, &end, 10);
	if (at == 0 || *end != '\0')
		return 0;
	killer *k = calloc(1, sizeof(*k));
	if (k == NULL) {
		rix_backend_free(*b);
		*b = NULL;
		return rix_error_set(RIX_ENOMEM, "out of memory");
	}
	k->ops = (rix_backend_ops){ .kind = rix_backend_kind(*b), .list = kill_list, .stat = kill_stat,
				    .read = kill_read, .write = kill_write, .write_file = kill_write_file,
				    .remove = kill_remove, .temp_dir = kill_temp_dir, .close = kill_close };
	k->inner = *b;
	k->at = at;
	int rc = rix_backend_new(b, &k->ops, k);
	if (rc != 0) {
		rix_backend_free(k->inner);
		free(k);
		*b = NULL;
	}
	return rc;
}

/*
 * "rest:http://..." or a local path ("local:" optional), behind the --limit-upload /
 * --limit-download limiter (all its transfers together, as restic's) when one is set.
 */
int open_backend(const char *path, int create, rix_backend **b)
{
	int rc;
	if (strncmp(path, "rest:", 5) == 0) {
		rc = rix_backend_rest_open_opts(b, path, create, &rest_o);
	} else if (strchr(path, ':') != NULL && path[0] != '/' && path[0] != '.') {
		char shown[4096];
		return rix_error_set(RIX_EINVAL, "%s: unknown repository kind (local paths and rest: URLs)",
				     redact(path, shown, sizeof(shown)));
	} else {
		rc = rix_backend_local_open(b, path, create);
	}
	if (rc != 0)
		return rc;
	if (limit_up != 0 || limit_down != 0) {
		rix_backend *limited;
		rc = rix_backend_limit(&limited, *b, limit_up, limit_down);
		if (rc != 0) {
			rix_backend_free(*b);
			*b = NULL;
			return rc;
		}
		*b = limited;
	}
	return kill_hook(b);
}

/* The index-loading progress line on a terminal, rewritten in place. */
void load_progress(void *arg, size_t done, size_t total)
{
	(void)arg;
	fprintf(stderr, "\rloading index: %zu of %zu files ", done, total);
}

/* The library's warnings (a lock file that cannot be read, ignored): one line on stderr. */
static void repo_warn(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "rix: warning: %s\n", msg);
}

/*
 * The local cache's root, as restic finds its own: --cache-dir, else $RIX_CACHE_DIR or
 * $RESTIC_CACHE_DIR, else $XDG_CACHE_HOME/rix, else $HOME/.cache/rix; NULL with --no-cache or
 * when there is no home to put it in.
 */
static const char *cache_root(char *buf, size_t cap)
{
	if (g.no_cache)
		return NULL;
	const char *d = g.cache_dir;
	if (d == NULL || *d == '\0')
		d = getenv("RIX_CACHE_DIR");
	if (d == NULL || *d == '\0')
		d = getenv("RESTIC_CACHE_DIR");
	if (d != NULL && *d != '\0')
		return d;
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (xdg != NULL && xdg[0] == '/')
		n = snprintf(buf, cap, "%s/rix", xdg);
	else if (home != NULL && *home != '\0')
		n = snprintf(buf, cap, "%s/.cache/rix", home);
	else
		return NULL;
	return n > 0 && (size_t)n < cap ? buf : NULL;
}

int open_repo(rix_repo **r)
{
	const char *path = repo_location();
	if (path == NULL || *path == '\0') {
		die("no repository: use -r, --repository-file, or set RIX_REPOSITORY");
		return EXIT_NO_REPO;
	}
	rix_backend *b;
	int rc = open_backend(path, 0, &b);
	if (rc != 0) {
		fail(rc);
		return rc == RIX_ENOTFOUND ? EXIT_NO_REPO : EXIT_FAIL;
	}
	char pw[1024];
	if (get_password(pw, sizeof(pw), 0)) {
		sodium_memzero(pw, sizeof(pw));
		rix_backend_free(b);
		return 1;
	}
	rix_repo_options o = RIX_REPO_OPTIONS_INIT;
	char cache[4096];
	o.cache_dir = cache_root(cache, sizeof(cache));
	o.compression = compression;
	o.key_hint = g.key_hint != NULL ? g.key_hint : getenv("RIX_KEY_HINT");
	if (!g.quiet && isatty(2))
		o.load_progress = load_progress;
	o.warn = repo_warn;
	if (o.key_hint == NULL)
		o.key_hint = getenv("RESTIC_KEY_HINT");
	rc = rix_repo_open(r, b, pw, strlen(pw), &o);
	sodium_memzero(pw, sizeof(pw));
	if (rc != 0) {
		rix_backend_free(b);
		fail(rc);
		return rc == RIX_EAUTH ? EXIT_WRONG_PASSWORD : rc == RIX_ENOTFOUND ? EXIT_NO_REPO : EXIT_FAIL;
	}
	/* restic takes any mode for a version 1 repository, and stores uncompressed there: so
	 * does rix, saying so when more was asked. */
	if (compression == RIX_COMPRESSION_MAX && rix_repo_config(*r)->version < 2 && !g.quiet)
		fprintf(stderr, "rix: compression max: this repository is of version 1, which stores data uncompressed\n");
	return 0;
}

int open_repo_locked(rix_repo **r, rix_lock **l, bool exclusive)
{
	*l = NULL;
	int rc = open_repo(r);
	if (rc != 0)
		return rc;
	rc = cli_lock(l, *r, exclusive);
	if (rc != 0) {
		rix_repo_free(*r);
		*r = NULL;
	}
	return rc;
}

void close_repo(rix_repo *r, rix_lock *l)
{
	cli_unlock(l);
	rix_repo_free(r);
}

void index_error(void *arg, const char *name, int code, const char *msg)
{
	if (code == RIX_EIO) /* the backend failed: the load stops and returns it, said once */
		return;
	if (arg != NULL)
		++*(size_t *)arg;
	fprintf(stderr, "rix: index %s could not be read: %s\n", name, msg);
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int load_index(rix_repo *r, rix_repo_load_stats *st, double *secs)
{
	int progress = !g.quiet && isatty(2);
	double t0 = now_s();
	size_t bad = 0;
	int rc = rix_repo_load_index(st, r, index_error, &bad);
	if (secs != NULL)
		*secs = now_s() - t0;
	if (progress)
		fputs("\r\033[K", stderr);
	if (rc != 0)
		return fail(rc);
	/* What the index says would be incomplete: restic stops there too. */
	if (bad != 0)
		return die("%zu index file%s could not be read (`rix check` tells more)", bad, bad == 1 ? "" : "s");
	return 0;
}

int parse_id(const char *hex, rix_id *id)
{
	if (strlen(hex) != 64 || rix_id_from_hex(id, hex, 64) != 0)
		return die("%s is not an ID (64 hex digits)", hex);
	return 0;
}

/* ---- commands ------------------------------------------------------------------------------ */

/* s as a JSON string, escaped as restic's (Go's encoding/json: invalid UTF-8 as \ufffd). */
void fput_json_bytes(FILE *f, const char *s, size_t n)
{
	char small[1024], *buf = small;
	if (RIX_JSON_QUOTE_MAX(n) >= sizeof(small) && (buf = malloc(RIX_JSON_QUOTE_MAX(n) + 1)) == NULL) {
		fputs("\"\"", f); /* out of memory: an empty string rather than a broken line */
		return;
	}
	size_t len = rix_json_quote(buf, buf == small ? sizeof(small) : RIX_JSON_QUOTE_MAX(n) + 1, s, n);
	fwrite(buf, 1, len, f);
	if (buf != small)
		free(buf);
}

void fput_json_string(FILE *f, const char *s)
{
	fput_json_bytes(f, s, strlen(s));
}

void put_json_string(const char *s)
{
	fput_json_string(stdout, s);
}

int print_name(void *arg, const char *name, uint64_t size)
{
	struct lister *l = arg;
	(void)size;
	if (g.json)
		printf("%s\"%s\"", l->n++ ? "," : "", name);
	else
		printf("%s\n", name);
	return 0;
}
