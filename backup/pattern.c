/*
 * backup/pattern.c — restic's path patterns (rix/pattern.h): one component of the pattern per
 * component of the path, fnmatch within a component, "**" for any number of them.
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/pattern.h"

#define PATTERN_PARTS 256

/* Whether pattern components p[0..np) match path components s[0..ns) or a prefix of them. */
static bool match_parts(char **p, size_t np, char **s, size_t ns, bool icase)
{
	/* "**" is tried at each length; the other components consume one each, without recursion
	 * but at the "**"s (at most PATTERN_PARTS deep). */
	while (np > 0 && strcmp(p[0], "**") != 0) {
		if (ns == 0 || fnmatch(p[0], s[0], icase ? FNM_CASEFOLD : 0) != 0)
			return false;
		p++, np--, s++, ns--;
	}
	if (np == 0)
		return true; /* the whole pattern matched: a prefix of the path (its directory) */
	for (size_t k = 0; k <= ns; k++)
		if (match_parts(p + 1, np - 1, s + k, ns - k, icase))
			return true;
	return false;
}

/* Splits s (modified in place) at '/' into at most max parts; SIZE_MAX when there are more. */
static size_t split(char *s, char **parts, size_t max)
{
	size_t n = 0;
	for (char *save = NULL, *c = strtok_r(s, "/", &save); c != NULL; c = strtok_r(NULL, "/", &save)) {
		if (n == max)
			return SIZE_MAX;
		parts[n++] = c;
	}
	return n;
}

static bool match_split(bool *child_may_match, char *pbuf, bool rel, char *sbuf, char **pp, char **sp, size_t maxs,
			bool icase)
{
	size_t np = split(pbuf, pp, PATTERN_PARTS), ns = split(sbuf, sp, maxs);
	if (np == 0 || np == SIZE_MAX || ns == SIZE_MAX)
		return false;
	bool m = match_parts(pp, np, sp, ns, icase);
	if (child_may_match != NULL) {
		if (rel) {
			*child_may_match = true; /* may match at any depth */
		} else {
			/* the path against the pattern's first components, cut at a "**" */
			size_t l = 0;
			while (l < np && strcmp(pp[l], "**") != 0)
				l++;
			if (l < np) {
				*child_may_match = true;
				for (size_t i = 0; i < l && i < ns; i++)
					if (fnmatch(pp[i], sp[i], icase ? FNM_CASEFOLD : 0) != 0)
						*child_may_match = false;
			} else {
				size_t k = ns < np ? ns : np;
				*child_may_match = match_parts(pp, k, sp, k, icase);
			}
		}
	}
	return m;
}

int rix_pattern_match_checked(bool *match, bool *child_may_match, const char *pattern, const char *path, bool icase)
{
	char pbuf[4096 + 4], sbuf[4096];
	char *pp[PATTERN_PARTS], *sp[128];
	*match = false;
	if (child_may_match != NULL)
		*child_may_match = false;
	if (pattern[0] == '\0')
		return 0;
	bool rel = pattern[0] != '/';
	if ((size_t)snprintf(pbuf, sizeof(pbuf), "%s%s", rel ? "**/" : "", pattern) >= sizeof(pbuf))
		return 0;
	size_t plen = strlen(path);
	if (plen < sizeof(sbuf) && plen / 2 + 1 < sizeof(sp) / sizeof(sp[0])) { /* the common case: no allocation */
		memcpy(sbuf, path, plen + 1);
		*match = match_split(child_may_match, pbuf, rel, sbuf, pp, sp, sizeof(sp) / sizeof(sp[0]), icase);
		return 0;
	}
	/* a long or deep path: its copy and components on the heap (at most plen / 2 + 1 of them) */
	size_t maxs = plen / 2 + 1;
	char *big = rix_malloc(plen + 1);
	char **bsp = rix_malloc(maxs * sizeof(*bsp));
	int rc = 0;
	if (big != NULL && bsp != NULL) {
		memcpy(big, path, plen + 1);
		*match = match_split(child_may_match, pbuf, rel, big, pp, bsp, maxs, icase);
	} else {
		if (child_may_match != NULL)
			*child_may_match = false;
		rc = rix_error_set(RIX_ENOMEM, "pattern: out of memory for a path of %zu bytes", plen);
	}
	rix_free(big);
	rix_free(bsp);
	return rc;
}

bool rix_pattern_match(bool *child_may_match, const char *pattern, const char *path, bool icase)
{
	bool m;
	return rix_pattern_match_checked(&m, child_may_match, pattern, path, icase) == 0 && m;
}
