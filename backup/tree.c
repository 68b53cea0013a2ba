/*
 * backup/tree.c — tree blobs in restic's exact bytes (rix/tree.h).
 *
 * One growing buffer per encoder; each node is appended field by field in restic's order, with
 * the escapes of Go's strconv.Quote (names only) and encoding/json (every string), so that the
 * bytes equal restic's for the same metadata and the tree blobs deduplicate across the tools.
 * The encoding/json escaper is common/json_out.c's, shared with rix_json_quote.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/tree.h"
#include "../common/jansson_alloc.h"
#include "../common/json_out.h"

#include <jansson.h>
#include <sodium.h>

struct rix_tree_enc {
	uint8_t *buf;
	size_t len, cap;
	size_t nodes;
	uint8_t *prev; /* the previous node's name, to check the order */
	size_t prev_len, prev_cap;
	uint8_t *quoted; /* scratch for the Go-quoted name */
	size_t quoted_cap;
	int failed; /* out of memory: every later call fails */
};

static const char hexdig[] = "0123456789abcdef";

static int grow(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 4096;
	while (c < need)
		c *= 2;
	uint8_t *q = rix_realloc(*p, c);
	if (q == NULL)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static void put(rix_tree_enc *e, const void *s, size_t n)
{
	if (e->failed || grow(&e->buf, &e->cap, e->len + n) != 0) {
		e->failed = 1;
		return;
	}
	memcpy(e->buf + e->len, s, n);
	e->len += n;
}

static void puts_(rix_tree_enc *e, const char *s)
{
	put(e, s, strlen(s));
}

static void put_u64(rix_tree_enc *e, uint64_t v)
{
	char tmp[24];
	int i = (int)sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	put(e, tmp + i, sizeof(tmp) - (size_t)i);
}

/* Go's unicode.IsPrint, exact up to U+00FF, approximated above (rix/tree.h). */
static int go_is_print(int32_t r)
{
	if (r < 0x80)
		return r >= 0x20 && r < 0x7F;
	if (r <= 0xFF)
		return r >= 0xA1 && r != 0xAD;
	if ((r >= 0x2000 && r <= 0x200F) || (r >= 0x2028 && r <= 0x202F) || (r >= 0x205F && r <= 0x206F) ||
	    r == 0x1680 || r == 0x180E || r == 0x3000 || r == 0xFEFF || (r >= 0xFFF0 && r <= 0xFFFB) ||
	    r == 0xFFFE || r == 0xFFFF || (r >= 0xE000 && r <= 0xF8FF) || (r >= 0xE0000 && r <= 0xE007F) ||
	    r >= 0xF0000 || (r & 0xFFFE) == 0xFFFE)
		return 0;
	return 1;
}

static void put_utf8(uint8_t *o, size_t *k, int32_t r)
{
	if (r < 0x80) {
		o[(*k)++] = (uint8_t)r;
	} else if (r < 0x800) {
		o[(*k)++] = (uint8_t)(0xC0 | r >> 6);
		o[(*k)++] = (uint8_t)(0x80 | (r & 0x3F));
	} else if (r < 0x10000) {
		o[(*k)++] = (uint8_t)(0xE0 | r >> 12);
		o[(*k)++] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
		o[(*k)++] = (uint8_t)(0x80 | (r & 0x3F));
	} else {
		o[(*k)++] = (uint8_t)(0xF0 | r >> 18);
		o[(*k)++] = (uint8_t)(0x80 | (r >> 12 & 0x3F));
		o[(*k)++] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
		o[(*k)++] = (uint8_t)(0x80 | (r & 0x3F));
	}
}

/* Go's strconv.Quote(s) without the quotes, into e->quoted; its length, or -1 (memory). */
static long go_quote(rix_tree_enc *e, const uint8_t *s, size_t n)
{
	if (grow(&e->quoted, &e->quoted_cap, n * 10 + 1) != 0) /* \U0010ffff: 10 bytes a rune at most */
		return -1;
	uint8_t *o = e->quoted;
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		size_t w;
		int32_t r = rix__utf8_rune(s + i, n - i, &w);
		if (r < 0) { /* an invalid byte */
			o[k++] = '\\';
			o[k++] = 'x';
			o[k++] = (uint8_t)hexdig[s[i] >> 4];
			o[k++] = (uint8_t)hexdig[s[i] & 15];
			i++;
			continue;
		}
		i += w;
		if (r == '"' || r == '\\') {
			o[k++] = '\\';
			o[k++] = (uint8_t)r;
		} else if (go_is_print(r)) {
			put_utf8(o, &k, r);
		} else {
			static const char named[] = { 'a', 'b', 't', 'n', 'v', 'f', 'r' }; /* 7..13 */
			o[k++] = '\\';
			if (r >= 7 && r <= 13) {
				o[k++] = (uint8_t)named[r - 7];
			} else if (r < ' ' || r == 0x7F) {
				o[k++] = 'x';
				o[k++] = (uint8_t)hexdig[r >> 4];
				o[k++] = (uint8_t)hexdig[r & 15];
			} else {
				int digits = r < 0x10000 ? 4 : 8;
				o[k++] = r < 0x10000 ? 'u' : 'U';
				for (int d = digits - 1; d >= 0; d--)
					o[k++] = (uint8_t)hexdig[(r >> (4 * d)) & 15];
			}
		}
	}
	return (long)k;
}

/* A JSON string with encoding/json's escapes (HTML-safe), common/json_out.c's. */
static void put_json_string(rix_tree_enc *e, const uint8_t *s, size_t n)
{
	if (e->failed || grow(&e->buf, &e->cap, e->len + RIX__JSON_QUOTE_BOUND(n)) != 0) {
		e->failed = 1;
		return;
	}
	e->len += rix__json_quote((char *)e->buf + e->len, e->cap - e->len, s, n);
}

static void put_cstring(rix_tree_enc *e, const char *s)
{
	put_json_string(e, (const uint8_t *)s, strlen(s));
}

size_t rix_json_quote(char *out, size_t cap, const char *s, size_t n)
{
	size_t len = rix__json_quote(out, cap > 0 ? cap - 1 : 0, (const uint8_t *)s, n);
	if (cap > 0)
		out[len < cap - 1 ? len : cap - 1] = '\0';
	return len;
}

static int is_leap(long y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

size_t rix_time_format(char out[RIX_TIME_MAX], const rix_time *t)
{
	time_t local = (time_t)(t->sec + t->utc_offset);
	struct tm tm;
	if (gmtime_r(&local, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	long year = (long)tm.tm_year + 1900;
	if (year < 0 || year > 9999) {
		year = year < 0 ? 0 : 9999;
		if (tm.tm_mon == 1 && tm.tm_mday == 29 && !is_leap(year)) { /* AddDate normalizes */
			tm.tm_mon = 2;
			tm.tm_mday = 1;
		}
	}
	char b[64];
	int k = snprintf(b, sizeof(b), "%04ld-%02d-%02dT%02d:%02d:%02d", year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			 tm.tm_min, tm.tm_sec);
	if (t->nsec != 0) {
		char f[16];
		snprintf(f, sizeof(f), ".%09u", t->nsec);
		size_t fl = strlen(f);
		while (fl > 1 && f[fl - 1] == '0')
			f[--fl] = '\0';
		k += snprintf(b + k, sizeof(b) - (size_t)k, "%s", f);
	}
	if (t->utc_offset == 0) {
		snprintf(b + k, sizeof(b) - (size_t)k, "Z");
	} else {
		int32_t off = t->utc_offset < 0 ? -t->utc_offset : t->utc_offset;
		snprintf(b + k, sizeof(b) - (size_t)k, "%c%02d:%02d", t->utc_offset < 0 ? '-' : '+', off / 3600,
			 off / 60 % 60);
	}
	snprintf(out, RIX_TIME_MAX, "%s", b);
	return strlen(out);
}

static void put_time(rix_tree_enc *e, const rix_time *t)
{
	char b[RIX_TIME_MAX];
	size_t n = rix_time_format(b, t);
	put(e, "\"", 1);
	put(e, b, n);
	put(e, "\"", 1);
}

static void put_base64(rix_tree_enc *e, const uint8_t *s, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	put(e, "\"", 1);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
		char q[4] = { tab[v >> 18], tab[v >> 12 & 63], i + 1 < n ? tab[v >> 6 & 63] : '=', i + 2 < n ? tab[v & 63] : '=' };
		put(e, q, 4);
	}
	put(e, "\"", 1);
}

static void put_id(rix_tree_enc *e, const rix_id *id)
{
	char hex[65];
	rix_id_to_hex(hex, id);
	put(e, "\"", 1);
	put(e, hex, 64);
	put(e, "\"", 1);
}

static int valid_utf8(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t w;
		if (rix__utf8_rune(s + i, n - i, &w) < 0)
			return 0;
		i += w;
	}
	return 1;
}

uint32_t rix_gomode_from_st_mode(uint32_t m)
{
	uint32_t g = m & 0777;
	switch (m & 0170000) {
	case 0040000: g |= RIX_GOMODE_DIR; break;
	case 0120000: g |= RIX_GOMODE_SYMLINK; break;
	case 0060000: g |= RIX_GOMODE_DEVICE; break;
	case 0020000: g |= RIX_GOMODE_DEVICE | RIX_GOMODE_CHAR_DEVICE; break;
	case 0010000: g |= RIX_GOMODE_NAMED_PIPE; break;
	case 0140000: g |= RIX_GOMODE_SOCKET; break;
	default: break;
	}
	if (m & 04000)
		g |= RIX_GOMODE_SETUID;
	if (m & 02000)
		g |= RIX_GOMODE_SETGID;
	if (m & 01000)
		g |= RIX_GOMODE_STICKY;
	return g;
}

int rix_tree_enc_new(rix_tree_enc **out)
{
	rix_tree_enc *e = rix_calloc(1, sizeof(*e));
	*out = NULL;
	if (e == NULL)
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	rix_tree_enc_reset(e);
	if (e->failed) {
		rix_tree_enc_free(e);
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	}
	*out = e;
	return 0;
}

void rix_tree_enc_free(rix_tree_enc *e)
{
	if (e == NULL)
		return;
	rix_free(e->buf);
	rix_free(e->prev);
	rix_free(e->quoted);
	rix_free(e);
}

void rix_tree_enc_reset(rix_tree_enc *e)
{
	e->len = 0;
	e->nodes = 0;
	e->prev_len = 0;
	e->failed = 0;
	put(e, "{\"nodes\":[", 10);
}

static int name_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c != 0 ? c : (an > bn) - (an < bn);
}

int rix_tree_enc_add(rix_tree_enc *e, const rix_node *n)
{
	static const char *const types[] = { "file", "dir", "symlink", "dev", "chardev", "fifo", "socket" };
	const uint8_t *name = (const uint8_t *)n->name;
	if ((unsigned)n->type > RIX_NODE_SOCKET)
		return rix_error_set(RIX_EINVAL, "tree: node type %d", (int)n->type);
	if (n->name_len == 0 || (n->name_len == 1 && name[0] == '.') ||
	    (n->name_len == 2 && name[0] == '.' && name[1] == '.') || memchr(name, '/', n->name_len) != NULL ||
	    memchr(name, '\0', n->name_len) != NULL)
		return rix_error_set(RIX_EINVAL, "tree: a node name that cannot be a directory entry");
	if (e->nodes > 0 && name_cmp(e->prev, e->prev_len, name, n->name_len) >= 0)
		return rix_error_set(RIX_EINVAL, "tree: nodes out of order (names must increase)");
	if (grow(&e->prev, &e->prev_cap, n->name_len) != 0)
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	size_t mark = e->len;
	long ql = go_quote(e, name, n->name_len);
	if (ql < 0)
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	puts_(e, e->nodes > 0 ? ",{\"name\":" : "{\"name\":");
	put_json_string(e, e->quoted, (size_t)ql);
	puts_(e, ",\"type\":\"");
	puts_(e, types[n->type]);
	put(e, "\"", 1);
	if (n->mode != 0) {
		puts_(e, ",\"mode\":");
		put_u64(e, n->mode);
	}
	puts_(e, ",\"mtime\":");
	put_time(e, &n->mtime);
	puts_(e, ",\"atime\":");
	put_time(e, &n->atime);
	puts_(e, ",\"ctime\":");
	put_time(e, &n->ctime);
	puts_(e, ",\"uid\":");
	put_u64(e, n->uid);
	puts_(e, ",\"gid\":");
	put_u64(e, n->gid);
	if (n->user != NULL && n->user[0] != '\0') {
		puts_(e, ",\"user\":");
		put_cstring(e, n->user);
	}
	if (n->group != NULL && n->group[0] != '\0') {
		puts_(e, ",\"group\":");
		put_cstring(e, n->group);
	}
	static const char *const numf[] = { ",\"inode\":", ",\"device_id\":", ",\"size\":", ",\"links\":" };
	const uint64_t nums[] = { n->inode, n->device_id, n->size, n->links };
	for (int i = 0; i < 4; i++)
		if (nums[i] != 0) {
			puts_(e, numf[i]);
			put_u64(e, nums[i]);
		}
	if (n->linktarget != NULL && n->linktarget_len > 0) {
		const uint8_t *lt = (const uint8_t *)n->linktarget;
		puts_(e, ",\"linktarget\":");
		put_json_string(e, lt, n->linktarget_len);
		if (!valid_utf8(lt, n->linktarget_len)) {
			puts_(e, ",\"linktarget_raw\":");
			put_base64(e, lt, n->linktarget_len);
		}
	}
	if (n->nxattrs > 0) {
		puts_(e, ",\"extended_attributes\":[");
		for (size_t i = 0; i < n->nxattrs; i++) {
			puts_(e, i ? ",{\"name\":" : "{\"name\":");
			put_cstring(e, n->xattrs[i].name);
			puts_(e, ",\"value\":");
			if (n->xattrs[i].len == 0 && n->xattrs[i].value == NULL)
				puts_(e, "null");
			else
				put_base64(e, n->xattrs[i].value, n->xattrs[i].len);
			put(e, "}", 1);
		}
		put(e, "]", 1);
	}
	if (n->device != 0) {
		puts_(e, ",\"device\":");
		put_u64(e, n->device);
	}
	puts_(e, ",\"content\":");
	if (n->content == NULL && n->content_len == 0 && n->type != RIX_NODE_FILE) {
		puts_(e, "null");
	} else {
		put(e, "[", 1);
		for (size_t i = 0; i < n->content_len; i++) {
			if (i)
				put(e, ",", 1);
			put_id(e, &n->content[i]);
		}
		put(e, "]", 1);
	}
	if (n->subtree != NULL) {
		puts_(e, ",\"subtree\":");
		put_id(e, n->subtree);
	}
	if (n->error != NULL && n->error[0] != '\0') {
		puts_(e, ",\"error\":");
		put_cstring(e, n->error);
	}
	put(e, "}", 1);
	if (e->failed) {
		e->len = mark;
		e->failed = 0;
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	}
	memcpy(e->prev, name, n->name_len);
	e->prev_len = n->name_len;
	e->nodes++;
	return 0;
}

int rix_tree_enc_finish(const uint8_t **data, size_t *len, rix_tree_enc *e)
{
	*data = NULL;
	*len = 0;
	size_t mark = e->len;
	put(e, "]}\n", 3);
	if (e->failed) {
		e->len = mark;
		e->failed = 0;
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	}
	*data = e->buf;
	*len = e->len;
	e->len = mark; /* a later add goes on before the closing bytes */
	return 0;
}

/* ---- decoding --------------------------------------------------------------------------- */

struct rix_tree {
	rix_node *nodes;
	size_t n;
	/* Everything the nodes point to, in one arena per tree. */
	uint8_t **blocks;
	size_t nblocks, blocks_cap;
};

static void *tree_alloc(rix_tree *t, size_t n)
{
	if (t->nblocks == t->blocks_cap) {
		size_t c = t->blocks_cap ? t->blocks_cap * 2 : 16;
		uint8_t **b = rix_realloc(t->blocks, c * sizeof(*b));
		if (b == NULL)
			return NULL;
		t->blocks = b;
		t->blocks_cap = c;
	}
	uint8_t *p = rix_malloc(n ? n : 1);
	if (p != NULL)
		t->blocks[t->nblocks++] = p;
	return p;
}

void rix_tree_free(rix_tree *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->nblocks; i++)
		rix_free(t->blocks[i]);
	rix_free(t->blocks);
	rix_free(t->nodes);
	rix_free(t);
}

size_t rix_tree_count(const rix_tree *t)
{
	return t->n;
}

const rix_node *rix_tree_node(const rix_tree *t, size_t i)
{
	return i < t->n ? &t->nodes[i] : NULL;
}

const rix_node *rix_tree_find(const rix_tree *t, const char *name, size_t len)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const rix_node *m = &t->nodes[mid];
		int c = name_cmp((const uint8_t *)m->name, m->name_len, (const uint8_t *)name, len);
		if (c == 0)
			return m;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Go's strconv.Unquote of "s" (the quotes implied): into out (at least len bytes); its length or -1. */
static long go_unquote(uint8_t *out, const char *s, size_t len)
{
	size_t k = 0;
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"')
			return -1;
		if (c != '\\') {
			out[k++] = c;
			i++;
			continue;
		}
		if (++i >= len)
			return -1;
		c = (unsigned char)s[i++];
		switch (c) {
		case 'a': out[k++] = 7; break;
		case 'b': out[k++] = 8; break;
		case 'f': out[k++] = 12; break;
		case 'n': out[k++] = 10; break;
		case 'r': out[k++] = 13; break;
		case 't': out[k++] = 9; break;
		case 'v': out[k++] = 11; break;
		case '\\': out[k++] = '\\'; break;
		case '"': out[k++] = '"'; break;
		case 'x': {
			if (i + 2 > len || hexval(s[i]) < 0 || hexval(s[i + 1]) < 0)
				return -1;
			out[k++] = (uint8_t)(hexval(s[i]) << 4 | hexval(s[i + 1]));
			i += 2;
			break;
		}
		case 'u':
		case 'U': {
			size_t digits = c == 'u' ? 4 : 8;
			int32_t r = 0;
			if (i + digits > len)
				return -1;
			for (size_t d = 0; d < digits; d++) {
				int v = hexval(s[i + d]);
				if (v < 0)
					return -1;
				r = r << 4 | v;
			}
			i += digits;
			if (r < 0 || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
				return -1;
			put_utf8(out, &k, r);
			break;
		}
		default:
			if (c >= '0' && c <= '7') { /* \NNN octal */
				if (i + 2 > len || s[i] < '0' || s[i] > '7' || s[i + 1] < '0' || s[i + 1] > '7')
					return -1;
				int v = (c - '0') << 6 | (s[i] - '0') << 3 | (s[i + 1] - '0');
				if (v > 255)
					return -1;
				out[k++] = (uint8_t)v;
				i += 2;
				break;
			}
			return -1;
		}
	}
	return (long)k;
}

int rix_time_parse(rix_time *t, const char *s)
{
	int Y, M, D, h, m, sec, n = 0;
	if (s == NULL || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 || n != 19)
		return -1;
	const char *p = s + 19;
	uint32_t nsec = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				nsec = nsec * 10 + (uint32_t)(*p - '0');
		if (digits == 0)
			return -1;
		for (; digits < 9; digits++)
			nsec *= 10;
	}
	int32_t off = 0;
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;
		if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2 || strlen(p) != 6)
			return -1;
		off = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	struct tm tm = { .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec };
	int64_t local = (int64_t)timegm(&tm);
	*t = (rix_time){ local - off, nsec, off };
	return 0;
}

static char *tree_strdup(rix_tree *t, const char *s, size_t n)
{
	char *p = tree_alloc(t, n + 1);
	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

static int tree_id(rix_id *id, json_t *v)
{
	const char *s = json_string_value(v);
	return s == NULL || json_string_length(v) != 64 || rix_id_from_hex(id, s, 64) != 0 ? -1 : 0;
}

/* base64 (standard, padded) of s into a tree block: *out, *n. */
static int tree_b64(rix_tree *t, const char *s, uint8_t **out, size_t *n)
{
	size_t sl = strlen(s);
	uint8_t *b = tree_alloc(t, sl / 4 * 3 + 3);
	if (b == NULL)
		return RIX_ENOMEM;
	size_t bl;
	if (sodium_base642bin(b, sl / 4 * 3 + 3, s, sl, NULL, &bl, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
		return RIX_ECORRUPT;
	*out = b;
	*n = bl;
	return 0;
}

static int decode_node(rix_tree *t, rix_node *n, json_t *o)
{
	static const char *const types[] = { "file", "dir", "symlink", "dev", "chardev", "fifo", "socket" };
	if (!json_is_object(o))
		return RIX_ECORRUPT;
	json_t *name = json_object_get(o, "name");
	const char *ty = json_string_value(json_object_get(o, "type"));
	if (!json_is_string(name) || ty == NULL)
		return RIX_ECORRUPT;
	size_t ql = json_string_length(name);
	uint8_t *raw = tree_alloc(t, ql + 1);
	if (raw == NULL)
		return RIX_ENOMEM;
	long nl = go_unquote(raw, json_string_value(name), ql);
	if (nl <= 0)
		return RIX_ECORRUPT;
	raw[nl] = '\0';
	n->name = (const char *)raw;
	n->name_len = (size_t)nl;
	int k = 0;
	while (k < 7 && strcmp(ty, types[k]) != 0)
		k++;
	if (k == 7)
		return RIX_ECORRUPT;
	n->type = (rix_node_type)k;
	n->mode = (uint32_t)json_integer_value(json_object_get(o, "mode"));
	/* A time restic leaves out (Go's zero time) is the zero time here too; a malformed one is not. */
	static const char *const tf[] = { "mtime", "atime", "ctime" };
	rix_time *tv[] = { &n->mtime, &n->atime, &n->ctime };
	for (int i = 0; i < 3; i++) {
		json_t *v = json_object_get(o, tf[i]);
		if (v != NULL && !json_is_null(v) && rix_time_parse(tv[i], json_string_value(v)) != 0)
			return RIX_ECORRUPT;
	}
	n->uid = (uint32_t)json_integer_value(json_object_get(o, "uid"));
	n->gid = (uint32_t)json_integer_value(json_object_get(o, "gid"));
	static const char *const strf[] = { "user", "group", "error" };
	const char **strs[] = { &n->user, &n->group, &n->error };
	for (int i = 0; i < 3; i++) {
		json_t *v = json_object_get(o, strf[i]);
		if (json_is_string(v) && (*strs[i] = tree_strdup(t, json_string_value(v), json_string_length(v))) == NULL)
			return RIX_ENOMEM;
	}
	n->inode = (uint64_t)json_integer_value(json_object_get(o, "inode"));
	n->device_id = (uint64_t)json_integer_value(json_object_get(o, "device_id"));
	n->size = (uint64_t)json_integer_value(json_object_get(o, "size"));
	n->links = (uint64_t)json_integer_value(json_object_get(o, "links"));
	n->device = (uint64_t)json_integer_value(json_object_get(o, "device"));
	json_t *raw_lt = json_object_get(o, "linktarget_raw"), *lt = json_object_get(o, "linktarget");
	if (json_is_string(raw_lt)) {
		uint8_t *b;
		size_t bl;
		int rc = tree_b64(t, json_string_value(raw_lt), &b, &bl);
		if (rc != 0)
			return rc;
		n->linktarget = (const char *)b;
		n->linktarget_len = bl;
	} else if (json_is_string(lt)) {
		if ((n->linktarget = tree_strdup(t, json_string_value(lt), json_string_length(lt))) == NULL)
			return RIX_ENOMEM;
		n->linktarget_len = json_string_length(lt);
	}
	json_t *xa = json_object_get(o, "extended_attributes");
	if (json_is_array(xa) && json_array_size(xa) > 0) {
		rix_xattr *v = tree_alloc(t, json_array_size(xa) * sizeof(*v));
		if (v == NULL)
			return RIX_ENOMEM;
		size_t i;
		json_t *x;
		json_array_foreach(xa, i, x)
		{
			json_t *xn = json_object_get(x, "name"), *xv = json_object_get(x, "value");
			if (!json_is_string(xn))
				return RIX_ECORRUPT;
			v[i].name = tree_strdup(t, json_string_value(xn), json_string_length(xn));
			if (v[i].name == NULL)
				return RIX_ENOMEM;
			v[i].value = NULL;
			v[i].len = 0;
			if (json_is_string(xv)) {
				uint8_t *b;
				int rc = tree_b64(t, json_string_value(xv), &b, &v[i].len);
				if (rc != 0)
					return rc;
				v[i].value = b;
			}
		}
		n->xattrs = v;
		n->nxattrs = json_array_size(xa);
	}
	json_t *content = json_object_get(o, "content");
	if (json_is_array(content)) {
		size_t cn = json_array_size(content);
		rix_id *ids = tree_alloc(t, cn * sizeof(*ids));
		if (ids == NULL)
			return RIX_ENOMEM;
		for (size_t i = 0; i < cn; i++)
			if (tree_id(&ids[i], json_array_get(content, i)) != 0)
				return RIX_ECORRUPT;
		n->content = ids;
		n->content_len = cn;
	}
	json_t *st = json_object_get(o, "subtree");
	if (st != NULL && !json_is_null(st)) {
		rix_id *id = tree_alloc(t, sizeof(*id));
		if (id == NULL)
			return RIX_ENOMEM;
		if (tree_id(id, st) != 0)
			return RIX_ECORRUPT;
		n->subtree = id;
	}
	return 0;
}

int rix_tree_decode(rix_tree **out, const uint8_t *json, size_t len)
{
	*out = NULL;
	rix_tree *t = rix_calloc(1, sizeof(*t));
	if (t == NULL)
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	json_t *root;
	json_error_t jerr;
	int rc = rix__jansson_load(&root, (const char *)json, len, &jerr);
	if (rc != 0) {
		rix_tree_free(t);
		return rc == RIX_ENOMEM ? rix_error_set(RIX_ENOMEM, "tree: out of memory")
					: rix_error_set(RIX_ECORRUPT, "tree: not JSON (%s)", jerr.text);
	}
	json_t *nodes = json_object_get(root, "nodes");
	if (!json_is_array(nodes)) {
		rc = rix_error_set(RIX_ECORRUPT, "tree: no \"nodes\" array");
	} else {
		t->n = json_array_size(nodes);
		t->nodes = rix_calloc(t->n ? t->n : 1, sizeof(*t->nodes));
		if (t->nodes == NULL)
			rc = rix_error_set(RIX_ENOMEM, "tree: out of memory");
		for (size_t i = 0; rc == 0 && i < t->n; i++) {
			rc = decode_node(t, &t->nodes[i], json_array_get(nodes, i));
			if (rc == 0 && i > 0 &&
			    name_cmp((const uint8_t *)t->nodes[i - 1].name, t->nodes[i - 1].name_len,
				     (const uint8_t *)t->nodes[i].name, t->nodes[i].name_len) >= 0)
				rc = RIX_ECORRUPT;
			if (rc == RIX_ECORRUPT)
				rc = rix_error_set(RIX_ECORRUPT, "tree: node %zu is not what restic writes", i);
			else if (rc == RIX_ENOMEM)
				rc = rix_error_set(RIX_ENOMEM, "tree: out of memory");
		}
	}
	json_decref(root);
	if (rc != 0) {
		rix_tree_free(t);
		return rc;
	}
	*out = t;
	return 0;
}
