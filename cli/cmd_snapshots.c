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

/*
 * The table of l, as restic 0.14's PrintSnapshots; reasons (NULL: none) gives each snapshot's
 * cell of a Reasons column (lines joined by '\n'; forget's kept snapshots), before Paths and not
 * with compact. 0, or 1 (out of memory).
 */
int print_snapshot_table(const rix_snapshot_list *l, bool compact, char *const *reasons)
{
	static const char *const head[] = { "ID", "Time", "Host      ", "Tags      ", "Paths" };
	static const char *const head_reasons[] = { "ID", "Time", "Host      ", "Tags      ", "Reasons", "Paths" };
	static const char *const head_compact[] = { "ID", "Time", "Host", "Tags  " };
	const bool with_reasons = reasons != NULL && !compact;
	const int ncol = compact ? 4 : with_reasons ? COLUMNS + 1 : COLUMNS;
	const char *const *heads = compact ? head_compact : with_reasons ? head_reasons : head;
	if (l->count == 0)
		return 0; /* restic prints no table then (its groups are empty) */
	char *(*cells)[COLUMNS + 1] = calloc(l->count + 1, sizeof(*cells));
	if (cells == NULL)
		return die("out of memory");
	size_t width[COLUMNS + 1];
	bool multiline = false;
	for (int c = 0; c < ncol; c++)
		width[c] = strlen(heads[c]);
	int rc = 0;
	for (size_t i = 0; i < l->count && rc == 0; i++) {
		const rix_snapshot *sn = l->items[i];
		char hex[65], when[32] = "";
		rix_id_to_hex(hex, &sn->id);
		time_t t = (time_t)sn->time.sec;
		struct tm tm;
		if (localtime_r(&t, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		int c = 0;
		cells[i][c++] = strndup(hex, 8);
		cells[i][c++] = strdup(when);
		cells[i][c++] = strdup(sn->hostname);
		cells[i][c++] = join(sn->tags, sn->ntags, compact ? "\n" : ",");
		if (with_reasons)
			cells[i][c++] = strdup(reasons[i] != NULL ? reasons[i] : "");
		if (!compact)
			cells[i][c++] = join(sn->paths, sn->npaths, "\n");
		multiline |= !compact && sn->npaths > 1;
		for (c = 0; c < ncol; c++) {
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
		print_row((char *const *)heads, width, ncol);
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
		for (int c = 0; c < COLUMNS + 1; c++)
			free(cells[i][c]);
	free(cells);
	return rc;
}

/* restic's --json snapshots: l's, each with "id" and "short_id" after its members, comma-separated. */
int print_json_snapshots(const rix_snapshot_list *l)
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

/* "a, b" of v[0..n) after `name [`, as restic's header joins them. */
static void print_joined(const char *name, char *const *v, size_t n, bool *first)
{
	printf("%s%s [", *first ? "" : ", ", name);
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? ", " : "", v[i]);
	putchar(']');
	*first = false;
}

/* restic's PrintSnapshotGroupHeader: nothing when the key has no host, tags or paths. */
void print_group_header(const rix_snapshot_group *gr)
{
	bool first = true;
	if (gr->hostname[0] == '\0' && gr->ntags == 0 && gr->npaths == 0)
		return;
	printf("snapshots for (");
	if (gr->hostname[0] != '\0') {
		printf("host [%s]", gr->hostname);
		first = false;
	}
	if (gr->ntags > 0)
		print_joined("tags", gr->tags, gr->ntags, &first);
	if (gr->npaths > 0)
		print_joined("paths", gr->paths, gr->npaths, &first);
	printf("):\n");
}

/*
 * The groups as restic 0.14 prints them: a table each (a header line first when grouping), or
 * --json: the snapshots' array, or when grouping [{"group_key":KEY,"snapshots":[...]}, ...].
 */
static int print_groups(const rix_snapshot_group *gr, size_t n, unsigned by, bool compact)
{
	int rc = 0;
	if (g.json) {
		putchar('[');
		for (size_t i = 0; rc == 0 && i < n; i++) {
			if (by != 0)
				printf("%s{\"group_key\":%s,\"snapshots\":[", i ? "," : "", gr[i].key);
			else if (i > 0)
				putchar(',');
			rc = print_json_snapshots(gr[i].list);
			if (rc == 0 && by != 0)
				printf("]}");
		}
		if (rc == 0)
			puts("]");
		return rc;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (by != 0)
			print_group_header(&gr[i]);
		rc = print_snapshot_table(gr[i].list, compact, NULL);
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
			rc = rix_snapshot_group_by_parse(&by, v) != 0 ? die("snapshots: %s", rix_error_last()) : 0;
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
	rix_snapshot_group *groups = NULL;
	size_t ngroups = 0;
	if (rc == 0 && rix_snapshot_list_group(&groups, &ngroups, l, by) != 0)
		rc = fail(RIX_ENOMEM);
	/* --latest N: in each group, the N latest of each host and paths (restic's order). */
	for (size_t i = 0; rc == 0 && latest > 0 && i < ngroups; i++)
		if ((rc = rix_snapshot_list_keep_latest(groups[i].list, (size_t)latest)) != 0)
			rc = fail(rc);
	if (rc == 0)
		rc = print_groups(groups, ngroups, by, compact);
	rix_snapshot_groups_free(groups, ngroups);
	rix_snapshot_list_free(l);
	close_repo(r, lock);
	filter_flags_free(&ff);
	free(ids);
	return rc != 0 ? rc : bad;
}
