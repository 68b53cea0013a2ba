/*
 * repo/index_cache.c — the index cache: a local, sealed, binary copy of a repository's merged
 * index, so that reopening it skips reading and decoding its index files (restic keeps a cache
 * of the files themselves; rix keeps the table they make).
 *
 * Where: <cache_dir>/<repository ID>/rix-index, with a CACHEDIR.TAG in cache_dir, as restic keeps
 * ~/.cache/restic/<ID>/. The CLI's cache_dir is $XDG_CACHE_HOME/rix (else ~/.cache/rix).
 *
 * The file (integers little-endian; the image's sections in the host's order, which the image's
 * descriptor checks):
 *
 *   0    "rixcache"                                   8   plaintext: what the file is
 *   8    version (1)                                  4
 *   12   hlen: the sealed header's bytes              4
 *   16   sealed header: IV | enc(header) | MAC        hlen
 *   16 + hlen   data: the chunks' ciphertexts, back to back, nothing between them
 *
 *   header (plaintext): repository ID (32) | chunk size (4) | chunks (4) | data bytes (8) |
 *                       descriptor bytes (4) | descriptor (the master image's, index/master_image.c:
 *                       layout, counts, tables' shapes, the index file IDs) | per chunk: IV (16) | MAC (16)
 *
 * The data are the image's sections (the pack table; each ranked table's set, locations, second
 * locations and filter) cut into chunks of CHUNK bytes (a section's last chunk shorter; chunks never
 * span sections), each sealed on its
 * own with the repository's master key (AES-256-CTR + Poly1305-AES, as every restic object) but
 * with its IV and MAC kept in the header, so that a chunk's ciphertext is read straight into the
 * array its plaintext is used in, and decrypted there: no copy, no parse. The header, sealed
 * too, authenticates every chunk's IV and MAC, hence its place; a chunk's MAC authenticates its
 * bytes. Chunks of 1 MiB are read, verified and decrypted while in the CPU's caches, by several
 * threads (reads of the page cache run in parallel).
 *
 * Never trusted: a file that is short or long, of another version, that fails a MAC (damaged,
 * another repository's key), names another repository, was made by a build of another layout
 * (the descriptor), or is not well formed (the master index checks the tables it installs) is
 * ignored and rebuilt; so is one made of an index file the repository no longer lists (the
 * entries of one file cannot be taken out of the merged table). Index files listed and not in
 * the cache are loaded on top of it.
 *
 * Writing: after a load that read index files (on top of a cache: only when they did not fit on
 * top of its tables, or were many: RIX__CACHE_REWRITE_FILES in repo_internal.h), the merged
 * state is exported (pinned: see
 * master_image.c) and a thread writes it to a temporary file in the same folder, then renames
 * it over the old one: a reader sees the old file or the new one, never a part. No fsync: a
 * machine crash may leave a damaged file under the final name, which the next open finds
 * damaged and replaces; the repository does not depend on the cache. The writer's time (sealing
 * and writing some 50 bytes a blob) overlaps the command's own work; rix_repo_free waits for it.
 * Temporary files a killed writer left are removed by the next writer once an hour old.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"
#include "../common/pool.h"

#define CACHE_MAGIC "rixcache"
#define CACHE_VERSION 1u
#define CHUNK ((size_t)1 << 20)
#define PREFIX 16u
#define HEADER_FIXED 52u
#define HEADER_MAX ((size_t)256 << 20)
#define FILE_NAME "rix-index"
#define TMP_PREFIX "rix-tmp-"
#define TMP_STALE_SECONDS 3600

static const char cachedir_tag[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
				   "# This file is a cache directory tag created by rix.\n"
				   "# For information about cache directory tags, see:\n"
				   "#\thttps://bford.info/cachedir/\n";

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Chunks of the sections: n of them; each section's ceil(bytes / CHUNK). */
static size_t count_chunks(const rix_image_section *sec, size_t nsec, uint64_t *data)
{
	size_t n = 0;
	*data = 0;
	for (size_t k = 0; k < nsec; k++) {
		n += (sec[k].n + CHUNK - 1) / CHUNK;
		*data += sec[k].n;
	}
	return n;
}

/* ---- folders -------------------------------------------------------------------------------- */

/* mkdir -p path (0700, as restic's cache). 0 or -1 (errno). */
static int make_dirs(char *path)
{
	for (char *p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		int rc = mkdir(path, 0700);
		*p = c;
		if (rc != 0 && errno != EEXIST)
			return -1;
		if (c == '\0')
			return 0;
	}
}

void rix__index_cache_open(rix_repo *r)
{
	const char *root = r->opt.cache_dir;
	r->opt.cache_dir = NULL; /* borrowed: cache_path is what stays */
	if (root == NULL || *root == '\0')
		return;
	size_t n = strlen(root);
	char *path = rix_malloc(n + 1 + 64 + 1);
	if (path == NULL) {
		rix__repo_warn(r, "index cache: out of memory: no cache");
		return;
	}
	memcpy(path, root, n + 1);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	if (make_dirs(path) != 0) {
		rix__repo_warn(r, "index cache: cannot make %s: %s: no cache", path, strerror(errno));
		rix_free(path);
		return;
	}
	/* The tag in the root, written once (a failure only means backup tools may copy the cache). */
	char tag[4096];
	if ((size_t)snprintf(tag, sizeof(tag), "%s/CACHEDIR.TAG", path) < sizeof(tag)) {
		int fd = open(tag, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			ssize_t w = write(fd, cachedir_tag, sizeof(cachedir_tag) - 1);
			if (close(fd) != 0 || w != (ssize_t)sizeof(cachedir_tag) - 1) {
				rix__repo_warn(r, "index cache: cannot write %s", tag);
				(void)unlink(tag);
			}
		}
	}
	path[n] = '/';
	rix_id_to_hex(path + n + 1, &r->cfg.id);
	if (mkdir(path, 0700) != 0 && errno != EEXIST) {
		rix__repo_warn(r, "index cache: cannot make %s: %s: no cache", path, strerror(errno));
		rix_free(path);
		return;
	}
	r->cache_path = path;
}

/* <cache_path>/<name> into buf. 0, or -1 when it does not fit. */
static int file_path(char *buf, size_t cap, const rix_repo *r, const char *name)
{
	return (size_t)snprintf(buf, cap, "%s/%s", r->cache_path, name) < cap ? 0 : -1;
}

/* ---- reading -------------------------------------------------------------------------------- */

/* n bytes at off, read (wr false) or written, whole; -1 with errno (a short end: EIO, ENOSPC). */
static int pio_full(int fd, void *buf, size_t n, uint64_t off, bool wr)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t k = wr ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = wr ? ENOSPC : EIO;
			return -1;
		}
		p += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t n, uint64_t off)
{
	return pio_full(fd, buf, n, off, false);
}

struct chunk {
	uint8_t *p;      /* where its plaintext goes (its ciphertext is read there) */
	size_t n;
	uint64_t off;    /* in the file */
	const uint8_t *ivmac; /* IV then MAC, in the opened header */
};

struct read_job {
	const rix_key *key;
	int fd;
	struct chunk *c;
	size_t n;
	atomic_size_t next;
	atomic_int failed;
};

static void *read_chunks(void *arg)
{
	struct read_job *j = arg;
	for (;;) {
		size_t k = atomic_fetch_add(&j->next, 1);
		if (k >= j->n || atomic_load(&j->failed))
			return NULL;
		struct chunk *c = &j->c[k];
		if (read_full(j->fd, c->p, c->n, c->off) != 0 ||
		    rix_crypto_open_detached(j->key, c->ivmac, c->p, c->n, c->ivmac + RIX_CRYPTO_IV_SIZE, c->p) != 0)
			atomic_store(&j->failed, 1);
	}
}

static int cmp_name(const void *key, const void *elem)
{
	return strcmp(key, ((const struct rix__name *)elem)->s);
}

/* The body of rix__index_cache_read on an open file: the image, read and checked, or NULL. */
static rix_master_image *read_file(rix_repo *r, int fd, const struct rix__names *names)
{
	struct stat st;
	uint8_t pre[PREFIX];
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)PREFIX || read_full(fd, pre, PREFIX, 0) != 0)
		return NULL;
	uint64_t size = (uint64_t)st.st_size, hlen = get32(pre + 12);
	if (memcmp(pre, CACHE_MAGIC, 8) != 0 || get32(pre + 8) != CACHE_VERSION || hlen > HEADER_MAX ||
	    hlen < HEADER_FIXED + RIX_CRYPTO_OVERHEAD || PREFIX + hlen > size)
		return NULL;
	uint8_t *sealed = rix_malloc((size_t)hlen);
	if (sealed == NULL)
		return NULL;
	int ok = 0;
	rix_master_image *im = NULL;
	struct chunk *c = NULL;
	uint8_t *h = sealed + RIX_CRYPTO_IV_SIZE; /* the header, opened in place */
	size_t plen = (size_t)hlen - RIX_CRYPTO_OVERHEAD;
	if (read_full(fd, sealed, (size_t)hlen, PREFIX) != 0 || rix_crypto_open(r->key, sealed, (size_t)hlen, h) != 0)
		goto out;
	uint32_t chunk = get32(h + 32), nchunks = get32(h + 36), dlen = get32(h + 48);
	uint64_t data = get64(h + 40);
	if (memcmp(h, r->cfg.id.b, RIX_ID_SIZE) != 0 || chunk != CHUNK || dlen > plen - HEADER_FIXED ||
	    plen != HEADER_FIXED + (uint64_t)dlen + (uint64_t)nchunks * 32u || size != PREFIX + hlen + data)
		goto out;
	if (rix_master_image_parse(&im, h + HEADER_FIXED, dlen) != 0)
		goto out;
	/* Every index file it was made of must still be listed. */
	size_t nids;
	const rix_id *ids = rix_master_image_index_ids(&nids, im);
	for (size_t i = 0; i < nids; i++) {
		char hex[65];
		rix_id_to_hex(hex, &ids[i]);
		if (bsearch(hex, names->v, names->n, sizeof(*names->v), cmp_name) == NULL)
			goto out;
	}
	size_t nsec;
	rix_image_section *sec = rix_master_image_sections(&nsec, im);
	uint64_t want_data;
	if (count_chunks(sec, nsec, &want_data) != nchunks || want_data != data)
		goto out;
	if (rix_master_image_alloc(im) != 0 || (c = rix_malloc((nchunks ? nchunks : 1) * sizeof(*c))) == NULL)
		goto out;
	const uint8_t *ivmac = h + HEADER_FIXED + dlen;
	uint64_t off = PREFIX + hlen;
	size_t k = 0;
	for (size_t s = 0; s < nsec; s++)
		for (size_t at = 0; at < sec[s].n; at += CHUNK, k++) {
			size_t len = sec[s].n - at < CHUNK ? sec[s].n - at : CHUNK;
			c[k] = (struct chunk){ (uint8_t *)sec[s].p + at, len, off, ivmac + 32 * k };
			off += len;
		}
	struct read_job job = { .key = r->key, .fd = fd, .c = c, .n = nchunks };
	atomic_init(&job.next, 0);
	atomic_init(&job.failed, 0);
	unsigned workers = rix__pool_size(r->opt.workers, 16); /* no more than there are chunks */
	if (workers > nchunks)
		workers = nchunks > 0 ? (unsigned)nchunks : 1;
	rix__pool_run(workers, read_chunks, &job);
	ok = !atomic_load(&job.failed) && rix_master_image_check(im) == 0;
out:
	rix_free(c);
	rix_free(sealed);
	if (!ok) {
		rix_master_image_free(im);
		im = NULL;
	}
	rix_error_clear(); /* a cache that does not load is no error */
	return im;
}

rix_master_image *rix__index_cache_read(rix_repo *r, const struct rix__names *names)
{
	char path[4096];
	if (r->cache_path == NULL || file_path(path, sizeof(path), r, FILE_NAME) != 0)
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	rix_master_image *im = read_file(r, fd, names);
	close(fd);
	return im;
}

/* ---- writing -------------------------------------------------------------------------------- */

struct cache_job {
	rix_repo *r;
	rix_master_image *im;
};

/* Removes temporary files of writers that did not finish (killed), once they are stale. */
static void sweep_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	time_t now = time(NULL);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (strncmp(e->d_name, TMP_PREFIX, sizeof(TMP_PREFIX) - 1) != 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISREG(st.st_mode) && now - st.st_mtime > TMP_STALE_SECONDS)
			(void)unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

static int write_full(int fd, const void *buf, size_t n, uint64_t off)
{
	return pio_full(fd, (void *)(uintptr_t)buf, n, off, true);
}

/* Writes the image to fd: the chunks, then the prefix and the sealed header. 0, or a message. */
static const char *write_image(const rix_repo *r, rix_master_image *im, int fd)
{
	size_t nsec, dlen;
	rix_image_section *sec = rix_master_image_sections(&nsec, im);
	const void *desc = rix_master_image_desc(&dlen, im);
	uint64_t data;
	size_t nchunks = count_chunks(sec, nsec, &data);
	size_t plen = HEADER_FIXED + dlen + 32 * nchunks;
	if (plen + RIX_CRYPTO_OVERHEAD > HEADER_MAX || nchunks > 0xFFFFFFFFu || dlen > 0xFFFFFFFFu)
		return "the index is too large for a cache file";
	uint8_t *h = rix_malloc(plen), *file_head = rix_malloc(PREFIX + plen + RIX_CRYPTO_OVERHEAD);
	uint8_t *buf = rix_malloc(CHUNK);
	const char *err = NULL;
	if (h == NULL || file_head == NULL || buf == NULL) {
		err = "out of memory";
		goto out;
	}
	memcpy(h, r->cfg.id.b, RIX_ID_SIZE);
	put32(h + 32, (uint32_t)CHUNK);
	put32(h + 36, (uint32_t)nchunks);
	put64(h + 40, data);
	put32(h + 48, (uint32_t)dlen);
	memcpy(h + HEADER_FIXED, desc, dlen);
	uint8_t *ivmac = h + HEADER_FIXED + dlen;
	uint64_t hlen = plen + RIX_CRYPTO_OVERHEAD, off = PREFIX + hlen;
	for (size_t s = 0, k = 0; s < nsec && err == NULL; s++)
		for (size_t at = 0; at < sec[s].n && err == NULL; at += CHUNK, k++) {
			size_t len = sec[s].n - at < CHUNK ? sec[s].n - at : CHUNK;
			uint8_t *iv = ivmac + 32 * k;
			if (rix_crypto_seal_detached(r->key, iv, (const uint8_t *)sec[s].p + at, len, buf, iv + 16) != 0)
				err = "sealing failed";
			else if (write_full(fd, buf, len, off) != 0)
				err = strerror(errno);
			off += len;
		}
	if (err == NULL) {
		memcpy(file_head, CACHE_MAGIC, 8);
		put32(file_head + 8, CACHE_VERSION);
		put32(file_head + 12, (uint32_t)hlen);
		if (rix_crypto_seal(r->key, h, plen, file_head + PREFIX) != 0)
			err = "sealing failed";
		else if (write_full(fd, file_head, PREFIX + (size_t)hlen, 0) != 0)
			err = strerror(errno);
	}
out:
	rix_free(h);
	rix_free(file_head);
	rix_free(buf);
	return err;
}

static void *write_cache(void *arg)
{
	struct cache_job *j = arg;
	rix_repo *r = j->r;
	char tmp[4096], final[4096];
	if (file_path(tmp, sizeof(tmp), r, TMP_PREFIX "XXXXXX") != 0 || file_path(final, sizeof(final), r, FILE_NAME) != 0) {
		rix__repo_warn(r, "index cache: its path is too long: not written");
		goto out;
	}
	sweep_tmp(r->cache_path);
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rix__repo_warn(r, "index cache: cannot make a file in %s: %s", r->cache_path, strerror(errno));
		goto out;
	}
	const char *err = write_image(r, j->im, fd);
	if (close(fd) != 0 && err == NULL)
		err = strerror(errno);
	if (err == NULL && rename(tmp, final) != 0)
		err = strerror(errno);
	if (err != NULL) {
		(void)unlink(tmp);
		rix__repo_warn(r, "index cache: cannot write %s: %s", final, err);
	}
out:
	rix_master_image_free(j->im); /* releases the pinned state */
	rix_error_clear();
	return NULL;
}

void rix__index_cache_join(rix_repo *r)
{
	if (r->cache_writing) {
		pthread_join(r->cache_writer, NULL);
		r->cache_writing = false;
	}
	rix_free(r->cache_job);
	r->cache_job = NULL;
}

void rix__index_cache_save(rix_repo *r)
{
	if (r->cache_path == NULL)
		return;
	rix__index_cache_join(r);
	struct cache_job *j = rix_calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->r = r;
	if (rix_master_index_export(&j->im, r->mi) != 0) { /* blobs stored before the load: no cache */
		rix_free(j);
		rix_error_clear();
		return;
	}
	r->cache_job = j;
	if (pthread_create(&r->cache_writer, NULL, write_cache, j) == 0)
		r->cache_writing = true;
	else
		write_cache(j); /* no thread: now, in this one */
}
