/*
 * repo/blobs.c — saving blobs (with dedup) into packs and index files, flush, and loading
 * blobs.
 *
 *   save_blob(t, data):  id = SHA-256(data)
 *       add_pending(t, id): known or pending? ── yes ──> done (dedup; one lookup, no lock)
 *       codec (a pool, one per thread at a time) ──> packer: open pack of type t
 *   packer's done(pack):  backend write_file (local: rename of the temp file into data/)
 *       ──> master index store_pack: its blobs are known there, no longer pending, and the pack
 *           waits for an index file ──> an index file when RIX_REPO_INDEX_BLOBS_V2/_V1 wait
 *       a pack the backend refused waits in `retry` (its blobs stay pending) for the next flush
 *   flush:  retry waiting packs ──> packer flush ──> an index file for every pack that waits
 *
 * The master index holds each saved blob once: its pending entry becomes its stored entry, and
 * the next index file is made from those entries (rix_master_index_take_unindexed), so there
 * is no index file being filled beside it.
 *
 * Invariants:
 * - A pack is written before any index file names it; an index file names only stored packs.
 * - A blob is pending from add_pending until its pack is in the master index, or until the pack
 *   is thrown away (discard) or its save failed: never longer, so a blob is never lost to a
 *   stale pending entry.
 * - mu guards the codec pool, the retry list (and its first error) and the packer's creation;
 *   imu is held while an index file is made and written (one at a time), so that an index
 *   upload never blocks the threads that take codecs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"

/* ---- saving -------------------------------------------------------------------------------- */

/* Writes an index file for every stored pack no index file names yet (imu held). On failure
 * they wait for the next try. */
static int write_index_locked(rix_repo *r)
{
	rix_index *idx;
	uint32_t upto;
	int rc = rix_master_index_take_unindexed(&idx, &upto, r->mi);
	if (rc != 0 || idx == NULL)
		return rc;
	char *json;
	size_t len;
	rc = rix_index_encode(&json, &len, idx);
	rix_index_free(idx);
	if (rc != 0)
		return rc;
	rix_id id;
	rc = rix_repo_write_file(&id, r, RIX_FILE_INDEX, json, len);
	rix_free(json);
	if (rc == 0 && rix_master_index_mark_indexed(r->mi, upto, &id) != 0) {
		/* written and marked; only its ID is not held: a later load merges it again (duplicates) */
	}
	return rc;
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
 * A pack stored by the backend: into the master index, where its blobs stop being pending and
 * become known, and it waits for an index file (written here once enough blobs wait). If the
 * master index cannot take it, its blobs are forgotten as pending, so later saves store them
 * again (a duplicate in another pack, never a blob deduplicated against a pack that no index
 * file will name).
 */
static int pack_stored(rix_repo *r, rix_pack_writer *w, const rix_id *pack_id)
{
	const rix_blob *blobs = rix_pack_writer_blobs(w);
	size_t n = rix_pack_writer_count(w);
	uint32_t limit = r->cfg.version >= 2 ? RIX_REPO_INDEX_BLOBS_V2 : RIX_REPO_INDEX_BLOBS_V1;
	int rc = rix_master_index_store_pack(r->mi, pack_id, blobs, n);
	if (rc != 0)
		forget_pending(r, blobs, n);
	rix_pack_writer_free(w);
	if (rc == 0 && rix_master_index_unindexed(r->mi) >= limit) {
		pthread_mutex_lock(&r->imu);
		/* Another thread may have written it. A failure is not this save's: the packs stay
		 * waiting, the next index write or flush names them, and flush reports the error. */
		if (rix_master_index_unindexed(r->mi) >= limit && write_index_locked(r) != 0) {
		}
		pthread_mutex_unlock(&r->imu);
	}
	return rc;
}

/*
 * Hands a finished pack to the backend. One the backend refused waits in the retry list with
 * its blobs pending (the save that finished it succeeded: flush retries it and reports the
 * error if it fails again); only when the list is full is it dropped, with the error.
 */
static int store_pack(rix_repo *r, rix_pack_writer *w, const rix_id *pack_id)
{
	char name[65];
	rix_id_to_hex(name, pack_id);
	bool taken = false;
	int rc = rix_backend_write_file(&taken, r->b, RIX_FILE_PACK, name, rix_pack_writer_fd(w),
					rix_pack_writer_path(w), rix_pack_writer_file_size(w));
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
	if (r->npool < REPO_POOL_MAX) {
		r->pool[r->npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	rix_blob_codec_free(c);
}

int rix_repo_save_blob(rix_id *id_out, bool *stored, rix_repo *r, rix_blob_type t, const void *data, size_t n)
{
	uint32_t len;
	int rc = rix_repo_save_blob_sized(id_out, &len, r, t, data, n);
	if (stored != NULL)
		*stored = rc == 0 && len > 0;
	return rc;
}

/* Saves (t, id, data[0..n)): always when force, else only when add_pending says it is new. */
static int save_blob(rix_id *id_out, uint32_t *stored_len, rix_repo *r, rix_blob_type t, const void *data, size_t n,
		     bool force);

int rix_repo_save_blob_sized(rix_id *id_out, uint32_t *stored_len, rix_repo *r, rix_blob_type t, const void *data,
			     size_t n)
{
	return save_blob(id_out, stored_len, r, t, data, n, false);
}

int rix_repo_save_blob_copy(rix_id *id_out, uint32_t *stored_len, rix_repo *r, rix_blob_type t, const void *data,
			    size_t n)
{
	return save_blob(id_out, stored_len, r, t, data, n, true);
}

static int save_blob(rix_id *id_out, uint32_t *stored_len, rix_repo *r, rix_blob_type t, const void *data, size_t n,
		     bool force)
{
	rix_id id;
	if (stored_len != NULL)
		*stored_len = 0;
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "repo: blob type %d", (int)t);
	if (n > RIX_BLOB_MAX)
		return rix_error_set(RIX_EINVAL, "repo: blob of %zu bytes is over the %zu-byte limit", n, RIX_BLOB_MAX);
	int rc = rix__repo_lock_ok(r);
	if (rc != 0)
		return rc;
	rix_sha256(&id, data, n);
	if (id_out != NULL)
		*id_out = id;
	if (!force) {
		rc = rix_master_index_add_pending(r->mi, t, &id); /* the one lookup */
		if (rc <= 0)
			return rc;
	}
	rix_packer *p;
	rix_blob_codec *c = NULL;
	uint32_t len = 0;
	rc = get_packer(r, &p);
	if (rc == 0)
		rc = take_codec(r, &c);
	if (rc == 0) {
		rc = rix_packer_add(&len, p, c, t, &id, data, n);
		give_codec(r, c);
	}
	if (rc != 0) {
		if (!force)
			rix_master_index_remove_pending(r->mi, t, &id);
		return rc;
	}
	if (stored_len != NULL)
		*stored_len = len; /* at least 32: the crypto overhead */
	return 0;
}

int rix_repo_save_blob_stored(rix_repo *r, const rix_blob *b, const uint8_t *stored)
{
	if ((unsigned)b->type >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "repo: blob type %d", (int)b->type);
	if (b->length < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_EINVAL, "repo: a stored blob of %u bytes is under %d", b->length, RIX_CRYPTO_OVERHEAD);
	if (b->uncompressed_length != 0 && r->cfg.version < 2)
		return rix_error_set(RIX_EINVAL, "repo: a compressed blob for a version %d repository", r->cfg.version);
	if (rix_blob_plain_size(b->length, b->uncompressed_length) > RIX_BLOB_MAX)
		return rix_error_set(RIX_EINVAL, "repo: a blob over the %zu-byte limit", RIX_BLOB_MAX);
	int rc = rix__repo_lock_ok(r);
	if (rc != 0)
		return rc;
	rix_packer *p;
	rc = get_packer(r, &p);
	return rc == 0 ? rix_packer_add_stored(p, b, stored) : rc;
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

/*
 * A buffer of at least need bytes, from the pool (mu): the smallest that holds need, else the
 * largest (grown). Best fit keeps each buffer at the size of its use (a pack's reads, a blob's
 * plaintext) instead of every buffer growing to the largest use of any, and spares the frees
 * and allocations of a small buffer taken for a large use.
 */
static uint8_t *take_scratch(rix_repo *r, size_t need, size_t *cap)
{
	pthread_mutex_lock(&r->mu);
	struct rix__scratch sc = { 0 };
	if (r->nscratch > 0) {
		size_t best = 0;
		for (size_t i = 1; i < r->nscratch; i++) {
			size_t c = r->scratch[i].cap, b = r->scratch[best].cap;
			bool fits = c >= need, bfits = b >= need;
			if ((fits && (!bfits || c < b)) || (!fits && !bfits && c > b))
				best = i;
		}
		sc = r->scratch[best];
		r->scratch[best] = r->scratch[--r->nscratch];
	}
	pthread_mutex_unlock(&r->mu);
	if (sc.cap < need) {
		rix_free(sc.p);
		sc.cap = need > 4096 ? need : 4096;
		sc.p = rix_malloc(sc.cap);
		if (sc.p == NULL)
			sc.cap = 0;
	}
	*cap = sc.cap;
	return sc.p;
}

static void give_scratch(rix_repo *r, uint8_t *p, size_t cap)
{
	pthread_mutex_lock(&r->mu);
	if (p != NULL && r->nscratch < REPO_POOL_MAX) {
		r->scratch[r->nscratch++] = (struct rix__scratch){ p, cap };
		p = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	rix_free(p);
}

size_t rix_repo_release_buffers(rix_repo *r)
{
	pthread_mutex_lock(&r->mu);
	struct rix__scratch sc[REPO_POOL_MAX];
	rix_blob_codec *codecs[REPO_POOL_MAX];
	size_t ns = r->nscratch, nc = r->npool, bytes = 0;
	memcpy(sc, r->scratch, ns * sizeof(sc[0]));
	memcpy(codecs, r->pool, nc * sizeof(codecs[0]));
	r->nscratch = 0;
	r->npool = 0;
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < ns; i++) {
		bytes += sc[i].cap;
		rix_free(sc[i].p);
	}
	for (size_t i = 0; i < nc; i++)
		rix_blob_codec_free(codecs[i]);
	return bytes;
}

/* Looks (t, id) up: *pb, and its plaintext size in *plain. */
static int locate(rix_packed_blob *pb, size_t *plain, rix_repo *r, rix_blob_type t, const rix_id *id)
{
	int rc = rix_master_index_lookup(pb, r->mi, t, id);
	if (rc == RIX_EINVAL) /* known, but a dedup-only index has no location: its message says so */
		return rc;
	if (rc != 0) {
		char hex[65];
		rix_id_to_hex(hex, id);
		return rix_error_set(RIX_ENOTFOUND, "repo: %s blob %s is not in the index", t == RIX_BLOB_TREE ? "tree" : "data",
				     hex);
	}
	*plain = rix_blob_plain_size(pb->length, pb->uncompressed_length);
	return 0;
}

/* Reads and decodes the blob at *pb into buf[0..cap), cap >= its plaintext size. */
static int load_located(size_t *n, rix_repo *r, const rix_packed_blob *pb, uint8_t *buf, size_t cap)
{
	char pack[65];
	rix_id_to_hex(pack, &pb->pack_id);
	size_t scap;
	uint8_t *stored = take_scratch(r, pb->length ? pb->length : 1, &scap);
	if (stored == NULL)
		return rix_error_set(RIX_ENOMEM, "repo: out of memory for a %u-byte stored blob", pb->length);
	int rc = rix_backend_read(r->b, RIX_FILE_PACK, pack, pb->offset, stored, pb->length);
	if (rc == RIX_ENOTFOUND)
		rc = rix_error_set(RIX_ENOTFOUND, "repo: pack %s, which the index names, is missing", pack);
	rix_blob_codec *c = NULL;
	if (rc == 0)
		rc = take_codec(r, &c);
	if (rc == 0) {
		rix_blob b = { .id = pb->id, .type = pb->type, .offset = pb->offset, .length = pb->length,
			       .uncompressed_length = pb->uncompressed_length };
		rc = rix_blob_codec_decode(n, c, stored, pb->length, &b, buf, cap);
		give_codec(r, c);
		if (rc == RIX_ECORRUPT || rc == RIX_EAUTH)
			rc = rix_error_set(rc, "repo: pack %s, blob at %u: %s", pack, pb->offset, rix_error_last());
	}
	give_scratch(r, stored, scap);
	return rc;
}

int rix_repo_load_blob(uint8_t **out, size_t *n, rix_repo *r, rix_blob_type t, const rix_id *id)
{
	*out = NULL;
	*n = 0;
	rix_packed_blob pb;
	size_t plain = 0;
	int rc = locate(&pb, &plain, r, t, id);
	if (rc != 0)
		return rc;
	uint8_t *buf = rix_malloc(plain ? plain : 1);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "repo: out of memory for a %zu-byte blob", plain);
	rc = load_located(n, r, &pb, buf, plain);
	if (rc != 0) {
		rix_free(buf);
		*n = 0;
		return rc;
	}
	*out = buf;
	return 0;
}

int rix_repo_load_blob_into(size_t *n, rix_repo *r, rix_blob_type t, const rix_id *id, uint8_t *buf, size_t cap)
{
	*n = 0;
	rix_packed_blob pb;
	size_t plain = 0;
	int rc = locate(&pb, &plain, r, t, id);
	if (rc != 0)
		return rc;
	if (cap < plain) {
		*n = plain;
		return rix_error_set(RIX_ELIMIT, "repo: the blob has %zu bytes, the buffer %zu", plain, cap);
	}
	rc = load_located(n, r, &pb, buf, cap);
	if (rc != 0)
		*n = 0;
	return rc;
}

/* ---- a pack's blobs in few reads (restore) -------------------------------------------------- */

/* The end of the read that starts at blobs[i]: the blobs less than RIX_REPO_PACK_READ_GAP apart,
 * as long as the read stays within RIX_REPO_PACK_READ_MAX (one blob at least). */
static size_t read_group(const rix_blob *blobs, size_t n, size_t i)
{
	uint64_t start = blobs[i].offset, end = start + blobs[i].length;
	size_t j = i + 1;
	while (j < n && blobs[j].offset - end <= RIX_REPO_PACK_READ_GAP &&
	       (uint64_t)blobs[j].offset + blobs[j].length - start <= RIX_REPO_PACK_READ_MAX) {
		end = (uint64_t)blobs[j].offset + blobs[j].length;
		j++;
	}
	return j;
}

/* rix_repo_load_pack_blobs (fn) and _stored (sfn): one of the two is set. */
static int load_pack(rix_repo *r, const rix_id *pack_id, const rix_blob *blobs, size_t n, rix_repo_blob_fn fn,
		     rix_repo_stored_blob_fn sfn, void *payload)
{
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && (uint64_t)blobs[i].offset < (uint64_t)blobs[i - 1].offset + blobs[i - 1].length)
			return rix_error_set(RIX_EINVAL, "repo: the blobs of a pack read at once must be in increasing offsets");
		if (rix_blob_plain_size(blobs[i].length, blobs[i].uncompressed_length) > RIX_BLOB_MAX)
			return rix_error_set(RIX_EINVAL, "repo: a blob over RIX_BLOB_MAX");
	}
	char pack[65];
	rix_id_to_hex(pack, pack_id);
	/* The reads' sizes and the largest blob first, so that two buffers of the repository's pool
	 * serve every read (no allocation, and no fresh pages to fault in, pack after pack). */
	uint64_t max_read = 0, max_plain = 0;
	for (size_t i = 0; i < n;) {
		uint64_t start = blobs[i].offset;
		size_t j = read_group(blobs, n, i);
		uint64_t len = (uint64_t)blobs[j - 1].offset + blobs[j - 1].length - start;
		max_read = len > max_read ? len : max_read;
		for (; i < j; i++) {
			uint64_t p = rix_blob_plain_size(blobs[i].length, blobs[i].uncompressed_length);
			max_plain = p > max_plain ? p : max_plain;
		}
	}
	size_t scap = 0, pcap = 0;
	uint8_t *stored = n > 0 ? take_scratch(r, (size_t)max_read, &scap) : NULL;
	uint8_t *plain = n > 0 && stored != NULL ? take_scratch(r, (size_t)max_plain, &pcap) : NULL;
	rix_blob_codec *c = NULL;
	int rc = 0;
	if (n > 0 && (stored == NULL || plain == NULL))
		rc = rix_error_set(RIX_ENOMEM, "repo: out of memory for reads of pack %s", pack);
	if (rc == 0 && n > 0)
		rc = take_codec(r, &c);
	for (size_t i = 0; rc == 0 && i < n;) {
		/* blobs[i..j) in one read: close together, and not too much at once */
		uint64_t start = blobs[i].offset;
		size_t j = read_group(blobs, n, i);
		size_t len = (size_t)((uint64_t)blobs[j - 1].offset + blobs[j - 1].length - start);
		int rrc = rix_backend_read(r->b, RIX_FILE_PACK, pack, start, stored, len);
		char readmsg[400] = "";
		if (rrc == RIX_ENOTFOUND)
			snprintf(readmsg, sizeof(readmsg), "repo: pack %s, which the index names, is missing", pack);
		else if (rrc != 0)
			snprintf(readmsg, sizeof(readmsg), "repo: pack %s: %s", pack, rix_error_last());
		for (; rc == 0 && i < j; i++) {
			const rix_blob *b = &blobs[i];
			if (rrc != 0) {
				rix_error_set(rrc, "%s", readmsg);
				rc = fn != NULL ? fn(payload, i, rrc, NULL, 0) : sfn(payload, i, rrc, NULL, 0, NULL);
				continue;
			}
			/* decrypted where it was read (no buffer of the codec's), and sealed again for sfn:
			 * what verified is what sfn gets. The second AES pass (GB/s) costs far less than
			 * the zstd and SHA-256 of the same blob; the codec buffer it spares is up to the
			 * largest compressed blob a worker (7-10 MiB of prune's peak, bench/RESULTS.md). */
			uint8_t *form = stored + (b->offset - start);
			size_t got = 0;
			int brc = rix_blob_codec_decode_in_place(&got, c, form, b->length, b, plain, pcap, sfn != NULL);
			if (brc != 0) {
				char msg[300];
				snprintf(msg, sizeof(msg), "%s", rix_error_last());
				brc = rix_error_set(brc, "repo: pack %s, blob at %u: %s", pack, b->offset, msg);
				rc = fn != NULL ? fn(payload, i, brc, NULL, 0) : sfn(payload, i, brc, NULL, 0, NULL);
			} else {
				rc = fn != NULL ? fn(payload, i, 0, plain, got) : sfn(payload, i, 0, plain, got, form);
			}
		}
	}
	if (c != NULL)
		give_codec(r, c);
	give_scratch(r, stored, scap);
	give_scratch(r, plain, pcap);
	return rc;
}

int rix_repo_load_pack_blobs(rix_repo *r, const rix_id *pack_id, const rix_blob *blobs, size_t n, rix_repo_blob_fn fn,
			     void *payload)
{
	return load_pack(r, pack_id, blobs, n, fn, NULL, payload);
}

int rix_repo_load_pack_blobs_stored(rix_repo *r, const rix_id *pack_id, const rix_blob *blobs, size_t n,
				    rix_repo_stored_blob_fn fn, void *payload)
{
	return load_pack(r, pack_id, blobs, n, NULL, fn, payload);
}
