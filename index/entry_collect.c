/*
 * index/entry_collect.c — rix__ecollect (entry_collect.h): a ranked table's entries collected in
 * 43 bytes each, in 256 parts by the ID's first byte, and each part's sort.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "entry_collect.h"
#include "../common/pool.h"

/* id_sort.h for the records: the ID's byte d (d >= 1) is the record's byte 11 + d. */
struct erec {
	uint8_t b[RIX__EREC];
};
void rix__erec_sort_from(struct erec *a, size_t n, unsigned d);
#define SORT_REC struct erec
#define SORT_ID(r) ((r).b + RIX__EREC_LOC - 1)
#define SORT_FN(name) rix__erec_##name
#define SORT_FROM_ONLY
#include "id_sort.h"
#undef SORT_REC
#undef SORT_ID
#undef SORT_FN
#undef SORT_FROM_ONLY

int rix__ecollect_new(struct rix__ecollect **out)
{
	*out = rix_calloc(1, sizeof(**out));
	return *out != NULL ? 0 : rix_error_set(RIX_ENOMEM, "master index: out of memory");
}

void rix__ecollect_free(struct rix__ecollect *c)
{
	if (c == NULL)
		return;
	rix__parts_release(c->part);
	rix_free(c->esc);
	rix_free(c);
}

size_t rix__ecollect_count(const struct rix__ecollect *c)
{
	return c != NULL ? c->n : 0;
}

int rix__ecollect_reserve(struct rix__ecollect *c, size_t n)
{
	/* A part gets about n / 256 of random IDs (a few times the square root either way): a
	 * sixteenth more, and 64 for small n. */
	size_t each = n / 256, more = each + each / 16 + 64;
	for (unsigned b = 0; b < 256 && n > 0; b++) {
		int rc = rix__part_grow(&c->part[b], (c->part[b].n + more) * RIX__EREC);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static inline bool fits(const rix_loc *l)
{
	return l->pack < RIX__EC_ESCAPE && l->offset < (1u << RIX__EC_OB) && l->length < (1u << RIX__EC_LB) &&
	       l->uncompressed_length < (1u << RIX__EC_UB);
}

static int esc_room(struct rix__ecollect *c, size_t more)
{
	if (c->nesc + more <= c->esc_cap)
		return 0;
	if (c->nesc + more > UINT32_MAX)
		return rix_error_set(RIX_ELIMIT, "master index: too many entries outside the packed location");
	size_t cap = c->esc_cap ? c->esc_cap : 64;
	while (cap < c->nesc + more)
		cap *= 2;
	rix_loc *q = rix_realloc(c->esc, cap * sizeof(*q));
	if (q == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %zu locations", cap);
	c->esc = q;
	c->esc_cap = cap;
	return 0;
}

int rix__ecollect_room(struct rix__ecollect *c, const struct fentry *e, size_t n, uint32_t pack_add)
{
	size_t cnt[256], nesc = 0;
	memset(cnt, 0, sizeof(cnt));
	for (size_t i = 0; i < n; i++) {
		cnt[e[i].id.b[0]]++;
		rix_loc l = e[i].loc;
		l.pack += pack_add;
		nesc += !fits(&l); /* (pack numbers stay below 2^32: the caller's limit) */
	}
	for (unsigned b = 0; b < 256; b++) {
		int rc = cnt[b] > 0 ? rix__part_grow(&c->part[b], (c->part[b].n + cnt[b]) * RIX__EREC) : 0;
		if (rc != 0)
			return rc;
	}
	return esc_room(c, nesc);
}

/* Writes loc into rec's 12 location bytes (an escape when it does not fit; room is there). */
static inline void put_loc(struct rix__ecollect *c, uint8_t *rec, const rix_loc *l)
{
	uint64_t lo;
	uint32_t hi;
	if (__builtin_expect(fits(l), 1)) {
		lo = (uint64_t)l->pack | (uint64_t)l->offset << RIX__EC_PB |
		     (uint64_t)l->length << (RIX__EC_PB + RIX__EC_OB);
		hi = l->length >> (64 - RIX__EC_PB - RIX__EC_OB) | l->uncompressed_length << 8;
	} else {
		lo = RIX__EC_ESCAPE | (uint64_t)c->nesc << RIX__EC_PB;
		hi = 0;
		c->esc[c->nesc++] = *l;
	}
	store64_le(rec, lo);
	rec[8] = (uint8_t)hi;
	rec[9] = (uint8_t)(hi >> 8);
	rec[10] = (uint8_t)(hi >> 16);
	rec[11] = (uint8_t)(hi >> 24);
	c->orp |= l->pack;
	c->oro |= l->offset;
	c->orl |= l->length;
	c->oru |= l->uncompressed_length;
}

void rix__ecollect_put(struct rix__ecollect *c, const struct fentry *e, size_t n, uint32_t pack_add)
{
	for (size_t i = 0; i < n; i++) {
		struct rix__part *pt = &c->part[e[i].id.b[0]];
		uint8_t *rec = pt->p + pt->n * RIX__EREC;
		rix_loc l = e[i].loc;
		l.pack += pack_add;
		put_loc(c, rec, &l);
		memcpy(rec + RIX__EREC_LOC, e[i].id.b + 1, RIX_ID_SIZE - 1);
		pt->n++;
	}
	c->n += n;
}

int rix__ecollect_add(struct rix__ecollect *c, const struct fentry *e, size_t n, uint32_t pack_add)
{
	int rc = rix__ecollect_room(c, e, n, pack_add);
	if (rc == 0)
		rix__ecollect_put(c, e, n, pack_add);
	return rc;
}

int rix__ecollect_shift_packs(struct rix__ecollect *c, uint32_t add)
{
	if (c == NULL || add == 0)
		return 0;
	/* Room first for the records that stop fitting, so that a failure changes nothing. */
	size_t more = 0;
	for (unsigned b = 0; b < 256; b++)
		for (size_t i = 0; i < c->part[b].n; i++) {
			const uint8_t *rec = rix__ecollect_rec(c, b, i);
			uint32_t p = (uint32_t)rix__ecollect_lo(rec) & RIX__EC_ESCAPE;
			more += p != RIX__EC_ESCAPE && p + (uint64_t)add >= RIX__EC_ESCAPE;
		}
	int rc = esc_room(c, more);
	if (rc != 0)
		return rc;
	c->orp = 0;
	for (unsigned b = 0; b < 256; b++) {
		struct rix__part *pt = &c->part[b];
		for (size_t i = 0; i < pt->n; i++) {
			uint8_t *rec = pt->p + i * RIX__EREC;
			uint64_t lo = rix__ecollect_lo(rec);
			if (((uint32_t)lo & RIX__EC_ESCAPE) == RIX__EC_ESCAPE) { /* stays where it is */
				rix_loc *e = &c->esc[(uint32_t)(lo >> RIX__EC_PB)];
				e->pack += add;
				c->orp |= e->pack;
				continue;
			}
			rix_loc l;
			rix__ecollect_loc(c, rec, &l);
			l.pack += add;
			put_loc(c, rec, &l); /* an escape now, if it no longer fits */
		}
	}
	return 0;
}

/* ---- The parts' sorts ---------------------------------------------------------------------- */

static inline bool place_less(const rix_loc *a, const rix_loc *b)
{
	return a->pack != b->pack ? a->pack < b->pack : a->offset < b->offset;
}

static int cmp_place(const void *a, const void *b, void *arg)
{
	rix_loc x, y;
	rix__ecollect_loc(arg, a, &x);
	rix__ecollect_loc(arg, b, &y);
	return place_less(&x, &y) ? -1 : place_less(&y, &x);
}

/* Records of one ID in place order: a few by insertion, many (one blob listed in very many
 * packs: an index file's choice) by qsort, so that no index makes the build quadratic. */
static void sort_places(const struct rix__ecollect *c, struct erec *e, size_t n)
{
	if (n > 32) {
		qsort_r(e, n, sizeof(*e), cmp_place, (void *)c);
		return;
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && cmp_place(e[j].b, e[j - 1].b, (void *)c) < 0; j--) {
			struct erec t = e[j];
			e[j] = e[j - 1];
			e[j - 1] = t;
		}
}

struct sort_job {
	struct rix__ecollect *c;
	size_t *distinct;
	atomic_uint next;
};

static void *sort_worker(void *arg)
{
	struct sort_job *j = arg;
	for (;;) {
		unsigned b = atomic_fetch_add(&j->next, 1);
		if (b >= 256)
			return NULL;
		struct rix__part *pt = &j->c->part[b];
		struct erec *e = (struct erec *)(void *)pt->p;
		size_t n = pt->n, nd = 0, run = 0;
		if (n > 1)
			rix__erec_sort_from(e, n, 1);
		for (size_t i = 0; i <= n; i++) {
			if (i == n || i == 0 || memcmp(e[i - 1].b + RIX__EREC_LOC, e[i].b + RIX__EREC_LOC, RIX_ID_SIZE - 1)) {
				if (i - run > 1) /* the run of the ID before: its records in place order */
					sort_places(j->c, e + run, i - run);
				if (i == n)
					break;
				nd++;
				run = i;
			}
		}
		j->distinct[b] = nd;
	}
}

void rix__ecollect_sort(struct rix__ecollect *c, unsigned workers, size_t distinct[256])
{
	struct sort_job j = { .c = c, .distinct = distinct };
	atomic_init(&j.next, 0);
	rix__pool_run(rix__pool_size(workers, 64), sort_worker, &j);
}
