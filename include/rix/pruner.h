/*
 * rix/pruner.h — removing what no snapshot needs: restic 0.14's prune, its rules and its order,
 * so that either tool can prune a repository the other uses.
 *
 *   lock (exclusive) ─> rix_repo_load_index ─> rix_prune_plan ─> stats (print) ─> rix_prune_run
 *
 * The plan: every snapshot's trees are walked (each distinct tree once, several at a time), which
 * gives the used blobs; every blob of the index is then used, a duplicate (another copy of a used
 * blob) or unused, and every pack of the repository is classified as restic does:
 *   - not in the index: unreferenced, removed first;
 *   - no used blob: removed;
 *   - all blobs used, of one type, large enough (and compressed where it must be): kept;
 *   - the rest: repack candidates, tree and mixed packs first, then small packs, then by the
 *     share of unused bytes; repacked until the unused bytes left are within max_unused (tree
 *     packs, and packs that must be compressed, regardless), and never past max_repack_bytes.
 * A duplicate blob counts as used in one pack only (one that has other used blobs, if any).
 *
 * Running it, in the order that survives a crash at any point (each step leaves a repository that
 * checks clean, and running prune again finishes the job):
 *   1. unreferenced packs removed (no index names them);
 *   2. the used blobs of the packs to repack are read (verified: MAC, decompression, SHA-256)
 *      and copied into new packs as they are stored (rix_repo_save_blob_stored: compressed blobs
 *      keep their frame, nothing is compressed or encrypted again), except uncompressed blobs
 *      that restic 0.14's repack would compress (version 2: trees, and data blobs unless
 *      compression is off), which are saved again from their plaintext, compressed; the new
 *      packs are flushed with index files of their own;
 *   3. new index files for every pack that stays (rix_index_writer), superseding every index
 *      file there was;
 *   4. the old index files removed;
 *   5. the packs no longer needed (unused, repacked, missing ones are only dropped from the
 *      index) removed.
 * Nothing is removed before the plan is complete and checked: a blob a snapshot uses but no index
 * names, a needed pack missing or of another size than the index says, a snapshot or tree that
 * cannot be loaded, each stops the plan with an error, and the repository stays as it was.
 */
#ifndef RIX_PRUNER_H
#define RIX_PRUNER_H

#include "rix/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/repo.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How much unused space may stay (restic's --max-unused). */
typedef enum rix_prune_unused {
	RIX_PRUNE_UNUSED_PERCENT = 0, /* max_unused_percent of the repository's size after prune (INIT: 5) */
	RIX_PRUNE_UNUSED_BYTES = 1,   /* max_unused_bytes */
	RIX_PRUNE_UNUSED_UNLIMITED = 2,
} rix_prune_unused;

/* What a prune may do and whom it tells. Start from RIX_PRUNE_OPTIONS_INIT. */
#define RIX_PRUNE_OPTIONS_VERSION 1u
typedef struct rix_prune_options {
	unsigned version; /* RIX_PRUNE_OPTIONS_VERSION */
	rix_prune_unused max_unused;
	double max_unused_percent; /* 0 <= p < 100 */
	uint64_t max_unused_bytes;
	uint64_t max_repack_bytes;  /* INIT: UINT64_MAX (no limit); 0 repacks nothing */
	bool repack_cacheable_only; /* data packs are never repacked */
	bool repack_small;          /* packs under 80% of the pack size are repacked (else 4%) */
	bool repack_uncompressed;   /* version 2: every pack holding uncompressed blobs is repacked */
	/* Snapshots not to count (forget --prune: the ones it just removed). Borrowed. */
	const rix_id *ignore_snapshots;
	size_t nignore_snapshots;
	/*
	 * Lines for the user (no newline), each at a verbosity: 1 what restic prints with -v
	 * ("loading all snapshots...", "repacking packs"), 2 details (restic's -vv: each unreferenced
	 * pack), 0 warnings ("will forget missing pack file ..."). May be NULL. One call at a time.
	 */
	void (*msg)(void *payload, int level, const char *line);
	/* Progress of a phase ("snapshots", "packs repacked", "packs deleted"): done of total. May be NULL. */
	void (*progress)(void *payload, const char *phase, uint64_t done, uint64_t total);
	void *payload;
	unsigned workers; /* threads walking trees and repacking; 0: rix_repo_workers() */
	/* Index entries held at once while the index is rewritten, one pass over the master index
	 * per batch of packs; 0: an eighth of the entries kept, at least 256 Ki (tests set it low). */
	uint64_t rewrite_batch;
} rix_prune_options;
#define RIX_PRUNE_OPTIONS_INIT                                                                                 \
	{ .version = RIX_PRUNE_OPTIONS_VERSION, .max_unused = RIX_PRUNE_UNUSED_PERCENT, .max_unused_percent = 5, \
	  .max_repack_bytes = UINT64_MAX }

/*
 * restic's --max-unused value: "unlimited", "N%" (0 <= N < 100) or a size ("100M", bytes with
 * k, m, g, t suffixes, powers of 1024) into o's max_unused fields.
 * @return 0; RIX_EINVAL (a message restic's words: "invalid value for --max-unused", ...).
 */
RIX_EXPORT RIX_NODISCARD int rix_prune_parse_max_unused(rix_prune_options *o, const char *s);
/* A size as restic's parseSizeStr reads it ("100", "10k", "2M", "1g", "1T"). @return 0; RIX_EINVAL. */
RIX_EXPORT RIX_NODISCARD int rix_parse_size(uint64_t *out, const char *s);

/* restic's pruneStats: blobs and bytes (stored sizes) by what happens to them, and packs. */
typedef struct rix_prune_stats {
	struct {
		uint64_t used, duplicate, unused, remove, repack, repackrm;
	} blobs;
	struct {
		uint64_t used, duplicate, unused, remove, repack, repackrm, unref;
	} size;
	struct {
		uint64_t used, unused, partly_used, unref, keep, repack, remove;
	} packs;
	size_t snapshots; /* snapshots whose trees were walked */
	size_t trees;     /* distinct trees walked */
	/* Filled by rix_prune_run: */
	uint64_t packs_written;   /* new packs of the repack */
	uint64_t index_written;   /* new index files */
	uint64_t index_removed;   /* old index files removed */
	uint64_t packs_removed;   /* pack files removed (unreferenced ones included) */
	uint64_t remove_failures; /* removals the backend refused (they stay; a later prune removes them) */
} rix_prune_stats;

typedef struct rix_prune_plan rix_prune_plan;

/*
 * Plans a prune of r, whose index is loaded (rix_repo_load_index) and which the caller holds
 * under an exclusive lock (rix_lock_acquire). Reads snapshots and trees, and lists the packs; writes
 * nothing. *out (the caller's, rix_prune_plan_free) holds what rix_prune_run does.
 * @return 0; RIX_EINVAL (options); RIX_ECORRUPT ("index is not complete": a used blob no index
 * names; "packs from index missing in repo"; "pack size does not match calculated size from
 * index" (run repair index); a snapshot that cannot be read; each with a message); the errors of
 * loading a tree (RIX_ENOTFOUND, RIX_EAUTH, ...); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_prune_plan_new(rix_prune_plan **out, rix_repo *r, const rix_prune_options *opt);
/* The plan's figures (borrowed; rix_prune_run adds its own). */
RIX_EXPORT const rix_prune_stats *rix_prune_plan_stats(const rix_prune_plan *p);
/*
 * The packs the plan removes first (unreferenced), repacks, and removes (unused), each sorted;
 * borrowed. For dry runs that list them.
 */
RIX_EXPORT const rix_id *rix_prune_plan_packs(size_t *n, const rix_prune_plan *p, int which);
enum { RIX_PRUNE_UNREFERENCED = 0, RIX_PRUNE_REPACK = 1, RIX_PRUNE_REMOVE = 2 };
/*
 * Carries the plan out (steps 1 to 5 above). Call once. A pack or index file the backend fails to
 * remove is counted (remove_failures) and said, not an error: it is harmless, and the next prune
 * removes it.
 * @return 0; RIX_ECORRUPT (a blob to keep could not be read from any copy: nothing was removed
 * but unreferenced packs); RIX_ELOCKED (the lock was lost: stopped); the errors of saving and
 * flushing (RIX_ENOSPC, ...: stopped before any index file or pack was removed); backend errors;
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_prune_run(rix_prune_plan *p);
/* NULL-safe. */
RIX_EXPORT void rix_prune_plan_free(rix_prune_plan *p);

#ifdef __cplusplus
}
#endif

#endif
