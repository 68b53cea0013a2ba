/*
 * tests/fuzz/fuzz_snapshot_checks.h — the property of the fuzz_snapshot target, shared with
 * tests/test_fuzz_replay.c. Header-only, static inline; returns NULL when the property holds,
 * or a description of the violation.
 *
 * The input is snapshot JSON (any bytes, not NUL-terminated).
 *   - rix_snapshot_decode either succeeds, or fails with RIX_ECORRUPT, a "snapshot JSON: "
 *     message and *out NULL;
 *   - on success the encoding decodes again and encodes to the same bytes (restic's form is a
 *     fixed point), with the members rix does not know still there;
 *   - the snapshot passes a filter of its own host, first path and first tag (when a tag list
 *     can name it: no comma, no spaces at its ends), and fails one of a host it does not have;
 *   - adding a tag it does not have and removing it again gives the same bytes.
 */
#ifndef RIX_FUZZ_SNAPSHOT_CHECKS_H
#define RIX_FUZZ_SNAPSHOT_CHECKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rix/rix.h"

static inline const char *rix_fuzz_check_snapshot(const uint8_t *data, size_t size)
{
	rix_snapshot *sn = (rix_snapshot *)&sn;
	rix_error_clear();
	int rc = rix_snapshot_decode(&sn, data, size);
	if (rc != 0) {
		if (rc != RIX_ECORRUPT)
			return "decode failed with another code than RIX_ECORRUPT";
		if (sn != NULL)
			return "decode failed and left *out set";
		if (strncmp(rix_error_last(), "snapshot JSON: ", 15) != 0)
			return "decode failed without a \"snapshot JSON: \" message";
		return NULL;
	}
	const char *why = NULL;
	char *a = NULL, *b = NULL, *c = NULL;
	size_t an, bn, cn;
	rix_snapshot *again = NULL;
	if (rix_snapshot_encode(&a, &an, sn) != 0)
		why = "encode failed";
	else if (strlen(a) != an)
		why = "the encoding's length is not its strlen";
	else if (rix_snapshot_decode(&again, (const uint8_t *)a, an) != 0)
		why = "the encoding does not decode";
	else if (rix_snapshot_encode(&b, &bn, again) != 0)
		why = "the second encode failed";
	else if (bn != an || memcmp(a, b, an) != 0)
		why = "decode(encode(x)) encodes differently";
	if (why == NULL) {
		const char *host = sn->hostname, *path = sn->npaths ? sn->paths[0] : NULL;
		const char *tag = sn->ntags && strchr(sn->tags[0], ',') == NULL ? sn->tags[0] : NULL;
		rix_snapshot_filter f = RIX_SNAPSHOT_FILTER_INIT;
		f.hosts = &host;
		f.nhosts = 1;
		f.paths = &path;
		f.npaths = path != NULL;
		f.tags = &tag;
		/* A tag list is trimmed: a tag with spaces at its ends cannot be named by one. */
		f.ntags = tag != NULL && tag[0] != '\0' && strchr(" \t\n\v\f\r", tag[0]) == NULL &&
			  strchr(" \t\n\v\f\r", tag[strlen(tag) - 1]) == NULL;
		if (!rix_snapshot_matches(sn, &f))
			why = "the snapshot does not pass a filter of its own host, path and tag";
		const char *other = "\x01not-a-host";
		f.hosts = &other;
		if (why == NULL && strcmp(sn->hostname, other) != 0 && rix_snapshot_matches(sn, &f))
			why = "the snapshot passes a filter of another host";
	}
	if (why == NULL) {
		const char *t = "\x02fuzz-tag";
		bool added = false, removed = false;
		bool had = false;
		for (size_t i = 0; i < sn->ntags; i++)
			had |= strcmp(sn->tags[i], t) == 0;
		if (!had) {
			if (rix_snapshot_add_tags(&added, sn, &t, 1) != 0)
				why = "add_tags failed";
			else
				rix_snapshot_remove_tags(&removed, sn, &t, 1);
			if (why == NULL && (!added || !removed))
				why = "a new tag was not added and removed";
			else if (why == NULL && rix_snapshot_encode(&c, &cn, sn) != 0)
				why = "encode after the tags failed";
			else if (why == NULL && (cn != an || memcmp(a, c, an) != 0))
				why = "adding and removing a tag changed the encoding";
		}
	}
	rix_free(a);
	rix_free(b);
	rix_free(c);
	rix_snapshot_free(again);
	rix_snapshot_free(sn);
	return why;
}

#endif
