/*
 * tests/test_chunker.c — restic's chunker, checked against restic itself: files of many sizes
 * (empty, under the minimum, around the minimum, exactly the maximum, zeros, random, real
 * files from /usr) are backed up by the real restic; the data blob IDs rix cuts from the same
 * bytes with the repository's polynomial must equal each file's `content` list in restic's
 * tree, whatever the sizes of the pieces the bytes are fed in. Also: the chunker's own rules
 * (bounds, reset, refusal of a bad polynomial) without restic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "rix/rix.h"
#include "testutil.h"

#define PW "chunker-test"

/* Cuts data[0..n) fed in pieces of pseudo-random sizes (1 byte to 3 MiB); IDs into ids. */
static size_t cut_all(rix_chunker *c, const uint8_t *data, size_t n, rix_id *ids, size_t max, uint64_t seed)
{
	rix_chunker_reset(c);
	size_t nids = 0, start = 0, at = 0;
	uint64_t st = seed;
	while (at < n) {
		size_t piece = 1 + (size_t)(rix_test_next(&st) % (seed == 0 ? n : 3u << 20));
		if (piece > n - at)
			piece = n - at;
		size_t off = 0;
		while (off < piece) {
			bool cut;
			size_t k = rix_chunker_scan(&cut, c, data + at + off, piece - off);
			off += k;
			if (cut) {
				assert_true(nids < max);
				size_t end = at + off;
				assert_true(end - start >= RIX_CHUNK_MIN && end - start <= RIX_CHUNK_MAX);
				rix_sha256(&ids[nids++], data + start, end - start);
				start = end;
				assert_int_equal(rix_chunker_chunk_len(c), 0);
			} else {
				assert_int_equal(off, piece); /* no cut: every byte given was taken */
			}
		}
		at += piece;
	}
	if (start < n) { /* the last chunk: what is left (an empty file has none: content []) */
		assert_true(nids < max);
		assert_true(n - start <= RIX_CHUNK_MAX);
		rix_sha256(&ids[nids++], data + start, n - start);
	}
	return nids;
}

static void test_rules(void **state)
{
	(void)state;
	rix_chunker *c;
	assert_int_equal(rix_chunker_new(&c, 0x3DA3358B4DC173ull ^ 1), RIX_EINVAL); /* reducible */
	MUST(rix_chunker_new(&c, 0x3DA3358B4DC173ull));                              /* restic's test polynomial */
	/* Zeros: the state after every reset is the same, so every chunk but the last is the same. */
	size_t n = 3 * RIX_CHUNK_MAX + 5;
	uint8_t *z = calloc(n, 1);
	rix_id ids[64];
	size_t nz = cut_all(c, z, n, ids, 64, 1);
	assert_true(nz >= 4);
	for (size_t i = 1; i + 1 < nz; i++)
		assert_memory_equal(ids[i].b, ids[0].b, RIX_ID_SIZE);
	/* The same bytes in one piece and in many give the same chunks. */
	uint64_t st = 42;
	size_t rn = 20u << 20;
	uint8_t *r = malloc(rn);
	rix_test_fill_random(r, rn, &st);
	rix_id a[64], b[64];
	size_t na = cut_all(c, r, rn, a, 64, 0), nb = cut_all(c, r, rn, b, 64, 7);
	assert_int_equal(na, nb);
	assert_true(na > 5); /* about 1 MiB on average past the minimum */
	assert_memory_equal(a, b, na * sizeof(rix_id));
	/* A short input: no cut, all taken. */
	rix_chunker_reset(c);
	bool cut;
	assert_int_equal(rix_chunker_scan(&cut, c, r, 1000), 1000);
	assert_false(cut);
	assert_int_equal(rix_chunker_chunk_len(c), 1000);
	assert_int_equal(rix_chunker_scan(&cut, c, r, 0), 0);
	rix_chunker_reset(c);
	assert_int_equal(rix_chunker_chunk_len(c), 0);
	free(r);
	free(z);
	rix_chunker_free(c);
}

/* ---- a plain reference: restic's algorithm byte by byte, with bitwise polynomial arithmetic ---- */

static uint64_t ref_mod(uint64_t x, uint64_t p)
{
	int dp = 63 - __builtin_clzll(p);
	while (x != 0 && 63 - __builtin_clzll(x) >= dp)
		x ^= p << ((63 - __builtin_clzll(x)) - dp);
	return x;
}

/* Chunk ends (exclusive offsets) of data[0..n), the last one n; returns how many. */
static size_t ref_cuts(uint64_t pol, const uint8_t *data, size_t n, size_t *ends, size_t max)
{
	uint64_t outt[256];
	for (unsigned b = 0; b < 256; b++) {
		uint64_t h = b;
		for (int k = 0; k < 63; k++)
			h = ref_mod(h << 8, pol);
		outt[b] = h;
	}
	size_t ne = 0, start = 0;
	while (start < n) {
		uint8_t win[64] = { 0 };
		unsigned wpos = 0;
		uint64_t d = 0;
		/* slide(1) */
		d ^= outt[win[wpos]];
		win[wpos] = 1;
		wpos = 1;
		d = ref_mod(d << 8 | 1, pol);
		size_t k = 0, end = n;
		for (; start + k < n; k++) {
			if (k < RIX_CHUNK_MIN - 64)
				continue;
			uint8_t b = data[start + k];
			d ^= outt[win[wpos]];
			win[wpos] = b;
			wpos = (wpos + 1) % 64;
			d = ref_mod(d << 8 | b, pol);
			if ((k + 1 >= RIX_CHUNK_MIN && (d & RIX_CHUNK_SPLIT_MASK) == 0) || k + 1 >= RIX_CHUNK_MAX) {
				end = start + k + 1;
				break;
			}
		}
		assert_true(ne < max);
		ends[ne++] = end;
		start = end;
	}
	return ne;
}

/* Chunk ends as rix cuts data fed in pieces (seed 0: one piece). */
static size_t rix_cuts(rix_chunker *c, const uint8_t *data, size_t n, size_t *ends, size_t max, uint64_t seed)
{
	rix_chunker_reset(c);
	size_t ne = 0, at = 0;
	uint64_t st = seed;
	while (at < n) {
		size_t piece = seed == 0 ? n - at : 1 + (size_t)(rix_test_next(&st) % (seed & 1 ? 300000 : 3u << 20));
		if (piece > n - at)
			piece = n - at;
		size_t off = 0;
		while (off < piece) {
			bool cut;
			off += rix_chunker_scan(&cut, c, data + at + off, piece - off);
			if (cut) {
				assert_true(ne < max);
				ends[ne++] = at + off;
			}
		}
		at += piece;
	}
	if (ne == 0 || ends[ne - 1] != n) {
		assert_true(ne < max);
		ends[ne++] = n;
	}
	return ne;
}

/* rix's cuts equal the reference's on random, low-entropy and sparse data, fed whole and in
 * pieces: every cut wherever it falls in the chunker's blocks and lanes. */
static void test_reference(void **state)
{
	(void)state;
	const uint64_t pol = 0x3DA3358B4DC173ull;
	rix_chunker *c;
	MUST(rix_chunker_new(&c, pol));
	size_t n = 40u << 20;
	uint8_t *d = malloc(n);
	size_t *ref = malloc(4096 * sizeof(size_t)), *got = malloc(4096 * sizeof(size_t));
	for (int kind = 0; kind < 3; kind++) {
		uint64_t st = 1234 + (uint64_t)kind;
		rix_test_fill_random(d, n, &st);
		if (kind == 1) /* four symbols: long runs of one digest pattern, cuts still come */
			for (size_t i = 0; i < n; i++)
				d[i] &= 3;
		if (kind == 2) /* mostly zeros (a window of zeros has digest 0: cuts at the minimum), a 1 now and then */
			for (size_t i = 0; i < n; i++)
				d[i] = d[i] < 2 ? d[i] : 0;
		size_t nr = ref_cuts(pol, d, n, ref, 4096);
		assert_true(nr >= 5);
		for (uint64_t seed = 0; seed < 4; seed++) {
			size_t ng = rix_cuts(c, d, n, got, 4096, seed);
			assert_int_equal(ng, nr);
			assert_memory_equal(got, ref, nr * sizeof(size_t));
		}
	}
	free(ref);
	free(got);
	free(d);
	rix_chunker_free(c);
}

/* The content lists of every file node reachable from tree id, by file name. */
struct files {
	char name[32][64];
	json_t *content[32];
	size_t n;
};

static void walk(const char *dir, const char *tree, struct files *f)
{
	char *out;
	size_t len;
	assert_int_equal(rix_test_run(&out, &len, "RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' cat blob %s", PW, dir,
				      tree),
			 0);
	json_t *t = json_loadb(out, len, 0, NULL);
	free(out);
	assert_non_null(t);
	json_t *nodes = json_object_get(t, "nodes");
	size_t i;
	json_t *node;
	json_array_foreach(nodes, i, node)
	{
		const char *type = json_string_value(json_object_get(node, "type"));
		const char *name = json_string_value(json_object_get(node, "name"));
		if (strcmp(type, "dir") == 0) {
			walk(dir, json_string_value(json_object_get(node, "subtree")), f);
		} else if (strcmp(type, "file") == 0) {
			assert_true(f->n < 32);
			snprintf(f->name[f->n], sizeof(f->name[0]), "%s", name);
			f->content[f->n] = json_incref(json_object_get(node, "content"));
			f->n++;
		}
	}
	json_decref(t);
}

static void put(const char *dir, const char *name, const uint8_t *data, size_t n)
{
	rix_test_put_file(dir, name, data, n);
}

static void test_against_restic(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-chunker");
	char src[4200], repo[4200];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(repo, sizeof(repo), "%s/repo", work);
	assert_int_equal(rix_test_run(NULL, NULL, "mkdir -p '%s'", src), 0);
	uint64_t st = 0xC0C0;
	size_t big = 30u << 20;
	uint8_t *r = malloc(big);
	rix_test_fill_random(r, big, &st);
	uint8_t *z = calloc(RIX_CHUNK_MAX * 2 + 1, 1);
	put(src, "empty", r, 0);
	put(src, "small", r, 100000);
	put(src, "min-1", r + 1, RIX_CHUNK_MIN - 1);
	put(src, "min", r + 2, RIX_CHUNK_MIN);
	put(src, "min+1", r + 3, RIX_CHUNK_MIN + 1);
	put(src, "max", r + 4, RIX_CHUNK_MAX);
	put(src, "max+1", r + 5, RIX_CHUNK_MAX + 1);
	put(src, "zeros", z, RIX_CHUNK_MAX * 2 + 1);
	put(src, "random", r, big);
	/* Text-like: repeated lines with a counter (cuts depend on content that repeats). */
	char *txt = malloc(6u << 20);
	size_t tl = 0;
	for (int i = 0; tl < (6u << 20) - 100; i++)
		tl += (size_t)snprintf(txt + tl, 100, "line %d of a log file that repeats itself %d\n", i, i % 17);
	put(src, "text", (uint8_t *)txt, tl);
	/* Real files from this machine. */
	char *found;
	size_t flen;
	assert_int_equal(rix_test_run(&found, &flen,
				      "find /usr/lib /usr/bin -xdev -type f -size +3M -size -40M 2>/dev/null | sort | head -2"),
			 0);
	int real = 0;
	for (char *line = strtok(found, "\n"); line != NULL; line = strtok(NULL, "\n"))
		if (rix_test_run(NULL, NULL, "cp '%s' '%s/real%d'", line, src, real) == 0)
			real++;
	free(found);
	assert_int_equal(rix_test_run(NULL, NULL, "RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' init >/dev/null", PW, repo), 0);
	assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' backup . >/dev/null",
				      src, PW, repo),
			 0);
	/* The repository's polynomial, and the snapshot's tree. */
	char *out;
	size_t len;
	assert_int_equal(rix_test_run(&out, &len, "RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' cat config", PW, repo), 0);
	json_t *cfg = json_loadb(out, len, 0, NULL);
	free(out);
	assert_non_null(cfg);
	uint64_t pol = strtoull(json_string_value(json_object_get(cfg, "chunker_polynomial")), NULL, 16);
	json_decref(cfg);
	assert_int_equal(rix_test_run(&out, &len, "RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' snapshots --json", PW, repo), 0);
	json_t *snaps = json_loadb(out, len, 0, NULL);
	free(out);
	assert_non_null(snaps);
	struct files f = { 0 };
	walk(repo, json_string_value(json_object_get(json_array_get(snaps, 0), "tree")), &f);
	json_decref(snaps);
	assert_int_equal(f.n, 10 + (size_t)real);

	rix_chunker *c;
	MUST(rix_chunker_new(&c, pol));
	size_t checked_chunks = 0;
	for (size_t k = 0; k < f.n; k++) {
		char path[4300];
		snprintf(path, sizeof(path), "%s/%s", src, f.name[k]);
		size_t n;
		uint8_t *data = rix_test_read_file(path, &n);
		assert_non_null(data);
		rix_id ids[128];
		for (uint64_t seed = 0; seed < 3; seed++) {
			size_t nids = cut_all(c, data, n, ids, 128, seed);
			size_t want = json_array_size(f.content[k]);
			if (nids != want)
				fail_msg("%s (%zu bytes): rix cut %zu chunks, restic %zu", f.name[k], n, nids, want);
			for (size_t i = 0; i < nids; i++) {
				char hex[65];
				rix_id_to_hex(hex, &ids[i]);
				const char *rh = json_string_value(json_array_get(f.content[k], i));
				if (strcmp(hex, rh) != 0)
					fail_msg("%s chunk %zu: rix %.16s, restic %.16s", f.name[k], i, hex, rh);
			}
			if (seed == 0)
				checked_chunks += nids;
		}
		free(data);
		json_decref(f.content[k]);
	}
	assert_true(checked_chunks > 40);
	rix_chunker_free(c);
	free(txt);
	free(z);
	free(r);
	rix_test_free_dir(work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_reference),
		cmocka_unit_test(test_against_restic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
