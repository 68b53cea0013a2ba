/*
 * backup/archiver_internal.h — private to the backup's files: archiver.c (the walk, reading,
 * chunking, saving, trees, the snapshot) and backup_progress.c (the scanner that counts what
 * there is to do, and the reporter that tells how far the backup is). The backup's state and the
 * functions one file lends the other. How a backup works: atop archiver.c.
 */
#ifndef RIX_ARCHIVER_INTERNAL_H
#define RIX_ARCHIVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "rix/archiver.h"
#include "rix/chunker.h"
#include "rix/master_index.h"
#include "rix/pattern.h"
#include "rix/snapshot.h"
#include "rix/tree.h"

#define READ_PIECE ((size_t)256 << 10) /* what moves after a cut is less than this */

/* uid/gid -> name, looked up once each; names stay put until the backup ends (nodes point at
 * them until their tree is encoded). */
struct names_cache {
	struct {
		uint32_t id;
		char *name;
	} *v;
	size_t n, cap;
};

/* What one thread needs to read and cut files. */
struct worker {
	rix_chunker *ch;
	uint8_t *chunk; /* RIX_CHUNK_MAX: the current chunk, read straight into */
	pthread_mutex_t cur_mu; /* cur, with progress on: the reporter copies it */
	const char *cur;        /* the file being read (borrowed from its job), or NULL */
};

/*
 * A directory in flight. The walker lists it and goes on (into its subdirectories, then
 * elsewhere) without waiting; its files are read by the workers. Whichever thread finishes its
 * last file or subdirectory saves its tree, puts the subtree ID into its node in the directory
 * above, and releases that one in turn.
 */
struct dir {
	struct dir *up;    /* the directory holding it; NULL: a top one (counted in arch.top) */
	struct held *slot; /* its node (in up's entries, or the caller's) */
	bool count;        /* counted in the summary's dirs (all but the snapshot's root) */
	bool has_ps;       /* the parent snapshot had it: ps its subtree there */
	rix_id ps;
	struct held *h;    /* its entries, in name order; h[i].name NULL: none */
	size_t n;
	rix_tree *old;     /* its tree in the parent snapshot (queued jobs point into it), or NULL */
	size_t pending;    /* files and subdirectories not done, +1 while the walker lists it (mu) */
	char *path;        /* with opt.item: its path and when it was begun, for the item event */
	struct timespec start;
};

/* A file to read, handed to the workers by the directory that holds it. */
struct job {
	struct job *next;
	char *path;
	struct held *h;
	const rix_node *old; /* its node in the parent (changed, not new), or NULL */
	struct dir *d;       /* the directory it is in */
};

/* Files queued at most; past it the walker reads files too (memory stays bounded). */
#define QUEUE_MAX 128

/*
 * The summary's counters, added to by every thread with relaxed atomics (one add per file or
 * stored blob, never a lock), read by the progress reporter meanwhile and copied into the
 * caller's rix_backup_summary at the end.
 */
struct tally {
	_Atomic uint64_t others, files_new, files_changed, files_unmodified, dirs_new, dirs_changed,
		dirs_unmodified, bytes, bytes_total, data_blobs, data_added, tree_blobs, tree_added, added_packed, errors, excluded;
	_Atomic uint64_t bytes_done; /* progress: bytes read so far (per chunk) and unchanged files' sizes */
	_Atomic uint64_t files_total, dirs_total, bytes_total_scanned; /* the scanner's */
	atomic_int scan_final, scan_stop;
};
#define ADD(a, field, v) atomic_fetch_add_explicit(&(a)->t.field, (uint64_t)(v), memory_order_relaxed)
#define GET(a, field) atomic_load_explicit(&(a)->t.field, memory_order_relaxed)
/* Files and directories done: each is counted once, as new, changed or unmodified. */
#define FILES_DONE(a) (GET(a, files_new) + GET(a, files_changed) + GET(a, files_unmodified))
#define DIRS_DONE(a) (GET(a, dirs_new) + GET(a, dirs_changed) + GET(a, dirs_unmodified))

/* A dry run's blobs: what it would have stored, so that each counts once (256 shards by the
 * first ID byte, each an open-addressing table under its own mutex). */
struct dry_shard {
	pthread_mutex_t mu;
	struct dry_entry {
		rix_id id;
		uint8_t used; /* 0: empty; 1 + blob type */
	} *v;
	size_t n, cap;
};

struct arch {
	dev_t dev;      /* the current target's device (one_file_system) */
	pthread_mutex_t mu; /* warnings, the job queue, the directories' counts, rc */
	pthread_cond_t work; /* a job queued, or stop */
	pthread_cond_t idle; /* the top directories all done */
	struct job *head, **tail;
	size_t queued;  /* jobs in the queue */
	size_t top;     /* top directories not done */
	int stop;
	int rc;         /* the first repository error (of any thread), its message in msg; set
			 * under mu with an atomic store, so failed() reads it without the lock */
	char msg[512];
	struct worker main; /* the calling thread's */
	rix_repo *r;
	rix_backup_options opt;
	rix_backup_summary *sum; /* has_parent, parent_id, skipped; the counts are in t until the end */
	struct tally t;
	struct names_cache users, groups;
	char start[RIX_TIME_MAX]; /* when the backup began (the snapshot's time) */
	rix_time start_time;      /* the same, as a time (no parent from after it, as restic) */
	struct timespec t0;       /* the same, monotonic */
	bool progress_on;         /* opt.progress: workers publish their current file */
	pthread_mutex_t cbmu;     /* item and warn callbacks, one at a time */
	struct worker **readers;  /* every worker and main: their current files */
	size_t nreaders;
	struct dry_shard *dry;    /* opt.dry_run: 256 shards */
	char *cwd;                /* the working directory at the start (relative paths' base) */
	rix_patterns *excl;       /* opt's excludes and iexcludes, compiled once (NULL: none) */
};

struct scan_arg {
	struct arch *a;
	char **targets; /* clean absolute paths (borrowed) */
	size_t n;
	bool dot;       /* targets[0] is the snapshot's root ("."): not counted itself, not marked */
};

/* The progress reporter's wait, and the order to stop. */
struct reporter {
	struct arch *a;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC */
	int stop;
};

/* ---- lent by archiver.c to backup_progress.c ------------------------------------------------ */

struct timespec rix__arch_now_mono(void);
/* Seconds since *t0 (rix__arch_now_mono). */
double rix__arch_since(const struct timespec *t0);
/* Whether the clean absolute path is excluded (out of memory: the backup fails, the entry is
 * left out). */
int rix__arch_is_excluded(struct arch *a, const char *path);
/* Whether directory path is marked to be left out (opt.exclude_if_present, exclude_caches): the
 * marker's name into only (cap bytes). */
int rix__arch_dir_marked(struct arch *a, const char *path, char *only, size_t cap);

/* ---- backup_progress.c ------------------------------------------------------------------------ */

/* The scanner thread (arg: struct scan_arg): counts files, directories and bytes of every
 * target, totals marked final at the end unless stopped. */
void *rix__arch_scanner_main(void *arg);
/* The reporter thread (arg: struct reporter): opt.progress every interval until told to stop,
 * then the last one. */
void *rix__arch_reporter_main(void *arg);
/* The tally into the summary (the fields rix_backup_summary has). */
void rix__arch_tally_out(struct arch *a);

#endif
