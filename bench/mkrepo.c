/*
 * bench/mkrepo.c — rix-mkrepo: synthetic repositories in restic's v2 (or v1) layout for the
 * benchmarks against restic.
 *
 *   rix-mkrepo DIR N [VERSION]                           index only
 *   rix-mkrepo DIR N [VERSION] --snapshots K [--used F]  for prune (F: 0..1, default 0.7)
 *
 * Password from RIX_PASSWORD (default "bench"). DIR must not hold a repository.
 *
 * Index only (`rix stats` against `restic --no-cache stats --mode raw-data`: both load every
 * index file; `restic list blobs` and `rix list blobs` count the same blobs): N data blobs, 16
 * a pack (a 16 MiB pack of ~1 MiB blobs, as restic's chunker makes them), stored compressed in
 * version 2 (restic's auto compresses every data blob), IDs and sizes from SplitMix64 (seed
 * 0x5EED + N). Index files hold 150,000 blobs (50,000 in v1), restic 0.14's rule. No pack
 * file is written: the index is the subject.
 *
 * For prune (`rix prune` against `restic prune`, bench/vs_restic_prune.sh), the same index of
 * the same N data blobs, and:
 *   - every pack file it names, through the local layout data/XX/ID, as a sparse file of
 *     exactly the size restic's pack.Size computes from the index (4 + 32 bytes, and per blob
 *     its length plus 41 bytes, 37 when stored uncompressed), so that both tools' size checks
 *     pass. Their bytes are zeros: neither tool reads a data pack unless it repacks one.
 *   - usage aligned to packs, so that nothing must be repacked: a fraction F of the packs,
 *     spread evenly (pack p is used when floor((p + 1) F) > floor(p F)), has every blob
 *     referenced, the others none. A prune deletes the unused packs and rewrites the index.
 *   - K snapshots of /data, one an hour, each naming the one before as its parent. The used
 *     blobs, in the index's order, are the content of files of 64-128 blobs each; the files
 *     sit in directories of 8-56 files, those in directories of 8-56 directories under /data
 *     (/data/mXXXXXXXX/dXXXXXXXX/fXXXXXXXX). The snapshots are successive backups of a growing
 *     tree: file f is in snapshot k unless f % 100 == 0 and (f / 100) % K > k, so the last
 *     snapshot holds every file (every used blob) and each earlier one lacks a few, which
 *     changes a few directories (and their parents) from one snapshot to the next; the other
 *     trees are shared. Trees are real blobs, saved with rix_repo_save_blob (deduplicated:
 *     a shared tree is stored once) into real packs, and indexed by rix_repo_flush.
 *   forget --keep-last 1 --prune therefore frees no data pack beyond prune's (the last snapshot
 *   uses every used blob), only the older snapshots' own trees: tree packs, real, repacked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/rix.h"

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void rand_id(uint64_t *s, rix_id *id)
{
	for (int i = 0; i < 4; i++) {
		uint64_t v = next(s);
		memcpy(id->b + 8 * i, &v, 8);
	}
}

static int die(const char *what)
{
	fprintf(stderr, "rix-mkrepo: %s: %s\n", what, rix_error_last());
	return 1;
}

/* The data blobs, pack by pack: the same stream for the index and for every snapshot's trees. */
struct gen {
	uint64_t st;
	uint64_t done, total;
	int version;
};

static void gen_start(struct gen *g, uint64_t total, int version)
{
	*g = (struct gen){ .st = 0x5EED + total, .total = total, .version = version };
}

/* The next pack: its ID and blobs; @return how many blobs (0: no packs left). */
static size_t gen_pack(struct gen *g, rix_id *pack, rix_blob blobs[16])
{
	if (g->done == g->total)
		return 0;
	rand_id(&g->st, pack);
	size_t k = g->total - g->done < 16 ? (size_t)(g->total - g->done) : 16;
	uint32_t off = 0;
	for (size_t i = 0; i < k; i++) {
		uint32_t plain = 512 * 1024 + (uint32_t)(next(&g->st) % (1024 * 1024));
		uint32_t stored = g->version >= 2 ? plain / 2 + 32 : plain + 32;
		blobs[i] = (rix_blob){ .type = RIX_BLOB_DATA, .offset = off, .length = stored,
				       .uncompressed_length = g->version >= 2 ? plain : 0 };
		rand_id(&g->st, &blobs[i].id);
		off += stored;
	}
	g->done += k;
	return k;
}

/* Whether pack p is used: a share ppm / 10^6 of the packs, spread evenly. */
static int pack_used(uint64_t p, uint64_t ppm)
{
	return (p + 1) * ppm / 1000000 > p * ppm / 1000000;
}

static int write_index(rix_repo *r, rix_index *idx)
{
	char *json;
	size_t len;
	if (rix_index_encode(&json, &len, idx) != 0)
		return die("encode");
	int rc = rix_repo_write_file(NULL, r, RIX_FILE_INDEX, json, len);
	rix_free(json);
	return rc != 0 ? die("write") : 0;
}

/* The pack file of pack id, sparse, the size restic's pack.Size computes for blobs[0..k). */
static int write_sparse_pack(const char *dir, const rix_id *id, const rix_blob *blobs, size_t k)
{
	uint64_t size = 4 + 32;
	for (size_t i = 0; i < k; i++)
		size += blobs[i].length + (blobs[i].uncompressed_length != 0 ? 41 : 37);
	char hex[65], path[4096];
	rix_id_to_hex(hex, id);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, hex, hex);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		fprintf(stderr, "rix-mkrepo: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	return 0;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

#define FILE_MAX_BLOBS 128
#define BASE_TIME 1672531200 /* 2023-01-01T00:00:00Z */

/* One directory being encoded (a tree encoder and its count), /data's and its two levels. */
struct level {
	rix_tree_enc *enc;
	size_t entries, target, index;
};

struct snap {
	rix_repo *r;
	uint64_t st;             /* file and directory sizes: the same for every snapshot */
	size_t k, nsnap;
	rix_id ids[FILE_MAX_BLOBS];
	uint64_t file_bytes;
	size_t nids, file_target, file_index;
	struct level leaf, mid, top;
	size_t trees_stored;
	uint64_t tree_bytes;
};

static size_t range(uint64_t *st, size_t lo, size_t hi)
{
	return lo + (size_t)(next(st) % (hi - lo + 1));
}

static rix_node dir_node(const char *name, const rix_id *subtree)
{
	rix_time t = { .sec = BASE_TIME };
	return (rix_node){ .name = name, .name_len = strlen(name), .type = RIX_NODE_DIR,
			   .mode = RIX_GOMODE_DIR | 0755, .mtime = t, .atime = t, .ctime = t,
			   .uid = 1000, .gid = 1000, .user = "bench", .group = "bench", .subtree = subtree };
}

/* Saves the tree l holds; *id gets its ID; l is emptied. */
static int save_tree(rix_id *id, struct snap *s, struct level *l)
{
	const uint8_t *data;
	size_t len;
	bool stored;
	if (rix_tree_enc_finish(&data, &len, l->enc) != 0 ||
	    rix_repo_save_blob(id, &stored, s->r, RIX_BLOB_TREE, data, len) != 0)
		return die("tree");
	if (stored) {
		s->trees_stored++;
		s->tree_bytes += len;
	}
	rix_tree_enc_reset(l->enc);
	l->entries = 0;
	return 0;
}

/* Closes the open mXXXXXXXX directory into /data. */
static int close_mid(struct snap *s)
{
	rix_id id;
	char name[16];
	if (save_tree(&id, s, &s->mid) != 0)
		return 1;
	snprintf(name, sizeof(name), "m%08zu", s->mid.index++);
	rix_node n = dir_node(name, &id);
	if (rix_tree_enc_add(s->top.enc, &n) != 0)
		return die("tree");
	s->mid.target = range(&s->st, 8, 56);
	return 0;
}

/* Closes the open dXXXXXXXX directory into its mXXXXXXXX, and that one when it is full. */
static int close_leaf(struct snap *s)
{
	rix_id id;
	char name[16];
	if (save_tree(&id, s, &s->leaf) != 0)
		return 1;
	snprintf(name, sizeof(name), "d%08zu", s->leaf.index++);
	rix_node n = dir_node(name, &id);
	if (rix_tree_enc_add(s->mid.enc, &n) != 0)
		return die("tree");
	s->leaf.target = range(&s->st, 8, 56);
	if (++s->mid.entries == s->mid.target)
		return close_mid(s);
	return 0;
}

/* The file being filled is complete: its node (when snapshot k has it) into its directory. */
static int close_file(struct snap *s)
{
	size_t f = s->file_index++;
	if (f % 100 != 0 || (f / 100) % s->nsnap <= s->k) {
		char name[16];
		snprintf(name, sizeof(name), "f%08zu", f);
		rix_time t = { .sec = BASE_TIME + (int64_t)f };
		rix_node n = { .name = name, .name_len = strlen(name), .type = RIX_NODE_FILE, .mode = 0644,
			       .mtime = t, .atime = t, .ctime = t, .uid = 1000, .gid = 1000, .user = "bench",
			       .group = "bench", .inode = 1000 + f, .size = s->file_bytes, .links = 1,
			       .content = s->ids, .content_len = s->nids };
		if (rix_tree_enc_add(s->leaf.enc, &n) != 0)
			return die("tree");
	}
	s->nids = 0;
	s->file_bytes = 0;
	s->file_target = range(&s->st, 64, FILE_MAX_BLOBS);
	if (++s->leaf.entries == s->leaf.target)
		return close_leaf(s);
	return 0;
}

/*
 * Snapshot k of nsnap: its trees over the used blobs of the stream, then the snapshot file
 * (parent: *parent when has_parent); *id gets its ID.
 */
static int write_snapshot(rix_id *id, struct snap *s, uint64_t total, int version, uint64_t ppm, bool has_parent,
			  const rix_id *parent)
{
	struct gen g;
	gen_start(&g, total, version);
	s->st = 0xF11E5 + total;
	s->nids = 0;
	s->file_bytes = 0;
	s->file_index = 0;
	s->file_target = range(&s->st, 64, FILE_MAX_BLOBS);
	s->leaf.entries = s->mid.entries = s->top.entries = 0;
	s->leaf.index = s->mid.index = 0;
	s->leaf.target = range(&s->st, 8, 56);
	s->mid.target = range(&s->st, 8, 56);
	rix_id pack;
	rix_blob blobs[16];
	size_t n;
	for (uint64_t p = 0; (n = gen_pack(&g, &pack, blobs)) > 0; p++) {
		if (!pack_used(p, ppm))
			continue;
		for (size_t i = 0; i < n; i++) {
			s->ids[s->nids++] = blobs[i].id;
			s->file_bytes += blobs[i].uncompressed_length != 0 ? blobs[i].uncompressed_length
									    : blobs[i].length - 32;
			if (s->nids == s->file_target && close_file(s) != 0)
				return 1;
		}
	}
	if (s->nids > 0 && close_file(s) != 0)
		return 1;
	if (s->leaf.entries > 0 && close_leaf(s) != 0)
		return 1;
	if (s->mid.entries > 0 && close_mid(s) != 0)
		return 1;
	rix_id data, root;
	if (save_tree(&data, s, &s->top) != 0)
		return 1;
	rix_node n_data = dir_node("data", &data);
	if (rix_tree_enc_add(s->top.enc, &n_data) != 0)
		return die("tree");
	if (save_tree(&root, s, &s->top) != 0)
		return 1;
	if (rix_repo_flush(s->r) != 0)
		return die("flush");
	char path[] = "/data", host[] = "bench", user[] = "bench", version_str[] = "rix-mkrepo";
	char *paths[] = { path };
	rix_snapshot sn = { .time = { .sec = BASE_TIME + 3600 * (int64_t)(s->k + 1) }, .tree = root,
			    .has_parent = has_parent, .paths = paths, .npaths = 1, .hostname = host,
			    .username = user, .uid = 1000, .gid = 1000, .program_version = version_str };
	if (has_parent)
		sn.parent = *parent;
	if (rix_snapshot_write(id, s->r, &sn) != 0)
		return die("snapshot");
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: rix-mkrepo DIR N [VERSION] [--snapshots K [--used F]]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *pos[3] = { NULL, NULL, NULL };
	size_t npos = 0, nsnap = 0;
	double used = 0.7;
	bool used_given = false;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--snapshots") == 0 && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end != '\0' || v == 0 || v > 100000)
				return usage();
			nsnap = v;
		} else if (strcmp(argv[i], "--used") == 0 && i + 1 < argc) {
			used = strtod(argv[++i], &end);
			if (*end != '\0' || !(used >= 0 && used <= 1))
				return usage();
			used_given = true;
		} else if (argv[i][0] == '-' || npos == 3) {
			return usage();
		} else {
			pos[npos++] = argv[i];
		}
	}
	if (npos < 2 || (used_given && nsnap == 0))
		return usage();
	const char *dir = pos[0];
	uint64_t total = strtoull(pos[1], NULL, 10);
	int version = pos[2] != NULL ? atoi(pos[2]) : 2;
	uint64_t ppm = (uint64_t)(used * 1000000 + 0.5);
	const char *pw = getenv("RIX_PASSWORD");
	if (pw == NULL)
		pw = "bench";
	rix_backend *b;
	if (rix_backend_local_open(&b, dir, 1) != 0)
		return die(dir);
	rix_repo_options o = { .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO, .repo_version = version };
	rix_repo *r;
	if (rix_repo_init(&r, b, pw, strlen(pw), &o) != 0)
		return die("init");
	uint32_t per_file = version >= 2 ? RIX_REPO_INDEX_BLOBS_V2 : RIX_REPO_INDEX_BLOBS_V1;
	rix_index *idx = NULL;
	size_t in_file = 0, files = 0;
	uint64_t packs = 0, packs_used = 0;
	struct gen g;
	gen_start(&g, total, version);
	rix_id pack;
	rix_blob blobs[16];
	size_t k;
	while ((k = gen_pack(&g, &pack, blobs)) > 0) {
		if (idx == NULL && rix_index_new(&idx) != 0)
			return die("index");
		if (rix_index_store_pack(idx, &pack, blobs, k) != 0)
			return die("store");
		if (nsnap > 0 && write_sparse_pack(dir, &pack, blobs, k) != 0)
			return 1;
		packs_used += pack_used(packs, ppm);
		packs++;
		in_file += k;
		if (in_file >= per_file || g.done == total) {
			if (write_index(r, idx) != 0)
				return 1;
			rix_index_free(idx);
			idx = NULL;
			in_file = 0;
			files++;
		}
	}
	printf("%s: %llu blobs in %zu index files (version %d)\n", dir, (unsigned long long)total, files, version);
	if (nsnap > 0) {
		struct snap s = { .r = r, .nsnap = nsnap };
		if (rix_tree_enc_new(&s.leaf.enc) != 0 || rix_tree_enc_new(&s.mid.enc) != 0 ||
		    rix_tree_enc_new(&s.top.enc) != 0)
			return die("tree");
		rix_id prev;
		for (s.k = 0; s.k < nsnap; s.k++) {
			rix_id id;
			if (write_snapshot(&id, &s, total, version, ppm, s.k > 0, &prev) != 0)
				return 1;
			prev = id;
		}
		printf("%llu sparse pack files, %llu used (%.1f%%); %zu snapshots of %zu files in %zu directories; "
		       "%zu trees stored (%.1f MiB)\n",
		       (unsigned long long)packs, (unsigned long long)packs_used,
		       packs ? 100.0 * (double)packs_used / (double)packs : 0.0, nsnap, s.file_index,
		       s.leaf.index + s.mid.index + 1, s.trees_stored, (double)s.tree_bytes / 1048576);
		rix_tree_enc_free(s.leaf.enc);
		rix_tree_enc_free(s.mid.enc);
		rix_tree_enc_free(s.top.enc);
	}
	rix_repo_free(r);
	return 0;
}
