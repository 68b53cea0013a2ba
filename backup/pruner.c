/*
 * backup/pruner.c — restic 0.14's prune over librix's public API (rix/pruner.h).
 *
 *   used blobs:   snapshots' trees walked by several workers (a shared stack of trees to load;
 *                 each tree ID pushed once), into one set per blob type
 *   pack info:    one pass over the master index: used (first copy), duplicate (later copies of
 *                 a used blob, resolved in a second pass, as restic) or unused, summed per pack
 *   decision:     the packs the backend lists, classified and sorted as restic's decidePackAction
 *   run:          (prune_run.c) unreferenced packs removed; blobs to keep read from the packs
 *                 to repack (verified: MAC, zstd, SHA-256) and copied into new packs as they are stored
 *                 (rix_repo_save_blob_stored: compressed ones are not compressed again), or, an
 *                 uncompressed blob that restic would compress, saved again from the plaintext
 *                 (rix_repo_save_blob_copy); flushed; the index rewritten without the packs
 *                 that go (rix_index_writer), old index files removed; packs removed
 *
 * Memory: the used data blobs as 64-bit keyed fingerprints (8 bytes a slot, at most 3/4 full: a
 * fingerprint shared by an unused blob only keeps that blob, never loses one; whether every used
 * blob is in the index is checked on the IDs themselves, while walking), the used trees exactly
 * (a subtree taken as seen when it was not would lose its blobs), a record per pack, a small
 * table of duplicate blobs, and during the run the blobs to repack and one batch of the index
 * being rewritten.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <xxhash.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "rix/master_index.h"
#include "rix/pruner.h"
#include "rix/snapshot.h"
#include "rix/walker.h"
#include "../common/pool.h"
#include "pruner_internal.h"

/* ---- option values -------------------------------------------------------------------------- */

int rix_parse_size(uint64_t *out, const char *s)
{
	size_t n = strlen(s);
	if (n == 0)
		return rix_error_set(RIX_EINVAL, "expected size, got empty string");
	uint64_t unit = 1;
	switch (s[n - 1]) {
	case 'b': case 'B': n--; break;
	case 'k': case 'K': unit = (uint64_t)1 << 10; n--; break;
	case 'm': case 'M': unit = (uint64_t)1 << 20; n--; break;
	case 'g': case 'G': unit = (uint64_t)1 << 30; n--; break;
	case 't': case 'T': unit = (uint64_t)1 << 40; n--; break;
	default: break;
	}
	uint64_t v = 0;
	if (n == 0)
		return rix_error_set(RIX_EINVAL, "invalid size \"%s\"", s);
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return rix_error_set(RIX_EINVAL, "invalid size \"%s\"", s);
		if (v > (UINT64_MAX - 9) / 10)
			return rix_error_set(RIX_EINVAL, "size \"%s\" is too large", s);
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT64_MAX / unit)
		return rix_error_set(RIX_EINVAL, "size \"%s\" is too large", s);
	*out = v * unit;
	return 0;
}

int rix_prune_parse_max_unused(rix_prune_options *o, const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n'))
		n--;
	char v[64];
	if (n == 0 || n >= sizeof(v))
		return rix_error_set(RIX_EINVAL, "invalid value for --max-unused: \"%.*s\"", (int)(n < 64 ? n : 64), s);
	memcpy(v, s, n);
	v[n] = '\0';
	if (strcmp(v, "unlimited") == 0) {
		o->max_unused = RIX_PRUNE_UNUSED_UNLIMITED;
		return 0;
	}
	if (v[n - 1] == '%') {
		v[n - 1] = '\0';
		char *end;
		errno = 0;
		double p = strtod(v, &end);
		if (errno != 0 || end == v || *end != '\0' || p != p)
			return rix_error_set(RIX_EINVAL, "invalid percentage \"%s%%\" passed for --max-unused", v);
		if (p < 0)
			return rix_error_set(RIX_EINVAL, "percentage for --max-unused must be positive");
		if (p >= 100)
			return rix_error_set(RIX_EINVAL, "percentage for --max-unused must be below 100%%");
		o->max_unused = RIX_PRUNE_UNUSED_PERCENT;
		o->max_unused_percent = p;
		return 0;
	}
	uint64_t b;
	if (rix_parse_size(&b, v) != 0)
		return rix_error_set(RIX_EINVAL, "invalid number of bytes \"%s\" for --max-unused: %s", v, rix_error_last());
	o->max_unused = RIX_PRUNE_UNUSED_BYTES;
	o->max_unused_bytes = b;
	return 0;
}

/* ---- the plan (its structs: pruner_internal.h) ------------------------------------------------ */

static uint64_t fp_of(const struct fpset *s, const rix_id *id)
{
	uint64_t h = XXH3_64bits_withSeed(id->b, sizeof(id->b), s->seed) & ~FP_MET;
	return h != 0 ? h : 1;
}

static bool fp_has(const struct fpset *s, const rix_id *id)
{
	if (s->cap == 0)
		return false;
	uint64_t h = fp_of(s, id);
	for (size_t i = (size_t)(h >> 20) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if ((s->slot[i] & ~FP_MET) == h)
			return true;
		if (s->slot[i] == 0)
			return false;
	}
}

/* -1: id is not in the set; 0: it is, met now for the first time (marked); 1: met before. */
static int fp_meet(struct fpset *s, const rix_id *id)
{
	if (s->cap == 0)
		return -1;
	uint64_t h = fp_of(s, id);
	for (size_t i = (size_t)(h >> 20) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if ((s->slot[i] & ~FP_MET) == h) {
			if (s->slot[i] & FP_MET)
				return 1;
			s->slot[i] |= FP_MET;
			return 0;
		}
		if (s->slot[i] == 0)
			return -1;
	}
}

static void fp_put(struct fpset *s, uint64_t h)
{
	size_t i = (size_t)((h & ~FP_MET) >> 20) & (s->cap - 1);
	while (s->slot[i] != 0 && (s->slot[i] & ~FP_MET) != (h & ~FP_MET))
		i = (i + 1) & (s->cap - 1);
	s->n += s->slot[i] == 0;
	s->slot[i] = h;
}

/* Adds id: 0, or RIX_ENOMEM. */
static int fp_add(struct fpset *s, const rix_id *id)
{
	if ((s->n + 1) * 4 > s->cap * 3) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		uint64_t *v = rix_calloc(cap, sizeof(*v)), *old = s->slot;
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "prune: out of memory");
		size_t oldcap = s->cap;
		s->slot = v;
		s->cap = cap;
		s->n = 0;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i] != 0)
				fp_put(s, old[i]);
		rix_free(old);
	}
	fp_put(s, fp_of(s, id));
	return 0;
}

int rix__prune_oom(void)
{
	return rix_error_set(RIX_ENOMEM, "prune: out of memory");
}

void rix__prune_say(const rix_prune_plan *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void rix__prune_say(const rix_prune_plan *p, int level, const char *fmt, ...)
{
	if (p->o.msg == NULL)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	p->o.msg(p->o.payload, level, line);
}

void rix__prune_progress(const rix_prune_plan *p, const char *phase, uint64_t done, uint64_t total)
{
	if (p->o.progress != NULL)
		p->o.progress(p->o.payload, phase, done, total);
}

static int push_id(rix_prune_plan *p, int which, const rix_id *id)
{
	if (p->nlists[which] == p->lists_cap[which]) {
		size_t cap = p->lists_cap[which] ? 2 * p->lists_cap[which] : 64;
		rix_id *v = rix_realloc(p->lists[which], cap * sizeof(*v));
		if (v == NULL)
			return rix__prune_oom();
		p->lists[which] = v;
		p->lists_cap[which] = cap;
	}
	p->lists[which][p->nlists[which]++] = *id;
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(rix_id));
}

void rix_prune_plan_free(rix_prune_plan *p)
{
	if (p == NULL)
		return;
	rix_free(p->data.slot);
	rix_indexmap_free(p->trees);
	rix_indexmap_free(p->met_trees);
	rix_indexmap_free(p->packmap);
	rix_free(p->packs);
	rix_free(p->dups);
	for (int i = 0; i < 3; i++)
		rix_free(p->lists[i]);
	rix_free(p);
}

const rix_prune_stats *rix_prune_plan_stats(const rix_prune_plan *p)
{
	return &p->st;
}

const rix_id *rix_prune_plan_packs(size_t *n, const rix_prune_plan *p, int which)
{
	if (which < 0 || which > 2) {
		*n = 0;
		return NULL;
	}
	*n = p->nlists[which];
	return p->lists[which];
}

/* ---- used blobs: the trees of every snapshot ---------------------------------------------------- */

struct walk {
	rix_prune_plan *p;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	rix_id *stack; /* trees to load */
	size_t n, cap;
	unsigned busy; /* workers loading a tree */
	int err;
	char errmsg[512];
	size_t trees;
	uint64_t missing; /* data blobs a tree names that no index does */
	rix_id first_missing;
};

bool rix__prune_used_has(const rix_prune_plan *p, rix_blob_type t, const rix_id *id)
{
	return t == RIX_BLOB_DATA ? fp_has(&p->data, id) : rix_indexmap_lookup(NULL, p->trees, id) == 0;
}

/* A tree (w->mu held): into the used set, and onto the stack when new. */
static int add_tree(struct walk *w, const rix_id *id)
{
	static const rix_loc none = { 0 };
	if (rix_indexmap_lookup(NULL, w->p->trees, id) == 0)
		return 0;
	int rc = rix_indexmap_add(w->p->trees, id, &none);
	if (rc != 0)
		return rc;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		rix_id *v = rix_realloc(w->stack, cap * sizeof(*v));
		if (v == NULL)
			return rix__prune_oom();
		w->stack = v;
		w->cap = cap;
	}
	w->stack[w->n++] = *id;
	return 0;
}

static void walk_fail(struct walk *w, int rc, const char *fmt, const char *detail)
{
	if (w->err == 0) {
		w->err = rc;
		snprintf(w->errmsg, sizeof(w->errmsg), fmt, detail);
	}
}

static void *walk_worker(void *arg)
{
	struct walk *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->err == 0 && w->n == 0 && w->busy > 0)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->err != 0 || (w->n == 0 && w->busy == 0))
			break;
		rix_id id = w->stack[--w->n];
		w->busy++;
		pthread_mutex_unlock(&w->mu);
		rix_tree *t = NULL;
		int rc = rix_tree_load(&t, w->p->r, &id);
		char msg[400] = "";
		uint64_t missing = 0;
		rix_id first_missing;
		if (rc != 0) {
			snprintf(msg, sizeof(msg), "%s", rix_error_last());
		} else { /* the index's answer, without the lock: every data blob must be in it */
			size_t nn = rix_tree_count(t);
			for (size_t i = 0; i < nn; i++) {
				const rix_node *nd = rix_tree_node(t, i);
				for (size_t k = 0; k < nd->content_len; k++)
					if (!rix_master_index_has(w->p->mi, RIX_BLOB_DATA, &nd->content[k]) && missing++ == 0)
						first_missing = nd->content[k];
			}
		}
		pthread_mutex_lock(&w->mu);
		if (rc != 0) {
			walk_fail(w, rc, "unable to load a tree from the repository: %s", msg);
		} else {
			if (missing > 0 && w->missing++ == 0)
				w->first_missing = first_missing;
			size_t nn = rix_tree_count(t);
			for (size_t i = 0; i < nn && w->err == 0; i++) {
				const rix_node *nd = rix_tree_node(t, i);
				for (size_t k = 0; k < nd->content_len && rc == 0; k++)
					rc = fp_add(&w->p->data, &nd->content[k]);
				if (rc == 0 && nd->type == RIX_NODE_DIR && nd->subtree != NULL)
					rc = add_tree(w, nd->subtree);
				if (rc != 0)
					walk_fail(w, rc, "%s", rix_error_last());
			}
			w->trees++;
		}
		w->busy--;
		pthread_cond_broadcast(&w->cv);
		size_t trees = w->trees;
		pthread_mutex_unlock(&w->mu);
		rix_tree_free(t);
		if (trees % 256 == 0)
			rix__prune_progress(w->p, "trees", trees, 0);
		pthread_mutex_lock(&w->mu);
	}
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static bool ignored(const rix_prune_plan *p, const rix_id *id)
{
	for (size_t i = 0; i < p->o.nignore_snapshots; i++)
		if (memcmp(&p->o.ignore_snapshots[i], id, sizeof(*id)) == 0)
			return true;
	return false;
}

static int find_used(rix_prune_plan *p)
{
	rix__prune_say(p, 1, "loading all snapshots...");
	rix_snapshot_list *l = NULL;
	int rc = rix_snapshot_list_load(&l, p->r, NULL, NULL);
	if (rc != 0)
		return rix_error_set(rc, "failed loading snapshot: %s", rix_error_last());
	for (size_t i = 0; i < l->nunreadable; i++) {
		if (ignored(p, &l->unreadable[i].id))
			continue;
		char hex[65];
		rix_id_to_hex(hex, &l->unreadable[i].id);
		int code = l->unreadable[i].code;
		rix_snapshot_list_free(l);
		return rix_error_set(code == RIX_EIO || code == RIX_ENOMEM ? code : RIX_ECORRUPT,
				     "failed loading snapshot: snapshot %.8s cannot be read (%s)", hex, rix_strerror(code));
	}
	struct walk w = { .p = p };
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	for (size_t i = 0; i < l->count && rc == 0; i++) {
		if (ignored(p, &l->items[i]->id))
			continue;
		p->st.snapshots++;
		rc = add_tree(&w, &l->items[i]->tree);
	}
	rix_snapshot_list_free(l);
	rix__prune_say(p, 1, "finding data that is still in use for %zu snapshots", p->st.snapshots);
	if (rc == 0) {
		unsigned want = p->o.workers ? p->o.workers : rix_repo_workers(p->r);
		rix__pool_run(rix__pool_size(want ? want : 4, 16), walk_worker, &w);
		if (w.err != 0)
			rc = rix_error_set(w.err, "%s", w.errmsg);
	}
	if (rc == 0 && w.missing > 0) {
		char hex[65];
		rix_id_to_hex(hex, &w.first_missing);
		rix__prune_say(p, 0, "data blob %s not found in the index", hex);
		rc = rix_error_set(RIX_ECORRUPT,
				   "index is not complete: %" PRIu64 " trees name data blobs no index names (%s, ...); will not start "
				   "prune to prevent (additional) data loss; run 'rix repair index', then 'rix check'",
				   w.missing, hex);
	}
	p->st.trees = w.trees;
	rix__prune_progress(p, "trees", w.trees, w.trees);
	rix_free(w.stack);
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
	return rc;
}

/* ---- pack info from the index ----------------------------------------------------------------- */

/* The number of pack pack_id in p->packs, made when new (with restic's header size: the crypto
 * overhead and the length field). UINT32_MAX: out of memory. */
uint32_t rix__prune_pack_slot(rix_prune_plan *p, const rix_id *pack_id)
{
	rix_loc loc;
	if (rix_indexmap_lookup(&loc, p->packmap, pack_id) == 0)
		return loc.pack;
	if (p->npacks == p->packs_cap) {
		size_t cap = p->packs_cap ? 2 * p->packs_cap : 256;
		struct pinfo *v = rix_realloc(p->packs, cap * sizeof(*v));
		if (v == NULL)
			return UINT32_MAX;
		p->packs = v;
		p->packs_cap = cap;
	}
	if (p->npacks >= UINT32_MAX - 1)
		return UINT32_MAX;
	loc = (rix_loc){ .pack = (uint32_t)p->npacks };
	if (rix_indexmap_add(p->packmap, pack_id, &loc) != 0)
		return UINT32_MAX;
	p->packs[p->npacks] = (struct pinfo){ .id = *pack_id, .used_size = 4 + 32, .tpe = TPE_UNSET };
	return (uint32_t)p->npacks++;
}

static struct dup *dup_find(rix_prune_plan *p, rix_blob_type t, const rix_id *id)
{
	if (p->dups_cap == 0)
		return NULL;
	uint64_t h;
	memcpy(&h, id->b, sizeof(h));
	for (size_t i = (size_t)h & (p->dups_cap - 1);; i = (i + 1) & (p->dups_cap - 1)) {
		struct dup *d = &p->dups[i];
		if (!d->used)
			return NULL;
		if (d->type == t && memcmp(&d->id, id, sizeof(*id)) == 0)
			return d;
	}
}

/* Puts d into a free slot (the table has room). */
static void dup_put(rix_prune_plan *p, const struct dup *d)
{
	uint64_t h;
	memcpy(&h, d->id.b, sizeof(h));
	size_t i = (size_t)h & (p->dups_cap - 1);
	while (p->dups[i].used)
		i = (i + 1) & (p->dups_cap - 1);
	p->dups[i] = *d;
	p->ndups++;
}

static int dup_add(rix_prune_plan *p, rix_blob_type t, const rix_id *id, uint8_t count)
{
	if ((p->ndups + 1) * 2 > p->dups_cap) {
		size_t cap = p->dups_cap ? 2 * p->dups_cap : 64;
		struct dup *v = rix_calloc(cap, sizeof(*v)), *old = p->dups;
		if (v == NULL)
			return rix__prune_oom();
		size_t oldcap = p->dups_cap;
		p->dups = v;
		p->dups_cap = cap;
		p->ndups = 0;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].used)
				dup_put(p, &old[i]);
		rix_free(old);
	}
	dup_put(p, &(struct dup){ .id = *id, .type = (uint8_t)t, .count = count, .used = 1 });
	return 0;
}

static void pack_blob(struct pinfo *ip, const rix_packed_blob *pb)
{
	if (ip->tpe == TPE_UNSET)
		ip->tpe = (uint8_t)pb->type;
	if (ip->tpe != (uint8_t)pb->type)
		ip->tpe = TPE_MIXED;
	ip->used_size += pb->uncompressed_length ? 41 : 37; /* the header entry */
	if (pb->uncompressed_length == 0)
		ip->uncompressed = true;
}

/* Whether a used blob was met by the first pass: -1 not used, 0 used and met now for the first
 * time, 1 used and met before (a copy); RIX_ENOMEM. */
static int used_meet(rix_prune_plan *p, rix_blob_type t, const rix_id *id)
{
	if (t == RIX_BLOB_DATA)
		return fp_meet(&p->data, id);
	if (rix_indexmap_lookup(NULL, p->trees, id) != 0)
		return -1;
	if (rix_indexmap_lookup(NULL, p->met_trees, id) == 0)
		return 1;
	static const rix_loc none = { 0 };
	return rix_indexmap_add(p->met_trees, id, &none) == 0 ? 0 : rix__prune_oom();
}

/*
 * First pass (restic's first and second loops in one): the first copy of a used blob met is
 * used, in its pack too; a later copy makes it a duplicate (counted, restic's duplicateBlobs),
 * whose copies undo_first and second_pass settle; the rest is unused. No lookup but the used
 * sets': which copy is the first is what the walk meets first, and restic's order is the same.
 */
static int first_pass(void *arg, const rix_packed_blob *pb)
{
	rix_prune_plan *p = arg;
	uint32_t s = rix__prune_pack_slot(p, &pb->pack_id);
	if (s == UINT32_MAX)
		return rix__prune_oom();
	struct pinfo *ip = &p->packs[s];
	pack_blob(ip, pb);
	int met = used_meet(p, pb->type, &pb->id);
	if (met < -1)
		return met;
	if (met < 0) {
		p->st.size.unused += pb->length;
		p->st.blobs.unused++;
		ip->unused_size += pb->length;
		ip->unused_blobs++;
		return 0;
	}
	if (met == 0) {
		p->st.size.used += pb->length;
		p->st.blobs.used++;
		ip->used_size += pb->length;
		ip->used_blobs++;
		return 0;
	}
	p->st.size.duplicate += pb->length;
	p->st.blobs.duplicate++;
	struct dup *d = dup_find(p, pb->type, &pb->id);
	if (d == NULL)
		return dup_add(p, pb->type, &pb->id, 2); /* this one is the second copy */
	if (d->count < 255)
		d->count++;
	return 0;
}

/* Between the passes: the first copy of each duplicate (the first met again, in the same order)
 * no longer counts as used in its pack; second_pass decides which copy does, as restic. */
static int undo_first(void *arg, const rix_packed_blob *pb)
{
	rix_prune_plan *p = arg;
	struct dup *d = dup_find(p, pb->type, &pb->id);
	if (d == NULL || d->undone)
		return 0;
	rix_loc loc;
	if (rix_indexmap_lookup(&loc, p->packmap, &pb->pack_id) != 0)
		return rix_error_set(RIX_ECORRUPT, "prune: the index changed while prune read it");
	struct pinfo *ip = &p->packs[loc.pack];
	ip->used_size -= pb->length;
	ip->used_blobs--;
	d->undone = 1;
	return 0;
}

/* Second pass (restic's): one copy of each duplicated used blob counts as used, in a pack with
 * other used blobs if it meets one, else the last copy met. */
static int second_pass(void *arg, const rix_packed_blob *pb)
{
	rix_prune_plan *p = arg;
	struct dup *d = dup_find(p, pb->type, &pb->id);
	if (d == NULL)
		return 0;
	rix_loc loc;
	if (rix_indexmap_lookup(&loc, p->packmap, &pb->pack_id) != 0)
		return rix_error_set(RIX_ECORRUPT, "prune: the index changed while prune read it");
	struct pinfo *ip = &p->packs[loc.pack];
	if (d->count == 0) {
		ip->unused_size += pb->length;
		ip->unused_blobs++;
	} else if (ip->used_blobs > 0 || d->count == 1) {
		ip->used_size += pb->length;
		ip->used_blobs++;
		d->count = 0;
	} else {
		ip->unused_size += pb->length;
		ip->unused_blobs++;
		d->count--;
	}
	return 0;
}

static int pack_info(rix_prune_plan *p)
{
	rix__prune_say(p, 1, "searching used packs...");
	int rc = rix_master_index_foreach(p->mi, first_pass, p);
	if (rc == 0 && p->ndups > 0)
		rc = rix_master_index_foreach(p->mi, undo_first, p);
	if (rc == 0 && p->ndups > 0)
		rc = rix_master_index_foreach(p->mi, second_pass, p);
	/* The marks are done with. */
	rix_indexmap_free(p->met_trees);
	p->met_trees = NULL;
	return rc;
}

/* ---- deciding ----------------------------------------------------------------------------------- */

struct listed {
	rix_prune_plan *p;
	int err;
};

static int list_pack(void *arg, const char *name, uint64_t size)
{
	struct listed *ls = arg;
	rix_prune_plan *p = ls->p;
	rix_id id;
	if (strlen(name) != 64 || rix_id_from_hex(&id, name, 64) != 0)
		return 0; /* not a pack file's name */
	rix_loc loc;
	if (rix_indexmap_lookup(&loc, p->packmap, &id) != 0) {
		rix__prune_say(p, 2, "will remove pack %.8s as it is unused and not indexed", name);
		p->st.size.unref += size;
		return push_id(p, RIX_PRUNE_UNREFERENCED, &id);
	}
	struct pinfo *ip = &p->packs[loc.pack];
	ip->listed = true;
	if (ip->used_size + ip->unused_size != size && ip->used_blobs != 0) {
		rix__prune_say(p, 0, "pack %.8s: calculated size %" PRIu64 " does not match real size %" PRIu64, name,
		    ip->used_size + ip->unused_size, size);
		return rix_error_set(RIX_ECORRUPT,
				     "pack size does not match calculated size from index (pack %.8s: %" PRIu64 " in the index, %" PRIu64
				     " in the repository); run 'rix repair index'",
				     name, ip->used_size + ip->unused_size, size);
	}
	return 0;
}

static uint64_t psize(const struct pinfo *ip)
{
	return ip->used_size + ip->unused_size;
}

static int cmp_candidate(const void *a, const void *b)
{
	const struct pinfo *pi = *(const struct pinfo *const *)a, *pj = *(const struct pinfo *const *)b;
	bool di = pi->tpe == RIX_BLOB_DATA, dj = pj->tpe == RIX_BLOB_DATA;
	if (di != dj)
		return di ? 1 : -1;
	if (pi->small != pj->small)
		return pi->small ? -1 : 1;
	/* 128-bit products: sizes are under 2^64 */
	unsigned __int128 l = (unsigned __int128)pi->unused_size * pj->used_size,
			  r = (unsigned __int128)pj->unused_size * pi->used_size;
	if (l != r)
		return l > r ? -1 : 1;
	return memcmp(&pi->id, &pj->id, sizeof(pi->id));
}

static void repack(rix_prune_plan *p, struct pinfo *ip)
{
	ip->action = A_REPACK;
	p->st.blobs.repack += ip->unused_blobs + ip->used_blobs;
	p->st.size.repack += psize(ip);
	p->st.blobs.repackrm += ip->unused_blobs;
	p->st.size.repackrm += ip->unused_size;
}

static int decide(rix_prune_plan *p)
{
	rix__prune_say(p, 1, "collecting packs for deletion and repacking");
	struct listed ls = { .p = p };
	int rc = rix_backend_list(rix_repo_backend(p->r), RIX_FILE_PACK, list_pack, &ls);
	if (rc != 0)
		return rc;
	uint64_t pack_size = rix_repo_pack_size(p->r);
	uint64_t target = p->o.repack_small ? pack_size / 5 * 4 : pack_size / 25;
	int version = rix_repo_config(p->r)->version;
	struct pinfo **cand = rix_malloc((p->npacks + 1) * sizeof(*cand)), **small = rix_malloc((p->npacks + 1) * sizeof(*small));
	if (cand == NULL || small == NULL) {
		rix_free(cand);
		rix_free(small);
		return rix__prune_oom();
	}
	size_t ncand = 0, nsmall = 0, nmissing = 0;
	for (size_t i = 0; i < p->npacks; i++) {
		struct pinfo *ip = &p->packs[i];
		if (!ip->listed) {
			if (ip->used_blobs == 0) { /* missing and unneeded: dropped from the index */
				ip->action = A_IGNORE;
				p->st.blobs.remove += ip->unused_blobs;
				p->st.size.remove += ip->unused_size;
				char hex[65];
				rix_id_to_hex(hex, &ip->id);
				rix__prune_say(p, 0, "will forget missing pack file %s", hex);
			} else {
				nmissing++;
			}
			continue;
		}
		if (ip->used_blobs == 0)
			p->st.packs.unused++;
		else if (ip->unused_blobs == 0)
			p->st.packs.used++;
		else
			p->st.packs.partly_used++;
		bool must_compress = version >= 2 && (ip->tpe == RIX_BLOB_TREE || p->o.repack_uncompressed) && ip->uncompressed;
		ip->uncompressed = must_compress;
		if (ip->used_blobs == 0) {
			ip->action = A_REMOVE;
			p->st.blobs.remove += ip->unused_blobs;
			p->st.size.remove += ip->unused_size;
		} else if (p->o.repack_cacheable_only && ip->tpe == RIX_BLOB_DATA) {
			ip->action = A_KEEP;
			p->st.packs.keep++;
		} else if (ip->unused_blobs == 0 && ip->tpe != TPE_MIXED && !must_compress) {
			if (psize(ip) >= target) {
				ip->action = A_KEEP;
				p->st.packs.keep++;
			} else {
				small[nsmall++] = ip;
			}
		} else {
			cand[ncand++] = ip;
		}
	}
	if (nmissing > 0) {
		rix__prune_say(p, 0, "The index references %zu needed pack files which are missing from the repository:", nmissing);
		for (size_t i = 0; i < p->npacks; i++)
			if (!p->packs[i].listed && p->packs[i].used_blobs != 0) {
				char hex[65];
				rix_id_to_hex(hex, &p->packs[i].id);
				rix__prune_say(p, 0, "  %s", hex);
			}
		rix_free(cand);
		rix_free(small);
		return rix_error_set(RIX_ECORRUPT, "packs from index missing in repo (%zu needed packs); run 'rix repair index'",
				     nmissing);
	}
	if (nsmall < 10) { /* too few to be worth it, and no endless repacking of one small pack */
		for (size_t i = 0; i < nsmall; i++)
			small[i]->action = A_KEEP;
		p->st.packs.keep += nsmall;
	} else {
		memcpy(cand + ncand, small, nsmall * sizeof(*small));
		ncand += nsmall;
	}
	for (size_t i = 0; i < ncand; i++)
		cand[i]->small = psize(cand[i]) < target;
	if (ncand > 1)
		qsort(cand, ncand, sizeof(*cand), cmp_candidate);
	uint64_t max_after = UINT64_MAX;
	if (p->o.max_unused == RIX_PRUNE_UNUSED_PERCENT)
		max_after = (uint64_t)(p->o.max_unused_percent / (100 - p->o.max_unused_percent) * (double)p->st.size.used);
	else if (p->o.max_unused == RIX_PRUNE_UNUSED_BYTES)
		max_after = p->o.max_unused_bytes;
	for (size_t i = 0; i < ncand; i++) {
		struct pinfo *ip = cand[i];
		bool reached_unused = p->st.size.unused - p->st.size.remove - p->st.size.repackrm < max_after;
		bool reached_repack = p->st.size.repack + psize(ip) >= p->o.max_repack_bytes;
		bool large_enough = psize(ip) >= target;
		if (reached_repack) {
			ip->action = A_KEEP;
			p->st.packs.keep++;
		} else if (ip->tpe != RIX_BLOB_DATA || ip->uncompressed) {
			repack(p, ip);
		} else if (reached_unused && large_enough) {
			ip->action = A_KEEP;
			p->st.packs.keep++;
		} else {
			repack(p, ip);
		}
	}
	rix_free(cand);
	rix_free(small);
	for (size_t i = 0; i < p->npacks; i++) {
		if (p->packs[i].action == A_REPACK)
			rc = push_id(p, RIX_PRUNE_REPACK, &p->packs[i].id);
		else if (p->packs[i].action == A_REMOVE)
			rc = push_id(p, RIX_PRUNE_REMOVE, &p->packs[i].id);
		if (rc != 0)
			return rc;
	}
	p->st.packs.unref = p->nlists[RIX_PRUNE_UNREFERENCED];
	p->st.packs.repack = p->nlists[RIX_PRUNE_REPACK];
	p->st.packs.remove = p->nlists[RIX_PRUNE_REMOVE];
	for (int i = 0; i < 3; i++)
		if (p->nlists[i] > 1)
			qsort(p->lists[i], p->nlists[i], sizeof(rix_id), cmp_id);
	return 0;
}

int rix_prune_plan_new(rix_prune_plan **out, rix_repo *r, const rix_prune_options *opt)
{
	*out = NULL;
	if (opt == NULL || opt->version != RIX_PRUNE_OPTIONS_VERSION)
		return rix_error_set(RIX_EINVAL, "prune: options of another version");
	if (opt->max_unused == RIX_PRUNE_UNUSED_PERCENT && !(opt->max_unused_percent >= 0 && opt->max_unused_percent < 100))
		return rix_error_set(RIX_EINVAL, "prune: max_unused_percent must be in [0, 100)");
	if (opt->repack_uncompressed && rix_repo_config(r)->version < 2)
		return rix_error_set(RIX_EINVAL, "compression requires at least repository format version 2");
	rix_prune_plan *p = rix_calloc(1, sizeof(*p));
	if (p == NULL)
		return rix__prune_oom();
	p->r = r;
	p->mi = rix_repo_master_index(r);
	p->o = *opt;
	if (getrandom(&p->data.seed, sizeof(p->data.seed), GRND_NONBLOCK) != (ssize_t)sizeof(p->data.seed))
		p->data.seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)p;
	int rc = rix_indexmap_new(&p->trees);
	if (rc == 0)
		rc = rix_indexmap_new(&p->met_trees);
	if (rc == 0)
		rc = rix_indexmap_new(&p->packmap);
	if (rc == 0)
		rc = find_used(p);
	if (rc == 0)
		rc = pack_info(p);
	if (rc == 0)
		rc = decide(p);
	if (rc != 0) {
		rix_prune_plan_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

