/*
 * index/idset_build.c — building a rix_idset (layout: idset.c's top comment; struct and helpers:
 * idset_internal.h): from an array taken over (rix_idset_build_owned, the sort included), from
 * a copy, and from the records idset_collect.c gathers.
 *
 * Building (rix_idset_build_owned): sort the caller's array in place (MSD radix sort on the
 * bytes, insertion sort below 48 IDs; from 64Ki IDs, the 256 sub-sorts after the first level
 * run on one worker per CPU); pass 1 counts the distinct IDs (and checks the order);
 * the shape is chosen; pass 2 counts the blocks that will overflow and the longest run. Up to
 * here nothing is written but the sort, so a failure leaves the caller its IDs. Then the set
 * is built inside the array's own allocation, so that the build never holds more than the
 * array's 32 bytes an ID: phase A packs each distinct ID's bytes 1..31 into 31-byte records
 * at the front (record j at 31 j, never past ID j being read; byte 0 is kept as 256 counts,
 * the IDs being sorted), which frees about 1 byte an ID at the end, room for the directory,
 * mid and ov arrays (0.3-0.9 bytes an ID for n >= 1M; a small set's array is grown first,
 * before phase A, when they don't fit); phase B walks the records, writing the tails at the
 * front (tail j at j * tail <= 31 j) and the directory and mid bits into that room; the
 * directory and the rest then move down behind the tails and the block is shrunk. Once phase
 * A begins nothing can fail (a failed shrink keeps the larger block).
 */
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "hash.h"
#include "index_internal.h"
#include "idset_internal.h"

/* ---- Building ------------------------------------------------------------------------------- */

/* Picks k and G (see the top comment): the least bytes, with blocks that rarely overflow. */
static void choose_shape(size_t n, unsigned *k_out, unsigned *gshift_out)
{
	unsigned k0 = 63u - (unsigned)__builtin_clzll((unsigned long long)n);
	double best = -1;
	*k_out = k0;
	*gshift_out = 0;
	/* k >= 1, so that kb >= 1 and a tail is at most 31 bytes (the build relies on it). */
	for (unsigned k = k0 > 2 ? k0 - 1 : 1; k <= k0 + 1 && k <= 32; k++) {
		unsigned kb = (k + 7) / 8, w = 8 * kb - k;
		double lambda = (double)n / (double)((uint64_t)1 << k);
		for (unsigned gs = 0; gs <= MAX_GSHIFT && gs <= k; gs++) {
			double g = (double)(1u << gs), mu = g * lambda;
			double slack = (double)CODE_BITS - g - mu - 4;
			if (slack < 0 || slack * slack < 16 * mu) /* fill + 4 sd over the code */
				continue;
			double blocks = (double)((uint64_t)1 << (k - gs));
			double cost = (double)n * (8.0 * (32 - kb) + w) + blocks * 512;
			if (best < 0 || cost < best) {
				best = cost;
				*k_out = k;
				*gshift_out = gs;
			}
		}
	}
}

/* Writes a run of c ones into the block from bit q. */
static void set_ones(uint64_t *blk, unsigned q, size_t c)
{
	while (c > 0) {
		unsigned bit = q & 63;
		size_t take = 64 - bit < c ? 64 - bit : c;
		uint64_t mask = take == 64 ? ~0ull : ((1ull << take) - 1) << bit;
		blk[q >> 6] |= mask;
		q += (unsigned)take;
		c -= take;
	}
}

struct builder {
	struct rix_idset *s;
	uint32_t cnt[1u << MAX_GSHIFT]; /* IDs per bucket of the block being filled */
	size_t blkno;                   /* that block */
	size_t base;                    /* IDs before it */
	size_t total;                   /* IDs in it so far */
	size_t ov_at;                   /* u32s of ov used */
};

/* Writes block bd->blkno from its counts and moves to the next. */
static void finish_block(struct builder *bd)
{
	struct rix_idset *s = bd->s;
	size_t g = (size_t)1 << s->gshift;
	uint64_t *blk = s->dir + bd->blkno * BLOCK_WORDS;
	if (g + bd->total <= CODE_BITS) {
		blk[0] = (uint64_t)bd->base;
		unsigned q = CODE_START;
		for (size_t j = 0; j < g; j++) {
			set_ones(blk, q, bd->cnt[j]);
			q += bd->cnt[j] + 1;
		}
	} else {
		blk[0] = (uint64_t)bd->base | OV_FLAG;
		blk[1] = bd->ov_at;
		uint32_t at = (uint32_t)bd->base;
		for (size_t j = 0; j < g; j++) {
			s->ov[bd->ov_at++] = at;
			at += bd->cnt[j];
		}
		s->ov[bd->ov_at++] = at;
	}
	memset(bd->cnt, 0, g * sizeof(bd->cnt[0]));
	bd->base += bd->total;
	bd->total = 0;
	bd->blkno++;
}


static inline size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Offset of the directory in a block at base whose mid array ends at offset mid_end: the
 * first offset from mid_end that is 64-byte aligned in memory. */
static inline size_t dir_offset(const uint8_t *base, size_t mid_end)
{
	return (size_t)(align_up((uintptr_t)base + mid_end, 64) - (uintptr_t)base);
}

int rix_idset_build_owned(rix_idset **out, rix_id *ids, size_t n, unsigned flags)
{
	*out = NULL;
	if ((flags & ~(unsigned)RIX_IDSET_SORTED) != 0)
		return rix_error_set(RIX_EINVAL, "id set: unknown flags 0x%x", flags);
	return rix__idset_build_owned(out, ids, n, flags, 0);
}

/* Pass 2 over the distinct IDs' buckets in ascending order: the blocks that will overflow, the
 * longest run (s->ov_blocks, s->longest). */
struct shape_scan {
	struct rix_idset *s;
	size_t blk_total, run;
	uint64_t cur_blk, cur_b;
};

static inline void scan_add(struct shape_scan *sc, uint64_t b)
{
	struct rix_idset *s = sc->s;
	size_t g = (size_t)1 << s->gshift;
	if ((b >> s->gshift) != sc->cur_blk) {
		s->ov_blocks += g + sc->blk_total > CODE_BITS;
		sc->cur_blk = b >> s->gshift;
		sc->blk_total = 0;
	}
	sc->blk_total++;
	if (b != sc->cur_b) {
		sc->cur_b = b;
		sc->run = 0;
	}
	if (++sc->run > s->longest)
		s->longest = sc->run;
}

static inline void scan_end(struct shape_scan *sc)
{
	sc->s->ov_blocks += ((size_t)1 << sc->s->gshift) + sc->blk_total > CODE_BITS;
}

/* The shape of a set of nd distinct IDs (k, G and the fields they fix); mid8: at least 8 mid
 * bits (RIX__IDSET_MID8); extra: the owner's bytes after each tail. */
static void set_shape(struct rix_idset *s, size_t nd, bool mid8, unsigned extra)
{
	choose_shape(nd, &s->k, &s->gshift);
	s->n = nd;
	s->kb = (s->k + (mid8 ? 15 : 7)) / 8;
	s->tail = RIX_ID_SIZE - s->kb;
	s->extra = extra;
	s->stride = s->tail + extra;
	s->w = 8 * s->kb - s->k;
	s->nblocks = (size_t)1 << (s->k - s->gshift);
	s->level = rix__idset_cpu_level();
}

/* Bytes of a record of phase A: the ID's bytes 1..31 and the owner's extra ones. */
static inline size_t rec_size(const struct rix_idset *s)
{
	return RIX_ID_SIZE - 1 + s->extra;
}

/* Bytes the block needs while phase B runs: the records, then mid, directory, ov. */
static size_t build_need(const struct rix_idset *s)
{
	size_t g = (size_t)1 << s->gshift;
	size_t rec = s->n * rec_size(s);
	size_t mid = s->w ? (s->n * s->w + 7) / 8 + 8 : 0;
	return align_up(rec, 8) + mid + 63 + s->nblocks * 64 + s->ov_blocks * (g + 1) * sizeof(uint32_t);
}

/*
 * Phase B and the end of a build: base[0, have) holds s->n distinct IDs in ascending order as
 * records of their bytes 1..31 and the owner's extra bytes (record j at j rec_size), cnt0[c] of
 * them with byte 0 equal to c, and have >= build_need(s). Writes the tails (each with its extra
 * bytes) at the front and the directory and mid bits into the room behind the records, moves
 * them down behind the tails and shrinks the block. Cannot fail (a failed shrink keeps the
 * larger block).
 */
static void build_from_records(struct rix_idset *s, uint8_t *base, size_t have, const size_t cnt0[256])
{
	size_t nd = s->n, g = (size_t)1 << s->gshift, rsz = rec_size(s);
	size_t rec = nd * rsz;
	size_t tails = nd * s->stride;
	size_t mid = s->w ? (nd * s->w + 7) / 8 + 8 : 0;
	size_t dir = s->nblocks * 64;
	size_t ov = s->ov_blocks * (g + 1) * sizeof(uint32_t);
	size_t mid_at = align_up(rec, 8);
	size_t dir_at = dir_offset(base, mid_at + mid);
	size_t ov_at = dir_at + dir;
	memset(base + mid_at, 0, ov_at - mid_at);
	s->tails = base;
	s->mid = s->w ? base + mid_at : NULL;
	s->dir = (uint64_t *)(void *)(base + dir_at);
	s->ov = s->ov_blocks ? (uint32_t *)(void *)(base + ov_at) : NULL;

	/*
	 * Phase B: tails (tail j, with its extra bytes, at j * stride <= j * rsz: never past record
	 * j), mid bits, directory. One pass over the records, which runs at the memory's speed only
	 * if nothing in it waits: the bucket is read from the record (not from the ID just stored:
	 * a load spanning two stores waits for both), the mid bits gather in a word stored when
	 * full (a load of bits stored a moment before, at an offset, waits likewise), and a record
	 * is read, and its tail copied, as a fixed number of bytes (32 or 48: `copy`) where the
	 * bytes past it are free (before record j + 1: j (rsz - stride) + rsz >= copy), not by a
	 * call.
	 */
	struct builder build, *bd = &build;
	memset(bd, 0, sizeof(*bd));
	bd->s = s;
	uint8_t id[72] = { 0 }; /* the ID and extra bytes, and room for a copy of 48 from kb */
	const size_t copy = s->extra ? 48 : RIX_ID_SIZE;
	const size_t shrink = rsz - s->stride; /* kb - 1 */
	uint64_t acc = 0; /* mid bits not stored yet: nbits of them */
	unsigned nbits = 0;
	uint8_t *mp = s->mid;
	size_t j = 0;
	for (unsigned c = 0; c < 256; c++) {
		for (size_t e = 0; e < cnt0[c]; e++, j++) {
			const uint8_t *r = base + j * rsz;
			RIX_PREFETCH(r + 1024);
			id[0] = (uint8_t)c;
			if (s->extra) /* (reads at most 16 bytes past the record: the room behind them) */
				memcpy(id + 1, r, RIX_ID_SIZE - 1 + RIX__IDSET_EXTRA_MAX);
			else
				memcpy(id + 1, r, RIX_ID_SIZE - 1);
			uint64_t head = (uint64_t)c << 56 | load64_be(r) >> 8; /* the ID's bytes 0..7 */
			uint64_t b = s->k ? head >> (64 - s->k) : 0;
			while ((b >> s->gshift) != bd->blkno)
				finish_block(bd);
			bd->cnt[b & (g - 1)]++;
			bd->total++;
			if (s->w) {
				uint64_t key = mid_key(s, id);
				acc |= key << nbits;
				nbits += s->w;
				if (nbits >= 64) {
					store64_le(mp, acc);
					mp += 8;
					nbits -= 64;
					acc = key >> (s->w - nbits);
				}
			}
			if (j * shrink + rsz >= copy) {
				if (s->extra)
					memcpy(base + j * s->stride, id + s->kb, 48);
				else
					memcpy(base + j * s->stride, id + s->kb, RIX_ID_SIZE);
			} else {
				memmove(base + j * s->stride, id + s->kb, s->stride);
			}
		}
	}
	if (nbits > 0) /* the last word (the mid array has 8 bytes of room past its bits) */
		store64_le(mp, acc);
	while (bd->blkno < s->nblocks)
		finish_block(bd);

	/* Down behind the tails: mid, then directory and ov (each to a lower offset). */
	size_t mid_to = align_up(tails, 8);
	if (mid)
		memmove(base + mid_to, base + mid_at, mid);
	size_t dir_to = dir_offset(base, mid_to + mid);
	memmove(base + dir_to, base + dir_at, dir + ov);
	size_t final = mid_to + mid + 63 + dir + ov; /* room to realign if the block moves */
	uint8_t *shrunk = final < have ? rix_realloc(base, final) : NULL;
	if (shrunk != NULL) {
		size_t again = dir_offset(shrunk, mid_to + mid);
		if (again != dir_to)
			memmove(shrunk + again, shrunk + dir_to, dir + ov);
		base = shrunk;
		dir_to = again;
		have = final;
	}
	s->tails = base;
	s->tails_size = have;
	s->mid = mid ? base + mid_to : NULL;
	s->dir = (uint64_t *)(void *)(base + dir_to);
	s->ov = s->ov_blocks ? (uint32_t *)(void *)(base + dir_to + dir) : NULL;
}

#define IDS_AHEAD 64 /* IDs ahead of a pass over the array whose lines it requests */

int rix__idset_build_owned(rix_idset **out, rix_id *ids, size_t n, unsigned flags, unsigned workers)
{
	*out = NULL;
	size_t have = n * sizeof(rix_id);
	if ((flags & ~(unsigned)(RIX_IDSET_SORTED | RIX__IDSET_MID8)) != 0)
		return rix_error_set(RIX_EINVAL, "id set: unknown flags 0x%x", flags);
	if (n > 0 && ids == NULL)
		return rix_error_set(RIX_EINVAL, "id set: no array for %zu IDs", n);
	struct rix_idset *s = rix_calloc(1, sizeof(*s));
	if (s == NULL)
		return rix_error_set(RIX_ENOMEM, "id set: out of memory");
	if (!(flags & RIX_IDSET_SORTED))
		rix__idset_sort(ids, n, workers);

	/* Pass 1: distinct IDs; the order (a set built on IDs out of order would answer wrongly,
	 * not fail). The passes over the array request its lines ahead: the hardware's prefetcher
	 * stops at each 4 KiB page. */
	size_t nd = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + IDS_AHEAD < n)
			RIX_PREFETCH(&ids[i + IDS_AHEAD]);
		if (i > 0) {
			int c = tail_cmp(ids[i - 1].b, ids[i].b, RIX_ID_SIZE);
			if (c > 0) {
				rix_free(s);
				return rix_error_set(RIX_EINVAL, "id set: IDs said to be sorted are not (at %zu)", i);
			}
			if (c == 0)
				continue;
		}
		nd++;
	}
	if (nd > RIX_IDSET_MAX_IDS) {
		rix_free(s);
		return rix_error_set(RIX_ELIMIT, "id set: %zu IDs are over the limit of %u", nd, RIX_IDSET_MAX_IDS);
	}
	if (nd == 0) {
		rix_free(ids);
		*out = s;
		return 0;
	}
	set_shape(s, nd, (flags & RIX__IDSET_MID8) != 0, 0);

	/* Pass 2: the blocks that overflow, the longest run. */
	struct shape_scan sc = { .s = s, .cur_b = UINT64_MAX };
	for (size_t i = 0; i < n; i++) {
		if (i + IDS_AHEAD < n)
			RIX_PREFETCH(&ids[i + IDS_AHEAD]);
		if (rix__id_is_new(ids, i))
			scan_add(&sc, bucket_of(ids[i].b, s->k));
	}
	scan_end(&sc);

	/*
	 * The whole set lives in the array's own block. Phase A packs each distinct ID's bytes
	 * 1..31 into records of 31 bytes ([0, rec)), keeping counts of byte 0; the directory,
	 * mid and ov arrays then fit in the room that frees at the end (~1 byte an ID; grown
	 * first, before anything is overwritten, when they don't: small sets). Phase B
	 * (build_from_records) writes the tails at the front and the rest into that room; the rest
	 * then moves down behind the tails and the block is shrunk. Nothing can fail once phase A
	 * has begun.
	 */
	size_t need = build_need(s);
	if (have < need) {
		rix_id *grown = rix_realloc(ids, need);
		if (grown == NULL) {
			rix_free(s);
			return rix_error_set(RIX_ENOMEM, "id set: out of memory for %zu IDs", nd);
		}
		ids = grown;
		have = need;
	}
	uint8_t *base = (uint8_t *)ids;

	/* Phase A: records of bytes 1..31 (record j at 31 j <= 32 i: never past ID i). */
	size_t cnt0[256];
	memset(cnt0, 0, sizeof(cnt0));
	rix_id id;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + IDS_AHEAD < n)
			RIX_PREFETCH(&ids[i + IDS_AHEAD]);
		if (i > 0 && rix__id_eq(&id, &ids[i]))
			continue;
		id = ids[i];
		cnt0[id.b[0]]++;
		memmove(base + j * (RIX_ID_SIZE - 1), id.b + 1, RIX_ID_SIZE - 1);
		j++;
	}
	build_from_records(s, base, have, cnt0);
	*out = s;
	return 0;
}

rix_id *rix_idset_alloc_ids(size_t n)
{
	if (n == 0 || n > SIZE_MAX / sizeof(rix_id))
		return NULL;
	rix_id *a = rix_malloc(n * sizeof(*a));
	if (a != NULL)
		rix__advise_huge(a, n * sizeof(*a));
	return a;
}

int rix_idset_build(rix_idset **out, const rix_id *ids, size_t n)
{
	*out = NULL;
	rix_id *copy = NULL;
	if (n > 0) {
		copy = rix_idset_alloc_ids(n);
		if (copy == NULL)
			return rix_error_set(RIX_ENOMEM, "id set: out of memory for a copy of %zu IDs", n);
		memcpy(copy, ids, n * sizeof(*copy));
	}
	int rc = rix_idset_build_owned(out, copy, n, 0);
	if (rc != 0)
		rix_free(copy);
	return rc;
}

/* ---- Building from records (idset_collect.c, ranked.c) -------------------------------------------- */

int rix__idset_from_records(rix_idset **out, uint8_t *base, size_t have, const size_t cnt0[256], size_t nd, bool mid8,
			    unsigned extra)
{
	*out = NULL;
	if (extra > RIX__IDSET_EXTRA_MAX) {
		rix_free(base);
		return rix_error_set(RIX_EINVAL, "id set: %u extra bytes an ID are over the limit", extra);
	}
	struct rix_idset *s = rix_calloc(1, sizeof(*s));
	if (s == NULL) {
		rix_free(base);
		return rix_error_set(RIX_ENOMEM, "id set: out of memory");
	}
	if (nd == 0) {
		rix_free(base);
		*out = s;
		return 0;
	}
	if (nd > RIX_IDSET_MAX_IDS) {
		rix_free(base);
		rix_free(s);
		return rix_error_set(RIX_ELIMIT, "id set: %zu IDs are over the limit of %u", nd, RIX_IDSET_MAX_IDS);
	}
	set_shape(s, nd, mid8, extra);
	struct shape_scan sc = { .s = s, .cur_b = UINT64_MAX };
	uint8_t head[8];
	size_t r = 0;
	for (unsigned i = 0; i < 256; i++) {
		head[0] = (uint8_t)i;
		for (size_t e = 0; e < cnt0[i]; e++, r++) {
			memcpy(head + 1, base + r * rec_size(s), 7);
			scan_add(&sc, bucket_of(head, s->k));
		}
	}
	scan_end(&sc);
	size_t need = build_need(s);
	if (have < need) { /* a small set: its directory needs more room than the IDs leave */
		uint8_t *grown = rix_realloc(base, need);
		if (grown == NULL) {
			rix_free(base);
			rix_free(s);
			return rix_error_set(RIX_ENOMEM, "id set: out of memory for %zu IDs", nd);
		}
		base = grown;
		have = need;
	}
	build_from_records(s, base, have, cnt0);
	*out = s;
	return 0;
}
