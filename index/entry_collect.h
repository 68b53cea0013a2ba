/*
 * index/entry_collect.h — private to index/: the entries (blob ID and location) a ranked table
 * is built from, collected in 43 bytes each, not the 48 of a struct fentry.
 *
 * A bulk load's entries are the largest thing a first open holds (10M blobs: 480 MB as
 * fentries). Here they are held in 256 parts by the ID's first byte (parts.h), each record the
 * location packed into 12 bytes, then the ID's other 31 bytes:
 *
 *   byte 0                 12                                   43
 *   | location (96 bits)   | ID bytes 1..31                      |
 *   location: pack number 22 bits | offset 27 | length 23 | uncompressed length 24, low first
 *
 * which holds packs numbered below 4Mi - 1, offsets below 128 MiB (restic's largest packs),
 * lengths below 8 MiB and uncompressed lengths below 16 MiB (restic's largest chunk is 8 MiB).
 * A location outside those (a tree blob of 10 MiB, a pack of 200 MiB from another tool) is
 * stored whole in a side array of escapes, and its record's pack field says so (all ones, the
 * escape's number in the bits above). Any location is kept exactly: the widths only decide
 * what costs 16 bytes more.
 *
 * The ranked build (ranked.c) sorts each part in place (rix__ecollect_sort) and consumes them in
 * order, giving each part's memory back as its entries land in the table.
 */
#ifndef RIX_ENTRY_COLLECT_H
#define RIX_ENTRY_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/types.h"
#include "idset_cmp.h"
#include "master_index_internal.h"
#include "parts.h"

#define RIX__EREC_LOC 12                                /* a record's location bytes */
#define RIX__EREC (RIX__EREC_LOC + RIX_ID_SIZE - 1) /* a record: 43 bytes */
#define RIX__EC_PB 22u /* the packed location's fields' widths (pack number, offset, length, uncompressed) */
#define RIX__EC_OB 27u
#define RIX__EC_LB 23u
#define RIX__EC_UB 24u
#define RIX__EC_ESCAPE ((1u << RIX__EC_PB) - 1) /* a pack field that says: an escape */

struct rix__ecollect {
	struct rix__part part[256];
	size_t n;       /* records in all */
	rix_loc *esc;   /* escapes: locations stored whole */
	size_t nesc, esc_cap;
	uint32_t orp, oro, orl, oru; /* every location's fields ORed (their widths, for the build) */
};

int rix__ecollect_new(struct rix__ecollect **out);
void rix__ecollect_free(struct rix__ecollect *c);
/* Records held (0 for NULL). */
size_t rix__ecollect_count(const struct rix__ecollect *c);

/* Room for about n more entries spread over the parts as random IDs spread (address space only:
 * nothing is touched), so that the parts do not move as they fill. @return 0, RIX_ENOMEM. */
int rix__ecollect_reserve(struct rix__ecollect *c, size_t n);

/*
 * e[0..n) added, each location's pack number plus pack_add: room is made first (parts and
 * escapes), then they are copied, so that a failure adds none. rix__ecollect_room and
 * rix__ecollect_put are the two halves, for a caller that adds to more than one collection and
 * wants all or none (put cannot fail after room succeeded with the same arguments).
 * @return 0, RIX_ENOMEM (c as it was).
 */
int rix__ecollect_add(struct rix__ecollect *c, const struct fentry *e, size_t n, uint32_t pack_add);
int rix__ecollect_room(struct rix__ecollect *c, const struct fentry *e, size_t n, uint32_t pack_add);
void rix__ecollect_put(struct rix__ecollect *c, const struct fentry *e, size_t n, uint32_t pack_add);

/* add to every record's pack number (a bulk load put on top of packs numbered before it; c may
 * be NULL; pack numbers stay below 2^32: the caller's limit). @return 0, RIX_ENOMEM,
 * RIX_ELIMIT (too many escapes): c as it was. */
int rix__ecollect_shift_packs(struct rix__ecollect *c, uint32_t add);

/* Sorts every part by ID, an ID's records in place order (pack number, then offset), on up to
 * `workers` threads (0: one a CPU); distinct[b]: the distinct IDs in part b. */
void rix__ecollect_sort(struct rix__ecollect *c, unsigned workers, size_t distinct[256]);

/* Record i of part b. */
static inline const uint8_t *rix__ecollect_rec(const struct rix__ecollect *c, unsigned b, size_t i)
{
	return c->part[b].p + i * RIX__EREC;
}

/* A record's location bits: lo the first 64, hi the other 32 (little-endian, any host). */
static inline uint64_t rix__ecollect_lo(const uint8_t *rec)
{
	return load64_le(rec);
}

static inline uint32_t rix__ecollect_hi(const uint8_t *rec)
{
	return (uint32_t)rec[8] | (uint32_t)rec[9] << 8 | (uint32_t)rec[10] << 16 | (uint32_t)rec[11] << 24;
}

/* The location of record rec. */
static inline void rix__ecollect_loc(const struct rix__ecollect *c, const uint8_t *rec, rix_loc *loc)
{
	uint64_t lo = rix__ecollect_lo(rec);
	uint32_t hi = rix__ecollect_hi(rec);
	uint32_t p = (uint32_t)lo & RIX__EC_ESCAPE;
	if (__builtin_expect(p == RIX__EC_ESCAPE, 0)) {
		*loc = c->esc[(uint32_t)(lo >> RIX__EC_PB)];
		return;
	}
	loc->pack = p;
	loc->offset = (uint32_t)(lo >> RIX__EC_PB) & ((1u << RIX__EC_OB) - 1);
	loc->length = (uint32_t)(lo >> (RIX__EC_PB + RIX__EC_OB)) | (hi & 0xFFu) << (64 - RIX__EC_PB - RIX__EC_OB);
	loc->uncompressed_length = hi >> 8;
}
_Static_assert(RIX__EC_PB + RIX__EC_OB + RIX__EC_LB + RIX__EC_UB == 8 * RIX__EREC_LOC &&
		       RIX__EC_PB + RIX__EC_OB + RIX__EC_LB == 72 && RIX__EC_PB + 32 <= 64,
	       "the packed location: 96 bits, the length across the 64-bit line, an escape's number in the low word");

#endif
