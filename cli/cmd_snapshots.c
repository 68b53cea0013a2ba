/*
 * cli/cmd_snapshots.c — rix snapshots [ID...]: the snapshots, oldest first, as restic 0.14's
 * table (ID, local time, host, tags, paths; --compact: no paths, a tag a line) or --json
 * (restic's fields, and id and short_id), picked by --host, --tag, --path, IDs or "latest",
 * and --latest N (the N latest of each host and paths); --group-by host,paths,tags: a table
 * (or a JSON object) per group, as restic's GroupSnapshots makes them.
 */
#include "cli.h"

/* The cells of a row: each may hold several lines ('\n'). */
#define COLUMNS 5

/* Column c's line `line` of cell s into *a, *n (empty past its last line). */
static void cell_line(const char *s, int line, const char **a, size_t *n)
{
	for (int i = 0; i < line && s != NULL; i++) {
		s = strchr(s, '\n');
		if (s != NULL)
			s++;
	}
	*a = s != NULL ? s : "";
	*n = strcspn(*a, "\n");
}

static int cell_lines(const char *s)
{
	int n = 1;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* One row (restic's printLine): cells padded to their widths, "  " between, trailing spaces cut. */
static void print_row(char *const *cells, const size_t *width, int ncol)
{
	int lines = 1;
	for (int c = 0; c < ncol; c++)
		if (cell_lines(cells[c]) > lines)
			lines = cell_lines(cells[c]);
	for (int l = 0; l < lines; l++) {
		char out[8192];
		size_t k = 0, keep = 0; /* keep: the length without trailing spaces */
		for (int c = 0; c < ncol; c++) {
			const char *a;
			size_t n;
			cell_line(cells[c], l, &a, &n);
			if (c > 0 && k < sizeof(out))
				k += (size_t)snprintf(out + k, sizeof(out) - k, "  ");
			if (k < sizeof(out))
				k += (size_t)snprintf(out + k, sizeof(out) - k, "%.*s%*s", (int)n, a,
						      n < width[c] ? (int)(width[c] - n) : 0, "");
		}
		if (k >= sizeof(out))
			k = sizeof(out) - 1;
		keep = k;
		while (keep > 0 && out[keep - 1] == ' ')
			keep--;
		printf("%.*s\n", (int)keep, out);
	}
}

/* s[0..n) joined with sep into a new string (free). */
static char *join(char *const *s, size_t n, const char *sep)
{
	size_t len = 1;
	for (size_t i = 0; i < n; i++)
		len += strlen(s[i]) + strlen(sep);
	char *o = malloc(len), *p = o;
	if (o == NULL)
		return NULL;
	*p = '\0';
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? sep : "", s[i]);
	return o;
}

/* The table of l, as restic 0.14's PrintSnapshots. 0, or 1 (out of memory). */
static int print_table(const rix_snapshot_list *l, bool compact)
{
	static const char *const head[] = { "ID", "Time", "Host      ", "Tags      ", "Paths" };
	static const char *const head_compact[] = { "ID", "Time", "Host", "Tags  " };
	const int ncol = compact ? 4 : COLUMNS;
	if (l->count == 0)
		return 0; /* restic prints no table then (its groups are empty) */
	char *(*cells)[COLUMNS] = calloc(l->count + 1, sizeof(*cells));
	if (cells == NULL)
		return die("out of memory");
	size_t width[COLUMNS];
	bool multiline = false;
	for (int c = 0; c < ncol; c++)
		width[c] = strlen(compact ? head_compact[c] : head[c]);
	int rc = 0;
	for (size_t i = 0; i < l->count && rc == 0; i++) {
		const rix_snapshot *sn = l->items[i];
		char hex[65], when[32] = "";
		rix_id_to_hex(hex, &sn->id);
		time_t t = (time_t)sn->time.sec;
		struct tm tm;
		if (localtime_r(&t, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		cells[i][0] = strndup(hex, 8);
		cells[i][1] = strdup(when);
		cells[i][2] = strdup(sn->hostname);
		cells[i][3] = join(sn->tags, sn->ntags, compact ? "\n" : ",");
		if (!compact)
			cells[i][4] = join(sn->paths, sn->npaths, "\n");
		multiline |= !compact && sn->npaths > 1;
		for (int c = 0; c < ncol; c++) {
			if (cells[i][c] == NULL) {
				rc = die("out of memory");
				break;
			}
			for (int line = 0; line < cell_lines(cells[i][c]); line++) {
				const char *a;
				size_t n;
				cell_line(cells[i][c], line, &a, &n);
				if (n > width[c])
					width[c] = n;
			}
		}
	}
	if (rc == 0) {
		size_t total = 2 * (size_t)(ncol - 1);
		for (int c = 0; c < ncol; c++)
			total += width[c];
		print_row((char *const *)(compact ? head_compact : head), width, ncol);
		for (size_t k = 0; k < total; k++)
			putchar('-');
		putchar('\n');
		for (size_t i = 0; i < l->count; i++) {
			if (multiline && i > 0)
				putchar('\n'); /* restic: a blank line between snapshots of several paths */
			print_row(cells[i], width, ncol);
		}
		for (size_t k = 0; k < total; k++)
			putchar('-');
		printf("\n%zu snapshots\n", l->count);
	}
	for (size_t i = 0; i < l->count; i++)
		for (int c = 0; c < COLUMNS; c++)
			free(cells[i][c]);
	free(cells);
	return rc;
}

/* restic's --json snapshots: l's, each with "id" and "short_id" after its members, comma-separated. */
static int print_json_items(const rix_snapshot_list *l)
{
	for (size_t i = 0; i < l->count; i++) {
		char *json, hex[65];
		size_t n;
		int rc = rix_snapshot_encode(&json, &n, l->items[i]);
		if (rc != 0) {
			putchar('\n');
			return fail(rc);
		}
		rix_id_to_hex(hex, &l->items[i]->id);
		printf("%s%.*s,\"id\":\"%s\",\"short_id\":\"%.8s\"}", i ? "," : "", (int)(n - 1), json, hex, hex);
		rix_free(json);
	}
	return 0;
}

/* ---- --group-by ---------------------------------------------------------------------------- */

/* What restic's --group-by groups by (GroupSnapshots): any of these. */
enum { GROUP_HOST = 1, GROUP_PATHS = 2, GROUP_TAGS = 4 };

/* "host,paths" (each also singular; empty parts ignored) into *by. 0, or 1 (reported). */
static int parse_group_by(unsigned *by, const char *v)
{
	static const struct {
		const char *name;
		unsigned bit;
	} opts[] = { { "host", GROUP_HOST }, { "hosts", GROUP_HOST }, { "path", GROUP_PATHS },
		     { "paths", GROUP_PATHS }, { "tag", GROUP_TAGS }, { "tags", GROUP_TAGS } };
	*by = 0;
	for (const char *p = v;; p++) {
		size_t n = strcspn(p, ","), k = 0;
		while (k < sizeof(opts) / sizeof(opts[0]) && (strlen(opts[k].name) != n || strncmp(p, opts[k].name, n) != 0))
			k++;
		if (k < sizeof(opts) / sizeof(opts[0]))
			*by |= opts[k].bit;
		else if (n > 0)
			return die("snapshots: unknown grouping option: '%.*s'", (int)n, p);
		p += n;
		if (*p == '\0')
			return 0;
	}
}

/* One group: its key (restic's SnapshotGroupKey as Go marshals it) and its snapshots. */
struct group {
	char *key;            /* {"hostname":..,"paths":..,"tags":..} */
	rix_snapshot_list *l; /* owns its snapshots */
};

static void put_json_strings(FILE *f, char *const *v, size_t n)
{
	if (n == 0) { /* a nil list, as restic's key holds for what it does not group by */
		fputs("null", f);
		return;
	}
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			fputc(',', f);
		fput_json_string(f, v[i]);
	}
	fputc(']', f);
}

/* sn's group key under by, malloc'd; NULL when out of memory. */
static char *group_key(const rix_snapshot *sn, unsigned by)
{
	char *key = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&key, &len);
	if (f == NULL)
		return NULL;
	fputs("{\"hostname\":", f);
	fput_json_string(f, by & GROUP_HOST ? sn->hostname : "");
	fputs(",\"paths\":", f);
	put_json_strings(f, sn->paths, by & GROUP_PATHS ? sn->npaths : 0);
	fputs(",\"tags\":", f);
	put_json_strings(f, sn->tags, by & GROUP_TAGS ? sn->ntags : 0);
	fputc('}', f);
	if (fclose(f) != 0) {
		free(key);
		return NULL;
	}
	return key;
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

static void groups_free(struct group *gr, size_t n)
{
	for (size_t i = 0; gr != NULL && i < n; i++) {
		free(gr[i].key);
		rix_snapshot_list_free(gr[i].l);
	}
	free(gr);
}

/*
 * l's snapshots into groups, as restic 0.14's GroupSnapshots: the key of each is its hostname,
 * paths and tags, those by groups by (the others "" and null); every snapshot's paths are sorted,
 * and its tags too when grouping by them (restic sorts them in place, and shows them so). The
 * groups in the byte order of their keys (restic's order is its map's, random), each oldest
 * first; by = 0: one group. l is left empty. 0, or 1 (reported).
 */
static int group_snapshots(struct group **out, size_t *ngroups, rix_snapshot_list *l, unsigned by)
{
	*out = NULL;
	*ngroups = 0;
	struct keyed *k = calloc(l->count + 1, sizeof(*k));
	struct group *gr = calloc(l->count + 1, sizeof(*gr));
	int rc = k == NULL || gr == NULL ? die("out of memory") : 0;
	for (size_t i = 0; rc == 0 && i < l->count; i++) {
		rix_snapshot *sn = l->items[i];
		if (sn->npaths > 1)
			qsort(sn->paths, sn->npaths, sizeof(*sn->paths), cmp_cstr);
		if ((by & GROUP_TAGS) && sn->ntags > 1) /* (none: NULL, which qsort may not be given) */
			qsort(sn->tags, sn->ntags, sizeof(*sn->tags), cmp_cstr);
		k[i].i = i;
		if ((k[i].key = group_key(sn, by)) == NULL)
			rc = die("out of memory");
	}
	if (rc == 0)
		qsort(k, l->count, sizeof(*k), cmp_keyed);
	size_t n = 0;
	for (size_t a = 0, b; rc == 0 && a < l->count; a = b) {
		for (b = a + 1; b < l->count && strcmp(k[a].key, k[b].key) == 0; b++)
			;
		rix_snapshot_list *gl = rix_calloc(1, sizeof(*gl));
		rix_snapshot **items = rix_calloc(b - a, sizeof(*items));
		if (gl == NULL || items == NULL) {
			rix_free(gl);
			rix_free(items);
			rc = die("out of memory");
			break;
		}
		for (size_t i = a; i < b; i++) {
			items[i - a] = l->items[k[i].i];
			l->items[k[i].i] = NULL; /* the group owns it now */
		}
		gl->items = items;
		gl->count = b - a;
		gr[n].key = k[a].key;
		k[a].key = NULL;
		gr[n++].l = gl;
	}
	for (size_t i = 0; k != NULL && i < l->count; i++)
		free(k[i].key);
	free(k);
	if (rc != 0) {
		groups_free(gr, n);
		return rc;
	}
	l->count = 0; /* every snapshot is in a group now */
	*out = gr;
	*ngroups = n;
	return 0;
}

/* "a, b" of v[0..n) after `name [`, as restic's header joins them. */
static void print_joined(const char *name, char *const *v, size_t n, bool *first)
{
	printf("%s%s [", *first ? "" : ", ", name);
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? ", " : "", v[i]);
	putchar(']');
	*first = false;
}

/*
 * restic's PrintSnapshotGroupHeader: nothing when the key has no host, tags or paths. The key's
 * values are any member's (they share them).
 */
static void print_group_header(const struct group *gr, unsigned by)
{
	const rix_snapshot *sn = gr->l->items[0];
	bool host = (by & GROUP_HOST) && sn->hostname[0] != '\0', tags = (by & GROUP_TAGS) && sn->ntags > 0,
	     paths = (by & GROUP_PATHS) && sn->npaths > 0, first = true;
	if (!host && !tags && !paths)
		return;
	printf("snapshots for (");
	if (host) {
		printf("host [%s]", sn->hostname);
		first = false;
	}
	if (tags)
		print_joined("tags", sn->tags, sn->ntags, &first);
	if (paths)
		print_joined("paths", sn->paths, sn->npaths, &first);
	printf("):\n");
}

/*
 * The groups as restic 0.14 prints them: a table each (a header line first when grouping), or
 * --json: the snapshots' array, or when grouping [{"group_key":KEY,"snapshots":[...]}, ...].
 */
static int print_groups(const struct group *gr, size_t n, unsigned by, bool compact)
{
	int rc = 0;
	if (g.json) {
		putchar('[');
		for (size_t i = 0; rc == 0 && i < n; i++) {
			if (by != 0)
				printf("%s{\"group_key\":%s,\"snapshots\":[", i ? "," : "", gr[i].key);
			else if (i > 0)
				putchar(',');
			rc = print_json_items(gr[i].l);
			if (rc == 0 && by != 0)
				printf("]}");
		}
		if (rc == 0)
			puts("]");
		return rc;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (by != 0)
			print_group_header(&gr[i], by);
		rc = print_table(gr[i].l, compact);
	}
	return rc;
}

int cmd_snapshots(int argc, char **argv)
{
	struct filter_flags ff = { 0 };
	char **ids = calloc((size_t)argc + 1, sizeof(*ids));
	int nids = 0, rc = 0;
	bool compact = false;
	long latest = 0;
	unsigned by = 0;
	if (ids == NULL)
		return die("out of memory");
	for (int i = 0; i < argc && rc == 0; i++) {
		const char *v;
		int k = filter_flag(&ff, argc, argv, &i);
		if (k != 0) {
			rc = k < 0;
		} else if (flag_value(&v, argc, argv, &i, "--latest")) {
			char *end;
			errno = 0;
			latest = strtol(v, &end, 10);
			if (errno != 0 || end == v || *end != '\0' || latest < 0)
				rc = die("snapshots: --latest %s is not a number of snapshots", v);
		} else if (flag_value(&v, argc, argv, &i, "--group-by") || flag_value(&v, argc, argv, &i, "-g")) {
			rc = parse_group_by(&by, v);
		} else if (strcmp(argv[i], "--compact") == 0 || strcmp(argv[i], "-c") == 0) {
			compact = true;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			rc = die("snapshots: unknown flag %s", argv[i]);
		} else {
			ids[nids++] = argv[i];
		}
	}
	filter_flags_done(&ff);
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	rix_snapshot_list *l = NULL;
	int bad = 0;
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, false);
	if (rc == 0)
		rc = select_snapshots(&l, &bad, r, &ff.f, ids, nids);
	struct group *groups = NULL;
	size_t ngroups = 0;
	if (rc == 0)
		rc = group_snapshots(&groups, &ngroups, l, by);
	/* --latest N: in each group, the N latest of each host and paths (restic's order). */
	for (size_t i = 0; rc == 0 && latest > 0 && i < ngroups; i++)
		if ((rc = rix_snapshot_list_keep_latest(groups[i].l, (size_t)latest)) != 0)
			rc = fail(rc);
	if (rc == 0)
		rc = print_groups(groups, ngroups, by, compact);
	groups_free(groups, ngroups);
	rix_snapshot_list_free(l);
	close_repo(r, lock);
	filter_flags_free(&ff);
	free(ids);
	return rc != 0 ? rc : bad;
}
