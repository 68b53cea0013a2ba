/*
 * bench/bench_pack.c — writing and reading packs (restic's repository benchmarks, by name), and
 * the pread-versus-mmap study. Files go to a temporary directory under $TMPDIR (or /tmp): they
 * are in the page cache, so these measure rix's own work and the system calls, not the disk.
 *
 *   SaveAndEncrypt/v1, /v2   restic's: a 4 MiB zero blob through codec (auto) + packer
 *                            (16 MiB packs, finished packs dropped); /v2/random: random bytes
 *   LoadBlob                 restic's: one 1,000,000-byte random blob: pread + decode
 *   LoadUnpacked             restic's: a 1,000,000-byte unpacked file (v2): read, SHA-256 of the
 *                            file (its name), open, decompress
 *   PackerManager            restic's: 102 blobs of rand(1 MiB) (seeded), compression off, 16 MiB
 *                            packs, flushed; one op = the whole set
 *   PackWrite                a 16 MiB pack of 16 random 1 MiB blobs, compression off: seal, hash,
 *                            write, header, finish (no fsync). Its limit is 1 / (1/AES + 1/Poly1305
 *                            + 1/SHA-256), from the Limit lines of bench_crypto.c
 *   PackRead/<size>/blob/{pread,mmap,mmap-each,mmap-copy}
 *                            one random 1,000,000-byte blob of a <size> pack (16-128 MiB of
 *                            random blobs): pread into a buffer then decode into the caller's
 *                            buffer (a copy); decode straight from a mapping kept open (zero
 *                            copy); map the blob's pages, decode, unmap; memcpy from the mapping,
 *                            then decode
 *   PackRead/<size>/pack/{pread,pread-blobs,mmap,mmap-populate}
 *                            the whole pack: read it (one pread of the whole file; or the header's
 *                            two preads then one pread per blob into one reused buffer; or a
 *                            mapping, faulted in as touched or populated up front), header, every
 *                            blob decoded into the caller's buffer
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "bench.h"

#define LOAD_N 1000000u

enum { SAVE_V1, SAVE_V2, SAVE_V2_RANDOM, LOAD_BLOB, LOAD_UNPACKED, PACKER_MANAGER, PACK_WRITE, READ_BLOB,
       READ_PACK };
enum { M_PREAD, M_MMAP, M_MMAP_EACH, M_MMAP_COPY, M_MMAP_POPULATE, M_PREAD_BLOBS };

struct pstate {
	rix_key *key;
	rix_blob_codec *codec;
	rix_packer *packer;
	char dir[256];
	char path[512];
	int fd;
	uint8_t *data;  /* input bytes */
	size_t data_n;
	uint8_t *buf;   /* read buffer */
	uint8_t *out;   /* decoded plaintext */
	size_t out_cap;
	rix_blob *blobs;
	size_t nblobs;
	uint64_t file_size;
	uint8_t *map;   /* M_MMAP, M_MMAP_COPY: the whole pack, mapped in setup */
	rix_id id;
	size_t sizes[102];
	uint64_t rnd;
};

static int drop_pack(void *arg, rix_pack_writer *w, const rix_id *pack_id)
{
	(void)arg;
	(void)pack_id;
	rix_pack_writer_free(w);
	return 0;
}

static int make_dir(bench_b *b, struct pstate *s)
{
	const char *t = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/rix-bench-XXXXXX", t != NULL && *t ? t : "/tmp");
	if (mkdtemp(s->dir) == NULL)
		return bench_fail(b, "mkdtemp %s: %s", s->dir, strerror(errno));
	return 0;
}

/* Writes a pack of blobs of LOAD_N random bytes until it holds at least size bytes. */
static int write_pack(bench_b *b, struct pstate *s, uint64_t size, rix_compression mode)
{
	rix_blob_codec *c;
	rix_pack_writer *w;
	if (rix_blob_codec_new(&c, s->key, 2, mode) != 0 || rix_pack_writer_new(&w, s->key, 2, s->dir) != 0)
		return bench_fail(b, "pack writer: %s", rix_error_last());
	uint8_t *p = malloc(LOAD_N);
	do {
		randombytes_buf(p, LOAD_N);
		rix_id id;
		rix_sha256(&id, p, LOAD_N);
		if (rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, p, LOAD_N) != 0)
			return bench_fail(b, "pack writer: %s", rix_error_last());
	} while (rix_pack_writer_size(w) < size);
	free(p);
	rix_id pid;
	char hex[65];
	if (rix_pack_writer_finish(&pid, w) != 0)
		return bench_fail(b, "finish: %s", rix_error_last());
	rix_id_to_hex(hex, &pid);
	snprintf(s->path, sizeof(s->path), "%s/%s", s->dir, hex);
	if (rix_pack_writer_rename(w, s->path, 0) != 0)
		return bench_fail(b, "rename: %s", rix_error_last());
	s->nblobs = rix_pack_writer_count(w);
	s->blobs = malloc(s->nblobs * sizeof(rix_blob));
	memcpy(s->blobs, rix_pack_writer_blobs(w), s->nblobs * sizeof(rix_blob));
	s->file_size = rix_pack_writer_file_size(w);
	rix_pack_writer_free(w);
	rix_blob_codec_free(c);
	s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return bench_fail(b, "open %s: %s", s->path, strerror(errno));
	return 0;
}

static int pack_setup(bench_b *b)
{
	struct pstate *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	b->state = s;
	s->fd = -1;
	s->rnd = 0x9ac4;
	if (sodium_init() < 0 || rix_key_random(&s->key) != 0)
		return bench_fail(b, "key: %s", rix_error_last());
	if (make_dir(b, s) != 0)
		return 1;
	int which = (int)b->def->arg[0];
	switch (which) {
	case SAVE_V1:
	case SAVE_V2:
	case SAVE_V2_RANDOM: {
		int v = which == SAVE_V1 ? 1 : 2;
		s->data_n = 4u << 20;
		s->data = calloc(1, s->data_n);
		if (which == SAVE_V2_RANDOM)
			randombytes_buf(s->data, s->data_n);
		rix_sha256(&s->id, s->data, s->data_n);
		if (rix_blob_codec_new(&s->codec, s->key, v, RIX_COMPRESSION_AUTO) != 0 ||
		    rix_packer_new(&s->packer, s->key, v, s->dir, 0, drop_pack, NULL) != 0)
			return bench_fail(b, "packer: %s", rix_error_last());
		b->set_bytes = s->data_n;
		break;
	}
	case LOAD_BLOB:
		if (write_pack(b, s, 1, RIX_COMPRESSION_AUTO) != 0)
			return 1;
		s->buf = malloc(s->blobs[0].length);
		s->out = malloc(LOAD_N);
		s->out_cap = LOAD_N;
		if (rix_blob_codec_new(&s->codec, s->key, 2, RIX_COMPRESSION_AUTO) != 0)
			return bench_fail(b, "codec: %s", rix_error_last());
		b->set_bytes = LOAD_N;
		break;
	case LOAD_UNPACKED: {
		s->data = malloc(LOAD_N);
		randombytes_buf(s->data, LOAD_N);
		uint8_t *f;
		size_t fn;
		if (rix_unpacked_encode(&f, &fn, s->key, s->data, LOAD_N, 2) != 0)
			return bench_fail(b, "unpacked: %s", rix_error_last());
		rix_sha256(&s->id, f, fn);
		char hex[65];
		rix_id_to_hex(hex, &s->id);
		snprintf(s->path, sizeof(s->path), "%s/%s", s->dir, hex);
		FILE *fp = fopen(s->path, "wb");
		if (fp == NULL || fwrite(f, 1, fn, fp) != fn || fclose(fp) != 0)
			return bench_fail(b, "write %s", s->path);
		rix_free(f);
		s->buf = malloc(fn);
		s->file_size = fn;
		b->set_bytes = LOAD_N;
		break;
	}
	case PACKER_MANAGER:
	case PACK_WRITE: {
		s->data_n = 1u << 20;
		s->data = malloc(s->data_n);
		randombytes_buf(s->data, s->data_n);
		rix_sha256(&s->id, s->data, s->data_n);
		if (rix_blob_codec_new(&s->codec, s->key, 2, RIX_COMPRESSION_OFF) != 0)
			return bench_fail(b, "codec: %s", rix_error_last());
		uint64_t total = 16u << 20;
		if (which == PACKER_MANAGER) {
			total = 0;
			for (int i = 0; i < 102; i++)
				total += s->sizes[i] = (size_t)(splitmix64_next(&s->rnd) % (1u << 20));
		}
		b->set_bytes = total;
		break;
	}
	case READ_BLOB:
	case READ_PACK: {
		if (write_pack(b, s, b->def->arg[1] << 20, RIX_COMPRESSION_OFF) != 0)
			return 1;
		int m = (int)b->def->arg[2];
		s->buf = malloc(s->file_size);
		s->out = malloc(LOAD_N);
		s->out_cap = LOAD_N;
		if (rix_blob_codec_new(&s->codec, s->key, 2, RIX_COMPRESSION_OFF) != 0)
			return bench_fail(b, "codec: %s", rix_error_last());
		if (which == READ_BLOB && (m == M_MMAP || m == M_MMAP_COPY)) {
			s->map = mmap(NULL, s->file_size, PROT_READ, MAP_SHARED, s->fd, 0);
			if (s->map == MAP_FAILED)
				return bench_fail(b, "mmap: %s", strerror(errno));
		}
		b->set_bytes = which == READ_BLOB ? LOAD_N : s->file_size;
		bench_metric(b, (double)s->nblobs, "blobs/pack");
		break;
	}
	}
	return 0;
}

static void pack_teardown(bench_b *b)
{
	struct pstate *s = b->state;
	if (s == NULL)
		return;
	rix_packer_free(s->packer);
	rix_blob_codec_free(s->codec);
	if (s->map != NULL && s->map != MAP_FAILED)
		munmap(s->map, s->file_size);
	if (s->fd >= 0)
		close(s->fd);
	if (s->path[0])
		unlink(s->path);
	if (s->dir[0])
		rmdir(s->dir);
	rix_key_free(s->key);
	free(s->data);
	free(s->buf);
	free(s->out);
	free(s->blobs);
	free(s);
	b->state = NULL;
}

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* One random blob of the pack by method m. */
static int read_blob(struct pstate *s, int m)
{
	const rix_blob *bl = &s->blobs[splitmix64_next(&s->rnd) % s->nblobs];
	size_t got;
	switch (m) {
	case M_PREAD:
		if (pread_all(s->fd, s->buf, bl->length, bl->offset) != 0)
			return rix_error_set(RIX_EIO, "pread");
		return rix_blob_codec_decode(&got, s->codec, s->buf, bl->length, bl, s->out, s->out_cap);
	case M_MMAP:
		return rix_blob_codec_decode(&got, s->codec, s->map + bl->offset, bl->length, bl, s->out, s->out_cap);
	case M_MMAP_COPY:
		memcpy(s->buf, s->map + bl->offset, bl->length);
		return rix_blob_codec_decode(&got, s->codec, s->buf, bl->length, bl, s->out, s->out_cap);
	case M_MMAP_EACH: {
		long pg = sysconf(_SC_PAGESIZE);
		uint64_t start = bl->offset & ~(uint64_t)(pg - 1);
		size_t len = (size_t)(bl->offset + bl->length - start);
		uint8_t *p = mmap(NULL, len, PROT_READ, MAP_SHARED, s->fd, (off_t)start);
		if (p == MAP_FAILED)
			return rix_error_set(RIX_EIO, "mmap");
		int rc = rix_blob_codec_decode(&got, s->codec, p + (bl->offset - start), bl->length, bl, s->out,
					       s->out_cap);
		munmap(p, len);
		return rc;
	}
	}
	return RIX_EINVAL;
}

static int fd_read(void *arg, uint64_t off, void *buf, size_t len)
{
	return pread_all(*(int *)arg, buf, len, off) == 0 ? 0 : rix_error_set(RIX_EIO, "pread");
}

/* The whole pack by method m: header from the bytes, then every blob. */
static int read_pack(struct pstate *s, int m)
{
	if (m == M_PREAD_BLOBS) { /* the header's two reads, then one pread per blob into one buffer */
		rix_blob *blobs;
		size_t cnt, got;
		int rc = rix_pack_read_header_at(&blobs, &cnt, s->key, s->file_size, fd_read, &s->fd, 2);
		for (size_t i = 0; rc == 0 && i < cnt; i++) {
			rc = fd_read(&s->fd, blobs[i].offset, s->buf, blobs[i].length);
			if (rc == 0)
				rc = rix_blob_codec_decode(&got, s->codec, s->buf, blobs[i].length, &blobs[i],
							   s->out, s->out_cap);
		}
		if (rc == 0)
			rix_free(blobs);
		return rc;
	}
	const uint8_t *p = s->buf;
	uint8_t *map = NULL;
	if (m == M_PREAD) {
		if (pread_all(s->fd, s->buf, s->file_size, 0) != 0)
			return rix_error_set(RIX_EIO, "pread");
	} else {
		map = mmap(NULL, s->file_size, PROT_READ, MAP_SHARED | (m == M_MMAP_POPULATE ? MAP_POPULATE : 0), s->fd,
			   0);
		if (map == MAP_FAILED)
			return rix_error_set(RIX_EIO, "mmap");
		p = map;
	}
	rix_blob *blobs;
	size_t cnt, got;
	int rc = rix_pack_read_header(&blobs, &cnt, s->key, p, s->file_size, 2);
	for (size_t i = 0; rc == 0 && i < cnt; i++)
		rc = rix_blob_codec_decode(&got, s->codec, p + blobs[i].offset, blobs[i].length, &blobs[i],
					   s->out, s->out_cap);
	if (rc == 0)
		rix_free(blobs);
	if (map != NULL)
		munmap(map, s->file_size);
	return rc;
}

static void pack_run(bench_b *b)
{
	struct pstate *s = b->state;
	int which = (int)b->def->arg[0];
	for (uint64_t i = 0; i < b->n; i++) {
		int rc = 0;
		switch (which) {
		case SAVE_V1:
		case SAVE_V2:
		case SAVE_V2_RANDOM:
			rc = rix_packer_add(NULL, s->packer, s->codec, RIX_BLOB_DATA, &s->id, s->data, s->data_n);
			break;
		case LOAD_BLOB: {
			size_t got;
			const rix_blob *bl = &s->blobs[0];
			rc = pread_all(s->fd, s->buf, bl->length, bl->offset) != 0
				     ? rix_error_set(RIX_EIO, "pread")
				     : rix_blob_codec_decode(&got, s->codec, s->buf, bl->length, bl, s->out, s->out_cap);
			break;
		}
		case LOAD_UNPACKED: {
			int fd = open(s->path, O_RDONLY | O_CLOEXEC);
			struct stat st;
			if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size != s->file_size ||
			    pread_all(fd, s->buf, s->file_size, 0) != 0) {
				rc = rix_error_set(RIX_EIO, "read %s", s->path);
			} else {
				rix_id id;
				rix_sha256(&id, s->buf, s->file_size);
				uint8_t *plain;
				size_t pn;
				rc = memcmp(id.b, s->id.b, RIX_ID_SIZE) != 0
					     ? rix_error_set(RIX_ECORRUPT, "file ID")
					     : rix_unpacked_decode(&plain, &pn, s->key, s->buf, s->file_size, 2);
				if (rc == 0)
					rix_free(plain);
			}
			if (fd >= 0)
				close(fd);
			break;
		}
		case PACKER_MANAGER: {
			rix_packer *p;
			rc = rix_packer_new(&p, s->key, 2, s->dir, 0, drop_pack, NULL);
			for (int k = 0; rc == 0 && k < 102; k++)
				rc = rix_packer_add(NULL, p, s->codec, RIX_BLOB_DATA, &s->id, s->data, s->sizes[k]);
			if (rc == 0)
				rc = rix_packer_flush(p);
			rix_packer_free(p);
			break;
		}
		case PACK_WRITE: {
			rix_pack_writer *w;
			rix_id pid;
			rc = rix_pack_writer_new(&w, s->key, 2, s->dir);
			for (int k = 0; rc == 0 && k < 16; k++)
				rc = rix_pack_writer_add(w, s->codec, RIX_BLOB_DATA, &s->id, s->data, s->data_n);
			if (rc == 0)
				rc = rix_pack_writer_finish(&pid, w);
			/* Removing the file is not writing it (a repository renames it into place). */
			bench_stop(b);
			rix_pack_writer_free(w);
			bench_start(b);
			break;
		}
		case READ_BLOB:
			rc = read_blob(s, (int)b->def->arg[2]);
			break;
		case READ_PACK:
			rc = read_pack(s, (int)b->def->arg[2]);
			break;
		}
		if (rc != 0) {
			bench_fail(b, "%s: %s", b->def->name, rix_error_last());
			return;
		}
	}
	if (which <= SAVE_V2_RANDOM) { /* the last open pack is not part of the figure */
		bench_stop(b);
		if (rix_packer_flush(s->packer) != 0)
			bench_fail(b, "flush: %s", rix_error_last());
		bench_start(b);
	}
}

void register_pack_benchmarks(void)
{
	static const struct {
		const char *name;
		int which;
	} list[] = {
		{ "SaveAndEncrypt/v1", SAVE_V1 },    { "SaveAndEncrypt/v2", SAVE_V2 },
		{ "SaveAndEncrypt/v2/random", SAVE_V2_RANDOM },
		{ "LoadBlob", LOAD_BLOB },            { "LoadUnpacked", LOAD_UNPACKED },
		{ "PackerManager", PACKER_MANAGER }, { "PackWrite", PACK_WRITE },
	};
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		bench_def d = { .setup = pack_setup, .run = pack_run, .teardown = pack_teardown, .family = 3 };
		snprintf(d.name, sizeof(d.name), "%s", list[i].name);
		d.arg[0] = (uint64_t)list[i].which;
		bench_register(&d);
	}
	static const char *const blob_m[] = { "pread", "mmap", "mmap-each", "mmap-copy" };
	static const int blob_mi[] = { M_PREAD, M_MMAP, M_MMAP_EACH, M_MMAP_COPY };
	static const char *const pack_m[] = { "pread", "pread-blobs", "mmap", "mmap-populate" };
	static const int pack_mi[] = { M_PREAD, M_PREAD_BLOBS, M_MMAP, M_MMAP_POPULATE };
	static const uint64_t sizes[] = { 16, 32, 64, 128 };
	for (size_t z = 0; z < 4; z++) {
		for (size_t k = 0; k < 4; k++) {
			bench_def d = { .setup = pack_setup, .run = pack_run, .teardown = pack_teardown, .family = 3 };
			snprintf(d.name, sizeof(d.name), "PackRead/%lluMiB/blob/%s", (unsigned long long)sizes[z], blob_m[k]);
			d.arg[0] = READ_BLOB;
			d.arg[1] = sizes[z];
			d.arg[2] = (uint64_t)blob_mi[k];
			bench_register(&d);
		}
		for (size_t k = 0; k < 4; k++) {
			bench_def d = { .setup = pack_setup, .run = pack_run, .teardown = pack_teardown, .family = 3 };
			snprintf(d.name, sizeof(d.name), "PackRead/%lluMiB/pack/%s", (unsigned long long)sizes[z], pack_m[k]);
			d.arg[0] = READ_PACK;
			d.arg[1] = sizes[z];
			d.arg[2] = (uint64_t)pack_mi[k];
			bench_register(&d);
		}
	}
}
