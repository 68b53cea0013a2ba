/*
 * rix/tree.h — tree blobs as restic writes them: {"nodes":[...]} and a newline, one node per
 * directory entry, in strictly increasing byte order of their names.
 *
 * A node's fields, in restic's order (FORMAT.md; restic's Node JSON): name, type, mode, mtime,
 * atime, ctime, uid, gid, user, group, inode, device_id, size, links, linktarget,
 * linktarget_raw, extended_attributes, device, content, subtree, error. Fields restic omits
 * when empty (mode, user, group, inode, device_id, size, links, linktarget, linktarget_raw,
 * extended_attributes, device, subtree, error) are omitted at zero; uid, gid, the three times
 * and content always appear (content null unless the node has a list).
 *
 * Encodings, as restic's Go code makes them, so that the same metadata gives the same bytes:
 *   name      Go's strconv.Quote of the raw bytes without its quotes (so `a"b` is `a\"b`),
 *             then a JSON string (so it is stored as "a\\\"b"); non-printable runes and
 *             invalid UTF-8 bytes become \x.. / \u.... escapes in the first step
 *   strings   JSON with Go's escapes: \" \\ \n \r \t, other controls \u00XX, and < > &
 *             U+2028 U+2029 as \u003c \u003e \u0026 \u2028 \u2029; invalid UTF-8 is U+FFFD
 *   times     RFC 3339 with nanoseconds, trailing zeros dropped, in the zone the offset gives
 *             ("Z" when 0, else +hh:mm); years outside 0..9999 are clamped as restic does
 *   mode      Go's os.FileMode as a decimal number: permission bits, and type bits
 *             RIX_GOMODE_* (a 0755 directory is 2147484141)
 *   xattrs    [{"name":..,"value":base64}]; linktarget_raw: base64 of a target that is not
 *             valid UTF-8 (linktarget then has U+FFFD in its place), as restic 0.17 and later
 *             write it (0.14 writes linktarget alone and loses the raw bytes)
 *   atime     restic stores the mtime there unless --with-atime: the caller decides
 *
 * What is not exactly Go: Go's notion of a printable rune (unicode.IsPrint) is approximated
 * here for characters outside Latin-1 (format and separator characters, and the private and
 * unassigned ranges are escaped); a name with such characters may encode differently from
 * restic's. That changes the tree blob's ID, never what a restore writes.
 */
#ifndef RIX_TREE_H
#define RIX_TREE_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Go's os.FileMode type bits (the low 9 bits are the permissions). */
#define RIX_GOMODE_DIR (1u << 31)
#define RIX_GOMODE_SYMLINK (1u << 27)
#define RIX_GOMODE_DEVICE (1u << 26)
#define RIX_GOMODE_NAMED_PIPE (1u << 25)
#define RIX_GOMODE_SOCKET (1u << 24)
#define RIX_GOMODE_SETUID (1u << 23)
#define RIX_GOMODE_SETGID (1u << 22)
#define RIX_GOMODE_CHAR_DEVICE (1u << 21)
#define RIX_GOMODE_STICKY (1u << 20)

/* Go's FileMode for a st_mode (type, permissions, setuid, setgid, sticky). */
RIX_EXPORT uint32_t rix_gomode_from_st_mode(uint32_t st_mode);

typedef enum rix_node_type {
	RIX_NODE_FILE,
	RIX_NODE_DIR,
	RIX_NODE_SYMLINK,
	RIX_NODE_DEV,
	RIX_NODE_CHARDEV,
	RIX_NODE_FIFO,
	RIX_NODE_SOCKET,
} rix_node_type;

/* A point in time and the UTC offset (seconds east) of the zone it is written in. */
typedef struct rix_time {
	int64_t sec;
	uint32_t nsec;
	int32_t utc_offset;
} rix_time;

/*
 * t as RFC 3339 with nanoseconds, the way Go's time.Time marshals it (trailing zeros of the
 * fraction dropped, "Z" or +hh:mm; years clamped to 0..9999 as restic does), NUL-terminated in
 * out. @return its length.
 */
#define RIX_TIME_MAX 64
RIX_EXPORT size_t rix_time_format(char out[RIX_TIME_MAX], const rix_time *t);
/*
 * The reverse, as Go's time.Parse(time.RFC3339, s) reads it:
 * "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm)" into *t (the zone kept as its offset),
 * exactly that many digits, a real date and time of day, hh < 24 and mm < 60 in the zone, digits
 * of the fraction past nine ignored. @return 0, or -1 for anything else (nothing after the zone).
 */
RIX_EXPORT RIX_NODISCARD int rix_time_parse(rix_time *t, const char *s);
/*
 * The instant sec.nsec after the Unix epoch in the machine's local zone (its UTC offset at that
 * instant, from the TZ environment variable or the system's zone; UTC when it cannot be found),
 * as Go's time.Unix(sec, nsec) is in time.Local: how restic records file times and snapshot times.
 * Returns the time; nothing to check.
 */
RIX_EXPORT rix_time rix_time_local(int64_t sec, uint32_t nsec);
/* Now (the real-time clock) in the local zone, as rix_time_local: restic's time.Now(). */
RIX_EXPORT rix_time rix_time_now(void);
/* <0, 0, >0 as a is before, at, after b (the instants: zones do not matter). */
static inline int rix_time_cmp(const rix_time *a, const rix_time *b)
{
	return a->sec != b->sec ? (a->sec < b->sec ? -1 : 1) : (a->nsec > b->nsec) - (a->nsec < b->nsec);
}

/*
 * s[0..n) as a JSON string, quotes included, escaped as Go's encoding/json escapes every string
 * restic writes (trees, snapshots, --json messages): \" \\ \n \r \t; other control bytes and
 * < > & as \u00XX; U+2028 and U+2029 escaped; each byte that is not part of valid UTF-8 as
 * \ufffd. Like snprintf: at most cap - 1 bytes and a NUL into out (nothing when cap is 0).
 * @return the quoted form's whole length (it fit when less than cap); never more than
 * RIX_JSON_QUOTE_MAX(n).
 */
#define RIX_JSON_QUOTE_MAX(n) (6 * (size_t)(n) + 2)
RIX_EXPORT size_t rix_json_quote(char *out, size_t cap, const char *s, size_t n);

typedef struct rix_xattr {
	const char *name; /* NUL-terminated */
	const uint8_t *value;
	size_t len;
} rix_xattr;

/* One node; every pointer is borrowed for the call that takes it. */
typedef struct rix_node {
	const char *name; /* raw bytes, name_len of them (no NUL, no '/') */
	size_t name_len;
	rix_node_type type;
	uint32_t mode; /* Go FileMode (rix_gomode_from_st_mode) */
	rix_time mtime, atime, ctime;
	uint32_t uid, gid;
	const char *user, *group; /* NULL or "": omitted */
	uint64_t inode, device_id, size, links;
	const char *linktarget; /* raw bytes, linktarget_len of them; symlinks only */
	size_t linktarget_len;
	const rix_xattr *xattrs;
	size_t nxattrs;
	uint64_t device;
	const rix_id *content; /* files: content_len IDs ([] when 0); others: NULL (null) */
	size_t content_len;
	const rix_id *subtree; /* directories; NULL: omitted */
	const char *error;     /* NULL or "": omitted */
} rix_node;

/*
 * A tree being encoded: nodes added in strictly increasing byte order of their names, then
 * the blob's bytes. One thread at a time.
 */
typedef struct rix_tree_enc rix_tree_enc;
/* *out is the caller's (rix_tree_enc_free). @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_tree_enc_new(rix_tree_enc **out);
RIX_EXPORT void rix_tree_enc_free(rix_tree_enc *e);
/* Empties it for the next tree (keeps its buffer). */
RIX_EXPORT void rix_tree_enc_reset(rix_tree_enc *e);
/*
 * Appends node n. @return 0; RIX_EINVAL (a name that is empty, ".", "..", holds '/' or NUL,
 * or does not sort after the previous node's; an unknown type); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_tree_enc_add(rix_tree_enc *e, const rix_node *n);
/*
 * The tree blob: *data (borrowed from e, valid until its next add, reset or free), *len bytes,
 * `{"nodes":[...]}` and a newline. @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_tree_enc_finish(const uint8_t **data, size_t *len, rix_tree_enc *e);

/*
 * A decoded tree blob: its nodes in the blob's order (restic's: by name), every string and
 * array owned by the tree. Names come back as their raw bytes (Go-unquoted); a symlink target
 * from linktarget_raw when there is one.
 */
typedef struct rix_tree rix_tree;
/*
 * Decodes tree blob json[0..len), as Go's encoding/json reads it into restic's Node: numbers are
 * unsigned integers up to the field's width (uint32: mode, uid, gid; the others uint64), strings
 * unescaped as Go does (invalid UTF-8 and lone surrogates become U+FFFD), null leaves a field
 * empty, unknown keys are skipped. *out is the caller's (rix_tree_free).
 * @return 0; RIX_ECORRUPT (not JSON, no "nodes" array, a value of the wrong JSON type, a number
 * with a sign, fraction or exponent or too wide, a node without a name or with an unknown type,
 * a name that does not unquote or that no directory entry can have (".", "..", a '/' or NUL in
 * it), names out of order, a bad ID, time or base64, a key spelled in another case, a key given
 * twice, nesting over 64 levels, bytes after the object; the message says where); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_tree_decode(rix_tree **out, const uint8_t *json, size_t len);
RIX_EXPORT void rix_tree_free(rix_tree *t);
RIX_EXPORT size_t rix_tree_count(const rix_tree *t);
/* Node i (< count), borrowed from t. */
RIX_EXPORT const rix_node *rix_tree_node(const rix_tree *t, size_t i);
/* The node named name[0..len) (binary search), or NULL. Borrowed from t. */
RIX_EXPORT const rix_node *rix_tree_find(const rix_tree *t, const char *name, size_t len);

#ifdef __cplusplus
}
#endif
#endif
