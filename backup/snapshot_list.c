/*
 * backup/snapshot_list.c — snapshots in a repository (rix/snapshot.h): load, write, remove and
 * rewrite one; load them all (several files at a time, unreadable ones set apart); restic's
 * filters and its --latest N grouping; finding one by ID prefix or "latest".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/snapshot.h"
#include "../common/pool.h"
#include "snapshot_internal.h"

/* ==== One snapshot ========================================================================= */

int rix_snapshot_load(rix_snapshot **out, rix_repo *r, const rix_id *id)
{
	*out = NULL;
	uint8_t *json;
	size_t n;
	char hex[65];
	rix_id_to_hex(hex, id);
	int rc = rix_repo_read_file(&json, &n, r, RIX_FILE_SNAPSHOT, id);
	if (rc == RIX_ENOTFOUND)
		return rix_error_set(rc, "snapshot %s not found", hex);
	if (rc != 0)
		return rc;
	rc = rix_snapshot_decode(out, json, n);
	rix_free(json);
	if (rc == RIX_ECORRUPT) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		return rix_error_set(rc, "snapshot %.8s: %s", hex, msg);
	}
	if (rc == 0)
		(*out)->id = *id;
	return rc;
}

int rix_snapshot_write(rix_id *id, rix_repo *r, const rix_snapshot *sn)
{
	char *json;
	size_t n;
	int rc = rix_snapshot_encode(&json, &n, sn);
	if (rc != 0)
		return rc;
	rc = rix_repo_write_file(id, r, RIX_FILE_SNAPSHOT, json, n);
	rix_free(json);
	return rc;
}

int rix_snapshot_remove(rix_repo *r, const rix_id *id)
{
	char hex[65];
	rix_id_to_hex(hex, id);
	return rix_backend_remove(rix_repo_backend(r), RIX_FILE_SNAPSHOT, hex);
}

static bool id_is_zero(const rix_id *id)
{
	static const rix_id zero;
	return memcmp(id, &zero, sizeof(zero)) == 0;
}

int rix_snapshot_rewrite(rix_repo *r, rix_snapshot *sn)
{
	if (id_is_zero(&sn->id))
		return rix_error_set(RIX_EINVAL, "snapshot rewrite: the snapshot has no ID (it was not loaded)");
	bool had = sn->has_original;
	rix_id was = sn->original, nid;
	if (!had) { /* the first ID stays the original over every rewrite */
		sn->has_original = true;
		sn->original = sn->id;
	}
	int rc = rix_snapshot_write(&nid, r, sn);
	if (rc != 0) {
		sn->has_original = had;
		sn->original = was;
		return rc;
	}
	rix_id old = sn->id;
	sn->id = nid;
	if (memcmp(&old, &nid, sizeof(nid)) == 0)
		return 0; /* never removes the file just written (IDs of files sealed apart never meet) */
	return rix_snapshot_remove(r, &old);
}

/* ==== Lists =================================================================================== */

void rix_snapshot_list_free(rix_snapshot_list *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->count; i++)
		rix_snapshot_free(l->items[i]);
	rix_free(l->items);
	rix_free(l->unreadable);
	rix_free(l);
}

/* Oldest first; the same instant by ID, so that the order is the same on every run. */
static int by_time(const void *a, const void *b)
{
	const rix_snapshot *x = *(rix_snapshot *const *)a, *y = *(rix_snapshot *const *)b;
	int c = rix_time_cmp(&x->time, &y->time);
	return c != 0 ? c : memcmp(&x->id, &y->id, sizeof(x->id));
}

/* The parallel load: workers take the next file until none is left. */
struct loader {
	rix_repo *r;
	const rix_id *ids;
	size_t n;
	atomic_size_t next;
	rix_snapshot **got; /* [n]: NULL when not loaded */
	int *codes;         /* [n]: the load error */
	pthread_mutex_t mu; /* on_error one call at a time; fatal */
	rix_snapshot_error_fn on_error;
	void *payload;
	atomic_int fatal; /* out of memory: stop */
	char fatal_msg[512];
};

static void *load_worker(void *arg)
{
	struct loader *ld = arg;
	for (;;) {
		if (atomic_load(&ld->fatal) != 0)
			return NULL;
		size_t i = atomic_fetch_add(&ld->next, 1);
		if (i >= ld->n)
			return NULL;
		int rc = rix_snapshot_load(&ld->got[i], ld->r, &ld->ids[i]);
		if (rc == 0)
			continue;
		ld->codes[i] = rc;
		pthread_mutex_lock(&ld->mu);
		if (rc == RIX_ENOMEM) {
			if (atomic_load(&ld->fatal) == 0)
				snprintf(ld->fatal_msg, sizeof(ld->fatal_msg), "%s", rix_error_last());
			atomic_store(&ld->fatal, rc);
		} else if (ld->on_error != NULL) {
			ld->on_error(ld->payload, &ld->ids[i], rc, rix_error_last());
		}
		pthread_mutex_unlock(&ld->mu);
	}
}

/* Snapshot files read at once when rix_repo_options.workers is 0: they are small, and a REST
 * server answers several at a time. */
#define LOAD_WORKERS_DEFAULT 8u

int rix_snapshot_list_load(rix_snapshot_list **out, rix_repo *r, rix_snapshot_error_fn on_error, void *payload)
{
	*out = NULL;
	rix_id *ids;
	size_t n;
	int rc = rix_repo_list_ids(&ids, &n, r, RIX_FILE_SNAPSHOT);
	if (rc != 0)
		return rc;
	rix_snapshot_list *l = rix_calloc(1, sizeof(*l));
	struct loader ld = { .r = r, .ids = ids, .n = n, .on_error = on_error, .payload = payload };
	ld.got = n > 0 ? rix_calloc(n, sizeof(*ld.got)) : NULL;
	ld.codes = n > 0 ? rix_calloc(n, sizeof(*ld.codes)) : NULL;
	if (l == NULL || (n > 0 && (ld.got == NULL || ld.codes == NULL))) {
		rix_free(l);
		rix_free(ld.got);
		rix_free(ld.codes);
		rix_free(ids);
		return rix_error_set(RIX_ENOMEM, "snapshots: out of memory for %zu snapshots", n);
	}
	atomic_init(&ld.next, 0);
	atomic_init(&ld.fatal, 0);
	pthread_mutex_init(&ld.mu, NULL);
	if (n > 0) {
		unsigned want = rix_repo_workers(r) ? rix_repo_workers(r) : LOAD_WORKERS_DEFAULT;
		rix__pool_run(rix__pool_size(want, n < want ? (unsigned)n : want), load_worker, &ld);
	}
	pthread_mutex_destroy(&ld.mu);
	rc = atomic_load(&ld.fatal);
	if (rc != 0)
		rc = rix_error_set(rc, "%s", ld.fatal_msg);
	/* Loaded ones into items, the others into unreadable (both arrays sized for all). */
	if (rc == 0 && n > 0) {
		l->items = rix_malloc(n * sizeof(*l->items));
		l->unreadable = rix_malloc(n * sizeof(*l->unreadable));
		if (l->items == NULL || l->unreadable == NULL)
			rc = rix_error_set(RIX_ENOMEM, "snapshots: out of memory for %zu snapshots", n);
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (ld.got[i] != NULL) {
			l->items[l->count++] = ld.got[i];
			ld.got[i] = NULL;
		} else {
			l->unreadable[l->nunreadable++] = (rix_snapshot_unreadable){ ids[i], ld.codes[i] };
		}
	}
	for (size_t i = 0; i < n; i++)
		rix_snapshot_free(ld.got[i]);
	rix_free(ld.got);
	rix_free(ld.codes);
	rix_free(ids);
	if (rc != 0) {
		rix_snapshot_list_free(l);
		return rc;
	}
	if (l->count > 1)
		qsort(l->items, l->count, sizeof(*l->items), by_time);
	*out = l;
	return 0;
}

/* ==== Filters ================================================================================= */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool rix__snapshot_next_tag(const char **s, const char **tag, size_t *len)
{
	size_t n = strcspn(*s, ",");
	const char *a = *s, *b = *s + n;
	while (a < b && is_space(*a))
		a++;
	while (b > a && is_space(b[-1]))
		b--;
	*tag = a;
	*len = (size_t)(b - a);
	bool more = (*s)[n] == ',';
	*s += n + more;
	return more;
}

/*
 * Whether sn has every tag of the list s, as restic's HasTags: an empty tag matches a snapshot
 * without tags, whatever follows it.
 */
static bool has_tag_list(const rix_snapshot *sn, const char *s)
{
	const char *t;
	size_t n;
	for (bool more = true; more;) {
		more = rix__snapshot_next_tag(&s, &t, &n);
		if (n == 0 && sn->ntags == 0)
			return true;
		if (!rix__snapshot_has_tag(sn, t, n))
			return false;
	}
	return true;
}

int rix_snapshot_tags_flatten(const char ***out, size_t *n, const char *const *lists, size_t nlists)
{
	*out = NULL;
	*n = 0;
	size_t most = 0, bytes = 0; /* tags at most (one more than the commas) and their bytes */
	for (size_t i = 0; i < nlists; i++) {
		size_t len = strlen(lists[i]);
		most++;
		for (size_t k = 0; k < len; k++)
			most += lists[i][k] == ',';
		if (len + 1 > SIZE_MAX / 4 - bytes)
			return rix_error_set(RIX_ENOMEM, "snapshot: tag lists too long");
		bytes += len + 1;
	}
	if (most == 0)
		return 0;
	if (most > (SIZE_MAX / 4 - bytes) / sizeof(char *))
		return rix_error_set(RIX_ENOMEM, "snapshot: too many tags");
	const char **v = rix_malloc(most * sizeof(*v) + bytes);
	if (v == NULL)
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for %zu tags", most);
	char *buf = (char *)(v + most);
	size_t k = 0;
	for (size_t i = 0; i < nlists; i++) {
		const char *s = lists[i], *t;
		size_t len;
		for (bool more = true; more;) {
			more = rix__snapshot_next_tag(&s, &t, &len);
			if (len == 0) /* restic's Flatten drops empty tags */
				continue;
			memcpy(buf, t, len);
			buf[len] = '\0';
			v[k++] = buf;
			buf += len + 1;
		}
	}
	if (k == 0) {
		rix_free(v);
		return 0;
	}
	*out = v;
	*n = k;
	return 0;
}

static bool has_path(const rix_snapshot *sn, const char *p)
{
	for (size_t i = 0; i < sn->npaths; i++)
		if (strcmp(sn->paths[i], p) == 0)
			return true;
	return false;
}

bool rix_snapshot_matches(const rix_snapshot *sn, const rix_snapshot_filter *f)
{
	if (f == NULL)
		return true;
	if (f->version != RIX_SNAPSHOT_FILTER_VERSION)
		return false;
	bool ok = f->nhosts == 0;
	for (size_t i = 0; !ok && i < f->nhosts; i++)
		ok = strcmp(sn->hostname, f->hosts[i]) == 0;
	if (!ok)
		return false;
	ok = f->ntags == 0;
	for (size_t i = 0; !ok && i < f->ntags; i++)
		ok = has_tag_list(sn, f->tags[i]);
	if (!ok)
		return false;
	for (size_t i = 0; i < f->npaths; i++)
		if (!has_path(sn, f->paths[i]))
			return false;
	return true;
}

static int check_filter(const rix_snapshot_filter *f)
{
	if (f != NULL && f->version != RIX_SNAPSHOT_FILTER_VERSION)
		return rix_error_set(RIX_EINVAL, "snapshot filter: version %u, this library knows %u", f->version,
				     RIX_SNAPSHOT_FILTER_VERSION);
	return 0;
}

int rix_snapshot_list_filter(rix_snapshot_list *l, const rix_snapshot_filter *f)
{
	int rc = check_filter(f);
	if (rc != 0)
		return rc;
	size_t k = 0;
	for (size_t i = 0; i < l->count; i++) {
		if (rix_snapshot_matches(l->items[i], f))
			l->items[k++] = l->items[i];
		else
			rix_snapshot_free(l->items[i]);
	}
	l->count = k;
	return 0;
}

/* ---- the latest n per host and paths --------------------------------------------------------- */

struct group_key {
	const char *host;
	char *paths; /* the paths sorted and joined with '|', as restic's key */
	size_t index;
};

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* By group, then newest (highest index) first. */
static int by_group(const void *a, const void *b)
{
	const struct group_key *x = a, *y = b;
	int c = strcmp(x->host, y->host);
	if (c == 0)
		c = strcmp(x->paths, y->paths);
	return c != 0 ? c : (x->index < y->index) - (x->index > y->index);
}

int rix_snapshot_list_keep_latest(rix_snapshot_list *l, size_t n)
{
	if (n == 0)
		return rix_error_set(RIX_EINVAL, "snapshots: keep the latest 0 of each group?");
	const size_t total = l->count;
	if (total == 0)
		return 0;
	struct group_key *g = rix_calloc(total, sizeof(*g));
	bool *keep = rix_calloc(total, sizeof(*keep));
	int rc = g == NULL || keep == NULL ? rix_error_set(RIX_ENOMEM, "snapshots: out of memory grouping") : 0;
	for (size_t i = 0; rc == 0 && i < total; i++) {
		const rix_snapshot *sn = l->items[i];
		char **sorted = sn->npaths > 0 ? rix_malloc(sn->npaths * sizeof(*sorted)) : NULL;
		size_t len = 1;
		for (size_t k = 0; k < sn->npaths; k++)
			len += strlen(sn->paths[k]) + 1;
		g[i] = (struct group_key){ sn->hostname, rix_malloc(len), i };
		if ((sn->npaths > 0 && sorted == NULL) || g[i].paths == NULL) {
			rix_free(sorted);
			rc = rix_error_set(RIX_ENOMEM, "snapshots: out of memory grouping");
			break;
		}
		if (sn->npaths > 0) {
			memcpy(sorted, sn->paths, sn->npaths * sizeof(*sorted));
			qsort(sorted, sn->npaths, sizeof(*sorted), by_string);
		}
		char *o = g[i].paths;
		for (size_t k = 0; k < sn->npaths; k++) {
			if (k > 0)
				*o++ = '|';
			size_t pl = strlen(sorted[k]);
			memcpy(o, sorted[k], pl);
			o += pl;
		}
		*o = '\0';
		rix_free(sorted);
	}
	if (rc == 0) {
		qsort(g, total, sizeof(*g), by_group);
		size_t run = 0;
		for (size_t i = 0; i < total; i++) {
			if (i == 0 || strcmp(g[i].host, g[i - 1].host) != 0 || strcmp(g[i].paths, g[i - 1].paths) != 0)
				run = 0;
			keep[g[i].index] = run++ < n;
		}
		size_t k = 0;
		for (size_t i = 0; i < total; i++) {
			if (keep[i])
				l->items[k++] = l->items[i];
			else
				rix_snapshot_free(l->items[i]);
		}
		l->count = k;
	}
	for (size_t i = 0; g != NULL && i < total; i++)
		rix_free(g[i].paths);
	rix_free(g);
	rix_free(keep);
	return rc;
}

/* ---- finding one ------------------------------------------------------------------------------ */

/* Go's filepath.Clean of an absolute path s, in place (the result is never longer). */
static void clean_path(char *s)
{
	size_t n = strlen(s), r = 1, w = 1, dotdot = 1;
	while (r < n) {
		if (s[r] == '/') {
			r++;
		} else if (s[r] == '.' && (r + 1 == n || s[r + 1] == '/')) {
			r++;
		} else if (s[r] == '.' && s[r + 1] == '.' && (r + 2 == n || s[r + 2] == '/')) {
			r += 2;
			if (w > dotdot) {
				w--;
				while (w > dotdot && s[w] != '/')
					w--;
			}
		} else {
			if (w != 1)
				s[w++] = '/';
			while (r < n && s[r] != '/')
				s[w++] = s[r++];
		}
	}
	s[w] = '\0';
}

/* A copy of f with its paths absolute and clean (restic's findLatest); *paths to free after. */
static int absolute_filter(rix_snapshot_filter *abs, char ***paths, const rix_snapshot_filter *f)
{
	*abs = *f;
	*paths = NULL;
	if (f->npaths == 0)
		return 0;
	char cwd[4096];
	bool have_cwd = getcwd(cwd, sizeof(cwd)) != NULL;
	char **v = rix_calloc(f->npaths, sizeof(*v));
	if (v == NULL)
		return rix_error_set(RIX_ENOMEM, "snapshot filter: out of memory");
	for (size_t i = 0; i < f->npaths; i++) {
		const char *p = f->paths[i];
		bool rel = p[0] != '/';
		if (rel && !have_cwd) {
			rix__snapshot_free_strings(v, f->npaths);
			return rix_error_set(RIX_EINVAL, "snapshot filter: path %s is relative and the working directory is unknown", p);
		}
		size_t len = (rel ? strlen(cwd) + 1 : 0) + strlen(p);
		if ((v[i] = rix_malloc(len + 2)) == NULL) {
			rix__snapshot_free_strings(v, f->npaths);
			return rix_error_set(RIX_ENOMEM, "snapshot filter: out of memory");
		}
		snprintf(v[i], len + 2, "%s%s%s", rel ? cwd : "", rel ? "/" : "", p);
		clean_path(v[i]);
	}
	abs->paths = (const char *const *)v;
	*paths = v;
	return 0;
}

/* " [a b]" as Go prints a []string, appended to msg (cut at cap). */
static void append_list(char *msg, size_t cap, const char *name, const char *const *v, size_t n)
{
	size_t k = strlen(msg);
	k += (size_t)snprintf(msg + k, k < cap ? cap - k : 0, "%s:[", name);
	for (size_t i = 0; i < n && k < cap; i++)
		k += (size_t)snprintf(msg + k, cap - k, "%s%s", i ? " " : "", v[i]);
	if (k < cap)
		snprintf(msg + k, cap - k, "]");
}

static int find_latest(rix_snapshot **out, const rix_snapshot_list *l, const rix_snapshot_filter *f)
{
	rix_snapshot_filter abs = RIX_SNAPSHOT_FILTER_INIT;
	char **paths = NULL;
	int rc = f != NULL ? absolute_filter(&abs, &paths, f) : 0;
	if (rc != 0)
		return rc;
	for (size_t i = l->count; i-- > 0 && *out == NULL;)
		if (rix_snapshot_matches(l->items[i], &abs))
			*out = l->items[i];
	if (*out == NULL) {
		char msg[400] = "no snapshot matched given filter (";
		append_list(msg, sizeof(msg), "Paths", abs.paths, abs.npaths);
		append_list(msg, sizeof(msg), " Tags", abs.tags, abs.ntags); /* each "a,b" as given */
		append_list(msg, sizeof(msg), " Hosts", abs.hosts, abs.nhosts);
		rc = rix_error_set(RIX_ENOTFOUND, "%s)", msg);
	}
	rix__snapshot_free_strings(paths, abs.npaths);
	return rc;
}

/* Whether id is what arg names: the whole ID (either case), or a prefix of its lowercase hex. */
struct id_arg {
	const char *s;
	size_t n;
	bool whole;
	rix_id id;
};

static int id_arg_init(struct id_arg *a, const char *s)
{
	a->s = s;
	a->n = strlen(s);
	if (a->n == 0)
		return rix_error_set(RIX_EINVAL, "an empty snapshot ID");
	a->whole = a->n == 64 && rix_id_from_hex(&a->id, s, a->n) == 0;
	return 0;
}

static bool id_arg_matches(const struct id_arg *a, const rix_id *id)
{
	if (a->whole)
		return memcmp(id, &a->id, sizeof(*id)) == 0;
	char hex[65];
	rix_id_to_hex(hex, id);
	return a->n <= 64 && memcmp(hex, a->s, a->n) == 0;
}

static int id_arg_verdict(const struct id_arg *a, size_t matches)
{
	if (matches == 0)
		return rix_error_set(RIX_ENOTFOUND, "no matching ID found for prefix \"%s\"", a->s);
	if (matches > 1)
		return rix_error_set(RIX_EINVAL, "multiple IDs with prefix \"%s\" found", a->s);
	return 0;
}

int rix_snapshot_find_id(rix_id *id, rix_repo *r, const char *prefix)
{
	memset(id, 0, sizeof(*id));
	struct id_arg a;
	int rc = id_arg_init(&a, prefix);
	if (rc != 0)
		return rc;
	rix_id *ids;
	size_t n, matches = 0, at = 0;
	if ((rc = rix_repo_list_ids(&ids, &n, r, RIX_FILE_SNAPSHOT)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (id_arg_matches(&a, &ids[i]))
			matches++, at = i;
	rc = id_arg_verdict(&a, matches);
	if (rc == 0)
		*id = ids[at];
	rix_free(ids);
	return rc;
}

int rix_snapshot_find(rix_snapshot **out, const rix_snapshot_list *l, const char *arg, const rix_snapshot_filter *f)
{
	*out = NULL;
	int rc = check_filter(f);
	if (rc != 0)
		return rc;
	if (strcmp(arg, "latest") == 0)
		return find_latest(out, l, f);
	struct id_arg a;
	if ((rc = id_arg_init(&a, arg)) != 0)
		return rc;
	size_t matches = 0, at = 0;
	bool unreadable = false;
	for (size_t i = 0; i < l->count + l->nunreadable; i++) {
		const rix_id *id = i < l->count ? &l->items[i]->id : &l->unreadable[i - l->count].id;
		if (id_arg_matches(&a, id)) {
			matches++;
			at = i < l->count ? i : i - l->count;
			unreadable = i >= l->count;
		}
	}
	if ((rc = id_arg_verdict(&a, matches)) != 0)
		return rc;
	if (unreadable) {
		char hex[65];
		rix_id_to_hex(hex, &l->unreadable[at].id);
		int code = l->unreadable[at].code;
		return rix_error_set(code, "snapshot %s could not be loaded (%s)", hex, rix_strerror(code));
	}
	*out = l->items[at];
	return 0;
}
