/*
 * backup/restorer_internal.h — private to the restorer's files: restorer.c (the walk, the
 * entries, metadata, opening beneath the target, the API) and restore_batch.c (a batch: the
 * plan sorted by pack, each pack read once, its blobs written into the files). The restore's
 * state and the functions one file lends the other. How a restore works: atop restorer.c.
 */
#ifndef RIX_RESTORER_INTERNAL_H
#define RIX_RESTORER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "rix/indexmap.h"
#include "rix/master_index.h"
#include "rix/pattern.h"
#include "rix/repo.h"
#include "rix/restorer.h"
#include "rix/tree.h"

/* Frames up to this depth keep their directory open; deeper ones are opened when needed. */
#define FD_DEPTH 64
/* Files each worker keeps open (by file number modulo this). */
#define FD_CACHE 16
/* Locks the workers take to make a file (by file number modulo this): one file made once. */
#define MK_LOCKS 64
/* The longest path restored, "/" and the NUL included (PATH_MAX, which restic meets first): a
 * deeper or longer one is an error naming it. It bounds the walk's frames (depth <= 2048, each
 * path < 4096 bytes) whatever the trees hold. */
#define PATH_LIMIT 4096

/* ---- metadata ------------------------------------------------------------------------------ */

/* An entry's metadata: a copy of its node's (meta_copy, meta_free), or a view of them for what
 * is set at once (meta_view: nothing copied, nothing to free). */
struct meta {
	uint32_t mode; /* Go FileMode */
	uint32_t uid, gid;
	const char *user, *group;
	rix_time mtime, atime;
	const rix_xattr *xattrs;
	size_t nxattrs;
	uint8_t own; /* a copy: OWN_USER, OWN_GROUP: user, group its own (else shared names) */
};
#define OWN_USER 1u
#define OWN_GROUP 2u

/*
 * User and group names, each held once for the whole restore (a snapshot's files name a few, and
 * a copy a file would cost as much as its path): the first NAMES_MAX distinct ones are shared by
 * every copy of metadata that names them; past that a copy holds its own (a crafted tree of
 * many names costs no search longer than NAMES_MAX).
 */
#define NAMES_MAX 64
struct names {
	char *v[NAMES_MAX];
	size_t n;
};

/* ---- the restore's state ------------------------------------------------------------------ */

struct rfile {
	char *rel;
	struct meta m;
	uint64_t size;
	rix_id *content; /* with verify: the blobs, and their sizes */
	uint32_t *sizes;
	size_t ncontent;
	atomic_int failed;
	/* Made in the target: by the walk (a file with no content, or hard links, which the walk
	 * links to it), else by the first worker that writes into it (under the lock mk[file %
	 * MK_LOCKS]); set once the making was tried, tdev and tino then written (release). */
	atomic_bool made;
	size_t nrefs;    /* its refs in the plan (0: no content, or kept) */
	atomic_size_t left; /* refs not written (or failed) yet: the worker that takes it to 0 sets
			     * the metadata (after every write to the file is done) */
	bool keep;       /* if-changed: the file there is kept, its metadata restored */
	bool linked;     /* links > 1: ino and dev name its entry in the hard link table */
	uint64_t ino, dev;
	bool existed;    /* "updated" rather than "restored" */
	uint64_t tdev, tino; /* the file in the target: the one made (O_EXCL), or the one kept (made) */
};

struct ref {
	rix_id blob;
	uint64_t at;
	uint32_t pack; /* in rs.packids: the plan holds a pack's ID once, not once a blob */
	uint32_t off, len, ulen;
	uint32_t file;
};

struct frame {
	rix_tree *t;
	size_t next;
	char *rel; /* "" for the target */
	size_t rel_len;
	int fd;    /* -1: not open (deeper than FD_DEPTH, or not made yet) */
	bool created, selected;
	struct meta m;
};

struct dmeta {
	char *rel;
	struct meta m;
};

struct link_ent {
	uint64_t ino, dev;
	char *rel;      /* the first path restored; NULL: an empty slot */
	bool failed;    /* its content could not be restored */
	bool done;      /* its batch is over: links made later need no record */
	char **others;  /* the links made to it since (reported if it fails) */
	size_t nothers, capothers;
};

struct rs {
	rix_repo *r;
	rix_master_index *mi;
	rix_restore_options o;
	rix_patterns *includes, *excludes; /* o's, compiled */
	int tfd;
	bool root;
	struct timespec start;
	/* plan */
	struct rfile *files;
	size_t nfiles, capfiles;
	struct ref *refs;
	size_t nrefs, caprefs;
	rix_id *packids;       /* the packs the refs name, numbered as met (the whole restore) */
	size_t npackids, cappackids;
	rix_indexmap *packnum; /* pack ID -> its number (loc.pack) */
	uint32_t lastpack;     /* the number pack_number gave last (a file's blobs share packs) */
	struct names names;    /* user and group names of the metadata held */
	uint64_t plan_bytes;
	/* walk */
	struct frame *st;
	size_t depth, capst;
	struct dmeta *dirs;
	size_t ndirs, capdirs;
	struct link_ent *links;
	size_t nlinks, caplinks;
	/* batch execution */
	size_t *jobs; /* start of each pack's refs in refs; njobs + 1 entries */
	size_t njobs;
	atomic_size_t next_job;
	pthread_mutex_t mk[MK_LOCKS];
	/* counts */
	_Atomic uint64_t files_total, files_restored, files_skipped, files_deleted;
	_Atomic uint64_t bytes_total, bytes_restored, bytes_skipped, errors, verified, packs;
	uint64_t batches;
	atomic_bool nomem; /* an allocation failed somewhere: the restore returns RIX_ENOMEM */
	atomic_bool xattr_warned;
	pthread_mutex_t cb; /* one callback at a time */
	/* progress thread */
	pthread_t pt;
	bool pt_running, pt_stop;
	pthread_mutex_t pmu;
	pthread_cond_t pcv;
};

/* ---- lent by restorer.c to restore_batch.c ---------------------------------------------------- */

/* An error about rel ("a/b" from the target): counted, and given to the error callback. */
void rix__rs_report(struct rs *s, const char *rel, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* What was done to rel (the item callback: "restored", "updated", ...). */
void rix__rs_item(struct rs *s, const char *action, const char *rel, bool file, uint64_t size);
/* Grows *v (of *cap elements of size sz) to hold n (reserve) or n + 1 (grow). @return 0, RIX_ENOMEM. */
int rix__rs_reserve(void **v, size_t *cap, size_t n, size_t sz);
int rix__rs_grow(void **v, size_t *cap, size_t n, size_t sz);
/* rel opened beneath the target, never through a symlink (mode: with O_CREAT). An fd, or -1
 * with errno set. */
int rix__rs_open_beneath_mode(const struct rs *s, const char *rel, int flags, mode_t mode);
/* File f reopened beneath the target, checked to be the file made or kept (its dev and inode):
 * an fd, or < 0 (rix__rs_open_error says why). */
int rix__rs_open_planned(const struct rs *s, const struct rfile *f, int flags);
const char *rix__rs_open_error(int rc);
/* Frees what a copy of metadata holds of its own. */
void rix__rs_meta_free(struct meta *m);
/* m set on the open file fd (rel: for messages): owner, mode, xattrs, times. */
void rix__rs_meta_fd(struct rs *s, int fd, const struct meta *m, const char *rel);
/* The hard link table's entry of (ino, dev), or NULL. */
struct link_ent *rix__rs_link_find(struct rs *s, uint64_t ino, uint64_t dev);

/* ---- restore_batch.c ---------------------------------------------------------------------------- */

/* The number of pack_id in the plan's pack table (added when new). @return 0, RIX_ENOMEM,
 * RIX_ELIMIT. */
int rix__rs_pack_number(struct rs *s, const rix_id *pack_id, uint32_t *num);
/* Runs the batch the plan holds (see atop restorer.c, 2.), then empties the plan. @return 0, or
 * RIX_ENOMEM; errors of files are reported, not returned. */
int rix__rs_run_batch(struct rs *s);

#endif
