/*
 * cli/select.c — the snapshots a command works on, as restic's FindFilteredSnapshots picks
 * them: the flags --host / -H, --tag and --path (a filter), and arguments that are IDs, ID
 * prefixes or "latest" (cli.h).
 */
#include "cli.h"

/* argv[*i] is --name VALUE (main.c keeps a flag's value beside it) or --name=VALUE. */
int flag_value(const char **v, int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) != 0)
		return 0;
	if (argv[*i][n] == '=') {
		*v = argv[*i] + n + 1;
		return 1;
	}
	if (argv[*i][n] != '\0' || *i + 1 >= argc)
		return 0;
	*v = argv[++*i];
	return 1;
}

/* Appends s to a growing array of strings (borrowed). 0, or 1 (reported). */
int push_string(const char ***v, size_t *n, const char *s)
{
	const char **w = realloc(*v, (*n + 1) * sizeof(*w));
	if (w == NULL)
		return die("out of memory");
	w[(*n)++] = s;
	*v = w;
	return 0;
}

int filter_flag(struct filter_flags *ff, int argc, char **argv, int *i)
{
	const char *v;
	if (flag_value(&v, argc, argv, i, "--host") || flag_value(&v, argc, argv, i, "-H"))
		return push_string(&ff->hosts, &ff->f.nhosts, v) ? -1 : 1;
	if (flag_value(&v, argc, argv, i, "--tag"))
		return push_string(&ff->tags, &ff->f.ntags, v) ? -1 : 1;
	if (flag_value(&v, argc, argv, i, "--path"))
		return push_string(&ff->paths, &ff->f.npaths, v) ? -1 : 1;
	return 0;
}

void filter_flags_done(struct filter_flags *ff)
{
	ff->f.version = RIX_SNAPSHOT_FILTER_VERSION;
	ff->f.hosts = ff->hosts;
	ff->f.tags = ff->tags;
	ff->f.paths = ff->paths;
}

void filter_flags_free(struct filter_flags *ff)
{
	free(ff->hosts);
	free(ff->tags);
	free(ff->paths);
}

/* restic prints an unreadable snapshot and goes on. */
static void unreadable(void *arg, const rix_id *id, int code, const char *msg)
{
	(void)code;
	char hex[65];
	rix_id_to_hex(hex, id);
	fprintf(stderr, "rix: could not load snapshot %.8s: %s\n", hex, msg);
	++*(int *)arg;
}

int select_snapshots(rix_snapshot_list **out, int *bad, rix_repo *r, const rix_snapshot_filter *f, char **args,
		     int nargs)
{
	*out = NULL;
	*bad = 0;
	rix_snapshot_list *l;
	int unread = 0;
	/* With IDs, only the snapshots they name matter: an unreadable one is reported if named. */
	int rc = rix_snapshot_list_load(&l, r, nargs == 0 ? unreadable : NULL, &unread);
	if (rc != 0)
		return fail(rc);
	*bad = unread != 0;
	if (nargs == 0) {
		if ((rc = rix_snapshot_list_filter(l, f)) != 0) {
			rix_snapshot_list_free(l);
			return fail(rc);
		}
		*out = l;
		return 0;
	}
	bool *keep = calloc(l->count + 1, sizeof(*keep));
	if (keep == NULL) {
		rix_snapshot_list_free(l);
		return die("out of memory");
	}
	bool used_filter = false;
	for (int a = 0; a < nargs; a++) {
		rix_snapshot *sn;
		if (strcmp(args[a], "latest") == 0)
			used_filter = true;
		if (rix_snapshot_find(&sn, l, args[a], f) != 0) {
			fprintf(stderr, "rix: ignoring \"%s\": %s\n", args[a], rix_error_last());
			*bad = 1;
			continue;
		}
		for (size_t i = 0; i < l->count; i++)
			keep[i] |= l->items[i] == sn;
	}
	if (!used_filter && (f->nhosts || f->ntags || f->npaths))
		fprintf(stderr, "rix: ignoring the filters: snapshot IDs are given\n");
	/* The list keeps the named ones, in its order (oldest first). */
	size_t k = 0;
	for (size_t i = 0; i < l->count; i++) {
		if (keep[i])
			l->items[k++] = l->items[i];
		else
			rix_snapshot_free(l->items[i]);
	}
	l->count = k;
	free(keep);
	*out = l;
	return 0;
}
