/*
 * index/index_json_internal.h — what the index JSON decoder (index_json.c) shares with its
 * streaming front end (index_json_stream.c): the decoder's state, where what it decodes goes
 * (an index or a sink), its error helpers, the top object's keys and the two pieces the stream
 * parses on its own (a pack object, an ID).
 */
#ifndef RIX_INDEX_JSON_INTERNAL_H
#define RIX_INDEX_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "rix/index.h"
#include "index_internal.h"
#include "../common/json_scan.h"

struct dec {
	rix__json j; /* the text; error offsets count from j.base */
	rix_index *idx;              /* the index built, or NULL when a sink receives the content */
	const rix_index_sink *sink;
	size_t nblobs[RIX_BLOB_TYPES];
	bool reserved;
	/* with idx: its blobs decoded and not added yet, a group a type (rix_index_decode's):
	 * added when full (sink_blob) and at the end of the text (dec_flush) */
	struct rix__add_group *pend;
};

static inline int sink_pack(struct dec *d, const rix_id *id, uint32_t *num)
{
	return d->idx != NULL ? rix__index_pack_number(d->idx, id, num) : d->sink->pack(d->sink->payload, id, num);
}

static inline int sink_blob(struct dec *d, rix_blob_type t, const rix_id *id, const rix_loc *loc)
{
	if (d->idx == NULL)
		return d->sink->blob(d->sink->payload, t, id, loc);
	return rix__add_group_put(&d->pend[t], id, loc) ? rix__index_add_group(d->idx, t, &d->pend[t]) : 0;
}

static inline int sink_supersedes(struct dec *d, const rix_id *id)
{
	if (d->idx != NULL)
		return rix_index_add_supersedes(d->idx, id);
	return d->sink->supersedes != NULL ? d->sink->supersedes(d->sink->payload, id) : 0;
}

static inline int corrupt(const struct dec *d, const char *p, const char *what)
{
	return rix__json_corrupt(&d->j, p, what);
}

static inline int truncated(const struct dec *d)
{
	return rix__json_truncated(&d->j);
}

/* The top object's keys (json_scan.h: other spellings restic would read as these are refused). */
enum { T_PACKS, T_SUPERSEDES, T_NKEYS };
extern const rix__json_key rix__index_json_top_keys[T_NKEYS];

/* One pack object at *pp (blobs to the sink), *pp moved past it. @return 0, RIX_ECORRUPT, a sink's error. */
int rix__index_json_parse_pack(struct dec *d, const char **pp, int depth);
/* One ID string at *pp into *id. @return 0, RIX_ECORRUPT. */
int rix__index_json_parse_id(const struct dec *d, const char **pp, rix_id *id);

#endif
