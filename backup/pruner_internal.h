/*
 * backup/pruner_internal.h — private to the pruner's files: pruner.c (the plan: used blobs,
 * pack info, the decision; option values) and prune_run.c (running a plan: repacking, the new
 * index, removing files). The plan and the functions one file lends the other. How a prune
 * works: atop pruner.c.
 */
#ifndef RIX_PRUNER_INTERNAL_H
#define RIX_PRUNER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/indexmap.h"
#include "rix/master_index.h"
#include "rix/pruner.h"

enum { TPE_UNSET = 2, TPE_MIXED = 3 };                                    /* beside RIX_BLOB_DATA / _TREE */
enum { A_NONE = 0, A_KEEP, A_REPACK, A_REMOVE, A_IGNORE /* missing, unneeded: dropped from the index */ };

struct pinfo {
	rix_id id;
	uint64_t used_size, unused_size;
	uint64_t used_blobs, unused_blobs;
	uint8_t tpe;
	bool uncompressed; /* holds an uncompressed blob; after the decision: must be compressed */
	bool listed;       /* the backend has it */
	bool small;        /* under the size a pack should reach (the repack order's second key) */
	uint8_t action;
};

/* A used blob with more than one copy in the index (restic's duplicateBlobs): open addressing. */
struct dup {
	rix_id id;
	uint8_t type, count, used; /* used: the slot is taken */
	uint8_t undone;            /* its first copy's count as used taken back (undo_first) */
};

/*
 * A set of data blob IDs as keyed 63-bit fingerprints: open addressing, 0 is an empty slot. The
 * top bit of a slot marks a fingerprint met by the first pass (fp_meet): a used blob met again
 * is a copy.
 */
#define FP_MET ((uint64_t)1 << 63)
struct fpset {
	uint64_t *slot;
	size_t cap, n; /* cap: a power of two, or 0 */
	uint64_t seed;
};

struct rix_prune_plan {
	rix_repo *r;
	rix_master_index *mi;
	rix_prune_options o;
	rix_prune_stats st;
	struct fpset data;                  /* the used data blobs */
	rix_indexmap *trees;                /* the used trees (locations unused) */
	rix_indexmap *met_trees;            /* the used trees the first pass met */
	rix_indexmap *packmap;              /* pack ID -> loc.pack = its number in packs */
	struct pinfo *packs;
	size_t npacks, packs_cap;
	struct dup *dups;
	size_t dups_cap, ndups; /* cap: a power of two, or 0 */
	rix_id *lists[3];       /* RIX_PRUNE_UNREFERENCED, _REPACK, _REMOVE */
	size_t nlists[3], lists_cap[3];
	bool ran;
};

/* ---- lent by pruner.c to prune_run.c ---------------------------------------------------------- */

/* RIX_ENOMEM, with the error's message set. */
int rix__prune_oom(void);
/* A message at verbosity level (opt.verbose, opt.message). */
void rix__prune_say(const rix_prune_plan *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* opt.progress of a phase, done of total. */
void rix__prune_progress(const rix_prune_plan *p, const char *phase, uint64_t done, uint64_t total);
/* Whether (t, id) is a used blob (data: by its fingerprint, which may keep an unused blob, never
 * loses a used one). */
bool rix__prune_used_has(const rix_prune_plan *p, rix_blob_type t, const rix_id *id);
/* The number of pack_id in p->packs (added when new); UINT32_MAX: out of memory. */
uint32_t rix__prune_pack_slot(rix_prune_plan *p, const rix_id *pack_id);

#endif
