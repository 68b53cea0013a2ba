/*
 * repo/open.c — making and opening a repository, and its keys: rix_repo_init (a new master key,
 * its key file, then the config last), rix_repo_open (the key files tried with the password,
 * a --key-hint's first, then the config), and adding, removing and listing key files.
 */
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"

#define KEY_FILE_MAX ((size_t)1 << 20)

/* ---- opening ------------------------------------------------------------------------------- */

/* Writes a key file for r->key under password; its name into name. */
static int write_key_file(rix_repo *r, const char *password, size_t password_len, char name[65])
{
	uint64_t n = r->opt.scrypt_n ? r->opt.scrypt_n : RIX_SCRYPT_DEFAULT_N;
	uint32_t rr = r->opt.scrypt_r ? r->opt.scrypt_r : RIX_SCRYPT_DEFAULT_R;
	uint32_t p = r->opt.scrypt_p ? r->opt.scrypt_p : RIX_SCRYPT_DEFAULT_P;
	char *json;
	size_t len;
	int rc = rix_key_create_file(&json, &len, r->key, password, password_len, n, rr, p, r->username, r->hostname);
	if (rc != 0)
		return rc;
	rix_id id;
	rix_sha256(&id, json, len);
	rix_id_to_hex(name, &id);
	rc = rix_backend_write(r->b, RIX_FILE_KEY, name, json, len);
	rix_free(json);
	return rc;
}

int rix_repo_init(rix_repo **out, rix_backend *b, const char *password, size_t password_len,
		  const rix_repo_options *opt)
{
	*out = NULL;
	int version = opt != NULL && opt->repo_version ? opt->repo_version : 2;
	uint64_t size;
	int rc = rix_backend_stat(&size, b, RIX_FILE_CONFIG, NULL);
	if (rc == 0)
		return rix_error_set(RIX_EEXISTS, "repo: there is a repository already (a config file)");
	if (rc != RIX_ENOTFOUND)
		return rc;
	rix_repo *r;
	if ((rc = rix__repo_new(&r, b, opt)) != 0)
		return rc;
	rc = rix_config_new(&r->cfg, version);
	if (rc == 0)
		rc = rix_key_random(&r->key);
	if (rc == 0)
		rc = write_key_file(r, password, password_len, r->key_name);
	uint8_t *file = NULL;
	size_t fn = 0;
	if (rc == 0)
		rc = rix_config_seal(&file, &fn, r->key, &r->cfg);
	/* The config last: a repository exists once it is there. */
	if (rc == 0)
		rc = rix_backend_write(b, RIX_FILE_CONFIG, NULL, file, fn);
	rix_free(file);
	if (rc != 0) {
		rix__repo_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* Tries every key file with password. */
static int open_key(rix_repo *r, const char *password, size_t password_len)
{
	struct rix__names keys;
	int rc = rix__list_names(r->b, RIX_FILE_KEY, &keys);
	if (rc != 0)
		return rc;
	int auth_failed = 0, corrupt = 0;
	char corrupt_msg[256] = "";
	/* Hinted keys first (restic's --key-hint): every other one costs a full scrypt. */
	const char *hint = r->opt.key_hint;
	if (hint != NULL && *hint != '\0') {
		size_t front = 0, hl = strlen(hint);
		for (size_t i = 0; i < keys.n; i++) {
			if (strncmp(keys.v[i].s, hint, hl) == 0) {
				struct rix__name tmp = keys.v[i];
				memmove(&keys.v[front + 1], &keys.v[front], (i - front) * sizeof(tmp));
				keys.v[front++] = tmp;
			}
		}
	}
	for (size_t i = 0; i < keys.n && r->key == NULL; i++) {
		uint8_t *kf;
		size_t len;
		rc = rix_backend_read_all(&kf, &len, r->b, RIX_FILE_KEY, keys.v[i].s, KEY_FILE_MAX);
		if (rc == RIX_ENOMEM)
			break;
		if (rc == 0) {
			rc = rix_key_open_file(&r->key, (const char *)kf, len, password, password_len);
			rix_free(kf);
		}
		if (rc == 0)
			memcpy(r->key_name, keys.v[i].s, 65);
		else if (rc == RIX_EAUTH)
			auth_failed++;
		else if (rc == RIX_ENOMEM)
			break;
		else if (corrupt++ == 0)
			snprintf(corrupt_msg, sizeof(corrupt_msg), "key %.16s: %s", keys.v[i].s, rix_error_last());
	}
	size_t nkeys = keys.n;
	rix_free(keys.v);
	if (r->key != NULL)
		return 0;
	if (rc == RIX_ENOMEM)
		return rc;
	if (nkeys == 0)
		return rix_error_set(RIX_ENOTFOUND, "repo: no key file (keys/ is empty)");
	if (auth_failed)
		return rix_error_set(RIX_EAUTH, "repo: wrong password: none of the %zu key files opens with it%s%s",
				     nkeys, corrupt ? "; " : "", corrupt_msg);
	return rix_error_set(RIX_ECORRUPT, "repo: no key file is readable: %s", corrupt_msg);
}

int rix_repo_open(rix_repo **out, rix_backend *b, const char *password, size_t password_len,
		  const rix_repo_options *opt)
{
	*out = NULL;
	rix_repo *r;
	int rc = rix__repo_new(&r, b, opt);
	if (rc != 0)
		return rc;
	rc = open_key(r, password, password_len);
	uint8_t *file = NULL;
	size_t n = 0;
	if (rc == 0)
		rc = rix_backend_read_all(&file, &n, b, RIX_FILE_CONFIG, NULL, RIX_CONFIG_MAX_SIZE + RIX_CRYPTO_OVERHEAD);
	if (rc == 0 && (rc = rix_config_open(&r->cfg, r->key, file, n)) == RIX_EAUTH)
		rc = rix_error_set(RIX_ECORRUPT, "repo: the config does not authenticate with the repository key");
	rix_free(file);
	if (rc != 0) {
		rix__repo_free(r);
		return rc;
	}
	rix__index_cache_open(r); /* its folder is named by the config's ID */
	*out = r;
	return 0;
}

/* ---- keys ---------------------------------------------------------------------------------- */

int rix_repo_key_add(char name[65], rix_repo *r, const char *password, size_t password_len)
{
	char tmp[65];
	return write_key_file(r, password, password_len, name != NULL ? name : tmp);
}

int rix_repo_key_remove(rix_repo *r, const char *name)
{
	if (name != NULL && strcmp(name, r->key_name) == 0)
		return rix_error_set(RIX_EINVAL, "repo: refusing to remove key %.16s: the repository is open with it",
				     name);
	return rix_backend_remove(r->b, RIX_FILE_KEY, name);
}

int rix_repo_key_list(rix_repo *r, rix_backend_list_fn fn, void *arg)
{
	return rix_backend_list(r->b, RIX_FILE_KEY, fn, arg);
}
