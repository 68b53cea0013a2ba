/*
 * cli/cmd_snapshots.c — rix snapshots: every snapshot, oldest first, as restic's table
 * (ID, time, host, tags, paths) or --json (restic's fields plus id and short_id).
 */
#include <jansson.h>

#include "cli.h"

struct snap {
	char id[65];
	json_t *j;
};

/* Oldest first, by the instant (snapshots made in other zones or seasons sort right too). */
static int by_time(const void *a, const void *b)
{
	rix_time x = { 0, 0, 0 }, y = { 0, 0, 0 };
	if (rix_time_parse(&x, json_string_value(json_object_get(((const struct snap *)a)->j, "time"))) != 0)
		x = (rix_time){ 0, 0, 0 };
	if (rix_time_parse(&y, json_string_value(json_object_get(((const struct snap *)b)->j, "time"))) != 0)
		y = (rix_time){ 0, 0, 0 };
	return rix_time_cmp(&x, &y);
}

int cmd_snapshots(int argc, char **argv)
{
	(void)argv;
	if (argc != 0)
		return die("snapshots: unknown argument %s", argv[0]);
	rix_repo *r;
	rix_lock *lock;
	int orc = open_repo_locked(&r, &lock, false);
	if (orc != 0)
		return orc;
	struct {
		struct snap *v;
		size_t n;
	} l = { NULL, 0 };
	rix_id *ids;
	int rc = rix_repo_list_ids(&ids, &l.n, r, RIX_FILE_SNAPSHOT);
	if (rc == 0 && l.n > 0 && (l.v = calloc(l.n, sizeof(*l.v))) == NULL)
		rc = rix_error_set(RIX_ENOMEM, "snapshots: out of memory");
	int bad = 0;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		uint8_t *json;
		size_t n;
		rix_id_to_hex(l.v[i].id, &ids[i]);
		if (rix_repo_read_file(&json, &n, r, RIX_FILE_SNAPSHOT, &ids[i]) != 0) {
			fprintf(stderr, "rix: snapshot %.8s: %s\n", l.v[i].id, rix_error_last());
			bad = 1;
			continue;
		}
		l.v[i].j = json_loadb((const char *)json, n, 0, NULL);
		rix_free(json);
		if (l.v[i].j == NULL || !json_is_object(l.v[i].j)) {
			fprintf(stderr, "rix: snapshot %.8s: not a snapshot (bad JSON)\n", l.v[i].id);
			bad = 1;
		}
	}
	rix_free(ids);
	if (rc != 0) {
		free(l.v);
		close_repo(r, lock);
		return fail(rc);
	}
	size_t k = 0; /* the readable ones, by time */
	for (size_t i = 0; i < l.n; i++) {
		if (l.v[i].j != NULL && json_is_object(l.v[i].j))
			l.v[k++] = l.v[i];
		else
			json_decref(l.v[i].j);
	}
	qsort(l.v, k, sizeof(*l.v), by_time);
	if (g.json)
		printf("[");
	else if (!g.quiet && k > 0)
		printf("%-8s  %-19s  %-15s  %-10s  %s\n", "ID", "Time", "Host", "Tags", "Paths");
	for (size_t i = 0; i < k; i++) {
		json_t *j = l.v[i].j;
		if (g.json) {
			json_object_set_new(j, "id", json_string(l.v[i].id));
			char sid[9];
			snprintf(sid, sizeof(sid), "%.8s", l.v[i].id);
			json_object_set_new(j, "short_id", json_string(sid));
			char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
			printf("%s%s", i ? "," : "", s ? s : "null");
			json_free_t f;
			json_get_alloc_funcs(NULL, &f);
			f(s);
			continue;
		}
		const char *t = json_string_value(json_object_get(j, "time"));
		char when[20] = "";
		if (t != NULL) {
			snprintf(when, sizeof(when), "%.19s", t);
			when[10] = ' ';
		}
		const char *host = json_string_value(json_object_get(j, "hostname"));
		printf("%.8s  %-19s  %-15s  ", l.v[i].id, when, host ? host : "");
		size_t ti;
		json_t *v;
		int w = 0;
		json_array_foreach(json_object_get(j, "tags"), ti, v)
			w += printf("%s%s", ti ? "," : "", json_string_value(v));
		printf("%*s  ", w < 10 ? 10 - w : 0, "");
		json_array_foreach(json_object_get(j, "paths"), ti, v)
			printf("%s%s", ti ? ", " : "", json_string_value(v));
		printf("\n");
	}
	if (g.json)
		printf("]\n");
	else if (!g.quiet)
		printf("%zu snapshots\n", k);
	for (size_t i = 0; i < k; i++)
		json_decref(l.v[i].j);
	free(l.v);
	close_repo(r, lock);
	return bad;
}
