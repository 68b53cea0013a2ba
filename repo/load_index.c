/*
 * repo/load_index.c — loading a repository's index: every index file, read, checked and decoded
 * by a pool of threads (sized to the machine and the memory budget) straight into batches of
 * the master index, which bulk_finish then turns into its ranked tables.
 *
 * A thread's working memory: the file (read whole: its SHA-256 and its MAC are checked before
 * any of it is used; decrypted in place), and for a compressed file zstd's window and a JSON
 * window (rix_index_stream_decode: 1 MiB, more only for a bigger pack object), never the whole
 * JSON; plain JSON is decoded where it was decrypted. Then the batch, the file's entries until
 * commit (48 bytes a blob, 32 a data blob when dedup-only): the data being loaded.
 *
 * A damaged file is skipped (reported, and fatal when strict); RIX_EIO, the backend failing (a
 * REST server gone after its retries, a failing disk), ends the load, strict or not: no file
 * is started after it, since each would wait out the same retries and fail the same way.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"
#include "../common/pool.h"

#define INDEX_FILE_MAX ((size_t)1 << 31)

struct loader {
	rix_repo *r;
	struct rix__names names;
	size_t next; /* guarded by mu */
	size_t done;
	pthread_mutex_t mu;
	rix_repo_index_error_fn on_error;
	void *arg;
	int first_error;
	int stop;           /* RIX_EIO once the backend failed: no file is started after it */
	char stop_msg[512]; /* its message (from the thread that met it) */
	rix_repo_load_stats stats;
};

/* What a loader thread reuses from file to file: no allocation per file once warm. */
struct load_bufs {
	uint8_t *file;
	size_t cap;
	rix_unpacked_decoder *dec;
	rix_index_stream *js; /* the JSON window of a compressed file */
	rix_master_batch *batch;
};

/* rix_index_read_fn over a compressed file: decompressed into the JSON window as it is decoded. */
static int read_unpacked(void *arg, void *buf, size_t cap, size_t *got)
{
	return rix_unpacked_decoder_read(arg, buf, cap, got);
}

/* Loads one index file into the batch (committed by the caller). */
static int load_one(rix_repo *r, const struct rix__name *nm, struct load_bufs *lb, uint64_t *bytes)
{
	const char *name = nm->s;
	rix_id want, got;
	uint64_t size = nm->size; /* from the listing: no stat (a round trip on REST) */
	*bytes = 0;
	int rc = rix_id_from_hex(&want, name, 64);
	if (rc == 0 && size == 0) /* a backend that lists no sizes (restic's REST v1) */
		rc = rix_backend_stat(&size, r->b, RIX_FILE_INDEX, name);
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
	rix_sha256(&got, lb->file, (size_t)size);
	if (memcmp(got.b, want.b, RIX_ID_SIZE) != 0)
		return rix_error_set(RIX_ECORRUPT, "index %.16s: the file's SHA-256 is not its name", name);
	/* Authenticated and decrypted in place; a compressed file's JSON is then decompressed a
	 * window at a time as it is decoded, plain JSON (version 1, or a file stored uncompressed)
	 * decoded where it lies. */
	const uint8_t *json;
	size_t jn;
	rc = rix_unpacked_decoder_open(&json, &jn, lb->dec, r->key, lb->file, (size_t)size, r->cfg.version);
	if (rc == 0 && json != NULL)
		rc = rix_index_decode_to(NULL, (const char *)json, jn, rix_master_batch_sink(lb->batch));
	else if (rc == 0)
		rc = rix_index_stream_decode(lb->js, NULL, read_unpacked, lb->dec, rix_master_batch_stream_sink(lb->batch));
	return rc;
}

static void *load_worker(void *arg)
{
	struct loader *l = arg;
	struct load_bufs lb = { 0 };
	int brc = rix_master_index_batch_new(&lb.batch, l->r->mi);
	if (brc == 0)
		brc = rix_unpacked_decoder_new(&lb.dec);
	if (brc == 0)
		brc = rix_index_stream_new(&lb.js, 0);
	rix_master_batch *b = lb.batch;
	for (;;) {
		pthread_mutex_lock(&l->mu);
		if (brc != 0 && l->first_error == 0)
			l->first_error = brc;
		size_t i = brc == 0 && l->stop == 0 && l->next < l->names.n && (l->first_error == 0 || !l->r->opt.strict)
				   ? l->next++
				   : SIZE_MAX;
		pthread_mutex_unlock(&l->mu);
		if (i == SIZE_MAX)
			break;
		uint64_t bytes;
		int rc = load_one(l->r, &l->names.v[i], &lb, &bytes);
		if (rc == 0) {
			rix_id id;
			rc = rix_id_from_hex(&id, l->names.v[i].s, 64); /* listed names are IDs: cannot fail */
			if (rc == 0)
				rc = rix_master_batch_commit(b, &id);
			else
				rix_master_batch_discard(b);
		} else {
			rix_master_batch_discard(b);
		}
		pthread_mutex_lock(&l->mu);
		l->stats.bytes += bytes;
		l->done++;
		if (l->r->opt.load_progress != NULL)
			l->r->opt.load_progress(l->r->opt.payload, l->done, l->names.n);
		if (rc == 0)
			l->stats.loaded++;
		if (rc != 0) {
			if (rc == RIX_EIO && l->stop == 0) {
				l->stop = rc;
				snprintf(l->stop_msg, sizeof(l->stop_msg), "%s", rix_error_last());
			}
			if (l->on_error != NULL)
				l->on_error(l->arg, l->names.v[i].s, rc, rix_error_last());
			if (l->first_error == 0 || rc == RIX_ENOMEM)
				l->first_error = rc;
		}
		pthread_mutex_unlock(&l->mu);
	}
	rix_master_batch_free(lb.batch);
	rix_unpacked_decoder_free(lb.dec);
	rix_index_stream_free(lb.js);
	rix_free(lb.file);
	return NULL;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, RIX_ID_SIZE);
}

/* rix_repo_load_index (read_cache) or rix_repo_load_index_files. */
static int load_index(rix_repo_load_stats *stats, rix_repo *r, rix_repo_index_error_fn on_error, void *arg,
		      bool read_cache)
{
	struct loader l = { .r = r, .on_error = on_error, .arg = arg };
	int rc = rix__list_names(r->b, RIX_FILE_INDEX, &l.names);
	if (rc != 0)
		return rc;
	/*
	 * The cache (index_cache.c), for an empty master index: the files it was made of are not
	 * read; those listed since are loaded into batches, which its install merges with its
	 * tables (a type with new entries has its table built again).
	 */
	rix_master_image *im = NULL;
	size_t cached_files = 0;
	/* Index files loaded before (a second call, or check after a load) are not merged again. */
	rix_id *have = NULL;
	size_t nhave = 0;
	rc = rix_master_index_index_ids(&have, &nhave, r->mi);
	/* Only into an index that holds nothing yet (what install accepts), and not for a dedup-only
	 * load: the cache holds every data blob's location, which that index is made not to hold
	 * (rix_repo_set_dedup_only). */
	if (rc == 0 && read_cache && !r->dedup_only && l.names.n > 0 && nhave == 0 &&
	    rix_master_index_pack_count(r->mi) == 0 && rix_master_index_count(r->mi, RIX_BLOB_DATA) == 0 &&
	    rix_master_index_count(r->mi, RIX_BLOB_TREE) == 0)
		im = rix__index_cache_read(r, &l.names);
	if (im != NULL) {
		const rix_id *ids = rix_master_image_index_ids(&cached_files, im);
		rix_free(have);
		have = cached_files ? rix_malloc(cached_files * sizeof(rix_id)) : NULL;
		if (cached_files && have == NULL)
			rc = rix_error_set(RIX_ENOMEM, "repo: out of memory");
		else if (cached_files)
			memcpy(have, ids, cached_files * sizeof(rix_id));
		nhave = rc == 0 ? cached_files : 0;
		if (nhave > 1)
			qsort(have, nhave, sizeof(*have), cmp_id);
	}
	if (rc != 0) {
		rix_master_image_free(im);
		rix_free(l.names.v);
		return rc;
	}
	size_t keep = 0;
	l.stats.files = l.names.n; /* all listed; loaded counts those loaded now */
	for (size_t i = 0; i < l.names.n; i++) {
		rix_id id;
		if (nhave > 0 && rix_id_from_hex(&id, l.names.v[i].s, 64) == 0 &&
		    bsearch(&id, have, nhave, sizeof(*have), cmp_id) != NULL)
			continue;
		l.names.v[keep++] = l.names.v[i];
	}
	rix_free(have);
	l.names.n = keep;
	/* Room for the data blobs of the files to read, so that the parts holding their entries do
	 * not move as they fill (see rix_master_index_bulk_reserve; a hint, its failure ignored): an entry
	 * of a compressed file (repository version 2) takes at least its ID's 32 bytes (~50 in
	 * practice), one of a version 1 file's plain JSON at least 64 (its hex ID; ~140 in
	 * practice). Room not used is address space, not memory; where the kernel refuses to
	 * overcommit it is charged in full, and the plain files a repository upgraded to version 2
	 * keeps until a prune rewrites them get ~4 times the room they fill (too little room
	 * costs moves as the parts grow, as without a reservation). Sizes a backend does not list
	 * (0) add nothing. */
	uint64_t file_bytes = 0;
	for (size_t i = 0; i < l.names.n; i++)
		file_bytes += l.names.v[i].size;
	uint64_t room = file_bytes / (r->cfg.version >= 2 ? RIX_ID_SIZE : 2 * RIX_ID_SIZE);
	if (room > 0 && room <= SIZE_MAX)
		(void)rix_master_index_bulk_reserve(r->mi, RIX_BLOB_DATA, (size_t)room);
	pthread_mutex_init(&l.mu, NULL);
	unsigned workers = rix__pool_size(r->opt.workers, 256);
	if (r->opt.workers == 0) {
		/*
		 * Each loader holds one file, its batch (about the file's size: ~50 bytes of a
		 * compressed file a blob) and the windows (see the top): as many as fit the memory
		 * budget, so that a many-core machine does not multiply the peak.
		 */
		uint64_t budget = r->opt.load_memory ? r->opt.load_memory : RIX_REPO_LOAD_MEMORY_DEFAULT;
		uint64_t per = l.names.max_size * RIX_REPO_LOAD_BYTES_PER_FILE_BYTE;
		uint64_t fit = per > 0 ? budget / per : workers;
		if (fit < workers)
			workers = fit > 0 ? (unsigned)fit : 1;
	}
	if (workers > l.names.n)
		workers = l.names.n > 0 ? (unsigned)l.names.n : 1;
	rix__pool_run(workers, load_worker, &l); /* the calling thread is worker 0 */
	pthread_mutex_destroy(&l.mu);
	rix_free(l.names.v);
	size_t before = rix_master_index_count(r->mi, RIX_BLOB_DATA) + rix_master_index_count(r->mi, RIX_BLOB_TREE);
	bool rebuilt = false;
	if (im != NULL) {
		rc = rix_master_index_install(r->mi, im); /* with the batches committed: the files added */
		rebuilt = rix_master_image_rebuilt(im);
		rix_master_image_free(im);
	} else {
		rc = rix_master_index_bulk_finish(r->mi);
	}
	l.stats.blobs = rix_master_index_count(r->mi, RIX_BLOB_DATA) + rix_master_index_count(r->mi, RIX_BLOB_TREE) -
			before;
	size_t read_now = l.stats.loaded;
	l.stats.loaded += cached_files;
	if (stats != NULL)
		*stats = l.stats;
	if (rc != 0)
		return rc;
	if (l.first_error == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "repo: out of memory loading the index");
	if (l.stop != 0)
		return rix_error_set(l.stop, "%s", l.stop_msg);
	if (l.first_error != 0 && r->opt.strict)
		return l.first_error;
	/* A new cache when index files were read now: without a cache, or on top of one when the
	 * install built a table again (their entries did not fit on top of the cache's tables: the
	 * next open would build it again) or RIX__CACHE_REWRITE_FILES of them were read; never from
	 * a dedup-only index, which lacks data blobs' locations. */
	bool grown = cached_files == 0 || rebuilt || read_now >= RIX__CACHE_REWRITE_FILES;
	if (read_now > 0 && grown && !rix_master_index_dedup_only(r->mi))
		rix__index_cache_save(r);
	return 0;
}

int rix_repo_load_index(rix_repo_load_stats *stats, rix_repo *r, rix_repo_index_error_fn on_error, void *arg)
{
	return load_index(stats, r, on_error, arg, true);
}

int rix_repo_load_index_files(rix_repo_load_stats *stats, rix_repo *r, rix_repo_index_error_fn on_error, void *arg)
{
	return load_index(stats, r, on_error, arg, false);
}

