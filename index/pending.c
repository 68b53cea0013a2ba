/*
 * index/pending.c — the master index's pending set: the blobs being written now, so that two
 * threads never store the same blob twice. An open-addressing table of (type, ID) with linear
 * probing (seeded XXH3, the seed varied per type) and backward-shift deletion, so there are no
 * tombstones; it doubles at half full. mi->pmu guards it and makes "known or pending? else mark
 * pending" one atomic step.
 */
#include <pthread.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "master_index_internal.h"

static inline uint32_t pending_home(const rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	return (uint32_t)(rix__hash_id(id, mi->seed ^ (uint64_t)(t + 1))) & (mi->pending_cap - 1);
}

/* Index of (t, id) in the pending table, or UINT32_MAX. Caller holds pmu. */
static uint32_t pending_find(const rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if (mi->pending_cap == 0)
		return UINT32_MAX;
	uint32_t mask = mi->pending_cap - 1;
	for (uint32_t s = pending_home(mi, t, id);; s = (s + 1) & mask) {
		const struct pending_slot *p = &mi->pending[s];
		if (!p->used)
			return UINT32_MAX;
		if (p->type == t && rix__id_eq(&p->id, id))
			return s;
	}
}

static void pending_put(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	uint32_t mask = mi->pending_cap - 1;
	uint32_t s = pending_home(mi, t, id);
	while (mi->pending[s].used)
		s = (s + 1) & mask;
	mi->pending[s] = (struct pending_slot){ *id, (uint8_t)t, 1 };
}

static int pending_grow(rix_master_index *mi)
{
	uint32_t oldcap = mi->pending_cap;
	struct pending_slot *old = mi->pending;
	uint32_t cap = oldcap ? oldcap * 2 : 64;
	struct pending_slot *p = rix_calloc(cap, sizeof(*p));
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for pending set");
	mi->pending = p;
	mi->pending_cap = cap;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].used)
			pending_put(mi, (rix_blob_type)old[i].type, &old[i].id);
	rix_free(old);
	return 0;
}

int rix_master_index_add_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "master index: blob type %d", (int)t);
	pthread_mutex_lock(&mi->pmu);
	int rc;
	if (pending_find(mi, t, id) != UINT32_MAX || rix_master_index_has(mi, t, id)) {
		rc = 0;
	} else if ((uint64_t)(mi->npending + 1) * 2 > mi->pending_cap && (rc = pending_grow(mi)) != 0) {
		/* rc holds RIX_ENOMEM */
	} else {
		pending_put(mi, t, id);
		mi->npending++;
		rc = 1;
	}
	pthread_mutex_unlock(&mi->pmu);
	return rc;
}

/* Linear-probing deletion by backward shift: no tombstones, probes stay short. */
void rix_master_index_remove_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	pthread_mutex_lock(&mi->pmu);
	uint32_t hole = pending_find(mi, t, id);
	if (hole != UINT32_MAX) {
		uint32_t mask = mi->pending_cap - 1;
		uint32_t s = hole;
		for (;;) {
			s = (s + 1) & mask;
			struct pending_slot *p = &mi->pending[s];
			if (!p->used)
				break;
			uint32_t home = pending_home(mi, (rix_blob_type)p->type, &p->id);
			/* Move p into the hole unless its home lies cyclically in (hole, s]. */
			if (((s - home) & mask) >= ((s - hole) & mask)) {
				mi->pending[hole] = *p;
				hole = s;
			}
		}
		mi->pending[hole].used = 0;
		mi->npending--;
	}
	pthread_mutex_unlock(&mi->pmu);
}
