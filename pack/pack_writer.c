/*
 * pack/pack_writer.c — writing one pack file, hashed while it is written.
 *
 *   buf: | stored blob | stored blob | ... |  ──(>= WRITE_CHUNK)──> write(fd)
 *          each hashed right after it is sealed, while it is still in cache
 *
 *   finish: | IV | seal(header entries) | MAC | hlen:u32 |  appended the same way
 *           pack ID = SHA-256 of every byte written, in order: no second read of the file
 *
 * Invariants:
 * - sha holds the hash of exactly the bytes of buf[0..len) plus everything written before.
 * - blobs[i].offset = sum of blobs[0..i).length; size = that sum for all of them < 2^32.
 * - count <= RIX_PACK_MAX_BLOBS, so the header is at most RIX_PACK_HEADER_MAX sealed.
 * - After any failed write the writer is failed (sticky RIX_EIO): a file with a hole or a
 *   partial blob never gets an ID.
 * - The temporary file is removed on free unless it was renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/pack.h"
#include "pack_internal.h"

/* Pending bytes are written once they reach this (the buffer stays within L2). */
#define WRITE_CHUNK ((size_t)1 << 20)

struct rix_pack_writer {
	const rix_key *key; /* borrowed */
	int version;
	int fd;
	char *path;  /* temporary file, or where it was renamed to */
	int owned;   /* remove path on free */
	int failed;  /* a write failed: sticky */
	int finished;
	rix_sha256_ctx *sha;
	uint8_t *buf;
	size_t len, cap;
	uint64_t size;      /* bytes of blobs */
	uint64_t file_size; /* after finish */
	rix_blob *blobs;
	size_t count, blobs_cap;
};

static int io_error(const char *what, const char *path, int err)
{
	int code = (err == ENOSPC || err == EDQUOT || err == EFBIG) ? RIX_ENOSPC : RIX_EIO;
	return rix_error_set(code, "pack: %s %s: %s", what, path, strerror(err));
}

int rix_pack_writer_new(rix_pack_writer **out, const rix_key *key, int repo_version, const char *dir)
{
	*out = NULL;
	if (repo_version != 1 && repo_version != 2)
		return rix_error_set(RIX_EINVAL, "pack: repository version %d", repo_version);
	rix_pack_writer *w = rix_calloc(1, sizeof(*w));
	size_t plen = strlen(dir) + sizeof("/rix-pack-XXXXXX");
	if (w == NULL || (w->path = rix_malloc(plen)) == NULL || rix_sha256_new(&w->sha) != 0) {
		if (w != NULL) {
			rix_free(w->path);
			rix_free(w);
		}
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a pack writer");
	}
	snprintf(w->path, plen, "%s/rix-pack-XXXXXX", dir);
	w->key = key;
	w->version = repo_version;
	w->fd = mkostemp(w->path, O_CLOEXEC);
	if (w->fd < 0) {
		int rc = io_error("cannot create a temporary file in", dir, errno);
		rix_sha256_free(w->sha);
		rix_free(w->path);
		rix_free(w);
		return rc;
	}
	w->owned = 1;
	*out = w;
	return 0;
}

void rix_pack_writer_free(rix_pack_writer *w)
{
	if (w == NULL)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->owned)
		unlink(w->path);
	rix_sha256_free(w->sha);
	rix_free(w->path);
	rix_free(w->buf);
	rix_free(w->blobs);
	rix_free(w);
}

/* Writes buf[0..len) to the file. */
/* Writes p[0..n) to the file. */
static int write_all(rix_pack_writer *w, const uint8_t *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = write(w->fd, p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->failed = 1;
			return io_error("cannot write", w->path, r < 0 ? errno : ENOSPC);
		}
		done += (size_t)r;
	}
	return 0;
}

static int flush(rix_pack_writer *w)
{
	int rc = write_all(w, w->buf, w->len);
	if (rc == 0)
		w->len = 0;
	return rc;
}

/* Makes room for need more bytes in buf, writing what is pending first if it must. */
static int reserve(rix_pack_writer *w, size_t need)
{
	if (w->cap - w->len >= need)
		return 0;
	int rc = flush(w);
	if (rc != 0)
		return rc;
	if (w->cap >= need)
		return 0;
	size_t cap = need > WRITE_CHUNK ? need : WRITE_CHUNK;
	uint8_t *p = rix_malloc(cap);
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a %zu-byte write buffer", cap);
	rix_free(w->buf);
	w->buf = p;
	w->cap = cap;
	return 0;
}

/* Checks that one more blob of at most bound stored bytes fits, and makes its header entry room. */
static int admit(rix_pack_writer *w, uint64_t bound)
{
	if (w->failed)
		return rix_error_set(RIX_EIO, "pack: %s: an earlier write failed", w->path);
	if (w->finished)
		return rix_error_set(RIX_EINVAL, "pack: %s is finished", w->path);
	if (w->count >= RIX_PACK_MAX_BLOBS)
		return rix_error_set(RIX_ELIMIT, "pack: %zu blobs is the most a pack holds", w->count);
	if (w->size + bound > UINT32_MAX)
		return rix_error_set(RIX_ELIMIT, "pack: a blob of up to %llu bytes would take the pack past 4 GiB",
				     (unsigned long long)bound);
	if (w->count == w->blobs_cap) {
		size_t cap = w->blobs_cap ? w->blobs_cap * 2 : 64;
		rix_blob *p = rix_realloc(w->blobs, cap * sizeof(*p));
		if (p == NULL)
			return rix_error_set(RIX_ENOMEM, "pack: out of memory for %zu header entries", cap);
		w->blobs = p;
		w->blobs_cap = cap;
	}
	return 0;
}

/* Records a blob of `stored` bytes written at the pack's end (hashed already). */
static void record(rix_pack_writer *w, rix_blob_type t, const rix_id *id, uint32_t stored, uint32_t ulen)
{
	rix_blob *b = &w->blobs[w->count++];
	b->id = *id;
	b->type = t;
	b->offset = (uint32_t)w->size;
	b->length = stored;
	b->uncompressed_length = ulen;
	w->size += stored;
}

/* Hashes the blob just placed at buf[len..len+stored) and records it. */
static void commit(rix_pack_writer *w, rix_blob_type t, const rix_id *id, uint32_t stored, uint32_t ulen)
{
	rix_sha256_update(w->sha, w->buf + w->len, stored);
	w->len += stored;
	record(w, t, id, stored, ulen);
}

int rix_pack_writer_add(rix_pack_writer *w, rix_blob_codec *c, rix_blob_type t, const rix_id *id,
			const void *plain, size_t n)
{
	if (n > RIX_BLOB_MAX)
		return rix_error_set(RIX_EINVAL, "pack: blob of %zu bytes is over the %zu-byte limit", n,
				     RIX_BLOB_MAX);
	if ((unsigned)t >= RIX_BLOB_TYPES || rix__codec_version(c) != w->version)
		return rix_error_set(RIX_EINVAL, "pack: blob type %d or a codec of version %d for a version %d pack",
				     (int)t, rix__codec_version(c), w->version);
	size_t bound = rix_blob_stored_bound(n);
	int rc = admit(w, bound);
	if (rc == 0)
		rc = reserve(w, bound);
	if (rc != 0)
		return rc;
	uint32_t stored, ulen;
	rc = rix_blob_codec_encode(&stored, &ulen, c, t, plain, n, w->buf + w->len, w->cap - w->len);
	if (rc != 0)
		return rc;
	commit(w, t, id, stored, ulen);
	return w->len >= WRITE_CHUNK ? flush(w) : 0;
}

int rix_pack_writer_add_stored(rix_pack_writer *w, const rix_blob *b, const uint8_t *stored)
{
	if (b->length < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_EINVAL, "pack: stored blob of %u bytes is under 32", b->length);
	if (b->uncompressed_length != 0 && w->version < 2)
		return rix_error_set(RIX_EINVAL, "pack: compressed blob for a version 1 pack");
	int rc = admit(w, b->length);
	if (rc == 0 && b->length > WRITE_CHUNK) { /* written from the caller's bytes: no buffer of its size */
		rc = flush(w);
		if (rc == 0)
			rc = write_all(w, stored, b->length);
		if (rc != 0)
			return rc;
		rix_sha256_update(w->sha, stored, b->length);
		record(w, b->type, &b->id, b->length, b->uncompressed_length);
		return 0;
	}
	if (rc == 0)
		rc = reserve(w, b->length);
	if (rc != 0)
		return rc;
	memcpy(w->buf + w->len, stored, b->length);
	commit(w, b->type, &b->id, b->length, b->uncompressed_length);
	return w->len >= WRITE_CHUNK ? flush(w) : 0;
}

bool rix_pack_writer_failed(const rix_pack_writer *w)
{
	return w->failed;
}

uint64_t rix_pack_writer_size(const rix_pack_writer *w)
{
	return w->size;
}

size_t rix_pack_writer_count(const rix_pack_writer *w)
{
	return w->count;
}

const rix_blob *rix_pack_writer_blobs(const rix_pack_writer *w)
{
	return w->blobs;
}

int rix_pack_writer_finish(rix_id *pack_id, rix_pack_writer *w)
{
	if (w->failed)
		return rix_error_set(RIX_EIO, "pack: %s: an earlier write failed", w->path);
	if (w->finished)
		return rix_error_set(RIX_EINVAL, "pack: %s is finished", w->path);
	if (w->count == 0)
		return rix_error_set(RIX_EINVAL, "pack: %s holds no blob", w->path);
	size_t hn = 0;
	for (size_t i = 0; i < w->count; i++)
		hn += w->blobs[i].uncompressed_length ? RIX_PACK_ENTRY_SIZE_ZSTD : RIX_PACK_ENTRY_SIZE;
	uint8_t *plain = rix_malloc(hn);
	if (plain == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a %zu-byte header", hn);
	uint8_t *p = plain;
	for (size_t i = 0; i < w->count; i++) {
		const rix_blob *b = &w->blobs[i];
		int z = b->uncompressed_length != 0;
		*p++ = (uint8_t)(b->type + (z ? 2 : 0));
		rix__put_le32(p, b->length);
		p += 4;
		if (z) {
			rix__put_le32(p, b->uncompressed_length);
			p += 4;
		}
		memcpy(p, b->id.b, RIX_ID_SIZE);
		p += RIX_ID_SIZE;
	}
	size_t sealed = hn + RIX_CRYPTO_OVERHEAD;
	int rc = reserve(w, sealed + 4);
	if (rc == 0)
		rc = rix_crypto_seal(w->key, plain, hn, w->buf + w->len);
	rix_free(plain);
	if (rc != 0)
		return rc;
	rix__put_le32(w->buf + w->len + sealed, (uint32_t)sealed);
	rix_sha256_update(w->sha, w->buf + w->len, sealed + 4);
	w->len += sealed + 4;
	rc = flush(w);
	if (rc != 0)
		return rc;
	rix_sha256_final(pack_id, w->sha);
	w->file_size = w->size + sealed + 4;
	w->finished = 1;
	/* The write buffer is not needed any more: a finished pack may wait long for its upload. */
	rix_free(w->buf);
	w->buf = NULL;
	w->cap = 0;
	return 0;
}

uint64_t rix_pack_writer_file_size(const rix_pack_writer *w)
{
	return w->file_size;
}

int rix_pack_writer_fd(const rix_pack_writer *w)
{
	return w->fd;
}

const char *rix_pack_writer_path(const rix_pack_writer *w)
{
	return w->path;
}

/* fsync of the directory holding path. */
static int sync_dir_of(const char *path)
{
	size_t n = strlen(path) + 1;
	char *copy = rix_malloc(n);
	if (copy == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory");
	memcpy(copy, path, n);
	const char *dir = dirname(copy);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	if (fd < 0 || fsync(fd) != 0)
		rc = io_error("cannot sync directory", dir, errno);
	if (fd >= 0)
		close(fd);
	rix_free(copy);
	return rc;
}

int rix_pack_writer_rename(rix_pack_writer *w, const char *path, bool sync)
{
	if (!w->finished || w->failed)
		return rix_error_set(RIX_EINVAL, "pack: %s is not finished", w->path);
	if (!w->owned)
		return rix_error_set(RIX_EINVAL, "pack: %s was already renamed", w->path);
	if (sync && fsync(w->fd) != 0)
		return io_error("cannot sync", w->path, errno);
	/* A synced pack's pages are clean and nobody rereads them soon: hand them back now, so that
	 * the next pack's writes reuse them instead of drawing new pages into the cache (which cost a
	 * page fault each in a VM that returns free memory to its host: 15% of a first backup's
	 * CPU time on this project's machines). Advisory; a failure changes nothing. */
	if (sync)
		(void)posix_fadvise(w->fd, 0, 0, POSIX_FADV_DONTNEED);
	size_t n = strlen(path) + 1;
	char *np = rix_malloc(n);
	if (np == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory");
	memcpy(np, path, n);
	if (rename(w->path, np) != 0) {
		int rc = io_error("cannot rename to", np, errno);
		rix_free(np);
		return rc;
	}
	rix_free(w->path);
	w->path = np;
	w->owned = 0;
	return sync ? sync_dir_of(np) : 0;
}

void rix_pack_writer_disown(rix_pack_writer *w)
{
	w->owned = 0;
}
