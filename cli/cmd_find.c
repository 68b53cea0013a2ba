/*
 * cli/cmd_find.c — rix find PATTERN...: the entries of snapshots whose path matches a pattern
 * (rix/pattern.h, restic's rules), or with --blob / --tree the files that use a data blob and the
 * directories that are a tree, as restic 0.14's find prints them:
 *
 *   text     "Found matching entries in snapshot 1a2b3c4d from 2022-08-01 10:00:00" (not with -q),
 *            a path a line (-l: restic's long format), a blank line between snapshots;
 *            --blob: "Found blob ID\n ... in file PATH\n     (tree ID)\n ... in snapshot 1a2b3c4d (TIME)"
 *   --json   [{"matches":[node...],"hits":N,"snapshot":"ID"},...]; --blob / --tree: [{"object_type":
 *            "blob","id":...,"path":...,"parent_tree":...,"snapshot":...,"time":...},...]
 *
 * The walk is restic's walker's, with its memory of ignored trees shared by every snapshot
 * searched: a subtree in which nothing matched is not entered again (in a later snapshot, or
 * elsewhere in the same one), as restic does. An explicit stack: any depth.
 * Snapshots: -s/--snapshot IDs (or latest), else every one that passes --host / --tag / --path,
 * oldest first (restic's order there is the order its parallel loads finish).
 * --oldest / --newest: mtimes from, to (restic's formats without a zone name: 2006-01-02,
 * 2006-01-02 15:04[:05][ -0700], 02.01.2006 [15:04[:05][ -0700]], local time).
 * A shared lock. Exit status: 0; 1 a usage error, a bad pattern time; 11 the lock.
 */
#include "cli.h"

struct fframe {
	rix_tree *t;
	rix_id id;
	size_t next, path_len;
	bool all_ignored;
};

struct find {
	rix_repo *r;
	char **pats;
	int npats;
	rix_patterns *ps; /* pats compiled once (with icase: ignoring case) */
	int err;          /* a match that failed (out of memory): the command fails */
	bool icase, long_format, blob, tree, has_oldest, has_newest;
	rix_time oldest, newest;
	struct idset ignore; /* restic's ignoreTrees */
	size_t items_found;
	/* output (restic's statefulOutput) */
	bool inuse;
	const rix_snapshot *newsn, *oldsn;
	unsigned long long hits;
	struct fframe *st;
	size_t depth, cap;
	char *path;
	size_t pcap;
};

/* restic 0.14's find --json node: the node's fields but name, inode, xattrs, device, content, subtree. */
static void node_json(const char *path, const rix_node *n)
{
	char mode[GO_FILEMODE_MAX];
	go_filemode(mode, n->mode);
	fputs("{\"path\":", stdout);
	put_json_string(path);
	printf(",\"permissions\":\"%s\",\"type\":\"%s\"", mode, node_type_name(n->type));
	if (n->mode != 0)
		printf(",\"mode\":%u", n->mode);
	fputs(",\"mtime\":", stdout);
	put_time_json(&n->mtime);
	fputs(",\"atime\":", stdout);
	put_time_json(&n->atime);
	fputs(",\"ctime\":", stdout);
	put_time_json(&n->ctime);
	printf(",\"uid\":%u,\"gid\":%u", n->uid, n->gid);
	if (n->user != NULL && n->user[0] != '\0') {
		fputs(",\"user\":", stdout);
		put_json_string(n->user);
	}
	if (n->group != NULL && n->group[0] != '\0') {
		fputs(",\"group\":", stdout);
		put_json_string(n->group);
	}
	if (n->device_id != 0)
		printf(",\"device_id\":%llu", (unsigned long long)n->device_id);
	if (n->size != 0)
		printf(",\"size\":%llu", (unsigned long long)n->size);
	if (n->links != 0)
		printf(",\"links\":%llu", (unsigned long long)n->links);
	if (n->linktarget_len > 0) {
		fputs(",\"linktarget\":", stdout);
		fput_json_bytes(stdout, n->linktarget, n->linktarget_len);
	}
	if (n->error != NULL && n->error[0] != '\0') {
		fputs(",\"error\":", stdout);
		put_json_string(n->error);
	}
	putchar('}');
}

static void print_pattern(struct find *f, const char *path, const rix_node *n)
{
	char hex[65];
	if (g.json) {
		if (!f->inuse) {
			putchar('[');
			f->inuse = true;
		}
		if (f->newsn != f->oldsn) {
			if (f->oldsn != NULL) {
				rix_id_to_hex(hex, &f->oldsn->id);
				printf("],\"hits\":%llu,\"snapshot\":\"%s\"},", f->hits, hex);
			}
			fputs("{\"matches\":[", stdout);
			f->oldsn = f->newsn;
			f->hits = 0;
		}
		if (f->hits > 0)
			putchar(',');
		node_json(path, n);
		f->hits++;
		return;
	}
	if (f->newsn != f->oldsn) {
		if (f->oldsn != NULL && !g.quiet)
			putchar('\n');
		f->oldsn = f->newsn;
		if (!g.quiet) {
			char when[64];
			rix_id_to_hex(hex, &f->oldsn->id);
			local_time(when, &f->oldsn->time);
			printf("Found matching entries in snapshot %.8s from %s\n", hex, when);
		}
	}
	print_node(path, n, f->long_format);
}

static void print_object(struct find *f, const char *kind, const rix_id *id, const char *path, const rix_id *tree)
{
	char hex[65], th[65], sh[65];
	rix_id_to_hex(hex, id);
	rix_id_to_hex(sh, &f->newsn->id);
	if (tree != NULL)
		rix_id_to_hex(th, tree);
	if (g.json) {
		if (!f->inuse) {
			putchar('[');
			f->inuse = true;
		}
		if (f->hits > 0)
			putchar(',');
		printf("{\"object_type\":\"%s\",\"id\":\"%s\",\"path\":", kind, hex);
		put_json_string(path);
		if (tree != NULL)
			printf(",\"parent_tree\":\"%s\"", th);
		printf(",\"snapshot\":\"%s\",\"time\":", sh);
		put_time_json(&f->newsn->time);
		putchar('}');
		f->hits++;
		return;
	}
	char when[64];
	local_time(when, &f->newsn->time);
	printf("Found %s %s\n", kind, hex);
	if (tree != NULL)
		printf(" ... in file %s\n     (tree %s)\n", path, th);
	else
		printf(" ... path %s\n", path);
	printf(" ... in snapshot %.8s (%s)\n", sh, when);
}

/* An ID argument names id: the whole ID or its first 8 hex digits (restic's Str). */
static bool names_id(const struct find *f, const rix_id *id)
{
	char hex[65];
	rix_id_to_hex(hex, id);
	for (int i = 0; i < f->npats; i++)
		if (strcmp(f->pats[i], hex) == 0 || (strlen(f->pats[i]) == 8 && strncmp(f->pats[i], hex, 8) == 0))
			return true;
	return false;
}

/* The walk callback, restic's: ignore (*ign), skip (return 1), stop the snapshot (return 2). */
static int visit(struct find *f, const rix_id *parent, const char *path, const rix_node *n, bool *ign)
{
	*ign = false;
	if (f->blob || f->tree) {
		if (n->type == RIX_NODE_DIR && f->tree && n->subtree != NULL && names_id(f, n->subtree)) {
			print_object(f, "tree", n->subtree, path, NULL);
			if (++f->items_found >= (size_t)f->npats && !f->blob) {
				*ign = true;
				return 2;
			}
		}
		if (n->type == RIX_NODE_FILE && f->blob)
			for (size_t i = 0; i < n->content_len; i++)
				if (names_id(f, &n->content[i]))
					print_object(f, "blob", &n->content[i], path, parent);
		return 0;
	}
	bool match = false, child = false;
	if (rix_patterns_match(f->ps, &match, n->type == RIX_NODE_DIR ? &child : NULL, path) != 0) {
		f->err = die("find: out of memory");
		return 2;
	}
	bool ignore_no_match = true;
	int skip = 0;
	if (n->type == RIX_NODE_DIR) {
		if (!child)
			skip = 1;
		else
			ignore_no_match = false;
	}
	if (!match || (f->has_oldest && rix_time_cmp(&n->mtime, &f->oldest) < 0) ||
	    (f->has_newest && rix_time_cmp(&n->mtime, &f->newest) > 0)) {
		*ign = ignore_no_match;
		return skip;
	}
	print_pattern(f, path, n);
	return 0;
}

static void unable(const rix_id *tree, const rix_snapshot *sn)
{
	char a[65], b[65];
	rix_id_to_hex(a, tree);
	rix_id_to_hex(b, &sn->id);
	printf("Unable to load tree %s\n ... which belongs to snapshot %s\n", a, b);
}

static int push(struct find *f, rix_tree *t, const rix_id *id, size_t path_len)
{
	if (f->depth == f->cap) {
		size_t c = f->cap ? 2 * f->cap : 16;
		struct fframe *st = realloc(f->st, c * sizeof(*st));
		if (st == NULL) {
			rix_tree_free(t);
			return die("find: out of memory");
		}
		f->st = st;
		f->cap = c;
	}
	f->st[f->depth++] = (struct fframe){ .t = t, .id = *id, .path_len = path_len, .all_ignored = rix_tree_count(t) > 0 };
	return 0;
}

/* restic's walker.Walk over one snapshot. 0, or 1 (reported). */
static int find_in(struct find *f, const rix_snapshot *sn)
{
	f->newsn = sn;
	rix_tree *t;
	if (rix_tree_load(&t, f->r, &sn->tree) != 0) {
		unable(&sn->tree, sn);
		return 0;
	}
	int rc = push(f, t, &sn->tree, 0);
	while (rc == 0 && f->depth > 0) {
		struct fframe *fr = &f->st[f->depth - 1];
		if (fr->next == rix_tree_count(fr->t)) {
			bool ign = fr->all_ignored;
			rix_id id = fr->id;
			rix_tree_free(fr->t);
			f->depth--;
			if (f->depth > 0) {
				if (ign)
					rc = idset_add(&f->ignore, RIX_BLOB_TREE, &id);
				else
					f->st[f->depth - 1].all_ignored = false;
			}
			continue;
		}
		const rix_node *n = rix_tree_node(fr->t, fr->next++);
		size_t len = fr->path_len + 1 + n->name_len;
		if ((rc = grow_buf(&f->path, &f->pcap, len + 1)) != 0)
			break;
		f->path[fr->path_len] = '/';
		memcpy(f->path + fr->path_len + 1, n->name, n->name_len);
		f->path[len] = '\0';
		bool ign;
		if (n->type != RIX_NODE_DIR) {
			if (visit(f, &fr->id, f->path, n, &ign) == 2)
				break;
			if (!ign)
				fr->all_ignored = false;
			continue;
		}
		if (n->subtree == NULL) {
			rc = die("subtree for node %.*s in tree %s is nil", (int)n->name_len, n->name, f->path);
			break;
		}
		if (idset_has(&f->ignore, RIX_BLOB_TREE, n->subtree))
			continue;
		rix_tree *sub;
		if (rix_tree_load(&sub, f->r, n->subtree) != 0) {
			unable(&fr->id, sn); /* restic names the tree holding the node */
			continue;
		}
		rix_id parent = fr->id;
		int act = visit(f, &parent, f->path, n, &ign);
		if (act == 2) {
			rix_tree_free(sub);
			break;
		}
		if (act == 1) {
			rix_tree_free(sub);
			if (ign)
				rc = idset_add(&f->ignore, RIX_BLOB_TREE, n->subtree);
			continue;
		}
		if (ign)
			rc = idset_add(&f->ignore, RIX_BLOB_TREE, n->subtree);
		else
			fr->all_ignored = false;
		if (rc == 0)
			rc = push(f, sub, n->subtree, len);
		else
			rix_tree_free(sub);
	}
	while (f->depth > 0)
		rix_tree_free(f->st[--f->depth].t);
	return rc;
}

/* restic's find time formats (those without a zone name), in local time. 0, or 1 (reported). */
static int parse_when(rix_time *t, const char *s)
{
	static const char *const fmts[] = { "%Y-%m-%d %H:%M:%S %z", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d",
					    "%d.%m.%Y %H:%M:%S %z", "%d.%m.%Y %H:%M:%S", "%d.%m.%Y %H:%M", "%d.%m.%Y" };
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		struct tm tm = { 0 };
		tm.tm_isdst = -1;
		const char *end = strptime(s, fmts[i], &tm);
		if (end == NULL || *end != '\0')
			continue;
		long off = tm.tm_gmtoff;
		bool zone = strstr(fmts[i], "%z") != NULL;
		time_t sec = zone ? timegm(&tm) - off : mktime(&tm);
		*t = (rix_time){ .sec = sec };
		return 0;
	}
	return die("unable to parse time: \"%s\"", s);
}

int cmd_find(int argc, char **argv)
{
	struct find f = { 0 };
	struct filter_flags ff = { 0 };
	char **snaps = calloc((size_t)argc + 1, sizeof(*snaps));
	f.pats = calloc((size_t)argc + 1, sizeof(*f.pats));
	int nsnaps = 0, rc = 0;
	const char *v;
	if (snaps == NULL || f.pats == NULL)
		rc = die("find: out of memory");
	for (int i = 0; i < argc && rc == 0; i++) {
		int fl = filter_flag(&ff, argc, argv, &i);
		if (fl < 0)
			rc = 1;
		else if (fl > 0)
			continue;
		else if (flag_value(&v, argc, argv, &i, "--snapshot") || flag_value(&v, argc, argv, &i, "-s"))
			snaps[nsnaps++] = (char *)v;
		else if (flag_value(&v, argc, argv, &i, "--oldest") || flag_value(&v, argc, argv, &i, "-O"))
			rc = parse_when(&f.oldest, v), f.has_oldest = true;
		else if (flag_value(&v, argc, argv, &i, "--newest") || flag_value(&v, argc, argv, &i, "-N"))
			rc = parse_when(&f.newest, v), f.has_newest = true;
		else if (strcmp(argv[i], "--blob") == 0)
			f.blob = true;
		else if (strcmp(argv[i], "--tree") == 0)
			f.tree = true;
		else if (strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "--ignore-case") == 0)
			f.icase = true;
		else if (strcmp(argv[i], "-l") == 0 || strcmp(argv[i], "--long") == 0)
			f.long_format = true;
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			rc = die("find: unknown flag %s", argv[i]);
		else
			f.pats[f.npats++] = argv[i];
	}
	filter_flags_done(&ff);
	if (rc == 0 && f.npats == 0)
		rc = die("wrong number of arguments");
	if (rc == 0 && f.blob && f.tree)
		rc = die("cannot have several ID types");
	if (rc == 0 && !f.blob && !f.tree &&
	    rix_patterns_new(&f.ps, f.icase ? NULL : (const char *const *)f.pats, f.icase ? 0 : (size_t)f.npats,
			     f.icase ? (const char *const *)f.pats : NULL, f.icase ? (size_t)f.npats : 0) != 0)
		rc = die("find: out of memory");
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	rix_snapshot_list *sl = NULL;
	int bad = 0;
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, false);
	if (rc == 0)
		rc = select_snapshots(&sl, &bad, r, &ff.f, snaps, nsnaps);
	if (rc == 0)
		rc = load_index(r, NULL, NULL);
	f.r = r;
	/* restic takes -s in the order given (each once), else its list */
	const rix_snapshot **order = rc == 0 ? calloc(sl->count + 1, sizeof(*order)) : NULL;
	size_t norder = 0;
	if (rc == 0 && order == NULL)
		rc = die("find: out of memory");
	for (int a = 0; rc == 0 && a < nsnaps; a++) {
		rix_snapshot *sn;
		if (rix_snapshot_find(&sn, sl, snaps[a], &ff.f) != 0)
			continue;
		size_t k = 0;
		while (k < norder && order[k] != sn)
			k++;
		if (k == norder)
			order[norder++] = sn;
	}
	for (size_t k = 0; rc == 0 && nsnaps == 0 && k < sl->count; k++)
		order[norder++] = sl->items[k];
	for (size_t k = 0; rc == 0 && f.err == 0 && k < norder; k++)
		rc = find_in(&f, order[k]);
	if (rc == 0)
		rc = f.err;
	free(order);
	if (rc == 0 && g.json) {
		if (f.oldsn != NULL) {
			char hex[65];
			rix_id_to_hex(hex, &f.oldsn->id);
			printf("],\"hits\":%llu,\"snapshot\":\"%s\"}", f.hits, hex);
		}
		fputs(f.inuse ? "]\n" : "[]\n", stdout);
	}
	free(f.st);
	free(f.path);
	idset_free(&f.ignore);
	rix_snapshot_list_free(sl);
	if (r != NULL)
		close_repo(r, lock);
	filter_flags_free(&ff);
	free(snaps);
	free(f.pats);
	rix_patterns_free(f.ps);
	return rc;
}
