/*
 * backup/snapshot.c — one snapshot (rix/snapshot.h): the JSON codec and the tags. Loading,
 * writing, lists, filters and finding are snapshot_list.c's.
 *
 * The decoder is a one-pass scanner over the text (common/json_scan.h, the same rules for keys,
 * depth and validation as the index and config decoders); strings are unescaped as Go reads them
 * (common/gojson.h). Members rix does not know, and the summary, are kept as their compacted
 * JSON text in the private rix_snapshot_extra and written back as they were, so a snapshot
 * rewritten here (tag) keeps what a newer restic put in it. The encoder appends restic's members
 * in restic's order into one growing buffer (common/buf.h, the tree encoder's), strings with
 * Go's escapes.
 */
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/snapshot.h"
#include "../common/buf.h"
#include "../common/gojson.h"
#include "../common/json_scan.h"
#include "snapshot_internal.h"

/* ==== Strings and lists ======================================================================= */

static char *dup_n(const char *s, size_t n)
{
	char *d = rix_malloc(n + 1);
	if (d != NULL) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

void rix__snapshot_free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rix_free(v[i]);
	rix_free(v);
}

void rix_snapshot_free(rix_snapshot *sn)
{
	if (sn == NULL)
		return;
	rix__snapshot_free_strings(sn->paths, sn->npaths);
	rix__snapshot_free_strings(sn->excludes, sn->nexcludes);
	rix__snapshot_free_strings(sn->tags, sn->ntags);
	rix_free(sn->hostname);
	rix_free(sn->username);
	rix_free(sn->program_version);
	if (sn->extra != NULL) {
		rix_free(sn->extra->summary);
		rix_free(sn->extra->unknown);
		rix_free(sn->extra);
	}
	rix_free(sn);
}

/* An empty snapshot: "" strings, an extra with nothing in it. NULL when out of memory. */
static rix_snapshot *snapshot_new(void)
{
	rix_snapshot *sn = rix_calloc(1, sizeof(*sn));
	if (sn == NULL)
		return NULL;
	sn->hostname = dup_n("", 0);
	sn->username = dup_n("", 0);
	sn->program_version = dup_n("", 0);
	sn->extra = rix_calloc(1, sizeof(*sn->extra));
	if (sn->hostname == NULL || sn->username == NULL || sn->program_version == NULL || sn->extra == NULL) {
		rix_snapshot_free(sn);
		return NULL;
	}
	return sn;
}

const char *rix_snapshot_summary(size_t *len, const rix_snapshot *sn)
{
	*len = 0;
	if (sn->extra == NULL || sn->extra->summary == NULL)
		return NULL;
	*len = sn->extra->summary_len;
	return sn->extra->summary;
}

/* ==== Decoding ================================================================================ */

enum {
	K_TIME,
	K_PARENT,
	K_TREE,
	K_PATHS,
	K_HOSTNAME,
	K_USERNAME,
	K_UID,
	K_GID,
	K_EXCLUDES,
	K_TAGS,
	K_ORIGINAL,
	K_PROGRAM_VERSION,
	K_SUMMARY,
	K_COUNT
};
static const rix__json_key keys[K_COUNT] = {
	RIX_JSON_KEY("time"),     RIX_JSON_KEY("parent"),   RIX_JSON_KEY("tree"),
	RIX_JSON_KEY("paths"),    RIX_JSON_KEY("hostname"), RIX_JSON_KEY("username"),
	RIX_JSON_KEY("uid"),      RIX_JSON_KEY("gid"),      RIX_JSON_KEY("excludes"),
	RIX_JSON_KEY("tags"),     RIX_JSON_KEY("original"), RIX_JSON_KEY("program_version"),
	RIX_JSON_KEY("summary"),
};

static int ill_typed(const rix__json *j, const char *p, int k, const char *want)
{
	return rix_error_set(RIX_ECORRUPT, "%s: \"%s\" is not %s at byte %zu", j->name, keys[k].name, want,
			     (size_t)(p - j->base));
}

/* The take_* helpers start with *pp at the value (past whitespace, before the end). */

/* A string value at *pp, unescaped into *out (rix_free). */
static int take_string(const rix__json *j, const char **pp, int k, char **out)
{
	const char *p = *pp;
	if (*p != '"')
		return ill_typed(j, p, k, "a string");
	const char *a = ++p;
	int rc = rix__json_skip_string(j, &p);
	if (rc != 0)
		return rc;
	size_t len;
	rc = rix__gojson_unquote(out, &len, a, (size_t)(p - 1 - a));
	if (rc == 1)
		return rix_error_set(RIX_ECORRUPT, "%s: a string of \"%s\" holds U+0000 at byte %zu", j->name,
				     keys[k].name, (size_t)(a - 1 - j->base));
	if (rc != 0)
		return rc;
	*pp = p;
	return 0;
}

/* A string member into *dst (replacing it; null leaves it). */
static int take_string_member(const rix__json *j, const char **pp, int k, char **dst)
{
	int rc = rix__json_take_null(j, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	char *s;
	rc = take_string(j, pp, k, &s);
	if (rc != 0)
		return rc;
	rix_free(*dst);
	*dst = s;
	return 0;
}

/* An ID member: 64 hex digits, no escapes (restic's ID.UnmarshalJSON). null: *has = false. */
static int take_id(const rix__json *j, const char **pp, int k, rix_id *id, bool *has)
{
	int rc = rix__json_take_null(j, pp);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		*has = false;
		return 0;
	}
	const char *p = *pp, *at = p;
	if (*p != '"')
		return ill_typed(j, p, k, "an ID string");
	const char *a = ++p;
	if ((rc = rix__json_skip_string(j, &p)) != 0)
		return rc;
	if (rix_id_from_hex(id, a, (size_t)(p - 1 - a)) != 0)
		return rix_error_set(RIX_ECORRUPT, "%s: \"%s\" is not 64 hex digits at byte %zu", j->name, keys[k].name,
				     (size_t)(at - j->base));
	*has = true;
	*pp = p;
	return 0;
}

/* A uint32 member as Go decodes one: digits only, at most 2^32-1; null leaves it. */
static int take_u32(const rix__json *j, const char **pp, int k, uint32_t *v)
{
	int rc = rix__json_take_null(j, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	const char *p = *pp, *a = p;
	if (*p != '-' && !rix__json_is_digit(p, j->end))
		return ill_typed(j, p, k, "a number");
	if ((rc = rix__json_skip_number(j, &p)) != 0)
		return rc;
	uint64_t x = 0;
	for (const char *c = a; c < p; c++) {
		if (!rix__json_is_digit(c, p) || (x = x * 10 + (uint64_t)(*c - '0')) > UINT32_MAX)
			return rix_error_set(RIX_ECORRUPT, "%s: \"%s\" is %.*s, not a whole number up to 2^32-1, at byte %zu",
					     j->name, keys[k].name, p - a > 24 ? 24 : (int)(p - a), a, (size_t)(a - j->base));
	}
	*v = (uint32_t)x;
	*pp = p;
	return 0;
}

/*
 * A list of strings into *v, *n (replacing them). null: an empty list, and *present false (for
 * paths, which must be there). A null element is "" (what Go decodes it to).
 */
static int take_strings(const rix__json *j, const char **pp, int k, char ***v, size_t *n, bool *present)
{
	int rc = rix__json_take_null(j, pp);
	if (rc < 0)
		return rc;
	rix__snapshot_free_strings(*v, *n);
	*v = NULL;
	*n = 0;
	*present = rc == 0;
	if (rc == 1)
		return 0;
	if (**pp != '[')
		return ill_typed(j, *pp, k, "a list of strings");
	int more = rix__json_open(j, pp, '[', "expected '['");
	size_t cap = 0;
	while (more > 0) {
		char *s = NULL;
		*pp = rix__json_skip_ws(*pp, j->end);
		if (*pp >= j->end)
			return rix__json_truncated(j);
		if ((rc = rix__json_take_null(j, pp)) < 0)
			return rc;
		if (rc == 1)
			s = dup_n("", 0);
		else if ((rc = take_string(j, pp, k, &s)) != 0)
			return rc;
		if (s == NULL)
			return rix_error_set(RIX_ENOMEM, "snapshot: out of memory");
		if (*n == cap) {
			size_t c = cap ? 2 * cap : 4;
			char **w = c < SIZE_MAX / sizeof(*w) ? rix_realloc(*v, c * sizeof(*w)) : NULL;
			if (w == NULL) {
				rix_free(s);
				return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for %zu strings", c);
			}
			*v = w;
			cap = c;
		}
		(*v)[(*n)++] = s;
		more = rix__json_next(j, pp, ']');
	}
	return more;
}

/* Appends text[0..n) to *buf (*len bytes, NUL-terminated) without the whitespace between tokens. */
static int append_compact(char **buf, size_t *len, const char *text, size_t n)
{
	if (n > SIZE_MAX - *len - 2)
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory");
	char *b = rix_realloc(*buf, *len + n + 1);
	if (b == NULL)
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for %zu bytes of JSON", n);
	size_t k = *len;
	bool in_str = false;
	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		if (in_str) {
			b[k++] = c;
			if (c == '\\')
				b[k++] = text[++i]; /* validated: an escape has its second byte */
			else if (c == '"')
				in_str = false;
		} else if (!rix__json_is_ws((unsigned char)c)) {
			in_str = c == '"';
			b[k++] = c;
		}
	}
	b[k] = '\0';
	*buf = b;
	*len = k;
	return 0;
}

/* The members of the top object into sn; *seen the known ones. */
static int decode_members(const rix__json *j, rix_snapshot *sn, uint32_t *seen, uint32_t *nulls)
{
	const char *p = rix__json_skip_ws(j->base, j->end);
	if (p >= j->end)
		return rix__json_corrupt(j, p, "empty: want a JSON object");
	if (*p != '{')
		return rix__json_corrupt(j, p, "not a JSON object");
	int more = rix__json_open(j, &p, '{', "not a JSON object"), rc = 0;
	bool paths_present = false, dummy;
	while (more > 0) {
		int k;
		const char *key = rix__json_skip_ws(p, j->end);
		if ((rc = rix__json_member(j, &p, keys, K_COUNT, seen, &k)) != 0)
			return rc;
		p = rix__json_skip_ws(p, j->end);
		if (p >= j->end)
			return rix__json_truncated(j);
		const char *value = p;
		switch (k) {
		case K_TIME: {
			char *t = NULL;
			if ((rc = rix__json_take_null(j, &p)) == 1)
				return rix_error_set(RIX_ECORRUPT, "%s: \"time\" is null at byte %zu", j->name,
						     (size_t)(value - j->base));
			if (rc < 0 || (rc = take_string(j, &p, k, &t)) != 0)
				return rc;
			rc = rix_time_parse(&sn->time, t) == 0
				     ? 0
				     : rix_error_set(RIX_ECORRUPT, "%s: \"time\" is not an RFC 3339 time at byte %zu",
						     j->name, (size_t)(value - j->base));
			rix_free(t);
			break;
		}
		case K_PARENT:
			rc = take_id(j, &p, k, &sn->parent, &sn->has_parent);
			break;
		case K_TREE:
			if ((rc = take_id(j, &p, k, &sn->tree, &dummy)) == 0 && !dummy)
				*nulls |= UINT32_C(1) << K_TREE; /* null: as if missing (and seen: no second one) */
			break;
		case K_PATHS:
			rc = take_strings(j, &p, k, &sn->paths, &sn->npaths, &paths_present);
			if (rc == 0 && !paths_present)
				*nulls |= UINT32_C(1) << K_PATHS;
			break;
		case K_HOSTNAME:
			rc = take_string_member(j, &p, k, &sn->hostname);
			break;
		case K_USERNAME:
			rc = take_string_member(j, &p, k, &sn->username);
			break;
		case K_UID:
			rc = take_u32(j, &p, k, &sn->uid);
			break;
		case K_GID:
			rc = take_u32(j, &p, k, &sn->gid);
			break;
		case K_EXCLUDES:
			rc = take_strings(j, &p, k, &sn->excludes, &sn->nexcludes, &dummy);
			break;
		case K_TAGS:
			rc = take_strings(j, &p, k, &sn->tags, &sn->ntags, &dummy);
			break;
		case K_ORIGINAL:
			rc = take_id(j, &p, k, &sn->original, &sn->has_original);
			break;
		case K_PROGRAM_VERSION:
			rc = take_string_member(j, &p, k, &sn->program_version);
			break;
		case K_SUMMARY:
			if ((rc = rix__json_take_null(j, &p)) != 0) {
				rc = rc < 0 ? rc : 0;
				break;
			}
			if (*p != '{')
				return ill_typed(j, p, k, "an object");
			if ((rc = rix__json_skip_value(j, &p, 1)) == 0)
				rc = append_compact(&sn->extra->summary, &sn->extra->summary_len, value, (size_t)(p - value));
			break;
		default: { /* unknown: kept, key and value, compacted */
			if ((rc = rix__json_skip_value(j, &p, 1)) != 0)
				return rc;
			const char *q = key + 1;
			if ((rc = rix__json_skip_string(j, &q)) != 0) /* the key again: its end */
				return rc;
			rix_snapshot_extra *x = sn->extra;
			if (x->unknown != NULL)
				rc = append_compact(&x->unknown, &x->unknown_len, ",", 1);
			if (rc == 0)
				rc = append_compact(&x->unknown, &x->unknown_len, key, (size_t)(q - key));
			if (rc == 0)
				rc = append_compact(&x->unknown, &x->unknown_len, ":", 1);
			if (rc == 0)
				rc = append_compact(&x->unknown, &x->unknown_len, value, (size_t)(p - value));
			break;
		}
		}
		if (rc != 0)
			return rc;
		more = rix__json_next(j, &p, '}');
	}
	if (more < 0)
		return more;
	p = rix__json_skip_ws(p, j->end);
	if (p != j->end)
		return rix__json_corrupt(j, p, "trailing bytes after the object");
	return 0;
}

int rix_snapshot_decode(rix_snapshot **out, const uint8_t *json, size_t len)
{
	*out = NULL;
	rix_snapshot *sn = snapshot_new();
	if (sn == NULL)
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory");
	const rix__json j = { (const char *)json, (const char *)json + len, "snapshot JSON", 0 };
	uint32_t seen = 0, nulls = 0;
	int rc = decode_members(&j, sn, &seen, &nulls);
	for (int k = K_TIME; rc == 0 && k <= K_PATHS; k++)
		if (k != K_PARENT && (!(seen & (UINT32_C(1) << k)) || (nulls & (UINT32_C(1) << k))))
			rc = rix_error_set(RIX_ECORRUPT, "snapshot JSON: \"%s\" is missing", keys[k].name);
	if (rc != 0) {
		rix_snapshot_free(sn);
		return rc;
	}
	*out = sn;
	return 0;
}

/* ==== Encoding ================================================================================ */

static void put_json_string(rix__buf *b, const char *s)
{
	rix__buf_put_json_string(b, (const uint8_t *)s, strlen(s));
}

/* ,"name": (the comma unless it is the first member) */
static void put_key(rix__buf *b, const char *name)
{
	if (b->len > 1)
		rix__buf_put(b, ",", 1);
	rix__buf_put(b, "\"", 1);
	rix__buf_puts(b, name);
	rix__buf_put(b, "\":", 2);
}

static void put_id(rix__buf *b, const char *name, const rix_id *id)
{
	char hex[67];
	rix_id_to_hex(hex + 1, id);
	hex[0] = hex[65] = '"';
	hex[66] = '\0';
	put_key(b, name);
	rix__buf_put(b, hex, 66);
}

static void put_strings(rix__buf *b, const char *name, char *const *v, size_t n)
{
	put_key(b, name);
	rix__buf_put(b, "[", 1);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			rix__buf_put(b, ",", 1);
		put_json_string(b, v[i]);
	}
	rix__buf_put(b, "]", 1);
}

static void put_u32(rix__buf *b, const char *name, uint32_t v)
{
	char num[16];
	int k = snprintf(num, sizeof(num), "%u", v);
	put_key(b, name);
	rix__buf_put(b, num, (size_t)k);
}

int rix_snapshot_encode(char **json, size_t *len, const rix_snapshot *sn)
{
	*json = NULL;
	*len = 0;
	rix__buf b = { 0 };
	char t[RIX_TIME_MAX];
	rix__buf_put(&b, "{", 1);
	put_key(&b, "time");
	rix__buf_put(&b, "\"", 1);
	rix__buf_put(&b, t, rix_time_format(t, &sn->time));
	rix__buf_put(&b, "\"", 1);
	if (sn->has_parent)
		put_id(&b, "parent", &sn->parent);
	put_id(&b, "tree", &sn->tree);
	put_strings(&b, "paths", sn->paths, sn->npaths);
	if (sn->hostname != NULL && sn->hostname[0] != '\0') {
		put_key(&b, "hostname");
		put_json_string(&b, sn->hostname);
	}
	if (sn->username != NULL && sn->username[0] != '\0') {
		put_key(&b, "username");
		put_json_string(&b, sn->username);
	}
	if (sn->uid != 0)
		put_u32(&b, "uid", sn->uid);
	if (sn->gid != 0)
		put_u32(&b, "gid", sn->gid);
	if (sn->nexcludes > 0)
		put_strings(&b, "excludes", sn->excludes, sn->nexcludes);
	if (sn->ntags > 0)
		put_strings(&b, "tags", sn->tags, sn->ntags);
	if (sn->has_original)
		put_id(&b, "original", &sn->original);
	if (sn->program_version != NULL && sn->program_version[0] != '\0') {
		put_key(&b, "program_version");
		put_json_string(&b, sn->program_version);
	}
	const rix_snapshot_extra *x = sn->extra;
	if (x != NULL && x->summary != NULL) {
		put_key(&b, "summary");
		rix__buf_put(&b, x->summary, x->summary_len);
	}
	if (x != NULL && x->unknown != NULL) {
		rix__buf_put(&b, ",", 1);
		rix__buf_put(&b, x->unknown, x->unknown_len);
	}
	rix__buf_put(&b, "}", 1);
	if (b.failed) {
		rix__buf_free(&b);
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory encoding");
	}
	b.p[b.len] = '\0';
	*json = (char *)b.p;
	*len = b.len;
	return 0;
}

/* ==== Tags ==================================================================================== */

bool rix__snapshot_has_tag(const rix_snapshot *sn, const char *t, size_t n)
{
	for (size_t i = 0; i < sn->ntags; i++)
		if (strlen(sn->tags[i]) == n && memcmp(sn->tags[i], t, n) == 0)
			return true;
	return false;
}

int rix_snapshot_set_tags(rix_snapshot *sn, const char *const *tags, size_t n)
{
	char **v = n > 0 ? rix_calloc(n, sizeof(*v)) : NULL;
	if (n > 0 && v == NULL)
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for %zu tags", n);
	for (size_t i = 0; i < n; i++) {
		if ((v[i] = dup_n(tags[i], strlen(tags[i]))) == NULL) {
			rix__snapshot_free_strings(v, i);
			return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for a tag");
		}
	}
	rix__snapshot_free_strings(sn->tags, sn->ntags);
	sn->tags = v;
	sn->ntags = n;
	return 0;
}

int rix_snapshot_add_tags(bool *changed, rix_snapshot *sn, const char *const *tags, size_t n)
{
	if (changed != NULL)
		*changed = false;
	/* Room for all first, so that a failure leaves sn as it was. */
	if (n > SIZE_MAX / sizeof(char *) - sn->ntags)
		return rix_error_set(RIX_ENOMEM, "snapshot: too many tags");
	char **v = rix_realloc(sn->tags, (sn->ntags + n + 1) * sizeof(*v));
	if (v == NULL)
		return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for %zu tags", sn->ntags + n);
	sn->tags = v;
	size_t old = sn->ntags;
	for (size_t i = 0; i < n; i++) {
		if (rix__snapshot_has_tag(sn, tags[i], strlen(tags[i])))
			continue;
		char *t = dup_n(tags[i], strlen(tags[i]));
		if (t == NULL) {
			for (size_t k = old; k < sn->ntags; k++)
				rix_free(sn->tags[k]);
			sn->ntags = old;
			return rix_error_set(RIX_ENOMEM, "snapshot: out of memory for a tag");
		}
		sn->tags[sn->ntags++] = t;
	}
	if (changed != NULL)
		*changed = sn->ntags != old;
	return 0;
}

void rix_snapshot_remove_tags(bool *changed, rix_snapshot *sn, const char *const *tags, size_t n)
{
	bool any = false;
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < sn->ntags; k++) {
			if (strcmp(sn->tags[k], tags[i]) != 0)
				continue;
			rix_free(sn->tags[k]);
			sn->tags[k] = sn->tags[--sn->ntags]; /* restic's: the last one takes its place */
			any = true;
			break;
		}
	}
	if (changed != NULL)
		*changed = any;
}
