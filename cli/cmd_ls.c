/*
 * cli/cmd_ls.c — rix ls SNAPSHOT [DIR...]: the nodes of a snapshot (rix_walk, rix/walker.h), as
 * restic 0.14's ls lists them:
 *
 *   text     "snapshot 1a2b3c4d of [/home] filtered by [] at 2022-... +0000 UTC):" (not with -q),
 *            then a path a line; -l: "drwxr-xr-x     0     0      0 2022-08-01 10:00:00 /home"
 *   --json   the snapshot (restic 0.14's members, id, short_id, "struct_type":"snapshot"), then a
 *            line per node: name, type, path, uid, gid, size (files), mode, permissions, mtime,
 *            atime, ctime, "struct_type":"node"
 *
 * DIR arguments (absolute): only what is in one of them is listed (the DIR itself too), and what
 * leads to one is walked through; --recursive lists everything beneath them.
 * No lock (restic 0.14 takes none for ls). Exit status: 0 (a snapshot that is not found is
 * reported and skipped, as restic does); 1 a usage error or a tree that cannot be read.
 */
#include "cli.h"

struct ls {
	char **dirs; /* cleaned */
	int ndirs;
	bool recursive, long_format;
};

static int ls_node(void *arg, const char *path, size_t len, const rix_node *n)
{
	(void)len;
	struct ls *l = arg;
	bool within = l->ndirs == 0, approaching = l->ndirs == 0;
	for (int i = 0; i < l->ndirs && !within; i++)
		within = has_path_prefix(l->dirs[i], path);
	if (within) {
		if (g.json)
			print_node_json(path, n);
		else
			print_node(path, n, l->long_format);
		if (l->recursive)
			return RIX_WALK_CONTINUE;
	}
	for (int i = 0; i < l->ndirs && !approaching; i++)
		approaching = has_path_prefix(path, l->dirs[i]);
	return approaching ? RIX_WALK_CONTINUE : RIX_WALK_SKIP;
}

int cmd_ls(int argc, char **argv)
{
	struct filter_flags ff = { 0 };
	struct ls l = { 0 };
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	int nargs = 0, rc = 0;
	if (args == NULL)
		return die("ls: out of memory");
	for (int i = 0; i < argc && rc == 0; i++) {
		int f = filter_flag(&ff, argc, argv, &i);
		if (f < 0)
			rc = 1;
		else if (f > 0)
			continue;
		else if (strcmp(argv[i], "-l") == 0 || strcmp(argv[i], "--long") == 0)
			l.long_format = true;
		else if (strcmp(argv[i], "--recursive") == 0)
			l.recursive = true;
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			rc = die("ls: unknown flag %s", argv[i]);
		else
			args[nargs++] = argv[i];
	}
	filter_flags_done(&ff);
	if (rc == 0 && nargs == 0)
		rc = die("no snapshot ID specified, specify snapshot ID or use special ID 'latest'");
	for (int i = 1; rc == 0 && i < nargs; i++)
		if (args[i][0] != '/')
			rc = die("All path filters must be absolute, starting with a forward slash '/'");
	if (rc == 0 && nargs > 1 && (l.dirs = calloc((size_t)nargs, sizeof(*l.dirs))) == NULL)
		rc = die("ls: out of memory");
	for (int i = 1; rc == 0 && i < nargs; i++) {
		if ((l.dirs[l.ndirs++] = strdup(args[i])) == NULL)
			rc = die("ls: out of memory");
		else
			path_clean(l.dirs[l.ndirs - 1]);
	}
	rix_repo *r = NULL;
	rix_snapshot_list *sl = NULL;
	int bad = 0;
	if (rc == 0)
		rc = open_repo(&r);
	if (rc == 0)
		rc = select_snapshots(&sl, &bad, r, &ff.f, args, 1);
	if (rc == 0 && sl->count > 0)
		rc = load_index(r, NULL, NULL);
	for (size_t k = 0; rc == 0 && k < sl->count; k++) {
		const rix_snapshot *sn = sl->items[k];
		if (g.json) {
			if ((rc = print_snapshot_json(sn, ",\"struct_type\":\"snapshot\"")) != 0)
				break;
		} else if (!g.quiet) {
			char hex[65], when[128];
			rix_id_to_hex(hex, &sn->id);
			go_time_string(when, sizeof(when), &sn->time);
			printf("snapshot %.8s of [", hex);
			for (size_t i = 0; i < sn->npaths; i++)
				printf("%s%s", i ? " " : "", sn->paths[i]);
			fputs("] filtered by [", stdout);
			for (int i = 1; i < nargs; i++)
				printf("%s%s", i > 1 ? " " : "", args[i]);
			printf("] at %s):\n", when);
		}
		int wrc = rix_walk(r, &sn->tree, NULL, ls_node, &l);
		if (wrc != 0)
			rc = fail(wrc);
	}
	rix_snapshot_list_free(sl);
	if (r != NULL)
		close_repo(r, NULL);
	filter_flags_free(&ff);
	for (int i = 0; i < l.ndirs; i++)
		free(l.dirs[i]);
	free(l.dirs);
	free(args);
	return rc;
}
