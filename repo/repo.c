/*
 * repo/repo.c — the repository object: create and free, close, the accessors, and the helpers
 * the files of repo/ share (listing a file type's names, reading an unpacked file). Opening,
 * init and keys are in open.c, index loading in load_index.c, saving, flushing and loading
 * blobs in blobs.c; the struct is in repo_internal.h.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "../common/pool.h"
#include "repo_internal.h"

/* ---- the repository object ------------------------------------------------------------------ */

static void set_identity(rix_repo *r)
{
	const char *u = r->opt.username;
	if (u == NULL) {
		struct passwd *pw = getpwuid(getuid());
		u = pw != NULL ? pw->pw_name : "";
	}
	snprintf(r->username, sizeof(r->username), "%s", u);
	if (r->opt.hostname != NULL)
		snprintf(r->hostname, sizeof(r->hostname), "%s", r->opt.hostname);
	else if (gethostname(r->hostname, sizeof(r->hostname)) != 0)
		r->hostname[0] = '\0';
	r->hostname[sizeof(r->hostname) - 1] = '\0';
	r->opt.username = r->username;
	r->opt.hostname = r->hostname;
}

void rix_repo_options_init(rix_repo_options *opt)
{
	*opt = (rix_repo_options)RIX_REPO_OPTIONS_INIT;
}

int rix__repo_new(rix_repo **out, rix_backend *b, const rix_repo_options *opt)
{
	if (opt != NULL && (opt->version < 1 || opt->version > RIX_REPO_OPTIONS_VERSION))
		return rix_error_set(RIX_EINVAL, "repo: options of version %u, this librix knows 1 to %u "
				     "(start from RIX_REPO_OPTIONS_INIT)", opt->version, RIX_REPO_OPTIONS_VERSION);
	rix_repo *r = rix_calloc(1, sizeof(*r));
	if (r == NULL)
		return rix_error_set(RIX_ENOMEM, "repo: out of memory");
	rix_repo_options_init(&r->opt);
	if (opt != NULL) /* a version 1 caller's struct ends before warn, a version 2 one's before cache_dir */
		memcpy(&r->opt, opt, opt->version == 1   ? offsetof(rix_repo_options, warn)
				     : opt->version == 2 ? offsetof(rix_repo_options, cache_dir)
							 : sizeof(*opt));
	r->opt.version = RIX_REPO_OPTIONS_VERSION;
	r->b = b;
	r->compression = r->opt.compression;
	set_identity(r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->imu, NULL);
	int rc = rix_master_index_new(&r->mi);
	if (rc == 0)
		rix_master_index_set_workers(r->mi, r->opt.workers);
	if (rc != 0) {
		pthread_mutex_destroy(&r->mu);
		pthread_mutex_destroy(&r->imu);
		rix_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void rix__repo_free(rix_repo *r)
{
	rix__index_cache_join(r); /* its writer reads the master index */
	rix_free(r->cache_path);
	rix_packer_free(r->packer);
	for (size_t i = 0; i < r->npool; i++)
		rix_blob_codec_free(r->pool[i]);
	for (size_t i = 0; i < r->nscratch; i++)
		rix_free(r->scratch[i].p);
	for (size_t i = 0; i < r->nretry; i++)
		rix_pack_writer_free(r->retry[i]);
	rix_master_index_free(r->mi);
	rix_key_free(r->key);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->imu);
	rix_free(r);
}

void rix_repo_free(rix_repo *r)
{
	if (r == NULL)
		return;
	rix_backend *b = r->b;
	rix__repo_free(r);
	rix_backend_free(b);
}

const rix_config *rix_repo_config(const rix_repo *r)
{
	return &r->cfg;
}

rix_backend *rix_repo_backend(rix_repo *r)
{
	return r->b;
}

rix_master_index *rix_repo_master_index(rix_repo *r)
{
	return r->mi;
}

void rix__repo_warn(rix_repo *r, const char *fmt, ...)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* one call at a time */
	if (r->opt.warn == NULL)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&mu);
	r->opt.warn(r->opt.payload, msg);
	pthread_mutex_unlock(&mu);
}

void rix_repo_set_dedup_only(rix_repo *r, bool on)
{
	rix_master_index_set_dedup_only(r->mi, on);
	r->dedup_only = on;
}

bool rix__repo_dedup_only(rix_repo *r)
{
	return r->dedup_only || rix_master_index_dedup_only(r->mi);
}

unsigned rix_repo_workers(const rix_repo *r)
{
	return r->opt.workers;
}

rix_compression rix_repo_compression(const rix_repo *r)
{
	return r->compression;
}

uint64_t rix_repo_pack_size(const rix_repo *r)
{
	return r->opt.pack_size != 0 ? r->opt.pack_size : RIX_REPO_PACK_SIZE_DEFAULT;
}

struct rix_lock *rix__repo_held_lock(const rix_repo *r)
{
	return atomic_load(&((rix_repo *)r)->held_lock);
}

void rix__repo_set_held_lock(rix_repo *r, struct rix_lock *l)
{
	atomic_store(&r->held_lock, l);
}

const rix_key *rix__repo_key(const rix_repo *r)
{
	return r->key;
}

const char *rix__repo_username(const struct rix_repo *r)
{
	return r->username;
}

const char *rix_repo_key_name(const rix_repo *r)
{
	return r->key_name;
}

/* ---- helpers for the files of repo/ ---------------------------------------------------------- */

static int collect_name(void *arg, const char *name, uint64_t size)
{
	struct rix__names *s = arg;
	if (size > s->max_size)
		s->max_size = size;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct rix__name *v = rix_realloc(s->v, cap * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "repo: out of memory listing files");
		s->v = v;
		s->cap = cap;
	}
	memcpy(s->v[s->n].s, name, 65);
	s->v[s->n++].size = size;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct rix__name *)a)->s, ((const struct rix__name *)b)->s);
}

int rix__list_names(rix_backend *b, rix_file_type t, struct rix__names *out)
{
	*out = (struct rix__names){ 0 };
	int rc = rix_backend_list(b, t, collect_name, out);
	if (rc != 0) {
		rix_free(out->v);
		*out = (struct rix__names){ 0 };
		return rc;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), cmp_name);
	return 0;
}

int rix__read_unpacked(struct rix_repo *r, rix_file_type t, const char *name, size_t max, uint8_t **json,
		       size_t *len)
{
	*json = NULL;
	*len = 0;
	uint8_t *file;
	size_t n;
	rix_id want, got;
	int rc = rix_id_from_hex(&want, name, 64);
	if (rc == 0)
		rc = rix_backend_read_all(&file, &n, r->b, t, name, max);
	if (rc != 0)
		return rc;
	rix_sha256(&got, file, n);
	if (memcmp(got.b, want.b, RIX_ID_SIZE) != 0)
		rc = rix_error_set(RIX_ECORRUPT, "%s %.16s: the file's SHA-256 is not its name", rix_file_type_name(t), name);
	else
		rc = rix_unpacked_decode(json, len, r->key, file, n, r->cfg.version);
	rix_free(file);
	return rc;
}

