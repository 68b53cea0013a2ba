/*
 * cli/cmd_diff.c — rix diff SNAP1 SNAP2: what changed from the first snapshot to the second, as
 * restic 0.14's diff prints it:
 *
 *   "comparing snapshot 1a2b3c4d to 5e6f7a8b:" and a blank line (not with -q or --json), then a
 *   line per change, "%-5s%s": +  added, -  removed, M  a file's content changed, T  the type
 *   changed, U  metadata changed (with --metadata; a directory whose content changed is U too,
 *   its subtree being part of its metadata), directories with a trailing '/'; then the counts:
 *   files, dirs, others new and removed, files changed, data and tree blobs only one side has
 *   (blobs of unchanged directories not counted) and their bytes.
 *   --json: {"message_type":"change","path":...,"modifier":...} lines, then one "statistics".
 *   -q: the counts only.
 *
 * The two trees are compared side by side, name by name (both sorted), on an explicit stack of
 * tree pairs: any depth; an added or removed directory is listed with rix_walk.
 * Snapshots by ID or prefix only (restic 0.14's diff takes no "latest"). A shared lock, as
 * restic's. Exit status: 0; 1 a usage error, a snapshot not found, ambiguous or unreadable;
 * 11 the lock. A tree that cannot be read is reported ("error: ...") and left out, as restic.
 */
#include "cli.h"

struct dstat {
	unsigned long long files, dirs, others, data_blobs, tree_blobs, bytes;
};

struct dframe {
	rix_tree *t1, *t2;
	size_t i1, i2;
	size_t plen; /* the directory's path with its trailing '/': d->path[0..plen) */
};

struct diff {
	rix_repo *r;
	bool metadata;
	struct idset before, after, common;
	struct dstat added, removed;
	unsigned long long changed;
	struct dframe *st;
	size_t depth, cap;
	char *path;
	size_t pcap;
	/* rix_walk's callback (list_dir, collect_dir) */
	const char *mode;
	struct dstat *stat;
	struct idset *blobs;
	char *wpath;
	size_t wcap;
};

static void change(const char *mode, const char *path)
{
	if (g.quiet)
		return;
	if (g.json) {
		fputs("{\"message_type\":\"change\",\"path\":", stdout);
		put_json_string(path);
		fputs(",\"modifier\":", stdout);
		put_json_string(mode);
		fputs("}\n", stdout);
	} else {
		printf("%-5s%s\n", mode, path);
	}
}

static void stat_add(struct dstat *s, const rix_node *n)
{
	if (n->type == RIX_NODE_FILE)
		s->files++;
	else if (n->type == RIX_NODE_DIR)
		s->dirs++;
	else
		s->others++;
}

/* restic's addBlobs: a file's data blobs, a directory's tree. 0 or 1 (reported). */
static int add_blobs(struct idset *s, const rix_node *n)
{
	if (n == NULL)
		return 0;
	if (n->type == RIX_NODE_FILE) {
		for (size_t i = 0; i < n->content_len; i++)
			if (idset_add(s, RIX_BLOB_DATA, &n->content[i]) != 0)
				return 1;
	} else if (n->type == RIX_NODE_DIR && n->subtree != NULL) {
		return idset_add(s, RIX_BLOB_TREE, n->subtree);
	}
	return 0;
}

/* restic's sameContent (and reflect.DeepEqual of the lists): null differs from []. */
static bool same_content(const rix_node *a, const rix_node *b)
{
	if ((a->content == NULL) != (b->content == NULL) || a->content_len != b->content_len)
		return false;
	return a->content_len == 0 || memcmp(a->content, b->content, a->content_len * sizeof(*a->content)) == 0;
}

static bool same_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* restic's Node.Equals (the names are equal already). */
static bool node_equals(const rix_node *a, const rix_node *b)
{
	if (a->type != b->type || a->mode != b->mode || rix_time_cmp(&a->mtime, &b->mtime) != 0 ||
	    rix_time_cmp(&a->atime, &b->atime) != 0 || rix_time_cmp(&a->ctime, &b->ctime) != 0 || a->uid != b->uid ||
	    a->gid != b->gid || !same_str(a->user, b->user) || !same_str(a->group, b->group) || a->inode != b->inode ||
	    a->device_id != b->device_id || a->size != b->size || a->links != b->links || a->device != b->device ||
	    a->linktarget_len != b->linktarget_len ||
	    (a->linktarget_len > 0 && memcmp(a->linktarget, b->linktarget, a->linktarget_len) != 0) ||
	    !same_content(a, b) || !same_str(a->error, b->error))
		return false;
	if ((a->subtree == NULL) != (b->subtree == NULL) ||
	    (a->subtree != NULL && memcmp(a->subtree, b->subtree, sizeof(*a->subtree)) != 0))
		return false;
	if (a->nxattrs != b->nxattrs)
		return false;
	for (size_t i = 0; i < b->nxattrs; i++) {
		size_t k = 0;
		while (k < a->nxattrs && strcmp(a->xattrs[k].name, b->xattrs[i].name) != 0)
			k++;
		if (k == a->nxattrs || a->xattrs[k].len != b->xattrs[i].len ||
		    (b->xattrs[i].len > 0 && memcmp(a->xattrs[k].value, b->xattrs[i].value, b->xattrs[i].len) != 0))
			return false;
	}
	return true;
}

/* restic's printDir, one node: printed (a directory with '/'), counted, its blobs collected. */
static int list_node(void *arg, const char *path, size_t len, const rix_node *n)
{
	struct diff *d = arg;
	if (grow_buf(&d->wpath, &d->wcap, len + 2) != 0)
		return RIX_ENOMEM;
	memcpy(d->wpath, path, len);
	d->wpath[len] = '/';
	d->wpath[len + (n->type == RIX_NODE_DIR)] = '\0';
	change(d->mode, d->wpath);
	stat_add(d->stat, n);
	return add_blobs(d->blobs, n) != 0 ? RIX_ENOMEM : RIX_WALK_CONTINUE;
}

/* restic's collectDir, one node. */
static int collect_node(void *arg, const char *path, size_t len, const rix_node *n)
{
	(void)path;
	(void)len;
	struct diff *d = arg;
	return add_blobs(d->blobs, n) != 0 ? RIX_ENOMEM : RIX_WALK_CONTINUE;
}

/* Everything beneath directory tree id, at prefix: listed (fn = list_node) or collected. */
static int walk_dir(struct diff *d, rix_walk_fn fn, const char *mode, struct dstat *st, struct idset *blobs,
		    const char *prefix, const rix_id *id)
{
	d->mode = mode;
	d->stat = st;
	d->blobs = blobs;
	int rc = rix_walk(d->r, id, prefix, fn, d);
	if (rc == RIX_ENOMEM)
		return die("diff: out of memory");
	if (rc != 0)
		fprintf(stderr, "error: %s\n", rix_error_last());
	return 0;
}

/* The trees of two directories pushed; one that cannot be loaded is reported and skipped. */
static int push(struct diff *d, const rix_id *a, const rix_id *b, size_t plen)
{
	rix_tree *t1 = NULL, *t2 = NULL;
	int rc = rix_tree_load(&t1, d->r, a);
	if (rc == 0)
		rc = rix_tree_load(&t2, d->r, b);
	if (rc != 0) {
		rix_tree_free(t1);
		if (rc == RIX_ENOMEM)
			return die("diff: out of memory");
		fprintf(stderr, "error: %s\n", rix_error_last());
		return 0;
	}
	if (d->depth == d->cap) {
		size_t c = d->cap ? 2 * d->cap : 16;
		struct dframe *st = realloc(d->st, c * sizeof(*st));
		if (st == NULL) {
			rix_tree_free(t1);
			rix_tree_free(t2);
			return die("diff: out of memory");
		}
		d->st = st;
		d->cap = c;
	}
	d->st[d->depth++] = (struct dframe){ .t1 = t1, .t2 = t2, .plen = plen };
	return 0;
}

static int cmp_names(const rix_node *a, const rix_node *b)
{
	size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
	int c = memcmp(a->name, b->name, n);
	return c != 0 ? c : (a->name_len > b->name_len) - (a->name_len < b->name_len);
}

/* restic's diffTree, from the root trees down. 0, or 1 (reported). */
static int diff_trees(struct diff *d, const rix_id *a, const rix_id *b)
{
	if (grow_buf(&d->path, &d->pcap, 2) != 0)
		return 1;
	strcpy(d->path, "/");
	int rc = push(d, a, b, 1);
	while (rc == 0 && d->depth > 0) {
		struct dframe *f = &d->st[d->depth - 1];
		const rix_node *n1 = f->i1 < rix_tree_count(f->t1) ? rix_tree_node(f->t1, f->i1) : NULL;
		const rix_node *n2 = f->i2 < rix_tree_count(f->t2) ? rix_tree_node(f->t2, f->i2) : NULL;
		if (n1 == NULL && n2 == NULL) {
			rix_tree_free(f->t1);
			rix_tree_free(f->t2);
			d->depth--;
			continue;
		}
		int c = n1 == NULL ? 1 : n2 == NULL ? -1 : cmp_names(n1, n2);
		if (c > 0)
			n1 = NULL;
		if (c < 0)
			n2 = NULL;
		f->i1 += n1 != NULL;
		f->i2 += n2 != NULL;
		if (add_blobs(&d->before, n1) != 0 || add_blobs(&d->after, n2) != 0)
			return 1;
		const rix_node *n = n1 ? n1 : n2;
		size_t plen = f->plen, len = plen + n->name_len;
		if ((rc = grow_buf(&d->path, &d->pcap, len + 2)) != 0)
			break;
		memcpy(d->path + plen, n->name, n->name_len);
		d->path[len] = '\0';
		if (n1 != NULL && n2 != NULL) {
			char mod[4] = "";
			if (n1->type != n2->type)
				strcat(mod, "T");
			if (n2->type == RIX_NODE_DIR)
				strcpy(d->path + len, "/");
			if (n1->type == RIX_NODE_FILE && n2->type == RIX_NODE_FILE && !same_content(n1, n2)) {
				strcat(mod, "M");
				d->changed++;
			} else if (d->metadata && !node_equals(n1, n2)) {
				strcat(mod, "U");
			}
			if (mod[0] != '\0')
				change(mod, d->path);
			if (n1->type == RIX_NODE_DIR && n2->type == RIX_NODE_DIR && n1->subtree && n2->subtree) {
				if (memcmp(n1->subtree, n2->subtree, sizeof(rix_id)) == 0)
					rc = walk_dir(d, collect_node, "", NULL, &d->common, NULL, n1->subtree);
				else
					rc = push(d, n1->subtree, n2->subtree, len + 1);
			}
			continue;
		}
		const char *mode = n1 ? "-" : "+";
		struct dstat *st = n1 ? &d->removed : &d->added;
		if (n->type == RIX_NODE_DIR)
			strcpy(d->path + len, "/");
		change(mode, d->path);
		stat_add(st, n);
		if (n->type == RIX_NODE_DIR && n->subtree != NULL) {
			d->path[len] = '\0';
			rc = walk_dir(d, list_node, mode, st, n1 ? &d->before : &d->after, d->path, n->subtree);
		}
	}
	return rc;
}

/* restic 0.14's formatBytes (format.go: strictly above each power). */
static void format_bytes(char *o, size_t cap, unsigned long long c)
{
	double b = (double)c;
	if (c > (1ull << 40))
		snprintf(o, cap, "%.3f TiB", b / (double)(1ull << 40));
	else if (c > (1ull << 30))
		snprintf(o, cap, "%.3f GiB", b / (double)(1ull << 30));
	else if (c > (1ull << 20))
		snprintf(o, cap, "%.3f MiB", b / (double)(1ull << 20));
	else if (c > (1ull << 10))
		snprintf(o, cap, "%.3f KiB", b / 1024.0);
	else
		snprintf(o, cap, "%llu B", c);
}

/* restic's updateBlobs: the blobs of s that neither other nor common has. */
static void count_blobs(rix_repo *r, const struct idset *s, const struct idset *other, const struct idset *common,
			struct dstat *st)
{
	rix_master_index *mi = rix_repo_master_index(r);
	for (int t = RIX_BLOB_DATA; t <= RIX_BLOB_TREE; t++) {
		size_t n = s->m[t] != NULL ? rix_indexmap_count(s->m[t]) : 0;
		for (uint32_t i = 0; i < n; i++) {
			const rix_id *id;
			rix_loc unused;
			rix_indexmap_entry(&id, &unused, s->m[t], i);
			if (idset_has(other, t, id) || idset_has(common, t, id))
				continue;
			if (t == RIX_BLOB_DATA)
				st->data_blobs++;
			else
				st->tree_blobs++;
			uint32_t size;
			if (rix_master_index_size(&size, mi, t, id) != 0) {
				char hex[65];
				rix_id_to_hex(hex, id);
				fprintf(stderr, "unable to find blob size for <%s/%.8s>\n", t == RIX_BLOB_DATA ? "data" : "tree", hex);
				continue;
			}
			st->bytes += size;
		}
	}
}

static void stat_json(const char *key, const struct dstat *s)
{
	printf(",\"%s\":{\"files\":%llu,\"dirs\":%llu,\"others\":%llu,\"data_blobs\":%llu,\"tree_blobs\":%llu,\"bytes\":%llu}",
	       key, s->files, s->dirs, s->others, s->data_blobs, s->tree_blobs, s->bytes);
}

static int load_snapshot(rix_snapshot **sn, rix_repo *r, const char *arg)
{
	rix_id id;
	int rc = rix_snapshot_find_id(&id, r, arg);
	if (rc == 0)
		rc = rix_snapshot_load(sn, r, &id);
	return rc != 0 ? fail(rc) : 0;
}

int cmd_diff(int argc, char **argv)
{
	struct diff d = { 0 };
	const char *args[2];
	int nargs = 0, rc = 0;
	for (int i = 0; i < argc && rc == 0; i++) {
		if (strcmp(argv[i], "--metadata") == 0)
			d.metadata = true;
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			rc = die("diff: unknown flag %s", argv[i]);
		else if (nargs < 2)
			args[nargs++] = argv[i];
		else
			nargs++;
	}
	if (rc == 0 && nargs != 2)
		rc = die("specify two snapshot IDs");
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	rix_snapshot *sn1 = NULL, *sn2 = NULL;
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, false);
	if (rc == 0)
		rc = load_snapshot(&sn1, r, args[0]);
	if (rc == 0)
		rc = load_snapshot(&sn2, r, args[1]);
	if (rc == 0 && !g.json && !g.quiet) {
		char h1[65], h2[65];
		rix_id_to_hex(h1, &sn1->id);
		rix_id_to_hex(h2, &sn2->id);
		printf("comparing snapshot %.8s to %.8s:\n\n", h1, h2);
	}
	if (rc == 0)
		rc = load_index(r, NULL, NULL);
	d.r = r;
	if (rc == 0 && (idset_add(&d.before, RIX_BLOB_TREE, &sn1->tree) != 0 || idset_add(&d.after, RIX_BLOB_TREE, &sn2->tree) != 0))
		rc = 1;
	if (rc == 0)
		rc = diff_trees(&d, &sn1->tree, &sn2->tree);
	if (rc == 0) {
		count_blobs(r, &d.before, &d.after, &d.common, &d.removed);
		count_blobs(r, &d.after, &d.before, &d.common, &d.added);
		if (g.json) {
			fputs("{\"message_type\":\"statistics\",\"source_snapshot\":", stdout);
			put_json_string(args[0]);
			fputs(",\"target_snapshot\":", stdout);
			put_json_string(args[1]);
			printf(",\"changed_files\":%llu", d.changed);
			stat_json("added", &d.added);
			stat_json("removed", &d.removed);
			fputs("}\n", stdout);
		} else {
			char a[32], b[32];
			format_bytes(a, sizeof(a), d.added.bytes);
			format_bytes(b, sizeof(b), d.removed.bytes);
			printf("\nFiles:       %5llu new, %5llu removed, %5llu changed\n", d.added.files, d.removed.files, d.changed);
			printf("Dirs:        %5llu new, %5llu removed\n", d.added.dirs, d.removed.dirs);
			printf("Others:      %5llu new, %5llu removed\n", d.added.others, d.removed.others);
			printf("Data Blobs:  %5llu new, %5llu removed\n", d.added.data_blobs, d.removed.data_blobs);
			printf("Tree Blobs:  %5llu new, %5llu removed\n", d.added.tree_blobs, d.removed.tree_blobs);
			printf("  Added:   %-5s\n  Removed: %-5s\n", a, b);
		}
	}
	while (d.depth > 0) {
		d.depth--;
		rix_tree_free(d.st[d.depth].t1);
		rix_tree_free(d.st[d.depth].t2);
	}
	free(d.st);
	free(d.path);
	free(d.wpath);
	idset_free(&d.before);
	idset_free(&d.after);
	idset_free(&d.common);
	rix_snapshot_free(sn1);
	rix_snapshot_free(sn2);
	if (r != NULL)
		close_repo(r, lock);
	return rc;
}
