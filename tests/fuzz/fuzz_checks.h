/*
 * tests/fuzz/fuzz_checks.h — the properties the fuzz targets check, shared with the ordinary
 * test that replays the corpus (tests/test_fuzz_replay.c). Header-only: every function is
 * static inline. Each returns NULL when the property holds, or a description of the violation.
 */
#ifndef RIX_FUZZ_CHECKS_H
#define RIX_FUZZ_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
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

#endif
