/*
 * rix/pattern.h — restic's include and exclude patterns (its internal/filter), for the
 * restorer's --include / --exclude and for any program that selects paths of a snapshot.
 *
 * A pattern and a path are split at '/' into components; each pattern component matches one
 * path component with fnmatch(3) syntax (`*`, `?`, `[...]`, never across '/'), and `**` matches
 * any number of components. A pattern that does not start with '/' may match at any depth (it
 * is "**" + "/" + pattern). A pattern that matches the first components of a path matches the
 * path too: "/home/user" matches "/home/user/.bashrc" (everything under a matched directory).
 */
#ifndef RIX_PATTERN_H
#define RIX_PATTERN_H

#include "rix/common.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Whether pattern matches path (absolute, as "/dir/file"); icase: ignoring case (restic's
 * --iinclude, --iexclude). *child_may_match (may be NULL) says whether the pattern could match
 * something below path, as restic's ListWithChild: always for a pattern that does not start
 * with '/', else when path's components match the pattern's first ones (up to a `**`).
 * A pattern of more than 256 components or 4096 bytes matches nothing. Allocates nothing for
 * paths under 4096 bytes (longer ones: a copy, and nothing matches if that fails: see rix_pattern_match_checked);
 * thread-safe.
 */
RIX_EXPORT bool rix_pattern_match(bool *child_may_match, const char *pattern, const char *path, bool icase);

/*
 * The same, telling a failed allocation (a path of 4096 bytes or more) from "no match": *match
 * (and *child_may_match, may be NULL) set. What deletes or keeps by pattern (restore --delete
 * with --exclude) must use this one: "no match" there removes what was excluded.
 * @return 0; RIX_ENOMEM (*match and *child_may_match false).
 */
RIX_EXPORT RIX_NODISCARD int rix_pattern_match_checked(bool *match, bool *child_may_match, const char *pattern,
						       const char *path, bool icase);

#ifdef __cplusplus
}
#endif
#endif
