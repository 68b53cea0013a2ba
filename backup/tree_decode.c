/*
 * backup/tree_decode.c — tree blobs read as restic's Go code reads them (rix/tree.h): the
 * decoder and the decoded tree (its nodes, and one arena for everything they point to). The
 * encoder, whose bytes these are, is tree.c.
 */
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/tree.h"
#include "../common/buf.h"
#include "../common/gojson.h"
#include "../common/json_scan.h"
#include "tree_internal.h"

#include <sodium.h>

/* ---- decoding --------------------------------------------------------------------------- */

struct rix_tree {
	rix_node *nodes;
	size_t n;
	/* Everything the nodes point to, bump-allocated from blocks that double (4 KiB to 256 KiB);
	 * a piece larger than half the next block gets a block of its own. */
	uint8_t **blocks;
	size_t nblocks, blocks_cap;
	uint8_t *cur;   /* free space of the newest small block */
	size_t left;
	size_t next;    /* the next small block's size */
};

#define TREE_ALIGN 16
#define TREE_BLOCK_MIN ((size_t)4 << 10)
#define TREE_BLOCK_MAX ((size_t)256 << 10)

/* A new block of n bytes, kept for rix_tree_free. */
static uint8_t *tree_block(rix_tree *t, size_t n)
{
	if (t->nblocks == t->blocks_cap) {
		size_t c = t->blocks_cap ? t->blocks_cap * 2 : 16;
		uint8_t **b = rix_realloc(t->blocks, c * sizeof(*b));
		if (b == NULL)
			return NULL;
		t->blocks = b;
		t->blocks_cap = c;
	}
	uint8_t *p = rix_malloc(n);
	if (p != NULL)
		t->blocks[t->nblocks++] = p;
	return p;
}

/* n bytes that live as long as t, aligned for any of the node's arrays. */
static void *tree_alloc(rix_tree *t, size_t n)
{
	if (n > SIZE_MAX - TREE_ALIGN)
		return NULL;
	size_t need = (n + TREE_ALIGN - 1) & ~(size_t)(TREE_ALIGN - 1);
	if (need == 0)
		need = TREE_ALIGN;
	if (need <= t->left) {
		void *p = t->cur;
		t->cur += need;
		t->left -= need;
		return p;
	}
	if (t->next == 0)
		t->next = TREE_BLOCK_MIN;
	if (need > t->next / 2)
		return tree_block(t, need);
	uint8_t *b = tree_block(t, t->next);
	if (b == NULL)
		return NULL;
	t->cur = b + need;
	t->left = t->next - need;
	if (t->next < TREE_BLOCK_MAX)
		t->next *= 2;
	return b;
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
		int c = rix__tree_name_cmp((const uint8_t *)m->name, m->name_len, (const uint8_t *)name, len);
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

/*
 * Go's strconv.Unquote of "s" (the quotes implied): into out (at least len bytes); its length
 * or -1. s is valid UTF-8 (a decoded JSON string), so raw bytes are copied as they are.
 */
static long go_unquote(uint8_t *out, const char *s, size_t len)
{
	size_t k = 0;
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\n') /* Go refuses an unescaped quote or newline */
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
				r = (int32_t)((uint32_t)r << 4 | (uint32_t)v);
			}
			i += digits;
			if (r < 0 || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
				return -1;
			rix__tree_put_utf8(out, &k, r);
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

/*
 * The decoder reads restic's Node JSON the way Go's encoding/json reads it into restic's Node,
 * with the one scanner of rix's JSON decoders (common/json_scan.h: its key rule, its depth
 * limit), and no DOM:
 *   - numbers: unsigned integers only (a sign, a fraction or an exponent is refused, as Go
 *     refuses them for a uint field), up to the field's width: uint32 for mode, uid and gid,
 *     uint64 for the others (inode numbers past 2^63 exist); null leaves the field at zero;
 *   - strings: Go's unescaping (a lone surrogate and each invalid UTF-8 byte become U+FFFD);
 *     null leaves the field empty; the name is then Go-unquoted;
 *   - times and IDs: their raw bytes (Go parses them from the JSON text itself);
 *   - []byte fields (linktarget_raw, an xattr's value): standard padded base64, or null;
 *   - a value of another JSON type is refused (Go's Unmarshal fails on it); unknown keys are
 *     skipped (restic 0.17's generic_attributes).
 */
struct dec {
	rix__json j;
	rix_tree *t;
	rix__buf scratch; /* a string being unescaped (len stays 0) */
	rix_id *ids; /* a content list being read */
	size_t icap;
	rix_xattr *xa; /* an xattr list being read */
	size_t xcap;
	size_t cap;  /* of t->nodes */
};

enum {
	K_NAME, K_TYPE, K_MODE, K_MTIME, K_ATIME, K_CTIME, K_UID, K_GID, K_USER, K_GROUP, K_INODE,
	K_DEVICE_ID, K_SIZE, K_LINKS, K_LINKTARGET, K_LINKTARGET_RAW, K_XATTRS, K_DEVICE, K_CONTENT,
	K_SUBTREE, K_ERROR, K_COUNT
};
static const rix__json_key node_keys[K_COUNT] = {
	RIX_JSON_KEY("name"), RIX_JSON_KEY("type"), RIX_JSON_KEY("mode"), RIX_JSON_KEY("mtime"),
	RIX_JSON_KEY("atime"), RIX_JSON_KEY("ctime"), RIX_JSON_KEY("uid"), RIX_JSON_KEY("gid"),
	RIX_JSON_KEY("user"), RIX_JSON_KEY("group"), RIX_JSON_KEY("inode"), RIX_JSON_KEY("device_id"),
	RIX_JSON_KEY("size"), RIX_JSON_KEY("links"), RIX_JSON_KEY("linktarget"), RIX_JSON_KEY("linktarget_raw"),
	RIX_JSON_KEY("extended_attributes"), RIX_JSON_KEY("device"), RIX_JSON_KEY("content"),
	RIX_JSON_KEY("subtree"), RIX_JSON_KEY("error"),
};
static const rix__json_key top_keys[1] = { RIX_JSON_KEY("nodes") };
enum { X_NAME, X_VALUE, X_COUNT };
static const rix__json_key xattr_keys[X_COUNT] = { RIX_JSON_KEY("name"), RIX_JSON_KEY("value") };

/* Levels of containers around a node's members, and around an xattr's (json_scan's depth). */
#define NODE_DEPTH 3
#define XATTR_DEPTH 5

static int dec_nomem(void)
{
	return rix_error_set(RIX_ENOMEM, "tree: out of memory");
}

/* The value at *pp (after whitespace): 1 if it is null (consumed), 0 if not, < 0 on error. */
static int dec_null(struct dec *d, const char **pp)
{
	const char *p = rix__json_skip_ws(*pp, d->j.end);
	if (p >= d->j.end)
		return rix__json_truncated(&d->j);
	*pp = p;
	return rix__json_take_null(&d->j, pp);
}

/* A string's raw bytes between its quotes (validated, escapes left as they are): s, n. */
static int dec_raw_string(struct dec *d, const char **pp, const char **s, size_t *n, const char *what)
{
	*s = NULL; /* set on every path: the compiler cannot tell the error paths return nonzero */
	*n = 0;
	const char *p = rix__json_skip_ws(*pp, d->j.end);
	if (p >= d->j.end)
		return rix__json_truncated(&d->j);
	if (*p != '"')
		return rix__json_corrupt(&d->j, p, what);
	*s = ++p;
	int rc = rix__json_skip_string(&d->j, &p);
	if (rc != 0)
		return rc;
	*n = (size_t)(p - 1 - *s);
	*pp = p;
	return 0;
}

/* A string unescaped as Go's encoding/json does (common/gojson.h) into d->scratch
 * (NUL-terminated): *len bytes. */
static int dec_string(struct dec *d, const char **pp, size_t *len, const char *what)
{
	const char *s;
	size_t n;
	int rc = dec_raw_string(d, pp, &s, &n, what);
	if (rc != 0)
		return rc;
	d->scratch.failed = false;
	if (n > SIZE_MAX / 12 || !rix__buf_reserve(&d->scratch, 3 * n))
		return dec_nomem();
	bool nul;
	*len = rix__gojson_unescape((char *)d->scratch.p, s, n, &nul);
	return 0;
}

/* A copy of d->scratch.p[0..n) (NUL-terminated) in the tree. */
static char *dec_keep(struct dec *d, size_t n)
{
	char *p = tree_alloc(d->t, n + 1);
	if (p != NULL)
		memcpy(p, d->scratch.p, n + 1);
	return p;
}

/* A string field (or null: *out unchanged) kept in the tree; *len its length when wanted. */
static int dec_kept_string(struct dec *d, const char **pp, const char **out, size_t *len, const char *what)
{
	int rc = dec_null(d, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	size_t n;
	if ((rc = dec_string(d, pp, &n, what)) != 0)
		return rc;
	if ((*out = dec_keep(d, n)) == NULL)
		return dec_nomem();
	if (len != NULL)
		*len = n;
	return 0;
}

/* An unsigned integer up to max, or null (*v unchanged). */
static int dec_uint(struct dec *d, const char **pp, uint64_t max, uint64_t *v, const char *what)
{
	int rc = dec_null(d, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	const char *p = *pp, *end = d->j.end;
	if (!rix__json_is_digit(p, end))
		return rix__json_corrupt(&d->j, p, what);
	uint64_t x = 0;
	if (*p == '0') {
		p++;
	} else {
		for (; rix__json_is_digit(p, end); p++) {
			unsigned dig = (unsigned)(*p - '0');
			if (x > (UINT64_MAX - dig) / 10)
				return rix__json_corrupt(&d->j, *pp, "number out of range");
			x = x * 10 + dig;
		}
	}
	if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
		return rix__json_corrupt(&d->j, *pp, "not an integer");
	if (x > max)
		return rix__json_corrupt(&d->j, *pp, "number out of range");
	*v = x;
	*pp = p;
	return 0;
}

static int dec_u32(struct dec *d, const char **pp, uint32_t *v, const char *what)
{
	uint64_t x = *v;
	int rc = dec_uint(d, pp, UINT32_MAX, &x, what);
	*v = (uint32_t)x;
	return rc;
}

/* A time (RFC 3339, its raw bytes), or null (the zero time: *t unchanged). */
static int dec_time(struct dec *d, const char **pp, rix_time *t)
{
	int rc = dec_null(d, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	const char *s, *at = rix__json_skip_ws(*pp, d->j.end);
	size_t n;
	if ((rc = dec_raw_string(d, pp, &s, &n, "a time is not a string")) != 0)
		return rc;
	char buf[RIX_TIME_MAX];
	if (n >= sizeof(buf))
		return rix__json_corrupt(&d->j, at, "bad time");
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (rix_time_parse(t, buf) != 0)
		return rix__json_corrupt(&d->j, at, "bad time");
	return 0;
}

/* An ID: a string of 64 hex digits (raw: restic's ID reads the JSON text itself). */
static int dec_id(struct dec *d, const char **pp, rix_id *id)
{
	const char *s, *at = rix__json_skip_ws(*pp, d->j.end);
	size_t n;
	int rc = dec_raw_string(d, pp, &s, &n, "an ID is not a string");
	if (rc != 0)
		return rc;
	if (n != 2 * RIX_ID_SIZE || rix_id_from_hex(id, s, n) != 0)
		return rix__json_corrupt(&d->j, at, "bad ID");
	return 0;
}

/* A []byte: null (*out NULL, *n 0), or standard padded base64 of a string, kept in the tree. */
static int dec_bytes(struct dec *d, const char **pp, const uint8_t **out, size_t *n)
{
	int rc = dec_null(d, pp);
	if (rc != 0) {
		if (rc > 0) {
			*out = NULL;
			*n = 0;
		}
		return rc < 0 ? rc : 0;
	}
	const char *at = rix__json_skip_ws(*pp, d->j.end);
	size_t sl;
	if ((rc = dec_string(d, pp, &sl, "bytes are not a base64 string")) != 0)
		return rc;
	uint8_t *b = tree_alloc(d->t, sl / 4 * 3 + 3);
	if (b == NULL)
		return dec_nomem();
	size_t bl;
	if (sodium_base642bin(b, sl / 4 * 3 + 3, (const char *)d->scratch.p, sl, NULL, &bl, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0)
		return rix__json_corrupt(&d->j, at, "bad base64");
	*out = b;
	*n = bl;
	return 0;
}

/* An array of 64-hex-digit IDs, or null (*out NULL). */
static int dec_content(struct dec *d, const char **pp, const rix_id **out, size_t *count)
{
	int rc = dec_null(d, pp);
	if (rc != 0) {
		if (rc > 0) {
			*out = NULL;
			*count = 0;
		}
		return rc < 0 ? rc : 0;
	}
	if (**pp != '[')
		return rix__json_corrupt(&d->j, *pp, "content is not an array");
	size_t n = 0;
	int more = rix__json_open(&d->j, pp, '[', "content is not an array");
	for (; more > 0; more = rix__json_next(&d->j, pp, ']')) {
		if (n == d->icap) {
			size_t c = d->icap ? d->icap * 2 : 64;
			rix_id *v = rix_realloc(d->ids, c * sizeof(*v));
			if (v == NULL)
				return dec_nomem();
			d->ids = v;
			d->icap = c;
		}
		if ((rc = dec_id(d, pp, &d->ids[n])) != 0)
			return rc;
		n++;
	}
	if (more < 0)
		return more;
	rix_id *ids = tree_alloc(d->t, n * sizeof(*ids));
	if (ids == NULL)
		return dec_nomem();
	if (n > 0)
		memcpy(ids, d->ids, n * sizeof(*ids));
	*out = ids;
	*count = n;
	return 0;
}

/* One {"name":..,"value":..} (null: a nameless, valueless one, as Go reads it) into *x. */
static int dec_xattr(struct dec *d, const char **pp, rix_xattr *x)
{
	*x = (rix_xattr){ "", NULL, 0 };
	int rc = dec_null(d, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	if (**pp != '{')
		return rix__json_corrupt(&d->j, *pp, "an extended attribute is not an object");
	uint32_t seen = 0;
	int more = rix__json_open(&d->j, pp, '{', "an extended attribute is not an object");
	for (; more > 0; more = rix__json_next(&d->j, pp, '}')) {
		int k;
		if ((rc = rix__json_member(&d->j, pp, xattr_keys, X_COUNT, &seen, &k)) != 0)
			return rc;
		if (k == X_NAME)
			rc = dec_kept_string(d, pp, &x->name, NULL, "an attribute name is not a string");
		else if (k == X_VALUE)
			rc = dec_bytes(d, pp, &x->value, &x->len);
		else
			rc = rix__json_skip_value(&d->j, pp, XATTR_DEPTH);
		if (rc != 0)
			return rc;
	}
	return more;
}

static int dec_xattrs(struct dec *d, const char **pp, rix_node *nd)
{
	int rc = dec_null(d, pp);
	if (rc != 0) {
		if (rc > 0) {
			nd->xattrs = NULL;
			nd->nxattrs = 0;
		}
		return rc < 0 ? rc : 0;
	}
	if (**pp != '[')
		return rix__json_corrupt(&d->j, *pp, "extended_attributes is not an array");
	size_t n = 0;
	int more = rix__json_open(&d->j, pp, '[', "extended_attributes is not an array");
	for (; more > 0; more = rix__json_next(&d->j, pp, ']')) {
		if (n == d->xcap) {
			size_t c = d->xcap ? d->xcap * 2 : 8;
			rix_xattr *v = rix_realloc(d->xa, c * sizeof(*v));
			if (v == NULL)
				return dec_nomem();
			d->xa = v;
			d->xcap = c;
		}
		if ((rc = dec_xattr(d, pp, &d->xa[n])) != 0)
			return rc;
		n++;
	}
	if (more < 0)
		return more;
	rix_xattr *v = tree_alloc(d->t, n * sizeof(*v));
	if (v == NULL)
		return dec_nomem();
	if (n > 0)
		memcpy(v, d->xa, n * sizeof(*v));
	nd->xattrs = n > 0 ? v : NULL;
	nd->nxattrs = n;
	return 0;
}

/* The name: a JSON string holding Go's quoting of the raw bytes. */
static int dec_name(struct dec *d, const char **pp, rix_node *nd)
{
	const char *at = rix__json_skip_ws(*pp, d->j.end);
	size_t ql;
	int rc = dec_string(d, pp, &ql, "a name is not a string");
	if (rc != 0)
		return rc;
	uint8_t *raw = tree_alloc(d->t, ql + 1);
	if (raw == NULL)
		return dec_nomem();
	long nl = go_unquote(raw, (const char *)d->scratch.p, ql);
	if (nl < 0)
		return rix__json_corrupt(&d->j, at, "a name that does not unquote");
	/* A name no directory entry has (restic writes readdir's names): "", ".", "..", a '/' or a
	 * NUL in it. The encoder refuses them too, and a restore must never see "../x". */
	if (nl == 0 || (nl == 1 && raw[0] == '.') || (nl == 2 && raw[0] == '.' && raw[1] == '.') ||
	    memchr(raw, '/', (size_t)nl) != NULL || memchr(raw, '\0', (size_t)nl) != NULL)
		return rix__json_corrupt(&d->j, at, "a name no directory entry can have");
	raw[nl] = '\0';
	nd->name = (const char *)raw;
	nd->name_len = (size_t)nl;
	return 0;
}

static int dec_type(struct dec *d, const char **pp, rix_node *nd)
{
	static const char *const types[] = { "file", "dir", "symlink", "dev", "chardev", "fifo", "socket" };
	const char *at = rix__json_skip_ws(*pp, d->j.end);
	size_t n;
	int rc = dec_string(d, pp, &n, "the type is not a string");
	if (rc != 0)
		return rc;
	for (int k = 0; k < 7; k++)
		if (strlen(types[k]) == n && memcmp(d->scratch.p, types[k], n) == 0) {
			nd->type = (rix_node_type)k;
			return 0;
		}
	return rix__json_corrupt(&d->j, at, "unknown node type");
}

/* One node object into *nd (zeroed by the caller). */
static int dec_node(struct dec *d, const char **pp, rix_node *nd)
{
	const char *at = rix__json_skip_ws(*pp, d->j.end);
	if (at >= d->j.end)
		return rix__json_truncated(&d->j);
	if (*at != '{')
		return rix__json_corrupt(&d->j, at, "a node is not an object");
	const char *lt = NULL, *raw = NULL;
	size_t lt_len = 0, raw_len = 0;
	uint32_t seen = 0;
	int rc = 0, more = rix__json_open(&d->j, pp, '{', "a node is not an object");
	for (; rc == 0 && more > 0; more = rc == 0 ? rix__json_next(&d->j, pp, '}') : 0) {
		int k;
		if ((rc = rix__json_member(&d->j, pp, node_keys, K_COUNT, &seen, &k)) != 0)
			break;
		switch (k) {
		case K_NAME: rc = dec_name(d, pp, nd); break;
		case K_TYPE: rc = dec_type(d, pp, nd); break;
		case K_MODE: rc = dec_u32(d, pp, &nd->mode, "the mode is not a number"); break;
		case K_MTIME: rc = dec_time(d, pp, &nd->mtime); break;
		case K_ATIME: rc = dec_time(d, pp, &nd->atime); break;
		case K_CTIME: rc = dec_time(d, pp, &nd->ctime); break;
		case K_UID: rc = dec_u32(d, pp, &nd->uid, "the uid is not a number"); break;
		case K_GID: rc = dec_u32(d, pp, &nd->gid, "the gid is not a number"); break;
		case K_USER: rc = dec_kept_string(d, pp, &nd->user, NULL, "the user is not a string"); break;
		case K_GROUP: rc = dec_kept_string(d, pp, &nd->group, NULL, "the group is not a string"); break;
		case K_INODE: rc = dec_uint(d, pp, UINT64_MAX, &nd->inode, "the inode is not a number"); break;
		case K_DEVICE_ID: rc = dec_uint(d, pp, UINT64_MAX, &nd->device_id, "device_id is not a number"); break;
		case K_SIZE: rc = dec_uint(d, pp, UINT64_MAX, &nd->size, "the size is not a number"); break;
		case K_LINKS: rc = dec_uint(d, pp, UINT64_MAX, &nd->links, "links is not a number"); break;
		case K_DEVICE: rc = dec_uint(d, pp, UINT64_MAX, &nd->device, "device is not a number"); break;
		case K_LINKTARGET: rc = dec_kept_string(d, pp, &lt, &lt_len, "linktarget is not a string"); break;
		case K_LINKTARGET_RAW: {
			const uint8_t *b = NULL;
			rc = dec_bytes(d, pp, &b, &raw_len);
			raw = (const char *)b;
			break;
		}
		case K_XATTRS: rc = dec_xattrs(d, pp, nd); break;
		case K_CONTENT: rc = dec_content(d, pp, &nd->content, &nd->content_len); break;
		case K_SUBTREE: {
			rix_id *id;
			if ((rc = dec_null(d, pp)) != 0) {
				if (rc > 0)
					nd->subtree = NULL;
				rc = rc < 0 ? rc : 0;
			} else if ((id = tree_alloc(d->t, sizeof(*id))) == NULL) {
				rc = dec_nomem();
			} else if ((rc = dec_id(d, pp, id)) == 0) {
				nd->subtree = id;
			}
			break;
		}
		case K_ERROR: rc = dec_kept_string(d, pp, &nd->error, NULL, "error is not a string"); break;
		default: rc = rix__json_skip_value(&d->j, pp, NODE_DEPTH); break;
		}
	}
	if (rc == 0 && more < 0)
		rc = more;
	if (rc != 0)
		return rc;
	if (!(seen & (UINT32_C(1) << K_NAME)) || !(seen & (UINT32_C(1) << K_TYPE)) || nd->name == NULL)
		return rix__json_corrupt(&d->j, at, "a node without a name or a type");
	/* The raw target when there is one (restic 0.17: the target was not UTF-8). */
	if (raw != NULL) {
		nd->linktarget = raw;
		nd->linktarget_len = raw_len;
	} else {
		nd->linktarget = lt;
		nd->linktarget_len = lt != NULL ? lt_len : 0;
	}
	return 0;
}

static int dec_nodes(struct dec *d, const char **pp)
{
	const char *p = rix__json_skip_ws(*pp, d->j.end);
	if (p >= d->j.end)
		return rix__json_truncated(&d->j);
	if (*p != '[')
		return rix__json_corrupt(&d->j, p, "\"nodes\" is not an array");
	int rc = 0, more = rix__json_open(&d->j, pp, '[', "\"nodes\" is not an array");
	for (; more > 0; more = rix__json_next(&d->j, pp, ']')) {
		rix_tree *t = d->t;
		if (t->n == d->cap) {
			size_t c = d->cap ? d->cap * 2 : 16;
			rix_node *v = rix_realloc(t->nodes, c * sizeof(*v));
			if (v == NULL)
				return dec_nomem();
			t->nodes = v;
			d->cap = c;
		}
		rix_node *nd = &t->nodes[t->n];
		memset(nd, 0, sizeof(*nd));
		const char *at = rix__json_skip_ws(*pp, d->j.end);
		if ((rc = dec_node(d, pp, nd)) != 0)
			return rc;
		t->n++;
		if (t->n > 1 && rix__tree_name_cmp((const uint8_t *)nd[-1].name, nd[-1].name_len, (const uint8_t *)nd->name,
					 nd->name_len) >= 0)
			return rix__json_corrupt(&d->j, at, "nodes out of order (names must increase)");
	}
	return more;
}

int rix_tree_decode(rix_tree **out, const uint8_t *json, size_t len)
{
	*out = NULL;
	struct dec d = { .j = { (const char *)json, (const char *)json + len, "tree", 0 } };
	if ((d.t = rix_calloc(1, sizeof(*d.t))) == NULL)
		return dec_nomem();
	const char *p = rix__json_skip_ws(d.j.base, d.j.end);
	int rc = 0, nodes = 0;
	uint32_t seen = 0;
	if (p >= d.j.end)
		rc = rix__json_corrupt(&d.j, p, "empty: want a JSON object");
	else if (*p != '{')
		rc = rix__json_corrupt(&d.j, p, "not a JSON object");
	int more = rc == 0 ? rix__json_open(&d.j, &p, '{', "not a JSON object") : 0;
	for (; rc == 0 && more > 0; more = rc == 0 ? rix__json_next(&d.j, &p, '}') : 0) {
		int k;
		if ((rc = rix__json_member(&d.j, &p, top_keys, 1, &seen, &k)) != 0)
			break;
		if (k == 0) {
			rc = dec_nodes(&d, &p);
			nodes = 1;
		} else {
			rc = rix__json_skip_value(&d.j, &p, 1);
		}
	}
	if (rc == 0 && more < 0)
		rc = more;
	if (rc == 0 && (p = rix__json_skip_ws(p, d.j.end)) != d.j.end)
		rc = rix__json_corrupt(&d.j, p, "trailing bytes after the object");
	if (rc == 0 && !nodes)
		rc = rix_error_set(RIX_ECORRUPT, "tree: no \"nodes\" array");
	rix__buf_free(&d.scratch);
	rix_free(d.ids);
	rix_free(d.xa);
	if (rc != 0) {
		rix_tree_free(d.t);
		return rc;
	}
	*out = d.t;
	return 0;
}
