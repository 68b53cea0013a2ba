/*
 * index/index_json.c — restic's index JSON: a strict one-pass decoder and a compact encoder.
 *
 * Grammar accepted (JSON as RFC 8259, whitespace = space, tab, CR, LF, anywhere between tokens)
 * ---------------------------------------------------------------------------------------------
 *   index    := object-form | legacy-form
 *   object-form := { "packs": packs|null, "supersedes": [ ID, ... ]|null, <unknown>... }
 *   legacy-form := packs                      (a bare array of pack objects, *legacy = true)
 *   packs    := [ pack, ... ]
 *   pack     := { "id": ID, "blobs": [ blob, ... ]|null, <unknown>... }
 *   blob     := { "id": ID, "type": "data"|"tree", "offset": U32, "length": U32,
 *                 "uncompressed_length": U32, <unknown>... }
 *   ID       := a string of exactly 64 hex digits (either case), no escapes
 *   U32      := 0 | [1-9][0-9]*, at most 4294967295
 *
 * Keys may come in any order. A missing "packs" or "supersedes" (or null) is an empty list, as
 * with Go's encoding/json. Missing "offset"/"length" are 0 and a missing or zero
 * "uncompressed_length" means "not compressed" (Go's zero values). A pack without "blobs" is
 * still entered in the pack table.
 *
 * The JSON itself is read with the scanner shared with the config (common/json_scan.h), which
 * also fixes how keys are matched. Each object knows its own keys (the top object "packs" and
 * "supersedes"; a pack "id" and "blobs"; a blob "id", "type", "offset", "length" and
 * "uncompressed_length"). A key spelt so (escapes allowed: Go undoes them, "\u006fffset" is
 * "offset") is that key. A key that restic (Go's encoding/json) reads as one of them only by
 * ignoring case, with K and long s folded to k and s ("Offset", "offSet", "o\u0046fset",
 * "off\u017fet"), is rejected as RIX_ECORRUPT, so that rix never reads a value restic would read
 * differently. Any other key is unknown and skipped, at every object level, but its value must
 * be valid JSON: strings with correct escapes (\uXXXX included) and no raw control characters,
 * numbers per the JSON grammar, the literals true/false/null, and arrays/objects nested at most
 * RIX_JSON_MAX_DEPTH (64) levels deep counting from the top value. The skipper is iterative (a
 * bit stack), so hostile nesting cannot exhaust the C stack. Strings are not checked for valid
 * UTF-8 (Go accepts invalid UTF-8 too).
 *
 * Rejected with RIX_ECORRUPT ("index JSON: <what> at byte <offset>"): bad hex or an ID of the
 * wrong length or with escapes; a type other than the raw strings "data"/"tree"; in the schema's
 * number fields a sign, fraction, exponent, leading zero or value over UINT32_MAX; a value of
 * the wrong JSON type (e.g. a string offset, an object for "packs", null for an ID); truncated
 * text; anything but whitespace after the top value; nesting over the limit; a pack without
 * "id"; a blob without "id" or "type".
 *
 * Duplicate keys: a key its object knows, given twice in that object, is rejected as
 * RIX_ECORRUPT. Go would take the last value silently; for an index file that can only mean
 * corruption or a crafted file, and two readers might disagree on which value wins. Duplicated
 * unknown keys are skipped.
 *
 * One pass: the text is read once, front to back, and blobs go straight into the index (no DOM,
 * no per-blob allocation). The one exception is a pack whose "blobs" precede its "id": its blob
 * array is validated and skipped, then parsed again once the pack ID is known. The input need
 * not be NUL-terminated; no byte at or past `len` is ever read.
 *
 * Streaming (rix_index_stream_decode, for the index loader): the same decoder on a text read
 * piece by piece into a window (1 MiB by default) that holds what is not decoded yet, so that
 * no one holds a whole file's JSON (~150 bytes a blob: 20 MB for restic's largest files). The
 * top level is walked a pack object at a time; a pack cut by the window's end is rolled back
 * in the sink and parsed again once more is read. Same results, messages and offsets as the
 * whole-text decoder for every text and every cut; see index_json_stream.c.
 *
 * Memory: once about 64 KiB of a large input is read, the decoder extrapolates the blob counts
 * per type seen so far to the whole text and reserves that much once (rix__index_reserve), so a
 * big index does not rehash as it grows; it never reserves from the length alone.
 *
 * The encoder writes what restic writes (json.Encoder of its jsonIndex): compact, "supersedes"
 * first and left out when empty, then "packs" in pack-table order, each blob's keys in the order
 * id, type, offset, length, uncompressed_length (the last left out when 0), and a trailing "\n".
 * A pack without blobs (restic never writes one) is written with "blobs":[] so that a decode
 * and encode round trip keeps the pack table. The output size is bounded from the counts first,
 * so it is one allocation, shrunk at the end.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "index_json_internal.h"

/*
 * After this many bytes, extrapolate the blob counts and reserve (inputs smaller: never). The
 * fuzz build lowers it so that its small inputs reach the reserve path too.
 */
#ifndef RIX_JSON_RESERVE_SAMPLE
#define RIX_JSON_RESERVE_SAMPLE (64 * 1024)
#endif

/* ==== Hex ================================================================================== */

/*
 * Decodes 64 hex digits at h into id. Returns false if any byte is not a hex digit (id is then
 * garbage). Reads exactly h[0..63].
 */
#if defined(__SSE2__)
#include <emmintrin.h>

static inline bool hex64_decode(const char *h, rix_id *id)
{
	const __m128i c0 = _mm_set1_epi8('0' - 1), c9 = _mm_set1_epi8('9' + 1);
	const __m128i ca = _mm_set1_epi8('a' - 1), cf = _mm_set1_epi8('f' + 1);
	const __m128i lower = _mm_set1_epi8(0x20), ascii0 = _mm_set1_epi8('0');
	const __m128i alpha = _mm_set1_epi8('a' - 10), lowbyte = _mm_set1_epi16(0x00ff);
	int ok = 0xFFFF;

	for (int i = 0; i < 2; i++) {
		__m128i v[2];
		for (int j = 0; j < 2; j++) {
			__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(h + 32 * i + 16 * j));
			__m128i l = _mm_or_si128(c, lower);
			/* Signed compares: bytes >= 0x80 are negative and match neither class. */
			__m128i dig = _mm_and_si128(_mm_cmpgt_epi8(c, c0), _mm_cmplt_epi8(c, c9));
			__m128i let = _mm_and_si128(_mm_cmpgt_epi8(l, ca), _mm_cmplt_epi8(l, cf));
			ok &= _mm_movemask_epi8(_mm_or_si128(dig, let));
			__m128i x = _mm_or_si128(_mm_and_si128(dig, _mm_sub_epi8(c, ascii0)),
						 _mm_and_si128(let, _mm_sub_epi8(l, alpha)));
			/* Each 16-bit lane holds (high digit, low digit): make it one byte. */
			v[j] = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, lowbyte), 4),
					    _mm_srli_epi16(x, 8));
		}
		_mm_storeu_si128((__m128i *)(void *)(id->b + 16 * i), _mm_packus_epi16(v[0], v[1]));
	}
	return ok == 0xFFFF;
}
#else
static inline bool hex64_decode(const char *h, rix_id *id)
{
	const unsigned char *u = (const unsigned char *)h;
	unsigned bad = 0;
	for (int i = 0; i < RIX_ID_SIZE; i++) {
		unsigned hi = rix__json_hexval[u[2 * i]], lo = rix__json_hexval[u[2 * i + 1]];
		bad |= hi | lo;
		id->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return !(bad & 0x80);
}
#endif

/*
 * Parses an ID value: whitespace, then "<64 hex digits>". *pp points past the closing quote.
 */
int rix__index_json_parse_id(const struct dec *d, const char **pp, rix_id *id)
{
	const char *p = rix__json_skip_ws(*pp, d->j.end);
	if (p >= d->j.end)
		return truncated(d);
	if (*p != '"')
		return corrupt(d, p, "expected an ID string");
	if (d->j.end - p < 66) {
		/* Too short to hold an ID: say truncated only if no quote closes it. */
		if (memchr(p + 1, '"', (size_t)(d->j.end - p - 1)) == NULL)
			return truncated(d);
		return corrupt(d, p, "ID is not 64 hex digits");
	}
	if (!hex64_decode(p + 1, id) || p[65] != '"') {
		/* Find the first offending byte for the message. */
		const unsigned char *h = (const unsigned char *)p + 1;
		for (int i = 0; i < 64; i++) {
			if (rix__json_hexval[h[i]] & 0x80) {
				if (h[i] == '"')
					return corrupt(d, p + 1 + i, "ID is shorter than 64 hex digits");
				if (h[i] == '\\')
					return corrupt(d, p + 1 + i, "escape inside an ID");
				return corrupt(d, p + 1 + i, "bad hex digit in ID");
			}
		}
		return corrupt(d, p + 65, "ID is longer than 64 hex digits");
	}
	*pp = p + 66;
	return 0;
}

/* ==== Numbers ============================================================================== */

/* Parses a U32 value (see the grammar). *pp points past the last digit. */
static int parse_u32(const struct dec *d, const char **pp, uint32_t *out)
{
	const char *p = rix__json_skip_ws(*pp, d->j.end), *end = d->j.end;
	if (p >= end)
		return truncated(d);
	unsigned c = (unsigned char)*p - '0';
	if (c > 9) {
		if (*p == '-')
			return corrupt(d, p, "negative number");
		if (*p == '+')
			return corrupt(d, p, "signed number");
		return corrupt(d, p, "expected a number");
	}
	/* At most 10 digits fit in a u32; more than that cannot overflow the u64 first. */
	const char *start = p, *lim = end - p > 10 ? p + 10 : end;
	uint64_t v = 0;
	while (p < lim && (c = (unsigned char)*p - '0') <= 9) {
		v = v * 10 + c;
		p++;
	}
	if (*start == '0' && p - start > 1)
		return corrupt(d, start, "number with a leading zero");
	if (v > UINT32_MAX || rix__json_is_digit(p, end))
		return corrupt(d, start, "number over 4294967295");
	if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
		return corrupt(d, start, "number is not an integer");
	*out = (uint32_t)v;
	*pp = p;
	return 0;
}

/* ==== Keys ================================================================================= */

/* The keys each object knows (json_scan.h: other spellings restic would read as these are refused). */
const rix__json_key rix__index_json_top_keys[T_NKEYS] = { RIX_JSON_KEY("packs"), RIX_JSON_KEY("supersedes") };

enum { P_ID, P_BLOBS, P_NKEYS };
static const rix__json_key pack_keys[P_NKEYS] = { RIX_JSON_KEY("id"), RIX_JSON_KEY("blobs") };

enum { B_ID, B_TYPE, B_OFFSET, B_LENGTH, B_ULEN, B_NKEYS };
static const rix__json_key blob_keys[B_NKEYS] = {
	RIX_JSON_KEY("id"), RIX_JSON_KEY("type"), RIX_JSON_KEY("offset"), RIX_JSON_KEY("length"),
	RIX_JSON_KEY("uncompressed_length"),
};

static inline bool match(const char *p, const char *end, const char *s, size_t n)
{
	return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* ==== Schema =============================================================================== */

/* Once enough text is read, reserves room for the blobs the rest probably holds. */
static int maybe_reserve(struct dec *d, const char *p)
{
	size_t done = (size_t)(p - d->j.base), total = (size_t)(d->j.end - d->j.base);
	d->reserved = true;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		if (d->nblobs[t] == 0)
			continue;
		/* nblobs * rest / done, without overflow for any realistic size. */
		uint64_t more = (uint64_t)((double)d->nblobs[t] * (double)(total - done) / (double)done);
		if (more == 0)
			continue;
		/* (the blobs pending in d->pend are counted in nblobs, not yet in the index) */
		int rc = rix__index_reserve(d->idx, (rix_blob_type)t, (size_t)more + d->pend[t].n);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/*
 * A digit run for the fast path: 1-10 digits, no leading zero, at most UINT32_MAX, followed by
 * at least one more byte. NULL otherwise.
 */
static inline const char *fast_u32(const char *p, const char *end, uint32_t *out)
{
	const char *start = p, *lim = end - p > 10 ? p + 10 : end;
	uint64_t v = 0;
	unsigned c;
	while (p < lim && (c = (unsigned char)*p - '0') <= 9) {
		v = v * 10 + c;
		p++;
	}
	if (p == start || p >= end || v > UINT32_MAX || (*start == '0' && p - start > 1))
		return NULL;
	*out = (uint32_t)v;
	return p;
}

/*
 * The fast path for a blob exactly as restic writes it:
 *   {"id":"<hex64>","type":"data"|"tree","offset":N,"length":N[,"uncompressed_length":N]}
 * Returns the end of the object, or NULL if the text differs from that in any way; the general
 * parser then reads the blob again (and reports the error, if there is one). Changes nothing
 * but its outputs.
 */
static inline const char *fast_blob(const char *p, const char *end, rix_id *id,
				    rix_blob_type *type, rix_loc *loc)
{
	if (end - p < 7 + 64 + 25 || memcmp(p, "{\"id\":\"", 7) != 0 || !hex64_decode(p + 7, id))
		return NULL;
	p += 7 + 64;
	if (memcmp(p, "\",\"type\":\"data\",\"offset\":", 25) == 0)
		*type = RIX_BLOB_DATA;
	else if (memcmp(p, "\",\"type\":\"tree\",\"offset\":", 25) == 0)
		*type = RIX_BLOB_TREE;
	else
		return NULL;
	p = fast_u32(p + 25, end, &loc->offset);
	if (p == NULL || end - p < 10 || memcmp(p, ",\"length\":", 10) != 0)
		return NULL;
	p = fast_u32(p + 10, end, &loc->length);
	if (p == NULL)
		return NULL;
	if (*p == '}') {
		loc->uncompressed_length = 0;
		return p + 1;
	}
	if (end - p < 23 || memcmp(p, ",\"uncompressed_length\":", 23) != 0)
		return NULL;
	p = fast_u32(p + 23, end, &loc->uncompressed_length);
	if (p == NULL || *p != '}')
		return NULL;
	return p + 1;
}

/* One blob object; p at its '{' (not yet checked). */
static int parse_blob(struct dec *d, const char **pp, uint32_t pack, int depth)
{
	const char *p = *pp, *obj;
	rix_id id;
	rix_loc loc = { pack, 0, 0, 0 };
	rix_blob_type type = RIX_BLOB_DATA;
	uint32_t seen = 0;
	int rc;

	p = rix__json_skip_ws(p, d->j.end);
	obj = p;
	const char *q = fast_blob(p, d->j.end, &id, &type, &loc);
	if (q != NULL) {
		p = q;
		goto add;
	}
	loc = (rix_loc){ pack, 0, 0, 0 };
	type = RIX_BLOB_DATA;
	rc = rix__json_open(&d->j, &p, '{', "expected a blob object");
	if (rc <= 0) {
		if (rc == 0)
			return corrupt(d, obj, "blob without \"id\"");
		return rc;
	}
	for (;;) {
		int k;
		rc = rix__json_member(&d->j, &p, blob_keys, B_NKEYS, &seen, &k);
		if (rc != 0)
			return rc;
		switch (k) {
		case B_ID:
			rc = rix__index_json_parse_id(d, &p, &id);
			break;
		case B_TYPE:
			p = rix__json_skip_ws(p, d->j.end);
			if (match(p, d->j.end, "\"data\"", 6)) {
				type = RIX_BLOB_DATA;
				p += 6;
			} else if (match(p, d->j.end, "\"tree\"", 6)) {
				type = RIX_BLOB_TREE;
				p += 6;
			} else if (p >= d->j.end) {
				rc = truncated(d);
			} else if (*p == '"') {
				/* Validate first, so that a cut-off string reads as truncation. */
				const char *s = p + 1;
				rc = rix__json_skip_string(&d->j, &s);
				if (rc == 0)
					rc = corrupt(d, p, "blob type is not \"data\" or \"tree\"");
			} else {
				rc = corrupt(d, p, "expected a blob type string");
			}
			break;
		case B_OFFSET:
			rc = parse_u32(d, &p, &loc.offset);
			break;
		case B_LENGTH:
			rc = parse_u32(d, &p, &loc.length);
			break;
		case B_ULEN:
			rc = parse_u32(d, &p, &loc.uncompressed_length);
			break;
		default:
			rc = rix__json_skip_value(&d->j, &p, depth);
			break;
		}
		if (rc != 0)
			return rc;
		rc = rix__json_next(&d->j, &p, '}');
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
	}
	if (!(seen & (1u << B_ID)))
		return corrupt(d, obj, "blob without \"id\"");
	if (!(seen & (1u << B_TYPE)))
		return corrupt(d, obj, "blob without \"type\"");
add:
	rc = sink_blob(d, type, &id, &loc);
	if (rc != 0)
		return rc;
	d->nblobs[type]++;
	*pp = p;
	return 0;
}

/* A "blobs" value: an array of blob objects or null. depth = depth of the value itself. */
static int parse_blobs(struct dec *d, const char **pp, uint32_t pack, int depth)
{
	int rc = rix__json_take_null(&d->j, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	rc = rix__json_open(&d->j, pp, '[', "expected an array of blobs");
	if (rc <= 0)
		return rc;
	for (;;) {
		rc = parse_blob(d, pp, pack, depth + 1);
		if (rc != 0)
			return rc;
		rc = rix__json_next(&d->j, pp, ']');
		if (rc <= 0)
			return rc;
	}
}

/* One pack object; depth = its own depth (the container it opens). */
int rix__index_json_parse_pack(struct dec *d, const char **pp, int depth)
{
	const char *p = *pp, *obj, *blobs = NULL;
	rix_id id;
	uint32_t num = 0;
	uint32_t seen = 0;
	int rc;

	p = rix__json_skip_ws(p, d->j.end);
	obj = p;
	rc = rix__json_open(&d->j, &p, '{', "expected a pack object");
	if (rc <= 0) {
		if (rc == 0)
			return corrupt(d, obj, "pack without \"id\"");
		return rc;
	}
	for (;;) {
		int k;
		rc = rix__json_member(&d->j, &p, pack_keys, P_NKEYS, &seen, &k);
		if (rc != 0)
			return rc;
		switch (k) {
		case P_ID:
			rc = rix__index_json_parse_id(d, &p, &id);
			if (rc == 0)
				rc = sink_pack(d, &id, &num);
			break;
		case P_BLOBS:
			if (seen & (1u << P_ID)) {
				rc = parse_blobs(d, &p, num, depth + 1);
			} else {
				/* ID not known yet: check the JSON now, parse it after the ID. */
				blobs = p;
				rc = rix__json_skip_value(&d->j, &p, depth);
			}
			break;
		default:
			rc = rix__json_skip_value(&d->j, &p, depth);
			break;
		}
		if (rc != 0)
			return rc;
		rc = rix__json_next(&d->j, &p, '}');
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
	}
	if (!(seen & (1u << P_ID)))
		return corrupt(d, obj, "pack without \"id\"");
	if (blobs != NULL) {
		rc = parse_blobs(d, &blobs, num, depth + 1);
		if (rc != 0)
			return rc;
	}
	if (!d->reserved && d->idx != NULL && (size_t)(p - d->j.base) >= RIX_JSON_RESERVE_SAMPLE) {
		rc = maybe_reserve(d, p);
		if (rc != 0)
			return rc;
	}
	*pp = p;
	return 0;
}

/* A packs array (or null if allow_null); depth = depth of the array. */
static int parse_packs(struct dec *d, const char **pp, int depth, bool allow_null)
{
	int rc;
	if (allow_null) {
		rc = rix__json_take_null(&d->j, pp);
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	rc = rix__json_open(&d->j, pp, '[', "expected an array of packs");
	if (rc <= 0)
		return rc;
	for (;;) {
		rc = rix__index_json_parse_pack(d, pp, depth + 1);
		if (rc != 0)
			return rc;
		rc = rix__json_next(&d->j, pp, ']');
		if (rc <= 0)
			return rc;
	}
}

static int parse_supersedes(struct dec *d, const char **pp)
{
	int rc = rix__json_take_null(&d->j, pp);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	rc = rix__json_open(&d->j, pp, '[', "expected an array of IDs for \"supersedes\"");
	if (rc <= 0)
		return rc;
	for (;;) {
		rix_id id;
		rc = rix__index_json_parse_id(d, pp, &id);
		if (rc != 0)
			return rc;
		rc = sink_supersedes(d, &id);
		if (rc != 0)
			return rc;
		rc = rix__json_next(&d->j, pp, ']');
		if (rc <= 0)
			return rc;
	}
}

/* The top object; p at its '{'. */
static int parse_top(struct dec *d, const char **pp)
{
	uint32_t seen = 0;
	int rc = rix__json_open(&d->j, pp, '{', "expected an object");
	if (rc <= 0)
		return rc;
	for (;;) {
		int k;
		const char *p = *pp;
		rc = rix__json_member(&d->j, &p, rix__index_json_top_keys, T_NKEYS, &seen, &k);
		if (rc != 0)
			return rc;
		if (k == T_PACKS)
			rc = parse_packs(d, &p, 2, true);
		else if (k == T_SUPERSEDES)
			rc = parse_supersedes(d, &p);
		else
			rc = rix__json_skip_value(&d->j, &p, 1);
		if (rc != 0)
			return rc;
		rc = rix__json_next(&d->j, &p, '}');
		*pp = p;
		if (rc <= 0)
			return rc;
	}
}

/* The whole text through d; *legacy = the array form. */
static int decode_text(struct dec *d, bool *legacy)
{
	const char *p = rix__json_skip_ws(d->j.base, d->j.end);
	int rc;
	*legacy = false;
	if (p >= d->j.end) {
		rc = corrupt(d, p, "empty text");
	} else if (*p == '{') {
		rc = parse_top(d, &p);
	} else if (*p == '[') {
		*legacy = true;
		rc = parse_packs(d, &p, 1, false);
	} else {
		rc = corrupt(d, p, "expected an object or an array");
	}
	if (rc == 0) {
		p = rix__json_skip_ws(p, d->j.end);
		if (p != d->j.end)
			rc = corrupt(d, p, "data after the top value");
	}
	return rc;
}

/* Adds d->idx's pending blobs of every type. @return 0, RIX_ENOMEM, RIX_ELIMIT. */
static int dec_flush(struct dec *d)
{
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		int rc = rix__index_add_group(d->idx, (rix_blob_type)t, &d->pend[t]);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int rix_index_decode(rix_index **out, bool *legacy, const char *json, size_t len)
{
	rix_index *idx = NULL;
	struct rix__add_group pend[RIX_BLOB_TYPES];
	struct dec d = { .j = { json, json + len, "index JSON", 0 }, .pend = pend };
	bool is_legacy = false;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		pend[t].n = 0;

	*out = NULL;
	if (legacy != NULL)
		*legacy = false;
	int rc = rix_index_new(&idx);
	if (rc != 0)
		return rc;
	d.idx = idx;
	rc = decode_text(&d, &is_legacy);
	if (rc == 0)
		rc = dec_flush(&d);
	if (rc != 0) {
		rix_index_free(idx);
		return rc;
	}
	idx->final = true;
	if (legacy != NULL)
		*legacy = is_legacy;
	*out = idx;
	return 0;
}

int rix_index_decode_to(bool *legacy, const char *json, size_t len, const rix_index_sink *sink)
{
	struct dec d = { .j = { json, json + len, "index JSON", 0 }, .sink = sink };
	bool is_legacy = false;
	int rc = decode_text(&d, &is_legacy);
	if (legacy != NULL)
		*legacy = rc == 0 && is_legacy;
	return rc;
}

/* ==== Encoder ============================================================================== */

/* "00".."ff" for each byte. */
static const char hex2[513] =
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/* "00".."99". */
static const char dec2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Worst-case bytes per item (see the put_* calls below). */
#define ENC_TOP 64			/* {"supersedes":[ ],"packs":[ ]}\n NUL */
#define ENC_SUPERSEDES (2 + 64 + 1)	/* "hex", */
#define ENC_PACK (7 + 64 + 11 + 2 + 1)	/* {"id":"hex","blobs":[ ]}, */
#define ENC_BLOB (7 + 64 + 15 + 10 + 10 + 10 + 10 + 23 + 10 + 1 + 1)

struct enc {
	char *p;
};

static inline char *put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define PUTS(p, s) put((p), (s), sizeof(s) - 1)

static inline char *put_hex(char *p, const rix_id *id)
{
	for (int i = 0; i < RIX_ID_SIZE; i++)
		memcpy(p + 2 * i, hex2 + 2 * id->b[i], 2);
	return p + 64;
}

static inline char *put_u32(char *p, uint32_t v)
{
	char tmp[10];
	char *t = tmp + sizeof(tmp);
	while (v >= 100) {
		t -= 2;
		memcpy(t, dec2 + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		t -= 2;
		memcpy(t, dec2 + 2 * v, 2);
	} else {
		*--t = (char)('0' + v);
	}
	size_t n = (size_t)(tmp + sizeof(tmp) - t);
	memcpy(p, t, n);
	return p + n;
}

static int enc_pack(void *arg, const rix_id *pack_id, const rix_packed_blob *blobs, size_t n)
{
	struct enc *e = arg;
	char *p = e->p;

	p = PUTS(p, "{\"id\":\"");
	p = put_hex(p, pack_id);
	p = PUTS(p, "\",\"blobs\":[");
	for (size_t i = 0; i < n; i++) {
		const rix_packed_blob *b = &blobs[i];
		p = PUTS(p, "{\"id\":\"");
		p = put_hex(p, &b->id);
		if (b->type == RIX_BLOB_TREE)
			p = PUTS(p, "\",\"type\":\"tree\",\"offset\":");
		else
			p = PUTS(p, "\",\"type\":\"data\",\"offset\":");
		p = put_u32(p, b->offset);
		p = PUTS(p, ",\"length\":");
		p = put_u32(p, b->length);
		if (b->uncompressed_length != 0) {
			p = PUTS(p, ",\"uncompressed_length\":");
			p = put_u32(p, b->uncompressed_length);
		}
		*p++ = '}';
		*p++ = ',';
	}
	if (n > 0)
		p--; /* the last ',' */
	p = PUTS(p, "]},");
	e->p = p;
	return 0;
}

int rix_index_encode(char **out, size_t *len, const rix_index *idx)
{
	size_t nsup, npacks = rix_index_pack_count(idx);
	size_t nblobs = rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE);
	const rix_id *sup = rix_index_supersedes(&nsup, idx);
	uint64_t cap64 = ENC_TOP + (uint64_t)nsup * ENC_SUPERSEDES + (uint64_t)npacks * ENC_PACK +
			 (uint64_t)nblobs * ENC_BLOB;
	struct enc e;
	char *buf, *p;
	int rc;

	*out = NULL;
	*len = 0;
	if (cap64 > SIZE_MAX)
		return rix_error_set(RIX_ENOMEM, "index JSON: output of %llu bytes is too large",
				     (unsigned long long)cap64);
	buf = rix_malloc((size_t)cap64);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "index JSON: out of memory for %llu bytes of output",
				     (unsigned long long)cap64);
	p = buf;
	*p++ = '{';
	if (nsup > 0) {
		p = PUTS(p, "\"supersedes\":[");
		for (size_t i = 0; i < nsup; i++) {
			*p++ = '"';
			p = put_hex(p, &sup[i]);
			*p++ = '"';
			*p++ = ',';
		}
		p[-1] = ']';
		*p++ = ',';
	}
	p = PUTS(p, "\"packs\":[");
	e.p = p;
	rc = rix_index_foreach_pack(idx, enc_pack, &e);
	if (rc != 0) {
		rix_free(buf);
		return rc;
	}
	p = e.p;
	if (npacks > 0)
		p--; /* the last ',' */
	p = PUTS(p, "]}\n");
	*p = '\0';

	size_t n = (size_t)(p - buf);
	/* Give back the slack of the worst-case estimate if it is large. */
	if ((size_t)cap64 - (n + 1) > (size_t)cap64 / 16) {
		char *s = rix_realloc(buf, n + 1);
		if (s != NULL)
			buf = s;
	}
	*out = buf;
	*len = n;
	return 0;
}
