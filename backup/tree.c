/*
 * backup/tree.c — tree blobs in restic's exact bytes (rix/tree.h).
 *
 * One growing buffer per encoder (common/buf.h, shared with the snapshot encoder); each node is appended field by field in restic's order, with
 * the escapes of Go's strconv.Quote (names only) and encoding/json (every string), so that the
 * bytes equal restic's for the same metadata and the tree blobs deduplicate across the tools.
 * The encoding/json escaper is common/gojson.c's, shared with the snapshot codec and rix_json_quote.
 * Decoding is tree_decode.c's; the timestamps' text, timestamp.c's.
 */
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/tree.h"
#include "../common/buf.h"
#include "../common/gojson.h"
#include "tree_internal.h"

struct rix_tree_enc {
	rix__buf out;    /* the tree blob so far; out.failed: an append ran out of memory */
	size_t nodes;
	rix__buf prev;   /* the previous node's name, to check the order */
	rix__buf quoted; /* scratch for the Go-quoted name */
};

static const char hexdig[] = "0123456789abcdef";

static void put(rix_tree_enc *e, const void *s, size_t n)
{
	rix__buf_put(&e->out, s, n);
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

/* Go's strconv.Quote(s) without the quotes, into e->quoted; its length, or -1 (memory). */
static long go_quote(rix_tree_enc *e, const uint8_t *s, size_t n)
{
	e->quoted.len = 0;
	e->quoted.failed = false;
	if (n > SIZE_MAX / 40 || !rix__buf_reserve(&e->quoted, n * 10)) /* \U0010ffff: 10 bytes a rune at most */
		return -1;
	uint8_t *o = e->quoted.p;
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
			rix__tree_put_utf8(o, &k, r);
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

/* A JSON string with encoding/json's escapes (common/gojson.h). */
static void put_json_string(rix_tree_enc *e, const uint8_t *s, size_t n)
{
	rix__buf_put_json_string(&e->out, s, n);
}

static void put_cstring(rix_tree_enc *e, const char *s)
{
	put_json_string(e, (const uint8_t *)s, strlen(s));
}

size_t rix_json_quote(char *out, size_t cap, const char *s, size_t n)
{
	size_t len = rix__gojson_string((uint8_t *)out, cap > 0 ? cap - 1 : 0, (const uint8_t *)s, n);
	if (cap > 0)
		out[len < cap - 1 ? len : cap - 1] = '\0';
	return len;
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
	if (e->out.failed) {
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
	rix__buf_free(&e->out);
	rix__buf_free(&e->prev);
	rix__buf_free(&e->quoted);
	rix_free(e);
}

void rix_tree_enc_reset(rix_tree_enc *e)
{
	e->out.len = 0;
	e->out.failed = false;
	e->nodes = 0;
	e->prev.len = 0;
	put(e, "{\"nodes\":[", 10);
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
	if (e->nodes > 0 && rix__tree_name_cmp(e->prev.p, e->prev.len, name, n->name_len) >= 0)
		return rix_error_set(RIX_EINVAL, "tree: nodes out of order (names must increase)");
	e->prev.failed = false;
	if (!rix__buf_reserve(&e->prev, n->name_len)) /* the name fits below, whatever prev.len */
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	size_t mark = e->out.len;
	long ql = go_quote(e, name, n->name_len);
	if (ql < 0)
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	puts_(e, e->nodes > 0 ? ",{\"name\":" : "{\"name\":");
	put_json_string(e, e->quoted.p, (size_t)ql);
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
	if (e->out.failed) {
		e->out.len = mark;
		e->out.failed = false;
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	}
	e->prev.len = 0;
	rix__buf_put(&e->prev, name, n->name_len); /* reserved above: cannot fail */
	e->nodes++;
	return 0;
}

int rix_tree_enc_finish(const uint8_t **data, size_t *len, rix_tree_enc *e)
{
	*data = NULL;
	*len = 0;
	size_t mark = e->out.len;
	put(e, "]}\n", 3);
	if (e->out.failed) {
		e->out.len = mark;
		e->out.failed = false;
		return rix_error_set(RIX_ENOMEM, "tree: out of memory");
	}
	*data = e->out.p;
	*len = e->out.len;
	e->out.len = mark; /* a later add goes on before the closing bytes */
	return 0;
}
