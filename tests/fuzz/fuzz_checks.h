/*
 * tests/fuzz/fuzz_checks.h — the properties the fuzz targets check, shared with the ordinary
 * test that replays the corpus (tests/test_fuzz_replay.c). Header-only: every function is
 * static inline. Each returns NULL when the property holds, or a description of the violation.
 */
#ifndef RIX_FUZZ_CHECKS_H
#define RIX_FUZZ_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/rix.h"

/* Decoding arbitrary bytes either succeeds or fails cleanly with a message. */
static inline const char *rix_fuzz_check_decode(const uint8_t *data, size_t size)
{
	rix_index *idx = (rix_index *)1;
	bool legacy;
	rix_error_clear();
	int rc = rix_index_decode(&idx, &legacy, (const char *)data, size);
	if (rc == 0) {
		if (idx == NULL || !rix_index_is_final(idx))
			return "decode succeeded without a final index";
		rix_index_free(idx);
		return NULL;
	}
	if (idx != NULL)
		return "decode failed but left *out set";
	if (rc != RIX_ECORRUPT && rc != RIX_ENOMEM && rc != RIX_ELIMIT)
		return "decode failed with an unexpected code";
	if (rix_error_last()[0] == '\0')
		return "decode failed without a message";
	return NULL;
}

struct rix_fuzz_has_arg {
	const rix_index *other;
	bool missing;
};

static inline int rix_fuzz_has_fn(void *arg, const rix_packed_blob *pb)
{
	struct rix_fuzz_has_arg *a = arg;
	if (!rix_index_has(a->other, pb->type, &pb->id)) {
		a->missing = true;
		return 1;
	}
	return 0;
}

static inline bool rix_fuzz_same_counts(const rix_index *a, const rix_index *b)
{
	size_t na, nb;
	rix_index_supersedes(&na, a);
	rix_index_supersedes(&nb, b);
	return na == nb && rix_index_pack_count(a) == rix_index_pack_count(b) &&
	       rix_index_count(a, RIX_BLOB_DATA) == rix_index_count(b, RIX_BLOB_DATA) &&
	       rix_index_count(a, RIX_BLOB_TREE) == rix_index_count(b, RIX_BLOB_TREE);
}

/*
 * If the bytes decode: encode, decode the encoding, encode again. Both decodes must agree in
 * counts and blobs, and the two encodings must be byte-identical.
 */
static inline const char *rix_fuzz_check_roundtrip(const uint8_t *data, size_t size)
{
	rix_index *a = NULL, *b = NULL;
	char *e1 = NULL, *e2 = NULL;
	size_t n1 = 0, n2 = 0;
	const char *why = NULL;

	if (rix_index_decode(&a, NULL, (const char *)data, size) != 0)
		return NULL;
	if (rix_index_encode(&e1, &n1, a) != 0) {
		why = "encode failed";
		goto out;
	}
	if (strlen(e1) != n1 || n1 == 0 || e1[n1 - 1] != '\n') {
		why = "encoding is not one NUL-terminated line";
		goto out;
	}
	if (rix_index_decode(&b, NULL, e1, n1) != 0) {
		why = "decoding our own encoding failed";
		goto out;
	}
	if (!rix_fuzz_same_counts(a, b)) {
		why = "counts differ after the round trip";
		goto out;
	}
	struct rix_fuzz_has_arg h = { b, false };
	rix_index_foreach(a, rix_fuzz_has_fn, &h);
	if (h.missing) {
		why = "a blob is missing after the round trip";
		goto out;
	}
	if (rix_index_encode(&e2, &n2, b) != 0) {
		why = "second encode failed";
		goto out;
	}
	if (n1 != n2 || memcmp(e1, e2, n1) != 0)
		why = "the two encodings differ";
out:
	rix_free(e1);
	rix_free(e2);
	rix_index_free(a);
	rix_index_free(b);
	return why;
}

/* ---- The streaming decoder against the whole-text one -------------------------------------- */

/* Every sink call, in order, as a record (zeroed first: records compare with memcmp). */
struct rix_fuzz_rec {
	char kind; /* 'p' pack, 'b' blob, 's' supersedes */
	uint8_t type;
	uint32_t num;
	rix_id id;
	rix_loc loc;
};

struct rix_fuzz_log {
	struct rix_fuzz_rec *v;
	size_t n, cap, mark, npacks, mark_npacks;
	size_t rollbacks;
	bool oom;
};

static inline int rix_fuzz_log_add(struct rix_fuzz_log *l, char kind, const rix_id *id)
{
	if (l->n == l->cap) {
		size_t c = l->cap ? 2 * l->cap : 64;
		struct rix_fuzz_rec *v = realloc(l->v, c * sizeof(*v));
		if (v == NULL) {
			l->oom = true;
			return RIX_ENOMEM;
		}
		l->v = v;
		l->cap = c;
	}
	struct rix_fuzz_rec *r = &l->v[l->n++];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->id = *id;
	return 0;
}

static inline int rix_fuzz_log_pack(void *arg, const rix_id *id, uint32_t *num)
{
	struct rix_fuzz_log *l = arg;
	int rc = rix_fuzz_log_add(l, 'p', id);
	if (rc == 0)
		l->v[l->n - 1].num = *num = (uint32_t)l->npacks++;
	return rc;
}

static inline int rix_fuzz_log_blob(void *arg, rix_blob_type t, const rix_id *id, const rix_loc *loc)
{
	struct rix_fuzz_log *l = arg;
	int rc = rix_fuzz_log_add(l, 'b', id);
	if (rc == 0) {
		l->v[l->n - 1].type = (uint8_t)t;
		l->v[l->n - 1].loc = *loc;
	}
	return rc;
}

static inline int rix_fuzz_log_sup(void *arg, const rix_id *id)
{
	return rix_fuzz_log_add(arg, 's', id);
}

static inline void rix_fuzz_log_mark(void *arg)
{
	struct rix_fuzz_log *l = arg;
	l->mark = l->n;
	l->mark_npacks = l->npacks;
}

static inline void rix_fuzz_log_rollback(void *arg)
{
	struct rix_fuzz_log *l = arg;
	l->n = l->mark;
	l->npacks = l->mark_npacks;
	l->rollbacks++;
}

/*
 * A reader over text[0..n) that gives at most chunk bytes a call, and fills the next 256 bytes
 * of the window it is given with bytes that would change the decode if the decoder read them
 * (it must never look past what it was given).
 */
struct rix_fuzz_reader {
	const uint8_t *text;
	size_t n, at, chunk;
};

static inline int rix_fuzz_read(void *arg, void *buf, size_t cap, size_t *got)
{
	struct rix_fuzz_reader *r = arg;
	size_t k = r->n - r->at;
	if (k > r->chunk)
		k = r->chunk;
	if (k > cap)
		k = cap;
	memcpy(buf, r->text + r->at, k);
	static const char poison[] = "\"}],0:1e";
	for (size_t i = k; i < cap && i < k + 256; i++) /* the next bytes: where an overread would look */
		((char *)buf)[i] = poison[i % (sizeof(poison) - 1)];
	r->at += k;
	*got = k;
	return 0;
}

/*
 * The ways of cutting the text the check tries: {first window, bytes per read}. Reads of c
 * bytes try each piece with the window ending every c bytes in it (c = 1: every possible cut),
 * which costs about the square of a piece's length over c: they are tried only for texts of up
 * to c * max_every bytes. Whole reads (SIZE_MAX) cut where the window ends, and grow it.
 */
static const size_t rix_fuzz_cuts[][2] = {
	{ 1, 1 }, { 1, SIZE_MAX }, { 7, 7 }, { 7, 3 }, { 64, 5 }, { 64, SIZE_MAX }, { 1000, 13 }, { 0, SIZE_MAX },
};

/*
 * rix_index_stream_decode agrees with rix_index_decode_to on the same bytes, however they are
 * cut: the same return code, the same message (offsets included) on failure, the same legacy
 * flag and the same sink calls in the same order on success (after the rollbacks).
 */
static inline const char *rix_fuzz_check_stream_max(const uint8_t *data, size_t size, size_t max_every)
{
	struct rix_fuzz_log whole = { 0 };
	rix_index_sink ws = { rix_fuzz_log_pack, rix_fuzz_log_blob, rix_fuzz_log_sup, &whole };
	bool wleg = false;
	rix_error_clear();
	int wrc = rix_index_decode_to(&wleg, (const char *)data, size, &ws);
	char wmsg[512];
	snprintf(wmsg, sizeof(wmsg), "%s", rix_error_last());
	const char *why = NULL;
	if (whole.oom)
		goto out;
	for (size_t c = 0; c < sizeof(rix_fuzz_cuts) / sizeof(rix_fuzz_cuts[0]) && why == NULL; c++) {
		if (rix_fuzz_cuts[c][1] != SIZE_MAX && size / rix_fuzz_cuts[c][1] > max_every)
			continue;
		rix_index_stream *st = NULL;
		if (rix_index_stream_new(&st, rix_fuzz_cuts[c][0]) != 0) {
			why = "stream_new failed";
			break;
		}
		struct rix_fuzz_log sl = { 0 };
		rix_index_stream_sink ss = { { rix_fuzz_log_pack, rix_fuzz_log_blob, rix_fuzz_log_sup, &sl },
					     rix_fuzz_log_mark, rix_fuzz_log_rollback };
		struct rix_fuzz_reader rd = { data, size, 0, rix_fuzz_cuts[c][1] };
		bool sleg = true;
		rix_error_clear();
		int src = rix_index_stream_decode(st, &sleg, rix_fuzz_read, &rd, &ss);
		if (sl.oom || src == RIX_ENOMEM) {
			/* out of memory (the window of a huge input): nothing to compare */
		} else if (src != wrc) {
			why = "the streaming decode's return code differs";
		} else if (src != 0 && strcmp(wmsg, rix_error_last()) != 0) {
			why = "the streaming decode's message differs";
		} else if (src == 0 && sleg != wleg) {
			why = "the streaming decode's legacy flag differs";
		} else if (src == 0 && (sl.n != whole.n || (sl.n > 0 && memcmp(sl.v, whole.v, sl.n * sizeof(*sl.v)) != 0))) {
			why = "the streaming decode gave the sink other calls";
		} else if (src == 0 && rd.at != size) {
			why = "the streaming decode succeeded before the end of the text";
		}
		if (why != NULL)
			fprintf(stderr, "stream check (window %zu, reads of %zu): whole %d \"%s\", stream %d \"%s\"\n",
				rix_fuzz_cuts[c][0], rix_fuzz_cuts[c][1], wrc, wmsg, src, rix_error_last());
		free(sl.v);
		rix_index_stream_free(st);
	}
out:
	free(whole.v);
	return why;
}

static inline const char *rix_fuzz_check_stream(const uint8_t *data, size_t size)
{
	return rix_fuzz_check_stream_max(data, size, 2048);
}

#endif
