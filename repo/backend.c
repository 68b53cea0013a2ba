/*
 * repo/backend.c — the backend interface: argument checks shared by every backend, then a call
 * through its operations (rix/backend.h).
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/backend.h"
#include "rix/error.h"
#include "repo_internal.h"

struct rix_backend {
	const rix_backend_ops *ops;
	void *self;
};

static const char *const type_names[RIX_FILE_TYPES] = { "config", "key", "lock", "snapshot", "index", "pack" };

const char *rix_file_type_name(rix_file_type t)
{
	return (unsigned)t < RIX_FILE_TYPES ? type_names[t] : "unknown";
}

int rix_backend_new(rix_backend **out, const rix_backend_ops *ops, void *self)
{
	*out = rix_malloc(sizeof(**out));
	if (*out == NULL)
		return rix_error_set(RIX_ENOMEM, "backend: out of memory");
	(*out)->ops = ops;
	(*out)->self = self;
	return 0;
}

void rix_backend_free(rix_backend *b)
{
	if (b == NULL)
		return;
	b->ops->close(b->self);
	rix_free(b);
}

const char *rix_backend_kind(const rix_backend *b)
{
	return b->ops->kind;
}

const char *const rix__folder[RIX_FILE_TYPES] = { "", "keys", "locks", "snapshots", "index", "data" };

int rix__is_file_name(const char *name)
{
	size_t i = 0;
	for (; name != NULL && i < 64; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return name != NULL && name[64] == '\0';
}

/* A file name: 64 lowercase hex digits (the config's name is not looked at). */
static int check(rix_file_type t, const char *name)
{
	if ((unsigned)t >= RIX_FILE_TYPES)
		return rix_error_set(RIX_EINVAL, "backend: file type %d", (int)t);
	if (t == RIX_FILE_CONFIG)
		return 0;
	if (!rix__is_file_name(name))
		return rix_error_set(RIX_EINVAL, "backend: \"%.80s\" is not a file name (64 lowercase hex digits)",
				     name != NULL ? name : "(null)");
	return 0;
}

struct name_filter {
	rix_backend_list_fn fn;
	void *arg;
};

/* Only file names reach the caller, whatever a backend lists (temporary files, junk). */
static int filter_names(void *arg, const char *name, uint64_t size)
{
	struct name_filter *f = arg;
	return rix__is_file_name(name) ? f->fn(f->arg, name, size) : 0;
}

int rix_backend_list(rix_backend *b, rix_file_type t, rix_backend_list_fn fn, void *arg)
{
	if ((unsigned)t >= RIX_FILE_TYPES || t == RIX_FILE_CONFIG)
		return rix_error_set(RIX_EINVAL, "backend: cannot list files of type %d", (int)t);
	struct name_filter f = { fn, arg };
	return b->ops->list(b->self, t, filter_names, &f);
}

int rix_backend_stat(uint64_t *size, rix_backend *b, rix_file_type t, const char *name)
{
	int rc = check(t, name);
	return rc != 0 ? rc : b->ops->stat(b->self, t, name, size);
}

int rix_backend_read(rix_backend *b, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len)
{
	int rc = check(t, name);
	return rc != 0 ? rc : b->ops->read(b->self, t, name, off, buf, len);
}

int rix_backend_read_all(uint8_t **data, size_t *n, rix_backend *b, rix_file_type t, const char *name,
			 size_t max)
{
	*data = NULL;
	*n = 0;
	uint64_t size;
	int rc = rix_backend_stat(&size, b, t, name);
	if (rc != 0)
		return rc;
	if (size > max)
		return rix_error_set(RIX_ECORRUPT, "backend: %s %.16s is %llu bytes, more than the %zu expected at most",
				     rix_file_type_name(t), t == RIX_FILE_CONFIG ? "" : name, (unsigned long long)size,
				     max);
	uint8_t *p = rix_malloc(size ? (size_t)size : 1);
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "backend: out of memory for a %llu-byte file", (unsigned long long)size);
	rc = b->ops->read(b->self, t, name, 0, p, (size_t)size);
	if (rc != 0) {
		rix_free(p);
		return rc;
	}
	*data = p;
	*n = (size_t)size;
	return 0;
}

int rix_backend_write(rix_backend *b, rix_file_type t, const char *name, const void *data, size_t n)
{
	int rc = check(t, name);
	return rc != 0 ? rc : b->ops->write(b->self, t, name, data, n);
}

int rix_backend_write_file(bool *taken, rix_backend *b, rix_file_type t, const char *name, int fd,
			   const char *path, uint64_t size)
{
	*taken = 0;
	int rc = check(t, name);
	return rc != 0 ? rc : b->ops->write_file(b->self, t, name, fd, path, size, taken);
}

int rix_backend_remove(rix_backend *b, rix_file_type t, const char *name)
{
	int rc = check(t, name);
	return rc != 0 ? rc : b->ops->remove(b->self, t, name);
}

const char *rix_backend_temp_dir(rix_backend *b)
{
	return b->ops->temp_dir != NULL ? b->ops->temp_dir(b->self) : NULL;
}
