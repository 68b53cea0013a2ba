/*
 * backup/snapshot_internal.h — what the snapshot codec (snapshot.c), the repository side
 * (snapshot_list.c) and the forget policy (forget.c) share; private to librix.
 */
#ifndef RIX_SNAPSHOT_INTERNAL_H
#define RIX_SNAPSHOT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "rix/snapshot.h"

/*
 * What rix_snapshot keeps as JSON text. The archiver builds one on its stack to hand the backup's
 * summary to rix_snapshot_encode; a decoded snapshot owns its strings (rix_snapshot_free).
 */
struct rix_snapshot_extra {
	char *summary; /* the summary object, compacted; NULL when none */
	size_t summary_len;
	char *unknown; /* the unknown members, compacted: "k":v,"k2":v2 (no outer braces); NULL when none */
	size_t unknown_len;
};

/* Frees v[0..n) and v (rix_free). */
void rix__snapshot_free_strings(char **v, size_t n);

/*
 * The next tag of a tag list ("a, b,c": split at commas, spaces around each tag trimmed, as
 * restic's TagList.Set): *tag, *len (may be empty), and *s moves past it. false when it was the
 * list's last tag.
 */
bool rix__snapshot_next_tag(const char **s, const char **tag, size_t *len);

/* Whether sn has the tag t[0..n). */
bool rix__snapshot_has_tag(const rix_snapshot *sn, const char *t, size_t n);

#endif
