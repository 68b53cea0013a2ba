/*
 * tests/repo_fixture.h — what the repository tests (test_repo.c, test_check.c, test_lock.c,
 * test_usage.c) share: a repository on a local folder with fast key derivation, sets of random
 * blobs, a damaged byte, and a check run that counts what it reports.
 */
#ifndef RIX_TEST_REPO_FIXTURE_H
#define RIX_TEST_REPO_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "rix/rix.h"

/* The password of every fixture repository. */
#define PW "correct horse"

/* Options for fast tests: 4 MiB packs, a cheap scrypt, a fixed user and host. */
extern const rix_repo_options fast;

/* A new repository of that version in the existing folder dir (PW, fast); fails the test if not. */
rix_repo *init_repo(const char *dir, int version);

/* Opens the repository in dir with PW and o (NULL: fast); fails the test if it cannot. */
rix_repo *open_repo(const char *dir, const rix_repo_options *o);

/* How many files of type t the repository's backend lists. */
size_t count_files(rix_repo *r, rix_file_type t);

/*
 * n random blobs (n <= 400) from seed: blob 0 is empty, every seventh up to 600,000 bytes, every
 * third half compressible, every fifth a tree.
 */
struct blobs {
	size_t n;
	uint8_t *data[400];
	size_t len[400];
	rix_id id[400];
	rix_blob_type type[400];
};

void make_blobs(struct blobs *s, size_t n, uint64_t seed);
void free_blobs(struct blobs *s);

/* Saves every blob of s (each stored or deduplicated). */
void save_all(rix_repo *r, const struct blobs *s);

/* Flips one bit of the byte at offset at of the file path (at < 0: from the end). */
void flip_byte(const char *path, long at);

/* What a check reported, counted by run_check's callbacks. */
struct lines {
	int errors, infos;
	char last_error[512];
	int progress_calls;
	size_t total;
	uint64_t last_bytes;
};

/*
 * Opens dir, runs rix_repo_check (read_data or not), fails the test unless it returns want_rc;
 * checks that every pack had one progress call and every error one message. The report.
 */
rix_check_report run_check(const char *dir, int read_data, int want_rc, struct lines *l);

/*
 * Rewrites every index file of the repository in dir (password PW) that names blob id without
 * it (rix_repo_read_file, rix_index_decode, _encode, rix_repo_write_file; the old file
 * removed): its pack still holds it. @return how many index files were rewritten.
 */
int drop_from_index(const char *dir, const rix_id *id);

/*
 * Replaces the config of the repository in dir (password PW) with json, sealed with its master
 * key (from its first key file): a config another program wrote, e.g. rustic's extra members.
 */
void write_config_json(const char *dir, const char *json);

/* Encodes nodes[0..n) (in name order) as a tree blob and saves it in r: *id, its ID. */
void store_tree(rix_id *id, rix_repo *r, const rix_node *nodes, size_t n);

/* Index entries as a sorted list (by pack, offset, ID, type, lengths), for comparing indexes. */
struct entries {
	rix_packed_blob *v;
	size_t n, cap;
};
/* Appends *pb (a rix_index_blob_fn); the caller frees e->v. */
int push_entry(void *arg, const rix_packed_blob *pb);
int cmp_pb(const void *a, const void *b);
/* Every (pack, blob) entry of the index of the repository in dir (loaded strictly), sorted. */
struct entries load_entries(const char *dir);


/*
 * Every index entry of the repository in dir (load_entries) with the SHA-256 of its stored bytes
 * as its pack holds them (IV, ciphertext, MAC): what a copy "as stored" keeps.
 */
struct forms {
	struct entries e;
	rix_id *hash; /* [e.n] */
};
struct forms load_forms(const char *dir);
void free_forms(struct forms *f);
/*
 * The blobs of the packs that are in after and not in before (a prune's new packs), each
 * compared with its copies in before: copied as stored (the same length, uncompressed length and
 * bytes as a copy before: compressed, or not), or not (compressed before; uncompressed before and
 * uncompressed still, or compressed now). Fails the test on a blob that was in no pack before.
 */
struct form_diff {
	size_t copied_z, copied_u;
	size_t recoded_z, recoded_u, compressed_now;
};
struct form_diff compare_forms(const struct forms *before, const struct forms *after);

#endif
