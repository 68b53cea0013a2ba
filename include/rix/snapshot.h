/*
 * rix/snapshot.h — snapshots: the files in snapshots/ that name a backup's root tree, as restic
 * writes them; loaded, listed, filtered and found as restic's commands take them (an ID prefix,
 * "latest", --host / --tag / --path), and rewritten as restic's `tag` rewrites them.
 *
 *   rix_snapshot_list_load ──> rix_snapshot_list_filter / _keep_latest   (rix snapshots, forget)
 *                          ├─> rix_snapshot_list_group (--group-by) ──> rix_forget_apply (rix/forget.h)
 *                          └─> rix_snapshot_find(list, "latest" | "1a2b3c", filter)   (restore)
 *   rix_snapshot_load(id) ──> change ──> rix_snapshot_rewrite   (tag: new file, old removed)
 *
 * The JSON, restic's Snapshot struct (restic 0.17: FORMAT.md), members in this order:
 *
 *   time             RFC 3339 with nanoseconds, in the zone of the machine that made it  required
 *   parent           the parent snapshot's ID (64 hex)                        omitted when none
 *   tree             the root tree's ID                                                 required
 *   paths            the backed-up paths, as given (absolute)                           required
 *   hostname, username                                                       omitted when ""
 *   uid, gid         of the user who made it (numbers)                       omitted when 0
 *   excludes, tags   lists of strings                                        omitted when empty
 *   original         the first ID of a snapshot rewritten (tag, rewrite)      omitted when none
 *   program_version  "restic 0.17.0", "rix 0.1.0"                             omitted when ""
 *   summary          the backup's counts (restic 0.17), kept as its JSON      omitted when none
 *
 * Encoding writes restic's bytes: compact, those members in that order, strings with Go's
 * escapes (< > & as \u003c..., invalid UTF-8 as U+FFFD), so a snapshot restic wrote decodes and
 * encodes to the same bytes. Members rix does not know (a newer restic's) are kept, their JSON
 * compacted, after the known ones in their order: a snapshot rewritten by rix loses nothing.
 *
 * Decoding is strict where restic's meaning is at stake and never crashes on hostile input:
 * time, tree and paths must be there (null counts as missing) and well-typed; IDs are 64 hex
 * digits; uid and gid whole numbers up to 2^32-1; a key restic would read as a known one only by
 * ignoring its case, or a known key given twice, is refused (common/json_scan.h); a string
 * holding U+0000 is refused (rix's strings are C strings). Other members may be null (absent).
 */
#ifndef RIX_SNAPSHOT_H
#define RIX_SNAPSHOT_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>

#include "rix/repo.h"
#include "rix/tree.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The summary and the members rix does not know, as JSON text (private). */
typedef struct rix_snapshot_extra rix_snapshot_extra;

/*
 * One snapshot. Everything it points to is its own, freed by rix_snapshot_free. A caller may
 * read every field and change the plain values in place (time, tree, has_parent / parent,
 * uid, gid, has_original / original, id); strings and lists change through the functions below.
 */
typedef struct rix_snapshot {
	rix_id id;               /* its file's name: set by load, list and write; zero when decoded */
	rix_time time;           /* when the backup started */
	rix_id tree;             /* the root tree */
	bool has_parent;
	rix_id parent;
	char **paths;            /* npaths strings */
	size_t npaths;
	char *hostname;          /* "" when absent, never NULL */
	char *username;          /* "" when absent, never NULL */
	uint32_t uid, gid;
	char **excludes;         /* nexcludes strings */
	size_t nexcludes;
	char **tags;             /* ntags strings, in the file's order */
	size_t ntags;
	bool has_original;
	rix_id original;
	char *program_version;   /* "" when absent, never NULL */
	rix_snapshot_extra *extra;
} rix_snapshot;

/* ---- one snapshot --------------------------------------------------------------------------- */

/*
 * Decodes snapshot JSON json[0..len) (borrowed). *out is the caller's (rix_snapshot_free); its
 * id is zero. @return 0; RIX_ECORRUPT (not JSON, not an object, time / tree / paths missing or
 * ill-typed, a bad ID, time or number, a string with U+0000, a folded or duplicated known key:
 * the message names the member and the byte offset); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_decode(rix_snapshot **out, const uint8_t *json, size_t len);

/*
 * sn as restic writes it (above; sn->id is not part of it): *json, the caller's (rix_free),
 * NUL-terminated, *len bytes without the NUL. @return 0; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_encode(char **json, size_t *len, const rix_snapshot *sn);

/* Frees sn and everything it holds. NULL-safe. */
RIX_EXPORT void rix_snapshot_free(rix_snapshot *sn);

/*
 * The summary restic 0.17 and rix record ({"backup_start":...}), compact JSON borrowed from sn
 * (valid until it is freed), *len bytes; NULL when the snapshot has none.
 */
RIX_EXPORT const char *rix_snapshot_summary(size_t *len, const rix_snapshot *sn);

/*
 * Replaces the tags with tags[0..n) (copied; n = 0: none). @return 0; RIX_ENOMEM (sn unchanged).
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_set_tags(rix_snapshot *sn, const char *const *tags, size_t n);

/*
 * Appends each of tags[0..n) that sn does not have yet, as restic's AddTags; *changed (may be
 * NULL) says whether any was. @return 0; RIX_ENOMEM (sn unchanged).
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_add_tags(bool *changed, rix_snapshot *sn, const char *const *tags, size_t n);

/*
 * Removes each of tags[0..n) (its first occurrence; the last tag takes its place, as restic's
 * RemoveTags, so that both tools make the same file); *changed (may be NULL) says whether any
 * was removed. Allocates nothing. Returns nothing to check.
 */
RIX_EXPORT void rix_snapshot_remove_tags(bool *changed, rix_snapshot *sn, const char *const *tags, size_t n);

/* ---- in a repository ------------------------------------------------------------------------ */

/*
 * Reads and decodes snapshot id of r (rix_repo_read_file: SHA-256, MAC, decompression). *out
 * is the caller's (rix_snapshot_free), with id set.
 * @return 0; RIX_ENOTFOUND (no such file); rix_repo_read_file's errors (RIX_ECORRUPT, RIX_EAUTH,
 * backend errors); rix_snapshot_decode's (RIX_ECORRUPT: the message names the snapshot);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_load(rix_snapshot **out, rix_repo *r, const rix_id *id);

/*
 * Stores sn (rix_snapshot_encode, rix_repo_write_file) as a new snapshot file; *id (may be
 * NULL) gets its ID. sn->id is not changed. The caller should hold a lock (rix_lock_acquire).
 * @return 0; rix_repo_write_file's errors (RIX_ENOSPC, RIX_EIO, ...); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_write(rix_id *id, rix_repo *r, const rix_snapshot *sn);

/*
 * Deletes snapshot file id. Only the file: the data it names stays until a prune.
 * @return 0; RIX_ENOTFOUND; backend errors.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_remove(rix_repo *r, const rix_id *id);

/*
 * Replaces the stored snapshot sn->id by sn as it is now, as restic's `tag` does: original is
 * set to sn->id unless the snapshot has one already, the new file is written, then the old one
 * removed; sn->id becomes the new ID. Hold an exclusive lock (restic's tag takes one).
 * @return 0; RIX_EINVAL (sn->id is zero: sn was not loaded from r); rix_snapshot_write's errors
 * (nothing changed: sn as before); the backend's error removing the old file (the new one is
 * stored and sn->id names it; the old one is left beside it).
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_rewrite(rix_repo *r, rix_snapshot *sn);

/* ---- lists, filters, finding ---------------------------------------------------------------- */

/* Snapshot files that could not be loaded, one call each (one at a time): its ID, code, message. */
typedef void (*rix_snapshot_error_fn)(void *payload, const rix_id *id, int code, const char *msg);

/* A snapshot file that could not be loaded, and why. */
typedef struct rix_snapshot_unreadable {
	rix_id id;
	int code;                /* RIX_ECORRUPT, RIX_EAUTH, RIX_EIO, ... (the message went to on_error) */
} rix_snapshot_unreadable;

/* The snapshots of a repository. Arrays from rix_malloc: freed by rix_snapshot_list_free. */
typedef struct rix_snapshot_list {
	rix_snapshot **items;    /* count snapshots, oldest first (by instant; equal ones by ID) */
	size_t count;
	rix_snapshot_unreadable *unreadable; /* nunreadable files that could not be loaded, by ID */
	size_t nunreadable;
} rix_snapshot_list;

/*
 * Loads every snapshot of r (several files at a time: rix_repo_options.workers). A file that cannot be read or decoded
 * is left out, listed in unreadable and given to on_error (may be NULL) instead of failing the
 * whole list, as restic lists snapshots. *out is the caller's (rix_snapshot_list_free).
 * @return 0; backend errors listing snapshots/; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_list_load(rix_snapshot_list **out, rix_repo *r, rix_snapshot_error_fn on_error,
						    void *payload);

/* Frees the list and its snapshots. NULL-safe. */
RIX_EXPORT void rix_snapshot_list_free(rix_snapshot_list *l);

/*
 * Which snapshots a command considers, as restic's --host, --tag and --path (SnapshotFilter):
 *   hosts  the snapshot's hostname is one of them
 *   tags   tag lists, each "a,b" (split at commas, spaces around each tag trimmed): the snapshot
 *          has every tag of at least one list (`--tag a,b --tag c`: a and b, or c); an empty
 *          tag ("" or "a,") matches a snapshot without tags
 *   paths  every one of them is one of the snapshot's paths, exactly
 * An empty set is no condition. Start from RIX_SNAPSHOT_FILTER_INIT; every string is borrowed.
 */
#define RIX_SNAPSHOT_FILTER_VERSION 1u
typedef struct rix_snapshot_filter {
	unsigned version;            /* RIX_SNAPSHOT_FILTER_VERSION */
	const char *const *hosts;
	size_t nhosts;
	const char *const *tags;
	size_t ntags;
	const char *const *paths;
	size_t npaths;
} rix_snapshot_filter;
#define RIX_SNAPSHOT_FILTER_INIT { .version = RIX_SNAPSHOT_FILTER_VERSION }

/*
 * The tags of restic's tag lists lists[0..nlists) (each "a,b": split at commas, spaces around
 * each tag trimmed, as rix_snapshot_filter's tags are read), empty tags dropped, in order, as
 * restic's TagLists.Flatten makes the tags of `backup --tag` and `tag --set/--add/--remove`:
 * { "a, b", "", "c," } gives a, b, c. *out, the caller's (one block holding the strings too:
 * rix_free), points at *n tags; NULL and 0 when there are none.
 * @return 0; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_tags_flatten(const char ***out, size_t *n, const char *const *lists,
						       size_t nlists);

/*
 * Whether sn passes f (NULL: every snapshot does). A filter of another version passes none.
 * Returns nothing to check.
 */
RIX_EXPORT bool rix_snapshot_matches(const rix_snapshot *sn, const rix_snapshot_filter *f);

/*
 * Keeps in l the snapshots that pass f (NULL: all), freeing the others; the order stays.
 * @return 0; RIX_EINVAL (f of another version; l unchanged).
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_list_filter(rix_snapshot_list *l, const rix_snapshot_filter *f);

/*
 * Keeps in l the n latest snapshots of each group of the same hostname and paths (the paths as
 * a set), freeing the others, as restic's `snapshots --latest n`; the order stays.
 * @return 0; RIX_EINVAL (n is 0); RIX_ENOMEM (l unchanged).
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_list_keep_latest(rix_snapshot_list *l, size_t n);

/* ---- groups (restic's --group-by) ----------------------------------------------------------- */

/* What restic's --group-by groups by (GroupSnapshots): any of these; 0 is one group of all. */
#define RIX_GROUP_HOST 1u
#define RIX_GROUP_PATHS 2u
#define RIX_GROUP_TAGS 4u

/*
 * restic's --group-by value s ("host,paths": each also plural or singular, empty parts ignored,
 * "" no grouping) into *by. @return 0; RIX_EINVAL ("unknown grouping option: 'x'").
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_group_by_parse(unsigned *by, const char *s);

/*
 * One group: its key and its snapshots. The key's parts are those of its snapshots (copies,
 * the group's own): hostname "" unless grouping by host, paths and tags NULL / 0 unless
 * grouping by them (or empty). key is restic's SnapshotGroupKey as Go marshals it:
 * {"hostname":"h","paths":["/a"],"tags":null} (a list not grouped by, or empty, is null).
 */
typedef struct rix_snapshot_group {
	char *key;
	const char *hostname;
	char *const *paths;
	size_t npaths;
	char *const *tags;
	size_t ntags;
	rix_snapshot_list *list; /* its snapshots (owned), oldest first as they were in l */
} rix_snapshot_group;

/*
 * l's snapshots into groups, as restic 0.14's GroupSnapshots: the key of each is its hostname,
 * paths and tags, those by groups by; every snapshot's paths are sorted in place, and its tags
 * too when grouping by them (restic sorts them so, and shows them so). The groups in the byte
 * order of their keys (restic's order is its map's, random). The snapshots move from l into
 * the groups: l is left empty (its unreadable list stays). *out (rix_snapshot_groups_free) holds
 * *n groups; NULL and 0 when l is empty.
 * @return 0; RIX_EINVAL (by has other bits); RIX_ENOMEM (l unchanged but for sorted paths and tags).
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_list_group(rix_snapshot_group **out, size_t *n, rix_snapshot_list *l,
						     unsigned by);

/* Frees groups g[0..n) and their snapshots. NULL-safe. */
RIX_EXPORT void rix_snapshot_groups_free(rix_snapshot_group *g, size_t n);

/*
 * The snapshot arg names, as restic's commands take one: "latest" is the latest of l that
 * passes f (relative paths of f taken from the working directory, as restic does for latest);
 * anything else is an ID (either case) or a prefix of one (lowercase), which must name exactly
 * one snapshot file, readable or not (f is not applied: an explicit ID wins). *out is borrowed
 * from l.
 * @return 0; RIX_ENOTFOUND (no snapshot passes f; no snapshot file's ID starts with arg); RIX_EINVAL
 * (arg is empty or a prefix of more than one ID: "multiple IDs with prefix ..."; f of another
 * version; a relative path in f for latest and no working directory); the load error of the one
 * file arg names when it is among l's unreadable ones (RIX_ECORRUPT, RIX_EAUTH, ...); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_find(rix_snapshot **out, const rix_snapshot_list *l, const char *arg,
					       const rix_snapshot_filter *f);

/*
 * The ID of the one snapshot file of r whose name starts with prefix (a whole ID in either
 * case, or a prefix of the lowercase names), from the listing alone (nothing is read), as
 * restic finds a snapshot ID. @return 0; RIX_ENOTFOUND ("no matching ID found for prefix ...");
 * RIX_EINVAL (prefix empty, or of more than one ID: "multiple IDs with prefix ... found");
 * backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_snapshot_find_id(rix_id *id, rix_repo *r, const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
