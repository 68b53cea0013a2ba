/*
 * cli/idset.c — a set of (blob type, ID), as restic's BlobSet: open addressing with linear
 * probing on the ID's first 8 bytes (SHA-256: already uniform), grown at half full (cli.h).
 */
#include "cli.h"

static size_t slot_of(const struct idset *s, const rix_id *id, rix_blob_type t)
{
	uint64_t h;
	memcpy(&h, id->b, sizeof(h));
	h ^= (uint64_t)t * 0x9e3779b97f4a7c15ull;
	return (size_t)h & (s->cap - 1);
}

static size_t find(const struct idset *s, const rix_id *id, rix_blob_type t)
{
	size_t i = slot_of(s, id, t);
	while (s->used[i] && !(s->type[i] == (uint8_t)t && memcmp(&s->ids[i], id, sizeof(*id)) == 0))
		i = (i + 1) & (s->cap - 1);
	return i;
}

bool idset_has(const struct idset *s, rix_blob_type t, const rix_id *id)
{
	return s->cap > 0 && s->used[find(s, id, t)];
}

int idset_add(struct idset *s, rix_blob_type t, const rix_id *id)
{
	if (2 * (s->n + 1) > s->cap) {
		struct idset b = { .cap = s->cap ? 2 * s->cap : 64 };
		b.ids = malloc(b.cap * sizeof(*b.ids));
		b.type = malloc(b.cap);
		b.used = calloc(b.cap, 1);
		if (b.ids == NULL || b.type == NULL || b.used == NULL) {
			idset_free(&b);
			return die("out of memory");
		}
		for (size_t i = 0; i < s->cap; i++)
			if (s->used[i]) {
				size_t j = find(&b, &s->ids[i], (rix_blob_type)s->type[i]);
				b.ids[j] = s->ids[i];
				b.type[j] = s->type[i];
				b.used[j] = 1;
			}
		b.n = s->n;
		idset_free(s);
		*s = b;
	}
	size_t i = find(s, id, t);
	if (!s->used[i]) {
		s->ids[i] = *id;
		s->type[i] = (uint8_t)t;
		s->used[i] = 1;
		s->n++;
	}
	return 0;
}

void idset_free(struct idset *s)
{
	free(s->ids);
	free(s->type);
	free(s->used);
	memset(s, 0, sizeof(*s));
}
