/*
 * rix/repair.h — repairing a repository: a new index built from the packs (restic 0.14's
 * `rebuild-index`, 0.16's `repair index`).
 *
 *   list index files (all superseded) ─> load them, every file read, not the index cache (unless read_all_packs) ─> list packs + sizes
 *     ─> a pack the old index names with the size its entries imply: its entries kept
 *     ─> every other pack (new, another size, or all with read_all_packs): its header read,
 *        by several threads; one that cannot be read is reported and left out
 *     ─> packs the old index names that are not there: dropped (reported)
 *   ─> rix_index_writer: the new index files (the last names the old ones as superseded)
 *   ─> only then the old index files removed
 *
 * A pack's size from the index is restic's pack.Size: 4 (header length) + 32 (the header's
 * crypto overhead) + per blob its stored length and its header entry, RIX_PACK_ENTRY_SIZE (37)
 * or RIX_PACK_ENTRY_SIZE_ZSTD (41) for a compressed blob. Entries that are exact duplicates (two
 * index files naming the same pack, as an interrupted prune leaves) count once, as restic's
 * merge of the index files keeps them once.
 *
 * Where rix differs from restic 0.14: a pack whose header cannot be read is said at the default
 * verbosity with the reason (restic: "skipped incomplete pack file" at -vv); a backend that fails
 * (RIX_EIO: a REST server gone, a failing disk) stops the repair before anything is written,
 * where restic would take the pack as unreadable and leave it out of the new index.
 */
#ifndef RIX_REPAIR_H
#define RIX_REPAIR_H

#include "rix/common.h"

#include <stdbool.h>
#include <stddef.h>

#include "rix/repo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a repair found and did. */
typedef struct rix_repair_report {
	size_t index_files;         /* old index files listed (all superseded) */
	size_t invalid_index_files; /* of those, files that could not be loaded */
	size_t packs;               /* pack files listed */
	size_t packs_from_index;    /* packs whose old index entries were kept */
	size_t packs_read;          /* packs whose header was read (and indexed) */
	size_t packs_added;         /* packs no old index named (all with read_all_packs): to read */
	size_t packs_resized;       /* packs of another size than the old index implies: to read */
	size_t unreadable_packs;    /* packs whose header could not be read: left out (they stay) */
	size_t missing_packs;       /* packs the old index named that are not there: dropped */
	size_t blobs;               /* entries of the new index */
	size_t index_files_written; /* new index files */
	size_t index_files_removed; /* old index files removed */
} rix_repair_report;

/* What a message is about (restic prints steps on stdout, notices on stderr). */
typedef enum rix_repair_msg_kind {
	/* A step starts: "loading indexes...", "getting pack files to read...", "reading pack files",
	 * "rebuilding index", "deleting obsolete index files" (restic's lines). */
	RIX_REPAIR_STEP = 0,
	/* A finding about one file, the repair goes on: "removing invalid index ID: why", "adding
	 * pack file to index ID", "reindexing pack file ID with unexpected size N instead of M",
	 * "removing not found pack file ID", "skipped incomplete pack file: ID: why". */
	RIX_REPAIR_NOTICE = 1,
} rix_repair_msg_kind;

/* One line, no newline (borrowed for the call). Called from one thread at a time. */
typedef void (*rix_repair_msg_fn)(void *payload, rix_repair_msg_kind kind, const char *msg);
/* After each pack header read (from the reading threads, one call at a time): packs done, to do. */
typedef void (*rix_repair_progress_fn)(void *payload, size_t done, size_t total);

/* What a repair does and whom it tells: start from RIX_REPAIR_OPTIONS_INIT. */
#define RIX_REPAIR_OPTIONS_VERSION 1u
typedef struct rix_repair_options {
	unsigned version;                /* RIX_REPAIR_OPTIONS_VERSION */
	bool read_all_packs;             /* read every pack's header; the old index is not loaded */
	rix_repair_msg_fn msg;           /* steps and findings; may be NULL */
	rix_repair_progress_fn progress; /* while reading headers; may be NULL */
	void *payload;                   /* given to msg and progress */
	/* The exclusive lock the caller holds (borrowed; may be NULL): once it is lost
	 * (rix_lock_check) the repair stops before its next read, write or removal. */
	const rix_lock *lock;
} rix_repair_options;
#define RIX_REPAIR_OPTIONS_INIT { .version = RIX_REPAIR_OPTIONS_VERSION }

/*
 * Rebuilds the index of r from its packs, as restic 0.14's rebuild-index (see above). The
 * caller holds an exclusive lock (rix_lock_acquire): nothing else may write meanwhile. The old
 * index files are loaded by this call (rix_repo_load_index: files damaged are reported and
 * superseded, as restic's "removing invalid index"), unless read_all_packs. Headers are read by
 * rix_repo_options.workers threads (0: one per CPU, at most 64). The new index files are written
 * (rix_index_writer) before any old one is removed, so a failure at any point leaves an index
 * that names every pack that was indexed before (perhaps twice: harmless). r's loaded index is
 * not changed: it still holds the old entries; open the repository again to use the new ones.
 * rep (may be NULL) gets the counts, also on failure (what was done until then); opt may be NULL
 * (the defaults: the old index used, no callbacks).
 * @return 0 (packs that could not be read do not fail it: they are reported and counted);
 * RIX_EINVAL (opt of another version); RIX_ELOCKED (opt->lock was lost: stopped); RIX_EIO and
 * other backend errors listing, loading the index (nothing written), reading a header (nothing
 * written), writing the new index (the old one stays whole) or removing an old file (the new
 * index is complete: the rest of the old files stay, harmless duplicates); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repair_index(rix_repair_report *rep, rix_repo *r, const rix_repair_options *opt);

#ifdef __cplusplus
}
#endif

#endif
