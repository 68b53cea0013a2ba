/*
 * pack/packer.c — the packer manager: many blobs, from many threads, into packs of a target size.
 *
 *   idle[DATA]: [w][w]      add(t): pop an idle writer of type t (or make one) under the lock,
 *   idle[TREE]: [w]                 append outside the lock (encode, seal, hash, write; a
 *                                   stored blob's bytes as they are: hash, write),
 *                                   then push it back, or finish it and hand it to done
 *                                   when it reached the target
 *
 * Invariants:
 * - A writer is in exactly one place: an idle list, or the hands of the one thread adding to
 *   it, or (finished) done's. So threads never share a writer, and the number of open packs of
 *   a type is at most the number of threads that added at once.
 * - Only list operations and counters happen under the mutex; encoding and I/O never do.
 * - A blob of target size or more bypasses the lists: a pack of its own, finished at once.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/pack.h"

struct rix_packer {
	const rix_key *key; /* borrowed */
	int version;
	char *tmpdir;
	uint64_t target;
	rix_packer_done_fn done;
	rix_packer_discard_fn discard;
	void *arg;
	pthread_mutex_t mu;
	rix_pack_writer *idle[RIX_BLOB_TYPES][64]; /* a stack per type */
	size_t nidle[RIX_BLOB_TYPES];
	size_t open; /* writers made and not yet handed on or discarded */
	uint64_t packs_done;
};

int rix_packer_new(rix_packer **out, const rix_key *key, int repo_version, const char *tmpdir,
		   uint64_t target_size, rix_packer_done_fn done, void *arg)
{
	*out = NULL;
	if (repo_version != 1 && repo_version != 2)
		return rix_error_set(RIX_EINVAL, "packer: repository version %d", repo_version);
	if (target_size == 0)
		target_size = RIX_PACK_TARGET_DEFAULT;
	if (target_size < RIX_PACK_TARGET_MIN || target_size > RIX_PACK_TARGET_MAX)
		return rix_error_set(RIX_EINVAL, "packer: target size %llu is outside 4-128 MiB",
				     (unsigned long long)target_size);
	rix_packer *p = rix_calloc(1, sizeof(*p));
	size_t n = strlen(tmpdir) + 1;
	if (p == NULL || (p->tmpdir = rix_malloc(n)) == NULL) {
		rix_free(p);
		return rix_error_set(RIX_ENOMEM, "packer: out of memory");
	}
	memcpy(p->tmpdir, tmpdir, n);
	p->key = key;
	p->version = repo_version;
	p->target = target_size;
	p->done = done;
	p->arg = arg;
	pthread_mutex_init(&p->mu, NULL);
	*out = p;
	return 0;
}

void rix_packer_free(rix_packer *p)
{
	if (p == NULL)
		return;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		for (size_t i = 0; i < p->nidle[t]; i++)
			rix_pack_writer_free(p->idle[t][i]);
	pthread_mutex_destroy(&p->mu);
	rix_free(p->tmpdir);
	rix_free(p);
}

/* An idle writer of type t, or a new one. */
static int take(rix_packer *p, rix_blob_type t, rix_pack_writer **w)
{
	pthread_mutex_lock(&p->mu);
	*w = p->nidle[t] > 0 ? p->idle[t][--p->nidle[t]] : NULL;
	if (*w == NULL)
		p->open++;
	pthread_mutex_unlock(&p->mu);
	if (*w != NULL)
		return 0;
	int rc = rix_pack_writer_new(w, p->key, p->version, p->tmpdir);
	if (rc != 0) {
		pthread_mutex_lock(&p->mu);
		p->open--;
		pthread_mutex_unlock(&p->mu);
	}
	return rc;
}

void rix_packer_set_discard(rix_packer *p, rix_packer_discard_fn fn)
{
	p->discard = fn;
}

/* Drops a writer that failed (its temporary file goes with it). */
static void discard(rix_packer *p, rix_pack_writer *w)
{
	if (p->discard != NULL && rix_pack_writer_count(w) > 0)
		p->discard(p->arg, rix_pack_writer_blobs(w), rix_pack_writer_count(w));
	rix_pack_writer_free(w);
	pthread_mutex_lock(&p->mu);
	p->open--;
	pthread_mutex_unlock(&p->mu);
}

/*
 * After an error on w: a writer whose file failed is discarded with its blobs; any other stays
 * open (back on the idle list) with everything it holds.
 */
static void after_error(rix_packer *p, rix_blob_type t, rix_pack_writer *w)
{
	if (rix_pack_writer_failed(w) || rix_pack_writer_count(w) == 0) {
		discard(p, w);
		return;
	}
	pthread_mutex_lock(&p->mu);
	int room = p->nidle[t] < sizeof(p->idle[t]) / sizeof(p->idle[t][0]);
	if (room)
		p->idle[t][p->nidle[t]++] = w;
	pthread_mutex_unlock(&p->mu);
	if (!room) { /* more open packs than the list holds (over 64 threads): it cannot wait */
		int code = rix_error_last_code();
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		discard(p, w);
		rix_error_set(code, "%s", msg);
	}
}

/* Finishes w and hands it to done. */
static int hand_on(rix_packer *p, rix_pack_writer *w)
{
	rix_id id;
	int rc = rix_pack_writer_finish(&id, w);
	if (rc != 0) {
		const rix_blob *b = rix_pack_writer_blobs(w);
		after_error(p, b != NULL ? b[0].type : RIX_BLOB_DATA, w);
		return rc;
	}
	pthread_mutex_lock(&p->mu);
	p->open--;
	p->packs_done++;
	pthread_mutex_unlock(&p->mu);
	return p->done(p->arg, w, &id);
}

/* Gives w back to the idle list; when the list is full, finishes it instead. */
static int give_back(rix_packer *p, rix_blob_type t, rix_pack_writer *w)
{
	pthread_mutex_lock(&p->mu);
	int room = p->nidle[t] < sizeof(p->idle[t]) / sizeof(p->idle[t][0]);
	if (room)
		p->idle[t][p->nidle[t]++] = w;
	pthread_mutex_unlock(&p->mu);
	return room ? 0 : hand_on(p, w);
}

/* The stored length of the blob just added to w (its last entry); w is this thread's. */
static uint32_t last_length(const rix_pack_writer *w)
{
	return rix_pack_writer_blobs(w)[rix_pack_writer_count(w) - 1].length;
}

/* One blob to append: plain[0..n) encoded with c, or (b != NULL) b's stored form as it is. */
struct item {
	rix_blob_codec *c;
	rix_blob_type t;
	const rix_id *id;
	const void *plain;
	size_t n;
	const rix_blob *b;
	const uint8_t *stored;
};

static int append(rix_pack_writer *w, const struct item *it)
{
	if (it->b != NULL)
		return rix_pack_writer_add_stored(w, it->b, it->stored);
	return rix_pack_writer_add(w, it->c, it->t, it->id, it->plain, it->n);
}

/* rix_packer_add and _add_stored: size is what decides whether the blob gets a pack of its own. */
static int add(uint32_t *stored_len, rix_packer *p, const struct item *it, uint64_t size)
{
	if (stored_len != NULL)
		*stored_len = 0;
	rix_blob_type t = it->t;
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "packer: blob type %d", (int)t);
	rix_pack_writer *w;
	if (size >= p->target) { /* a pack of its own */
		int rc = rix_pack_writer_new(&w, p->key, p->version, p->tmpdir);
		if (rc != 0)
			return rc;
		pthread_mutex_lock(&p->mu);
		p->open++;
		pthread_mutex_unlock(&p->mu);
		rc = append(w, it);
		if (rc != 0) {
			discard(p, w); /* empty, or failed */
			return rc;
		}
		uint32_t len = last_length(w);
		rc = hand_on(p, w);
		if (rc == 0 && stored_len != NULL)
			*stored_len = len;
		return rc;
	}
	int rc = take(p, t, &w);
	if (rc != 0)
		return rc;
	rc = append(w, it);
	if (rc == RIX_ELIMIT) { /* the pack is full by count: finish it, go on in a new one */
		rc = hand_on(p, w);
		if (rc != 0)
			return rc;
		rc = take(p, t, &w);
		if (rc != 0)
			return rc;
		rc = append(w, it);
	}
	if (rc != 0) {
		after_error(p, t, w);
		return rc;
	}
	uint32_t len = last_length(w);
	rc = rix_pack_writer_size(w) >= p->target ? hand_on(p, w) : give_back(p, t, w);
	if (rc == 0 && stored_len != NULL)
		*stored_len = len;
	return rc;
}

int rix_packer_add(uint32_t *stored_len, rix_packer *p, rix_blob_codec *c, rix_blob_type t, const rix_id *id,
		   const void *plain, size_t n)
{
	struct item it = { .c = c, .t = t, .id = id, .plain = plain, .n = n };
	return add(stored_len, p, &it, n);
}

int rix_packer_add_stored(rix_packer *p, const rix_blob *b, const uint8_t *stored)
{
	struct item it = { .t = b->type, .id = &b->id, .b = b, .stored = stored };
	return add(NULL, p, &it, b->length);
}

int rix_packer_flush(rix_packer *p)
{
	int first = 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		/* Take the whole list first: a pack that fails to finish goes back to it and waits for
		 * the next flush, instead of being tried again here. */
		rix_pack_writer *ws[sizeof(p->idle[0]) / sizeof(p->idle[0][0])];
		pthread_mutex_lock(&p->mu);
		size_t n = p->nidle[t];
		memcpy(ws, p->idle[t], n * sizeof(ws[0]));
		p->nidle[t] = 0;
		pthread_mutex_unlock(&p->mu);
		for (size_t i = 0; i < n; i++) {
			int rc = 0;
			if (rix_pack_writer_count(ws[i]) == 0)
				discard(p, ws[i]);
			else
				rc = hand_on(p, ws[i]);
			if (rc != 0 && first == 0)
				first = rc;
		}
	}
	return first;
}

uint64_t rix_packer_packs_done(rix_packer *p)
{
	pthread_mutex_lock(&p->mu);
	uint64_t n = p->packs_done;
	pthread_mutex_unlock(&p->mu);
	return n;
}

size_t rix_packer_open_count(rix_packer *p)
{
	pthread_mutex_lock(&p->mu);
	size_t n = p->open;
	pthread_mutex_unlock(&p->mu);
	return n;
}
