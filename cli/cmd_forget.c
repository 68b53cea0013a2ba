/*
 * cli/cmd_forget.c — rix forget [flags] [ID...]: removes snapshots as restic 0.14's forget does.
 * With IDs (or "latest"), those; else the snapshots that pass --host / --tag / --path, grouped
 * by --group-by (default host,paths), and in each group those the --keep-* policy does not keep
 * (rix/forget.h). Text: "Applying Policy: ...", then per group restic's tables "keep N
 * snapshots:" (with the reasons) and "remove N snapshots:"; --json: restic's list of groups
 * (tags, host, paths, keep, remove, reasons). An exclusive lock, but for --dry-run with --no-lock.
 * --prune: then prune (cmd_prune.c, with prune's flags), the removed snapshots not counted, as
 * restic 0.14 (in a dry run too: a dry run of prune).
 */
#include "cli.h"

/* A count flag's value: N >= 0 or "unlimited" (-1). 0, or 1 (reported). */
static int parse_count(int *out, const char *flag, const char *v)
{
	if (strcmp(v, "unlimited") == 0) {
		*out = RIX_KEEP_UNLIMITED;
		return 0;
	}
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n > INT32_MAX || n < INT32_MIN)
		return die("forget: invalid argument \"%s\" for \"%s\" flag: not a number", v, flag);
	if (n < 0)
		return die("forget: invalid argument \"%s\" for \"%s\" flag: negative values not allowed, use 'unlimited' instead",
			   v, flag);
	*out = (int)n;
	return 0;
}

static int parse_within(rix_duration *out, const char *flag, const char *v)
{
	if (rix_duration_parse(out, v) != 0)
		return die("forget: invalid argument \"%s\" for \"%s\" flag: %s", v, flag, rix_error_last());
	return 0;
}

/* One of the --keep-* flags at argv[*i]: 1 taken, 0 not one, -1 a bad value (reported). */
static int keep_flag(rix_forget_policy *p, const char ***tags, int argc, char **argv, int *i)
{
	static const struct {
		const char *name, *short_name;
	} counts[] = { { "--keep-last", "-l" },	   { "--keep-hourly", "-H" },  { "--keep-daily", "-d" },
		       { "--keep-weekly", "-w" },  { "--keep-monthly", "-m" }, { "--keep-yearly", "-y" } };
	static const char *const within[] = { "--keep-within",	       "--keep-within-hourly",  "--keep-within-daily",
					      "--keep-within-weekly",  "--keep-within-monthly", "--keep-within-yearly" };
	int *count[] = { &p->last, &p->hourly, &p->daily, &p->weekly, &p->monthly, &p->yearly };
	rix_duration *dur[] = { &p->within,	    &p->within_hourly,	&p->within_daily,
				&p->within_weekly, &p->within_monthly, &p->within_yearly };
	const char *v;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
		if (flag_value(&v, argc, argv, i, counts[k].name) || flag_value(&v, argc, argv, i, counts[k].short_name))
			return parse_count(count[k], counts[k].name, v) ? -1 : 1;
	for (size_t k = 0; k < sizeof(within) / sizeof(within[0]); k++)
		if (flag_value(&v, argc, argv, i, within[k]))
			return parse_within(dur[k], within[k], v) ? -1 : 1;
	if (flag_value(&v, argc, argv, i, "--keep-tag")) {
		const char **t = realloc(*tags, (p->ntags + 1) * sizeof(*t));
		if (t == NULL)
			return die("out of memory"), -1;
		t[p->ntags++] = v;
		*tags = t;
		p->tags = t;
		return 1;
	}
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(rix_id));
}

/* JSON: a list of strings, or null when empty (Go's nil slice). */
static void put_strings(FILE *f, char *const *v, size_t n)
{
	if (n == 0) {
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

/* restic's addJSONSnapshots: the snapshots with id and short_id, or null. */
static int put_snapshots(rix_snapshot **items, size_t n)
{
	if (n == 0) {
		fputs("null", stdout);
		return 0;
	}
	rix_snapshot_list view = { .items = items, .count = n };
	putchar('[');
	int rc = print_json_snapshots(&view);
	putchar(']');
	return rc;
}

/* One group as restic's ForgetGroup: {"tags","host","paths","keep","remove","reasons"}. */
static int put_group(const rix_snapshot_group *gr, const rix_forget_result *res, bool first)
{
	static const char *const counter[RIX_KEEP_COUNTERS] = { "last", "hourly", "daily", "weekly", "monthly", "yearly" };
	printf("%s{\"tags\":", first ? "" : ",");
	put_strings(stdout, gr->tags, gr->ntags);
	fputs(",\"host\":", stdout);
	put_json_string(gr->hostname);
	fputs(",\"paths\":", stdout);
	put_strings(stdout, gr->paths, gr->npaths);
	fputs(",\"keep\":", stdout);
	int rc = put_snapshots(res->keep, res->nkeep);
	fputs(",\"remove\":", stdout);
	if (rc == 0)
		rc = put_snapshots(res->remove, res->nremove);
	fputs(",\"reasons\":", stdout);
	if (res->nkeep == 0)
		fputs("null", stdout);
	for (size_t i = 0; rc == 0 && i < res->nkeep; i++) {
		char *json;
		size_t n;
		if ((rc = rix_snapshot_encode(&json, &n, res->keep[i])) != 0) {
			rc = fail(rc);
			break;
		}
		printf("%s{\"snapshot\":%s,\"matches\":", i ? "," : "[", json);
		rix_free(json);
		put_strings(stdout, (char *const *)res->reasons[i].matches, res->reasons[i].nmatches);
		fputs(",\"counters\":{", stdout);
		bool any = false;
		for (int k = 0; k < RIX_KEEP_COUNTERS; k++)
			if (res->reasons[i].counters[k] != 0) { /* omitempty */
				printf("%s\"%s\":%d", any ? "," : "", counter[k], res->reasons[i].counters[k]);
				any = true;
			}
		fputs("}}", stdout);
		if (i + 1 == res->nkeep)
			putchar(']');
	}
	putchar('}');
	return rc;
}

/* restic's tables of a group: "keep N snapshots:" with reasons, "remove N snapshots:", oldest first. */
static int print_tables(const rix_forget_result *res, bool compact)
{
	size_t n = res->nkeep > res->nremove ? res->nkeep : res->nremove;
	rix_snapshot **items = calloc(n + 1, sizeof(*items));
	char **reasons = calloc(n + 1, sizeof(*reasons));
	int rc = items == NULL || reasons == NULL ? die("out of memory") : 0;
	for (size_t i = 0; rc == 0 && i < res->nkeep; i++) {
		size_t k = res->nkeep - 1 - i; /* newest first: the table is oldest first */
		items[i] = res->keep[k];
		size_t len = 1;
		for (size_t m = 0; m < res->reasons[k].nmatches; m++)
			len += strlen(res->reasons[k].matches[m]) + 1;
		if ((reasons[i] = malloc(len)) == NULL) {
			rc = die("out of memory");
			break;
		}
		reasons[i][0] = '\0';
		for (size_t m = 0; m < res->reasons[k].nmatches; m++) {
			if (m > 0)
				strcat(reasons[i], "\n");
			strcat(reasons[i], res->reasons[k].matches[m]);
		}
	}
	if (rc == 0 && res->nkeep > 0) {
		rix_snapshot_list view = { .items = items, .count = res->nkeep };
		printf("keep %zu snapshots:\n", res->nkeep);
		rc = print_snapshot_table(&view, compact, reasons);
		printf("\n");
	}
	if (rc == 0 && res->nremove > 0) {
		for (size_t i = 0; i < res->nremove; i++)
			items[i] = res->remove[res->nremove - 1 - i];
		rix_snapshot_list view = { .items = items, .count = res->nremove };
		printf("remove %zu snapshots:\n", res->nremove);
		rc = print_snapshot_table(&view, compact, NULL);
		printf("\n");
	}
	for (size_t i = 0; reasons != NULL && i < n; i++)
		free(reasons[i]);
	free(reasons);
	free(items);
	return rc;
}

/* Applies p to each group: prints its tables or JSON, appends the IDs of what it removes to
 * rm[*nrm] (room for every snapshot: each is in one group). */
static int apply_policy(rix_id *rm, size_t *nrm, rix_snapshot_group *groups, size_t ngroups, const rix_forget_policy *p,
			bool compact)
{
	int rc = 0;
	bool json_open = false;
	if (!g.json && !g.quiet) {
		char *what;
		if ((rc = rix_forget_policy_describe(&what, p)) != 0)
			return fail(rc);
		printf("Applying Policy: %s\n", what);
		rix_free(what);
	}
	for (size_t i = 0; rc == 0 && i < ngroups; i++) {
		rix_forget_result *res;
		if (g.verbose >= 1 && !g.json)
			print_group_header(&groups[i]);
		if ((rc = rix_forget_apply(&res, groups[i].list, p, NULL)) != 0)
			return fail(rc);
		if (g.json) {
			if (!json_open)
				putchar('[');
			rc = put_group(&groups[i], res, !json_open);
			json_open = true;
		} else if (!g.quiet) {
			rc = print_tables(res, compact);
		}
		for (size_t k = 0; rc == 0 && k < res->nremove; k++)
			rm[(*nrm)++] = res->remove[k]->id;
		rix_forget_result_free(res);
	}
	if (json_open)
		puts("]");
	return rc;
}

int cmd_forget(int argc, char **argv)
{
	struct filter_flags ff = { 0 };
	rix_forget_policy p = RIX_FORGET_POLICY_INIT;
	const char **keep_tags = NULL;
	char **ids = calloc((size_t)argc + 1, sizeof(*ids));
	int nids = 0, rc = 0;
	bool compact = false, dry_run = false, prune = false;
	rix_prune_options po = RIX_PRUNE_OPTIONS_INIT;
	unsigned by = RIX_GROUP_HOST | RIX_GROUP_PATHS;
	if (ids == NULL)
		return die("out of memory");
	for (int i = 0; i < argc && rc == 0; i++) {
		const char *v;
		int k = keep_flag(&p, &keep_tags, argc, argv, &i);
		if (k == 0 && strcmp(argv[i], "-H") != 0) /* forget's -H is --keep-hourly, not --host */
			k = filter_flag(&ff, argc, argv, &i);
		if (k == 0)
			k = prune_flag(&po, argc, argv, &i);
		if (k != 0) {
			rc = k < 0;
		} else if (flag_value(&v, argc, argv, &i, "--group-by") || flag_value(&v, argc, argv, &i, "-g")) {
			if (rix_snapshot_group_by_parse(&by, v) != 0)
				rc = die("forget: %s", rix_error_last());
		} else if (strcmp(argv[i], "--compact") == 0 || strcmp(argv[i], "-c") == 0) {
			compact = true;
		} else if (strcmp(argv[i], "--dry-run") == 0 || strcmp(argv[i], "-n") == 0) {
			dry_run = true;
		} else if (strcmp(argv[i], "--prune") == 0) {
			prune = true;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			rc = die("forget: unknown flag %s", argv[i]);
		} else {
			ids[nids++] = argv[i];
		}
	}
	filter_flags_done(&ff);
	if (rc == 0 && g.no_lock && !dry_run)
		rc = die("--no-lock is only applicable in combination with --dry-run for forget command");
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	rix_snapshot_list *l = NULL;
	rix_snapshot_group *groups = NULL;
	size_t ngroups = 0;
	rix_id *rm = NULL; /* the IDs to remove, each once (a snapshot is selected once, in one group) */
	size_t nrm = 0;
	int bad = 0;
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, true); /* --no-lock (with --dry-run only): none */
	if (rc == 0)
		rc = select_snapshots(&l, &bad, r, &ff.f, ids, nids);
	if (rc == 0 && (rm = calloc(l->count + 1, sizeof(*rm))) == NULL)
		rc = die("out of memory");
	if (rc == 0 && nids > 0) { /* explicit snapshots: removed, no policy */
		for (size_t i = 0; i < l->count; i++)
			rm[nrm++] = l->items[i]->id;
	} else if (rc == 0) {
		if (rix_snapshot_list_group(&groups, &ngroups, l, by) != 0)
			rc = fail(RIX_ENOMEM);
		else if (rix_forget_policy_empty(&p) && !g.json && !g.quiet)
			printf("no policy was specified, no snapshots will be removed\n");
		else if (!rix_forget_policy_empty(&p))
			rc = apply_policy(rm, &nrm, groups, ngroups, &p, compact);
	}
	if (rc == 0 && nrm > 0) {
		qsort(rm, nrm, sizeof(*rm), cmp_id);
		if (dry_run && !g.json) {
			printf("Would have removed the following snapshots:\n{");
			for (size_t i = 0; i < nrm; i++) {
				char hex[65];
				rix_id_to_hex(hex, &rm[i]);
				printf("%s%.8s", i ? " " : "", hex);
			}
			printf("}\n\n");
		}
		for (size_t i = 0; !dry_run && rc == 0 && i < nrm; i++) {
			char hex[65];
			rix_id_to_hex(hex, &rm[i]);
			int e = rix_snapshot_remove(r, &rm[i]);
			if (e != 0) {
				if (!g.json)
					fprintf(stderr, "unable to remove <snapshot/%.10s> from the repository\n", hex);
				rc = fail(e);
			} else if (!g.json && g.verbose >= 2) {
				printf("removed <snapshot/%.10s>\n", hex);
			}
		}
	}
	if (rc == 0 && nrm > 0 && prune) {
		if (!g.json && !g.quiet)
			printf("%zu snapshots have been removed, running prune\n", nrm);
		po.ignore_snapshots = rm;
		po.nignore_snapshots = nrm;
		rc = run_prune(r, &po, dry_run);
	}
	free(rm);
	rix_snapshot_groups_free(groups, ngroups);
	rix_snapshot_list_free(l);
	close_repo(r, lock);
	filter_flags_free(&ff);
	free(keep_tags);
	free(ids);
	return rc != 0 ? rc : bad;
}
