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
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Whether pattern matches path (absolute, as "/dir/file"); icase: ignoring case (restic's
 * --iinclude, --iexclude). *child_may_match (may be NULL) says whether the pattern could match
 * something below path, as restic's ListWithChild: always for a pattern that does not start
 * with '/', else when path's components match the pattern's first ones (up to a `**`).
 * A pattern of more than 256 components, or of 4096 bytes or more, matches nothing. Allocates
 * nothing for paths under 4096 bytes of at most 512 components (others: a copy, and nothing
 * matches if that fails: see rix_pattern_match_checked); thread-safe. It splits the pattern and
 * the path at each call: what matches many paths against the same patterns uses rix_patterns.
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

/*
 * Patterns compiled once (each split into its components) for matching many paths: what the
 * archiver's excludes and the restorer's includes and excludes are, one list each.
 */
typedef struct rix_patterns rix_patterns;

/*
 * Compiles pats[0..n) (matched with case) and ipats[0..ni) (ignoring case) into *out (freed with
 * rix_patterns_free). A pattern that matches nothing (see rix_pattern_match) is left out.
 * @return 0; RIX_ENOMEM (*out NULL).
 */
RIX_EXPORT RIX_NODISCARD int rix_patterns_new(rix_patterns **out, const char *const *pats, size_t n,
					      const char *const *ipats, size_t ni);
RIX_EXPORT void rix_patterns_free(rix_patterns *ps);

/*
 * Whether one of ps (NULL: none) matches path (*match), and whether one could match something
 * below path (*child_may_match, may be NULL), by rix_pattern_match's rules; the path is split
 * once for all of them. Allocates what rix_pattern_match does; thread-safe.
 * @return 0; RIX_ENOMEM (*match and *child_may_match false).
 */
RIX_EXPORT RIX_NODISCARD int rix_patterns_match(const rix_patterns *ps, bool *match, bool *child_may_match,
						const char *path);

#ifdef __cplusplus
}
#endif
#endif
