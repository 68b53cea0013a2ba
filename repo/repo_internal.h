/*
 * repo/repo_internal.h — helpers shared by the files of repo/ (private to the module).
 */
#ifndef RIX_REPO_INTERNAL_H
#define RIX_REPO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rix/backend.h"

/* The names of a file type's files, sorted: v[0..n), each NUL-terminated. Free v with rix_free. */
struct rix__names {
	char (*v)[65];
	size_t n, cap;
	uint64_t max_size; /* the largest file listed */
};

/* Lists type t into *out (sorted). On failure *out is empty. @return 0 or the backend's error. */
int rix__list_names(rix_backend *b, rix_file_type t, struct rix__names *out);

#endif
