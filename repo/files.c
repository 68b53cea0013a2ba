/*
 * repo/files.c — a repository's files as a client sees them: unpacked files (index, snapshot,
 * lock) read and written by ID, and pack headers, without the client ever holding the master
 * key. Every encode-hash-write of an unpacked file in rix goes through rix_repo_write_file.
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"

static int unpacked_type(rix_file_type t)
{
	return t == RIX_FILE_INDEX || t == RIX_FILE_SNAPSHOT || t == RIX_FILE_LOCK;
}

int rix_repo_read_file(uint8_t **out, size_t *n, rix_repo *r, rix_file_type t, const rix_id *id)
{
	*out = NULL;
	*n = 0;
	if (!unpacked_type(t))
		return rix_error_set(RIX_EINVAL, "read_file: a %s is not an unpacked file", rix_file_type_name(t));
	char name[65];
	rix_id_to_hex(name, id);
	return rix__read_unpacked(r, t, name, RIX_REPO_FILE_MAX, out, n);
}

int rix_repo_write_file(rix_id *id, rix_repo *r, rix_file_type t, const void *json, size_t n)
{
	if (!unpacked_type(t))
		return rix_error_set(RIX_EINVAL, "write_file: a %s is not an unpacked file", rix_file_type_name(t));
	uint8_t *file;
	size_t fn;
	int rc = rix_unpacked_encode(&file, &fn, rix__repo_key(r), json, n, rix_repo_config(r)->version);
	if (rc != 0)
		return rc;
	rix_id got;
	char name[65];
	rix_sha256(&got, file, fn);
	rix_id_to_hex(name, &got);
	rc = rix_backend_write(rix_repo_backend(r), t, name, file, fn);
	rix_free(file);
	if (rc == 0 && id != NULL)
		*id = got;
	return rc;
}

int rix_repo_list_ids(rix_id **ids, size_t *n, rix_repo *r, rix_file_type t)
{
	*ids = NULL;
	*n = 0;
	if (t == RIX_FILE_CONFIG)
		return rix_error_set(RIX_EINVAL, "list_ids: the config has no ID");
	struct rix__names names;
	int rc = rix__list_names(rix_repo_backend(r), t, &names);
	if (rc != 0)
		return rc;
	rix_id *v = names.n > 0 ? rix_malloc(names.n * sizeof(*v)) : NULL;
	if (names.n > 0 && v == NULL)
		rc = rix_error_set(RIX_ENOMEM, "list_ids: out of memory for %zu IDs", names.n);
	for (size_t i = 0; rc == 0 && i < names.n; i++)
		rc = rix_id_from_hex(&v[i], names.v[i].s, 64); /* listed names are IDs */
	rix_free(names.v);
	if (rc != 0) {
		rix_free(v);
		return rc;
	}
	*ids = v;
	*n = names.n;
	return 0;
}

struct pack_source {
	rix_backend *b;
	const char *name;
};

static int read_pack(void *arg, uint64_t off, void *buf, size_t len)
{
	struct pack_source *s = arg;
	return rix_backend_read(s->b, RIX_FILE_PACK, s->name, off, buf, len);
}

int rix__read_pack_header(rix_repo *r, const char *name, uint64_t size, rix_blob **out, size_t *count)
{
	struct pack_source s = { rix_repo_backend(r), name };
	return rix_pack_read_header_at(out, count, rix__repo_key(r), size, read_pack, &s,
				       rix_repo_config(r)->version);
}

int rix_repo_read_pack_header(rix_blob **out, size_t *count, rix_repo *r, const rix_id *pack_id)
{
	*out = NULL;
	*count = 0;
	char name[65];
	uint64_t size;
	rix_id_to_hex(name, pack_id);
	int rc = rix_backend_stat(&size, rix_repo_backend(r), RIX_FILE_PACK, name);
	if (rc == RIX_ENOTFOUND)
		return rix_error_set(RIX_ENOTFOUND, "pack %s is missing", name);
	if (rc != 0)
		return rc;
	return rix__read_pack_header(r, name, size, out, count);
}

int rix_repo_read_pack_header_sized(rix_blob **out, size_t *count, rix_repo *r, const rix_id *pack_id, uint64_t size)
{
	*out = NULL;
	*count = 0;
	char name[65];
	rix_id_to_hex(name, pack_id);
	int rc = rix__read_pack_header(r, name, size, out, count);
	if (rc == RIX_ENOTFOUND)
		return rix_error_set(RIX_ENOTFOUND, "pack %s is missing", name);
	return rc;
}
