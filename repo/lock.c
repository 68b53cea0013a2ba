/*
 * repo/lock.c — lock files, compatible with restic's.
 *
 *   lock file (plaintext, before the unpacked-file encoding):
 *   {"time":"2026-11-30T07:14:28.123456789Z","exclusive":false,"hostname":"h","username":"u",
 *    "pid":123,"uid":0,"gid":0}
 *
 *   take:     write ours ──> list locks/ ──> each other one: load; stale? skip; conflict? ──>
 *             remove ours, RIX_ELOCKED
 *   refresh:  (thread, every RIX_LOCK_REFRESH_SECONDS) write a new file, then remove the old
 *   release:  stop the thread, remove the file
 *
 * A lock file that cannot be read or decoded is taken as held (restic does the same): plain
 * `unlock` leaves it (its age cannot be told), `unlock --remove-all` removes it. The host in a
 * lock is this machine's name (the PID check of a stale lock is only meaningful there); the
 * user is the repository's (rix_repo_options.username, else the account running).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"
#include "../common/jansson_alloc.h"

#define LOCK_FILE_MAX 65536

struct rix_lock {
	rix_repo *r;
	int exclusive;
	char name[65];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int running, stop;
};

typedef struct lock_info {
	int64_t time; /* seconds since the epoch */
	int exclusive;
	char hostname[256], username[256];
	long pid;
} lock_info;

/* "2026-11-30T07:14:28.123456789Z" or "...+01:00": seconds since the epoch; -1 if malformed. */
static int64_t parse_rfc3339(const char *s)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return -1;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	int64_t off = 0;
	if (*p == 'Z') {
		p++;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		int h = (p[1] - '0') * 10 + (p[2] - '0'), m = (p[4] - '0') * 10 + (p[5] - '0');
		off = (int64_t)(h * 3600 + m * 60) * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	return (int64_t)timegm(&tm) - off;
}

static int load_lock(rix_repo *r, const char *name, lock_info *out)
{
	uint8_t *json;
	size_t jn;
	int rc = rix__read_unpacked(r, RIX_FILE_LOCK, name, LOCK_FILE_MAX, &json, &jn);
	if (rc != 0)
		return rc;
	json_error_t err;
	json_t *root;
	rc = rix__jansson_load(&root, (const char *)json, jn, &err);
	rix_free(json);
	if (rc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "lock %.16s: out of memory reading its JSON", name);
	if (rc != 0 || !json_is_object(root)) {
		json_decref(root);
		return rix_error_set(RIX_ECORRUPT, "lock %.16s: not a JSON object", name);
	}
	json_t *t = json_object_get(root, "time"), *ex = json_object_get(root, "exclusive"),
	       *h = json_object_get(root, "hostname"), *u = json_object_get(root, "username"),
	       *pid = json_object_get(root, "pid");
	memset(out, 0, sizeof(*out));
	out->time = json_is_string(t) ? parse_rfc3339(json_string_value(t)) : -1;
	out->exclusive = json_is_true(ex);
	snprintf(out->hostname, sizeof(out->hostname), "%s", json_is_string(h) ? json_string_value(h) : "");
	snprintf(out->username, sizeof(out->username), "%s", json_is_string(u) ? json_string_value(u) : "");
	out->pid = json_is_integer(pid) ? (long)json_integer_value(pid) : 0;
	json_decref(root);
	if (out->time < 0)
		return rix_error_set(RIX_ECORRUPT, "lock %.16s: no valid time", name);
	return 0;
}

static const char *my_hostname(char *buf, size_t cap)
{
	if (gethostname(buf, cap) != 0)
		buf[0] = '\0';
	buf[cap - 1] = '\0';
	return buf;
}

static int is_stale(const lock_info *li)
{
	if ((int64_t)time(NULL) - li->time > RIX_LOCK_STALE_SECONDS)
		return 1;
	char host[256];
	if (strcmp(li->hostname, my_hostname(host, sizeof(host))) == 0 && li->pid > 0 &&
	    kill((pid_t)li->pid, 0) != 0 && errno == ESRCH)
		return 1;
	return 0;
}

/* Writes a lock file now; its name into name. */
static int write_lock(rix_repo *r, int exclusive, char name[65])
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[64], host[256];
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec);
	const char *user = rix__repo_username(r);
	rix__jansson_begin();
	json_t *o = json_pack("{s:s, s:b, s:s, s:s, s:I, s:I, s:I}", "time", when, "exclusive", exclusive,
			      "hostname", my_hostname(host, sizeof(host)), "username", user,
			      "pid", (json_int_t)getpid(), "uid", (json_int_t)getuid(), "gid", (json_int_t)getgid());
	char *json = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (json == NULL || rix__jansson_out_of_memory()) {
		rix__jansson_free(json);
		return rix__jansson_out_of_memory()
			       ? rix_error_set(RIX_ENOMEM, "lock: out of memory")
			       : rix_error_set(RIX_EINVAL, "lock: hostname or username is not valid UTF-8");
	}
	uint8_t *file;
	size_t n;
	int rc = rix_unpacked_encode(rix_repo_key(r), json, strlen(json), rix_repo_config(r)->version, &file, &n);
	rix__jansson_free(json);
	if (rc != 0)
		return rc;
	rix_id id;
	rix_sha256(file, n, &id);
	rix_id_to_hex(&id, name);
	rc = rix_backend_write(rix_repo_backend(r), RIX_FILE_LOCK, name, file, n);
	rix_free(file);
	return rc;
}

/* Any lock but ours that conflicts (exclusive: any live one; shared: a live exclusive one). */
static int find_conflict(rix_repo *r, int exclusive, const char *ours)
{
	struct rix__names l;
	int rc = rix__list_names(rix_repo_backend(r), RIX_FILE_LOCK, &l);
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		if (strcmp(l.v[i].s, ours) == 0)
			continue;
		lock_info li;
		int lrc = load_lock(r, l.v[i].s, &li);
		if (lrc == RIX_ENOTFOUND) /* removed meanwhile */
			continue;
		if (lrc == RIX_ENOMEM) {
			rc = lrc;
			break;
		}
		if (lrc != 0) {
			rc = rix_error_set(RIX_ELOCKED, "repository is locked: lock file %.16s cannot be read (%s); "
							"`rix unlock --remove-all` removes it",
					   l.v[i].s, rix_error_last());
			break;
		}
		if (is_stale(&li) || (!exclusive && !li.exclusive))
			continue;
		char when[64];
		time_t t = (time_t)li.time;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
		rc = rix_error_set(RIX_ELOCKED, "repository is already locked %sby PID %ld on %s by %s since %s (lock %.16s)",
				   li.exclusive ? "exclusively " : "", li.pid, li.hostname, li.username, when, l.v[i].s);
	}
	rix_free(l.v);
	return rc;
}

static void *refresher(void *arg)
{
	rix_lock *l = arg;
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += RIX_LOCK_REFRESH_SECONDS;
		int w = 0;
		while (!l->stop && w != ETIMEDOUT)
			w = pthread_cond_timedwait(&l->cv, &l->mu, &until);
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->mu);
		(void)rix_lock_refresh(l); /* a failed refresh is retried next time; the old file stays */
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int rix_repo_lock(rix_repo *r, int exclusive, rix_lock **out)
{
	*out = NULL;
	rix_lock *l = rix_calloc(1, sizeof(*l));
	if (l == NULL)
		return rix_error_set(RIX_ENOMEM, "lock: out of memory");
	l->r = r;
	l->exclusive = exclusive != 0;
	int rc = write_lock(r, l->exclusive, l->name);
	if (rc == 0 && (rc = find_conflict(r, l->exclusive, l->name)) != 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		rix_backend_remove(rix_repo_backend(r), RIX_FILE_LOCK, l->name);
		rix_error_set(rc, "%s", msg);
	}
	if (rc != 0) {
		rix_free(l);
		return rc;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->running = pthread_create(&l->thread, NULL, refresher, l) == 0;
	*out = l;
	return 0;
}

int rix_lock_refresh(rix_lock *l)
{
	char name[65];
	int rc = write_lock(l->r, l->exclusive, name);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&l->mu);
	char old[65];
	memcpy(old, l->name, 65);
	memcpy(l->name, name, 65);
	pthread_mutex_unlock(&l->mu);
	rc = rix_backend_remove(rix_repo_backend(l->r), RIX_FILE_LOCK, old);
	return rc == RIX_ENOTFOUND ? 0 : rc;
}

int rix_lock_release(rix_lock *l)
{
	if (l == NULL)
		return 0;
	if (l->running) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
	}
	int rc = rix_backend_remove(rix_repo_backend(l->r), RIX_FILE_LOCK, l->name);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	rix_free(l);
	return rc == RIX_ENOTFOUND ? 0 : rc;
}

int rix_repo_unlock(rix_repo *r, int all, size_t *removed)
{
	if (removed != NULL)
		*removed = 0;
	struct rix__names l;
	int rc = rix__list_names(rix_repo_backend(r), RIX_FILE_LOCK, &l);
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		lock_info li;
		if (!all) {
			int lrc = load_lock(r, l.v[i].s, &li);
			if (lrc == RIX_ENOMEM)
				rc = lrc;
			if (lrc != 0 || !is_stale(&li))
				continue;
		}
		int rrc = rix_backend_remove(rix_repo_backend(r), RIX_FILE_LOCK, l.v[i].s);
		if (rrc == 0 && removed != NULL)
			++*removed;
		else if (rrc != 0 && rrc != RIX_ENOTFOUND)
			rc = rrc;
	}
	rix_free(l.v);
	return rc;
}
