/*
 * cli/idset.c — a set of (blob type, ID), as restic's BlobSet: a rix_indexmap (rix/indexmap.h)
 * per blob type, its locations unused (cli.h).
 */
#include "cli.h"

bool idset_has(const struct idset *s, rix_blob_type t, const rix_id *id)
{
	return s->m[t] != NULL && rix_indexmap_lookup(NULL, s->m[t], id) == 0;
}

int idset_add(struct idset *s, rix_blob_type t, const rix_id *id)
{
	static const rix_loc none = { 0 };
	if (idset_has(s, t, id))
		return 0;
	if ((s->m[t] == NULL && rix_indexmap_new(&s->m[t]) != 0) || rix_indexmap_add(s->m[t], id, &none) != 0)
		return die("%s", rix_error_last());
	return 0;
}

void idset_free(struct idset *s)
{
	rix_indexmap_free(s->m[RIX_BLOB_DATA]);
	rix_indexmap_free(s->m[RIX_BLOB_TREE]);
	memset(s, 0, sizeof(*s));
}
