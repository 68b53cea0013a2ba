/*
 * repo/repo.c — the repository: keys and config, index loading, save (with dedup) and load of
 * blobs, index files.
 *
 *   save_blob(t, data):  id = SHA-256(data)
 *       master index has it? ── yes ──> done (dedup)
 *       add_pending(t, id)   ── already pending (another thread) ──> done
 *       codec (a pool, one per thread at a time) ──> packer: open pack of type t
 *   packer's done(pack):  backend write_file (local: rename of the temp file into data/)
 *       ──> master index store_pack ──> current index file (written when it is full)
 *       ──> remove_pending of its blobs
 *       a pack the backend refused waits in `retry` (its blobs stay pending) for the next flush
 *   flush:  retry waiting packs ──> packer flush ──> write the current index file
 *
 * Invariants:
 * - A pack is written before any index file names it; an index file names only stored packs.
 * - A blob is pending from add_pending until its pack is in the master index, or until the pack
 *   is thrown away (discard) or its save failed: never longer, so a blob is never lost to a
 *   stale pending entry.
 * - mu guards the codec pool, the retry list (and its first error) and the packer's creation;
 *   imu guards the current index file, and is held while a full one is encoded and written, so
 *   that an index upload never blocks the threads that take codecs.
 */
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"

#define KEY_FILE_MAX ((size_t)1 << 20)
#define INDEX_FILE_MAX ((size_t)1 << 31)
#define POOL_MAX 64

struct rix_repo {
	rix_backend *b;
	rix_key *key;
	char key_name[65];
	rix_config cfg;
	rix_repo_options opt;
	char username[256], hostname[256];
	rix_master_index *mi;
	rix_compression compression;

	pthread_mutex_t mu;
	rix_packer *packer;
	rix_blob_codec *pool[POOL_MAX];
	size_t npool;
	pthread_mutex_t imu;
	rix_index *cur; /* the index file being filled (imu) */
	rix_pack_writer *retry[256];
	rix_id retry_id[256];
	size_t nretry;
	int retry_err; /* why the packs in retry were refused */
	struct rix_lock *held_lock; /* rix__repo_held_lock */
};

/* ---- opening ------------------------------------------------------------------------------- */

static void set_identity(rix_repo *r)
{
	const char *u = r->opt.username;
	if (u == NULL) {
		struct passwd *pw = getpwuid(getuid());
		u = pw != NULL ? pw->pw_name : "";
	}
	snprintf(r->username, sizeof(r->username), "%s", u);
	if (r->opt.hostname != NULL)
		snprintf(r->hostname, sizeof(r->hostname), "%s", r->opt.hostname);
	else if (gethostname(r->hostname, sizeof(r->hostname)) != 0)
		r->hostname[0] = '\0';
	r->hostname[sizeof(r->hostname) - 1] = '\0';
	r->opt.username = r->username;
	r->opt.hostname = r->hostname;
}

static int repo_new(rix_repo **out, rix_backend *b, const rix_repo_options *opt)
{
	rix_repo *r = rix_calloc(1, sizeof(*r));
	if (r == NULL)
		return rix_error_set(RIX_ENOMEM, "repo: out of memory");
	if (opt != NULL)
		r->opt = *opt;
	r->b = b;
	r->compression = r->opt.compression_set ? r->opt.compression : RIX_COMPRESSION_AUTO;
	set_identity(r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->imu, NULL);
	int rc = rix_master_index_new(&r->mi);
	if (rc != 0) {
		pthread_mutex_destroy(&r->mu);
		pthread_mutex_destroy(&r->imu);
		rix_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* Frees r but not its backend (the caller keeps it when open or init fails). */
static void repo_free(rix_repo *r)
{
	rix_packer_free(r->packer);
	for (size_t i = 0; i < r->npool; i++)
		rix_blob_codec_free(r->pool[i]);
	for (size_t i = 0; i < r->nretry; i++)
		rix_pack_writer_free(r->retry[i]);
	rix_index_free(r->cur);
	rix_master_index_free(r->mi);
	rix_key_free(r->key);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->imu);
	rix_free(r);
}

void rix_repo_close(rix_repo *r)
{
	if (r == NULL)
		return;
	rix_backend *b = r->b;
	repo_free(r);
	rix_backend_free(b);
}

const rix_config *rix_repo_config(const rix_repo *r)
{
	return &r->cfg;
}

rix_backend *rix_repo_backend(rix_repo *r)
{
	return r->b;
}

rix_master_index *rix_repo_master_index(rix_repo *r)
{
	return r->mi;
}

unsigned rix__repo_workers(const rix_repo *r)
{
	return r->opt.workers;
}

struct rix_lock *rix__repo_held_lock(const rix_repo *r)
{
	return r->held_lock;
}

void rix__repo_set_held_lock(rix_repo *r, struct rix_lock *l)
{
	r->held_lock = l;
}

const rix_key *rix__repo_key(const rix_repo *r)
{
	return r->key;
}

const char *rix__repo_username(const struct rix_repo *r)
{
	return r->username;
}

const char *rix_repo_key_name(const rix_repo *r)
{
	return r->key_name;
}

/* Writes a key file for r->key under password; its name into name. */
static int write_key_file(rix_repo *r, const char *password, size_t password_len, char name[65])
{
	uint64_t n = r->opt.scrypt_n ? r->opt.scrypt_n : RIX_SCRYPT_DEFAULT_N;
	uint32_t rr = r->opt.scrypt_r ? r->opt.scrypt_r : RIX_SCRYPT_DEFAULT_R;
	uint32_t p = r->opt.scrypt_p ? r->opt.scrypt_p : RIX_SCRYPT_DEFAULT_P;
	char *json;
	size_t len;
	int rc = rix_key_create_file(r->key, password, password_len, n, rr, p, r->username, r->hostname, &json, &len);
	if (rc != 0)
		return rc;
	rix_id id;
	rix_sha256(json, len, &id);
	rix_id_to_hex(&id, name);
	rc = rix_backend_write(r->b, RIX_FILE_KEY, name, json, len);
	rix_free(json);
	return rc;
}

int rix_repo_init(rix_repo **out, rix_backend *b, const char *password, size_t password_len,
		  const rix_repo_options *opt)
{
	*out = NULL;
	int version = opt != NULL && opt->version ? opt->version : 2;
	uint64_t size;
	int rc = rix_backend_stat(b, RIX_FILE_CONFIG, NULL, &size);
	if (rc == 0)
		return rix_error_set(RIX_EEXISTS, "repo: there is a repository already (a config file)");
	if (rc != RIX_ENOTFOUND)
		return rc;
	rix_repo *r;
	if ((rc = repo_new(&r, b, opt)) != 0)
		return rc;
	rc = rix_config_new(version, &r->cfg);
	if (rc == 0)
		rc = rix_key_random(&r->key);
	if (rc == 0)
		rc = write_key_file(r, password, password_len, r->key_name);
	uint8_t *file = NULL;
	size_t fn = 0;
	if (rc == 0)
		rc = rix_config_seal(r->key, &r->cfg, &file, &fn);
	/* The config last: a repository exists once it is there. */
	if (rc == 0)
		rc = rix_backend_write(b, RIX_FILE_CONFIG, NULL, file, fn);
	rix_free(file);
	if (rc != 0) {
		repo_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

static int collect_name(void *arg, const char *name, uint64_t size)
{
	struct rix__names *s = arg;
	if (size > s->max_size)
		s->max_size = size;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct rix__name *v = rix_realloc(s->v, cap * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "repo: out of memory listing files");
		s->v = v;
		s->cap = cap;
	}
	memcpy(s->v[s->n].s, name, 65);
	s->v[s->n++].size = size;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct rix__name *)a)->s, ((const struct rix__name *)b)->s);
}

int rix__list_names(rix_backend *b, rix_file_type t, struct rix__names *out)
{
	*out = (struct rix__names){ 0 };
	int rc = rix_backend_list(b, t, collect_name, out);
	if (rc != 0) {
		rix_free(out->v);
		*out = (struct rix__names){ 0 };
		return rc;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), cmp_name);
	return 0;
}

int rix__read_unpacked(struct rix_repo *r, rix_file_type t, const char *name, size_t max, uint8_t **json,
		       size_t *len)
{
	*json = NULL;
	*len = 0;
	uint8_t *file;
	size_t n;
	rix_id want, got;
	int rc = rix_id_from_hex(&want, name, 64);
	if (rc == 0)
		rc = rix_backend_read_all(r->b, t, name, max, &file, &n);
	if (rc != 0)
		return rc;
	rix_sha256(file, n, &got);
	if (memcmp(got.b, want.b, RIX_ID_SIZE) != 0)
		rc = rix_error_set(RIX_ECORRUPT, "%s %.16s: the file's SHA-256 is not its name", rix_file_type_name(t), name);
	else
		rc = rix_unpacked_decode(r->key, file, n, r->cfg.version, json, len);
	rix_free(file);
	return rc;
}

/* Tries every key file with password. */
static int open_key(rix_repo *r, const char *password, size_t password_len)
{
	struct rix__names keys;
	int rc = rix__list_names(r->b, RIX_FILE_KEY, &keys);
	if (rc != 0)
		return rc;
	int auth_failed = 0, corrupt = 0;
	char corrupt_msg[256] = "";
	/* Hinted keys first (restic's --key-hint): every other one costs a full scrypt. */
	const char *hint = r->opt.key_hint;
	if (hint != NULL && *hint != '\0') {
		size_t front = 0, hl = strlen(hint);
		for (size_t i = 0; i < keys.n; i++) {
			if (strncmp(keys.v[i].s, hint, hl) == 0) {
				struct rix__name tmp = keys.v[i];
				memmove(&keys.v[front + 1], &keys.v[front], (i - front) * sizeof(tmp));
				keys.v[front++] = tmp;
			}
		}
	}
	for (size_t i = 0; i < keys.n && r->key == NULL; i++) {
		uint8_t *kf;
		size_t len;
		rc = rix_backend_read_all(r->b, RIX_FILE_KEY, keys.v[i].s, KEY_FILE_MAX, &kf, &len);
		if (rc == RIX_ENOMEM)
			break;
		if (rc == 0) {
			rc = rix_key_open_file(&r->key, (const char *)kf, len, password, password_len);
			rix_free(kf);
		}
		if (rc == 0)
			memcpy(r->key_name, keys.v[i].s, 65);
		else if (rc == RIX_EAUTH)
			auth_failed++;
		else if (rc == RIX_ENOMEM)
			break;
		else if (corrupt++ == 0)
			snprintf(corrupt_msg, sizeof(corrupt_msg), "key %.16s: %s", keys.v[i].s, rix_error_last());
	}
	size_t nkeys = keys.n;
	rix_free(keys.v);
	if (r->key != NULL)
		return 0;
	if (rc == RIX_ENOMEM)
		return rc;
	if (nkeys == 0)
		return rix_error_set(RIX_ENOTFOUND, "repo: no key file (keys/ is empty)");
	if (auth_failed)
		return rix_error_set(RIX_EAUTH, "repo: wrong password: none of the %zu key files opens with it%s%s",
				     nkeys, corrupt ? "; " : "", corrupt_msg);
	return rix_error_set(RIX_ECORRUPT, "repo: no key file is readable: %s", corrupt_msg);
}

int rix_repo_open(rix_repo **out, rix_backend *b, const char *password, size_t password_len,
		  const rix_repo_options *opt)
{
	*out = NULL;
	rix_repo *r;
	int rc = repo_new(&r, b, opt);
	if (rc != 0)
		return rc;
	rc = open_key(r, password, password_len);
	uint8_t *file = NULL;
	size_t n = 0;
	if (rc == 0)
		rc = rix_backend_read_all(b, RIX_FILE_CONFIG, NULL, RIX_CONFIG_MAX_SIZE + RIX_CRYPTO_OVERHEAD, &file, &n);
	if (rc == 0 && (rc = rix_config_open(r->key, file, n, &r->cfg)) == RIX_EAUTH)
		rc = rix_error_set(RIX_ECORRUPT, "repo: the config does not authenticate with the repository key");
	rix_free(file);
	if (rc != 0) {
		repo_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* ---- keys ---------------------------------------------------------------------------------- */

int rix_repo_key_add(rix_repo *r, const char *password, size_t password_len, char name[65])
{
	char tmp[65];
	return write_key_file(r, password, password_len, name != NULL ? name : tmp);
}

int rix_repo_key_remove(rix_repo *r, const char *name)
{
	if (name != NULL && strcmp(name, r->key_name) == 0)
		return rix_error_set(RIX_EINVAL, "repo: refusing to remove key %.16s: the repository is open with it",
				     name);
	return rix_backend_remove(r->b, RIX_FILE_KEY, name);
}

int rix_repo_key_list(rix_repo *r, rix_backend_list_fn fn, void *arg)
{
	return rix_backend_list(r->b, RIX_FILE_KEY, fn, arg);
}

/* ---- index loading ------------------------------------------------------------------------- */

struct loader {
	rix_repo *r;
	struct rix__names names;
	size_t next; /* guarded by mu */
	size_t done;
	pthread_mutex_t mu;
	rix_repo_index_error_fn on_error;
	void *arg;
	int first_error;
	rix_repo_load_stats stats;
};

/* What a loader thread reuses from file to file: no allocation per file once warm. */
struct load_bufs {
	uint8_t *file;
	size_t cap;
	rix_unpacked_decoder *dec;
	rix_master_batch *batch;
};

/* Loads one index file into the batch (committed by the caller). */
static int load_one(rix_repo *r, const struct rix__name *nm, struct load_bufs *lb, uint64_t *bytes)
{
	const char *name = nm->s;
	rix_id want, got;
	uint64_t size = nm->size; /* from the listing: no stat (a round trip on REST) */
	*bytes = 0;
	int rc = rix_id_from_hex(&want, name, 64);
	if (rc == 0 && size == 0) /* a backend that lists no sizes (restic's REST v1) */
		rc = rix_backend_stat(r->b, RIX_FILE_INDEX, name, &size);
	if (rc == 0 && size > INDEX_FILE_MAX)
		rc = rix_error_set(RIX_ECORRUPT, "index %.16s: %llu bytes is over the limit", name, (unsigned long long)size);
	if (rc == 0 && size > lb->cap) {
		rix_free(lb->file);
		lb->cap = 0;
		if ((lb->file = rix_malloc((size_t)size)) == NULL)
			return rix_error_set(RIX_ENOMEM, "repo: out of memory for a %llu-byte index file",
					     (unsigned long long)size);
		lb->cap = (size_t)size;
	}
	if (rc == 0)
		rc = rix_backend_read(r->b, RIX_FILE_INDEX, name, 0, lb->file, (size_t)size);
	if (rc != 0)
		return rc;
	*bytes = size;
	rix_sha256(lb->file, (size_t)size, &got);
	if (memcmp(got.b, want.b, RIX_ID_SIZE) != 0)
		return rix_error_set(RIX_ECORRUPT, "index %.16s: the file's SHA-256 is not its name", name);
	const uint8_t *json;
	size_t jn;
	rc = rix_unpacked_decoder_decode(lb->dec, r->key, lb->file, (size_t)size, r->cfg.version, &json, &jn);
	if (rc == 0)
		rc = rix_index_decode_to((const char *)json, jn, rix_master_batch_sink(lb->batch), NULL);
	return rc;
}

static void *load_worker(void *arg)
{
	struct loader *l = arg;
	struct load_bufs lb = { 0 };
	int brc = rix_master_index_batch_new(l->r->mi, &lb.batch);
	if (brc == 0)
		brc = rix_unpacked_decoder_new(&lb.dec);
	rix_master_batch *b = lb.batch;
	for (;;) {
		pthread_mutex_lock(&l->mu);
		if (brc != 0 && l->first_error == 0)
			l->first_error = brc;
		size_t i = brc == 0 && l->next < l->names.n && (l->first_error == 0 || !l->r->opt.strict) ? l->next++
													   : SIZE_MAX;
		pthread_mutex_unlock(&l->mu);
		if (i == SIZE_MAX)
			break;
		uint64_t bytes;
		int rc = load_one(l->r, &l->names.v[i], &lb, &bytes);
		if (rc == 0) {
			rix_id id;
			rix_id_from_hex(&id, l->names.v[i].s, 64);
			rc = rix_master_batch_commit(b, &id);
		} else {
			rix_master_batch_discard(b);
		}
		pthread_mutex_lock(&l->mu);
		l->stats.bytes += bytes;
		l->done++;
		if (l->r->opt.load_progress != NULL)
			l->r->opt.load_progress(l->r->opt.progress_arg, l->done, l->names.n);
		if (rc == 0)
			l->stats.loaded++;
		if (rc != 0) {
			if (l->on_error != NULL)
				l->on_error(l->arg, l->names.v[i].s, rc, rix_error_last());
			if (l->first_error == 0 || rc == RIX_ENOMEM)
				l->first_error = rc;
		}
		pthread_mutex_unlock(&l->mu);
	}
	rix_master_batch_free(lb.batch);
	rix_unpacked_decoder_free(lb.dec);
	rix_free(lb.file);
	return NULL;
}

int rix_repo_load_index(rix_repo *r, rix_repo_index_error_fn on_error, void *arg, rix_repo_load_stats *stats)
{
	struct loader l = { .r = r, .on_error = on_error, .arg = arg };
	int rc = rix__list_names(r->b, RIX_FILE_INDEX, &l.names);
	if (rc != 0)
		return rc;
	l.stats.files = l.names.n;
	pthread_mutex_init(&l.mu, NULL);
	unsigned workers = r->opt.workers;
	if (workers == 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		workers = c > 0 ? (unsigned)c : 1;
		/*
		 * Each loader holds one file, its JSON (~3x the file) and its batch while it works: as
		 * many as fit the memory budget, so that a many-core machine does not multiply the peak.
		 */
		uint64_t budget = r->opt.load_memory ? r->opt.load_memory : RIX_REPO_LOAD_MEMORY_DEFAULT;
		uint64_t per = l.names.max_size * RIX_REPO_LOAD_BYTES_PER_FILE_BYTE;
		uint64_t fit = per > 0 ? budget / per : workers;
		if (fit < workers)
			workers = fit > 0 ? (unsigned)fit : 1;
	}
	if (workers > l.names.n)
		workers = (unsigned)l.names.n;
	if (workers > 256)
		workers = 256;
	pthread_t th[256];
	unsigned started = 0;
	for (unsigned i = 1; i < workers; i++) /* the calling thread is worker 0 */
		if (pthread_create(&th[started], NULL, load_worker, &l) == 0)
			started++;
	load_worker(&l);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&l.mu);
	rix_free(l.names.v);
	size_t before = rix_master_index_count(r->mi, RIX_BLOB_DATA) + rix_master_index_count(r->mi, RIX_BLOB_TREE);
	rc = rix_master_index_bulk_finish(r->mi);
	l.stats.blobs = rix_master_index_count(r->mi, RIX_BLOB_DATA) + rix_master_index_count(r->mi, RIX_BLOB_TREE) -
			before;
	if (stats != NULL)
		*stats = l.stats;
	if (rc != 0)
		return rc;
	if (l.first_error == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "repo: out of memory loading the index");
	if (l.first_error != 0 && r->opt.strict)
		return l.first_error;
	return 0;
}

/* ---- saving -------------------------------------------------------------------------------- */

/* Writes the current index file (imu held). On failure it stays for the next try. */
static int write_index_locked(rix_repo *r)
{
	if (r->cur == NULL)
		return 0;
	char *json;
	size_t len;
	int rc = rix_index_encode(r->cur, &json, &len);
	if (rc != 0)
		return rc;
	rc = rix_repo_write_file(r, RIX_FILE_INDEX, json, len, NULL);
	rix_free(json);
	if (rc != 0)
		return rc;
	rix_index_free(r->cur);
	r->cur = NULL;
	return 0;
}

static void forget_pending(rix_repo *r, const rix_blob *blobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rix_master_index_remove_pending(r->mi, blobs[i].type, &blobs[i].id);
}

static void pack_discarded(void *arg, const rix_blob *blobs, size_t n)
{
	forget_pending(arg, blobs, n);
}

/*
 * A pack stored by the backend: into the current index file first, then the master index (if
 * that fails, later saves store its blobs again: a duplicate, never a blob deduplicated against
 * a pack no index file names).
 */
static int pack_stored(rix_repo *r, rix_pack_writer *w, const rix_id *pack_id)
{
	const rix_blob *blobs = rix_pack_writer_blobs(w);
	size_t n = rix_pack_writer_count(w);
	uint32_t limit = r->cfg.version >= 2 ? RIX_REPO_INDEX_BLOBS_V2 : RIX_REPO_INDEX_BLOBS_V1;
	pthread_mutex_lock(&r->imu);
	int rc = r->cur == NULL ? rix_index_new(&r->cur, 0) : 0;
	if (rc == 0)
		rc = rix_index_store_pack(r->cur, pack_id, blobs, n);
	if (rc == 0 && rix_index_count(r->cur, RIX_BLOB_DATA) + rix_index_count(r->cur, RIX_BLOB_TREE) >= limit)
		rc = write_index_locked(r); /* on failure the next flush writes it */
	pthread_mutex_unlock(&r->imu);
	int mrc = rix_master_index_store_pack(r->mi, pack_id, blobs, n);
	forget_pending(r, blobs, n);
	rix_pack_writer_free(w);
	return rc != 0 ? rc : mrc;
}

/*
 * Hands a finished pack to the backend. One the backend refused waits in the retry list with
 * its blobs pending (the save that finished it succeeded: flush retries it and reports the
 * error if it fails again); only when the list is full is it dropped, with the error.
 */
static int store_pack(rix_repo *r, rix_pack_writer *w, const rix_id *pack_id)
{
	char name[65];
	rix_id_to_hex(pack_id, name);
	int taken = 0;
	int rc = rix_backend_write_file(r->b, RIX_FILE_PACK, name, rix_pack_writer_fd(w), rix_pack_writer_path(w),
					rix_pack_writer_file_size(w), &taken);
	if (taken) { /* the file is in place (a later sync may have failed): it is stored */
		rix_pack_writer_disown(w);
		int src = pack_stored(r, w, pack_id);
		return rc != 0 ? rc : src;
	}
	if (rc == 0)
		return pack_stored(r, w, pack_id);
	pthread_mutex_lock(&r->mu);
	int kept = r->nretry < sizeof(r->retry) / sizeof(r->retry[0]);
	if (kept) {
		r->retry[r->nretry] = w;
		r->retry_id[r->nretry++] = *pack_id;
		r->retry_err = rc;
	}
	pthread_mutex_unlock(&r->mu);
	if (kept)
		return 0;
	forget_pending(r, rix_pack_writer_blobs(w), rix_pack_writer_count(w));
	rix_pack_writer_free(w);
	return rc;
}

static int pack_done(void *arg, rix_pack_writer *w, const rix_id *pack_id)
{
	return store_pack(arg, w, pack_id);
}

static int get_packer(rix_repo *r, rix_packer **out)
{
	pthread_mutex_lock(&r->mu);
	int rc = 0;
	if (r->packer == NULL) {
		const char *dir = rix_backend_temp_dir(r->b);
		if (dir == NULL)
			dir = getenv("TMPDIR");
		if (dir == NULL || *dir == '\0')
			dir = "/tmp";
		rc = rix_packer_new(&r->packer, r->key, r->cfg.version, dir, r->opt.pack_size, pack_done, r);
		if (rc == 0)
			rix_packer_set_discard(r->packer, pack_discarded);
	}
	*out = r->packer;
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int take_codec(rix_repo *r, rix_blob_codec **c)
{
	pthread_mutex_lock(&r->mu);
	*c = r->npool > 0 ? r->pool[--r->npool] : NULL;
	pthread_mutex_unlock(&r->mu);
	return *c != NULL ? 0 : rix_blob_codec_new(c, r->key, r->cfg.version, r->compression);
}

static void give_codec(rix_repo *r, rix_blob_codec *c)
{
	pthread_mutex_lock(&r->mu);
	if (r->npool < POOL_MAX) {
		r->pool[r->npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	rix_blob_codec_free(c);
}

int rix_repo_save_blob(rix_repo *r, rix_blob_type t, const void *data, size_t n, rix_id *id_out, int *stored)
{
	rix_id id;
	if (stored != NULL)
		*stored = 0;
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "repo: blob type %d", (int)t);
	if (n > RIX_BLOB_MAX)
		return rix_error_set(RIX_EINVAL, "repo: blob of %zu bytes is over the %zu-byte limit", n, RIX_BLOB_MAX);
	int rc = rix__repo_lock_ok(r);
	if (rc != 0)
		return rc;
	rix_sha256(data, n, &id);
	if (id_out != NULL)
		*id_out = id;
	if (rix_master_index_has(r->mi, t, &id))
		return 0;
	rc = rix_master_index_add_pending(r->mi, t, &id);
	if (rc <= 0)
		return rc;
	rix_packer *p;
	rix_blob_codec *c = NULL;
	rc = get_packer(r, &p);
	if (rc == 0)
		rc = take_codec(r, &c);
	if (rc == 0) {
		rc = rix_packer_add(p, c, t, &id, data, n);
		give_codec(r, c);
	}
	if (rc != 0) {
		rix_master_index_remove_pending(r->mi, t, &id);
		return rc;
	}
	if (stored != NULL)
		*stored = 1;
	return 0;
}

int rix_repo_flush(rix_repo *r)
{
	int first = rix__repo_lock_ok(r); /* under a lost lock nothing more is written */
	if (first != 0)
		return first;
	/* Packs the backend refused before: once more, in order. */
	pthread_mutex_lock(&r->mu);
	size_t nretry = r->nretry;
	rix_pack_writer *retry[256];
	rix_id ids[256];
	memcpy(retry, r->retry, nretry * sizeof(retry[0]));
	memcpy(ids, r->retry_id, nretry * sizeof(ids[0]));
	r->nretry = 0;
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < nretry; i++) {
		int rc = store_pack(r, retry[i], &ids[i]);
		if (rc != 0 && first == 0)
			first = rc;
	}
	if (r->packer != NULL) {
		int rc = rix_packer_flush(r->packer);
		if (rc != 0 && first == 0)
			first = rc;
	}
	/* The index file names only stored packs (a refused one is not in it yet). */
	pthread_mutex_lock(&r->imu);
	int rc = write_index_locked(r);
	pthread_mutex_unlock(&r->imu);
	if (rc != 0 && first == 0)
		first = rc;
	pthread_mutex_lock(&r->mu);
	if (r->nretry > 0 && first == 0) /* refused again: still waiting, not durable */
		first = rix_error_set(r->retry_err, "repo: %zu packs could not be stored yet: %s", r->nretry,
				      rix_strerror(r->retry_err));
	pthread_mutex_unlock(&r->mu);
	return first;
}

/* ---- loading ------------------------------------------------------------------------------- */

int rix_repo_load_blob(rix_repo *r, rix_blob_type t, const rix_id *id, uint8_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	rix_packed_blob pb;
	int rc = rix_master_index_lookup(r->mi, t, id, &pb);
	if (rc != 0) {
		char hex[65];
		rix_id_to_hex(id, hex);
		return rix_error_set(RIX_ENOTFOUND, "repo: %s blob %s is not in the index", t == RIX_BLOB_TREE ? "tree" : "data",
				     hex);
	}
	char pack[65];
	rix_id_to_hex(&pb.pack_id, pack);
	size_t plain = rix_blob_plain_size(pb.length, pb.uncompressed_length);
	uint8_t *stored = rix_malloc(pb.length ? pb.length : 1);
	uint8_t *buf = rix_malloc(plain ? plain : 1);
	if (stored == NULL || buf == NULL) {
		rix_free(stored);
		rix_free(buf);
		return rix_error_set(RIX_ENOMEM, "repo: out of memory for a %zu-byte blob", plain);
	}
	rc = rix_backend_read(r->b, RIX_FILE_PACK, pack, pb.offset, stored, pb.length);
	rix_blob_codec *c = NULL;
	if (rc == 0)
		rc = take_codec(r, &c);
	if (rc == 0) {
		rix_blob b = { .id = *id, .type = t, .offset = pb.offset, .length = pb.length,
			       .uncompressed_length = pb.uncompressed_length };
		rc = rix_blob_codec_decode(c, stored, pb.length, &b, buf, plain, n);
		give_codec(r, c);
		if (rc == RIX_ECORRUPT || rc == RIX_EAUTH) {
			char msg[300];
			snprintf(msg, sizeof(msg), "%s", rix_error_last());
			rc = rix_error_set(rc, "repo: pack %s, blob at %u: %s", pack, pb.offset, msg);
		}
	}
	rix_free(stored);
	if (rc != 0) {
		rix_free(buf);
		*n = 0;
		return rc;
	}
	*out = buf;
	return 0;
}
