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
 *   | order mark 0x01020304      4     |          | set[s]     the rix_idset's block  \ per slot s
 *   | version                    4     |          | locs[s]    packed locations       | with
 *   | layout (sizes)             4     |          | dups[s]    second locations       | count > 0
 *   | blob types, scheme, 0  4 + 4 + 4 |          | filter[s]  a byte an ID           /
 *   | npacks, nids               4 + 4 |          +--------------------------------------+
 *   | count[s]                   4 x 4 |  slots s: each type's table, then each type's top
 *   | table[s]: ranked desc    136 x 4 |  the table's shape (ranked.h: widths, sizes, the set's)
 *   | index file IDs             32 x nids
 *   +----------------------------------+
 *
 * The sections are the ranked tables (ranked.h) and the global pack table as they lie: writing
 * is a few large writes, reading is a few large reads straight into the arrays the installed
 * state then owns (no parse, no sort, no copy). The image is therefore tied to this build's
 * layout: the descriptor says which (version, sizes, the ranked table's scheme); any difference
 * refuses the image (RIX_ECORRUPT), and the caller loads the index files instead. Changing the
 * set's layout means bumping IMAGE_VERSION; the ranked table's filter or packing,
 * RIX__RANKED_SCHEME. The tables are keyed by the IDs' own bits (no
 * hash seed); an import is checked whole before a lookup trusts it (rix__ranked_import).
 *
 * Exporting pins the published state (mi->pinned): a merge or bulk load publishing meanwhile
 * waits, before freeing that state, until the image is freed, so that a thread may write the
 * image while lookups and even loads go on. Only a state made of merged index files exports:
 * one with separate indexes or blobs this process stored (their index files are recorded among
 * the IDs but their entries are not in the tables) is refused.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "entry_collect.h"
#include "index_internal.h"
#include "master_index_internal.h"
#include "ranked.h"

#define IMAGE_MAGIC "rixmimg"  /* 8 bytes with its NUL */
#define IMAGE_VERSION 6u /* 2: the tables' fingerprints; 3: the multiply-fold hash; 4: ranked tables; 5: tops;
			  * 6: the set's extra bytes (the locations beside its tails) */
#define IMAGE_ORDER 0x01020304u
#define TABLE_DESC_BYTES (RIX__RANKED_DESC_WORDS * 8u)
/* A slot a ranked table: s < RIX_BLOB_TYPES the table of type s, then the top of type s - RIX_BLOB_TYPES. */
#define SLOTS (2 * RIX_BLOB_TYPES)
#define DESC_FIXED (40u + SLOTS * (4u + TABLE_DESC_BYTES)) /* bytes before the index file IDs */
#define MAX_SECTIONS (1 + RIX__RANKED_SECTIONS * SLOTS)

/* Sizes of the layout, in one word: a build that lays the tables out otherwise differs. */
#define LAYOUT_WORD                                                                                    \
	((uint32_t)sizeof(rix_loc) | (uint32_t)sizeof(rix_id) << 8 | (uint32_t)RIX__RANKED_DESC_WORDS << 16 |    \
	 (uint32_t)RIX__RANKED_SECTIONS << 24)

struct rix_master_image {
	rix_master_index *mi; /* export: the index whose state is pinned; NULL for an import */
	uint8_t *desc;
	size_t ndesc;
	uint32_t npacks, nids;
	uint32_t count[SLOTS];
	uint64_t tdesc[SLOTS][RIX__RANKED_DESC_WORDS];
	const rix_id *ids; /* into desc */
	rix_image_section sec[MAX_SECTIONS];
	size_t nsec;
	bool allocated; /* import: the section arrays are this image's (until installed) */
	/* import, once checked: the tables made of the sections (which they then own) */
	struct rix__ranked *tab[SLOTS];
	bool checked;
	bool rebuilt; /* install built a table again (rix_master_image_rebuilt) */
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

/* The sections an image of these counts has, pointing nowhere yet (sizes only). */
static int lay_out_sections(rix_master_image *im)
{
	im->nsec = 0;
	im->sec[im->nsec++] = (rix_image_section){ NULL, (size_t)im->npacks * sizeof(rix_id) };
	for (int t = 0; t < SLOTS; t++) {
		if (im->count[t] == 0)
			continue;
		size_t size[RIX__RANKED_SECTIONS];
		int rc = rix__ranked_section_sizes(im->tdesc[t], size);
		if (rc != 0)
			return rc;
		for (int k = 0; k < RIX__RANKED_SECTIONS; k++)
			im->sec[im->nsec++] = (rix_image_section){ NULL, size[k] };
	}
	return 0;
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
		im->npacks = st->npacks;
		im->nids = (uint32_t)mi->nindex_ids;
		const void *tsec[SLOTS][RIX__RANKED_SECTIONS];
		size_t tsize[SLOTS][RIX__RANKED_SECTIONS];
		uint8_t *d = im->desc;
		memset(d, 0, DESC_FIXED);
		memcpy(d, IMAGE_MAGIC, 8);
		put32(d + 8, IMAGE_ORDER);
		put32(d + 12, IMAGE_VERSION);
		put32(d + 16, LAYOUT_WORD);
		put32(d + 20, RIX_BLOB_TYPES);
		put32(d + 24, RIX__RANKED_SCHEME);
		put32(d + 32, im->npacks);
		put32(d + 36, im->nids);
		for (int t = 0; t < SLOTS; t++) {
			const struct rix__ranked *tab =
				t < RIX_BLOB_TYPES ? st->table[t] : st->top[t - RIX_BLOB_TYPES];
			im->count[t] = rix__ranked_count(tab);
			put32(d + 40 + 4 * t, im->count[t]);
			if (im->count[t] == 0)
				continue;
			rix__ranked_export(tab, im->tdesc[t], tsec[t], tsize[t]);
			for (unsigned w = 0; w < RIX__RANKED_DESC_WORDS; w++)
				put64(d + 40 + 4 * SLOTS + TABLE_DESC_BYTES * t + 8 * w, im->tdesc[t][w]);
		}
		if (im->nids)
			memcpy(d + DESC_FIXED, mi->index_ids, (size_t)im->nids * sizeof(rix_id));
		im->ids = (const rix_id *)(void *)(d + DESC_FIXED);
		rc = lay_out_sections(im); /* the sizes the export gave, as an import will ask them */
		size_t k = 0;
		im->sec[k++].p = st->packs;
		for (int t = 0; rc == 0 && t < SLOTS; t++)
			for (int j = 0; im->count[t] > 0 && j < RIX__RANKED_SECTIONS; j++, k++) {
				im->sec[k].p = (void *)(uintptr_t)tsec[t][j];
				if (im->sec[k].n != tsize[t][j])
					rc = rix_error_set(RIX_ECORRUPT, "master index: a table exports other sizes than it has");
			}
		if (rc != 0) {
			mi->pinned = NULL;
			im->mi = NULL;
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
	    get32(d + 20) != RIX_BLOB_TYPES || get32(d + 24) != RIX__RANKED_SCHEME || get32(d + 28) != 0)
		return rix_error_set(RIX_ECORRUPT, "master image: made by a build of another layout");
	uint32_t npacks = get32(d + 32), nids = get32(d + 36);
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
	im->npacks = npacks;
	im->nids = nids;
	im->ids = (const rix_id *)(void *)(im->desc + DESC_FIXED);
	int rc = 0;
	for (int t = 0; rc == 0 && t < SLOTS; t++) {
		im->count[t] = get32(d + 40 + 4 * t);
		for (unsigned w = 0; w < RIX__RANKED_DESC_WORDS; w++)
			im->tdesc[t][w] = get64(d + 40 + 4 * SLOTS + TABLE_DESC_BYTES * t + 8 * w);
		/* count: the distinct IDs (the descriptor's first word) and the second locations */
		bool ok = im->count[t] == 0 || (npacks > 0 && im->tdesc[t][0] > 0 &&
						im->tdesc[t][0] + im->tdesc[t][1] == im->count[t]);
		if (!ok)
			rc = rix_error_set(RIX_ECORRUPT, "master image: a table's counts do not agree");
	}
	for (int t = 0; rc == 0 && t < RIX_BLOB_TYPES; t++)
		if (im->count[RIX_BLOB_TYPES + t] > 0 && im->count[t] == 0) /* a top sits on a table */
			rc = rix_error_set(RIX_ECORRUPT, "master image: a top without its table");
	if (rc == 0)
		rc = lay_out_sections(im);
	if (rc != 0) {
		rix_master_image_free(im);
		return rc;
	}
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
		rix__advise_huge(im->sec[k].p, im->sec[k].n); /* the pack table too: read at random */
	}
	im->allocated = true;
	return 0;
}

/*
 * Checks what the sections hold before the tables are trusted with lookups, by making the tables
 * of them (rix__ranked_import checks all a lookup relies on: the set's shape and directory, the
 * widths, every pack number inside the pack table). A table made owns its sections (which the
 * image's section list still shows); a type whose sections fail keeps them as read, and a later
 * check asks again of the types without a table.
 */
int rix_master_image_check(rix_master_image *im)
{
	if (im->mi != NULL || !im->allocated)
		return rix_error_set(RIX_EINVAL, "master image: not an import with its sections read");
	if (im->checked)
		return 0;
	size_t k = 1;
	for (int t = 0; t < SLOTS; t++) {
		if (im->count[t] == 0)
			continue;
		void *sec[RIX__RANKED_SECTIONS];
		size_t size[RIX__RANKED_SECTIONS];
		for (int j = 0; j < RIX__RANKED_SECTIONS; j++) {
			sec[j] = im->sec[k + j].p;
			size[j] = im->sec[k + j].n;
		}
		k += RIX__RANKED_SECTIONS;
		if (im->tab[t] != NULL)
			continue;
		struct rix__ranked *tab;
		int rc = rix__ranked_import(&tab, im->tdesc[t], sec, size, im->npacks);
		/* (its count is the descriptor's: parse compared it with the table's words) */
		if (rc != 0)
			return rc == RIX_ECORRUPT ? rix_error_set(RIX_ECORRUPT, "master image: a %s table is not well formed",
								 t % RIX_BLOB_TYPES == RIX_BLOB_DATA ? "data" : "tree")
						  : rc;
		im->tab[t] = tab;
	}
	im->checked = true;
	return 0;
}

/*
 * The image's tables, with the entries of the batches committed meanwhile (the index files
 * listed since the image was made) merged into them: a table with new entries is built again
 * from its entries and theirs (the ranked table is immutable: a full build, its peak the old
 * table's and the collection's while the old entries are collected). Caller holds wmu and bmu; on
 * failure the tables and collections taken so far are next's (freed with it), the rest the image's.
 */
static int build_state(struct mstate *next, rix_master_image *im, struct bulk *k, unsigned workers)
{
	uint64_t packs_total = (uint64_t)im->npacks + k->npacks;
	if (packs_total > 0xFFFFFFFEu || rix__ecollect_count(k->c[0]) > 0xFFFFFFFEu ||
	    rix__ecollect_count(k->c[1]) > 0xFFFFFFFEu)
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
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		int rc = rix__ecollect_shift_packs(k->c[t], im->npacks); /* (failing: k's and im's as they were) */
		if (rc != 0)
			return rc;
		struct rix__ranked *tab = im->tab[t], *top = im->tab[RIX_BLOB_TYPES + t];
		im->tab[t] = im->tab[RIX_BLOB_TYPES + t] = NULL; /* next's from here */
		struct rix__ecollect *c = k->c[t]; /* the build's from here */
		k->c[t] = NULL;
		/* The image's tables (no reader sees them): those not carried over are freed as soon
		 * as their entries are copied out. (A type the image had none of gets a table of the
		 * new entries alone, as cheap to build again next time as a top: not counted.) */
		bool rebuilt;
		rc = rix__mstate_add(next, (rix_blob_type)t, tab, top, true, c, rep > 0 ? next->packs : NULL, workers,
				     &rebuilt);
		im->rebuilt = im->rebuilt || rebuilt;
		if (rc != 0)
			return rc;
	}
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
		empty = empty && cur->table[t] == NULL && cur->top[t] == NULL;
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
	rc = build_state(next, im, k, mi->workers);
	if (rc != 0)
		goto done;
	rix__master_index_publish(mi, cur, next, nids, (size_t)im->nids + k->nids, false);
	next = NULL;
	nids = NULL;
	rix__bulk_clear(k);
done:
	if (rc != 0 && !im->allocated) /* a failure after the image was taken apart: as bulk_finish's */
		rix__bulk_clear(k);
	if (!im->allocated) { /* what build_state did not take: the pack table, tables */
		rix_free(im->sec[0].p);
		for (int t = 0; t < SLOTS; t++) {
			rix__ranked_free(im->tab[t]);
			im->tab[t] = NULL;
		}
		for (size_t j = 0; j < im->nsec; j++)
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
	for (int t = 0; t < SLOTS; t++)
		n += im->count[t];
	return n;
}

bool rix_master_image_rebuilt(const rix_master_image *im)
{
	return im != NULL && im->rebuilt;
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
		rix_free(im->sec[0].p);
		size_t k = 1;
		for (int t = 0; t < SLOTS; t++) {
			if (im->count[t] == 0)
				continue;
			if (im->tab[t] != NULL) /* checked: the table owns its sections */
				rix__ranked_free(im->tab[t]);
			else
				for (int j = 0; j < RIX__RANKED_SECTIONS; j++)
					rix_free(im->sec[k + j].p);
			k += RIX__RANKED_SECTIONS;
		}
	}
	rix_free(im->desc);
	rix_free(im);
}
