/*
 * repo/rest.c — the REST backend: restic's REST protocol (v2) over libcurl, as served by
 * restic's rest-server or `rclone serve restic` (which fronts any object store).
 *
 *   config                  GET | HEAD | POST  <url>/config
 *   list a type             GET  <url>/<folder>/   Accept: application/vnd.x.restic.rest.v2
 *                                                  -> [{"name":"<id>","size":N}, ...]
 *   stat / read a range     HEAD | GET (Range: bytes=a-b)  <url>/<folder>/<id>
 *   write / remove          POST (the whole body) | DELETE  <url>/<folder>/<id>
 *   create                  POST <url>/?create=true
 *   folders: keys, locks, snapshots, index, data
 *
 * A POST is atomic on the server side (both servers write a temporary file and rename it).
 * Connections are reused through a small pool of curl handles (one per concurrent request).
 * HTTP 404 is RIX_ENOTFOUND; other non-2xx statuses and transport errors are RIX_EIO with the
 * status or curl's message; 507 (Insufficient Storage) is RIX_ENOSPC.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "rix/alloc.h"
#include "rix/backend.h"
#include "rix/error.h"
#include "repo_internal.h"
#include "../common/jansson_alloc.h"

#define POOL 16

typedef struct rest {
	char *url;     /* ends with '/'; without credentials, so it may appear in messages */
	char *userpwd; /* "user\0password" from the URL, percent-decoded, given to curl apart; NULL if none */
	char *pwd;     /* in userpwd: the password (NULL: none) */
	size_t userpwd_len;
	char *cacert; /* NULL: the system's */
	rix_rest_options o;
	pthread_mutex_t mu;
	CURL *pool[POOL];
	int npool;
} rest;


static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_start(void)
{
	curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static CURL *take(rest *r)
{
	pthread_mutex_lock(&r->mu);
	CURL *c = r->npool > 0 ? r->pool[--r->npool] : NULL;
	pthread_mutex_unlock(&r->mu);
	if (c == NULL)
		c = curl_easy_init();
	else
		curl_easy_reset(c);
	return c;
}

static void give(rest *r, CURL *c)
{
	pthread_mutex_lock(&r->mu);
	if (r->npool < POOL) {
		r->pool[r->npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	if (c != NULL)
		curl_easy_cleanup(c);
}

static void url_of(const rest *r, rix_file_type t, const char *name, char *buf, size_t cap)
{
	if (t == RIX_FILE_CONFIG)
		snprintf(buf, cap, "%sconfig", r->url);
	else if (name == NULL)
		snprintf(buf, cap, "%s%s/", r->url, rix__folder[t]);
	else
		snprintf(buf, cap, "%s%s/%s", r->url, rix__folder[t], name);
}

/* A response body into memory: into a fixed buffer (exactly len bytes expected) or growing. */
struct sink {
	uint8_t *buf;
	size_t len, cap;
	int fixed;
	int overflow;
};

/* Largest listing accepted from a server (about 10 million files). */
#define LIST_MAX ((size_t)1 << 30)

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb;
	if (s->len + n > s->cap) {
		if (s->fixed || s->len + n > LIST_MAX) {
			s->overflow = 1;
			return 0;
		}
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + n)
			cap *= 2;
		uint8_t *q = rix_realloc(s->buf, cap);
		if (q == NULL)
			return 0;
		s->buf = q;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return n;
}

/* The outcome of a request as a RIX_E* code, with a message naming what and where. */
static int status_of(CURL *c, CURLcode cc, const char *what, const char *url, const char *after)
{
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code < 400 && cc != CURLE_OK) /* transport (an HTTP error is told by its status below) */
		return rix_error_set(RIX_EIO, "rest: %s %s: %s%s", what, url, curl_easy_strerror(cc), after);
	if (code >= 200 && code < 300)
		return 0;
	if (code == 404)
		return rix_error_set(RIX_ENOTFOUND, "rest: %s %s: not found", what, url);
	if (code == 507)
		return rix_error_set(RIX_ENOSPC, "rest: %s %s: the server is out of space (507)", what, url);
	return rix_error_set(RIX_EIO, "rest: %s %s: HTTP %ld%s", what, url, code, after);
}

/* Whether a failed attempt may succeed when tried again. */
static int transient(CURL *c, CURLcode cc)
{
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 400)
		return code == 408 || code == 429 || (code >= 500 && code != 501 && code != 507);
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_COULDNT_RESOLVE_HOST:
		return 1;
	default:
		return 0;
	}
}

/*
 * curl_easy_perform, tried again while it fails transiently (RIX_REST_TRIES, growing waits);
 * the sink and the source start over each time. The outcome as status_of tells it, the tries
 * named when there were several.
 */
struct source;
static int perform(rest *r, CURL *c, const char *what, const char *url, struct sink *s, struct source *src);


/*
 * A pooled handle set up for url (NULL when out of memory, with the message set). HTTP errors
 * fail the transfer before any of their body reaches the caller's buffers.
 */
static CURL *begin(rest *r, const char *url)
{
	CURL *c = take(r);
	if (c == NULL) {
		rix_error_set(RIX_ENOMEM, "rest: out of memory");
		return NULL;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	if (r->userpwd != NULL) {
		curl_easy_setopt(c, CURLOPT_USERNAME, r->userpwd);
		if (r->pwd != NULL)
			curl_easy_setopt(c, CURLOPT_PASSWORD, r->pwd);
	}
	if (r->cacert != NULL)
		curl_easy_setopt(c, CURLOPT_CAINFO, r->cacert);
	if (r->o.insecure_tls) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (r->o.limit_upload)
		curl_easy_setopt(c, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)r->o.limit_upload);
	if (r->o.limit_download)
		curl_easy_setopt(c, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)r->o.limit_download);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 120L);
	return c;
}

static int rest_list(void *self, rix_file_type t, rix_backend_list_fn fn, void *arg)
{
	rest *r = self;
	char url[4096];
	url_of(r, t, NULL, url, sizeof(url));
	CURL *c = begin(r, url);
	if (c == NULL)
		return RIX_ENOMEM;
	struct sink s = { 0 };
	struct curl_slist *h = curl_slist_append(NULL, "Accept: application/vnd.x.restic.rest.v2");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	int rc = perform(r, c, "list", url, &s, NULL);
	if (s.overflow)
		rc = rix_error_set(RIX_EIO, "rest: list %s: the answer is over %zu bytes", url, LIST_MAX);
	curl_slist_free_all(h);
	give(r, c);
	if (rc == RIX_ENOTFOUND) { /* a folder not made yet holds nothing */
		rix_free(s.buf);
		return 0;
	}
	json_t *root = NULL;
	json_error_t jerr;
	int jrc = rc == 0 ? rix__jansson_load(&root, (const char *)s.buf, s.len, &jerr) : 0;
	rix_free(s.buf);
	if (rc != 0)
		return rc;
	if (jrc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "rest: list %s: out of memory reading the answer", url);
	if (!json_is_array(root)) {
		json_decref(root);
		return rix_error_set(RIX_EIO, "rest: list %s: the server's answer is not a JSON array", url);
	}
	size_t i;
	json_t *v;
	json_array_foreach(root, i, v)
	{
		/* v2: {"name","size"}; v1 servers answer bare names (size unknown: 0). */
		const char *name = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "name"));
		json_t *size = json_is_object(v) ? json_object_get(v, "size") : NULL;
		if (name == NULL)
			continue;
		rc = fn(arg, name, json_is_integer(size) ? (uint64_t)json_integer_value(size) : 0);
		if (rc != 0)
			break;
	}
	json_decref(root);
	return rc;
}

static int rest_stat(void *self, rix_file_type t, const char *name, uint64_t *size)
{
	rest *r = self;
	char url[4096];
	url_of(r, t, name, url, sizeof(url));
	CURL *c = begin(r, url);
	if (c == NULL)
		return RIX_ENOMEM;
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	int rc = perform(r, c, "stat", url, NULL, NULL);
	curl_off_t len = -1;
	if (rc == 0 && (curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len) != CURLE_OK || len < 0))
		rc = rix_error_set(RIX_EIO, "rest: stat %s: no Content-Length", url);
	give(r, c);
	if (rc == 0)
		*size = (uint64_t)len;
	return rc;
}

static int rest_read(void *self, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len)
{
	rest *r = self;
	char url[4096], range[64];
	url_of(r, t, name, url, sizeof(url));
	if (len == 0)
		return 0;
	CURL *c = begin(r, url);
	if (c == NULL)
		return RIX_ENOMEM;
	struct sink s = { .buf = buf, .cap = len, .fixed = 1 };
	snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off, (unsigned long long)(off + len - 1));
	curl_easy_setopt(c, CURLOPT_RANGE, range);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	int rc = perform(r, c, "read", url, &s, NULL);
	if (s.overflow)
		rc = rix_error_set(RIX_EIO, "rest: read %s: the server sent more than the %zu bytes asked", url, len);
	if (rc == 0) {
		long code = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200 && off > 0) /* range ignored: the whole file came; should not happen */
			rc = rix_error_set(RIX_EIO, "rest: read %s: the server ignored the range", url);
	}
	give(r, c);
	if (rc == 0 && s.len != len)
		rc = rix_error_set(RIX_ECORRUPT, "rest: %s ends before byte %llu (read of %zu bytes at %llu)", url,
				   (unsigned long long)(off + len), len, (unsigned long long)off);
	return rc;
}

struct source {
	const uint8_t *p; /* memory, or */
	int fd;           /* a file, read with pread */
	uint64_t off, len;
	int err;
};

static size_t on_read(char *dst, size_t size, size_t nmemb, void *arg)
{
	struct source *s = arg;
	size_t n = size * nmemb;
	if (n > s->len - s->off)
		n = (size_t)(s->len - s->off);
	if (n == 0)
		return 0;
	if (s->p != NULL) {
		memcpy(dst, s->p + s->off, n);
	} else {
		ssize_t got = pread(s->fd, dst, n, (off_t)s->off);
		if (got <= 0) {
			s->err = 1;
			return CURL_READFUNC_ABORT;
		}
		n = (size_t)got;
	}
	s->off += n;
	return n;
}

static int perform(rest *r, CURL *c, const char *what, const char *url, struct sink *s, struct source *src)
{
	unsigned tries = r->o.tries ? r->o.tries : RIX_REST_TRIES;
	uint64_t delay = r->o.first_delay_ms ? r->o.first_delay_ms : RIX_REST_FIRST_DELAY_MS;
	double waited = 0;
	for (unsigned attempt = 1;; attempt++) {
		if (s != NULL) {
			s->len = 0;
			s->overflow = 0;
		}
		if (src != NULL) {
			src->off = 0;
			src->err = 0;
		}
		CURLcode cc = curl_easy_perform(c);
		if (s != NULL && s->overflow)
			return cc == CURLE_OK ? 0 : RIX_EIO; /* the caller reports it */
		if (src != NULL && src->err)
			return RIX_EIO;
		if (cc == CURLE_OK || attempt >= tries || !transient(c, cc)) {
			char after[96] = "";
			if (attempt > 1)
				snprintf(after, sizeof(after), " (%u tries over %.1f s)", attempt, waited);
			return status_of(c, cc, what, url, after);
		}
		struct timespec ts = { (time_t)(delay / 1000), (long)(delay % 1000) * 1000000 };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		waited += (double)delay / 1000.0;
		delay = delay * 3 / 2;
		if (delay > 60000)
			delay = 60000;
	}
}

static int post(rest *r, const char *url, struct source *src)
{
	CURL *c = begin(r, url);
	if (c == NULL)
		return RIX_ENOMEM;
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	h = curl_slist_append(h, "Expect:");
	struct sink drop = { 0 };
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(c, CURLOPT_READDATA, src);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)src->len);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &drop);
	int rc = perform(r, c, "write", url, &drop, src);
	if (src->err)
		rc = rix_error_set(RIX_EIO, "rest: write %s: cannot read the file to send", url);
	curl_slist_free_all(h);
	rix_free(drop.buf);
	give(r, c);
	return rc;
}

static int rest_write(void *self, rix_file_type t, const char *name, const void *data, size_t n)
{
	rest *r = self;
	char url[4096];
	url_of(r, t, name, url, sizeof(url));
	struct source src = { .p = data, .fd = -1, .len = n };
	return post(r, url, &src);
}

static int rest_write_file(void *self, rix_file_type t, const char *name, int fd, const char *path, uint64_t size,
			   bool *taken)
{
	(void)path;
	*taken = 0;
	rest *r = self;
	char url[4096];
	url_of(r, t, name, url, sizeof(url));
	struct source src = { .fd = fd, .len = size };
	return post(r, url, &src);
}

static int rest_remove(void *self, rix_file_type t, const char *name)
{
	rest *r = self;
	char url[4096];
	url_of(r, t, name, url, sizeof(url));
	CURL *c = begin(r, url);
	if (c == NULL)
		return RIX_ENOMEM;
	struct sink drop = { 0 };
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &drop);
	int rc = perform(r, c, "remove", url, &drop, NULL);
	rix_free(drop.buf);
	give(r, c);
	return rc;
}

static void rest_close(void *self)
{
	rest *r = self;
	for (int i = 0; i < r->npool; i++)
		curl_easy_cleanup(r->pool[i]);
	pthread_mutex_destroy(&r->mu);
	rix_free(r->url);
	if (r->userpwd != NULL)
		sodium_memzero(r->userpwd, r->userpwd_len);
	rix_free(r->userpwd);
	rix_free(r->cacert);
	rix_free(r);
}

static const rix_backend_ops rest_ops = {
	.kind = "rest",
	.list = rest_list,
	.stat = rest_stat,
	.read = rest_read,
	.write = rest_write,
	.write_file = rest_write_file,
	.remove = rest_remove,
	.temp_dir = NULL,
	.close = rest_close,
};

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/*
 * "user:pass" (n bytes, %XX-encoded) into out (n + 1 bytes) as "user\0pass", decoded; *pwd
 * points at the password, or is NULL when there is no ':'.
 */
static void percent_decode(char *out, const char *in, size_t n, char **pwd)
{
	*pwd = NULL;
	char *o = out;
	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		if (in[i] == ':' && *pwd == NULL) {
			*o++ = '\0';
			*pwd = o;
		} else if (in[i] == '%' && i + 2 < n && (hi = hex_digit(in[i + 1])) >= 0 &&
			   (lo = hex_digit(in[i + 2])) >= 0) {
			*o++ = (char)(hi * 16 + lo);
			i += 2;
		} else {
			*o++ = in[i];
		}
	}
	*o = '\0';
}

int rix_backend_rest_open(rix_backend **out, const char *url, bool create)
{
	return rix_backend_rest_open_opts(out, url, create, NULL);
}

int rix_backend_rest_open_opts(rix_backend **out, const char *url, bool create, const rix_rest_options *o)
{
	*out = NULL;
	rix_rest_options defaults = RIX_REST_OPTIONS_INIT;
	if (o == NULL)
		o = &defaults;
	if (o->version != RIX_REST_OPTIONS_VERSION)
		return rix_error_set(RIX_EINVAL, "rest: options of version %u (this is %u)", o->version,
				     RIX_REST_OPTIONS_VERSION);
	pthread_once(&curl_once, curl_start);
	if (!curl_ok)
		return rix_error_set(RIX_EIO, "rest: libcurl failed to initialise");
	if (strncmp(url, "rest:", 5) == 0)
		url += 5;
	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
		return rix_error_set(RIX_EINVAL, "rest: a REST repository is an http(s) URL");
	size_t n = strlen(url);
	rest *r = rix_calloc(1, sizeof(*r));
	if (r == NULL || (r->url = rix_malloc(n + 2)) == NULL) {
		rix_free(r);
		return rix_error_set(RIX_ENOMEM, "rest: out of memory");
	}
	pthread_mutex_init(&r->mu, NULL);
	r->o = *o;
	r->o.cacert = NULL;
	if (o->cacert != NULL) {
		size_t cl = strlen(o->cacert) + 1;
		if ((r->cacert = rix_malloc(cl)) == NULL) {
			rest_close(r);
			return rix_error_set(RIX_ENOMEM, "rest: out of memory");
		}
		memcpy(r->cacert, o->cacert, cl);
	}
	/* "scheme://user:password@host/..." -> url "scheme://host/...", credentials apart. */
	const char *host = strstr(url, "://") + 3;
	/* The last '@' of the authority, as Go's url.Parse (restic) takes it. */
	const char *at = NULL, *end = host + strcspn(host, "/?#");
	for (const char *p = host; p < end; p++)
		if (*p == '@')
			at = p;
	if (at != NULL) {
		size_t ul = (size_t)(at - host), pre = (size_t)(host - url);
		if ((r->userpwd = rix_malloc(ul + 1)) == NULL) {
			rest_close(r);
			return rix_error_set(RIX_ENOMEM, "rest: out of memory");
		}
		r->userpwd_len = ul + 1;
		percent_decode(r->userpwd, host, ul, &r->pwd);
		memcpy(r->url, url, pre);
		memcpy(r->url + pre, at + 1, n - pre - ul); /* with the NUL */
		n -= ul + 1;
	} else {
		memcpy(r->url, url, n + 1);
	}
	if (n == 0 || r->url[n - 1] != '/')
		memcpy(r->url + n, "/", 2);
	uint64_t size;
	int rc = rest_stat(r, RIX_FILE_CONFIG, NULL, &size);
	int has_config = rc == 0;
	if (rc == RIX_ENOTFOUND)
		rc = 0;
	if (rc != 0) {
		/* the server cannot be reached, or refused: that error, not "no repository" */
	} else if (create && has_config) {
		rc = rix_error_set(RIX_EEXISTS, "rest: %s already holds a repository (config file)", r->url);
	} else if (create) {
		char u[4096];
		snprintf(u, sizeof(u), "%s?create=true", r->url);
		struct source src = { .p = (const uint8_t *)"", .fd = -1, .len = 0 };
		rc = post(r, u, &src);
	} else if (!has_config) {
		rc = rix_error_set(RIX_ENOTFOUND, "rest: %s is not a repository (no config file)", r->url);
	}
	if (rc == 0)
		rc = rix_backend_new(out, &rest_ops, r);
	if (rc != 0)
		rest_close(r);
	return rc;
}
