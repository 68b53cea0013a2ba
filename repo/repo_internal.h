/*
 * repo/repo_internal.h — helpers shared by the files of repo/ (private to the module), and the
 * repository struct that repo.c, open.c, load_index.c and blobs.c share.
 */
#ifndef RIX_REPO_INTERNAL_H
#define RIX_REPO_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/backend.h"
#include "rix/repo.h"
#include "rix/types.h"

/* The names (and sizes) of a file type's files, sorted by name: v[0..n). Free v with rix_free. */
struct rix__name {
	char s[65];
	uint64_t size; /* as listed (0 when a backend does not say) */
};

struct rix__names {
	struct rix__name *v;
	size_t n, cap;
	uint64_t max_size; /* the largest file listed */
};

/* Lists type t into *out (sorted). On failure *out is empty. @return 0 or the backend's error. */
int rix__list_names(rix_backend *b, rix_file_type t, struct rix__names *out);

/* Folder of each file type in restic's layout ("" for the config). */
extern const char *const rix__folder[RIX_FILE_TYPES];

/* Nonzero if name is a file name: 64 lowercase hex digits and nothing more. */
int rix__is_file_name(const char *name);

/* The codecs a repository keeps for reuse, at most. */
#define REPO_POOL_MAX 64

/* The repository. mu and imu: see the comment atop blobs.c. */
struct rix_repo {
	rix_backend *b;
	rix_key *key;
	char key_name[65];
	rix_config cfg;
	rix_repo_options opt;
	char username[256], hostname[256];
	rix_master_index *mi;
	bool dedup_only; /* rix_repo_set_dedup_only: loads skip the index cache */
	rix_compression compression;

	pthread_mutex_t mu;
	rix_packer *packer;
	rix_blob_codec *pool[REPO_POOL_MAX];
	size_t npool;
	struct rix__scratch {
		uint8_t *p;
		size_t cap;
	} scratch[REPO_POOL_MAX]; /* buffers for stored blobs being loaded (mu) */
	size_t nscratch;
	pthread_mutex_t imu;
	rix_pack_writer *retry[256];
	rix_id retry_id[256];
	size_t nretry;
	int retry_err; /* why the packs in retry were refused */
	_Atomic(struct rix_lock *) held_lock; /* rix__repo_held_lock: read by workers, set by whoever frees */
	char *cache_path;          /* <cache_dir>/<repository ID>: the index cache's folder; NULL: no cache */
	pthread_t cache_writer;    /* writes the index cache (index_cache.c) while cache_writing */
	bool cache_writing;
	struct cache_job *cache_job;
};

/* ---- the index cache (index_cache.c) ---- */
/* Makes the cache's folders (and CACHEDIR.TAG) when opt.cache_dir is set; on failure warns and
 * leaves the cache off. Called once the config is read. */
void rix__index_cache_open(struct rix_repo *r);
/*
 * The cache, read and checked, when it is whole, authentic, of this repository and this build,
 * and made of index files all in names (sorted): an image for rix_master_index_install (the
 * caller's, rix_master_image_free). NULL when there is none, or any check failed (then load the
 * files; no error is left set).
 */
rix_master_image *rix__index_cache_read(struct rix_repo *r, const struct rix__names *names);
/*
 * A cache that answered a load is written again only when the install built a table again (the
 * entries read on top of it did not fit in the small table kept on top: rix_master_image_rebuilt)
 * or RIX__CACHE_REWRITE_FILES index files were read on top of it. Otherwise the next load reads
 * those files again (a backup's one file: milliseconds) and puts them on top again, which costs
 * less than sealing and writing the whole cache (about 0.7 s at 10M blobs) after every backup.
 */
#define RIX__CACHE_REWRITE_FILES 64
/* Exports r's merged state and writes it as the new cache file on a thread of its own (waits for
 * a writer still running first). Failures are warnings. */
void rix__index_cache_save(struct rix_repo *r);
/* Waits for the cache writer, if one runs. */
void rix__index_cache_join(struct rix_repo *r);

/* A repository over b with opt (NULL: defaults), with no key or config yet. @return 0, RIX_ENOMEM. */
int rix__repo_new(struct rix_repo **out, rix_backend *b, const rix_repo_options *opt);
/* Tells the caller something that fails nothing, through rix_repo_options.warn (printf-style;
 * one call at a time). */
void rix__repo_warn(struct rix_repo *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees r but not its backend (the caller keeps it when open or init fails). */
void rix__repo_free(struct rix_repo *r);

/*
 * Reads an unpacked file (lock, snapshot, ...) named by its SHA-256: at most max bytes, the hash
 * checked against the name, then MAC, decrypt, decompress. *json (rix_free) holds *len bytes.
 * @return 0; RIX_ECORRUPT (too big, wrong hash, bad content); RIX_EAUTH; backend errors.
 */
int rix__read_unpacked(struct rix_repo *r, rix_file_type t, const char *name, size_t max, uint8_t **json,
		       size_t *len);

/* The master key: for repo/ only (clients read and write files through rix_repo_read_file & co). */
const struct rix_key *rix__repo_key(const struct rix_repo *r);

/* rix_repo_read_pack_header for a pack whose size is known (a listing gave it). */
int rix__read_pack_header(struct rix_repo *r, const char *name, uint64_t size, struct rix_blob **out,
			  size_t *count);

/*
 * The lock r's long operations depend on: the first one rix_lock_acquire took on r and that is not
 * released (NULL when none). Set and read from the thread that takes and releases locks.
 */
struct rix_lock *rix__repo_held_lock(const struct rix_repo *r);
void rix__repo_set_held_lock(struct rix_repo *r, struct rix_lock *l);
/* 0, or RIX_ELOCKED with the message set once that lock is lost (rix_lock_check). */
int rix__repo_lock_ok(struct rix_repo *r);
/* Whether loads are dedup-only (rix_repo_set_dedup_only) or the index holds data blobs without
 * their locations: what needs locations (check, usage) refuses then. */
bool rix__repo_dedup_only(struct rix_repo *r);

/* The user name the repository writes into key files and locks (options, else the account). */
const char *rix__repo_username(const struct rix_repo *r);

#endif
