/*
 * rix/archiver.h — backing up a directory into a repository, as restic does: every file cut
 * with restic's chunker (rix/chunker.h) into data blobs, every directory a tree blob
 * (rix/tree.h), and a snapshot naming the root tree. Blobs the repository has are not stored
 * again, whichever tool stored them.
 *
 *   rix_backup(&snap_id, &summary, r, paths, n, &opt)
 *       for each path: lstat, read, chunk, rix_repo_save_blob ... trees bottom-up
 *       ──> rix_repo_flush (packs, then index files) ──> the snapshot file, last
 *
 * The order of writes is what makes a backup survive a crash: a snapshot is written only after
 * every blob it references is in a pack named by an index file.
 *
 * Parent snapshot: by default the latest snapshot of the same host and the same paths (restic's
 * rule), or opt->parent. A file whose size, mtime, ctime and inode equal its node in the
 * parent's tree reuses that node's content list without being read (opt->force rereads all).
 *
 * Excludes (restic's flags): patterns matched against an entry's absolute path, one path
 * component per pattern component, `*`, `?` and `[...]` within a component, `**` for any
 * number of components; a pattern not starting with '/' may match at any depth ("*.o" is
 * "**" + "/" + "*.o"); iexcludes ignore case. An excluded directory is not descended into.
 * exclude_if_present: a directory holding a file of that name keeps that file alone ("NAME:TEXT":
 * only when the file starts with TEXT), as restic does; exclude_caches: the same for
 * CACHEDIR.TAG with its standard signature. one_file_system: entries on another device than their target are left
 * out (the mount point itself is kept, empty).
 *
 * Files are read, cut and saved by read_concurrency threads (one per CPU by default) while the
 * calling thread walks the directories without waiting for them (it reads files too when more
 * than a bounded number wait); a directory's tree is saved by whichever thread finishes its
 * last file or subdirectory.
 * An absolute path is backed up under its name, with its ancestors as directory nodes (as
 * restic 0.14 does); a relative one under its own components, as restic lays it out ("src" is
 * /src, "../x/y" is /x/y); "." (and "..", "a/..") becomes the snapshot's root. The snapshot's
 * paths are absolute either way.
 *
 * Progress (opt->progress): counters are atomics the reading threads add to (never a lock per
 * blob); a thread of the backup's own reads them every progress_interval_ms and calls progress;
 * a scanner thread counts the files, directories and bytes to do meanwhile. Per-item events
 * (opt->item) and warnings (opt->warn) come from the threads that finish the item, one call at
 * a time. A dry run (opt->dry_run) hashes every blob and looks it up in the index and in a set
 * of its own, so that it counts what a backup would store, and writes nothing.
 */
#ifndef RIX_ARCHIVER_H
#define RIX_ARCHIVER_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>
#include "rix/repo.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called for a file or directory that could not be read (it is left out, the backup goes on). */
typedef void (*rix_backup_warn_fn)(void *payload, const char *path, const char *msg);

/*
 * Where a backup stands (rix_backup_options.progress), restic's status: counts so far, and the
 * totals a scanner thread counts meanwhile (lstat only, the same excludes), so that a share done
 * and a time left are known early.
 */
typedef struct rix_backup_progress {
	double seconds;               /* since the backup began */
	uint64_t files_done;          /* files read, or taken unchanged from the parent */
	uint64_t dirs_done;           /* directories whose tree is saved */
	uint64_t bytes_done;          /* bytes of files read so far, and the sizes of unchanged files */
	uint64_t files_total, dirs_total, bytes_total; /* what the scanner has counted */
	bool totals_final;            /* the scanner is done: the totals are all there is */
	uint64_t errors;              /* entries left out so far (each warned) */
	const char *const *current;   /* the files being read now, sorted, ncurrent of them */
	size_t ncurrent;
	bool done;                    /* the last call: the backup's work is over */
} rix_backup_progress;

/* Called every progress_interval_ms from a thread of the backup's own (never two calls at
 * once; the last with done set); p and what it points to are borrowed for the call. */
typedef void (*rix_backup_progress_fn)(void *payload, const rix_backup_progress *p);

/* What became of a file or directory against the parent snapshot. */
typedef enum rix_backup_action {
	RIX_BACKUP_NEW = 0,       /* not in the parent */
	RIX_BACKUP_UNCHANGED = 1, /* a file taken from the parent unread; a directory with the same tree */
	RIX_BACKUP_MODIFIED = 2,  /* read again (a file), or another tree (a directory) */
} rix_backup_action;

/* One file or directory done (rix_backup_options.item): restic's verbose_status. */
typedef struct rix_backup_item {
	const char *path;         /* as walked; a directory's ends with '/' */
	bool dir;
	rix_backup_action action;
	double seconds;           /* from its start to done (0 when unchanged) */
	uint64_t data_size;       /* a file: plaintext bytes of the data blobs stored for it now */
	uint64_t metadata_size;   /* a directory: plaintext bytes of its tree blob when stored now */
	/* the same blobs' bytes in their packs (compressed, encrypted: restic's *_size_in_repo);
	 * 0 in a dry run, which stores nothing and cannot know them */
	uint64_t data_size_in_repo, metadata_size_in_repo;
} rix_backup_item;

/* Called for each file and directory done (from any thread of the backup, one call at a time);
 * item and its path are borrowed for the call. */
typedef void (*rix_backup_item_fn)(void *payload, const rix_backup_item *item);

/*
 * Version 2 added the fields after `payload`, and to the summary; version 3 the snapshot's
 * excludes. Options of versions 1 and 2 are still taken (a version 1 caller's summary is
 * written without the fields version 2 added to it).
 */
#define RIX_BACKUP_OPTIONS_VERSION 3u
typedef struct rix_backup_options {
	unsigned version;                 /* RIX_BACKUP_OPTIONS_VERSION */
	const char *hostname;             /* NULL: this machine's name */
	const char *username;             /* NULL: the user running */
	const char *const *tags;          /* ntags strings */
	size_t ntags;
	bool with_atime;                  /* store atimes (restic's --with-atime); else the mtime */
	const rix_id *parent;             /* the parent snapshot; NULL: the latest of this host and paths */
	bool force;                       /* read every file, whatever the parent says */
	const char *const *excludes;      /* nexcludes patterns (--exclude) */
	size_t nexcludes;
	const char *const *iexcludes;     /* the same, ignoring case (--iexclude) */
	size_t niexcludes;
	const char *const *if_present;    /* --exclude-if-present NAME[:TEXT] */
	size_t nif_present;
	bool exclude_caches;              /* --exclude-caches */
	bool skip_if_unchanged;           /* no snapshot when the tree is the parent's (restic 0.17) */
	const char *stdin_name;           /* back up standard input as this file (--stdin-filename); paths unused */
	bool one_file_system;             /* --one-file-system */
	unsigned read_concurrency;        /* threads reading files (and the caller); 0: one per CPU */
	rix_backup_warn_fn warn;          /* may be NULL */
	void *payload;                    /* given to warn, progress and item */
	/* version 2 */
	rix_backup_progress_fn progress;  /* may be NULL (then no scanner runs either) */
	unsigned progress_interval_ms;    /* between progress calls; 0: 250 */
	rix_backup_item_fn item;          /* may be NULL (then nothing is timed per item) */
	bool dry_run;                     /* write nothing: blobs are hashed and looked up, and what would
	                                     be stored is counted (once each) as if it were */
	/* version 3 */
	const char *const *snapshot_excludes; /* what the snapshot's "excludes" records (restic: its
	                                     --exclude flags, not an exclude file's lines nor --iexclude);
	                                     nsnapshot_excludes of them; none: omitted */
	size_t nsnapshot_excludes;
} rix_backup_options;
#define RIX_BACKUP_OPTIONS_INIT { .version = RIX_BACKUP_OPTIONS_VERSION }

typedef struct rix_backup_summary {
	uint64_t files, dirs, others;     /* entries backed up */
	uint64_t files_new, files_changed, files_unmodified; /* against the parent (unmodified: not read) */
	uint64_t dirs_new, dirs_changed, dirs_unmodified;
	bool has_parent;                  /* a parent snapshot was used: parent_id */
	rix_id parent_id;
	uint64_t bytes;                   /* bytes of the files read */
	uint64_t bytes_total;             /* bytes of all files, read or taken from the parent */
	uint64_t data_blobs, data_added;  /* data blobs stored now, and their plaintext bytes */
	uint64_t tree_blobs;              /* tree blobs stored now */
	uint64_t errors;                  /* entries left out (warned) */
	uint64_t excluded;                /* entries left out by the excludes */
	bool skipped;                     /* skip_if_unchanged: no snapshot written (*snapshot_id is the parent) */
	/* version 2 (options of version 1 get the summary above) */
	uint64_t tree_added;              /* plaintext bytes of the tree blobs stored now (restic's
	                                     data_added is data_added + tree_added) */
	double seconds;                   /* how long the backup took */
	uint64_t data_added_packed;       /* bytes the data and tree blobs stored now take in their
	                                     packs (restic's data_added_packed); 0 in a dry run */
} rix_backup_summary;

/*
 * Backs up paths[0..n) (borrowed) into r, which must have its index loaded (the dedup-only
 * index suffices and is the smaller: rix_repo_set_dedup_only before rix_repo_load_index; backup
 * asks of data blobs only whether they are there) and should be held
 * under a shared lock (rix_lock_acquire). *snapshot_id gets the new snapshot's ID (all zero
 * with opt->dry_run); summary (may be NULL) the counts, also when it fails. opt may be NULL
 * (the defaults). With opt->dry_run nothing is written to the repository (no pack, index or
 * snapshot file; no lock is needed): the summary says what a backup would have stored.
 * @return 0 (entries that could not be read are counted in summary->errors and left out);
 * RIX_EINVAL (no paths, options of a version this librix does not know, a repository whose
 * config names another chunker: rix_config.other_chunker); RIX_ENOTFOUND (a path that does not
 * exist); the repository's errors (RIX_ENOSPC, RIX_EIO, RIX_ELOCKED, ...: nothing of this
 * backup is named by a snapshot then); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_backup(rix_id *snapshot_id, rix_backup_summary *summary, rix_repo *r,
					const char *const *paths, size_t n, const rix_backup_options *opt);

#ifdef __cplusplus
}
#endif
#endif
