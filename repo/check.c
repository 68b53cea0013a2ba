/*
 * repo/check.c — rix_repo_check: the index against the packs, and optionally every byte.
 *
 *   load index (damaged files counted) ──> entries sorted by (pack, offset)
 *   snapshots: each file read (SHA-256 = name), decoded, its tree ──> tree_walk.c: each tree
 *     reachable once (loaded = in the index + verified), each data blob a file names looked up
 *   list packs in the backend ──> missing (error) / orphaned (reported)
 *   workers, one pack at a time:
 *     header from the tail (two reads) == the index's entries for that pack (both ways)
 *     read_data (all packs, or restic's subset): the whole pack: SHA-256 == name, every blob
 *
 * What is damage and what is not: a file that reads but is wrong (RIX_ECORRUPT, RIX_EAUTH, a
 * hash that is not its name, a file shorter than the index says) or is missing is an error of
 * the repository, reported and counted, and the check goes on. RIX_EIO is the backend failing
 * (a REST server gone after its retries, a disk that fails): the repository cannot be read, so
 * every file after it would fail the same way. The check stops at the first one, which is its
 * result (the operation and file named once), counted nowhere and never reported as damage.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/repo.h"
#include "repo_internal.h"
#include "tree_walk.h"
#include "../common/pool.h"

struct entries {
	rix_packed_blob *v;
	size_t n, cap;
};

static int add_entry(void *arg, const rix_packed_blob *pb)
{
	struct entries *e = arg;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 1024;
		rix_packed_blob *v = rix_realloc(e->v, cap * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "check: out of memory for the index entries");
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = *pb;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const rix_packed_blob *x = a, *y = b;
	int c = memcmp(x->pack_id.b, y->pack_id.b, RIX_ID_SIZE);
	if (c != 0)
		return c;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_blob_id(const void *a, const void *b)
{
	const rix_packed_blob *x = a, *y = b;
	int c = memcmp(x->id.b, y->id.b, RIX_ID_SIZE);
	return c != 0 ? c : (int)x->type - (int)y->type;
}

struct seen_pack {
	rix_id id;
	uint64_t size;
	int used;
};

struct packs_seen {
	struct seen_pack *v;
	size_t n, cap;
};

static int add_pack(void *arg, const char *name, uint64_t size)
{
	struct packs_seen *p = arg;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct seen_pack *v = rix_realloc(p->v, cap * sizeof(*v));
		if (v == NULL)
			return rix_error_set(RIX_ENOMEM, "check: out of memory listing packs");
		p->v = v;
		p->cap = cap;
	}
	if (rix_id_from_hex(&p->v[p->n].id, name, 64) == 0) {
		p->v[p->n].size = size;
		p->v[p->n++].used = 0;
	}
	return 0;
}

static int cmp_seen(const void *a, const void *b)
{
	return memcmp(((const struct seen_pack *)a)->id.b, ((const struct seen_pack *)b)->id.b, RIX_ID_SIZE);
}

struct checker {
	rix_repo *r;
	rix_check_msg_fn msg;
	rix_check_progress_fn progress;
	size_t done;
	void *arg;
	rix_check_report *rep;
	const char *snapshot;     /* the snapshot being walked (its name) */
	size_t walked;            /* data blobs looked up so far */
	const uint8_t *read;      /* pack k read whole (read_data or the subset) */
	const rix_packed_blob *e; /* sorted by pack */
	size_t *start;            /* pack k: e[start[k], start[k+1]) */
	uint64_t *size;           /* pack k's size in the backend, UINT64_MAX if missing */
	size_t npacks;
	size_t next;
	int fatal;
	char fatal_msg[512]; /* its message: it may have been set on another thread */
	pthread_mutex_t mu;
};

static void report(struct checker *c, bool is_error, size_t *counter, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void report(struct checker *c, bool is_error, size_t *counter, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&c->mu);
	if (counter != NULL)
		++*counter;
	if (is_error)
		c->rep->errors++;
	if (c->msg != NULL)
		c->msg(c->arg, is_error, line);
	pthread_mutex_unlock(&c->mu);
}

/* The backend failed, as opposed to a file that is damaged or missing (see the top). */
static bool backend_failed(int rc)
{
	return rc == RIX_EIO;
}

/* Checks pack k. Returns only errors that stop the whole check (memory, the backend failing). */
static int check_pack(struct checker *c, size_t k, rix_blob_codec *codec)
{
	const rix_packed_blob *e = c->e + c->start[k];
	size_t n = c->start[k + 1] - c->start[k];
	char name[65];
	rix_id_to_hex(name, &e->pack_id);
	if (c->size[k] == UINT64_MAX) {
		report(c, true, &c->rep->missing_packs, "pack %s: missing (the index names %zu blobs in it)", name, n);
		return 0;
	}
	rix_backend *b = rix_repo_backend(c->r);
	const rix_key *key = rix__repo_key(c->r);
	int version = rix_repo_config(c->r)->version;
	uint8_t *pack = NULL;
	rix_blob *hdr = NULL;
	size_t cnt = 0;
	int rc;
	bool read_data = c->read[k] != 0;
	if (read_data) {
		/* The size is known from the listing: one read, no second stat. Offsets are u32, so a
		 * pack over 4 GiB is damaged, whatever it holds. */
		if (c->size[k] > UINT32_MAX)
			rc = rix_error_set(RIX_ECORRUPT, "%llu bytes is over the 4 GiB a pack can be",
					   (unsigned long long)c->size[k]);
		else if ((pack = rix_malloc(c->size[k] ? (size_t)c->size[k] : 1)) == NULL)
			return rix_error_set(RIX_ENOMEM, "check: out of memory for a %llu-byte pack",
					     (unsigned long long)c->size[k]);
		else
			rc = rix_backend_read(b, RIX_FILE_PACK, name, 0, pack, (size_t)c->size[k]);
		if (rc == 0) {
			pthread_mutex_lock(&c->mu);
			c->rep->bytes_read += c->size[k];
			c->rep->packs_read++;
			pthread_mutex_unlock(&c->mu);
			rix_id got;
			rix_sha256(&got, pack, (size_t)c->size[k]);
			/* Reported, and the blobs are still checked: they say which are lost. */
			if (memcmp(got.b, e->pack_id.b, RIX_ID_SIZE) != 0)
				report(c, true, &c->rep->damaged_packs, "pack %s: its SHA-256 is not its name (damaged)", name);
			rc = rix_pack_read_header(&hdr, &cnt, key, pack, (size_t)c->size[k], version);
		}
	} else {
		rc = rix__read_pack_header(c->r, name, c->size[k], &hdr, &cnt);
	}
	if (rc == RIX_ENOMEM || backend_failed(rc)) {
		rix_free(pack);
		return rc;
	}
	if (rc != 0) {
		report(c, true, &c->rep->damaged_packs, "pack %s: %s", name, rix_error_last());
		rix_free(pack);
		return 0;
	}
	/* The index's entries against the header's (both in offset order; duplicates within a pack
	 * are entries at the same offset). */
	size_t i = 0, j = 0, bad = 0, unindexed = 0;
	while (i < n || j < cnt) {
		const rix_packed_blob *x = i < n ? &e[i] : NULL;
		const rix_blob *h = j < cnt ? &hdr[j] : NULL;
		if (h == NULL || (x != NULL && x->offset < h->offset)) {
			bad++, i++;
		} else if (x == NULL || x->offset > h->offset) {
			/* In the header only: a blob no index names (restic: "not contained in index"). */
			char hex[65];
			rix_id_to_hex(hex, &h->id);
			report(c, true, &c->rep->unindexed_blobs, "pack %s: %s blob %s at offset %u is in the pack but in no index",
			       name, h->type == RIX_BLOB_TREE ? "tree" : "data", hex, h->offset);
			j++, unindexed++;
		} else {
			if (x->type != h->type || x->length != h->length || x->uncompressed_length != h->uncompressed_length ||
			    memcmp(x->id.b, h->id.b, RIX_ID_SIZE) != 0)
				bad++;
			i++;
			if (i == n || e[i].offset != x->offset)
				j++;
		}
	}
	if (bad > 0)
		report(c, true, &c->rep->header_mismatches, "pack %s: %zu index entries do not match its header", name, bad);
	if (bad == 0 && unindexed == 0 && c->size[k] != 0) { /* 0: the backend did not say */
		/* The header is the index's: the blobs, the sealed header and its length are the whole
		 * file (restic: "unexpected file size"), nothing before, between or after them. */
		uint64_t want = 4 + RIX_CRYPTO_OVERHEAD, end = 0;
		for (j = 0; j < cnt; j++) {
			want += hdr[j].length + (hdr[j].uncompressed_length ? RIX_PACK_ENTRY_SIZE_ZSTD : RIX_PACK_ENTRY_SIZE);
			if (hdr[j].offset != end)
				break;
			end += hdr[j].length;
		}
		if (j < cnt || want != c->size[k])
			report(c, true, &c->rep->damaged_packs, "pack %s: %llu bytes, its index entries make %llu%s", name,
			       (unsigned long long)c->size[k], (unsigned long long)want,
			       j < cnt ? " (blobs not end to end)" : "");
	}
	if (read_data) {
		uint8_t *out = NULL;
		size_t cap = 0;
		for (j = 0; j < cnt; j++) {
			size_t need = rix_blob_plain_size(hdr[j].length, hdr[j].uncompressed_length);
			if (need > cap) {
				rix_free(out);
				cap = need;
				out = rix_malloc(cap ? cap : 1);
				if (out == NULL) {
					rix_free(hdr);
					rix_free(pack);
					return rix_error_set(RIX_ENOMEM, "check: out of memory for a %zu-byte blob", need);
				}
			}
			size_t got;
			rc = rix_blob_codec_decode(&got, codec, pack + hdr[j].offset, hdr[j].length, &hdr[j], out, cap);
			if (rc == RIX_ENOMEM) {
				rix_free(out);
				rix_free(hdr);
				rix_free(pack);
				return rc;
			}
			if (rc != 0) {
				char hex[65];
				rix_id_to_hex(hex, &hdr[j].id);
				report(c, true, &c->rep->damaged_blobs, "pack %s: blob %s at %u: %s", name, hex, hdr[j].offset,
				       rix_error_last());
			}
		}
		rix_free(out);
	}
	rix_free(hdr);
	rix_free(pack);
	return 0;
}

static void *check_worker(void *arg)
{
	struct checker *c = arg;
	rix_blob_codec *codec = NULL;
	int rc = rix_blob_codec_new(&codec, rix__repo_key(c->r), rix_repo_config(c->r)->version, RIX_COMPRESSION_OFF);
	for (;;) {
		pthread_mutex_lock(&c->mu);
		if (rc != 0 && c->fatal == 0) {
			c->fatal = rc;
			snprintf(c->fatal_msg, sizeof(c->fatal_msg), "%s", rix_error_last());
		}
		size_t k = c->fatal == 0 && c->next < c->npacks ? c->next++ : SIZE_MAX;
		pthread_mutex_unlock(&c->mu);
		if (k == SIZE_MAX)
			break;
		rc = rix__repo_lock_ok(c->r); /* a lost lock stops the check */
		if (rc == 0)
			rc = check_pack(c, k, codec);
		pthread_mutex_lock(&c->mu);
		c->done++;
		if (c->progress != NULL)
			c->progress(c->arg, c->done, c->npacks, c->rep->bytes_read);
		pthread_mutex_unlock(&c->mu);
	}
	rix_blob_codec_free(codec);
	return NULL;
}

static void index_error(void *arg, const char *name, int code, const char *msg)
{
	struct checker *c = arg;
	if (backend_failed(code)) /* not damage: rix_repo_load_index stops and returns it */
		return;
	report(c, true, &c->rep->damaged_index_files, "index %s: %s", name, msg);
}

/* ---- the snapshots and their trees ---- */

static int on_data_blob(void *payload, const rix_id *tree, const char *path, const rix_id *blob)
{
	struct checker *c = payload;
	/* A long walk notices a lost lock too (each snapshot's start checks it as well). */
	if (++c->walked % 4096 == 0) {
		int rc = rix__repo_lock_ok(c->r);
		if (rc != 0)
			return rc;
	}
	if (rix_master_index_has(rix_repo_master_index(c->r), RIX_BLOB_DATA, blob))
		return 0;
	char th[65], bh[65];
	rix_id_to_hex(th, tree);
	rix_id_to_hex(bh, blob);
	report(c, true, &c->rep->missing_blobs, "snapshot %s: tree %s: data blob %s is not in the index (file %s)",
	       c->snapshot, th, bh, path);
	return 0;
}

static int on_bad_tree(void *payload, const rix_id *tree, const char *path, int code, const char *msg)
{
	struct checker *c = payload;
	if (code == RIX_ENOMEM || code == RIX_ELOCKED || backend_failed(code))
		return rix_error_set(code, "%s", msg);
	char th[65];
	rix_id_to_hex(th, tree);
	/* Not found: not in the index, or its pack is gone (a missing pack is also reported as such). */
	report(c, true, code == RIX_ENOTFOUND ? &c->rep->missing_blobs : &c->rep->damaged_trees,
	       "snapshot %s: tree %s: %s (path %s)", c->snapshot, th, msg, *path ? path : "/");
	return 0;
}

/* Every snapshot, every tree reachable from them, every data blob they name. */
static int check_snapshots(struct checker *c)
{
	struct rix__names s = { 0 };
	rix__walk_ops ops = { .data_blob = on_data_blob, .bad_tree = on_bad_tree, .payload = c };
	rix__walker *w = NULL;
	int rc = rix__walker_new(&w, c->r, &ops);
	if (rc == 0)
		rc = rix__list_names(rix_repo_backend(c->r), RIX_FILE_SNAPSHOT, &s);
	for (size_t i = 0; rc == 0 && i < s.n; i++) {
		rc = rix__repo_lock_ok(c->r);
		if (rc != 0)
			break;
		c->rep->snapshots++;
		c->snapshot = s.v[i].s;
		rix_id tree;
		rc = rix__snapshot_tree(&tree, c->r, s.v[i].s);
		if (rc == RIX_ENOMEM || backend_failed(rc))
			break;
		if (rc != 0) {
			report(c, true, &c->rep->damaged_snapshots, "snapshot %s: %s", s.v[i].s, rix_error_last());
			rc = 0;
			continue;
		}
		uint64_t files = 0, bytes = 0;
		rc = rix__walker_walk(w, &tree, &files, &bytes);
	}
	if (w != NULL)
		c->rep->trees = rix__walker_trees(w);
	c->snapshot = NULL;
	rix_free(s.v);
	rix__walker_free(w);
	return rc;
}

/* ---- which packs are read whole ---- */

static uint64_t next_rand(uint64_t *x)
{
	/* splitmix64 */
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool has_subset(const rix_check_options *o)
{
	return o->subset_t != 0 || o->subset_n != 0 || o->subset_percent != 0 || o->subset_bytes != 0;
}

static int subset_valid(const rix_check_options *o)
{
	int kinds = (o->subset_t != 0 || o->subset_n != 0) + (o->subset_percent != 0) + (o->subset_bytes != 0);
	if (kinds > 1)
		return rix_error_set(RIX_EINVAL, "check: one read-data subset at a time (n/t, a percentage or a size)");
	if ((o->subset_t != 0 || o->subset_n != 0) &&
	    (o->subset_n < 1 || o->subset_t < 1 || o->subset_n > o->subset_t || o->subset_t > 256))
		return rix_error_set(RIX_EINVAL, "check: read-data subset %u/%u: want 1 <= n <= t <= 256", o->subset_n,
				     o->subset_t);
	if (o->subset_percent != 0 && !(o->subset_percent > 0 && o->subset_percent <= 100))
		return rix_error_set(RIX_EINVAL, "check: read-data subset %g%%: want over 0 and at most 100",
				     o->subset_percent);
	return 0;
}

/*
 * read[k] for the np packs (first entries' pack IDs e[start[k]].pack_id, sizes size[k]):
 * restic's rule. n/t: the packs whose ID's first byte % t is n - 1; a percentage: that share
 * of the packs (rounded down, at least one), at random; a size: the percentage it is of all
 * the packs' sizes.
 */
static void choose_packs(uint8_t *read, const struct checker *c, const rix_check_options *o, size_t *order)
{
	size_t np = c->npacks;
	if (!has_subset(o)) {
		memset(read, o->read_data ? 1 : 0, np);
		return;
	}
	memset(read, 0, np);
	if (o->subset_t != 0) {
		for (size_t k = 0; k < np; k++)
			read[k] = c->e[c->start[k]].pack_id.b[0] % o->subset_t == o->subset_n - 1;
		return;
	}
	uint64_t seed = o->subset_seed != 0 ? o->subset_seed : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	for (size_t k = 0; k < np; k++)
		order[k] = k;
	for (size_t k = np; k > 1; k--) { /* Fisher-Yates */
		size_t j = (size_t)(next_rand(&seed) % k);
		size_t t = order[k - 1];
		order[k - 1] = order[j];
		order[j] = t;
	}
	/* A size is the percentage it is of all the packs' sizes (restic's rule). */
	double percent = o->subset_percent;
	if (o->subset_bytes != 0) {
		uint64_t total = 0;
		for (size_t k = 0; k < np; k++)
			total += c->size[k] == UINT64_MAX ? 0 : c->size[k];
		percent = total ? (double)o->subset_bytes / (double)total * 100.0 : 100.0;
	}
	size_t want = percent >= 100.0 ? np : (size_t)((double)np * percent / 100.0);
	if (want == 0 && np > 0)
		want = 1;
	for (size_t k = 0; k < want; k++)
		read[order[k]] = 1;
}

int rix_repo_check(rix_check_report *rep_out, rix_repo *r, const rix_check_options *opt)
{
	rix_check_options o = RIX_CHECK_OPTIONS_INIT;
	if (opt != NULL && opt->version != RIX_CHECK_OPTIONS_VERSION)
		return rix_error_set(RIX_EINVAL, "check: options of version %u, this librix knows %u "
				     "(start from RIX_CHECK_OPTIONS_INIT)", opt->version, RIX_CHECK_OPTIONS_VERSION);
	if (opt != NULL)
		o = *opt;
	if (subset_valid(&o) != 0)
		return RIX_EINVAL;
	if (rix__repo_dedup_only(r))
		return rix_error_set(RIX_EINVAL, "check: needs the full index, and this repository's is dedup-only "
				     "(rix_repo_set_dedup_only)");
	rix_check_report rep = { 0 };
	struct checker c = { .r = r, .msg = o.msg, .progress = o.progress, .arg = o.payload,
			     .rep = &rep };
	pthread_mutex_init(&c.mu, NULL);
	struct entries e = { 0 };
	struct packs_seen seen = { 0 };
	rix_repo_load_stats ls = { 0 };
	uint8_t *read = NULL;
	size_t *order = NULL;
	int rc = rix_repo_load_index_files(&ls, r, index_error, &c); /* every file read: not the cache */
	rep.index_files = ls.files;
	rix_master_index *mi = rix_repo_master_index(r);
	if (rc == 0)
		rc = check_snapshots(&c);
	if (rc == 0)
		rc = rix_master_index_foreach(mi, add_entry, &e);
	if (rc == 0)
		rc = rix_backend_list(rix_repo_backend(r), RIX_FILE_PACK, add_pack, &seen);
	if (rc != 0)
		goto out;
	rep.blobs = e.n;
	/* Duplicates: the same (type, ID) more than once. */
	if (e.n > 1) {
		qsort(e.v, e.n, sizeof(*e.v), cmp_blob_id);
		for (size_t i = 1; i < e.n; i++)
			rep.duplicate_blobs += cmp_blob_id(&e.v[i - 1], &e.v[i]) == 0;
		if (rep.duplicate_blobs > 0 && o.msg != NULL) {
			char line[128];
			snprintf(line, sizeof(line), "%zu blobs are stored more than once (not an error)", rep.duplicate_blobs);
			o.msg(o.payload, false, line);
		}
	}
	if (e.n > 1)
		qsort(e.v, e.n, sizeof(*e.v), cmp_entry);
	if (seen.n > 1)
		qsort(seen.v, seen.n, sizeof(*seen.v), cmp_seen);
	/* The index's packs, each with its size in the backend (UINT64_MAX: missing). */
	size_t np = 0;
	for (size_t i = 0; i < e.n; i++)
		np += i == 0 || memcmp(e.v[i].pack_id.b, e.v[i - 1].pack_id.b, RIX_ID_SIZE) != 0;
	c.start = rix_malloc((np + 1) * sizeof(size_t));
	c.size = rix_malloc((np + 1) * sizeof(uint64_t));
	read = rix_malloc(np + 1);
	order = rix_malloc((np + 1) * sizeof(size_t));
	if (c.start == NULL || c.size == NULL || read == NULL || order == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "check: out of memory");
		goto out;
	}
	np = 0;
	for (size_t i = 0; i < e.n; i++) {
		if (i > 0 && memcmp(e.v[i].pack_id.b, e.v[i - 1].pack_id.b, RIX_ID_SIZE) == 0)
			continue;
		struct seen_pack key = { .id = e.v[i].pack_id };
		struct seen_pack *sp = seen.n ? bsearch(&key, seen.v, seen.n, sizeof(key), cmp_seen) : NULL;
		c.start[np] = i;
		c.size[np] = sp != NULL ? sp->size : UINT64_MAX;
		if (sp != NULL)
			sp->used = 1;
		np++;
	}
	c.start[np] = e.n;
	c.e = e.v;
	c.npacks = np;
	rep.packs = np;
	choose_packs(read, &c, &o, order);
	c.read = read;
	for (size_t k = 0; k < seen.n; k++) {
		if (seen.v[k].used)
			continue;
		char hex[65];
		rix_id_to_hex(hex, &seen.v[k].id);
		report(&c, false, &rep.orphaned_packs, "pack %s: not referenced in any index (not an error)", hex);
	}
	/* The packs, by a pool of workers (the calling thread is one). */
	if (np > 0)
		rix__pool_run(rix__pool_size(rix_repo_workers(r), np < 64 ? (unsigned)np : 64), check_worker, &c);
	rc = c.fatal;
	if (rc != 0)
		rix_error_set(rc, "%s", c.fatal_msg);
	else if (rep.errors > 0)
		rc = rix_error_set(RIX_ECORRUPT, "check: %zu errors found", rep.errors);
out:
	if (backend_failed(rc)) /* once, naming the operation (the backend's message does) */
		rix_error_set(rc, "check stopped: the repository could not be read: %s", rix_error_last());
	rix_free(e.v);
	rix_free(seen.v);
	rix_free(c.start);
	rix_free(c.size);
	rix_free(read);
	rix_free(order);
	pthread_mutex_destroy(&c.mu);
	if (rep_out != NULL)
		*rep_out = rep;
	return rc;
}
