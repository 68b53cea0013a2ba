/*
 * backup/pattern.c — restic's path patterns (rix/pattern.h): one component of the pattern per
 * component of the path, fnmatch within a component, "**" for any number of them.
 *
 * A pattern is split once (rix_patterns_new, or on the stack for rix_pattern_match): its
 * components NUL-terminated in one buffer, each preceded by a byte saying whether it is a
 * literal (no '*', '?', '[', '\\': compared with strcmp rather than fnmatch). A path is split
 * once per call, whatever the number of patterns.
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/pattern.h"

#define PATTERN_PARTS 256
#define PATTERN_BYTES 4096
/* Components of a path split on the stack (deeper paths: on the heap). */
#define PATH_PARTS 512
/* The buffer of a compiled pattern ("**" before a relative one, a flag byte and a NUL per
 * component): for one of len bytes (at most len / 2 + 1 components), and for any that compiles. */
#define PAT_BUF(len) (2 * (size_t)(len) + 8)
#define PAT_BUF_MAX (PATTERN_BYTES + 2 * PATTERN_PARTS + 8)

struct pat {
	char *buf;    /* the components */
	char **parts; /* np components; parts[i][-1] != 0: a literal */
	size_t np;
	size_t lead;  /* components before the first "**" (np if none) */
	bool rel, icase;
};

struct rix_patterns {
	struct pat *p;
	size_t n;
};

/* Compiles pattern into p, its components in buf (PAT_BUF) and parts (maxparts). false: it
 * matches nothing (empty, or more than PATTERN_PARTS components, or PATTERN_BYTES bytes or more). */
static bool pat_init(struct pat *p, char *buf, char **parts, size_t maxparts, const char *pattern, bool icase)
{
	size_t len = strlen(pattern);
	memset(p, 0, sizeof(*p));
	p->buf = buf;
	p->parts = parts;
	p->icase = icase;
	if (len == 0 || len >= PATTERN_BYTES)
		return false;
	p->rel = pattern[0] != '/';
	char *o = buf;
	if (p->rel) {
		parts[p->np++] = o + 1;
		memcpy(o, "\0**", 4);
		o += 4;
	}
	for (const char *c = pattern; *c != '\0';) {
		size_t n = strcspn(c, "/");
		if (n > 0) {
			if (p->np == maxparts || p->np == PATTERN_PARTS)
				return p->np = 0, false;
			*o = memchr(c, '*', n) == NULL && memchr(c, '?', n) == NULL && memchr(c, '[', n) == NULL &&
			     memchr(c, '\\', n) == NULL && !icase;
			parts[p->np++] = o + 1;
			memcpy(o + 1, c, n);
			o[n + 1] = '\0';
			o += n + 2;
		}
		c += n;
		c += *c == '/';
	}
	while (p->lead < p->np && strcmp(p->parts[p->lead], "**") != 0)
		p->lead++;
	return p->np > 0;
}

static bool comp_match(const char *pc, const char *s, bool icase)
{
	if (pc[-1])
		return strcmp(pc, s) == 0;
	return fnmatch(pc, s, icase ? FNM_CASEFOLD : 0) == 0;
}

/* Whether pattern components p[0..np) match path components s[0..ns) or a prefix of them. */
static bool match_parts(char *const *p, size_t np, char *const *s, size_t ns, bool icase)
{
	/* "**" is tried at each length; the other components consume one each, without recursion
	 * but at the "**"s (at most PATTERN_PARTS deep). */
	while (np > 0 && strcmp(p[0], "**") != 0) {
		if (ns == 0 || !comp_match(p[0], s[0], icase))
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

/* Pattern p against the path's components s[0..ns): *m, and *child (may be NULL). */
static void pat_match(const struct pat *p, bool *m, bool *child, char *const *s, size_t ns)
{
	*m = p->np > 0 && match_parts(p->parts, p->np, s, ns, p->icase);
	if (child == NULL)
		return;
	if (p->np == 0) {
		*child = false;
	} else if (p->rel) {
		*child = true; /* may match at any depth */
	} else if (p->lead < p->np) {
		/* the path against the pattern's first components, cut at a "**" */
		*child = true;
		for (size_t i = 0; i < p->lead && i < ns && *child; i++)
			*child = comp_match(p->parts[i], s[i], p->icase);
	} else {
		size_t k = ns < p->np ? ns : p->np;
		*child = match_parts(p->parts, k, s, k, p->icase);
	}
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

/* Patterns p[0..n) against path: whether one matches (*match), and may match below (*child,
 * may be NULL). The path is split once: on the stack, or for a long or deep one on the heap. */
static int match_list(const struct pat *p, size_t n, bool *match, bool *child, const char *path)
{
	char sbuf[PATTERN_BYTES];
	char *sp[PATH_PARTS];
	*match = false;
	if (child != NULL)
		*child = false;
	if (n == 0)
		return 0;
	size_t plen = strlen(path), maxs = plen / 2 + 1; /* at most that many components */
	char *str = sbuf, *big = NULL;
	char **parts = sp, **bparts = NULL;
	if (plen >= sizeof(sbuf) || maxs > PATH_PARTS) {
		big = plen >= sizeof(sbuf) ? rix_malloc(plen + 1) : NULL;
		bparts = maxs > PATH_PARTS ? rix_malloc(maxs * sizeof(*bparts)) : NULL;
		if ((plen >= sizeof(sbuf) && big == NULL) || (maxs > PATH_PARTS && bparts == NULL)) {
			rix_free(big);
			rix_free(bparts);
			return rix_error_set(RIX_ENOMEM, "pattern: out of memory for a path of %zu bytes", plen);
		}
		str = big != NULL ? big : sbuf;
		parts = bparts != NULL ? bparts : sp;
	}
	memcpy(str, path, plen + 1);
	size_t ns = split(str, parts, maxs > PATH_PARTS ? maxs : PATH_PARTS);
	for (size_t i = 0; i < n && ns != SIZE_MAX; i++) {
		bool m, c = false;
		pat_match(&p[i], &m, child != NULL && !*child ? &c : NULL, parts, ns);
		*match |= m;
		if (child != NULL)
			*child |= c;
		if (*match && (child == NULL || *child))
			break; /* nothing more to learn */
	}
	rix_free(big);
	rix_free(bparts);
	return 0;
}

int rix_pattern_match_checked(bool *match, bool *child_may_match, const char *pattern, const char *path, bool icase)
{
	char buf[PAT_BUF_MAX];
	char *parts[PATTERN_PARTS];
	struct pat p;
	if (!pat_init(&p, buf, parts, PATTERN_PARTS, pattern, icase)) {
		*match = false;
		if (child_may_match != NULL)
			*child_may_match = false;
		return 0;
	}
	return match_list(&p, 1, match, child_may_match, path);
}

bool rix_pattern_match(bool *child_may_match, const char *pattern, const char *path, bool icase)
{
	bool m;
	return rix_pattern_match_checked(&m, child_may_match, pattern, path, icase) == 0 && m;
}

int rix_patterns_new(rix_patterns **out, const char *const *pats, size_t n, const char *const *ipats, size_t ni)
{
	*out = NULL;
	rix_patterns *ps = rix_calloc(1, sizeof(*ps));
	if (ps == NULL || (n + ni > 0 && (ps->p = rix_calloc(n + ni, sizeof(*ps->p))) == NULL))
		goto nomem;
	for (size_t i = 0; i < n + ni; i++) {
		const char *pattern = i < n ? pats[i] : ipats[i - n];
		size_t len = strlen(pattern), maxparts = len / 2 + 2; /* "**" and at most len / 2 + 1 */
		char *buf = rix_malloc(PAT_BUF(len));
		char **parts = rix_malloc(maxparts * sizeof(*parts));
		if (buf == NULL || parts == NULL) {
			rix_free(buf);
			rix_free(parts);
			goto nomem;
		}
		if (!pat_init(&ps->p[ps->n], buf, parts, maxparts, pattern, i >= n)) {
			rix_free(buf); /* matches nothing: left out */
			rix_free(parts);
			continue;
		}
		ps->n++;
	}
	*out = ps;
	return 0;
nomem:
	rix_patterns_free(ps);
	return rix_error_set(RIX_ENOMEM, "pattern: out of memory");
}

void rix_patterns_free(rix_patterns *ps)
{
	if (ps == NULL)
		return;
	for (size_t i = 0; i < ps->n; i++) {
		rix_free(ps->p[i].buf);
		rix_free(ps->p[i].parts);
	}
	rix_free(ps->p);
	rix_free(ps);
}

int rix_patterns_match(const rix_patterns *ps, bool *match, bool *child_may_match, const char *path)
{
	return match_list(ps != NULL ? ps->p : NULL, ps != NULL ? ps->n : 0, match, child_may_match, path);
}
