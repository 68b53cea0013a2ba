/*
 * index/idset_collect.c — rix__idcollect (index_internal.h): the IDs a bulk load collects for a
 * rix_idset, 31 bytes each, and the set built from them part by part.
 *
 * The IDs a bulk load collects, before the set is built: 256 parts by the ID's first byte, each
 * holding the other 31 bytes of its IDs in arrival order (31 bytes an ID, not the 32 of a plain
 * array: the first byte is the part's). rix__idset_build_collected sorts one part at a time into
 * the records of phase A (31 bytes each, in the set's own block) and gives the part's memory
 * back to the system at once, so that collection and build together never hold much more than
 * 31 bytes an ID (the block fills as the parts empty).
 *
 * The parts are anonymous mappings (parts.h), given back one at a time.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "hash.h"
#include "index_internal.h"
#include "parts.h"
#include "../common/pool.h"

#define PART_REC (RIX_ID_SIZE - 1)
struct rix__idcollect {
	struct rix__part part[256];
	size_t n;
};

int rix__idcollect_new(struct rix__idcollect **out)
{
	*out = rix_calloc(1, sizeof(**out));
	return *out != NULL ? 0 : rix_error_set(RIX_ENOMEM, "id set: out of memory");
}

void rix__idcollect_free(struct rix__idcollect *c)
{
	if (c == NULL)
		return;
	rix__parts_release(c->part);
	rix_free(c);
}

size_t rix__idcollect_count(const struct rix__idcollect *c)
{
	return c != NULL ? c->n : 0;
}

int rix__idcollect_add(struct rix__idcollect *c, const rix_id *ids, size_t n)
{
	/* Room first, in every part the IDs go to, so that a failure adds none of them. */
	size_t cnt[256];
	memset(cnt, 0, sizeof(cnt));
	for (size_t i = 0; i < n; i++)
		cnt[ids[i].b[0]]++;
	for (unsigned b = 0; b < 256; b++) {
		int rc = cnt[b] > 0 ? rix__part_grow(&c->part[b], (c->part[b].n + cnt[b]) * PART_REC) : 0;
		if (rc != 0)
			return rc;
	}
	for (size_t i = 0; i < n; i++) {
		struct rix__part *pt = &c->part[ids[i].b[0]];
		memcpy(pt->p + pt->n * PART_REC, ids[i].b + 1, PART_REC);
		pt->n++;
	}
	c->n += n;
	return 0;
}

/* The parts' sorts, shared by the workers: part c sorted and written, its duplicates dropped, as
 * records at base + 31 at[c]; distinct[c] of them. */
struct collect_job {
	struct rix__idcollect *c;
	uint8_t *base;
	size_t at[256];
	size_t distinct[256];
	atomic_uint next;
	atomic_int err;
};

static void *collect_worker(void *arg)
{
	struct collect_job *j = arg;
	rix_id *tmp = NULL;
	size_t tcap = 0;
	for (;;) {
		unsigned c = atomic_fetch_add(&j->next, 1);
		if (c >= 256)
			break;
		struct rix__part *pt = &j->c->part[c];
		size_t m = pt->n;
		if (m == 0)
			continue;
		if (m > tcap) {
			rix_free(tmp);
			tcap = m;
			if ((tmp = rix_malloc(tcap * sizeof(rix_id))) == NULL) {
				tcap = 0;
				atomic_store(&j->err, RIX_ENOMEM);
				continue;
			}
		}
		for (size_t i = 0; i < m; i++) {
			tmp[i].b[0] = (uint8_t)c;
			memcpy(tmp[i].b + 1, pt->p + i * PART_REC, PART_REC);
		}
		rix__part_release(pt); /* back to the system before its records land in the block */
		rix__idset_sort_from(tmp, m, 1);
		uint8_t *dst = j->base + j->at[c] * PART_REC;
		size_t k = 0;
		for (size_t i = 0; i < m; i++)
			if (rix__id_is_new(tmp, i))
				memcpy(dst + k++ * PART_REC, tmp[i].b + 1, PART_REC);
		j->distinct[c] = k;
	}
	rix_free(tmp);
	return NULL;
}

int rix__idset_build_collected(rix_idset **out, struct rix__idcollect *c, unsigned workers)
{
	*out = NULL;
	size_t n = c->n;
	struct collect_job *j = rix_calloc(1, sizeof(*j));
	/* The block: room for the records (31 bytes an ID) and what the set's build adds behind
	 * them (mid bits, directory: under 4 bytes an ID), so that it never grows (a move would
	 * split its huge pages); only what is written costs memory. */
	size_t room = n * (sizeof(rix_id) + 3) + 4096;
	uint8_t *base = n > 0 ? rix_malloc(room) : NULL;
	int rc = 0;
	if (j == NULL || (n > 0 && base == NULL)) {
		rc = rix_error_set(RIX_ENOMEM, "id set: out of memory for %zu IDs", n);
		goto fail;
	}
	if (n == 0) {
		rix__idcollect_free(c);
		rix_free(j);
		return rix__idset_from_records(out, NULL, 0, (size_t[256]){ 0 }, 0, false, 0);
	}
	rix__advise_huge(base, room);
	j->c = c;
	j->base = base;
	size_t at = 0;
	for (unsigned i = 0; i < 256; i++) {
		j->at[i] = at;
		at += c->part[i].n;
	}
	atomic_init(&j->next, 0);
	atomic_init(&j->err, 0);
	rix__pool_run(rix__pool_size(workers, 64), collect_worker, j);
	if (atomic_load(&j->err) != 0) {
		rc = rix_error_set(RIX_ENOMEM, "id set: out of memory sorting %zu IDs", n);
		goto fail;
	}
	/* The parts' records together (duplicates left gaps), byte 0's counts. */
	size_t cnt0[256], nd = 0;
	for (unsigned i = 0; i < 256; i++) {
		if (j->at[i] != nd && j->distinct[i] > 0)
			memmove(base + nd * PART_REC, base + j->at[i] * PART_REC, j->distinct[i] * PART_REC);
		cnt0[i] = j->distinct[i];
		nd += j->distinct[i];
	}
	rix__idcollect_free(c);
	rix_free(j);
	return rix__idset_from_records(out, base, room, cnt0, nd, false, 0); /* owns base */
fail:
	rix__idcollect_free(c);
	rix_free(base);
	rix_free(j);
	return rc;
}
