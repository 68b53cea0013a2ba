/*
 * repo/lock.c — lock files, compatible with restic's.
 *
 *   lock file (plaintext, before the unpacked-file encoding):
 *   {"time":"2026-11-30T07:14:28.123456789Z","exclusive":false,"hostname":"h","username":"u",
 *    "pid":123,"uid":0,"gid":0}
 *
 *   take:     write ours ──> list locks/ ──> each other one: load; stale? skip; conflict? ──>
 *             remove ours, RIX_ELOCKED
 *   refresh:  (thread, every RIX_LOCK_REFRESH_SECONDS) write a new file, then remove the old;
 *             failing, it is retried every RIX_LOCK_RETRY_SECONDS, and once it has failed for
 *             RIX_LOCK_LOST_SECONDS (restic's "refreshability" timeout) the lock is lost:
 *             rix_lock_check and every long operation of the repository fail with RIX_ELOCKED
 *   release:  stop the thread, remove the file
 *
 * A lock file that reads but cannot be decoded (junk, another key's, a failed upload) is
 * ignored, as restic 0.14 does (restic's checkForOtherLocks: "ignore locks that cannot be
 * loaded", logged for debugging only): it blocks no one, and plain `unlock` leaves it
 * (its age cannot be told, as restic's RemoveStaleLocks leaves it), `unlock --remove-all`
 * removes it. (restic 0.15+ takes such a file as held instead.) It is said through
 * rix_repo_options.warn (restic 0.14 says nothing). One the backend fails to read (RIX_EIO
 * after its retries) is not ignored: it may be a live lock, so acquiring fails. The host in a
 * lock is this machine's name (the PID check of a stale lock is only meaningful there); the
 * user is the repository's (rix_repo_options.username, else the account running).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
	char stranded[65]; /* mu: an old lock file a refresh could not remove ("" when none) */
	int retime;                             /* mu: the intervals changed, wait anew */
	uint64_t refresh_ms, retry_ms, lost_ms; /* mu */
	atomic_int lost;                        /* set once, after lost_msg is written */
	char lost_msg[512];
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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
	rix_id id;
	int rc = rix_repo_write_file(&id, r, RIX_FILE_LOCK, json, strlen(json));
	rix__jansson_free(json);
	if (rc == 0)
		rix_id_to_hex(name, &id);
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
		if (lrc == RIX_ENOMEM || lrc == RIX_EIO) {
			/* out of memory, or the backend failed to read it (after its retries): the file may
			 * well be a live lock, so nothing is taken past it */
			rc = lrc;
			break;
		}
		if (lrc != 0) { /* cannot be decoded: ignored, as restic 0.14 does (see the top); said */
			rix__repo_warn(r, "lock file %s cannot be read (%s): ignored; `unlock --remove-all` removes it",
				       l.v[i].s, rix_error_last());
			continue;
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

/* Waits on l->cv (mu held) until ms from now, stop, or new intervals (then it waits anew). */
static void wait_ms(rix_lock *l, uint64_t *ms)
{
again:;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(*ms / 1000);
	until.tv_nsec += (long)(*ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	int w = 0;
	while (!l->stop && !l->retime && w != ETIMEDOUT)
		w = pthread_cond_timedwait(&l->cv, &l->mu, &until);
	if (l->retime && !l->stop) {
		l->retime = 0;
		goto again;
	}
}

static void *refresher(void *arg)
{
	rix_lock *l = arg;
	uint64_t last_ok = now_ms();
	int failing = 0;
	pthread_mutex_lock(&l->mu);
	while (!l->stop && !atomic_load(&l->lost)) {
		wait_ms(l, failing ? &l->retry_ms : &l->refresh_ms);
		if (l->stop)
			break;
		uint64_t lost_ms = l->lost_ms;
		pthread_mutex_unlock(&l->mu);
		int rc = rix_lock_refresh(l);
		uint64_t now = now_ms();
		failing = rc != 0;
		if (!failing) {
			last_ok = now;
		} else if (now - last_ok >= lost_ms) {
			/* Others may take it as stale from now on: whoever holds it must stop. */
			char name[65];
			pthread_mutex_lock(&l->mu);
			memcpy(name, l->name, sizeof(name));
			pthread_mutex_unlock(&l->mu);
			snprintf(l->lost_msg, sizeof(l->lost_msg),
				 "lock %.16s lost: it could not be refreshed for %llu s (%s), so other processes "
				 "may take it as stale",
				 name, (unsigned long long)((now - last_ok) / 1000), rix_error_last());
			atomic_store(&l->lost, 1);
		}
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int rix_lock_check(const rix_lock *l)
{
	if (l == NULL || !atomic_load(&((rix_lock *)l)->lost))
		return 0;
	return rix_error_set(RIX_ELOCKED, "%s", l->lost_msg);
}

void rix_lock_set_intervals(rix_lock *l, unsigned refresh_ms, unsigned retry_ms, unsigned lost_ms)
{
	pthread_mutex_lock(&l->mu);
	l->refresh_ms = refresh_ms;
	l->retry_ms = retry_ms;
	l->lost_ms = lost_ms;
	l->retime = 1; /* the wait under way starts again from now, with the new interval */
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

/*
 * Lookers at a repository's held lock (rix__repo_lock_ok) are counted, so that rix_lock_free of
 * the held lock, once it has unset it, waits for those that may still have it in hand before
 * freeing it: a lock released by another thread (the rix command's signal thread) while workers
 * check it is never read after it is freed. Dekker's order: the looker counts itself, then
 * reads; the freer unsets, then reads the count (both sequentially consistent).
 */
static atomic_int lookers;

int rix__repo_lock_ok(struct rix_repo *r)
{
	atomic_fetch_add(&lookers, 1);
	int rc = rix_lock_check(rix__repo_held_lock(r));
	atomic_fetch_sub(&lookers, 1);
	return rc;
}

int rix_lock_acquire(rix_lock **out, rix_repo *r, bool exclusive)
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
		if (rix_backend_remove(rix_repo_backend(r), RIX_FILE_LOCK, l->name) != 0)
			rix_error_set(rc, "%s (and our own lock file %.16s could not be removed: %s)", msg, l->name,
				      rix_error_last());
		else
			rix_error_set(rc, "%s", msg);
	}
	if (rc != 0) {
		rix_free(l);
		return rc;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->refresh_ms = (uint64_t)RIX_LOCK_REFRESH_SECONDS * 1000;
	l->retry_ms = (uint64_t)RIX_LOCK_RETRY_SECONDS * 1000;
	l->lost_ms = (uint64_t)RIX_LOCK_LOST_SECONDS * 1000;
	atomic_init(&l->lost, 0);
	if (pthread_create(&l->thread, NULL, refresher, l) != 0) {
		/* Unrefreshed, the lock would turn stale under its holder: none at all is better. */
		if (rix_backend_remove(rix_repo_backend(r), RIX_FILE_LOCK, l->name) != 0) {
			/* left behind: stale once this process is gone, and unlock removes it */
		}
		pthread_cond_destroy(&l->cv);
		pthread_mutex_destroy(&l->mu);
		rix_free(l);
		return rix_error_set(RIX_ENOMEM, "lock: cannot start the thread that refreshes it");
	}
	l->running = 1;
	struct rix_lock *none = NULL; /* the first lock taken on r is the one its operations check */
	atomic_compare_exchange_strong(&r->held_lock, &none, l);
	*out = l;
	return 0;
}

/* Removes lock file old (a previous one of l); one that cannot be removed is kept in l->stranded
 * for the next refresh or free. */
static void remove_old(rix_lock *l, const char old[65])
{
	int rc = rix_backend_remove(rix_repo_backend(l->r), RIX_FILE_LOCK, old);
	pthread_mutex_lock(&l->mu);
	if (rc != 0 && rc != RIX_ENOTFOUND)
		memcpy(l->stranded, old, 65);
	else if (strcmp(l->stranded, old) == 0)
		l->stranded[0] = '\0';
	pthread_mutex_unlock(&l->mu);
}

int rix_lock_refresh(rix_lock *l)
{
	char name[65];
	int rc = write_lock(l->r, l->exclusive, name);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&l->mu);
	char old[65], stranded[65];
	memcpy(old, l->name, 65);
	memcpy(l->name, name, 65);
	memcpy(stranded, l->stranded, 65);
	pthread_mutex_unlock(&l->mu);
	/* The new file is written: the lock is refreshed, whether the old one goes now or later. */
	remove_old(l, old);
	if (stranded[0] != '\0')
		remove_old(l, stranded);
	return 0;
}

int rix_lock_free(rix_lock *l)
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
	if (rix__repo_held_lock(l->r) == l) {
		rix__repo_set_held_lock(l->r, NULL);
		atomic_thread_fence(memory_order_seq_cst);
		while (atomic_load(&lookers) != 0)
			sched_yield();
	}
	if (l->stranded[0] != '\0' && rix_backend_remove(rix_repo_backend(l->r), RIX_FILE_LOCK, l->stranded) != 0) {
		/* left behind: stale once this process is gone, and unlock removes it */
	}
	int rc = rix_backend_remove(rix_repo_backend(l->r), RIX_FILE_LOCK, l->name);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	rix_free(l);
	return rc == RIX_ENOTFOUND ? 0 : rc;
}

int rix_lock_remove(size_t *removed, rix_repo *r, bool all)
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
