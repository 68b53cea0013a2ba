/*
 * bench/mkrepo.c — rix-mkrepo: an index-only repository of N blobs in restic's v2 (or v1)
 * layout, for the index-loading benchmarks against restic (`rix stats` against
 * `restic --no-cache stats --mode raw-data`; both load every index file; `restic list blobs`
 * and `rix list blobs` count the same blobs).
 *
 *   rix-mkrepo DIR N [VERSION]      password from RIX_PASSWORD (default "bench")
 *
 * Packs hold 16 data blobs each (a 16 MiB pack of ~1 MiB blobs, as restic's chunker makes
 * them), stored compressed in version 2 (restic's auto compresses every data blob), with IDs
 * and sizes from SplitMix64 (seed 0x5EED + N). Index files hold 150,000 blobs (50,000 in v1),
 * restic 0.14's rule. No pack file is written: the index is the subject.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/rix.h"

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void rand_id(uint64_t *s, rix_id *id)
{
	for (int i = 0; i < 4; i++) {
		uint64_t v = next(s);
		memcpy(id->b + 8 * i, &v, 8);
	}
}

static int die(const char *what)
{
	fprintf(stderr, "rix-mkrepo: %s: %s\n", what, rix_error_last());
	return 1;
}

static int write_index(rix_repo *r, rix_index *idx)
{
	char *json;
	size_t len;
	if (rix_index_encode(&json, &len, idx) != 0)
		return die("encode");
	int rc = rix_repo_write_file(NULL, r, RIX_FILE_INDEX, json, len);
	rix_free(json);
	return rc != 0 ? die("write") : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: rix-mkrepo DIR N [VERSION]\n");
		return 2;
	}
	const char *dir = argv[1];
	uint64_t total = strtoull(argv[2], NULL, 10);
	int version = argc > 3 ? atoi(argv[3]) : 2;
	const char *pw = getenv("RIX_PASSWORD");
	if (pw == NULL)
		pw = "bench";
	rix_backend *b;
	if (rix_backend_local_open(&b, dir, 1) != 0)
		return die(dir);
	rix_repo_options o = { .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO, .repo_version = version };
	rix_repo *r;
	if (rix_repo_init(&r, b, pw, strlen(pw), &o) != 0)
		return die("init");
	uint64_t st = 0x5EED + total;
	uint32_t per_file = version >= 2 ? RIX_REPO_INDEX_BLOBS_V2 : RIX_REPO_INDEX_BLOBS_V1;
	rix_index *idx = NULL;
	size_t in_file = 0, files = 0;
	rix_blob blobs[16];
	for (uint64_t done = 0; done < total;) {
		rix_id pack;
		rand_id(&st, &pack);
		size_t k = total - done < 16 ? (size_t)(total - done) : 16;
		uint32_t off = 0;
		for (size_t i = 0; i < k; i++) {
			uint32_t plain = 512 * 1024 + (uint32_t)(next(&st) % (1024 * 1024));
			uint32_t stored = version >= 2 ? plain / 2 + 32 : plain + 32;
			blobs[i] = (rix_blob){ .type = RIX_BLOB_DATA, .offset = off, .length = stored,
					       .uncompressed_length = version >= 2 ? plain : 0 };
			rand_id(&st, &blobs[i].id);
			off += stored;
		}
		if (idx == NULL && rix_index_new(&idx) != 0)
			return die("index");
		if (rix_index_store_pack(idx, &pack, blobs, k) != 0)
			return die("store");
		done += k;
		in_file += k;
		if (in_file >= per_file || done == total) {
			if (write_index(r, idx) != 0)
				return 1;
			rix_index_free(idx);
			idx = NULL;
			in_file = 0;
			files++;
		}
	}
	printf("%s: %llu blobs in %zu index files (version %d)\n", dir, (unsigned long long)total, files, version);
	rix_repo_free(r);
	return 0;
}
