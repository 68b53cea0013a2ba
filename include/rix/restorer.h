/*
 * rix/restorer.h — getting a snapshot's files back, as restic's restore does, read each pack
 * once:
 *
 *   rix_tree_find_dir(root, "/home/user")          SNAPSHOT:PATH
 *   rix_restore(tree, target, &opt)
 *     walk the trees (an explicit stack: any depth), make directories, symlinks, FIFOs, devices,
 *     hard links, and the files with no content; plan: every (file, offset, blob), grouped by
 *     pack ──> opt.workers threads, a pack each: rix_repo_load_pack_blobs (few ranged reads,
 *     each blob authenticated, decompressed, SHA-256 checked once) ──> pwrite to every file and
 *     offset that needs it (the first write makes the file, empty at its size) ──> each file's
 *     metadata once its last blob is written ──> the directories' metadata, deepest first
 *
 * Memory is bounded by opt.memory: when the plan of the files walked so far (their paths,
 * owners' names, extended attributes and blob references) passes it, they are restored (a batch)
 * before the walk goes on; a batch runs no more workers than opt.memory holds read buffers for
 * (each a read of a pack, at most RIX_REPO_PACK_READ_MAX, and a blob's plaintext; one worker at
 * least), so the plan and the buffers take at most about twice opt.memory. A path is at most
 * 4095 bytes ("/" included, PATH_MAX as restic meets it): a longer or deeper one is an error
 * naming it and nothing below it is restored, which also bounds the walk's stack. The directories' metadata waits for the end (a
 * path and its metadata per directory), so that a read-only directory is made so last; hard
 * links are remembered by (inode, device_id) for the whole restore (a path each). A blob needed
 * by files of two batches is read once per batch; tree blobs are read one by one as the walk
 * meets them.
 *
 * Safety: nothing is ever written outside target, whatever the repository holds. Every path is
 * opened beneath target one component at a time with O_NOFOLLOW (or openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so a symlink met on the way, restored or planted in
 * target before or during the restore, is never followed; names that no directory entry can have
 * ("", ".", "..", '/' or NUL in them) are refused by the tree decoder and again here, as an error
 * naming the path; an existing entry is replaced by unlinking it first, never by writing
 * through it (a hard link to a file elsewhere keeps its content). A file with content is made
 * by the batch with O_CREAT | O_EXCL beneath target: whatever took its name since the walk is
 * an error naming the path. A file reopened by name at batch time (its content, --verify, its
 * metadata) must still be the regular file made (its st_dev and st_ino) or kept (if-changed
 * keeps only a file of one link): a FIFO, device or hard link swapped in meanwhile is an error
 * naming the path, nothing written to it. A file none of whose content could be read is not
 * made (as restic).
 *
 * What it does not protect against: a local user who can write in target while the restore
 * runs. The walk holds each directory it made open (the first 64 levels) and makes the entries
 * in it through that fd (directories, symlinks, FIFOs, devices, files with no content or with
 * hard links, their ownership and mode): a made directory that such a user renames out of
 * target, to anywhere on the same file system they can write, receives the entries made after
 * the rename where it now is (the files with content are made by path beneath target at batch
 * time, and refused if a symlink is met).
 * Restore into a directory only trusted users can write, as with restic. target itself is
 * opened following symlinks (as restic): a symlink given as target means its destination.
 *
 * Metadata as restic restores it: mode (setuid, setgid, sticky), modification and access times
 * (directories after their contents; a directory not included itself but made for an entry
 * included beneath it too, as restic's leaveDir), symlinks as links, hard links (nodes of the same inode
 * and device_id with links > 1) as links to the first one restored, FIFOs; device nodes and
 * ownership when running as root (by number, or by name first with ownership_by_name);
 * extended attributes where the file system takes them (ENOTSUP, EPERM: a warning). Sockets
 * are not restored (as restic).
 */
#ifndef RIX_RESTORER_H
#define RIX_RESTORER_H

#include "rix/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/repo.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The tree of directory path (as "/home/user"; "", "/" or NULL: root itself) under tree root,
 * as restic finds SNAPSHOT:PATH. @return 0; RIX_ENOTFOUND ("path /a/b: not found", "... not a
 * directory"); the load and decode errors of a tree (naming the path); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_tree_find_dir(rix_id *out, rix_repo *r, const rix_id *root, const char *path);

/* --overwrite: what becomes of an entry the target already has (restic 0.17's choices). */
typedef enum rix_restore_overwrite {
	RIX_OVERWRITE_ALWAYS = 0,     /* replace it (restic's default) */
	RIX_OVERWRITE_IF_CHANGED = 1, /* a regular file of the same size and mtime is kept (metadata restored) */
	RIX_OVERWRITE_IF_NEWER = 2,   /* replace it only when the snapshot's is newer (mtime) */
	RIX_OVERWRITE_NEVER = 3,      /* keep it */
} rix_restore_overwrite;

/* restic's restore status: files counts every entry (files, directories, links...). */
typedef struct rix_restore_progress {
	double seconds;
	uint64_t files_total, files_restored, files_skipped, files_deleted;
	uint64_t bytes_total, bytes_restored, bytes_skipped;
	uint64_t errors;
	bool done; /* the last call */
} rix_restore_progress;

/* Called for an entry that could not be restored (path as "/dir/file", from the tree's root),
 * and with warnings (xattrs the file system refuses...); one call at a time, any thread. */
typedef void (*rix_restore_msg_fn)(void *payload, const char *path, const char *msg);
/* Every progress_interval_ms from a thread of the restore's own; the last with done set. */
typedef void (*rix_restore_progress_fn)(void *payload, const rix_restore_progress *p);
/* restic's verbose_status: action "restored", "updated", "unchanged" or "deleted"; file: a regular
 * file (its size), else a directory, link or other entry (size 0). */
typedef void (*rix_restore_item_fn)(void *payload, const char *action, const char *path, bool file, uint64_t size);

#define RIX_RESTORE_OPTIONS_VERSION 1u
typedef struct rix_restore_options {
	unsigned version;                   /* RIX_RESTORE_OPTIONS_VERSION */
	/* restic's --include / --iinclude or --exclude / --iexclude (not both kinds: RIX_EINVAL),
	 * rix/pattern.h's patterns matched against "/dir/file" from the tree's root */
	const char *const *includes;
	size_t nincludes;
	const char *const *iincludes;
	size_t niincludes;
	const char *const *excludes;
	size_t nexcludes;
	const char *const *iexcludes;
	size_t niexcludes;
	bool dry_run;                       /* write nothing; count what would be restored */
	bool verify;                        /* reread each restored file, each blob's SHA-256 */
	bool sparse;                        /* runs of zeros in a file become holes */
	bool delete_extra;                  /* remove what target has and the snapshot has not (--delete) */
	bool ownership_by_name;             /* as root: owner and group by name first, then by number */
	rix_restore_overwrite overwrite;
	unsigned workers;                   /* packs read at once; 0: rix_repo_workers */
	uint64_t memory;                    /* the plan's budget; 0: RIX_RESTORE_MEMORY_DEFAULT */
	rix_restore_msg_fn error;           /* may be NULL */
	rix_restore_msg_fn warn;            /* may be NULL */
	rix_restore_progress_fn progress;   /* may be NULL */
	unsigned progress_interval_ms;      /* 0: 250 */
	rix_restore_item_fn item;           /* may be NULL */
	void *payload;                      /* given to the callbacks */
} rix_restore_options;
#define RIX_RESTORE_OPTIONS_INIT { .version = RIX_RESTORE_OPTIONS_VERSION }
#define RIX_RESTORE_MEMORY_DEFAULT ((uint64_t)256 << 20)

typedef struct rix_restore_summary {
	uint64_t files_total, files_restored, files_skipped, files_deleted; /* every kind of entry */
	uint64_t bytes_total, bytes_restored, bytes_skipped;
	uint64_t errors;                    /* entries not (wholly) restored, each reported */
	uint64_t verified;                  /* files verified (verify) */
	uint64_t batches;                   /* times the plan was carried out (memory) */
	uint64_t packs;                     /* packs read (each once a batch) */
	double seconds;
} rix_restore_summary;

/*
 * Restores tree (a snapshot's root tree, or rix_tree_find_dir's) into directory target (made
 * if missing, with its parents not). r must have its index loaded. sum (may be NULL) gets the
 * counts, also on failure. opt may be NULL (the defaults). The calling thread plans the restore
 * and looks its blobs up in batches: give it some 64 KiB of stack (any default thread has more).
 * @return 0 when everything was restored; RIX_EIO when some entries were not (each reported
 * through opt->error and counted in sum->errors: a missing or damaged pack fails the files it
 * touches, named by path, and the rest are restored); RIX_EINVAL (options of another version,
 * includes with excludes, an overwrite value out of range, dry_run with verify); RIX_ENOTFOUND / RIX_EIO (target
 * cannot be made or opened); the root tree's load errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_restore(rix_restore_summary *sum, rix_repo *r, const rix_id *tree, const char *target,
					 const rix_restore_options *opt);

#ifdef __cplusplus
}
#endif
#endif
