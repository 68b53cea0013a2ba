/*
 * backup/archiver.c — the backup (rix/archiver.h): walk, read, chunk, save, trees bottom-up,
 * flush, snapshot.
 *
 *   targets ──> a trie of their path components ("/usr/share/doc" is usr -> share -> doc)
 *   save(entry):  file      read in 256 KiB pieces straight into the chunk buffer,
 *                           rix_chunker_scan, each chunk -> save_blob
 *                 directory its entries in byte order of their names, each saved, then the
 *                           tree blob (rix_tree_enc) -> save_blob; its ID is the subtree
 *                 other     the node alone (symlink target, device number)
 *   trie nodes that are not targets become directory nodes with their own metadata (restic
 *   does the same for a target's ancestors); the trie's root is the snapshot's tree.
 *
 *   threads:  the caller walks (lstat, scandir, parent lookups) and queues files (struct job);
 *             read_concurrency workers read them. A directory in flight (struct dir) counts
 *             its files and subdirectories not done; the thread that finishes the last saves
 *             its tree and releases the directory above. A trie node waits (drain) for the
 *             targets under it before its own tree.
 *   then rix_repo_flush, then the snapshot file: nothing names a blob before it is indexed.
 *   progress (opt.progress): a scanner thread counts what there is to do, a reporter thread
 *             tells how far it is (backup_progress.c).
 *
 * Node metadata follows restic 0.14 (node.go's fillExtra): size and links for files, links
 * for symlinks and devices, the device number for devices, inode and device_id for all, user
 * and group names looked up (cached), xattrs in the kernel's order, atime = mtime unless
 * with_atime. Times are written in the local zone, as restic writes them.
 */
#include <dirent.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/archiver.h"
#include "rix/pattern.h"
#include "rix/chunker.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/snapshot.h"
#include "rix/tree.h"
#include "rix/walker.h"
#include "rix/master_index.h"
#include "snapshot_internal.h"
#include "archiver_internal.h"

/* A warning that leaves nothing out (not counted as an error); one at a time, whichever thread. */
static void notice(struct arch *a, const char *path, const char *msg)
{
	pthread_mutex_lock(&a->cbmu); /* callbacks one at a time, not under the queue's lock */
	if (a->opt.warn != NULL)
		a->opt.warn(a->opt.payload, path, msg);
	pthread_mutex_unlock(&a->cbmu);
}

static void warn(struct arch *a, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn(struct arch *a, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ADD(a, errors, 1);
	pthread_mutex_lock(&a->cbmu); /* one callback at a time, not under the queue's lock */
	if (a->opt.warn != NULL)
		a->opt.warn(a->opt.payload, path, msg);
	pthread_mutex_unlock(&a->cbmu);
}

static void names_free(struct names_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].name);
	free(c->v);
}

/* The name of uid or gid id ("" when it has none, or when memory runs out). */
static const char *cached_name(struct names_cache *c, uint32_t id, int group)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].id == id)
			return c->v[i].name;
	char buf[4096];
	const char *name = "";
	if (group) {
		struct group g, *gp = NULL;
		if (getgrgid_r(id, &g, buf, sizeof(buf), &gp) == 0 && gp != NULL)
			name = gp->gr_name;
	} else {
		struct passwd p, *pp = NULL;
		if (getpwuid_r(id, &p, buf, sizeof(buf), &pp) == 0 && pp != NULL)
			name = pp->pw_name;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		void *v = realloc(c->v, cap * sizeof(*c->v));
		if (v == NULL)
			return "";
		c->v = v;
		c->cap = cap;
	}
	char *copy = strdup(name);
	if (copy == NULL)
		return "";
	c->v[c->n].id = id;
	c->v[c->n].name = copy;
	return c->v[c->n++].name;
}

static rix_time to_time(struct timespec t)
{
	return rix_time_local(t.tv_sec, (uint32_t)t.tv_nsec);
}

struct timespec rix__arch_now_mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t;
}

double rix__arch_since(const struct timespec *t0)
{
	struct timespec t = rix__arch_now_mono();
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Bytes of the blobs stored now: their plaintext, and what they take in their packs (0 in a dry
 * run, which stores nothing). */
struct sizes {
	uint64_t plain, packed;
};
#define NO_SIZES ((struct sizes){ 0, 0 })

/* A file or directory done (opt.item): one call at a time, a directory's path ending in '/'. */
static void item_done(struct arch *a, const char *path, bool dir, rix_backup_action act, const struct timespec *start,
		      struct sizes data, struct sizes meta)
{
	if (a->opt.item == NULL)
		return;
	size_t pl = strlen(path);
	char small[4096], *p = small;
	if (pl + 2 > sizeof(small) && (p = malloc(pl + 2)) == NULL)
		return; /* out of memory: one verbose line less */
	memcpy(p, path, pl);
	if (dir && (pl == 0 || path[pl - 1] != '/'))
		p[pl++] = '/';
	p[pl] = '\0';
	rix_backup_item it = { p, dir, act, act == RIX_BACKUP_UNCHANGED || start == NULL ? 0 : rix__arch_since(start), data.plain,
			       meta.plain, data.packed, meta.packed };
	pthread_mutex_lock(&a->cbmu);
	a->opt.item(a->opt.payload, &it);
	pthread_mutex_unlock(&a->cbmu);
	if (p != small)
		free(p);
}

/* What a node points into while its tree is encoded. */
struct held {
	rix_node n;
	char *name;
	char *target; /* symlinks only */
	rix_xattr *xa;
	char *xbuf; /* names and values */
	rix_id *content;
	size_t ncontent, content_cap;
	rix_id subtree;
	int left_out; /* a worker could not read the file (warned) */
	struct sizes added; /* a file: bytes of the data blobs stored for it now */
};

static void held_free(struct held *h)
{
	free(h->name);
	free(h->target);
	free(h->xa);
	free(h->xbuf);
	free(h->content);
}

/* Whether blob (t, id) is new to this dry run (recorded now): 1, 0 (seen), or RIX_ENOMEM. */
static int dry_first(struct arch *a, rix_blob_type t, const rix_id *id)
{
	struct dry_shard *sh = &a->dry[id->b[0]];
	uint64_t h;
	memcpy(&h, id->b + 1, sizeof(h)); /* SHA-256: uniform already */
	int rc = 1;
	pthread_mutex_lock(&sh->mu);
	if (2 * (sh->n + 1) > sh->cap) { /* at most half full */
		size_t cap = sh->cap ? sh->cap * 2 : 64;
		struct dry_entry *v = calloc(cap, sizeof(*v));
		if (v == NULL) {
			pthread_mutex_unlock(&sh->mu);
			return rix_error_set(RIX_ENOMEM, "backup: out of memory");
		}
		for (size_t i = 0; i < sh->cap; i++) {
			if (!sh->v[i].used)
				continue;
			uint64_t hh;
			memcpy(&hh, sh->v[i].id.b + 1, sizeof(hh));
			size_t k = (size_t)hh & (cap - 1);
			while (v[k].used)
				k = (k + 1) & (cap - 1);
			v[k] = sh->v[i];
		}
		free(sh->v);
		sh->v = v;
		sh->cap = cap;
	}
	size_t k = (size_t)h & (sh->cap - 1);
	for (; sh->v[k].used; k = (k + 1) & (sh->cap - 1))
		if (sh->v[k].used == 1 + (int)t && memcmp(sh->v[k].id.b, id->b, RIX_ID_SIZE) == 0) {
			rc = 0;
			break;
		}
	if (rc == 1) {
		sh->v[k].id = *id;
		sh->v[k].used = (uint8_t)(1 + (int)t);
		sh->n++;
	}
	pthread_mutex_unlock(&sh->mu);
	return rc;
}

/* Saves a blob (a dry run: looks it up); *stored_out (may be NULL) its plaintext and stored bytes
 * when it is new here, else 0 (stored: 0 in a dry run too, which cannot know them). */
static int save(struct arch *a, rix_blob_type t, const void *data, size_t n, rix_id *id, struct sizes *stored_out)
{
	bool stored = false;
	uint32_t packed = 0;
	int rc = 0;
	if (a->opt.dry_run) {
		rix_sha256(id, data, n);
		if (!rix_master_index_has(rix_repo_master_index(a->r), t, id)) {
			rc = dry_first(a, t, id);
			stored = rc == 1;
			rc = rc < 0 ? rc : 0;
		}
	} else {
		rc = rix_repo_save_blob_sized(id, &packed, a->r, t, data, n);
		stored = packed > 0;
	}
	if (rc == 0 && stored) {
		if (t == RIX_BLOB_DATA) {
			ADD(a, data_blobs, 1);
			ADD(a, data_added, n);
		} else {
			ADD(a, tree_blobs, 1);
			ADD(a, tree_added, n);
		}
		ADD(a, added_packed, packed);
	}
	if (stored_out != NULL)
		*stored_out = rc == 0 && stored ? (struct sizes){ n, packed } : NO_SIZES;
	return rc;
}

static int push_content(struct held *h, const rix_id *id)
{
	if (h->ncontent == h->content_cap) {
		size_t c = h->content_cap ? h->content_cap * 2 : 8;
		rix_id *v = realloc(h->content, c * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "backup: out of memory");
		h->content = v;
		h->content_cap = c;
	}
	h->content[h->ncontent++] = *id;
	return 0;
}

static int save_fd(struct arch *a, struct worker *w, const char *path, struct held *h, int fd);

/* A file's chunks: 1 = it could not be read (warned, left out); 0; a repository error. */
static int save_file(struct arch *a, struct worker *w, const char *path, struct held *h)
{
	/* O_NONBLOCK: a FIFO put in the file's place since it was listed must not block the open. */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME | O_NONBLOCK);
	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		warn(a, path, "open: %s", strerror(errno));
		return 1;
	}
	struct stat st;
	int fl = fcntl(fd, F_GETFL); /* O_NONBLOCK off again, O_NOATIME kept */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		/* as restic: not read */
		warn(a, path, "not a regular file any more (it changed type since it was listed), left out");
		close(fd);
		return 1;
	}
	int rc = save_fd(a, w, path, h, fd);
	/* Changed since it was listed (size, times, another file): the bytes read are what the
	 * snapshot holds (its size says so); said, not counted as an error (it was read). */
	struct stat now;
	if (rc == 0 && (fstat(fd, &now) != 0 || (uint64_t)now.st_size != h->n.size || now.st_ino != (ino_t)h->n.inode ||
			now.st_mtim.tv_sec != h->n.mtime.sec || now.st_mtim.tv_nsec != (long)h->n.mtime.nsec ||
			now.st_ctim.tv_sec != h->n.ctime.sec || now.st_ctim.tv_nsec != (long)h->n.ctime.nsec)) {
		char msg[128];
		snprintf(msg, sizeof(msg), "changed while it was read: the snapshot holds the %llu bytes read",
			 (unsigned long long)h->n.size);
		notice(a, path, msg);
	}
	close(fd);
	return rc;
}

/* The chunks of what fd holds (read to its end). 1: a read failed (warned); 0; an error. */
static int save_fd(struct arch *a, struct worker *w, const char *path, struct held *h, int fd)
{
	/*
	 * Bytes are read straight into the chunk buffer: w->chunk[0..clen) holds the current chunk's
	 * bytes, [0..scanned) of them seen by the chunker. After a cut only what was read past it
	 * (less than one READ_PIECE) moves to the front.
	 */
	rix_chunker_reset(w->ch);
	size_t clen = 0, scanned = 0;
	int rc = 0;
	uint64_t total = 0;
	for (;;) {
		if (scanned == clen) {
			size_t room = RIX_CHUNK_MAX - clen; /* > 0: a chunk is cut at RIX_CHUNK_MAX */
			ssize_t got = read(fd, w->chunk + clen, room < READ_PIECE ? room : READ_PIECE);
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				warn(a, path, "read: %s", strerror(errno));
				return 1;
			}
			if (got == 0)
				break;
			total += (uint64_t)got;
			clen += (size_t)got;
			ADD(a, bytes_done, got); /* progress within a file, one add per read */
		}
		bool cut;
		scanned += rix_chunker_scan(&cut, w->ch, w->chunk + scanned, clen - scanned);
		if (cut) {
			rix_id id;
			struct sizes st;
			if ((rc = save(a, RIX_BLOB_DATA, w->chunk, scanned, &id, &st)) != 0 || (rc = push_content(h, &id)) != 0)
				return rc;
			h->added.plain += st.plain;
			h->added.packed += st.packed;
			memmove(w->chunk, w->chunk + scanned, clen - scanned);
			clen -= scanned;
			scanned = 0;
		}
	}
	if (clen > 0) {
		rix_id id;
		struct sizes st;
		if ((rc = save(a, RIX_BLOB_DATA, w->chunk, clen, &id, &st)) != 0 || (rc = push_content(h, &id)) != 0)
			return rc;
		h->added.plain += st.plain;
		h->added.packed += st.packed;
	}
	/* What was read is what the snapshot records (a file that changed meanwhile: its bytes now). */
	h->n.size = total;
	ADD(a, bytes, total);
	ADD(a, bytes_total, total);
	h->n.content = h->content;
	h->n.content_len = h->ncontent;
	return 0;
}

struct tnode;
static int save_virtual(struct arch *a, struct tnode *t, rix_id *tree, const rix_id *parent, struct sizes *stored_len);
struct held;
static int save_tree(struct arch *a, struct held *held, size_t n, rix_id *tree, struct sizes *stored_len);
static int abs_clean(char *out, size_t cap, const char *cwd, const char *path);

/* ---- excludes ---------------------------------------------------------------------------- */

static void fail_with(struct arch *a, int rc);

/* Whether the clean absolute path is excluded (out of memory: the backup fails, the entry is left
 * out, so that nothing excluded is ever stored by a failed match). */
int rix__arch_is_excluded(struct arch *a, const char *path)
{
	bool m = false;
	if (rix_patterns_match(a->excl, &m, NULL, path) != 0) {
		fail_with(a, RIX_ENOMEM);
		return 1;
	}
	return m;
}

/* Whether directory path holds file name (whose content starts with text, when given). */
static int holds(const char *path, const char *name, const char *text)
{
	char f[8192];
	snprintf(f, sizeof(f), "%s/%s", path, name);
	if (text == NULL)
		return access(f, F_OK) == 0;
	FILE *fp = fopen(f, "rb");
	if (fp == NULL)
		return 0;
	size_t tl = strlen(text);
	char buf[256];
	size_t got = tl < sizeof(buf) ? fread(buf, 1, tl, fp) : 0;
	fclose(fp);
	return tl < sizeof(buf) && got == tl && memcmp(buf, text, tl) == 0;
}

/*
 * A directory marked to be left out (restic keeps it and its marker file, nothing else): the
 * marker's name into only[cap], 1; else 0.
 */
int rix__arch_dir_marked(struct arch *a, const char *path, char *only, size_t cap)
{
	if (a->opt.exclude_caches && holds(path, "CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55")) {
		snprintf(only, cap, "CACHEDIR.TAG");
		return 1;
	}
	for (size_t i = 0; i < a->opt.nif_present; i++) {
		char spec[1024];
		snprintf(spec, sizeof(spec), "%s", a->opt.if_present[i]);
		char *colon = strchr(spec, ':');
		if (colon != NULL)
			*colon = '\0';
		if (holds(path, spec, colon != NULL ? colon + 1 : NULL)) {
			snprintf(only, cap, "%s", spec);
			return 1;
		}
	}
	return 0;
}

/* A symlink's target into h (1: it cannot be read, warned). Out of line: see marked_only. */
static __attribute__((noinline)) int read_link(struct arch *a, const char *path, struct held *h)
{
	char target[PATH_MAX];
	ssize_t tl = readlink(path, target, sizeof(target));
	if (tl < 0 || (size_t)tl >= sizeof(target)) {
		warn(a, path, "readlink: %s", tl < 0 ? strerror(errno) : "target too long");
		return 1;
	}
	if ((h->target = malloc((size_t)tl + 1)) == NULL)
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	memcpy(h->target, target, (size_t)tl);
	h->n.linktarget = h->target;
	h->n.linktarget_len = (size_t)tl;
	return 0;
}

/*
 * A marked directory's one entry to keep, malloc'd into *only (NULL: not marked). Out of line,
 * as the walk's other buffers: the walk recurses once per directory level, and a deep tree must
 * not exhaust the stack with them.
 */
static __attribute__((noinline)) int marked_only(char **only, struct arch *a, const char *path)
{
	char name[1024];
	*only = NULL;
	if (rix__arch_dir_marked(a, path, name, sizeof(name)) && (*only = strdup(name)) == NULL)
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	return 0;
}

/* Whether child is excluded by the excludes (the cleaned path's buffer out of the walk's frames). */
static __attribute__((noinline)) bool entry_excluded(struct arch *a, const char *child)
{
	char absbuf[8192];
	return a->excl != NULL && abs_clean(absbuf, sizeof(absbuf), a->cwd, child) == 0 && rix__arch_is_excluded(a, absbuf);
}

/* The parent's tree id, decoded (NULL when there is none or it cannot be read: warned). */
static rix_tree *parent_tree(struct arch *a, const char *path, const rix_id *id)
{
	if (id == NULL)
		return NULL;
	rix_tree *t = NULL;
	if (rix_tree_load(&t, a->r, id) != 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "the parent snapshot's tree cannot be read (%s): every file is read", rix_error_last());
		notice(a, path, msg);
	}
	return t;
}

/* Whether every data blob of node n is in the index: else its file is read again (restic's rule),
 * so a snapshot never carries forward blobs the repository lost. */
static int all_indexed(struct arch *a, const rix_node *n)
{
	rix_master_index *mi = rix_repo_master_index(a->r);
	for (size_t i = 0; i < n->content_len; i++)
		if (!rix_master_index_has(mi, RIX_BLOB_DATA, &n->content[i]))
			return 0;
	return 1;
}

static int same_time(const rix_time *x, const rix_time *y)
{
	return x->sec == y->sec && x->nsec == y->nsec;
}

static int read_xattrs(struct held *h, const char *path)
{
	ssize_t ll = llistxattr(path, NULL, 0);
	if (ll <= 0)
		return 0;
	char *list = malloc((size_t)ll);
	if (list == NULL)
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	ll = llistxattr(path, list, (size_t)ll);
	size_t count = 0, bytes = 0;
	for (ssize_t p = 0; ll > 0 && p < ll; p += (ssize_t)strlen(list + p) + 1) {
		ssize_t vl = lgetxattr(path, list + p, NULL, 0);
		count++;
		bytes += strlen(list + p) + 1 + (vl > 0 ? (size_t)vl : 0);
	}
	h->xa = calloc(count ? count : 1, sizeof(*h->xa));
	h->xbuf = malloc(bytes ? bytes : 1);
	if (h->xa == NULL || h->xbuf == NULL) {
		free(list);
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	}
	size_t at = 0, k = 0;
	for (ssize_t p = 0; ll > 0 && p < ll && k < count; p += (ssize_t)strlen(list + p) + 1) {
		size_t nl = strlen(list + p) + 1;
		char *name = h->xbuf + at;
		memcpy(name, list + p, nl);
		at += nl;
		ssize_t vl = lgetxattr(path, name, h->xbuf + at, bytes - at);
		if (vl < 0)
			continue; /* gone meanwhile: restic skips it too */
		h->xa[k++] = (rix_xattr){ name, (uint8_t *)h->xbuf + at, (size_t)vl };
		at += (size_t)vl;
	}
	h->n.xattrs = h->xa;
	h->n.nxattrs = k;
	free(list);
	return 0;
}

/*
 * Fills h for the entry at path (named name in its directory) and saves what it holds; for an
 * ancestor of targets (virt), a directory whose subtree holds only what is under virt.
 * Returns 1 when it cannot be read (warned: left out), 0, or a repository error.
 */
/* A file read and cut, counted as new or changed (against old, its parent node). */
/* A directory's subtree (in h) is done: its node points at it, the summary counts it (its tree
 * blob of meta bytes stored now, or 0), an item event tells. */
static void count_dir(struct arch *a, struct held *h, const rix_id *ps, const char *path, const struct timespec *start,
		      struct sizes meta)
{
	h->n.subtree = &h->subtree;
	rix_backup_action act = ps == NULL ? RIX_BACKUP_NEW
				: memcmp(ps->b, h->subtree.b, RIX_ID_SIZE) == 0 ? RIX_BACKUP_UNCHANGED
										  : RIX_BACKUP_MODIFIED;
	if (act == RIX_BACKUP_NEW)
		ADD(a, dirs_new, 1);
	else if (act == RIX_BACKUP_UNCHANGED)
		ADD(a, dirs_unmodified, 1);
	else
		ADD(a, dirs_changed, 1);
	item_done(a, path, true, act, start, NO_SIZES, meta);
}

/* Records a repository error (the first one wins; mu not held). */
static void fail_with(struct arch *a, int rc)
{
	pthread_mutex_lock(&a->mu);
	if (a->rc == 0) {
		snprintf(a->msg, sizeof(a->msg), "%s", rix_error_last());
		__atomic_store_n(&a->rc, rc, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&a->mu);
}

/* The first error so far, without the lock (asked once per entry and per file). */
static int failed(struct arch *a)
{
	return __atomic_load_n(&a->rc, __ATOMIC_ACQUIRE);
}

/* w reads path now (or no file: NULL); the progress reporter lists it. */
static void set_current(struct arch *a, struct worker *w, const char *path)
{
	if (!a->progress_on)
		return;
	pthread_mutex_lock(&w->cur_mu);
	w->cur = path;
	pthread_mutex_unlock(&w->cur_mu);
}

static int read_file_counted(struct arch *a, struct worker *w, const char *path, struct held *h, const rix_node *old)
{
	struct timespec start = { 0, 0 };
	if (a->opt.item != NULL)
		start = rix__arch_now_mono();
	set_current(a, w, path);
	int rc = save_file(a, w, path, h);
	set_current(a, w, NULL);
	if (rc == 0) {
		bool is_new = old == NULL || old->type != RIX_NODE_FILE;
		if (is_new)
			ADD(a, files_new, 1);
		else
			ADD(a, files_changed, 1);
		item_done(a, path, false, is_new ? RIX_BACKUP_NEW : RIX_BACKUP_MODIFIED, &start, h->added, NO_SIZES);
	}
	return rc;
}

/*
 * ... With defer not NULL, a regular file that must be read is not: 2 is returned with h
 * filled but its content, for the caller to have it read (read_file_counted) elsewhere.
 */
static int walk_dir(struct arch *a, struct dir *up, const char *path, struct held *slot, bool count, const rix_id *parent,
		    const char *only);

static int save_entry(struct arch *a, const char *path, const char *name, struct held *h, struct tnode *virt,
		      const rix_node *old, int *defer, struct dir *in)
{
	struct stat st;
	struct timespec start = { 0, 0 };
	if (a->opt.item != NULL)
		start = rix__arch_now_mono();
	if (lstat(path, &st) != 0) {
		warn(a, path, "lstat: %s", strerror(errno));
		return 1;
	}
	if (virt != NULL && !S_ISDIR(st.st_mode)) { /* before anything of it is read or stored */
		warn(a, path, "not a directory, but a path to back up goes through it");
		return 1;
	}
	h->name = strdup(name);
	if (h->name == NULL)
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	rix_node *n = &h->n;
	n->name = h->name;
	n->name_len = strlen(name);
	n->mode = rix_gomode_from_st_mode(st.st_mode);
	n->mtime = to_time(st.st_mtim);
	n->atime = a->opt.with_atime ? to_time(st.st_atim) : n->mtime;
	n->ctime = to_time(st.st_ctim);
	n->uid = st.st_uid;
	n->gid = st.st_gid;
	n->user = cached_name(&a->users, st.st_uid, 0);
	n->group = cached_name(&a->groups, st.st_gid, 1);
	n->inode = st.st_ino;
	n->device_id = st.st_dev;
	int rc = 0;
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		n->type = RIX_NODE_FILE;
		n->links = st.st_nlink;
		if (!a->opt.force && old != NULL && old->type == RIX_NODE_FILE && old->size == (uint64_t)st.st_size &&
		    same_time(&old->mtime, &n->mtime) && same_time(&old->ctime, &n->ctime) && old->inode == st.st_ino &&
		    (old->content != NULL || old->content_len == 0) && all_indexed(a, old)) {
			/* Unchanged since the parent: its content list, without reading the file. */
			for (size_t i = 0; rc == 0 && i < old->content_len; i++)
				rc = push_content(h, &old->content[i]);
			n->size = old->size;
			ADD(a, bytes_total, old->size);
			ADD(a, bytes_done, old->size);
			n->content = h->content;
			n->content_len = h->ncontent;
			if (rc == 0) {
				ADD(a, files_unmodified, 1);
				item_done(a, path, false, RIX_BACKUP_UNCHANGED, NULL, NO_SIZES, NO_SIZES);
			}
			break;
		}
		if (defer != NULL) { /* read by a worker; xattrs first, the file after */
			int xrc = read_xattrs(h, path);
			return xrc != 0 ? xrc : 2;
		}
		rc = read_file_counted(a, &a->main, path, h, old);
		break;
	case S_IFDIR: {
		n->type = RIX_NODE_DIR;
		const rix_id *ps = old != NULL && old->type == RIX_NODE_DIR ? old->subtree : NULL;
		struct sizes meta = NO_SIZES;
		if (virt == NULL && a->opt.one_file_system && st.st_dev != a->dev) { /* a mount point: kept empty */
			rc = save_tree(a, NULL, 0, &h->subtree, &meta);
			if (rc == 0)
				count_dir(a, h, ps, path, &start, meta);
		} else if (virt != NULL) {
			rc = save_virtual(a, virt, &h->subtree, ps, &meta);
			if (rc == 0)
				count_dir(a, h, ps, path, &start, meta);
		} else { /* its subtree is put into h when it is done (dir_release) */
			char *only = NULL;
			if ((rc = marked_only(&only, a, path)) == 0)
				rc = walk_dir(a, in, path, h, true, ps, only);
			free(only);
		}
		break;
	}
	case S_IFLNK: {
		n->type = RIX_NODE_SYMLINK;
		n->links = st.st_nlink;
		if ((rc = read_link(a, path, h)) != 0)
			return rc;
		ADD(a, others, 1);
		break;
	}
	case S_IFBLK:
	case S_IFCHR:
		n->type = S_ISBLK(st.st_mode) ? RIX_NODE_DEV : RIX_NODE_CHARDEV;
		n->device = st.st_rdev;
		n->links = st.st_nlink;
		ADD(a, others, 1);
		break;
	case S_IFIFO:
		n->type = RIX_NODE_FIFO;
		ADD(a, others, 1);
		break;
	case S_IFSOCK:
		n->type = RIX_NODE_SOCKET;
		ADD(a, others, 1);
		break;
	default:
		warn(a, path, "unknown file type");
		return 1;
	}

	if (rc != 0)
		return rc;
	if (n->type != RIX_NODE_SYMLINK && (rc = read_xattrs(h, path)) != 0)
		return rc;
	return 0;
}

static int by_bytes(const struct dirent **x, const struct dirent **y)
{
	return strcmp((*x)->d_name, (*y)->d_name);
}

/* Encodes held[0..n) (in name order) as a tree blob and saves it; *stored_len (may be NULL) its
 * sizes when it is stored now, else 0. */
static int save_tree(struct arch *a, struct held *held, size_t n, rix_id *tree, struct sizes *stored_len)
{
	rix_tree_enc *e;
	int rc = rix_tree_enc_new(&e);
	for (size_t i = 0; rc == 0 && held != NULL && i < n; i++)
		if (held[i].name != NULL)
			rc = rix_tree_enc_add(e, &held[i].n);
	const uint8_t *d;
	size_t len;
	struct sizes st = NO_SIZES;
	if (rc == 0)
		rc = rix_tree_enc_finish(&d, &len, e);
	if (rc == 0)
		rc = save(a, RIX_BLOB_TREE, d, len, tree, &st);
	if (stored_len != NULL)
		*stored_len = st;
	rix_tree_enc_free(e);
	return rc;
}

/* ---- the workers and the directories in flight ----------------------------------------- */

static void dir_free(struct dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		held_free(&d->h[i]);
	free(d->h);
	rix_tree_free(d->old);
	free(d->path);
	free(d);
}

/*
 * Drops one of d's pending counts (a file or subdirectory done, or the walker done listing it).
 * The last one saves d's tree into its slot and releases the directory above, and so on up.
 */
static void dir_release(struct arch *a, struct dir *d)
{
	while (d != NULL) {
		pthread_mutex_lock(&a->mu);
		int last = --d->pending == 0;
		int err = a->rc;
		pthread_mutex_unlock(&a->mu);
		if (!last)
			return;
		int rc = err;
		if (rc == 0) {
			for (size_t i = 0; i < d->n; i++)
				if (d->h[i].left_out) {
					held_free(&d->h[i]);
					memset(&d->h[i], 0, sizeof(d->h[i]));
				}
			struct sizes meta = NO_SIZES;
			rc = save_tree(a, d->h, d->n, &d->slot->subtree, &meta);
			if (rc != 0)
				fail_with(a, rc);
			else if (d->count)
				count_dir(a, d->slot, d->has_ps ? &d->ps : NULL, d->path != NULL ? d->path : "", &d->start, meta);
		}
		struct dir *up = d->up;
		dir_free(d);
		if (up == NULL) {
			pthread_mutex_lock(&a->mu);
			if (--a->top == 0)
				pthread_cond_broadcast(&a->idle);
			pthread_mutex_unlock(&a->mu);
		}
		d = up;
	}
}

/* Runs job j on w and records its outcome (mu not held). Frees j. */
static void run_job(struct arch *a, struct worker *w, struct job *j)
{
	int rc = failed(a) ? 0 : read_file_counted(a, w, j->path, j->h, j->old);
	if (rc == 1)
		j->h->left_out = 1;
	else if (rc != 0)
		fail_with(a, rc);
	struct dir *d = j->d;
	free(j->path);
	free(j);
	dir_release(a, d);
}

static struct job *pop_job(struct arch *a) /* mu held */
{
	struct job *j = a->head;
	if (j != NULL) {
		if ((a->head = j->next) == NULL)
			a->tail = &a->head;
		a->queued--;
	}
	return j;
}

struct worker_arg {
	struct arch *a;
	struct worker w;
};

static void *worker_main(void *p)
{
	struct worker_arg *wa = p;
	struct arch *a = wa->a;
	pthread_mutex_lock(&a->mu);
	for (;;) {
		struct job *j = pop_job(a);
		if (j == NULL) {
			if (a->stop)
				break;
			pthread_cond_wait(&a->work, &a->mu);
			continue;
		}
		pthread_mutex_unlock(&a->mu);
		run_job(a, &wa->w, j);
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/*
 * Queues the reading of file path (owned by the job from now on, even on failure) into h, in
 * directory d (one more pending there). With the queue full the calling thread reads files too.
 */
static int submit(struct arch *a, struct dir *d, char *path, struct held *h, const rix_node *old)
{
	struct job *j = malloc(sizeof(*j));
	if (j == NULL) {
		free(path);
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	}
	*j = (struct job){ NULL, path, h, old, d };
	pthread_mutex_lock(&a->mu);
	d->pending++;
	*a->tail = j;
	a->tail = &j->next;
	a->queued++;
	pthread_cond_signal(&a->work);
	while (a->queued > QUEUE_MAX && (j = pop_job(a)) != NULL) {
		pthread_mutex_unlock(&a->mu);
		run_job(a, &a->main, j);
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	return 0;
}

/* Waits until every top directory is done, reading queued files meanwhile. @return the first
 * error of any thread, or 0. */
static int drain(struct arch *a)
{
	pthread_mutex_lock(&a->mu);
	while (a->top > 0) {
		struct job *j = pop_job(a);
		if (j == NULL) {
			pthread_cond_wait(&a->idle, &a->mu);
			continue;
		}
		pthread_mutex_unlock(&a->mu);
		run_job(a, &a->main, j);
		pthread_mutex_lock(&a->mu);
	}
	int rc = a->rc;
	pthread_mutex_unlock(&a->mu);
	return rc != 0 ? rix_error_set(rc, "%s", a->msg) : 0;
}

static int worker_init(struct worker *w, uint64_t pol)
{
	pthread_mutex_init(&w->cur_mu, NULL);
	int rc = rix_chunker_new(&w->ch, pol);
	if (rc == 0 && (w->chunk = malloc(RIX_CHUNK_MAX)) == NULL)
		rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
	return rc;
}

static void worker_fini(struct worker *w)
{
	rix_chunker_free(w->ch);
	free(w->chunk);
	pthread_mutex_destroy(&w->cur_mu);
}

/*
 * Lists directory path and saves its entries: subdirectories walked now, files queued. Its
 * tree is saved into slot->subtree when the last of them is done (dir_release), maybe after
 * this returns; in directory up (one more pending there), or a top one (drain waits for it).
 * parent: its tree in the parent snapshot (or NULL); only: a marked directory's one entry kept.
 * @return 0; 1 when it cannot be listed (warned: left out, nothing pending); an error (the
 * directory is released all the same).
 */
static int walk_dir(struct arch *a, struct dir *up, const char *path, struct held *slot, bool count, const rix_id *parent,
		    const char *only)
{
	struct dirent **ents;
	int ne = scandir(path, &ents, NULL, by_bytes);
	if (ne < 0) { /* left out (1), as restic leaves out a directory it cannot list */
		warn(a, path, "scandir: %s", strerror(errno));
		return 1;
	}
	struct dir *d = calloc(1, sizeof(*d));
	if (d == NULL) {
		for (int i = 0; i < ne; i++)
			free(ents[i]);
		free(ents);
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	}
	*d = (struct dir){ .up = up, .slot = slot, .count = count, .has_ps = parent != NULL, .pending = 1 };
	if (parent != NULL)
		d->ps = *parent;
	if (a->opt.item != NULL) { /* (no path when memory runs out: the event names none) */
		d->path = strdup(path);
		d->start = rix__arch_now_mono();
	}
	pthread_mutex_lock(&a->mu);
	if (up != NULL)
		up->pending++;
	else
		a->top++;
	pthread_mutex_unlock(&a->mu);

	rix_tree *old = d->old = parent_tree(a, path, parent);
	d->h = calloc(ne > 0 ? (size_t)ne : 1, sizeof(*d->h));
	int rc = d->h == NULL ? rix_error_set(RIX_ENOMEM, "backup: out of memory") : 0;
	if (rc == 0)
		d->n = (size_t)ne;
	size_t pl = strlen(path);
	bool stopped = false; /* another thread failed: drain reports its error */
	for (int i = 0; rc == 0 && !stopped && i < ne; i++) {
		const char *nm = ents[i]->d_name;
		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
			continue;
		if (only != NULL && strcmp(nm, only) != 0) { /* a marked directory: its marker alone */
			ADD(a, excluded, 1);
			continue;
		}
		size_t need = pl + strlen(nm) + 2;
		char *child = malloc(need);
		if (child == NULL) {
			rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
			break;
		}
		snprintf(child, need, "%s%s%s", path, pl > 0 && path[pl - 1] == '/' ? "" : "/", nm);
		if (entry_excluded(a, child)) {
			ADD(a, excluded, 1);
			free(child);
			continue;
		}
		const rix_node *on = old != NULL ? rix_tree_find(old, nm, strlen(nm)) : NULL;
		int defer = 1;
		int src = save_entry(a, child, nm, &d->h[i], NULL, on, &defer, d);
		if (src == 2) { /* a file to read: to the workers */
			src = submit(a, d, child, &d->h[i], on);
			child = NULL; /* the job owns it */
		}
		free(child);
		if (src == 1) { /* left out */
			held_free(&d->h[i]);
			memset(&d->h[i], 0, sizeof(d->h[i]));
		} else {
			rc = src;
		}
		stopped = failed(a) != 0;
	}
	for (int i = 0; i < ne; i++)
		free(ents[i]);
	free(ents);
	if (rc != 0)
		fail_with(a, rc);
	dir_release(a, d);
	return rc;
}

/* ---- targets ---------------------------------------------------------------------------- */

struct tnode {
	char *name;      /* a component */
	char *fspath;    /* the path on disk it stands for */
	int target;      /* backed up whole */
	int root;        /* top level: where its target starts (-1: "/", n: n ".." up from here) */
	struct tnode *kids;
	size_t nkids, cap;
};

static void tnode_free(struct tnode *t)
{
	for (size_t i = 0; i < t->nkids; i++)
		tnode_free(&t->kids[i]);
	free(t->kids);
	free(t->name);
	free(t->fspath);
}

static struct tnode *tnode_child(struct tnode *t, const char *name, const char *fspath)
{
	for (size_t i = 0; i < t->nkids; i++)
		if (strcmp(t->kids[i].name, name) == 0)
			return &t->kids[i];
	if (t->nkids == t->cap) {
		size_t c = t->cap ? t->cap * 2 : 4;
		struct tnode *k = realloc(t->kids, c * sizeof(*k));
		if (k == NULL)
			return NULL;
		t->kids = k;
		t->cap = c;
	}
	struct tnode *k = &t->kids[t->nkids];
	*k = (struct tnode){ strdup(name), strdup(fspath), 0, 0, NULL, 0, 0 };
	if (k->name == NULL || k->fspath == NULL) {
		tnode_free(k);
		return NULL;
	}
	t->nkids++;
	return k;
}

/*
 * The top-level node for a target's first component name, whose target starts at root: as
 * restic's, a node of that name from the same root is shared; one from another root (the
 * relative "tmp" beside "/tmp/x", or "x" beside "../x") makes this one "name-1", "name-2", ...
 */
static struct tnode *tnode_top(struct tnode *top, const char *name, const char *fspath, int root)
{
	char cand[4096];
	snprintf(cand, sizeof(cand), "%s", name);
	for (unsigned i = 1;; i++) {
		struct tnode *k = NULL;
		for (size_t j = 0; j < top->nkids && k == NULL; j++)
			if (strcmp(top->kids[j].name, cand) == 0)
				k = &top->kids[j];
		if (k == NULL)
			break;
		if (k->root == root)
			return k;
		snprintf(cand, sizeof(cand), "%s-%u", name, i);
	}
	struct tnode *k = tnode_child(top, cand, fspath);
	if (k != NULL)
		k->root = root;
	return k;
}

static int cmp_tnode(const void *x, const void *y)
{
	return strcmp(((const struct tnode *)x)->name, ((const struct tnode *)y)->name);
}

/* The tree of a target that is the snapshot's root ("."). */
static int save_root(struct arch *a, const char *path, rix_id *tree, const rix_id *parent)
{
	struct held slot = { 0 };
	int rc = walk_dir(a, NULL, path, &slot, false, parent, NULL);
	int drc = drain(a);
	if (rc == 0)
		rc = drc;
	if (rc == 0)
		*tree = slot.subtree;
	return rc;
}

/* The tree of a trie node that is not a target: its children, each saved or recursed into. */
static int save_virtual(struct arch *a, struct tnode *t, rix_id *tree, const rix_id *parent, struct sizes *stored_len)
{
	rix_tree *old = parent_tree(a, "/", parent);
	qsort(t->kids, t->nkids, sizeof(*t->kids), cmp_tnode);
	struct held *h = calloc(t->nkids ? t->nkids : 1, sizeof(*h));
	if (h == NULL)
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < t->nkids; i++) {
		struct tnode *k = &t->kids[i];
		/* An ancestor of a target: its own metadata, its subtree of what is backed up. */
		struct stat tst;
		if (k->target && lstat(k->fspath, &tst) == 0)
			a->dev = tst.st_dev; /* one_file_system: the target's device */
		int src = save_entry(a, k->fspath, k->name, &h[i], k->target ? NULL : k,
				     old != NULL ? rix_tree_find(old, k->name, strlen(k->name)) : NULL, NULL, NULL);
		if (src == 1) {
			held_free(&h[i]);
			memset(&h[i], 0, sizeof(h[i]));
		} else {
			rc = src;
		}
	}
	int drc = drain(a); /* the targets' directories, into h */
	if (rc == 0)
		rc = drc;
	if (rc == 0)
		rc = save_tree(a, h, t->nkids, tree, stored_len);
	for (size_t i = 0; i < t->nkids; i++)
		held_free(&h[i]);
	free(h);
	rix_tree_free(old);
	return rc;
}

/* Lexically clean absolute form of path (as Go's filepath.Abs, relative to cwd): into out[cap]. */
static int abs_clean(char *out, size_t cap, const char *cwd, const char *path)
{
	char buf[8192];
	if (path[0] == '/')
		snprintf(buf, sizeof(buf), "%s", path);
	else if (cwd != NULL)
		snprintf(buf, sizeof(buf), "%s/%s", cwd, path);
	else
		return rix_error_set(RIX_EIO, "backup: %s: the working directory cannot be found", path);
	size_t k = 0;
	out[k++] = '/';
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c != NULL; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			while (k > 1 && out[k - 1] != '/')
				k--;
			if (k > 1)
				k--;
			continue;
		}
		size_t cl = strlen(c);
		if (k + cl + 2 > cap)
			return rix_error_set(RIX_EINVAL, "backup: path too long: %s", path);
		if (k > 1)
			out[k++] = '/';
		memcpy(out + k, c, cl);
		k += cl;
	}
	out[k] = '\0';
	return 0;
}

/*
 * The components of relative path p that name it in the snapshot's tree, as restic counts them
 * (Go's Clean of "/" + p: "." dropped, ".." takes one back, never past the top): "src" 1,
 * "../x/y" 2, "a/.." 0; and into *ups how many ".." it starts with once cleaned (Go's Clean:
 * "a/../../x" is "../x": 1). -1 for an absolute path (all of its components), *ups -1 too.
 */
static int rel_components(const char *p, int *ups)
{
	*ups = -1;
	if (p[0] == '/')
		return -1;
	int k = 0, up = 0;
	for (const char *c = p; *c != '\0';) {
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			if (k > 0)
				k--;
			else
				up++;
		} else if (len > 0 && !(len == 1 && c[0] == '.')) {
			k++;
		}
		c += len;
		c += *c == '/';
	}
	*ups = up;
	return k;
}

/* "." and "./": the target is the snapshot's root, as restic 0.14 does for `backup .`. */
static int is_dot(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return strcmp(p, ".") == 0 || p[0] == '\0';
}

/* The host the snapshot records: opt->hostname, else this machine's name. */
static void backup_host(const struct arch *a, char *host, size_t cap)
{
	if (a->opt.hostname != NULL)
		snprintf(host, cap, "%s", a->opt.hostname);
	else if (gethostname(host, cap) != 0)
		host[0] = '\0';
	host[cap - 1] = '\0';
}

/*
 * The snapshot file's JSON (rix_snapshot_encode: restic's members, order and escapes) into *out
 * (rix_free), *len bytes. The snapshot borrows every string: it is encoded, never freed.
 */
static int snapshot_json(char **out, size_t *len, struct arch *a, const rix_id *tree, char *const *abs, size_t n)
{
	char host[256], end[RIX_TIME_MAX], summary[1024];
	backup_host(a, host, sizeof(host));
	const char *user = a->opt.username != NULL ? a->opt.username : cached_name(&a->users, getuid(), 0);
	rix_time te = rix_time_now();
	rix_time_format(end, &te);
	/* restic 0.17's summary object (its data_added and data_added_packed count the trees too;
	 * total_files_processed the regular files alone): ASCII times and numbers, no escapes. */
	const rix_backup_summary *m = a->sum;
	int k = snprintf(summary, sizeof(summary),
			 "{\"backup_start\":\"%s\",\"backup_end\":\"%s\",\"files_new\":%llu,\"files_changed\":%llu,"
			 "\"files_unmodified\":%llu,\"dirs_new\":%llu,\"dirs_changed\":%llu,\"dirs_unmodified\":%llu,"
			 "\"data_blobs\":%llu,\"tree_blobs\":%llu,\"data_added\":%llu,\"data_added_packed\":%llu,"
			 "\"total_files_processed\":%llu,\"total_bytes_processed\":%llu}",
			 a->start, end, (unsigned long long)m->files_new, (unsigned long long)m->files_changed,
			 (unsigned long long)m->files_unmodified, (unsigned long long)m->dirs_new,
			 (unsigned long long)m->dirs_changed, (unsigned long long)m->dirs_unmodified,
			 (unsigned long long)m->data_blobs, (unsigned long long)m->tree_blobs,
			 (unsigned long long)(m->data_added + m->tree_added), (unsigned long long)m->data_added_packed,
			 (unsigned long long)(m->files_new + m->files_changed + m->files_unmodified),
			 (unsigned long long)m->bytes_total);
	rix_snapshot_extra extra = { .summary = summary, .summary_len = (size_t)k };
	const rix_snapshot sn = {
		.time = a->start_time,
		.tree = *tree,
		.has_parent = m->has_parent,
		.parent = m->parent_id,
		.paths = (char **)abs,
		.npaths = n,
		.hostname = host,
		.username = (char *)user,
		.uid = getuid(),
		.gid = getgid(),
		.tags = (char **)a->opt.tags,
		.ntags = a->opt.ntags,
		.excludes = (char **)a->opt.snapshot_excludes,
		.nexcludes = a->opt.nsnapshot_excludes,
		.program_version = (char *)"rix 0.1.0",
		.extra = &extra,
	};
	return rix_snapshot_encode(out, len, &sn);
}

/* Standard input as one file at the root (restic's --stdin): mode 0644, now, this user. */
static int save_stdin(struct arch *a, rix_id *tree)
{
	struct held h = { 0 };
	h.name = strdup(a->opt.stdin_name);
	if (h.name == NULL)
		return rix_error_set(RIX_ENOMEM, "backup: out of memory");
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	rix_node *n = &h.n;
	n->name = h.name;
	n->name_len = strlen(h.name);
	n->type = RIX_NODE_FILE;
	n->mode = 0644;
	n->mtime = n->atime = n->ctime = to_time(now);
	n->uid = getuid();
	n->gid = getgid();
	n->user = cached_name(&a->users, n->uid, 0);
	n->group = cached_name(&a->groups, n->gid, 1);
	char path[4096];
	snprintf(path, sizeof(path), "/%s", a->opt.stdin_name); /* what the snapshot calls it */
	struct timespec start = rix__arch_now_mono();
	set_current(a, &a->main, path);
	int rc = save_fd(a, &a->main, "<stdin>", &h, 0);
	set_current(a, &a->main, NULL);
	if (rc == 1)
		rc = rix_error_set(RIX_EIO, "backup: standard input cannot be read");
	if (rc == 0) {
		ADD(a, files_new, 1);
		item_done(a, path, false, RIX_BACKUP_NEW, &start, h.added, NO_SIZES);
		rc = save_tree(a, &h, 1, tree, NULL);
	}
	held_free(&h);
	return rc;
}

/*
 * The parent's tree into *tree: opt->parent's, or restic's choice: the latest snapshot (by its
 * instant) of this host whose paths hold every target, no later than this backup's start.
 * Snapshots that cannot be read are passed over. @return 1 found, 0 none, or an error
 * (opt->parent that cannot be read).
 */
static int find_parent(struct arch *a, char *const *abs, size_t n, rix_id *tree)
{
	if (a->opt.parent != NULL) {
		rix_snapshot *sn;
		int rc = rix_snapshot_load(&sn, a->r, a->opt.parent);
		if (rc != 0)
			return rc;
		*tree = sn->tree;
		a->sum->has_parent = true;
		a->sum->parent_id = *a->opt.parent;
		rix_snapshot_free(sn);
		return 1;
	}
	char host[256];
	backup_host(a, host, sizeof(host));
	rix_snapshot_list *l;
	int rc = rix_snapshot_list_load(&l, a->r, NULL, NULL);
	if (rc != 0)
		return rc;
	const char *hosts[1] = { host };
	rix_snapshot_filter f = RIX_SNAPSHOT_FILTER_INIT;
	f.hosts = hosts;
	f.nhosts = 1;
	f.paths = (const char *const *)abs;
	f.npaths = n;
	const rix_snapshot *best = NULL;
	for (size_t i = 0; i < l->count; i++) {
		const rix_snapshot *sn = l->items[i];
		if (rix_time_cmp(&sn->time, &a->start_time) <= 0 && rix_snapshot_matches(sn, &f) &&
		    (best == NULL || rix_time_cmp(&sn->time, &best->time) > 0))
			best = sn;
	}
	if (best != NULL) {
		*tree = best->tree;
		a->sum->has_parent = true;
		a->sum->parent_id = best->id;
	}
	rix_snapshot_list_free(l);
	return best != NULL;
}

/* ---- the backup -------------------------------------------------------------------------- */

int rix_backup(rix_id *snapshot_id, rix_backup_summary *summary, rix_repo *r, const char *const *paths, size_t n,
	       const rix_backup_options *opt)
{
	memset(snapshot_id, 0, sizeof(*snapshot_id));
	if (opt != NULL && (opt->version < 1 || opt->version > RIX_BACKUP_OPTIONS_VERSION))
		return rix_error_set(RIX_EINVAL, "backup: options of version %u, this librix knows 1 to %u", opt->version,
				     RIX_BACKUP_OPTIONS_VERSION);
	/* What a caller built for an older version has of the options and the summary. */
	const bool v1 = opt != NULL && opt->version == 1;
	size_t opt_size = v1 ? offsetof(rix_backup_options, progress)
		 : opt != NULL && opt->version == 2 ? offsetof(rix_backup_options, snapshot_excludes)
						    : sizeof(*opt);
	size_t sum_size = v1 ? offsetof(rix_backup_summary, tree_added) : sizeof(*summary);
	if (summary != NULL)
		memset(summary, 0, sum_size);
	const char *other = rix_repo_config(r)->other_chunker;
	if (other[0] != '\0')
		return rix_error_set(RIX_EINVAL, "backup: the repository's config names another chunker than restic's "
				     "(%.*s, as rustic writes it): files cut by restic's would deduplicate nothing against "
				     "its data; back it up with the program that made it",
				     (int)sizeof(rix_repo_config(r)->other_chunker), other);
	rix_backup_summary full;
	memset(&full, 0, sizeof(full));
	struct arch a;
	memset(&a, 0, sizeof(a));
	a.r = r;
	a.sum = &full;
	a.opt = (rix_backup_options)RIX_BACKUP_OPTIONS_INIT;
	if (opt != NULL)
		memcpy(&a.opt, opt, opt_size);
	a.opt.version = RIX_BACKUP_OPTIONS_VERSION;
	char stdin_path[4096];
	if (a.opt.stdin_name != NULL) { /* the snapshot's one path: /NAME, as restic records it */
		if (a.opt.stdin_name[0] == '\0' || strchr(a.opt.stdin_name, '/') != NULL)
			return rix_error_set(RIX_EINVAL, "backup: --stdin-filename must be a file name");
		snprintf(stdin_path, sizeof(stdin_path), "/%s", a.opt.stdin_name);
		paths = NULL;
		n = 0;
	}
	if (n == 0 && a.opt.stdin_name == NULL)
		return rix_error_set(RIX_EINVAL, "backup: nothing to back up");
	pthread_mutex_init(&a.mu, NULL);
	pthread_mutex_init(&a.cbmu, NULL);
	pthread_cond_init(&a.work, NULL);
	pthread_cond_init(&a.idle, NULL);
	a.tail = &a.head;
	a.t0 = rix__arch_now_mono();
	a.progress_on = a.opt.progress != NULL;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	rix_time t0 = to_time(now);
	rix_time_format(a.start, &t0);
	a.start_time = t0;
	a.cwd = getcwd(NULL, 0); /* NULL (it was removed): relative paths fail where they are used */
	struct tnode root = { 0 };
	const size_t nabs = a.opt.stdin_name != NULL ? 1 : n; /* the snapshot's paths */
	char **abs = calloc(nabs, sizeof(*abs));
	int rc = abs == NULL ? rix_error_set(RIX_ENOMEM, "backup: out of memory") : 0;
	if (rc == 0 && a.opt.nexcludes + a.opt.niexcludes > 0)
		rc = rix_patterns_new(&a.excl, a.opt.excludes, a.opt.nexcludes, a.opt.iexcludes, a.opt.niexcludes);
	if (rc == 0 && a.opt.stdin_name != NULL && (abs[0] = strdup(stdin_path)) == NULL)
		rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct stat st;
		if (lstat(paths[i], &st) != 0) {
			rc = rix_error_set(errno == ENOENT ? RIX_ENOTFOUND : RIX_EIO, "backup: %s: %s", paths[i], strerror(errno));
			break;
		}
		char clean[8192];
		if ((rc = abs_clean(clean, sizeof(clean), a.cwd, paths[i])) != 0 || (abs[i] = strdup(clean)) == NULL) {
			rc = rc ? rc : rix_error_set(RIX_ENOMEM, "backup: out of memory");
			break;
		}
		int ups, rel = rel_components(paths[i], &ups);
		if (is_dot(paths[i]) || rel == 0) { /* "..", "a/..": the contents of a folder, as "." */
			if (n > 1) {
				rc = rix_error_set(RIX_EINVAL, "backup: \".\" cannot be backed up with other paths");
				break;
			}
			root.target = 1;
			if ((root.fspath = strdup(paths[i])) == NULL) {
				rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
				break;
			}
			continue;
		}
		/* A relative target keeps only its own components in the tree (restic: "src" is /src,
		 * "../x/y" is /x/y), read at its absolute path; an absolute one has them all. */
		int skip = 0;
		for (const char *c = clean; rel > 0 && *c != '\0'; c++)
			skip += *c == '/';
		skip = rel > 0 ? skip - rel : 0;
		struct tnode *t = &root;
		char walk[8192] = "";
		size_t wl = 0;
		for (char *save = NULL, *c = strtok_r(clean, "/", &save); t != NULL && c != NULL; c = strtok_r(NULL, "/", &save)) {
			wl += (size_t)snprintf(walk + wl, sizeof(walk) - wl, "/%s", c);
			if (skip-- <= 0)
				t = t == &root ? tnode_top(t, c, walk, ups) : tnode_child(t, c, walk);
		}
		if (t == NULL) {
			rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
			break;
		}
		t->target = 1;
	}
	if (rc == 0 && a.opt.dry_run) {
		if ((a.dry = calloc(256, sizeof(*a.dry))) == NULL)
			rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
		for (size_t i = 0; a.dry != NULL && i < 256; i++)
			pthread_mutex_init(&a.dry[i].mu, NULL);
	}
	/* The readers: the calling thread (which also walks) and one thread per CPU. */
	uint64_t pol = rix_repo_config(r)->chunker_polynomial;
	bool main_ready = false;
	if (rc == 0) {
		main_ready = true;
		rc = worker_init(&a.main, pol);
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nw = a.opt.read_concurrency ? a.opt.read_concurrency : cpus > 0 ? (size_t)cpus : 1;
	if (nw > 64)
		nw = 64;
	struct worker_arg *wa = rc == 0 ? calloc(nw, sizeof(*wa)) : NULL;
	struct worker *readers[65];
	pthread_t th[64];
	size_t started = 0;
	if (rc == 0 && wa == NULL)
		rc = rix_error_set(RIX_ENOMEM, "backup: out of memory");
	for (size_t i = 0; rc == 0 && i < nw; i++) {
		wa[i].a = &a;
		if ((rc = worker_init(&wa[i].w, pol)) != 0) {
			worker_fini(&wa[i].w);
			break;
		}
		if (pthread_create(&th[started], NULL, worker_main, &wa[i]) != 0) {
			worker_fini(&wa[i].w);
			break; /* fewer threads: the calling one reads too */
		}
		readers[started++] = &wa[i].w;
	}
	readers[started] = &a.main;
	a.readers = readers;
	a.nreaders = started + 1;
	/* Progress: the scanner counts what there is to do, the reporter tells how far it is. */
	struct scan_arg sa = { &a, abs, a.opt.stdin_name != NULL ? 0 : nabs, root.target != 0 };
	struct reporter rp = { .a = &a };
	pthread_t scanner, reporter;
	bool scanning = false, reporting = false;
	if (rc == 0 && a.progress_on) {
		scanning = sa.n > 0 && pthread_create(&scanner, NULL, rix__arch_scanner_main, &sa) == 0;
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&rp.cv, &ca);
		pthread_condattr_destroy(&ca);
		pthread_mutex_init(&rp.mu, NULL);
		reporting = pthread_create(&reporter, NULL, rix__arch_reporter_main, &rp) == 0;
		if (!reporting) {
			pthread_cond_destroy(&rp.cv);
			pthread_mutex_destroy(&rp.mu);
		}
	}
	/* The parent: given, or the latest snapshot of this host with the same paths. */
	rix_id ptree;
	const rix_id *pt = NULL;
	char *json = NULL;
	size_t json_len = 0;
	if (rc == 0 && !a.opt.force) {
		int prc = find_parent(&a, abs, nabs, &ptree);
		if (prc < 0)
			rc = prc;
		else if (prc == 1)
			pt = &ptree;
	}
	rix_id tree;
	struct stat rst;
	if (root.target && lstat(root.fspath, &rst) == 0)
		a.dev = rst.st_dev;
	if (rc == 0 && a.opt.stdin_name != NULL)
		rc = save_stdin(&a, &tree);
	else if (rc == 0)
		rc = root.target ? save_root(&a, root.fspath, &tree, pt) : save_virtual(&a, &root, &tree, pt, NULL);
	if (rc == 1) /* "." cannot be listed (warned): no snapshot, as restic */
		rc = rix_error_set(RIX_EIO, "backup: %s cannot be listed: nothing to save", root.fspath);
	/* The scanner's last directories (it began first and does less per entry), or it is stopped
	 * when the backup failed; the totals are final either way. */
	atomic_store(&a.t.scan_stop, 1); /* done (or failed): its totals are not waited for */
	if (scanning)
		pthread_join(scanner, NULL);
	scanning = false;
	if (rc == 0 && a.opt.skip_if_unchanged && pt != NULL && memcmp(pt->b, tree.b, RIX_ID_SIZE) == 0) {
		a.sum->skipped = true;
		if (!a.opt.dry_run) {
			*snapshot_id = a.sum->parent_id;
			rc = rix_repo_flush(r); /* nothing new, normally; written all the same */
		}
		goto done;
	}
	if (a.opt.dry_run)
		goto done; /* nothing written: no pack, index or snapshot */
	/* Packs, then index files, then the snapshot that names them. */
	if (rc == 0)
		rc = rix_repo_flush(r);
	rix__arch_tally_out(&a);
	if (rc == 0)
		rc = snapshot_json(&json, &json_len, &a, &tree, abs, nabs);
	if (rc == 0)
		rc = rix_repo_write_file(snapshot_id, r, RIX_FILE_SNAPSHOT, json, json_len);
done:
	if (scanning) {
		atomic_store(&a.t.scan_stop, 1);
		pthread_join(scanner, NULL);
	}
	if (reporting) { /* its last report, with everything counted */
		pthread_mutex_lock(&rp.mu);
		rp.stop = 1;
		pthread_cond_signal(&rp.cv);
		pthread_mutex_unlock(&rp.mu);
		pthread_join(reporter, NULL);
		pthread_cond_destroy(&rp.cv);
		pthread_mutex_destroy(&rp.mu);
	}
	rix__arch_tally_out(&a);
	if (summary != NULL)
		memcpy(summary, &full, sum_size);
	rix_free(json);
	for (size_t i = 0; abs != NULL && i < nabs; i++)
		free(abs[i]);
	free(abs);
	tnode_free(&root);
	pthread_mutex_lock(&a.mu);
	a.stop = 1;
	pthread_cond_broadcast(&a.work);
	pthread_mutex_unlock(&a.mu);
	for (size_t i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		worker_fini(&wa[i].w);
	}
	free(wa);
	if (main_ready)
		worker_fini(&a.main);
	for (size_t i = 0; a.dry != NULL && i < 256; i++) {
		free(a.dry[i].v);
		pthread_mutex_destroy(&a.dry[i].mu);
	}
	free(a.dry);
	names_free(&a.users);
	names_free(&a.groups);
	free(a.cwd);
	rix_patterns_free(a.excl);
	pthread_cond_destroy(&a.work);
	pthread_cond_destroy(&a.idle);
	pthread_mutex_destroy(&a.cbmu);
	pthread_mutex_destroy(&a.mu);
	return rc;
}
