/*
 * backup/snapshot_group.c — restic's --group-by (rix/snapshot.h): the snapshots of a list
 * grouped by host, paths and / or tags, each group keyed as restic 0.14's GroupSnapshots keys
 * it (its SnapshotGroupKey as Go marshals it). `rix snapshots --group-by` and `rix forget`
 * group through it.
 */
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/snapshot.h"
#include "../common/buf.h"

int rix_snapshot_group_by_parse(unsigned *by, const char *v)
{
	static const struct {
		const char *name;
		unsigned bit;
	} opts[] = { { "host", RIX_GROUP_HOST },   { "hosts", RIX_GROUP_HOST }, { "path", RIX_GROUP_PATHS },
		     { "paths", RIX_GROUP_PATHS }, { "tag", RIX_GROUP_TAGS },   { "tags", RIX_GROUP_TAGS } };
	*by = 0;
	for (const char *p = v;; p++) {
		size_t n = strcspn(p, ","), k = 0;
		while (k < sizeof(opts) / sizeof(opts[0]) && (strlen(opts[k].name) != n || strncmp(p, opts[k].name, n) != 0))
			k++;
		if (k < sizeof(opts) / sizeof(opts[0]))
			*by |= opts[k].bit;
		else if (n > 0)
			return rix_error_set(RIX_EINVAL, "unknown grouping option: '%.*s'", (int)n, p);
		p += n;
		if (*p == '\0')
			return 0;
	}
}

static void put_strings(rix__buf *b, char *const *v, size_t n)
{
	if (n == 0) { /* a nil list, as restic's key holds for what it does not group by */
		rix__buf_puts(b, "null");
		return;
	}
	rix__buf_puts(b, "[");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			rix__buf_puts(b, ",");
		rix__buf_put_json_string(b, (const uint8_t *)v[i], strlen(v[i]));
	}
	rix__buf_puts(b, "]");
}

/* sn's group key under by (rix_malloc'd); NULL when out of memory. */
static char *group_key(const rix_snapshot *sn, unsigned by)
{
	rix__buf b = { 0 };
	const char *host = by & RIX_GROUP_HOST ? sn->hostname : "";
	rix__buf_puts(&b, "{\"hostname\":");
	rix__buf_put_json_string(&b, (const uint8_t *)host, strlen(host));
	rix__buf_puts(&b, ",\"paths\":");
	put_strings(&b, sn->paths, by & RIX_GROUP_PATHS ? sn->npaths : 0);
	rix__buf_puts(&b, ",\"tags\":");
	put_strings(&b, sn->tags, by & RIX_GROUP_TAGS ? sn->ntags : 0);
	rix__buf_puts(&b, "}");
	if (b.failed) {
		rix__buf_free(&b);
		return NULL;
	}
	b.p[b.len] = '\0';
	return (char *)b.p;
}

static int cmp_cstr(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

struct keyed {
	char *key;
	size_t i; /* its place in the list (oldest first) */
};

static int cmp_keyed(const void *x, const void *y)
{
	const struct keyed *a = x, *b = y;
	int c = strcmp(a->key, b->key);
	return c != 0 ? c : (a->i > b->i) - (a->i < b->i);
}

/* A copy of v[0..n) in one block (the pointers, then the strings); NULL when out of memory. */
static char **dup_strings(char *const *v, size_t n)
{
	size_t bytes = n * sizeof(char *);
	for (size_t i = 0; i < n; i++)
		bytes += strlen(v[i]) + 1;
	char **c = rix_malloc(bytes > 0 ? bytes : 1);
	if (c == NULL)
		return NULL;
	char *p = (char *)(c + n);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(v[i]) + 1;
		c[i] = memcpy(p, v[i], len);
		p += len;
	}
	return c;
}

void rix_snapshot_groups_free(rix_snapshot_group *gr, size_t n)
{
	for (size_t i = 0; gr != NULL && i < n; i++) {
		rix_free(gr[i].key);
		rix_free((void *)gr[i].hostname);
		rix_free((void *)gr[i].paths);
		rix_free((void *)gr[i].tags);
		rix_snapshot_list_free(gr[i].list);
	}
	rix_free(gr);
}

int rix_snapshot_list_group(rix_snapshot_group **out, size_t *ngroups, rix_snapshot_list *l, unsigned by)
{
	*out = NULL;
	*ngroups = 0;
	if (by & ~(RIX_GROUP_HOST | RIX_GROUP_PATHS | RIX_GROUP_TAGS))
		return rix_error_set(RIX_EINVAL, "group snapshots: unknown grouping 0x%x", by);
	if (l->count == 0)
		return 0;
	struct keyed *k = rix_calloc(l->count, sizeof(*k));
	rix_snapshot_group *gr = rix_calloc(l->count, sizeof(*gr));
	int rc = k == NULL || gr == NULL ? rix_error_set(RIX_ENOMEM, "group snapshots: out of memory") : 0;
	for (size_t i = 0; rc == 0 && i < l->count; i++) {
		rix_snapshot *sn = l->items[i];
		if (sn->npaths > 1)
			qsort(sn->paths, sn->npaths, sizeof(*sn->paths), cmp_cstr);
		if ((by & RIX_GROUP_TAGS) && sn->ntags > 1) /* (none: NULL, which qsort may not be given) */
			qsort(sn->tags, sn->ntags, sizeof(*sn->tags), cmp_cstr);
		k[i].i = i;
		if ((k[i].key = group_key(sn, by)) == NULL)
			rc = rix_error_set(RIX_ENOMEM, "group snapshots: out of memory");
	}
	if (rc == 0)
		qsort(k, l->count, sizeof(*k), cmp_keyed);
	/* Every group's list first, so that a failure leaves l as it was. */
	size_t n = 0;
	for (size_t a = 0, b; rc == 0 && a < l->count; a = b, n++) {
		for (b = a + 1; b < l->count && strcmp(k[a].key, k[b].key) == 0; b++)
			;
		const rix_snapshot *first = l->items[k[a].i];
		size_t np = by & RIX_GROUP_PATHS ? first->npaths : 0, nt = by & RIX_GROUP_TAGS ? first->ntags : 0;
		const char *host = by & RIX_GROUP_HOST ? first->hostname : "";
		char *h = rix_malloc(strlen(host) + 1);
		if (h != NULL)
			strcpy(h, host);
		gr[n].hostname = h;
		gr[n].paths = np > 0 ? dup_strings(first->paths, np) : NULL;
		gr[n].npaths = gr[n].paths != NULL ? np : 0;
		gr[n].tags = nt > 0 ? dup_strings(first->tags, nt) : NULL;
		gr[n].ntags = gr[n].tags != NULL ? nt : 0;
		gr[n].list = rix_calloc(1, sizeof(*gr[n].list));
		if (gr[n].list == NULL || (gr[n].list->items = rix_calloc(b - a, sizeof(rix_snapshot *))) == NULL ||
		    h == NULL || gr[n].npaths != np || gr[n].ntags != nt)
			rc = rix_error_set(RIX_ENOMEM, "group snapshots: out of memory");
	}
	if (rc != 0) {
		/* The lists hold no snapshot yet (count 0): freeing them frees none of l's. n counts
		 * the group that failed too (the loop's step ran), whose parts may be half there. */
		rix_snapshot_groups_free(gr, n);
		for (size_t i = 0; k != NULL && i < l->count; i++)
			rix_free(k[i].key);
		rix_free(k);
		return rc;
	}
	n = 0;
	for (size_t a = 0, b; a < l->count; a = b, n++) {
		for (b = a + 1; b < l->count && strcmp(k[a].key, k[b].key) == 0; b++)
			;
		rix_snapshot_group *g = &gr[n];
		for (size_t i = a; i < b; i++)
			g->list->items[g->list->count++] = l->items[k[i].i];
		g->key = k[a].key;
		k[a].key = NULL;
	}
	for (size_t i = 0; i < l->count; i++)
		rix_free(k[i].key);
	rix_free(k);
	l->count = 0; /* every snapshot is in a group now */
	*out = gr;
	*ngroups = n;
	return 0;
}
