/*
 * cli/cmd_find.c — rix find PATTERN...: the entries of snapshots whose path matches a pattern
 * (rix/pattern.h, restic's rules), or with --blob / --tree the files that use a data blob and the
 * directories that are a tree, or with --pack the files that use a blob of the given packs, as
 * restic 0.14's find prints them:
 *
 *   text     "Found matching entries in snapshot 1a2b3c4d from 2022-08-01 10:00:00" (not with -q),
 *            a path a line (-l: restic's long format), a blank line between snapshots;
 *            --blob: "Found blob ID\n ... in file PATH\n     (tree ID)\n ... in snapshot 1a2b3c4d (TIME)"
 *   --json   [{"matches":[node...],"hits":N,"snapshot":"ID"},...]; --blob / --tree: [{"object_type":
 *            "blob","id":...,"path":...,"parent_tree":...,"snapshot":...,"time":...},...]
 *   --show-pack-id (with --blob, --tree, --pack), after the rest: each ID searched, "Object belongs
 *            to pack ID\n ... Pack 1a2b3c4d: <Blob (data) ...>", "Object 1a2b3c4d not found in the
 *            index" or "Note: cannot find pack for object '...', unable to parse ID: ..."
 *
 * The IDs searched are restic's sets of strings: each argument once (after -i lowers its case),
 * matching an ID written whole or as its first 8 digits; a short --blob argument becomes the
 * whole ID of the first blob it matches (restic then matches no other blob with those digits).
 * --pack: the packs of the repository named by an argument (whole or 8 digits) have their
 * headers read (rix_repo_read_pack_header) and every blob they hold is searched; packs not in the
 * repository are looked up in the index, with restic's warning; arguments naming no pack fail
 * with restic's "unable to find pack(s): [...]" before any snapshot is searched.
 *
 * The walk is restic's walker's, with its memory of ignored trees shared by every snapshot
 * searched: a subtree in which nothing matched is not entered again (in a later snapshot, or
 * elsewhere in the same one), as restic does. An explicit stack: any depth.
 * Snapshots: -s/--snapshot IDs (or latest), else every one that passes --host / --tag / --path,
 * oldest first (restic's order there is the order its parallel loads finish).
 * --oldest / --newest: mtimes from, to (restic's formats without a zone name: 2006-01-02,
 * 2006-01-02 15:04[:05][ -0700], 02.01.2006 [15:04[:05][ -0700]], local time).
 * --show-pack-id lists the IDs in the order given (--pack: each pack's blobs in pack order),
 * where restic's order is its map's, which changes from run to run.
 * A shared lock. Exit status: 0; 1 a usage error, a bad pattern time, packs not found; 11 the lock.
 */
#include <ctype.h>

#include "cli.h"

struct fframe {
	rix_tree *t;
	rix_id id;
	size_t next, path_len;
	bool all_ignored;
};

/* An ID argument of --blob / --tree: a key of restic's blobIDs / treeIDs. */
struct idarg {
	const char *key; /* the argument, or full once a short --blob argument matched */
	char full[65];
};

struct find {
	rix_repo *r;
	char **pats;
	int npats;
	struct idarg *ids; /* --blob / --tree: the arguments, each once */
	size_t nids;
	struct idset packed; /* --pack: the blobs of the packs (any type, as restic's strings) */
	rix_id *plist;       /* the same, in the order found */
	size_t nplist, capplist;
	rix_patterns *ps; /* pats compiled once (with icase: ignoring case) */
	int err;          /* a match that failed (out of memory): the command fails */
	bool icase, long_format, blob, tree, pack, show_pack, has_oldest, has_newest;
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

/*
 * Whether an ID argument names id, as restic's map lookups: its whole hex or its first 8 digits
 * (restic's Str). expand (--blob): a short argument that matches becomes the whole ID.
 */
static bool names_id(struct find *f, const rix_id *id, bool expand)
{
	if (f->pack)
		return idset_has(&f->packed, RIX_BLOB_DATA, id);
	char hex[65];
	rix_id_to_hex(hex, id);
	for (size_t i = 0; i < f->nids; i++)
		if (strcmp(f->ids[i].key, hex) == 0)
			return true;
	for (size_t i = 0; i < f->nids; i++)
		if (strlen(f->ids[i].key) == 8 && strncmp(f->ids[i].key, hex, 8) == 0) {
			if (expand) {
				memcpy(f->ids[i].full, hex, sizeof(hex));
				f->ids[i].key = f->ids[i].full;
			}
			return true;
		}
	return false;
}

/* The walk callback, restic's: ignore (*ign), skip (return 1), stop the snapshot (return 2). */
static int visit(struct find *f, const rix_id *parent, const char *path, const rix_node *n, bool *ign)
{
	*ign = false;
	if (f->blob || f->tree) {
		if (n->type == RIX_NODE_DIR && f->tree && n->subtree != NULL && names_id(f, n->subtree, false)) {
			print_object(f, "tree", n->subtree, path, NULL);
			if (++f->items_found >= f->nids && !f->blob) {
				*ign = true;
				return 2;
			}
		}
		if (n->type == RIX_NODE_FILE && f->blob)
			for (size_t i = 0; i < n->content_len; i++)
				if (names_id(f, &n->content[i], true))
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

/* ---- --pack: the blobs of packs (restic's packsToBlobs) ---------------------------------------- */

/* A --pack argument still to find (restic's packIDs): its text, and the ID it names. */
struct packarg {
	char *s;
	int form; /* 2: a whole ID (id), 1: 8 digits (id.b[0..4)), 0: neither (never found) */
	rix_id id;
};

struct packs {
	struct find *f;
	struct packarg *v;
	size_t n, cap;
	rix_id *inidx; /* packs whose blobs the index gave, each once */
	size_t ninidx, capinidx;
	int rc;
};

/* The form of s as restic compares it with id.String() and id.Str(): lowercase hex only. */
static int id_form(const char *s, rix_id *id)
{
	size_t n = strlen(s);
	if (n != 64 && n != 8)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	char hex[65];
	memset(hex, '0', 64);
	memcpy(hex, s, n);
	hex[64] = '\0';
	if (rix_id_from_hex(id, hex, 64) != 0)
		return 0;
	return n == 64 ? 2 : 1;
}

/* The argument equal to s (its form), or -1. */
static long packarg_find(const struct packs *p, int form, const rix_id *id)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].form == form && memcmp(p->v[i].id.b, id->b, form == 2 ? RIX_ID_SIZE : 4) == 0)
			return (long)i;
	return -1;
}

static void packarg_drop(struct packs *p, size_t i)
{
	free(p->v[i].s);
	p->v[i] = p->v[--p->n];
}

/* Adds s (a copy) unless it is there. 0, or 1 (reported). */
static int packarg_add(struct packs *p, const char *s)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].s, s) == 0)
			return 0;
	if (p->n == p->cap) {
		size_t c = p->cap ? 2 * p->cap : 8;
		struct packarg *v = realloc(p->v, c * sizeof(*v));
		if (v == NULL)
			return die("find: out of memory");
		p->v = v;
		p->cap = c;
	}
	struct packarg *a = &p->v[p->n];
	if ((a->s = strdup(s)) == NULL)
		return die("find: out of memory");
	a->form = id_form(s, &a->id);
	p->n++;
	return 0;
}

/* Blob id of a pack searched (restic adds every blob's ID, whatever its type). 0, or 1. */
static int packed_add(struct find *f, const rix_id *id)
{
	if (idset_has(&f->packed, RIX_BLOB_DATA, id))
		return 0;
	if (f->nplist == f->capplist) {
		size_t c = f->capplist ? 2 * f->capplist : 64;
		rix_id *v = realloc(f->plist, c * sizeof(*v));
		if (v == NULL)
			return die("find: out of memory");
		f->plist = v;
		f->capplist = c;
	}
	f->plist[f->nplist++] = *id;
	return idset_add(&f->packed, RIX_BLOB_DATA, id);
}

/* restic's indexPacksToBlobs: each index entry of a pack still sought. */
static int index_entry(void *payload, const rix_packed_blob *pb)
{
	struct packs *p = payload;
	bool match = packarg_find(p, 2, &pb->pack_id) >= 0;
	long k;
	if (!match && (k = packarg_find(p, 1, &pb->pack_id)) >= 0) {
		/* the short argument becomes the whole ID */
		char hex[65];
		rix_id_to_hex(hex, &pb->pack_id);
		packarg_drop(p, (size_t)k);
		if ((p->rc = packarg_add(p, hex)) != 0)
			return 1;
		match = true;
	}
	if (!match)
		return 0;
	if ((p->rc = packed_add(p->f, &pb->id)) != 0)
		return 1;
	for (size_t i = 0; i < p->ninidx; i++)
		if (memcmp(p->inidx[i].b, pb->pack_id.b, RIX_ID_SIZE) == 0)
			return 0;
	if (p->ninidx == p->capinidx) {
		size_t c = p->capinidx ? 2 * p->capinidx : 8;
		rix_id *v = realloc(p->inidx, c * sizeof(*v));
		if (v == NULL) {
			p->rc = die("find: out of memory");
			return 1;
		}
		p->inidx = v;
		p->capinidx = c;
	}
	p->inidx[p->ninidx++] = pb->pack_id;
	return 0;
}

static int strptr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct packarg *)a)->s, ((const struct packarg *)b)->s);
}

/* The blobs of the packs the arguments name into f->packed. 0, or 1 (reported). */
static int packs_to_blobs(struct find *f)
{
	struct packs p = { .f = f };
	rix_id *ids = NULL;
	size_t nids = 0;
	int rc = 0;
	for (int i = 0; i < f->npats && rc == 0; i++)
		rc = packarg_add(&p, f->pats[i]);
	if (rc == 0) {
		int lrc = rix_repo_list_ids(&ids, &nids, f->r, RIX_FILE_PACK);
		if (lrc != 0)
			rc = fail(lrc);
	}
	bool all = false;
	for (size_t i = 0; rc == 0 && i < nids && !all; i++) {
		long k = packarg_find(&p, 2, &ids[i]);
		if (k < 0)
			k = packarg_find(&p, 1, &ids[i]);
		if (k < 0)
			continue;
		packarg_drop(&p, (size_t)k);
		rix_blob *blobs;
		size_t nb;
		int hrc = rix_repo_read_pack_header(&blobs, &nb, f->r, &ids[i]);
		if (hrc != 0) {
			rc = fail(hrc);
			break;
		}
		for (size_t b = 0; b < nb && rc == 0; b++)
			rc = packed_add(f, &blobs[b].id);
		rix_free(blobs);
		all = p.n == 0;
	}
	rix_free(ids);
	if (rc == 0 && !all) {
		(void)rix_master_index_foreach(rix_repo_master_index(f->r), index_entry, &p);
		rc = p.rc;
		for (size_t i = 0; rc == 0 && i < p.ninidx; i++) {
			long k = packarg_find(&p, 2, &p.inidx[i]);
			if (k >= 0)
				packarg_drop(&p, (size_t)k);
		}
		if (rc == 0 && p.ninidx > 0) {
			fputs("some pack files are missing from the repository, getting their blobs from the repository index: [",
			      stderr);
			for (size_t i = 0; i < p.ninidx; i++) {
				char hex[65];
				rix_id_to_hex(hex, &p.inidx[i]);
				fprintf(stderr, "%s%s", i ? " " : "", hex);
			}
			fputs("]\n\n", stderr);
		}
	}
	if (rc == 0 && p.n > 0) {
		qsort(p.v, p.n, sizeof(*p.v), strptr_cmp);
		fputs("rix: unable to find pack(s): [", stderr);
		for (size_t i = 0; i < p.n; i++)
			fprintf(stderr, "%s%s", i ? " " : "", p.v[i].s);
		fputs("]\n", stderr);
		rc = EXIT_FAIL;
	}
	for (size_t i = 0; i < p.n; i++)
		free(p.v[i].s);
	free(p.v);
	free(p.inidx);
	return rc;
}

/* ---- --show-pack-id (restic's findObjectsPacks) ------------------------------------------------ */

/* Go's %#U of a byte as a rune: U+0067 'g' (the character only when strconv.IsPrint). */
static void go_rune(char *out, size_t cap, unsigned char c)
{
	bool print = (c >= 0x20 && c <= 0x7e) || (c >= 0xa1 && c != 0xad);
	if (!print)
		snprintf(out, cap, "U+%04X", c);
	else if (c < 0x80)
		snprintf(out, cap, "U+%04X '%c'", c, c);
	else
		snprintf(out, cap, "U+%04X '%c%c'", c, 0xc0 | (c >> 6), 0x80 | (c & 0x3f));
}

static bool hex_digit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* restic's ParseID of s: 0, or 1 with Go's error text in msg. */
static int go_parse_id(rix_id *id, const char *s, char *msg, size_t cap)
{
	size_t n = strlen(s), j;
	char r[32];
	for (j = 1; j < n; j += 2) {
		const char *bad = !hex_digit(s[j - 1]) ? &s[j - 1] : !hex_digit(s[j]) ? &s[j] : NULL;
		if (bad != NULL) {
			go_rune(r, sizeof(r), (unsigned char)*bad);
			snprintf(msg, cap, "hex.DecodeString: encoding/hex: invalid byte: %s", r);
			return 1;
		}
	}
	if (n % 2 == 1) {
		if (!hex_digit(s[n - 1])) {
			go_rune(r, sizeof(r), (unsigned char)s[n - 1]);
			snprintf(msg, cap, "hex.DecodeString: encoding/hex: invalid byte: %s", r);
		} else {
			snprintf(msg, cap, "hex.DecodeString: encoding/hex: odd length hex string");
		}
		return 1;
	}
	if (n != 64 || rix_id_from_hex(id, s, 64) != 0) {
		snprintf(msg, cap, "invalid length for hash");
		return 1;
	}
	return 0;
}

/* restic's ID.Str(): the first 8 digits, or "[null]" for the null ID. */
static const char *go_str(char out[9], const rix_id *id)
{
	static const rix_id null;
	if (memcmp(id->b, null.b, RIX_ID_SIZE) == 0)
		return "[null]";
	char hex[65];
	rix_id_to_hex(hex, id);
	memcpy(out, hex, 8);
	out[8] = '\0';
	return out;
}

static void show_pack(struct find *f, const char *key, rix_blob_type t)
{
	rix_id id;
	char msg[128];
	if (go_parse_id(&id, key, msg, sizeof(msg)) != 0) {
		printf("Note: cannot find pack for object '%s', unable to parse ID: %s\n", key, msg);
		return;
	}
	char s1[9], s2[9], pack[65];
	rix_packed_blob pb;
	if (rix_master_index_lookup_all(&pb, 1, rix_repo_master_index(f->r), t, &id) == 0) {
		printf("Object %s not found in the index\n", go_str(s1, &id));
		return;
	}
	rix_id_to_hex(pack, &pb.pack_id);
	printf("Object belongs to pack %s\n ... Pack %s: <Blob (%s) %s, offset %u, length %u, uncompressed length %u>\n",
	       pack, go_str(s1, &pb.pack_id), t == RIX_BLOB_TREE ? "tree" : "data", go_str(s2, &id), pb.offset, pb.length,
	       pb.uncompressed_length);
}

static void show_packs(struct find *f)
{
	char hex[65];
	if (f->pack) {
		for (size_t i = 0; i < f->nplist; i++) {
			rix_id_to_hex(hex, &f->plist[i]);
			show_pack(f, hex, RIX_BLOB_DATA);
		}
		return;
	}
	for (size_t i = 0; i < f->nids; i++)
		show_pack(f, f->ids[i].key, f->tree ? RIX_BLOB_TREE : RIX_BLOB_DATA);
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
		else if (strcmp(argv[i], "--pack") == 0)
			f.pack = true;
		else if (strcmp(argv[i], "--show-pack-id") == 0)
			f.show_pack = true;
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
	if (rc == 0 && ((f.blob && f.tree) || (f.blob && f.pack) || (f.tree && f.pack)))
		rc = die("cannot have several ID types");
	if (f.pack)
		f.blob = true; /* restic searches the packs' blobs as --blob does */
	/* restic's sets of IDs: the arguments (lowered by -i), each once */
	if (rc == 0 && (f.blob || f.tree)) {
		f.ids = calloc((size_t)f.npats + 1, sizeof(*f.ids));
		if (f.ids == NULL)
			rc = die("find: out of memory");
		for (int i = 0; rc == 0 && i < f.npats; i++) {
			if (f.icase)
				for (char *c = f.pats[i]; *c != '\0'; c++)
					*c = (char)tolower((unsigned char)*c);
			size_t k = 0;
			while (k < f.nids && strcmp(f.ids[k].key, f.pats[i]) != 0)
				k++;
			if (k == f.nids)
				f.ids[f.nids++].key = f.pats[i];
		}
	}
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
		rc = load_index(r, NULL, NULL);
	f.r = r;
	if (rc == 0 && f.pack)
		rc = packs_to_blobs(&f);
	if (rc == 0)
		rc = select_snapshots(&sl, &bad, r, &ff.f, snaps, nsnaps);
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
	if (rc == 0 && f.show_pack && (f.blob || f.tree))
		show_packs(&f);
	free(f.st);
	free(f.path);
	free(f.ids);
	free(f.plist);
	idset_free(&f.packed);
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
