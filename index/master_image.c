/*
 * index/master_image.c — the merged state of a master index as an image: exported whole (to be
 * written to a binary cache) and installed whole (read back from one), so that reopening a
 * repository skips decoding its index files. The file that holds an image, its sealing and its
 * I/O are the repository's (repo/index_cache.c); this file knows only the master index's side.
 *
 * An image is a descriptor and sections:
 *
 *   descriptor (bytes, host order)                sections (arrays, exactly as in memory)
 *   +----------------------------------+          +--------------------------------------+
 *   | magic "rixmimg\0"          8     |          | packs      npacks x 32 (rix_id)      |
 *   | order mark 0x01020304      4     |          | buckets[t] (nb[t] + 1) x 8   \ per type t
 *   | version                    4     |          | entries[t] count[t] x 48     | with count
 *   | layout (sizes, offsets)    4     |          | fp[t]      count[t] x 1      / > 0
 *   |                                  |          +--------------------------------------+
 *   | FROZEN_LOAD, blob types    4 + 4 |
 *   | seed                       8     |  the table's hash seed: the bucket words were made with it
 *   | probe = hash(0..31, seed)  8     |  the hash function itself (a new xxhash would differ)
 *   | npacks, nids               4 + 4 |
 *   | count[t], nb[t]            8 x 2 |
 *   | index file IDs             32 x nids
 *   +----------------------------------+
 *
 * The sections are the frozen tables (frozen.c) and the global pack table as they lie: writing
 * is a few large writes, reading is a few large reads straight into the arrays the installed
 * state then owns (no parse, no rehash, no copy). The image is therefore tied to this build's
 * layout and hash: the descriptor says which (version, sizes, offsets, FROZEN_LOAD, the probe);
 * any difference refuses the image (RIX_ECORRUPT), and the caller loads the index files instead.
 * Changing the frozen layout, rix__hash_bucket or rix__hash_filter means bumping IMAGE_VERSION.
 *
 * An installed table keeps the image's seed: the master index takes it over (it was empty, so
 * no table used the old one). The seed is secret as long as the image is (the cache seals it
 * with the repository's key), so crafted IDs are no better against a reopened table.
 *
 * Exporting pins the published state (mi->pinned): a merge or bulk load publishing meanwhile
 * waits, before freeing that state, until the image is freed, so that a thread may write the
 * image while lookups and even loads go on. Only a state made of merged index files exports:
 * one with separate indexes or blobs this process stored (their index files are recorded among
 * the IDs but their entries are not in the frozen tables) is refused.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "index_internal.h"
#include "master_index_internal.h"

#define IMAGE_MAGIC "rixmimg"  /* 8 bytes with its NUL */
#define IMAGE_VERSION 3u /* 2: the tables' fingerprints; 3: the multiply-fold hash */
#define IMAGE_ORDER 0x01020304u
#define DESC_FIXED 72u /* bytes before the index file IDs */
#define MAX_SECTIONS (1 + 3 * RIX_BLOB_TYPES)

/* Sizes and offsets of the layout, in one word: a build that lays entries out otherwise differs. */
#define LAYOUT_WORD                                                                                    \
	((uint32_t)sizeof(struct fentry) | (uint32_t)sizeof(rix_loc) << 8 |                              \
	 (uint32_t)offsetof(struct fentry, loc) << 16 | (uint32_t)offsetof(rix_loc, uncompressed_length) << 24)

struct rix_master_image {
	rix_master_index *mi; /* export: the index whose state is pinned; NULL for an import */
	uint8_t *desc;
	size_t ndesc;
	uint64_t seed;
	uint32_t npacks, nids;
	uint32_t count[RIX_BLOB_TYPES], nb[RIX_BLOB_TYPES];
	const rix_id *ids; /* into desc */
	rix_image_section sec[MAX_SECTIONS];
	size_t nsec;
	bool allocated; /* import: the section arrays are this image's (until installed) */
	bool checked;   /* import: rix_master_image_check passed */
};

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint64_t probe_of(uint64_t seed)
{
	rix_id id;
	for (int i = 0; i < RIX_ID_SIZE; i++)
		id.b[i] = (uint8_t)i;
	return rix__hash_id(&id, seed);
}

/* The sections an image of these counts has, pointing nowhere yet (sizes only). */
static void lay_out_sections(rix_master_image *im)
{
	im->nsec = 0;
	im->sec[im->nsec++] = (rix_image_section){ NULL, (size_t)im->npacks * sizeof(rix_id) };
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		if (im->count[t] == 0)
			continue;
		im->sec[im->nsec++] = (rix_image_section){ NULL, ((size_t)im->nb[t] + 1) * sizeof(uint64_t) };
		im->sec[im->nsec++] = (rix_image_section){ NULL, (size_t)im->count[t] * sizeof(struct fentry) };
		im->sec[im->nsec++] = (rix_image_section){ NULL, (size_t)im->count[t] };
	}
}

/* ---- Export ------------------------------------------------------------------------------- */

int rix_master_index_export(rix_master_image **out, rix_master_index *mi)
{
	*out = NULL;
	rix_master_image *im = rix_calloc(1, sizeof(*im));
	if (im == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	pthread_mutex_lock(&mi->wmu); /* no writer publishes while the state is read and pinned */
	int rc = 0;
	const struct mstate *st = atomic_load(&mi->state);
	if (mi->nseparate > 0 || rix__recent_count(mi->recent, RIX_BLOB_DATA) > 0 ||
	    rix__recent_count(mi->recent, RIX_BLOB_TREE) > 0 || rix__recent_pack_count(mi->recent) > 0)
		rc = rix_error_set(RIX_EINVAL, "master index: only a state made of merged index files exports "
					       "(it holds separate indexes or blobs stored since it was made)");
	else if (st->dset != NULL)
		rc = rix_error_set(RIX_EINVAL, "master index: a dedup-only state does not export (its data "
					       "blobs have no locations; an image must answer as the full index)");
	pthread_mutex_lock(&mi->pin_mu);
	if (rc == 0 && mi->pinned != NULL)
		rc = rix_error_set(RIX_EINVAL, "master index: an exported image is not freed yet");
	if (rc == 0 && mi->nindex_ids > 0xFFFFFFFFu)
		rc = rix_error_set(RIX_ELIMIT, "master index: too many index files for an image");
	if (rc == 0) {
		im->ndesc = DESC_FIXED + mi->nindex_ids * sizeof(rix_id);
		if ((im->desc = rix_malloc(im->ndesc)) == NULL)
			rc = rix_error_set(RIX_ENOMEM, "master index: out of memory");
	}
	if (rc == 0) {
		mi->pinned = st;
		im->mi = mi;
		im->seed = mi->seed;
		im->npacks = st->npacks;
		im->nids = (uint32_t)mi->nindex_ids;
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			im->count[t] = st->frozen[t] != NULL ? st->frozen[t]->count : 0;
			im->nb[t] = st->frozen[t] != NULL ? st->frozen[t]->nb : 0;
		}
		uint8_t *d = im->desc;
		memcpy(d, IMAGE_MAGIC, 8);
		put32(d + 8, IMAGE_ORDER);
		put32(d + 12, IMAGE_VERSION);
		put32(d + 16, LAYOUT_WORD);
		put32(d + 20, FROZEN_LOAD);
		put32(d + 24, RIX_BLOB_TYPES);
		put32(d + 28, 0);
		put64(d + 32, im->seed);
		put64(d + 40, probe_of(im->seed));
		put32(d + 48, im->npacks);
		put32(d + 52, im->nids);
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			put32(d + 56 + 8 * t, im->count[t]);
			put32(d + 60 + 8 * t, im->nb[t]);
		}
		if (im->nids)
			memcpy(d + DESC_FIXED, mi->index_ids, (size_t)im->nids * sizeof(rix_id));
		im->ids = (const rix_id *)(void *)(d + DESC_FIXED);
		lay_out_sections(im);
		size_t k = 0;
		im->sec[k++].p = st->packs;
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			if (im->count[t] == 0)
				continue;
			im->sec[k++].p = st->frozen[t]->buckets;
			im->sec[k++].p = st->frozen[t]->entries;
			im->sec[k++].p = st->frozen[t]->fp;
		}
	}
	pthread_mutex_unlock(&mi->pin_mu);
	pthread_mutex_unlock(&mi->wmu);
	if (rc != 0) {
		rix_free(im->desc);
		rix_free(im);
		return rc;
	}
	*out = im;
	return 0;
}

/* ---- Import ------------------------------------------------------------------------------- */

int rix_master_image_parse(rix_master_image **out, const void *desc, size_t n)
{
	*out = NULL;
	const uint8_t *d = desc;
	if (n < DESC_FIXED || memcmp(d, IMAGE_MAGIC, 8) != 0)
		return rix_error_set(RIX_ECORRUPT, "master image: not an image descriptor");
	if (get32(d + 8) != IMAGE_ORDER || get32(d + 12) != IMAGE_VERSION || get32(d + 16) != LAYOUT_WORD ||
	    get32(d + 20) != FROZEN_LOAD || get32(d + 24) != RIX_BLOB_TYPES || get32(d + 28) != 0)
		return rix_error_set(RIX_ECORRUPT, "master image: made by a build of another layout");
	uint64_t seed = get64(d + 32);
	if (get64(d + 40) != probe_of(seed))
		return rix_error_set(RIX_ECORRUPT, "master image: made with another hash function");
	uint32_t npacks = get32(d + 48), nids = get32(d + 52);
	if (n != DESC_FIXED + (uint64_t)nids * sizeof(rix_id))
		return rix_error_set(RIX_ECORRUPT, "master image: the descriptor's length is not its content's");
	if (npacks > 0xFFFFFFFEu)
		return rix_error_set(RIX_ECORRUPT, "master image: %u packs is over the limit", npacks);
	rix_master_image *im = rix_calloc(1, sizeof(*im));
	if (im == NULL || (im->desc = rix_malloc(n)) == NULL) {
		rix_free(im);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	}
	memcpy(im->desc, d, n);
	im->ndesc = n;
	im->seed = seed;
	im->npacks = npacks;
	im->nids = nids;
	im->ids = (const rix_id *)(void *)(im->desc + DESC_FIXED);
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		im->count[t] = get32(d + 56 + 8 * t);
		im->nb[t] = get32(d + 60 + 8 * t);
		/* nb is count / FROZEN_LOAD when built; rix__frozen_drop_same lowers count, not nb. */
		bool ok = im->count[t] == 0 ? im->nb[t] == 0 : im->nb[t] > 0 && im->nb[t] < 0xFFFFFFFFu && npacks > 0;
		if (im->count[t] > 0xFFFFFFFEu || !ok) {
			rix_master_image_free(im);
			return rix_error_set(RIX_ECORRUPT, "master image: a table's counts do not agree");
		}
	}
	lay_out_sections(im);
	*out = im;
	return 0;
}

int rix_master_image_alloc(rix_master_image *im)
{
	if (im->mi != NULL || im->allocated)
		return rix_error_set(RIX_EINVAL, "master image: allocated already, or an export");
	for (size_t k = 0; k < im->nsec; k++) {
		/* At least a byte, so that an empty pack table is not NULL (the state's never is). */
		im->sec[k].p = rix_malloc(im->sec[k].n ? im->sec[k].n : 1);
		if (im->sec[k].p == NULL) {
			for (size_t j = 0; j < k; j++) {
				rix_free(im->sec[j].p);
				im->sec[j].p = NULL;
			}
			return rix_error_set(RIX_ENOMEM, "master image: out of memory for %zu bytes", im->sec[k].n);
		}
		if (k > 0)
			rix__advise_huge(im->sec[k].p, im->sec[k].n);
	}
	im->allocated = true;
	return 0;
}

/*
 * Checks what the sections hold before the tables are trusted with lookups: chains in order and
 * inside the table, every pack number inside the pack table (a lookup indexes the pack table
 * with it), and a sample of entries in the bucket their ID hashes to, filter bits set,
 * fingerprint right.
 */
static int check_table(const struct frozen *f, uint32_t npacks, uint64_t seed)
{
	const uint64_t *w = f->buckets;
	if ((uint32_t)w[0] != 0 || w[f->nb] != f->count)
		return -1;
	for (uint32_t b = 0; b < f->nb; b++)
		if ((uint32_t)w[b + 1] < (uint32_t)w[b])
			return -1;
	uint32_t bad = 0;
	for (uint32_t i = 0; i < f->count; i++)
		bad |= f->entries[i].loc.pack >= npacks;
	if (bad)
		return -1;
	uint32_t step = f->count / 61 + 1;
	for (uint32_t i = 0; i < f->count; i += step) {
		uint64_t h = rix__hash_id(&f->entries[i].id, seed);
		uint32_t want = rix__hash_bucket(h, f->nb);
		uint64_t fl = rix__hash_filter(h);
		if ((w[want] & fl) != fl || i < (uint32_t)w[want] || i >= (uint32_t)w[want + 1] ||
		    f->fp[i] != rix__hash_fp(h))
			return -1;
	}
	return 0;
}

int rix_master_image_check(rix_master_image *im)
{
	if (im->mi != NULL || !im->allocated)
		return rix_error_set(RIX_EINVAL, "master image: not an import with its sections read");
	if (im->checked)
		return 0;
	size_t k = 1;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		if (im->count[t] == 0)
			continue;
		struct frozen f = { .buckets = im->sec[k].p, .entries = im->sec[k + 1].p, .fp = im->sec[k + 2].p,
				    .nb = im->nb[t], .count = im->count[t] };
		k += 3;
		if (check_table(&f, im->npacks, im->seed) != 0)
			return rix_error_set(RIX_ECORRUPT, "master image: a %s table is not well formed",
					     t == RIX_BLOB_DATA ? "data" : "tree");
	}
	im->checked = true;
	return 0;
}

/*
 * The image's tables, with the entries of the batches committed meanwhile (the index files
 * listed since the image was made) merged into them where they lie: no reader sees the image's
 * arrays yet, so a few entries are inserted in place (rix__frozen_insert: one pass of moves, no
 * rehash, no second table); many are merged by a rebuild. Caller holds wmu and bmu; on failure
 * the arrays taken so far are next's (freed with it), the rest the image's.
 */
static int build_state(struct mstate *next, rix_master_image *im, struct bulk *k, uint64_t seed, unsigned workers)
{
	uint64_t packs_total = (uint64_t)im->npacks + k->npacks;
	if (packs_total > 0xFFFFFFFEu || k->n[0] > 0xFFFFFFFEu || k->n[1] > 0xFFFFFFFEu)
		return rix_error_set(RIX_ELIMIT, "master index: over the limit of entries or packs");
	if (k->npacks > 0) {
		rix_id *p = rix_realloc(im->sec[0].p, (size_t)packs_total * sizeof(rix_id));
		if (p == NULL)
			return rix_error_set(RIX_ENOMEM, "master index: out of memory for the pack table");
		im->sec[0].p = p;
		memcpy(p + im->npacks, k->packs, k->npacks * sizeof(rix_id));
	}
	next->packs = im->sec[0].p;
	next->npacks = (uint32_t)packs_total;
	im->sec[0].p = NULL;
	/* A pack named by the image's files and a new one (an interrupted prune's state): asked
	 * before the tables are built, as bulk_finish does, so its table is not on top of them. */
	int rep = k->npacks > 0 ? rix__packs_repeat(next->packs, next->npacks) : 0;
	if (rep < 0)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	size_t sec = 1;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		struct frozen *tab = NULL;
		if (im->count[t] > 0) {
			if ((tab = rix_calloc(1, sizeof(*tab))) == NULL)
				return rix_error_set(RIX_ENOMEM, "master index: out of memory");
			*tab = (struct frozen){ .buckets = im->sec[sec].p, .entries = im->sec[sec + 1].p,
						.fp = im->sec[sec + 2].p, .nb = im->nb[t], .count = im->count[t] };
			im->sec[sec].p = im->sec[sec + 1].p = im->sec[sec + 2].p = NULL; /* tab's (next's) from here */
			sec += 3;
			next->frozen[t] = tab;
		}
		if (k->n[t] == 0)
			continue;
		for (size_t i = 0; i < k->n[t]; i++)
			k->e[t][i].loc.pack += im->npacks;
		int rc;
		if (tab == NULL) {
			rc = rix__frozen_in_place(&next->frozen[t], k->e[t], (uint32_t)k->n[t], seed, workers);
			if (rc == 0) {
				k->e[t] = NULL; /* the table's now */
				k->n[t] = k->cap[t] = 0;
			}
		} else if (rix__frozen_insert_fits(tab, k->n[t])) {
			struct frozen *same;
			rc = rix__frozen_insert(&same, tab, k->e[t], (uint32_t)k->n[t], seed, true);
		} else {
			struct frozen flat = { .entries = k->e[t], .count = (uint32_t)k->n[t] };
			struct merge_src src[2] = { { tab, NULL, 0 }, { &flat, NULL, 0 } };
			struct frozen *built;
			rc = rix__frozen_build(&built, src, 2, seed);
			if (rc == 0) {
				rix__frozen_free(tab);
				next->frozen[t] = built;
			}
		}
		if (rc != 0)
			return rc;
	}
	for (int t = 0; t < RIX_BLOB_TYPES && rep > 0; t++)
		(void)rix__frozen_drop_same(next->frozen[t], next->packs);
	return 0;
}

int rix_master_index_install(rix_master_index *mi, rix_master_image *im)
{
	int rc = rix_master_image_check(im);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&mi->wmu);
	struct bulk *k = &mi->bulk;
	pthread_mutex_lock(&k->bmu);
	struct mstate *cur = atomic_load(&mi->state);
	bool empty = cur->npacks == 0 && mi->nindex_ids == 0 && mi->nseparate == 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		empty = empty && cur->frozen[t] == NULL;
	struct mstate *next = NULL;
	rix_id *nids = NULL;
	if (!empty) {
		rc = rix_error_set(RIX_EINVAL, "master index: an image installs only into an empty master index");
		goto done;
	}
	if (mi->dedup_only || rix__idcollect_count(k->dids) > 0) { /* the batches' data blob IDs would have no place */
		rc = rix_error_set(RIX_EINVAL, "master index: an image does not install into a dedup-only "
					       "master index (load its index files instead)");
		goto done;
	}
	next = rix_calloc(1, sizeof(*next));
	nids = rix_malloc(((size_t)im->nids + k->nids + 1) * sizeof(rix_id));
	if (next == NULL || nids == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory");
		goto done;
	}
	if (im->nids)
		memcpy(nids, im->ids, (size_t)im->nids * sizeof(rix_id));
	if (k->nids)
		memcpy(nids + im->nids, k->ids, k->nids * sizeof(rix_id));
	/* From here the image's arrays move to next, whatever happens: the image is spent. */
	im->allocated = false;
	rc = build_state(next, im, k, im->seed, mi->workers);
	if (rc != 0)
		goto done;
	/* No table uses the seed yet (the index is empty; the recent table has its own): the
	 * image's tables were built with theirs. Readers see it through the state's publication. */
	mi->seed = im->seed;
	rix__master_index_publish(mi, cur, next, nids, (size_t)im->nids + k->nids, false);
	next = NULL;
	nids = NULL;
	rix__bulk_clear(k);
done:
	if (rc != 0 && !im->allocated) /* a failure after the image was taken apart: as bulk_finish's */
		rix__bulk_clear(k);
	for (size_t j = 0; !im->allocated && j < im->nsec; j++) { /* what build_state did not take */
		rix_free(im->sec[j].p);
		im->sec[j].p = NULL;
	}
	rix__mstate_free(next);
	rix_free(nids);
	pthread_mutex_unlock(&k->bmu);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

/* ---- Accessors, free ------------------------------------------------------------------------ */

const void *rix_master_image_desc(size_t *n, const rix_master_image *im)
{
	*n = im->ndesc;
	return im->desc;
}

rix_image_section *rix_master_image_sections(size_t *n, rix_master_image *im)
{
	*n = im->nsec;
	return im->sec;
}

const rix_id *rix_master_image_index_ids(size_t *n, const rix_master_image *im)
{
	*n = im->nids;
	return im->ids;
}

size_t rix_master_image_blobs(const rix_master_image *im)
{
	size_t n = 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		n += im->count[t];
	return n;
}

void rix_master_image_free(rix_master_image *im)
{
	if (im == NULL)
		return;
	if (im->mi != NULL) {
		pthread_mutex_lock(&im->mi->pin_mu);
		im->mi->pinned = NULL;
		pthread_cond_broadcast(&im->mi->pin_cv);
		pthread_mutex_unlock(&im->mi->pin_mu);
	} else if (im->allocated) {
		for (size_t k = 0; k < im->nsec; k++)
			rix_free(im->sec[k].p);
	}
	rix_free(im->desc);
	rix_free(im);
}
