/*
 * index/index_json_stream.c — rix_index_stream_decode (rix/index.h): index JSON read piece by
 * piece and decoded in a window, by the same parsers as the whole-text decoder (index_json.c).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "index_json_internal.h"

/*
 * The text is decoded in a window buf[0..fill) of the stream: buf[0] is byte `origin` of the
 * text, buf[pos] the first byte not decoded yet. The grammar's top level is walked by a small
 * state machine (below), and each step ("piece") is parsed by the functions above, on the
 * window as if it were the whole text:
 *
 *   TOP        '{' -> OBJ_FIRST, '[' -> ARR_FIRST (legacy), else the errors of decode_text
 *   OBJ_FIRST  '}' -> AFTER, else MEMBER              (rix__json_open's peek, after '{')
 *   MEMBER     a key of the top object and ':' -> VALUE
 *   VALUE      "packs": null -> OBJ_NEXT, '[' -> PACKS_FIRST; "supersedes": null -> OBJ_NEXT,
 *              '[' -> SUP_FIRST; an unknown key's value, validated, then ',' -> MEMBER or
 *              '}' -> AFTER
 *   PACKS_FIRST ']' -> OBJ_NEXT, else PACK
 *   ARR_FIRST  ']' -> AFTER, else PACK
 *   PACK       one pack object (parse_pack), then ',' -> PACK or ']' -> OBJ_NEXT (AFTER: legacy)
 *   SUP_FIRST  ']' -> OBJ_NEXT, else SUP
 *   SUP        one ID (parse_id, sink), then ',' -> SUP or ']' -> OBJ_NEXT
 *   OBJ_NEXT   ',' -> MEMBER, '}' -> AFTER
 *   AFTER      the text's end -> done; anything else: "data after the top value"
 *
 * Whitespace before a piece is skipped (and dropped from the window) on its own, as every one
 * of those functions begins by skipping it. A piece that parses within the window is exactly
 * what the whole-text decoder parses there: every piece ends with a token that ends itself (a
 * quote, bracket, brace, ',' or ':', or a literal, which has its length), never with a number,
 * which ends only at the next byte (an unknown value is read with the ',' or '}' after it), so
 * the window held every byte the whole-text decoder looks at for it. A piece that fails while the text goes on past the window may have failed
 * only for lack of bytes ("unexpected end of text", or an ID string too short to hold 64
 * digits), so it is not trusted: the sink is rolled back to its mark, more is read (the piece
 * moved to the window's front if the window is full; the window doubled if the piece already
 * starts there) and the piece parsed again. Only a failure with the whole rest of the text in
 * the window is final, and it is then the whole-text decoder's own failure, message included
 * (offsets count from the text's start: rix__json's origin). A damaged file thus pays the
 * window that holds its rest, as much as the whole text cost before; a sound one, a window of
 * its largest pack object. The cost of a retry is one re-parse of the piece cut at the window's
 * end: with the default window and packs of up to a few hundred blobs, about 1% of the text.
 */
struct rix_index_stream {
	char *buf;
	size_t cap;   /* bytes of buf */
	size_t first; /* the size asked for at new */
	size_t peak;  /* the largest cap of the last decode */
};

int rix_index_stream_new(rix_index_stream **out, size_t window)
{
	*out = rix_calloc(1, sizeof(**out));
	if (*out == NULL)
		return rix_error_set(RIX_ENOMEM, "index JSON: out of memory for a stream decoder");
	(*out)->first = window ? window : RIX_INDEX_STREAM_WINDOW;
	return 0;
}

void rix_index_stream_free(rix_index_stream *s)
{
	if (s == NULL)
		return;
	rix_free(s->buf);
	rix_free(s);
}

size_t rix_index_stream_window_peak(const rix_index_stream *s)
{
	return s->peak;
}

enum st {
	ST_TOP, ST_OBJ_FIRST, ST_MEMBER, ST_VALUE, ST_PACKS_FIRST, ST_ARR_FIRST, ST_PACK, ST_SUP_FIRST,
	ST_SUP, ST_OBJ_NEXT, ST_AFTER
};

struct sdec {
	struct dec d;  /* d.j: the window, buf[0..fill), origin = offset of buf[0] in the text */
	rix_index_stream *s;
	rix_index_read_fn read;
	void *arg;
	size_t pos, fill;
	bool eof;      /* read said the text ends: the window holds all that is left */
	enum st st;
	bool legacy;   /* the top value is the array form */
	uint32_t seen; /* the top object's known keys met */
	int key;       /* VALUE: which key (T_PACKS, T_SUPERSEDES, -1 unknown) */
};

/*
 * Reads more of the text into the window: appended if there is room, else after moving the
 * undecoded part to the front, else into a window twice the size (the part does not fit). One
 * read call: its answer decides where the window ends now.
 */
static int refill(struct sdec *x)
{
	rix_index_stream *s = x->s;
	if (x->fill == s->cap) {
		if (x->pos > 0) {
			memmove(s->buf, s->buf + x->pos, x->fill - x->pos);
			x->d.j.origin += x->pos;
			x->fill -= x->pos;
			x->pos = 0;
		} else {
			if (s->cap > SIZE_MAX / 2)
				return rix_error_set(RIX_ENOMEM, "index JSON: window over %zu bytes", s->cap);
			char *nb = rix_realloc(s->buf, s->cap * 2);
			if (nb == NULL)
				return rix_error_set(RIX_ENOMEM, "index JSON: out of memory for a %zu-byte window",
						     s->cap * 2);
			s->buf = nb;
			s->cap *= 2;
			if (s->cap > s->peak)
				s->peak = s->cap;
		}
	}
	size_t got = 0;
	int rc = x->read(x->arg, s->buf + x->fill, s->cap - x->fill, &got);
	if (rc != 0)
		return rc;
	if (got > s->cap - x->fill)
		return rix_error_set(RIX_EINVAL, "index JSON: the reader gave more than asked");
	if (got == 0)
		x->eof = true;
	x->fill += got;
	x->d.j.base = s->buf;
	x->d.j.end = s->buf + x->fill;
	return 0;
}

/* After a pack or an ID: ',' -> again, or the closer -> the state after the array. */
static inline enum st after_elem(int more, enum st again, const struct sdec *x)
{
	if (more)
		return again;
	return x->legacy ? ST_AFTER : ST_OBJ_NEXT;
}

/* One piece at p (whitespace skipped); on success *pp is past it and x->st the next state. */
static int piece(struct sdec *x, const char **pp)
{
	struct dec *d = &x->d;
	const rix__json *j = &d->j;
	const char *p = *pp;
	int rc;
	switch (x->st) {
	case ST_TOP:
		if (p >= j->end)
			return corrupt(d, p, "empty text");
		if (*p == '{') {
			x->st = ST_OBJ_FIRST;
		} else if (*p == '[') {
			x->st = ST_ARR_FIRST;
			x->legacy = true;
		} else {
			return corrupt(d, p, "expected an object or an array");
		}
		p++;
		break;
	case ST_OBJ_FIRST:
	case ST_ARR_FIRST:
	case ST_PACKS_FIRST:
	case ST_SUP_FIRST:
		if (p >= j->end)
			return truncated(d);
		if (*p == (x->st == ST_OBJ_FIRST ? '}' : ']')) {
			p++;
			x->st = x->st == ST_OBJ_FIRST || x->st == ST_ARR_FIRST ? ST_AFTER : ST_OBJ_NEXT;
		} else {
			x->st = x->st == ST_OBJ_FIRST ? ST_MEMBER : x->st == ST_SUP_FIRST ? ST_SUP : ST_PACK;
		}
		break;
	case ST_MEMBER: {
		uint32_t seen = x->seen;
		rc = rix__json_member(j, &p, rix__index_json_top_keys, T_NKEYS, &seen, &x->key);
		if (rc != 0)
			return rc;
		x->seen = seen;
		x->st = ST_VALUE;
		break;
	}
	case ST_VALUE:
		if (x->key == T_PACKS || x->key == T_SUPERSEDES) {
			rc = rix__json_take_null(j, &p);
			if (rc < 0)
				return rc;
			if (rc == 1) {
				x->st = ST_OBJ_NEXT;
				break;
			}
			if (x->key == T_PACKS)
				rc = rix__json_expect(j, &p, '[', "expected an array of packs");
			else
				rc = rix__json_expect(j, &p, '[', "expected an array of IDs for \"supersedes\"");
			if (rc != 0)
				return rc;
			x->st = x->key == T_PACKS ? ST_PACKS_FIRST : ST_SUP_FIRST;
		} else {
			/* With the ',' or '}' after it: a number ends only at a byte that is not part of
			 * it, which must be in this piece's window too ("1" cut from "1.5"). */
			rc = rix__json_skip_value(j, &p, 1);
			if (rc == 0)
				rc = rix__json_next(j, &p, '}');
			if (rc < 0)
				return rc;
			x->st = rc ? ST_MEMBER : ST_AFTER;
		}
		break;
	case ST_PACK:
		rc = rix__index_json_parse_pack(d, &p, x->legacy ? 2 : 3);
		if (rc == 0)
			rc = rix__json_next(j, &p, ']');
		if (rc < 0)
			return rc;
		x->st = after_elem(rc, ST_PACK, x);
		break;
	case ST_SUP: {
		rix_id id;
		rc = rix__index_json_parse_id(d, &p, &id);
		if (rc == 0)
			rc = sink_supersedes(d, &id);
		if (rc == 0)
			rc = rix__json_next(j, &p, ']');
		if (rc < 0)
			return rc;
		x->st = rc ? ST_SUP : ST_OBJ_NEXT;
		break;
	}
	case ST_OBJ_NEXT:
		rc = rix__json_next(j, &p, '}');
		if (rc < 0)
			return rc;
		x->st = rc ? ST_MEMBER : ST_AFTER;
		break;
	case ST_AFTER:
		if (p < j->end)
			return corrupt(d, p, "data after the top value");
		break; /* the end (the caller stops here) */
	}
	*pp = p;
	return 0;
}

int rix_index_stream_decode(rix_index_stream *s, bool *legacy, rix_index_read_fn read, void *arg,
			    const rix_index_stream_sink *sink)
{
	struct sdec x = { .s = s, .read = read, .arg = arg, .st = ST_TOP, .key = -1 };
	int rc = 0;
	x.d.j.name = "index JSON";
	x.d.sink = &sink->sink;
	if (legacy != NULL)
		*legacy = false;
	if (s->buf == NULL) {
		s->buf = rix_malloc(s->first);
		if (s->buf == NULL)
			return rix_error_set(RIX_ENOMEM, "index JSON: out of memory for a %zu-byte window", s->first);
		s->cap = s->first;
	}
	s->peak = s->cap;
	x.d.j.base = x.d.j.end = s->buf;
	for (;;) {
		const char *start = s->buf + x.pos;
		const char *p = rix__json_skip_ws(start, x.d.j.end);
		if (p == x.d.j.end && !x.eof) { /* whitespace to the window's end: dropped, more read */
			x.pos = x.fill;
			rc = refill(&x);
			if (rc != 0)
				break;
			continue;
		}
		x.pos = (size_t)(p - s->buf);
		if (x.st == ST_AFTER && p == x.d.j.end)
			break; /* the text's end, after the top value: decoded */
		enum st was = x.st;
		bool sinks = was == ST_PACK || was == ST_SUP; /* the pieces that call the sink */
		if (sinks)
			sink->mark(sink->sink.payload);
		rc = piece(&x, &p);
		if (rc == 0) {
			x.pos = (size_t)(p - s->buf);
			continue;
		}
		/* Final: an error of the sink or read, the window holds the rest of the text, or bytes
		 * after the top value (no later byte can change that). */
		if (rc != RIX_ECORRUPT || x.eof || was == ST_AFTER)
			break;
		/* Not trusted until the window holds the rest of the text: again with more of it. */
		if (sinks)
			sink->rollback(sink->sink.payload);
		x.st = was;
		rc = refill(&x);
		if (rc != 0)
			break;
	}
	/* A window grown for one big piece is not kept for the next text (made again at its first
	 * size when that comes). */
	if (s->cap > s->first) {
		rix_free(s->buf);
		s->buf = NULL;
		s->cap = 0;
	}
	if (legacy != NULL)
		*legacy = rc == 0 && x.legacy;
	return rc;
}
