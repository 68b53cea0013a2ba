/*
 * index/recent.c — the blobs stored since the repository was opened: pending set, their
 * locations and the packs not yet named by an index file, in one table (recent.h).
 *
 *   tab ──> rtable: cap slots (power of two), linear probing from hash(type, id)
 *           +--------------------------------------------------------------+
 *           | id[32] | pack | offset | length | ulen | state (atomic)       |  52 bytes
 *           +--------------------------------------------------------------+
 *           state = type << 2 | EMPTY 0 | PENDING 1 | STORED 2 | DEAD 3
 *
 *   chunks[] ──> chunk k: pack IDs k * 4096 .. k * 4096 + 4095   (never moved once made)
 *   packs [0, indexed_upto) are named by an index file; [indexed_upto, npacks) are not yet,
 *   and log lists their entries (pack, slot) in pack order, so the next index file is made
 *   without scanning the table
 *
 * Why one table: a blob saved is first pending (so that two threads never store it twice),
 * then stored with its location (so that later saves deduplicate against it and loads find
 * it), and its pack must go into an index file. Keeping the three in one entry means one copy
 * of each recent blob, where a separate pending set, the master's own index and the index file
 * being built held up to three.
 *
 * Readers take no lock. An entry is written in this order: id and location first, then its
 * state with a release store; a reader loads the state with acquire and reads the rest only
 * when it says PENDING or STORED, so it never sees a half-written entry. A stored entry's
 * fields never change again. A pending entry that is given up becomes DEAD (a tombstone, never
 * reused for another ID in the same table, so a reader comparing an ID cannot see it change
 * under it); growth drops the tombstones. Growth builds a new table under the mutex, publishes
 * it, waits for the readers of the old one (rix__rcu_synchronize) and frees it. A reader on the
 * old table may miss what was stored meanwhile: it answers as it would have a moment earlier.
 * Pack IDs live in chunks that never move, and a pack's ID is written before any entry points
 * to it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "hash.h"
#include "rcu.h"
#include "recent.h"

enum { EMPTY = 0, PENDING = 1, STORED = 2, DEAD = 3 };
#define CHUNK ((uint32_t)1 << RIX__RECENT_PACK_CHUNK_BITS)
#define MIN_CAP 1024u
/* The table grows when used slots (tombstones included) would pass 3/4 of it. */
#define MAX_USED(cap) ((cap) / 4 * 3)

struct rentry {
	rix_id id;
	uint32_t pack, offset, length, ulen;
	atomic_uint state;
};

struct rtable {
	uint32_t cap; /* power of two */
	struct rentry e[];
};

struct picked {
	uint32_t pack, slot;
};

static int cmp_picked(const void *a, const void *b)
{
	const struct picked *x = a, *y = b;
	return x->pack != y->pack ? (x->pack < y->pack ? -1 : 1) : (x->slot > y->slot) - (x->slot < y->slot);
}

struct rix__recent {
	struct rix__recent_head head;   /* first: npacks, read inline by rix__recent_find */
	pthread_mutex_t mu;
	uint64_t seed;
	_Atomic(struct rtable *) tab;
	uint32_t used;                  /* non-empty slots, tombstones included (mu) */
	size_t stored[RIX_BLOB_TYPES];  /* stored entries (mu) */
	_Atomic(rix_id *) *chunks;      /* RIX__RECENT_PACK_CHUNKS pointers, made with the first pack */
	uint32_t indexed_upto;          /* (mu) */
	size_t unindexed;               /* stored blobs in packs >= indexed_upto (mu) */
	uint32_t *pack_blobs;           /* blobs per pack, for unindexed (mu); grows */
	struct picked *log;             /* the unindexed entries, by pack then in pack order (mu) */
	size_t nlog, log_cap;           /* nlog == unindexed */
	uint32_t pack_blobs_cap;
};

static inline uint32_t home(uint64_t seed, rix_blob_type t, const rix_id *id, uint32_t cap)
{
	return (uint32_t)rix__hash_id(id, seed ^ (uint64_t)(t + 1)) & (cap - 1);
}

static inline unsigned st_of(unsigned s)
{
	return s & 3;
}

static struct rtable *table_new(uint32_t cap)
{
	struct rtable *t = rix_calloc(1, sizeof(*t) + (size_t)cap * sizeof(struct rentry));
	if (t != NULL)
		t->cap = cap;
	return t;
}

int rix__recent_new(struct rix__recent **out, uint64_t seed)
{
	*out = NULL;
	struct rix__recent *re = rix_calloc(1, sizeof(*re));
	if (re == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	pthread_mutex_init(&re->mu, NULL);
	re->seed = seed;
	atomic_init(&re->tab, NULL); /* made by the first reserve or store */
	atomic_init(&re->head.npacks, 0);
	*out = re;
	return 0;
}

void rix__recent_free(struct rix__recent *re)
{
	if (re == NULL)
		return;
	rix_free(atomic_load(&re->tab));
	if (re->chunks != NULL) {
		for (size_t k = 0; k < RIX__RECENT_PACK_CHUNKS; k++)
			rix_free(atomic_load(&re->chunks[k]));
		rix_free((void *)re->chunks);
	}
	rix_free(re->pack_blobs);
	rix_free(re->log);
	pthread_mutex_destroy(&re->mu);
	rix_free(re);
}

static inline const rix_id *pack_id_of(const struct rix__recent *re, uint32_t p)
{
	const rix_id *chunk = atomic_load_explicit(&re->chunks[p >> RIX__RECENT_PACK_CHUNK_BITS], memory_order_acquire);
	return &chunk[p & (CHUNK - 1)];
}

static void fill(const struct rix__recent *re, rix_blob_type t, const struct rentry *e, rix_packed_blob *out)
{
	out->id = e->id;
	out->pack_id = *pack_id_of(re, e->pack);
	out->type = t;
	out->offset = e->offset;
	out->length = e->length;
	out->uncompressed_length = e->ulen;
}

/*
 * Walks the probe sequence of (t, id) in tab, calling at each live entry of that ID; stops at
 * an empty slot. Returns the slot of the first entry in state want (PENDING or STORED: any
 * live one when want is 0), or UINT32_MAX.
 */
static uint32_t probe(const struct rix__recent *re, const struct rtable *tab, rix_blob_type t, const rix_id *id,
		      unsigned want)
{
	uint32_t mask = tab->cap - 1;
	unsigned tt = (unsigned)t << 2;
	for (uint32_t s = home(re->seed, t, id, tab->cap);; s = (s + 1) & mask) {
		const struct rentry *e = &tab->e[s];
		unsigned st = atomic_load_explicit(&e->state, memory_order_acquire);
		if (st == EMPTY)
			return UINT32_MAX;
		unsigned k = st_of(st);
		if ((st & ~3u) == tt && k != DEAD && (want == 0 || k == want) && rix__id_eq(&e->id, id))
			return s;
	}
}

int rix__recent_find_stored(const struct rix__recent *re, rix_blob_type t, const rix_id *id, rix_packed_blob *out)
{
	const struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_acquire);
	uint32_t s = probe(re, tab, t, id, STORED);
	if (s == UINT32_MAX)
		return 0;
	if (out != NULL)
		fill(re, t, &tab->e[s], out);
	return 1;
}

size_t rix__recent_find_all(const struct rix__recent *re, rix_blob_type t, const rix_id *id,
			    rix_packed_blob *out, size_t max)
{
	if (atomic_load_explicit(&re->head.npacks, memory_order_acquire) == 0)
		return 0;
	const struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_acquire);
	uint32_t mask = tab->cap - 1;
	unsigned want = (unsigned)t << 2 | STORED;
	size_t n = 0;
	for (uint32_t s = home(re->seed, t, id, tab->cap);; s = (s + 1) & mask) {
		const struct rentry *e = &tab->e[s];
		unsigned st = atomic_load_explicit(&e->state, memory_order_acquire);
		if (st == EMPTY)
			return n;
		if (st == want && rix__id_eq(&e->id, id)) {
			if (out != NULL && n < max)
				fill(re, t, e, &out[n]);
			n++;
		}
	}
}

/* A free slot for (t, id) in tab (mu held; tab not full). */
static struct rentry *free_slot(const struct rix__recent *re, struct rtable *tab, rix_blob_type t, const rix_id *id)
{
	uint32_t mask = tab->cap - 1;
	uint32_t s = home(re->seed, t, id, tab->cap);
	while (atomic_load_explicit(&tab->e[s].state, memory_order_relaxed) != EMPTY)
		s = (s + 1) & mask;
	return &tab->e[s];
}

/*
 * Makes room for extra more entries (mu held): when they would pass 3/4 of the table, a new
 * table at most half full (twice the size or more; the same size when tombstones filled it),
 * without the tombstones.
 */
static int make_room(struct rix__recent *re, size_t extra)
{
	struct rtable *old = atomic_load_explicit(&re->tab, memory_order_relaxed);
	uint32_t oldcap = old != NULL ? old->cap : 0;
	if (old != NULL && (uint64_t)re->used + extra <= MAX_USED(oldcap))
		return 0;
	uint64_t live = extra;
	for (uint32_t i = 0; i < oldcap; i++) {
		unsigned k = st_of(atomic_load_explicit(&old->e[i].state, memory_order_relaxed));
		live += k == PENDING || k == STORED;
	}
	uint64_t cap = oldcap ? oldcap : MIN_CAP;
	while (live * 2 > cap)
		cap *= 2;
	if (cap > ((uint64_t)1 << 31))
		return rix_error_set(RIX_ELIMIT, "master index: more than 2^30 blobs stored in one session");
	struct rtable *tab = table_new((uint32_t)cap);
	if (tab == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %llu recent blobs",
				     (unsigned long long)live);
	uint32_t used = 0;
	for (uint32_t i = 0; i < oldcap; i++) {
		const struct rentry *e = &old->e[i];
		unsigned st = atomic_load_explicit(&e->state, memory_order_relaxed);
		if (st_of(st) != PENDING && st_of(st) != STORED)
			continue;
		struct rentry *d = free_slot(re, tab, (rix_blob_type)(st >> 2), &e->id);
		d->id = e->id;
		d->pack = e->pack;
		d->offset = e->offset;
		d->length = e->length;
		d->ulen = e->ulen;
		atomic_init(&d->state, st);
		used++;
	}
	atomic_store_explicit(&re->tab, tab, memory_order_release);
	re->used = used;
	/* The log names slots: the new table's (their order within a pack is lost: any is fine). */
	size_t k = 0;
	for (uint32_t s = 0; s < tab->cap && k < re->nlog; s++) {
		const struct rentry *e = &tab->e[s];
		if (st_of(atomic_load_explicit(&e->state, memory_order_relaxed)) == STORED && e->pack >= re->indexed_upto)
			re->log[k++] = (struct picked){ e->pack, s };
	}
	if (k > 1)
		qsort(re->log, k, sizeof(*re->log), cmp_picked);
	if (old != NULL) {
		rix__rcu_synchronize(); /* no reader is left on the old table */
		rix_free(old);
	}
	return 0;
}

int rix__recent_reserve(struct rix__recent *re, rix_blob_type t, const rix_id *id)
{
	pthread_mutex_lock(&re->mu);
	struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
	int rc = 0;
	if (tab == NULL || probe(re, tab, t, id, 0) == UINT32_MAX) {
		rc = make_room(re, 1);
		if (rc == 0) {
			tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
			struct rentry *e = free_slot(re, tab, t, id);
			e->id = *id;
			atomic_store_explicit(&e->state, (unsigned)t << 2 | PENDING, memory_order_release);
			re->used++;
			rc = 1;
		}
	}
	pthread_mutex_unlock(&re->mu);
	return rc;
}

void rix__recent_unreserve(struct rix__recent *re, rix_blob_type t, const rix_id *id)
{
	pthread_mutex_lock(&re->mu);
	struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
	uint32_t s = tab != NULL ? probe(re, tab, t, id, PENDING) : UINT32_MAX;
	if (s != UINT32_MAX)
		atomic_store_explicit(&tab->e[s].state, (unsigned)t << 2 | DEAD, memory_order_release);
	pthread_mutex_unlock(&re->mu);
}

/* Pack number for pack_id (mu held): a new one, its ID written before anyone can see it. */
static int new_pack(struct rix__recent *re, const rix_id *pack_id, uint32_t nblobs, uint32_t *num)
{
	uint32_t p = atomic_load_explicit(&re->head.npacks, memory_order_relaxed);
	if ((size_t)p >= RIX__RECENT_MAX_PACKS)
		return rix_error_set(RIX_ELIMIT, "master index: more than %zu packs stored in one session",
				     (size_t)RIX__RECENT_MAX_PACKS);
	if (re->chunks == NULL) {
		re->chunks = rix_calloc(RIX__RECENT_PACK_CHUNKS, sizeof(*re->chunks));
		if (re->chunks == NULL)
			return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	}
	if (p >= re->pack_blobs_cap) {
		uint32_t cap = re->pack_blobs_cap ? re->pack_blobs_cap * 2 : 1024;
		uint32_t *v = rix_realloc(re->pack_blobs, (size_t)cap * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "master index: out of memory");
		re->pack_blobs = v;
		re->pack_blobs_cap = cap;
	}
	_Atomic(rix_id *) *slot = &re->chunks[p >> RIX__RECENT_PACK_CHUNK_BITS];
	rix_id *chunk = atomic_load_explicit(slot, memory_order_relaxed);
	if (chunk == NULL) {
		chunk = rix_malloc(CHUNK * sizeof(rix_id));
		if (chunk == NULL)
			return rix_error_set(RIX_ENOMEM, "master index: out of memory");
		atomic_store_explicit(slot, chunk, memory_order_release);
	}
	chunk[p & (CHUNK - 1)] = *pack_id;
	re->pack_blobs[p] = nblobs;
	*num = p;
	return 0;
}

int rix__recent_store_pack(struct rix__recent *re, const rix_id *pack_id, const rix_blob *blobs, size_t n)
{
	if (n > UINT32_MAX)
		return rix_error_set(RIX_ELIMIT, "master index: %zu blobs in one pack", n);
	for (size_t i = 0; i < n; i++)
		if ((unsigned)blobs[i].type >= RIX_BLOB_TYPES)
			return rix_error_set(RIX_EINVAL, "master index: blob type %d", (int)blobs[i].type);
	pthread_mutex_lock(&re->mu);
	/* Room for every blob and the pack's number first: then nothing below can fail, and the
	 * pack goes in whole or not at all. */
	uint32_t p = 0;
	int rc = make_room(re, n);
	if (rc == 0 && re->nlog + n > re->log_cap) {
		size_t cap = re->log_cap ? re->log_cap : 1024;
		while (cap < re->nlog + n)
			cap *= 2;
		struct picked *v = rix_realloc(re->log, cap * sizeof(*v));
		if (v == NULL)
			rc = rix_error_set(RIX_ENOMEM, "master index: out of memory");
		else
			re->log = v, re->log_cap = cap;
	}
	if (rc == 0)
		rc = new_pack(re, pack_id, (uint32_t)n, &p);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const rix_blob *b = &blobs[i];
		struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
		uint32_t s = probe(re, tab, b->type, &b->id, PENDING);
		struct rentry *e = s != UINT32_MAX ? &tab->e[s] : free_slot(re, tab, b->type, &b->id);
		if (s == UINT32_MAX) {
			e->id = b->id;
			re->used++;
		}
		e->pack = p;
		e->offset = b->offset;
		e->length = b->length;
		e->ulen = b->uncompressed_length;
		atomic_store_explicit(&e->state, (unsigned)b->type << 2 | STORED, memory_order_release);
		re->stored[b->type]++;
		re->unindexed++;
		re->log[re->nlog++] = (struct picked){ p, (uint32_t)(e - tab->e) };
	}
	if (rc == 0)
		atomic_store_explicit(&re->head.npacks, p + 1, memory_order_release);
	pthread_mutex_unlock(&re->mu);
	return rc;
}

size_t rix__recent_unindexed(struct rix__recent *re)
{
	pthread_mutex_lock(&re->mu);
	size_t n = re->unindexed;
	pthread_mutex_unlock(&re->mu);
	return n;
}

int rix__recent_take_unindexed(struct rix__recent *re, rix_index **out, uint32_t *upto)
{
	*out = NULL;
	pthread_mutex_lock(&re->mu);
	uint32_t lo = re->indexed_upto, hi = atomic_load_explicit(&re->head.npacks, memory_order_relaxed);
	*upto = hi;
	int rc = 0;
	rix_blob *bl = NULL;
	rix_index *idx = NULL;
	if (lo == hi)
		goto out;
	if ((rc = rix_index_new(&idx)) != 0)
		goto out;
	/* The log holds exactly the stored entries of packs lo..hi, by pack: no scan of the table. */
	const struct picked *v = re->log;
	size_t k = re->nlog;
	const struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
	uint32_t most = 0;
	for (uint32_t p = lo; p < hi; p++)
		most = re->pack_blobs[p] > most ? re->pack_blobs[p] : most;
	bl = rix_malloc((most ? most : 1) * sizeof(*bl));
	if (bl == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory for an index file");
		goto out;
	}
	for (size_t i = 0; rc == 0 && i < k;) {
		uint32_t p = v[i].pack;
		size_t m = 0;
		for (; i < k && v[i].pack == p && m < most; i++) {
			const struct rentry *e = &tab->e[v[i].slot];
			bl[m++] = (rix_blob){ .id = e->id,
					      .type = (rix_blob_type)(atomic_load_explicit(&e->state, memory_order_relaxed) >> 2),
					      .offset = e->offset,
					      .length = e->length,
					      .uncompressed_length = e->ulen };
		}
		rc = rix_index_store_pack(idx, pack_id_of(re, p), bl, m);
	}
out:
	pthread_mutex_unlock(&re->mu);
	rix_free(bl);
	if (rc != 0) {
		rix_index_free(idx);
		idx = NULL;
	}
	*out = idx;
	return rc;
}

void rix__recent_mark_indexed(struct rix__recent *re, uint32_t upto)
{
	pthread_mutex_lock(&re->mu);
	size_t drop = 0;
	for (uint32_t p = re->indexed_upto; p < upto; p++) {
		re->unindexed -= re->pack_blobs[p];
		drop += re->pack_blobs[p];
	}
	/* Those packs' entries lead the log (it is by pack). */
	if (drop > 0 && re->nlog > drop)
		memmove(re->log, re->log + drop, (re->nlog - drop) * sizeof(*re->log));
	re->nlog -= drop;
	if (upto > re->indexed_upto)
		re->indexed_upto = upto;
	pthread_mutex_unlock(&re->mu);
}

size_t rix__recent_count(struct rix__recent *re, rix_blob_type t)
{
	pthread_mutex_lock(&re->mu);
	size_t n = re->stored[t];
	pthread_mutex_unlock(&re->mu);
	return n;
}

size_t rix__recent_pack_count(struct rix__recent *re)
{
	return atomic_load(&re->head.npacks);
}

size_t rix__recent_memory(struct rix__recent *re)
{
	pthread_mutex_lock(&re->mu);
	const struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
	size_t m = sizeof(*re) + (tab != NULL ? sizeof(*tab) + (size_t)tab->cap * sizeof(struct rentry) : 0) +
		   (size_t)re->pack_blobs_cap * sizeof(uint32_t);
	if (re->chunks != NULL) {
		m += RIX__RECENT_PACK_CHUNKS * sizeof(*re->chunks);
		size_t np = atomic_load_explicit(&re->head.npacks, memory_order_relaxed);
		m += ((np + CHUNK - 1) / CHUNK) * CHUNK * sizeof(rix_id);
	}
	pthread_mutex_unlock(&re->mu);
	return m;
}

int rix__recent_foreach(struct rix__recent *re, rix_index_blob_fn fn, void *arg)
{
	pthread_mutex_lock(&re->mu);
	const struct rtable *tab = atomic_load_explicit(&re->tab, memory_order_relaxed);
	int r = 0;
	for (uint32_t s = 0; r == 0 && tab != NULL && s < tab->cap; s++) {
		unsigned st = atomic_load_explicit(&tab->e[s].state, memory_order_relaxed);
		if (st_of(st) != STORED)
			continue;
		rix_packed_blob pb;
		fill(re, (rix_blob_type)(st >> 2), &tab->e[s], &pb);
		r = fn(arg, &pb);
	}
	pthread_mutex_unlock(&re->mu);
	return r;
}

int rix__recent_packs(struct rix__recent *re, rix_id **v, size_t *n, size_t *cap)
{
	size_t np = atomic_load(&re->head.npacks);
	if (*n + np > *cap) {
		size_t c = *n + np;
		rix_id *nv = rix_realloc(*v, (c ? c : 1) * sizeof(rix_id));
		if (nv == NULL)
			return rix_error_set(RIX_ENOMEM, "master index: out of memory");
		*v = nv;
		*cap = c;
	}
	for (size_t p = 0; p < np; p++)
		(*v)[(*n)++] = *pack_id_of(re, (uint32_t)p);
	return 0;
}
