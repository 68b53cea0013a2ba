/*
 * backup/restorer.c — rix_restore (rix/restorer.h): a snapshot's trees back into a directory,
 * each pack read once, nothing written outside the target.
 *
 * How it works:
 *   1. The walk (the calling thread): trees depth first with an explicit stack of frames (a
 *      decoded tree, the next node, the directory's path relative to the target, an open fd for
 *      the first FD_DEPTH levels). Directories are made as they are entered (mode 0700 until the
 *      end), symlinks, FIFOs, devices and hard links at once; what is in the way of a regular
 *      file is unlinked (or the file kept, by opt.overwrite). A regular file with no content, or
 *      with hard links (which the walk links to it as it meets them), is made here, empty at its
 *      size (O_CREAT | O_EXCL | O_NOFOLLOW); one with content is left to the batch. Every (file,
 *      offset, blob) goes into the plan with the blob's place from the master index.
 *   2. A batch (restore_batch.c), when the plan passes opt.memory or the walk ends: the plan
 *      is sorted by (pack, offset); workers take a pack at a time, rix_repo_load_pack_blobs reads it in few ranged
 *      reads and checks each blob once, and every (file, offset) that needs the blob gets it
 *      with pwrite (files opened beneath the target, a few kept open per worker). The first
 *      worker to write into a file not made yet makes it, empty at its size (make_file: O_CREAT
 *      | O_EXCL beneath the target, under a lock per file, so once), as restic's first write
 *      does; a file none of whose content could be read is never made. Each file counts its
 *      refs not yet written (left): the worker that takes it to 0, every write to the file done,
 *      verifies it (opt.verify) and sets its metadata. After the workers, the files with no
 *      content get theirs, and each file of the batch is counted and reported.
 *   3. The end: the directories' metadata, children before parents (the post-order of the walk).
 *
 * Paths: rel is "a/b/c" from the target, loc is "/a/b/c" (what messages and patterns see).
 * Every open below the target goes through open_beneath or a frame's fd; no path is ever
 * resolved through a symlink.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define HAVE_OPENAT2 1
#endif
#endif

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "rix/master_index.h"
#include "rix/pattern.h"
#include "rix/repo.h"
#include "rix/restorer.h"
#include "rix/walker.h"
#include "rix/tree.h"
#include "../common/pool.h"
#include "restorer_internal.h"

/* A file's data blobs looked up at a time (rix_master_index_lookup_many): 5 KiB of answers. */
#define RS_LOOKUP_BATCH 64

/* ---- metadata (struct meta: restorer_internal.h) ------------------------------------------- */

static char *dup_n(const char *s, size_t n)
{
	char *d = rix_malloc(n + 1);
	if (d != NULL) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static void meta_view(struct meta *m, const rix_node *n)
{
	*m = (struct meta){ .mode = n->mode, .uid = n->uid, .gid = n->gid, .user = n->user, .group = n->group,
			    .mtime = n->mtime, .atime = n->atime, .xattrs = n->xattrs, .nxattrs = n->nxattrs };
}

void rix__rs_meta_free(struct meta *m)
{
	if (m->own & OWN_USER)
		rix_free((void *)m->user);
	if (m->own & OWN_GROUP)
		rix_free((void *)m->group);
	for (size_t i = 0; i < m->nxattrs; i++) {
		rix_free((void *)m->xattrs[i].name);
		rix_free((void *)m->xattrs[i].value);
	}
	rix_free((void *)m->xattrs);
	memset(m, 0, sizeof(*m));
}

/* name (not NULL) from nm, added if there is room; else a copy of its own (*own). NULL: no memory. */
static const char *name_of(struct names *nm, const char *name, bool *own)
{
	*own = false;
	for (size_t i = 0; i < nm->n; i++)
		if (strcmp(nm->v[i], name) == 0)
			return nm->v[i];
	char *d = dup_n(name, strlen(name));
	if (d != NULL && nm->n < NAMES_MAX)
		nm->v[nm->n++] = d;
	else
		*own = d != NULL;
	return d;
}

static void names_free(struct names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		rix_free(nm->v[i]);
	nm->n = 0;
}

static int meta_copy(struct names *nm, struct meta *m, const rix_node *n)
{
	meta_view(m, n);
	m->user = m->group = NULL;
	m->xattrs = NULL;
	m->nxattrs = 0;
	bool own = false;
	if (n->user != NULL) {
		if ((m->user = name_of(nm, n->user, &own)) == NULL)
			goto nomem;
		m->own |= own ? OWN_USER : 0;
	}
	if (n->group != NULL) {
		if ((m->group = name_of(nm, n->group, &own)) == NULL)
			goto nomem;
		m->own |= own ? OWN_GROUP : 0;
	}
	if (n->nxattrs > 0) {
		rix_xattr *x = rix_calloc(n->nxattrs, sizeof(*x));
		if (x == NULL)
			goto nomem;
		m->xattrs = x;
		m->nxattrs = n->nxattrs;
		for (size_t i = 0; i < n->nxattrs; i++) {
			char *name = dup_n(n->xattrs[i].name, strlen(n->xattrs[i].name));
			uint8_t *value = rix_malloc(n->xattrs[i].len ? n->xattrs[i].len : 1);
			x[i] = (rix_xattr){ .name = name, .value = value, .len = n->xattrs[i].len };
			if (name == NULL || value == NULL)
				goto nomem;
			memcpy(value, n->xattrs[i].value, n->xattrs[i].len);
		}
	}
	return 0;
nomem:
	rix__rs_meta_free(m);
	return rix_error_set(RIX_ENOMEM, "restore: out of memory for metadata");
}

/* What a copy of m holds on the heap (the plan's budget; a shared name is counted as if copied:
 * an upper bound, which the batch sizes of the tests are set against). */
static uint64_t meta_bytes(const struct meta *m)
{
	uint64_t b = (m->user ? strlen(m->user) + 1 : 0) + (m->group ? strlen(m->group) + 1 : 0) +
		     m->nxattrs * sizeof(*m->xattrs);
	for (size_t i = 0; i < m->nxattrs; i++)
		b += strlen(m->xattrs[i].name) + 1 + m->xattrs[i].len;
	return b;
}

static mode_t perm_of(uint32_t gomode)
{
	mode_t p = gomode & 0777;
	if (gomode & RIX_GOMODE_SETUID)
		p |= S_ISUID;
	if (gomode & RIX_GOMODE_SETGID)
		p |= S_ISGID;
	if (gomode & RIX_GOMODE_STICKY)
		p |= S_ISVTX;
	return p;
}

static struct timespec ts_of(const rix_time *t)
{
	return (struct timespec){ .tv_sec = (time_t)t->sec, .tv_nsec = (long)t->nsec };
}

static double elapsed(const struct rs *s)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - s->start.tv_sec) + (double)(now.tv_nsec - s->start.tv_nsec) / 1e9;
}

/* "/" + rel into buf (messages). */
static const char *loc_of(char *buf, size_t cap, const char *rel)
{
	snprintf(buf, cap, "/%s", rel);
	return buf;
}

void rix__rs_report(struct rs *s, const char *rel, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void rix__rs_report(struct rs *s, const char *rel, const char *fmt, ...)
{
	char msg[1024], loc[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&s->errors, 1);
	if (s->o.error != NULL) {
		pthread_mutex_lock(&s->cb);
		s->o.error(s->o.payload, loc_of(loc, sizeof(loc), rel), msg);
		pthread_mutex_unlock(&s->cb);
	}
}

static void warn(struct rs *s, const char *rel, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn(struct rs *s, const char *rel, const char *fmt, ...)
{
	char msg[1024], loc[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (s->o.warn != NULL) {
		pthread_mutex_lock(&s->cb);
		s->o.warn(s->o.payload, loc_of(loc, sizeof(loc), rel), msg);
		pthread_mutex_unlock(&s->cb);
	}
}

void rix__rs_item(struct rs *s, const char *action, const char *rel, bool file, uint64_t size)
{
	char loc[8192];
	if (s->o.item != NULL) {
		pthread_mutex_lock(&s->cb);
		s->o.item(s->o.payload, action, loc_of(loc, sizeof(loc), rel), file, size);
		pthread_mutex_unlock(&s->cb);
	}
}

/* Grows *v (of *cap elements of size sz) to hold n. */
int rix__rs_reserve(void **v, size_t *cap, size_t n, size_t sz)
{
	if (n <= *cap)
		return 0;
	if (n > SIZE_MAX / 2 / sz)
		return rix_error_set(RIX_ENOMEM, "restore: out of memory for %zu elements", n);
	size_t nc = *cap ? *cap : 16;
	while (nc < n)
		nc *= 2;
	void *w = rix_realloc(*v, nc * sz);
	if (w == NULL)
		return rix_error_set(RIX_ENOMEM, "restore: out of memory");
	*v = w;
	*cap = nc;
	return 0;
}

/* Grows *v (of *cap elements of size sz) to hold n + 1. */
int rix__rs_grow(void **v, size_t *cap, size_t n, size_t sz)
{
	return rix__rs_reserve(v, cap, n + 1, sz);
}

static bool valid_name(const char *name, size_t n)
{
	if (n == 0 || (n == 1 && name[0] == '.') || (n == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return memchr(name, '/', n) == NULL && memchr(name, '\0', n) == NULL;
}

/* ---- opening beneath the target ------------------------------------------------------------ */

/*
 * rel (relative to the target) opened with flags (and mode, with O_CREAT), never through a
 * symlink: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS when the kernel has it, else one
 * component at a time with O_NOFOLLOW. -1 with errno on failure.
 */
int rix__rs_open_beneath_mode(const struct rs *s, const char *rel, int flags, mode_t mode)
{
	flags |= O_NOFOLLOW | O_CLOEXEC;
#ifdef HAVE_OPENAT2
	struct open_how how = { .flags = (uint64_t)flags,
				.mode = (flags & O_CREAT) ? (uint64_t)mode : 0,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long fd = syscall(SYS_openat2, s->tfd, rel, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS && errno != ENAMETOOLONG && errno != EAGAIN && errno != EXDEV)
		return -1;
#endif
	int dfd = s->tfd;
	const char *p = rel;
	for (;;) {
		const char *slash = strchr(p, '/');
		if (slash == NULL)
			break;
		char comp[256];
		size_t n = (size_t)(slash - p);
		if (n == 0 || n >= sizeof(comp)) {
			if (dfd != s->tfd)
				close(dfd);
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		int nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		if (dfd != s->tfd)
			close(dfd);
		if (nfd < 0) {
			errno = e;
			return -1;
		}
		dfd = nfd;
		p = slash + 1;
	}
	int fd2 = openat(dfd, p, flags, mode);
	int e = errno;
	if (dfd != s->tfd)
		close(dfd);
	errno = e;
	return fd2;
}

static int open_beneath(const struct rs *s, const char *rel, int flags)
{
	return rix__rs_open_beneath_mode(s, rel, flags, 0);
}

/*
 * File f of the plan reopened by name (at batch time, after it was made): with O_NONBLOCK (a
 * FIFO put there never blocks) and never through a symlink, then it must still be the regular
 * file made (by the walk or a worker) or kept, (st_dev, st_ino) as recorded: a device, a FIFO,
 * a hard link to a file elsewhere swapped in since are never written to. -1 with errno on
 * failure, -2 when the name is now something else.
 */
#define REPLACED (-2)
int rix__rs_open_planned(const struct rs *s, const struct rfile *f, int flags)
{
	int fd = open_beneath(s, f->rel, flags | O_NONBLOCK);
	if (fd < 0)
		return errno == ENXIO ? REPLACED : -1; /* ENXIO: a FIFO without a reader */
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_dev != f->tdev ||
	    (uint64_t)st.st_ino != f->tino) {
		close(fd);
		return REPLACED;
	}
	return fd;
}

const char *rix__rs_open_error(int rc)
{
	return rc == REPLACED ? "no longer the file the restore made (replaced during the restore): nothing written"
			      : strerror(errno);
}

/* ---- metadata setting ------------------------------------------------------------------------ */

static bool owner_of(const struct rs *s, const struct meta *m, uid_t *uid, gid_t *gid)
{
	*uid = m->uid;
	*gid = m->gid;
	if (s->o.ownership_by_name) {
		char buf[4096];
		struct passwd pw, *pp = NULL;
		struct group gr, *gp = NULL;
		if (m->user != NULL && m->user[0] && getpwnam_r(m->user, &pw, buf, sizeof(buf), &pp) == 0 && pp != NULL)
			*uid = pp->pw_uid;
		if (m->group != NULL && m->group[0] && getgrnam_r(m->group, &gr, buf, sizeof(buf), &gp) == 0 && gp != NULL)
			*gid = gp->gr_gid;
	}
	return s->root;
}

static void xattr_failed(struct rs *s, const char *rel, const char *name, int e)
{
	if (e == ENOTSUP || e == EPERM || e == EACCES) {
		if (!atomic_load(&s->xattr_warned) || e != ENOTSUP)
			warn(s, rel, "extended attribute %s not restored: %s", name, strerror(e));
		if (e == ENOTSUP)
			atomic_store(&s->xattr_warned, true); /* once: the file system takes none */
		return;
	}
	rix__rs_report(s, rel, "extended attribute %s: %s", name, strerror(e));
}

/* Ownership, mode, xattrs and times of an open regular file or directory. */
void rix__rs_meta_fd(struct rs *s, int fd, const struct meta *m, const char *rel)
{
	uid_t uid;
	gid_t gid;
	if (owner_of(s, m, &uid, &gid) && fchown(fd, uid, gid) != 0)
		rix__rs_report(s, rel, "chown: %s", strerror(errno));
	if (fchmod(fd, perm_of(m->mode)) != 0)
		rix__rs_report(s, rel, "chmod: %s", strerror(errno));
	for (size_t i = 0; i < m->nxattrs; i++)
		if (fsetxattr(fd, m->xattrs[i].name, m->xattrs[i].value, m->xattrs[i].len, 0) != 0)
			xattr_failed(s, rel, m->xattrs[i].name, errno);
	struct timespec ts[2] = { ts_of(&m->atime), ts_of(&m->mtime) };
	if (futimens(fd, ts) != 0)
		rix__rs_report(s, rel, "set times: %s", strerror(errno));
}

/*
 * chmod of pfd/name, never through a symlink. glibc before 2.32 refuses AT_SYMLINK_NOFOLLOW
 * (EOPNOTSUPP) even for what is no symlink: then the entry is opened O_PATH | O_NOFOLLOW and,
 * not a symlink, changed through /proc/self/fd (what newer glibc does).
 */
static int chmod_nofollow(int pfd, const char *name, mode_t mode)
{
	if (fchmodat(pfd, name, mode, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOTSUP)
		return -1;
	int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	int rc = -1;
	if (fstat(fd, &st) == 0) {
		if (S_ISLNK(st.st_mode)) {
			errno = EOPNOTSUPP; /* swapped for a symlink: not followed */
		} else {
			char p[64];
			snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
			rc = chmod(p, mode);
		}
	}
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* The same for an entry that is not opened (symlink, FIFO, device): through its directory. */
static void meta_at(struct rs *s, int pfd, const char *name, const struct meta *m, const char *rel, bool symlink)
{
	uid_t uid;
	gid_t gid;
	if (owner_of(s, m, &uid, &gid) && fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
		rix__rs_report(s, rel, "lchown: %s", strerror(errno));
	if (!symlink && chmod_nofollow(pfd, name, perm_of(m->mode)) != 0)
		rix__rs_report(s, rel, "chmod: %s", strerror(errno));
	if (m->nxattrs > 0) {
		char path[4096];
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", pfd, name);
		for (size_t i = 0; i < m->nxattrs; i++)
			if (lsetxattr(path, m->xattrs[i].name, m->xattrs[i].value, m->xattrs[i].len, 0) != 0)
				xattr_failed(s, rel, m->xattrs[i].name, errno);
	}
	struct timespec ts[2] = { ts_of(&m->atime), ts_of(&m->mtime) };
	if (utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) != 0)
		rix__rs_report(s, rel, "set times: %s", strerror(errno));
}

/* ---- selection ----------------------------------------------------------------------------- */

/* restic's SelectFilter: whether loc is restored (*sel), and whether something under it may be
 * (*child). RIX_ENOMEM: not known (neither). */
static int selected(const struct rs *s, const char *loc, bool dir, bool *sel, bool *child)
{
	bool m, c;
	*sel = *child = false;
	if (s->o.nincludes + s->o.niincludes > 0) {
		int rc = rix_patterns_match(s->includes, &m, &c, loc);
		if (rc != 0)
			return rc;
		*child = c && dir;
		*sel = m;
		return 0;
	}
	int rc = rix_patterns_match(s->excludes, &m, NULL, loc);
	if (rc != 0)
		return rc;
	*child = !m && dir;
	*sel = !m;
	return 0;
}

/* ---- the walk's frames ----------------------------------------------------------------------- */

static int mkdir_here(struct rs *s, int pfd, const char *name, const char *rel)
{
	if (mkdirat(pfd, name, 0700) == 0)
		return 0;
	if (errno != EEXIST) {
		rix__rs_report(s, rel, "mkdir: %s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return 0;
	/* something else is there (a symlink, perhaps to outside): replaced, never followed */
	if (s->o.overwrite == RIX_OVERWRITE_NEVER || s->o.overwrite == RIX_OVERWRITE_IF_NEWER) {
		rix__rs_report(s, rel, "not a directory in the target, and --overwrite keeps it");
		return -1;
	}
	if (unlinkat(pfd, name, 0) != 0 || mkdirat(pfd, name, 0700) != 0) {
		rix__rs_report(s, rel, "replacing a non-directory: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The name of frame d (its last component). */
static const char *frame_name(const struct frame *f)
{
	const char *slash = strrchr(f->rel, '/');
	return slash != NULL ? slash + 1 : f->rel;
}

/*
 * The directory of frame d, made (with its unmade ancestors) if it is not yet: an fd the caller
 * closes when *owned. -1 when it cannot be made or opened (reported).
 */
static int frame_fd(struct rs *s, size_t d, bool *owned)
{
	*owned = false;
	size_t k = d;
	while (k > 0 && !(s->st[k].created && s->st[k].fd >= 0))
		k--;
	int fd = k == 0 ? s->tfd : s->st[k].fd;
	bool own = false;
	for (size_t i = k + 1; i <= d; i++) {
		struct frame *f = &s->st[i];
		const char *name = frame_name(f);
		if (!f->created) {
			if (mkdir_here(s, fd, name, f->rel) != 0)
				goto fail;
			f->created = true;
		}
		int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0) {
			rix__rs_report(s, f->rel, "open directory: %s", strerror(errno));
			goto fail;
		}
		if (own)
			close(fd);
		if (i < FD_DEPTH) {
			f->fd = nfd;
			own = false;
		} else {
			own = true;
		}
		fd = nfd;
	}
	*owned = own;
	return fd;
fail:
	if (own)
		close(fd);
	return -1;
}

/* ---- hard links ------------------------------------------------------------------------------ */

static uint64_t link_hash(uint64_t ino, uint64_t dev)
{
	uint64_t h = ino * 0x9E3779B97F4A7C15ull ^ (dev + 0x632BE59BD9B4E019ull);
	return h ^ (h >> 29);
}

/* The entry of (ino, dev) (*first), or NULL after recording rel as its first path. */
static int link_find_or_add(struct rs *s, uint64_t ino, uint64_t dev, const char *rel, struct link_ent **first)
{
	*first = NULL;
	if (2 * (s->nlinks + 1) > s->caplinks) {
		size_t nc = s->caplinks ? s->caplinks * 2 : 64;
		struct link_ent *t = rix_calloc(nc, sizeof(*t));
		if (t == NULL)
			return rix_error_set(RIX_ENOMEM, "restore: out of memory for hard links");
		for (size_t i = 0; i < s->caplinks; i++) {
			if (s->links[i].rel == NULL)
				continue;
			size_t j = link_hash(s->links[i].ino, s->links[i].dev) & (nc - 1);
			while (t[j].rel != NULL)
				j = (j + 1) & (nc - 1);
			t[j] = s->links[i];
		}
		rix_free(s->links);
		s->links = t;
		s->caplinks = nc;
	}
	size_t j = link_hash(ino, dev) & (s->caplinks - 1);
	while (s->links[j].rel != NULL) {
		if (s->links[j].ino == ino && s->links[j].dev == dev) {
			*first = &s->links[j];
			return 0;
		}
		j = (j + 1) & (s->caplinks - 1);
	}
	if ((s->links[j].rel = dup_n(rel, strlen(rel))) == NULL)
		return rix_error_set(RIX_ENOMEM, "restore: out of memory for hard links");
	s->links[j].ino = ino;
	s->links[j].dev = dev;
	s->nlinks++;
	return 0;
}

struct link_ent *rix__rs_link_find(struct rs *s, uint64_t ino, uint64_t dev)
{
	if (s->caplinks == 0)
		return NULL;
	for (size_t j = link_hash(ino, dev) & (s->caplinks - 1); s->links[j].rel != NULL; j = (j + 1) & (s->caplinks - 1))
		if (s->links[j].ino == ino && s->links[j].dev == dev)
			return &s->links[j];
	return NULL;
}

/* ---- entries ----------------------------------------------------------------------------------- */

/*
 * What to do with an entry the target may have at pfd/name: 1 make it (what was there, not a
 * directory, is unlinked), 0 keep it (counted skipped), -1 an error (reported). *existed says
 * whether something was there; *keep (files, if-changed) that the file is kept as it is but its
 * metadata restored, *kst its stat then (the file the batch must find there). Only a regular
 * file with no other link is kept: a hard link to a file elsewhere is replaced, never given the
 * snapshot's metadata.
 */
static int replace_entry(struct rs *s, int pfd, const char *name, const rix_node *n, const char *rel, bool *existed,
			 bool *keep, struct stat *kst)
{
	*existed = false;
	if (keep != NULL)
		*keep = false;
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 1;
		rix__rs_report(s, rel, "lstat: %s", strerror(errno));
		return -1;
	}
	*existed = true;
	rix_time cur = { .sec = st.st_mtim.tv_sec, .nsec = (uint32_t)st.st_mtim.tv_nsec };
	switch (s->o.overwrite) {
	case RIX_OVERWRITE_NEVER:
		return 0;
	case RIX_OVERWRITE_IF_NEWER:
		if (rix_time_cmp(&n->mtime, &cur) <= 0)
			return 0;
		break;
	case RIX_OVERWRITE_IF_CHANGED:
		if (keep != NULL && S_ISREG(st.st_mode) && st.st_nlink == 1 && (uint64_t)st.st_size == n->size &&
		    rix_time_cmp(&n->mtime, &cur) == 0) {
			*keep = true;
			*kst = st;
			return 0;
		}
		break;
	default:
		break;
	}
	if (S_ISDIR(st.st_mode)) {
		rix__rs_report(s, rel, "a directory is in the way");
		return -1;
	}
	if (unlinkat(pfd, name, 0) != 0) {
		rix__rs_report(s, rel, "remove what was there: %s", strerror(errno));
		return -1;
	}
	return 1;
}

static void skipped(struct rs *s, uint64_t size)
{
	atomic_fetch_add(&s->files_skipped, 1);
	atomic_fetch_add(&s->bytes_skipped, size);
}

static int add_file(struct rs *s, int pfd, const char *name, const rix_node *n, const char *rel)
{
	atomic_fetch_add(&s->files_total, 1);
	atomic_fetch_add(&s->bytes_total, n->size);
	/* a hard link to a file restored before */
	if (n->links > 1) {
		struct link_ent *le;
		int rc = link_find_or_add(s, n->inode, n->device_id, rel, &le);
		if (rc != 0)
			return rc;
		if (le != NULL) {
			const char *first = le->rel;
			atomic_fetch_sub(&s->bytes_total, n->size);
			if (s->o.dry_run) {
				if (le->failed)
					rix__rs_report(s, rel, "hard link to /%s, whose content could not be restored", first);
				else
					atomic_fetch_add(&s->files_restored, 1);
				return 0;
			}
			bool existed;
			int what = replace_entry(s, pfd, name, n, rel, &existed, NULL, NULL);
			if (what == 0)
				skipped(s, 0);
			if (what != 1)
				return 0;
			char *slash = strrchr(first, '/');
			int ffd = s->tfd;
			if (slash != NULL) {
				char *dir = dup_n(first, (size_t)(slash - first));
				if (dir == NULL)
					return rix_error_set(RIX_ENOMEM, "restore: out of memory");
				ffd = open_beneath(s, dir, O_RDONLY | O_DIRECTORY);
				rix_free(dir);
			}
			if (ffd < 0 || linkat(ffd, slash ? slash + 1 : first, pfd, name, 0) != 0) {
				rix__rs_report(s, rel, "hard link to /%s: %s", first, strerror(errno));
			} else if (le->failed) {
				rix__rs_report(s, rel, "hard link to /%s, whose content could not be restored", first);
			} else if (le->done) {
				atomic_fetch_add(&s->files_restored, 1);
				rix__rs_item(s, "restored", rel, false, 0);
			} else {
				/* told when the first fails later in its batch */
				char *copy = dup_n(rel, strlen(rel));
				if (copy != NULL && rix__rs_grow((void **)&le->others, &le->capothers, le->nothers, sizeof(char *)) == 0) {
					le->others[le->nothers++] = copy;
				} else {
					rix_free(copy);
					atomic_store(&s->nomem, true);
				}
				atomic_fetch_add(&s->files_restored, 1);
				rix__rs_item(s, "restored", rel, false, 0);
			}
			if (ffd >= 0 && ffd != s->tfd)
				close(ffd);
			return 0;
		}
	}
	/* its blobs: where they are, and their sizes (which must add up to the node's), into the
	 * refs past nrefs (the plan's only once the file is: nrefs grows at the end) */
	int rc = rix__rs_reserve((void **)&s->refs, &s->caprefs, s->nrefs + n->content_len, sizeof(*s->refs));
	if (rc != 0)
		return rc;
	struct ref *refs = n->content_len > 0 ? s->refs + s->nrefs : NULL; /* refs is NULL before the first blob */
	bool missing = false;
	uint64_t sum = 0;
	/* Looked up RS_LOOKUP_BATCH at a time, the misses of many overlapping (a known single lookup
	 * waits for each of its lines in turn: bench/RESULTS.md). A blob found with length 0 (a
	 * dedup-only index gives no location; an index file may omit the length) cannot be read:
	 * reported, as one the index lacks is. */
	rix_packed_blob pbs[RS_LOOKUP_BATCH];
	bool found[RS_LOOKUP_BATCH];
	for (size_t b0 = 0; b0 < n->content_len && !missing; b0 += RS_LOOKUP_BATCH) {
		size_t bn = n->content_len - b0 < RS_LOOKUP_BATCH ? n->content_len - b0 : RS_LOOKUP_BATCH;
		(void)rix_master_index_lookup_many(pbs, found, s->mi, RIX_BLOB_DATA, &n->content[b0], bn);
		for (size_t j = 0; j < bn; j++) {
			const rix_packed_blob *pb = &pbs[j];
			if (!found[j] || pb->length == 0) {
				char hex[65];
				rix_id_to_hex(hex, &n->content[b0 + j]);
				if (found[j])
					rix__rs_report(s, rel, "data blob %s has no location in the index (length 0)", hex);
				else
					rix__rs_report(s, rel, "data blob %s is not in the index", hex);
				missing = true;
				break;
			}
			uint32_t pn = 0;
			if ((rc = rix__rs_pack_number(s, &pb->pack_id, &pn)) != 0)
				return rc;
			refs[b0 + j] = (struct ref){ .pack = pn, .blob = pb->id, .off = pb->offset, .len = pb->length,
						     .ulen = pb->uncompressed_length, .file = (uint32_t)s->nfiles, .at = sum };
			sum += rix_blob_plain_size(pb->length, pb->uncompressed_length);
		}
	}
	if (!missing && sum != n->size) {
		rix__rs_report(s, rel, "the snapshot gives the file %llu bytes and its content %llu", (unsigned long long)n->size,
		       (unsigned long long)sum);
		missing = true;
	}
	/* the hard links to a file not restored share its failure */
	struct link_ent *self = n->links > 1 ? rix__rs_link_find(s, n->inode, n->device_id) : NULL;
	if (missing && self != NULL)
		self->failed = true;
	if (s->o.dry_run) {
		if (!missing) {
			atomic_fetch_add(&s->files_restored, 1);
			atomic_fetch_add(&s->bytes_restored, n->size);
		}
		return 0;
	}
	bool existed, keep;
	struct stat kst;
	int what = replace_entry(s, pfd, name, n, rel, &existed, &keep, &kst);
	if (what < 0) {
		if (self != NULL)
			self->failed = true;
		return 0;
	}
	if (what == 0 && !keep) {
		skipped(s, n->size);
		return 0;
	}
	if (keep)
		skipped(s, n->size);
	/* a file with content and no other link is made by the first worker that writes into it
	 * (make_file): not here, one at a time; the others here, where the walk's hard links to
	 * them can be made at once */
	bool later = !keep && !missing && n->links <= 1 && n->content_len > 0;
	if (!keep && !later) {
		int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		int e = errno;
		if (fd >= 0 && (fstat(fd, &kst) != 0 || ftruncate(fd, (off_t)n->size) != 0)) {
			e = errno;
			close(fd);
			fd = -1;
		} else if (fd >= 0) {
			int c = close(fd);
			e = errno;
			fd = c == 0 ? 0 : -1;
		}
		if (fd < 0) {
			rix__rs_report(s, rel, "create: %s", strerror(e));
			if (self != NULL)
				self->failed = true;
			return 0;
		}
		if (missing)
			return 0;
	}
	/* into the plan */
	rc = rix__rs_grow((void **)&s->files, &s->capfiles, s->nfiles, sizeof(*s->files));
	if (rc != 0)
		return rc;
	struct rfile *f = &s->files[s->nfiles];
	memset(f, 0, sizeof(*f));
	f->size = n->size;
	f->keep = keep;
	f->linked = n->links > 1;
	f->ino = n->inode;
	f->dev = n->device_id;
	f->existed = existed;
	atomic_init(&f->made, !later);
	if (!later) {
		f->tdev = (uint64_t)kst.st_dev;
		f->tino = (uint64_t)kst.st_ino;
	}
	if ((f->rel = dup_n(rel, strlen(rel))) == NULL || meta_copy(&s->names, &f->m, n) != 0) {
		rix_free(f->rel);
		return rix_error_set(RIX_ENOMEM, "restore: out of memory");
	}
	if (s->o.verify && !keep && n->content_len > 0) {
		f->content = rix_malloc(n->content_len * sizeof(*f->content));
		f->sizes = rix_malloc(n->content_len * sizeof(*f->sizes));
		if (f->content == NULL || f->sizes == NULL) {
			rix_free(f->content);
			rix_free(f->sizes);
			rix_free(f->rel);
			rix__rs_meta_free(&f->m);
			return rix_error_set(RIX_ENOMEM, "restore: out of memory");
		}
		memcpy(f->content, n->content, n->content_len * sizeof(*f->content));
		f->ncontent = n->content_len;
	}
	s->nfiles++;
	/* A blob costs its ref and the file's copies of its ID and size (36). The pack table
	 * (packids, packnum) is the whole restore's, bounded by the packs, and not counted here. */
	s->plan_bytes += sizeof(*f) + strlen(rel) + meta_bytes(&f->m) + n->content_len * (sizeof(struct ref) + 36);
	if (keep)
		return 0;
	f->nrefs = n->content_len;
	atomic_init(&f->left, n->content_len);
	if (f->sizes != NULL)
		for (size_t i = 0; i < n->content_len; i++)
			f->sizes[i] = rix_blob_plain_size(refs[i].len, refs[i].ulen);
	s->nrefs += n->content_len;
	if (s->plan_bytes >= (s->o.memory ? s->o.memory : RIX_RESTORE_MEMORY_DEFAULT))
		return rix__rs_run_batch(s);
	return 0;
}

/* Whether an entry that is not a regular file or a directory (counted) is to be made at
 * pfd/name: not in a dry run (counted restored), not when the target keeps what is there
 * (counted skipped) or it cannot be replaced (reported). */
static bool make_entry(struct rs *s, int pfd, const char *name, const rix_node *n, const char *rel)
{
	atomic_fetch_add(&s->files_total, 1);
	if (s->o.dry_run) {
		atomic_fetch_add(&s->files_restored, 1);
		return false;
	}
	bool existed;
	int what = replace_entry(s, pfd, name, n, rel, &existed, NULL, NULL);
	if (what == 0)
		skipped(s, 0);
	return what == 1;
}

/* An entry made by make_entry's caller: its metadata set (from the node, nothing copied). */
static void made_entry(struct rs *s, int pfd, const char *name, const rix_node *n, const char *rel, bool symlink)
{
	struct meta m;
	meta_view(&m, n);
	meta_at(s, pfd, name, &m, rel, symlink);
	atomic_fetch_add(&s->files_restored, 1);
	rix__rs_item(s, "restored", rel, false, 0);
}

static void add_symlink(struct rs *s, int pfd, const char *name, const rix_node *n, const char *rel)
{
	if (n->linktarget == NULL || memchr(n->linktarget, '\0', n->linktarget_len) != NULL || n->linktarget_len >= 65536) {
		atomic_fetch_add(&s->files_total, 1);
		rix__rs_report(s, rel, "a symlink target that no file system can hold");
		return;
	}
	if (!make_entry(s, pfd, name, n, rel))
		return;
	char *t = dup_n(n->linktarget, n->linktarget_len);
	if (t == NULL) {
		atomic_store(&s->nomem, true);
		rix__rs_report(s, rel, "out of memory");
		return;
	}
	if (symlinkat(t, pfd, name) != 0)
		rix__rs_report(s, rel, "symlink: %s", strerror(errno));
	else
		made_entry(s, pfd, name, n, rel, true);
	rix_free(t);
}

static void add_special(struct rs *s, int pfd, const char *name, const rix_node *n, const char *rel)
{
	if (n->type == RIX_NODE_SOCKET)
		return; /* restic does not restore sockets */
	mode_t type = n->type == RIX_NODE_FIFO ? S_IFIFO : n->type == RIX_NODE_CHARDEV ? S_IFCHR : S_IFBLK;
	if (type != S_IFIFO && !s->root && !s->o.dry_run) {
		atomic_fetch_add(&s->files_total, 1);
		rix__rs_report(s, rel, "a device node is only restored by root");
		return;
	}
	if (!make_entry(s, pfd, name, n, rel))
		return;
	if (mknodat(pfd, name, type | 0600, (dev_t)n->device) != 0)
		rix__rs_report(s, rel, "mknod: %s", strerror(errno));
	else
		made_entry(s, pfd, name, n, rel, false);
}

/* ---- --delete ---------------------------------------------------------------------------------- */

/* Removes pfd/name and, for a directory, everything in it (never following a symlink). */
static int remove_all(int pfd, const char *name, int depth)
{
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(pfd, name, 0);
	if (depth > 4096) {
		errno = ELOOP;
		return -1;
	}
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return -1;
	}
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			rc = remove_all(fd, e->d_name, depth + 1);
	closedir(d);
	return rc == 0 ? unlinkat(pfd, name, AT_REMOVEDIR) : rc;
}

/* What dir (frame f, open as fd) holds and its tree does not: removed, when selected. */
static void delete_extra(struct rs *s, const struct frame *f, int fd)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
		rix__rs_report(s, f->rel, "list for --delete: %s", strerror(errno));
		return;
	}
	/* names first (removing while reading a directory skips entries) */
	char **names = NULL;
	size_t nn = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    rix_tree_find(f->t, e->d_name, strlen(e->d_name)) != NULL)
			continue;
		if (rix__rs_grow((void **)&names, &cap, nn, sizeof(*names)) != 0 ||
		    (names[nn] = dup_n(e->d_name, strlen(e->d_name))) == NULL) {
			atomic_store(&s->nomem, true);
			break;
		}
		nn++;
	}
	closedir(d);
	for (size_t i = 0; i < nn; i++) {
		size_t rl = f->rel_len + 1 + strlen(names[i]) + 1;
		char *rel = rix_malloc(rl);
		if (rel != NULL) {
			snprintf(rel, rl, "%s%s%s", f->rel, f->rel_len ? "/" : "", names[i]);
			char loc[8192];
			struct stat st;
			bool sel, child, isdir = fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
			if (selected(s, loc_of(loc, sizeof(loc), rel), isdir, &sel, &child) != 0) {
				/* not known to be selected: kept (an excluded path is never deleted) */
				atomic_store(&s->nomem, true);
				rix__rs_report(s, rel, "delete: %s", rix_error_last());
			} else if (sel) {
				if (s->o.dry_run || remove_all(fd, names[i], 0) == 0) {
					atomic_fetch_add(&s->files_deleted, 1);
					rix__rs_item(s, "deleted", rel, false, 0);
				} else {
					rix__rs_report(s, rel, "delete: %s", strerror(errno));
				}
			}
			rix_free(rel);
		} else {
			atomic_store(&s->nomem, true);
		}
		rix_free(names[i]);
	}
	rix_free(names);
}

/* ---- the walk ---------------------------------------------------------------------------------- */

static int push(struct rs *s, rix_tree *t, const char *rel, size_t rel_len, bool sel, const rix_node *n)
{
	int rc = rix__rs_grow((void **)&s->st, &s->capst, s->depth + 1, sizeof(*s->st));
	if (rc != 0)
		return rc;
	struct frame *f = &s->st[++s->depth];
	memset(f, 0, sizeof(*f));
	f->t = t;
	f->fd = -1;
	f->selected = sel;
	f->rel_len = rel_len;
	if ((f->rel = dup_n(rel, rel_len)) == NULL || (n != NULL && meta_copy(&s->names, &f->m, n) != 0)) {
		rix_free(f->rel);
		s->depth--;
		return rix_error_set(RIX_ENOMEM, "restore: out of memory");
	}
	return 0;
}

/* Leaves the current frame: --delete, its metadata queued, its fd closed. */
static int pop(struct rs *s)
{
	struct frame *f = &s->st[s->depth];
	int rc = 0;
	if (s->o.delete_extra && s->o.dry_run && s->depth > 0 && f->selected && s->tfd >= 0) {
		/* a dry run makes no directory: what one that is there holds is listed */
		int fd = open_beneath(s, f->rel, O_RDONLY | O_DIRECTORY);
		if (fd >= 0) {
			delete_extra(s, f, fd);
			close(fd);
		}
	} else if (s->o.delete_extra && (f->created || s->depth == 0)) {
		bool own;
		int fd = s->depth == 0 ? s->tfd : frame_fd(s, s->depth, &own);
		if (fd >= 0) {
			delete_extra(s, f, fd);
			if (s->depth > 0 && own)
				close(fd);
		}
	}
	/* restic's leaveDir: a directory selected, or made for an entry restored beneath it (a
	 * directory an --include passes through), gets its metadata */
	if (s->depth > 0 && f->created && !s->o.dry_run) {
		rc = rix__rs_grow((void **)&s->dirs, &s->capdirs, s->ndirs, sizeof(*s->dirs));
		if (rc == 0) {
			s->dirs[s->ndirs].rel = f->rel;
			s->dirs[s->ndirs++].m = f->m;
			f->rel = NULL;
			memset(&f->m, 0, sizeof(f->m));
		}
	}
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	rix_tree_free(f->t);
	f->t = NULL;
	rix_free(f->rel);
	f->rel = NULL;
	rix__rs_meta_free(&f->m);
	if (s->depth > 0)
		s->depth--;
	return rc;
}

static int walk(struct rs *s, rix_tree *root)
{
	/* frame 0: the target itself */
	int rc = rix__rs_grow((void **)&s->st, &s->capst, 0, sizeof(*s->st));
	if (rc != 0) {
		rix_tree_free(root);
		return rc;
	}
	memset(&s->st[0], 0, sizeof(s->st[0]));
	s->st[0].t = root;
	s->st[0].fd = -1;
	s->st[0].created = true;
	s->st[0].selected = false;
	if ((s->st[0].rel = dup_n("", 0)) == NULL) {
		rix_tree_free(root);
		return rix_error_set(RIX_ENOMEM, "restore: out of memory");
	}
	s->depth = 0;
	char *loc = NULL; /* "/" + rel: what patterns see */
	char *rel = NULL;
	size_t relcap = 0;
	for (;;) {
		struct frame *f = &s->st[s->depth];
		if (f->next >= rix_tree_count(f->t)) {
			bool last = s->depth == 0;
			if ((rc = pop(s)) != 0 || last)
				break;
			continue;
		}
		const rix_node *n = rix_tree_node(f->t, f->next++);
		size_t need = 1 + f->rel_len + 1 + n->name_len + 1;
		if (need > relcap) {
			char *nl = rix_realloc(loc, need * 2);
			if (nl == NULL) {
				rc = rix_error_set(RIX_ENOMEM, "restore: out of memory");
				break;
			}
			loc = nl;
			loc[0] = '/';
			rel = loc + 1;
			relcap = need * 2;
		}
		size_t rl = 0;
		if (f->rel_len > 0) {
			memcpy(rel, f->rel, f->rel_len);
			rel[f->rel_len] = '/';
			rl = f->rel_len + 1;
		}
		memcpy(rel + rl, n->name, n->name_len);
		rl += n->name_len;
		rel[rl] = '\0';
		if (!valid_name(n->name, n->name_len)) {
			rix__rs_report(s, f->rel, "refused: a name no directory entry can have in this directory");
			continue;
		}
		if (rl + 2 > PATH_LIMIT) { /* "/" + rel + NUL */
			rix__rs_report(s, rel, "a path of %zu bytes, longer than the %d paths may have: not restored", rl + 1,
			       PATH_LIMIT - 1);
			continue;
		}
		bool child, sel;
		int src = selected(s, loc, n->type == RIX_NODE_DIR, &sel, &child);
		if (src != 0) {
			rc = src;
			break;
		}
		if (n->type == RIX_NODE_DIR) {
			if (!sel && !child)
				continue;
			rix_tree *t;
			if (n->subtree == NULL) {
				rix__rs_report(s, rel, "a directory without a subtree");
				continue;
			}
			if ((rc = rix_tree_load(&t, s->r, n->subtree)) != 0) {
				if (rc == RIX_ENOMEM)
					break;
				rix__rs_report(s, rel, "%s", rix_error_last());
				rc = 0;
				continue;
			}
			if ((rc = push(s, t, rel, rl, sel, n)) != 0) {
				rix_tree_free(t);
				break;
			}
			if (sel) {
				atomic_fetch_add(&s->files_total, 1);
				if (!s->o.dry_run) {
					bool own;
					int fd = frame_fd(s, s->depth, &own);
					if (fd >= 0 && own)
						close(fd);
					if (fd < 0) { /* not made: nothing goes into it */
						s->st[s->depth].next = rix_tree_count(t);
						s->st[s->depth].selected = false;
						continue;
					}
				}
				atomic_fetch_add(&s->files_restored, 1); /* made (or there) */
				rix__rs_item(s, "restored", rel, false, 0);
			}
			continue;
		}
		if (!sel)
			continue;
		bool own = false;
		int pfd = -1;
		if (!s->o.dry_run && (pfd = frame_fd(s, s->depth, &own)) < 0)
			continue;
		switch (n->type) {
		case RIX_NODE_FILE:
			rc = add_file(s, pfd, rel + (rl - n->name_len), n, rel);
			break;
		case RIX_NODE_SYMLINK:
			add_symlink(s, pfd, rel + (rl - n->name_len), n, rel);
			break;
		default:
			add_special(s, pfd, rel + (rl - n->name_len), n, rel);
			break;
		}
		if (own)
			close(pfd);
		if (rc != 0)
			break;
	}
	while (rc != 0 && (s->depth > 0 || s->st[0].t != NULL)) { /* unwinding after an error */
		bool last = s->depth == 0;
		struct frame *f = &s->st[s->depth];
		if (f->fd >= 0)
			close(f->fd);
		rix_tree_free(f->t);
		f->t = NULL;
		rix_free(f->rel);
		rix__rs_meta_free(&f->m);
		if (last)
			break;
		s->depth--;
	}
	rix_free(loc);
	return rc;
}

/* ---- progress --------------------------------------------------------------------------------- */

static void fill_progress(const struct rs *s, rix_restore_progress *p)
{
	p->seconds = elapsed(s);
	p->files_total = atomic_load(&s->files_total);
	p->files_restored = atomic_load(&s->files_restored);
	p->files_skipped = atomic_load(&s->files_skipped);
	p->files_deleted = atomic_load(&s->files_deleted);
	p->bytes_total = atomic_load(&s->bytes_total);
	p->bytes_restored = atomic_load(&s->bytes_restored);
	p->bytes_skipped = atomic_load(&s->bytes_skipped);
	p->errors = atomic_load(&s->errors);
}

static void *progress_thread(void *arg)
{
	struct rs *s = arg;
	unsigned ms = s->o.progress_interval_ms ? s->o.progress_interval_ms : 250;
	pthread_mutex_lock(&s->pmu);
	while (!s->pt_stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += ms / 1000;
		until.tv_nsec += (long)(ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->pcv, &s->pmu, &until);
		if (s->pt_stop)
			break;
		rix_restore_progress p = { 0 };
		fill_progress(s, &p);
		pthread_mutex_unlock(&s->pmu);
		pthread_mutex_lock(&s->cb);
		s->o.progress(s->o.payload, &p);
		pthread_mutex_unlock(&s->cb);
		pthread_mutex_lock(&s->pmu);
	}
	pthread_mutex_unlock(&s->pmu);
	return NULL;
}

/* ---- the API --------------------------------------------------------------------------------- */

int rix_tree_find_dir(rix_id *out, rix_repo *r, const rix_id *root, const char *path)
{
	rix_id id = *root;
	char sub[4096] = "";
	size_t sl = 0;
	for (const char *p = path ? path : ""; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		if (!(n == 1 && p[0] == '.')) {
			sl += (size_t)snprintf(sub + sl, sizeof(sub) - sl, "/%.*s", (int)n, p);
			if (sl >= sizeof(sub))
				return rix_error_set(RIX_EINVAL, "restore: a path of over 4096 bytes");
			rix_tree *t;
			int rc = rix_tree_load(&t, r, &id);
			if (rc != 0) {
				char msg[512];
				snprintf(msg, sizeof(msg), "%s", rix_error_last());
				return rix_error_set(rc, "path %s: %s", sub, msg);
			}
			const rix_node *nd = rix_tree_find(t, p, n);
			if (nd == NULL || nd->type != RIX_NODE_DIR || nd->subtree == NULL) {
				rc = rix_error_set(RIX_ENOTFOUND, "path %s: %s", sub, nd == NULL ? "not found" : "not a directory");
				rix_tree_free(t);
				return rc;
			}
			id = *nd->subtree;
			rix_tree_free(t);
		}
		p += n;
	}
	*out = id;
	return 0;
}

int rix_restore(rix_restore_summary *sum, rix_repo *r, const rix_id *tree, const char *target,
		const rix_restore_options *opt)
{
	rix_restore_options def = RIX_RESTORE_OPTIONS_INIT;
	if (opt == NULL)
		opt = &def;
	if (sum != NULL)
		memset(sum, 0, sizeof(*sum));
	if (opt->version != RIX_RESTORE_OPTIONS_VERSION)
		return rix_error_set(RIX_EINVAL, "restore: options of version %u (this librix knows %u)", opt->version,
				     RIX_RESTORE_OPTIONS_VERSION);
	if ((opt->nincludes + opt->niincludes) > 0 && (opt->nexcludes + opt->niexcludes) > 0)
		return rix_error_set(RIX_EINVAL, "exclude and include patterns are mutually exclusive");
	if ((unsigned)opt->overwrite > RIX_OVERWRITE_NEVER)
		return rix_error_set(RIX_EINVAL, "restore: overwrite %d is none of always, if-changed, if-newer, never",
				     (int)opt->overwrite);
	if (opt->dry_run && opt->verify)
		return rix_error_set(RIX_EINVAL, "--dry-run and --verify are mutually exclusive");
	struct rs *s = rix_calloc(1, sizeof(*s));
	if (s == NULL)
		return rix_error_set(RIX_ENOMEM, "restore: out of memory");
	s->r = r;
	s->mi = rix_repo_master_index(r);
	s->o = *opt;
	s->tfd = -1;
	s->root = geteuid() == 0;
	clock_gettime(CLOCK_MONOTONIC, &s->start);
	pthread_mutex_init(&s->cb, NULL);
	for (size_t i = 0; i < MK_LOCKS; i++)
		pthread_mutex_init(&s->mk[i], NULL);
	pthread_mutex_init(&s->pmu, NULL);
	pthread_cond_init(&s->pcv, NULL);

	rix_tree *root = NULL;
	int rc = rix_patterns_new(&s->includes, opt->includes, opt->nincludes, opt->iincludes, opt->niincludes);
	if (rc == 0)
		rc = rix_patterns_new(&s->excludes, opt->excludes, opt->nexcludes, opt->iexcludes, opt->niexcludes);
	if (rc == 0)
		rc = rix_tree_load(&root, r, tree);
	if (rc == 0 && !opt->dry_run) {
		if (mkdir(target, 0700) != 0 && errno != EEXIST)
			rc = rix_error_set(errno == ENOENT ? RIX_ENOTFOUND : RIX_EIO, "restore: make %s: %s", target,
					   strerror(errno));
		else if ((s->tfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			rc = rix_error_set(errno == ENOENT ? RIX_ENOTFOUND : RIX_EIO, "restore: open %s: %s", target,
					   strerror(errno));
	} else if (rc == 0 && opt->delete_extra) {
		s->tfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* a dry run lists what it would delete */
	}
	if (rc == 0 && opt->progress != NULL)
		s->pt_running = pthread_create(&s->pt, NULL, progress_thread, s) == 0;
	if (rc == 0) {
		rc = walk(s, root);
		root = NULL;
		if (rc == 0)
			rc = rix__rs_run_batch(s);
		else
			rix__rs_run_batch(s); /* what was planned is still written and freed */
	}
	rix_tree_free(root);
	/* the directories' metadata, children before parents */
	for (size_t i = 0; i < s->ndirs; i++) {
		struct dmeta *d = &s->dirs[i];
		if (rc == 0) {
			int fd = open_beneath(s, d->rel, O_RDONLY | O_DIRECTORY);
			if (fd < 0) {
				rix__rs_report(s, d->rel, "open directory: %s", strerror(errno));
			} else {
				rix__rs_meta_fd(s, fd, &d->m, d->rel);
				close(fd);
			}
		}
		rix_free(d->rel);
		rix__rs_meta_free(&d->m);
	}
	if (s->pt_running) {
		pthread_mutex_lock(&s->pmu);
		s->pt_stop = true;
		pthread_cond_signal(&s->pcv);
		pthread_mutex_unlock(&s->pmu);
		pthread_join(s->pt, NULL);
	}
	if (opt->progress != NULL) {
		rix_restore_progress p = { 0 };
		fill_progress(s, &p);
		p.done = true;
		opt->progress(opt->payload, &p);
	}
	if (sum != NULL) {
		sum->files_total = s->files_total;
		sum->files_restored = s->files_restored;
		sum->files_skipped = s->files_skipped;
		sum->files_deleted = s->files_deleted;
		sum->bytes_total = s->bytes_total;
		sum->bytes_restored = s->bytes_restored;
		sum->bytes_skipped = s->bytes_skipped;
		sum->errors = s->errors;
		sum->verified = s->verified;
		sum->batches = s->batches;
		sum->packs = s->packs;
		sum->seconds = elapsed(s);
	}
	if (rc == 0 && atomic_load(&s->nomem))
		rc = rix_error_set(RIX_ENOMEM, "restore: out of memory (%llu entries not restored)",
				   (unsigned long long)s->errors);
	if (rc == 0 && s->errors > 0)
		rc = rix_error_set(RIX_EIO, "restore: %llu errors", (unsigned long long)s->errors);
	for (size_t i = 0; i < s->caplinks; i++) {
		rix_free(s->links[i].rel);
		for (size_t k = 0; k < s->links[i].nothers; k++)
			rix_free(s->links[i].others[k]);
		rix_free(s->links[i].others);
	}
	rix_free(s->links);
	rix_patterns_free(s->includes);
	rix_patterns_free(s->excludes);
	rix_free(s->dirs);
	rix_free(s->st);
	rix_free(s->files);
	rix_free(s->refs);
	rix_free(s->packids);
	rix_indexmap_free(s->packnum);
	names_free(&s->names);
	if (s->tfd >= 0)
		close(s->tfd);
	pthread_mutex_destroy(&s->cb);
	for (size_t i = 0; i < MK_LOCKS; i++)
		pthread_mutex_destroy(&s->mk[i]);
	pthread_mutex_destroy(&s->pmu);
	pthread_cond_destroy(&s->pcv);
	rix_free(s);
	return rc;
}
