/*
 * backup/repair_index.c — rix_repair_index: a new index built from the packs, as restic 0.14's
 * rebuild-index (cmd_rebuild_index.go) decides it. See rix/repair.h for what it does.
 *
 *   old index entries ─> entries[] {pack number, blob}, sorted by (pack, offset, ...), exact
 *                        duplicates dropped; pack k's are entries[first .. first + n)
 *   listed packs      ─> packs[] sorted by ID: size listed, size the entries imply, what to do
 *   packs to read     ─> workers take the next one (a counter under the mutex), read its header
 *   writer            ─> every pack in ID order: its kept entries or its header
 *
 * Messages go out from the calling thread only, in pack order: the workers count progress and
 * keep what they found (a header, or why there is none) in their pack.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/pack.h"
#include "rix/repair.h"
#include "rix/repo.h"
#include "../common/pool.h"

/* restic's pack.Size: the header's length field and its crypto overhead. */
#define PACK_HEADER_OVERHEAD (4u + 32u)

enum pack_state {
	PACK_KEEP,       /* the old index's entries are right */
	PACK_READ,       /* its header is to be read */
	PACK_UNREADABLE, /* it could not be: left out */
};

struct pack {
	rix_id id;
	uint64_t size;       /* listed */
	uint64_t index_size; /* implied by the old index's entries (when n > 0) */
	size_t first, n;     /* its old entries */
	enum pack_state state;
	rix_blob *hdr; /* PACK_READ, once read: its header (*nhdr blobs) */
	size_t nhdr;
	char *why; /* PACK_UNREADABLE: the error */
};

struct entry {
	uint32_t pack; /* index into packs[] */
	rix_blob b;
};

struct repair {
	rix_repo *r;
	const rix_repair_options *o;
	rix_repair_report *rep;
	struct pack *packs;
	size_t npacks, packs_cap;
	struct entry *e;
	size_t ne, e_cap;
	rix_id *missing; /* packs of old entries that are not listed (repeated) */
	size_t nmissing, missing_cap;
	/* reading headers */
	pthread_mutex_t mu;
	size_t next, done, to_read;
	int fatal;
	char fatal_msg[512];
};

static void say(struct repair *c, rix_repair_msg_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(struct repair *c, rix_repair_msg_kind kind, const char *fmt, ...)
{
	if (c->o->msg == NULL)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	c->o->msg(c->o->payload, kind, line);
}

/* Grows *v (of *cap elements of size sz) to hold one more than n. 0 or RIX_ENOMEM. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 256;
	void *p = rix_realloc(*v, c * sz);
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "repair index: out of memory");
	*v = p;
	*cap = c;
	return 0;
}

static int add_pack(void *arg, const char *name, uint64_t size)
{
	struct repair *c = arg;
	rix_id id;
	if (rix_id_from_hex(&id, name, strlen(name)) != 0)
		return 0; /* not a pack (restic passes over such names too) */
	if (grow((void **)&c->packs, &c->packs_cap, c->npacks, sizeof(*c->packs)) != 0)
		return RIX_ENOMEM;
	c->packs[c->npacks++] = (struct pack){ .id = id, .size = size };
	return 0;
}

static int cmp_pack(const void *a, const void *b)
{
	return memcmp(((const struct pack *)a)->id.b, ((const struct pack *)b)->id.b, RIX_ID_SIZE);
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, RIX_ID_SIZE);
}

static int add_entry(void *arg, const rix_packed_blob *pb)
{
	struct repair *c = arg;
	struct pack key = { .id = pb->pack_id };
	struct pack *p = c->npacks ? bsearch(&key, c->packs, c->npacks, sizeof(key), cmp_pack) : NULL;
	if (p == NULL) {
		if (grow((void **)&c->missing, &c->missing_cap, c->nmissing, sizeof(*c->missing)) != 0)
			return RIX_ENOMEM;
		c->missing[c->nmissing++] = pb->pack_id;
		return 0;
	}
	if (grow((void **)&c->e, &c->e_cap, c->ne, sizeof(*c->e)) != 0)
		return RIX_ENOMEM;
	c->e[c->ne++] = (struct entry){ .pack = (uint32_t)(p - c->packs), .b = rix_blob_in_pack(pb) };
	return 0;
}

/* By pack, then offset; the rest only so that exact duplicates sit side by side. */
static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->pack != y->pack)
		return x->pack < y->pack ? -1 : 1;
	if (x->b.offset != y->b.offset)
		return x->b.offset < y->b.offset ? -1 : 1;
	if (x->b.type != y->b.type)
		return (int)x->b.type - (int)y->b.type;
	int k = memcmp(x->b.id.b, y->b.id.b, RIX_ID_SIZE);
	if (k != 0)
		return k;
	if (x->b.length != y->b.length)
		return x->b.length < y->b.length ? -1 : 1;
	if (x->b.uncompressed_length != y->b.uncompressed_length)
		return x->b.uncompressed_length < y->b.uncompressed_length ? -1 : 1;
	return 0;
}

static void index_error(void *arg, const char *name, int code, const char *msg)
{
	struct repair *c = arg;
	if (code == RIX_EIO || code == RIX_ENOMEM) /* not the file's fault: the load stops and returns it */
		return;
	c->rep->invalid_index_files++;
	say(c, RIX_REPAIR_NOTICE, "removing invalid index %s: %s", name, msg);
}

/*
 * The old index's entries by pack: loaded, kept for listed packs (the others are missing),
 * sorted, exact duplicates dropped, and each pack's share and implied size.
 */
static int old_entries(struct repair *c)
{
	int rc = rix_master_index_foreach(rix_repo_master_index(c->r), add_entry, c);
	if (rc != 0)
		return rc;
	if (c->ne > 1)
		qsort(c->e, c->ne, sizeof(*c->e), cmp_entry);
	size_t n = 0;
	for (size_t i = 0; i < c->ne; i++)
		if (n == 0 || cmp_entry(&c->e[n - 1], &c->e[i]) != 0)
			c->e[n++] = c->e[i];
	c->ne = n;
	for (size_t i = 0; i < c->ne; i++) {
		struct pack *p = &c->packs[c->e[i].pack];
		if (p->n == 0) {
			p->first = i;
			p->index_size = PACK_HEADER_OVERHEAD;
		}
		p->n++;
		p->index_size += (uint64_t)c->e[i].b.length +
				 (c->e[i].b.uncompressed_length != 0 ? RIX_PACK_ENTRY_SIZE_ZSTD : RIX_PACK_ENTRY_SIZE);
	}
	return 0;
}

/* Whether a header that failed to read with rc is the pack's fault (else the repair stops). */
static bool pack_fault(int rc)
{
	return rc == RIX_ECORRUPT || rc == RIX_EAUTH || rc == RIX_ENOTFOUND;
}

static void *read_worker(void *arg)
{
	struct repair *c = arg;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		size_t k = c->npacks;
		while (c->fatal == 0 && c->next < c->npacks) {
			size_t i = c->next++;
			if (c->packs[i].state == PACK_READ) {
				k = i;
				break;
			}
		}
		pthread_mutex_unlock(&c->mu);
		if (k == c->npacks)
			break;
		struct pack *p = &c->packs[k];
		char why[512] = "";
		int rc = rix_lock_check(c->o->lock);
		if (rc == 0) {
			rc = rix_repo_read_pack_header_sized(&p->hdr, &p->nhdr, c->r, &p->id, p->size);
			if (rc != 0)
				snprintf(why, sizeof(why), "%s", rix_error_last());
		} else {
			snprintf(why, sizeof(why), "%s", rix_error_last());
		}
		char *kept = NULL; /* the reason, for the message after the reading */
		if (rc != 0 && pack_fault(rc)) {
			kept = rix_malloc(strlen(why) + 1);
			if (kept != NULL)
				memcpy(kept, why, strlen(why) + 1);
			else
				rc = rix_error_set(RIX_ENOMEM, "repair index: out of memory");
			if (kept == NULL)
				snprintf(why, sizeof(why), "%s", rix_error_last());
		}
		pthread_mutex_lock(&c->mu);
		if (rc == 0) {
			c->rep->packs_read++;
		} else if (pack_fault(rc)) {
			p->state = PACK_UNREADABLE;
			p->why = kept;
			c->rep->unreadable_packs++;
		} else if (c->fatal == 0) {
			c->fatal = rc;
			snprintf(c->fatal_msg, sizeof(c->fatal_msg), "%s", why);
		}
		c->done++;
		if (c->o->progress != NULL && c->fatal == 0)
			c->o->progress(c->o->payload, c->done, c->to_read);
		pthread_mutex_unlock(&c->mu);
	}
	return NULL;
}

/* The new index: every pack in ID order, kept entries or header; then the old files removed. */
static int write_index(struct repair *c, const rix_id *old, size_t nold)
{
	say(c, RIX_REPAIR_STEP, "rebuilding index");
	int rc = rix_lock_check(c->o->lock);
	rix_index_writer *w = NULL;
	rix_blob *buf = NULL;
	size_t buf_cap = 0;
	if (rc == 0)
		rc = rix_index_writer_new(&w, c->r, old, nold);
	for (size_t k = 0; rc == 0 && k < c->npacks; k++) {
		struct pack *p = &c->packs[k];
		const rix_blob *blobs = NULL;
		size_t n = 0;
		if (p->state == PACK_KEEP) {
			if (p->n > buf_cap) {
				rix_blob *b = rix_realloc(buf, p->n * sizeof(*b));
				if (b == NULL) {
					rc = rix_error_set(RIX_ENOMEM, "repair index: out of memory");
					break;
				}
				buf = b;
				buf_cap = p->n;
			}
			for (size_t i = 0; i < p->n; i++)
				buf[i] = c->e[p->first + i].b;
			blobs = buf;
			n = p->n;
		} else if (p->state == PACK_READ) {
			blobs = p->hdr;
			n = p->nhdr;
		}
		if (n == 0) /* unreadable, or a header without blobs: nothing to name */
			continue;
		rc = rix_index_writer_add(w, &p->id, blobs, n);
		if (rc == 0)
			c->rep->blobs += n;
	}
	if (rc == 0)
		rc = rix_lock_check(c->o->lock);
	if (rc == 0)
		rc = rix_index_writer_finish(w);
	size_t nnew = 0;
	const rix_id *fresh = w != NULL ? rix_index_writer_files(&nnew, w) : NULL;
	c->rep->index_files_written = nnew;
	if (rc == 0) {
		say(c, RIX_REPAIR_STEP, "deleting obsolete index files");
		rix_backend *b = rix_repo_backend(c->r);
		for (size_t i = 0; rc == 0 && i < nold; i++) {
			bool written = false; /* never the case (a new file's nonce is random); never removed */
			for (size_t j = 0; j < nnew; j++)
				written |= memcmp(fresh[j].b, old[i].b, RIX_ID_SIZE) == 0;
			if (written)
				continue;
			char name[65];
			rix_id_to_hex(name, &old[i]);
			rc = rix_lock_check(c->o->lock);
			if (rc == 0)
				rc = rix_backend_remove(b, RIX_FILE_INDEX, name);
			if (rc == RIX_ENOTFOUND) { /* gone already: what was wanted */
				rc = 0;
				continue;
			}
			if (rc != 0)
				rix_error_set(rc, "repair index: index file %s could not be removed (the new index is "
					      "complete; the old files left are harmless): %s", name, rix_error_last());
			else
				c->rep->index_files_removed++;
		}
	}
	rix_free(buf);
	rix_index_writer_free(w);
	return rc;
}

static int repair(struct repair *c)
{
	const rix_repair_options *o = c->o;
	rix_repair_report *rep = c->rep;
	rix_id *old = NULL;
	size_t nold = 0;
	int rc = rix_lock_check(o->lock);
	if (rc == 0)
		rc = rix_repo_list_ids(&old, &nold, c->r, RIX_FILE_INDEX);
	if (rc != 0)
		return rc;
	rep->index_files = nold;
	if (!o->read_all_packs) {
		say(c, RIX_REPAIR_STEP, "loading indexes...");
		rc = rix_repo_load_index_files(NULL, c->r, index_error, c); /* every file: not the cache */
	}
	if (rc == 0) {
		say(c, RIX_REPAIR_STEP, "getting pack files to read...");
		rc = rix_backend_list(rix_repo_backend(c->r), RIX_FILE_PACK, add_pack, c);
	}
	if (rc == 0 && c->npacks > 1)
		qsort(c->packs, c->npacks, sizeof(*c->packs), cmp_pack);
	rep->packs = c->npacks;
	if (rc == 0 && !o->read_all_packs)
		rc = old_entries(c);
	if (rc != 0)
		goto out;
	/* What to do with each pack. */
	char hex[65];
	for (size_t k = 0; k < c->npacks; k++) {
		struct pack *p = &c->packs[k];
		rix_id_to_hex(hex, &p->id);
		if (p->n > 0 && p->index_size == p->size) {
			p->state = PACK_KEEP;
			rep->packs_from_index++;
			continue;
		}
		p->state = PACK_READ;
		c->to_read++;
		if (p->n == 0) {
			rep->packs_added++;
			say(c, RIX_REPAIR_NOTICE, "adding pack file to index %s", hex);
		} else {
			rep->packs_resized++;
			say(c, RIX_REPAIR_NOTICE, "reindexing pack file %s with unexpected size %llu instead of %llu", hex,
			    (unsigned long long)p->size, (unsigned long long)p->index_size);
		}
	}
	if (c->nmissing > 1)
		qsort(c->missing, c->nmissing, sizeof(*c->missing), cmp_id);
	for (size_t i = 0; i < c->nmissing; i++) {
		if (i > 0 && memcmp(c->missing[i].b, c->missing[i - 1].b, RIX_ID_SIZE) == 0)
			continue;
		rep->missing_packs++;
		rix_id_to_hex(hex, &c->missing[i]);
		say(c, RIX_REPAIR_NOTICE, "removing not found pack file %s", hex);
	}
	/* The headers, by a pool of workers (the calling thread is one). */
	if (c->to_read > 0) {
		say(c, RIX_REPAIR_STEP, "reading pack files");
		unsigned max = c->to_read < 64 ? (unsigned)c->to_read : 64;
		rix__pool_run(rix__pool_size(rix_repo_workers(c->r), max), read_worker, c);
		if (c->fatal != 0) {
			rc = rix_error_set(c->fatal, "repair index stopped, nothing written: %s", c->fatal_msg);
			goto out;
		}
		for (size_t k = 0; k < c->npacks; k++) {
			if (c->packs[k].state != PACK_UNREADABLE)
				continue;
			rix_id_to_hex(hex, &c->packs[k].id);
			say(c, RIX_REPAIR_NOTICE, "skipped incomplete pack file: %s: %s", hex, c->packs[k].why);
		}
	}
	rc = write_index(c, old, nold);
out:
	rix_free(old);
	return rc;
}

int rix_repair_index(rix_repair_report *rep_out, rix_repo *r, const rix_repair_options *opt)
{
	rix_repair_options o = RIX_REPAIR_OPTIONS_INIT;
	if (opt != NULL && opt->version != RIX_REPAIR_OPTIONS_VERSION)
		return rix_error_set(RIX_EINVAL, "repair index: options of version %u, this librix knows %u "
				     "(start from RIX_REPAIR_OPTIONS_INIT)", opt->version, RIX_REPAIR_OPTIONS_VERSION);
	if (opt != NULL)
		o = *opt;
	rix_repair_report rep = { 0 };
	struct repair c = { .r = r, .o = &o, .rep = &rep };
	pthread_mutex_init(&c.mu, NULL);
	int rc = repair(&c);
	for (size_t k = 0; k < c.npacks; k++) {
		rix_free(c.packs[k].hdr);
		rix_free(c.packs[k].why);
	}
	rix_free(c.packs);
	rix_free(c.e);
	rix_free(c.missing);
	pthread_mutex_destroy(&c.mu);
	if (rep_out != NULL)
		*rep_out = rep;
	return rc;
}
