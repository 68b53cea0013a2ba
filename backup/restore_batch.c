/*
 * backup/restore_batch.c — a restore's batch (restorer.c, step 2): the plan of (file, offset,
 * blob) sorted by (pack, offset); workers take a pack at a time, read it with
 * rix_repo_load_pack_blobs (few ranged reads, each blob checked once) and pwrite every blob into
 * every place of a file that needs it; the first worker to write into a file makes it, the one
 * that writes its last ref verifies it (opt.verify) and sets its metadata.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "restorer_internal.h"
#include "../common/pool.h"

/* ---- the batch: read packs, write files ------------------------------------------------------ */

struct worker {
	struct rs *s;
	size_t job;               /* refs[first..end) of one pack */
	size_t first, end;
	size_t handled;           /* refs[first..handled) written or failed (each counted in left) */
	size_t *uniq;             /* start in refs of each distinct blob of the pack */
	size_t nuniq, capuniq;
	rix_blob *blobs;
	size_t capblobs;
	int fd[FD_CACHE];
	uint32_t fdfile[FD_CACHE];
};

static void fail_file(struct rs *s, uint32_t f, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_file(struct rs *s, uint32_t f, const char *fmt, ...)
{
	/* (out of memory is recorded by the callers that see RIX_ENOMEM: this thread's last error
	 * code may be a stale one) */
	if (atomic_exchange(&s->files[f].failed, 1) != 0)
		return; /* reported once */
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rix__rs_report(s, s->files[f].rel, "%s", msg);
}

/*
 * File f made in the target, empty at its size, if no worker made it yet (under its lock, so
 * once): O_CREAT | O_EXCL beneath the target and never through a symlink, so whatever took the
 * name since the walk unlinked what was there (a FIFO, a link to a file elsewhere) is an error
 * naming the file, never written to. Its (st_dev, st_ino) recorded for the reopens. The fd
 * (write-only), -1 if it could not be made (reported), -2 if another worker made it (or tried).
 */
#define MADE_ELSEWHERE (-2)
static int make_file(struct rs *s, uint32_t fi)
{
	struct rfile *f = &s->files[fi];
	pthread_mutex_t *mu = &s->mk[fi % MK_LOCKS];
	pthread_mutex_lock(mu);
	int fd = MADE_ELSEWHERE;
	if (!atomic_load_explicit(&f->made, memory_order_relaxed)) {
		fd = rix__rs_open_beneath_mode(s, f->rel, O_WRONLY | O_CREAT | O_EXCL, 0600);
		int e = errno;
		struct stat st;
		if (fd >= 0 && (fstat(fd, &st) != 0 || ftruncate(fd, (off_t)f->size) != 0)) {
			e = errno;
			close(fd);
			fd = -1;
		}
		if (fd >= 0) {
			f->tdev = (uint64_t)st.st_dev;
			f->tino = (uint64_t)st.st_ino;
		} else {
			fail_file(s, fi, "create: %s", strerror(e));
		}
		atomic_store_explicit(&f->made, true, memory_order_release);
	}
	pthread_mutex_unlock(mu);
	return fd;
}

/* An fd (write-only) of file f, from the worker's few open ones, else made or reopened; < 0
 * when it cannot be (open_error says why; a file that could not be made is reported already). */
static int worker_fd(struct worker *w, uint32_t f)
{
	size_t k = f % FD_CACHE;
	if (w->fd[k] >= 0 && w->fdfile[k] == f)
		return w->fd[k];
	if (w->fd[k] >= 0 && close(w->fd[k]) != 0) /* EIO, EDQUOT: what was written may be lost */
		fail_file(w->s, w->fdfile[k], "close: %s", strerror(errno));
	w->fd[k] = -1;
	struct rfile *rf = &w->s->files[f];
	int fd = MADE_ELSEWHERE;
	if (!atomic_load_explicit(&rf->made, memory_order_acquire))
		fd = make_file(w->s, f);
	if (fd == MADE_ELSEWHERE) {
		if (atomic_load(&rf->failed)) {
			errno = ENOENT;
			return -1;
		}
		fd = rix__rs_open_planned(w->s, rf, O_WRONLY);
	}
	w->fd[k] = fd < 0 ? -1 : fd;
	w->fdfile[k] = f;
	return fd;
}

static void finish_file(struct worker *w, uint32_t fi);

/* One ref of file fi written or failed: the last one finishes the file. */
static void ref_done(struct worker *w, uint32_t fi)
{
	if (atomic_fetch_sub_explicit(&w->s->files[fi].left, 1, memory_order_acq_rel) == 1)
		finish_file(w, fi);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* data[0..n) at off of fd; with sparse, 4 KiB blocks of zeros are left as holes. */
static int write_at(int fd, const uint8_t *data, size_t n, uint64_t off, bool sparse)
{
	size_t i = 0;
	while (i < n) {
		size_t len = n - i;
		if (sparse) {
			/* one run of blocks that are zero, or not, up to the next 4 KiB boundary each */
			size_t blk = 4096 - (size_t)((off + i) % 4096);
			if (blk > len)
				blk = len;
			bool z = all_zero(data + i, blk);
			len = blk;
			while (i + len < n) {
				size_t b2 = n - i - len < 4096 ? n - i - len : 4096;
				if (all_zero(data + i + len, b2) != z)
					break;
				len += b2;
			}
			if (z) {
				i += len;
				continue;
			}
		}
		ssize_t w = pwrite(fd, data + i, len, (off_t)(off + i));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		i += (size_t)w;
	}
	return 0;
}

static int on_blob(void *payload, size_t i, int code, const uint8_t *data, size_t n)
{
	struct worker *w = payload;
	struct rs *s = w->s;
	size_t a = w->uniq[i], b = i + 1 < w->nuniq ? w->uniq[i + 1] : w->end;
	for (size_t k = a; k < b; k++) {
		const struct ref *rf = &s->refs[k];
		if (code != 0) {
			if (code == RIX_ENOMEM)
				atomic_store(&s->nomem, true);
			fail_file(s, rf->file, "%s", rix_error_last());
		} else if (!atomic_load(&s->files[rf->file].failed)) {
			int fd = worker_fd(w, rf->file);
			if (fd < 0)
				fail_file(s, rf->file, "open: %s", rix__rs_open_error(fd));
			else if (write_at(fd, data, n, rf->at, s->o.sparse) != 0)
				fail_file(s, rf->file, "write: %s", strerror(errno));
			else
				atomic_fetch_add(&s->bytes_restored, n);
		}
		w->handled = k + 1;
		ref_done(w, rf->file);
	}
	return 0;
}

/* The number of pack_id in s->packs, given it when first met. @return 0, RIX_ENOMEM, RIX_ELIMIT. */
int rix__rs_pack_number(struct rs *s, const rix_id *pack_id, uint32_t *num)
{
	rix_loc loc;
	if (s->npackids > s->lastpack && memcmp(&s->packids[s->lastpack], pack_id, sizeof(rix_id)) == 0) {
		*num = s->lastpack;
		return 0;
	}
	if (s->packnum != NULL && rix_indexmap_lookup(&loc, s->packnum, pack_id) == 0) {
		*num = s->lastpack = loc.pack;
		return 0;
	}
	if (s->npackids >= UINT32_MAX)
		return rix_error_set(RIX_ELIMIT, "restore: too many packs");
	int rc = s->packnum == NULL ? rix_indexmap_new(&s->packnum) : 0;
	if (rc == 0)
		rc = rix__rs_reserve((void **)&s->packids, &s->cappackids, s->npackids + 1, sizeof(*s->packids));
	loc = (rix_loc){ .pack = (uint32_t)s->npackids };
	if (rc == 0)
		rc = rix_indexmap_add(s->packnum, pack_id, &loc);
	if (rc != 0)
		return rc;
	s->packids[s->npackids] = *pack_id;
	*num = s->lastpack = (uint32_t)s->npackids++;
	return 0;
}

static int ref_cmp(const void *x, const void *y)
{
	const struct ref *a = x, *b = y;
	int c;
	if (a->pack != b->pack)
		return a->pack < b->pack ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	if ((c = memcmp(a->blob.b, b->blob.b, RIX_ID_SIZE)) != 0)
		return c;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return (a->at > b->at) - (a->at < b->at);
}

static void *batch_worker(void *arg)
{
	struct worker w = { .s = arg };
	struct rs *s = w.s;
	for (size_t k = 0; k < FD_CACHE; k++)
		w.fd[k] = -1;
	for (;;) {
		size_t j = atomic_fetch_add(&s->next_job, 1);
		if (j >= s->njobs)
			break;
		w.first = w.handled = s->jobs[j];
		w.end = s->jobs[j + 1];
		w.nuniq = 0;
		bool nomem = false;
		for (size_t k = w.first; k < w.end; k++) {
			/* one read per distinct (offset, blob): two blob IDs the index puts at one place
			 * are two blobs, and found overlapping below */
			if (k > w.first && s->refs[k].off == s->refs[k - 1].off &&
			    memcmp(&s->refs[k].blob, &s->refs[k - 1].blob, sizeof(rix_id)) == 0)
				continue;
			if (rix__rs_grow((void **)&w.uniq, &w.capuniq, w.nuniq, sizeof(*w.uniq)) != 0 ||
			    rix__rs_grow((void **)&w.blobs, &w.capblobs, w.nuniq, sizeof(*w.blobs)) != 0) {
				nomem = true;
				break;
			}
			const struct ref *rf = &s->refs[k];
			w.uniq[w.nuniq] = k;
			w.blobs[w.nuniq++] = (rix_blob){ .id = rf->blob, .type = RIX_BLOB_DATA, .offset = rf->off,
							 .length = rf->len, .uncompressed_length = rf->ulen };
		}
		int rc = nomem ? rix_error_set(RIX_ENOMEM, "restore: out of memory") : 0;
		for (size_t i = 1; rc == 0 && i < w.nuniq; i++)
			if ((uint64_t)w.blobs[i].offset < (uint64_t)w.blobs[i - 1].offset + w.blobs[i - 1].length) {
				char a[65], b[65], p[65];
				rix_id_to_hex(a, &w.blobs[i - 1].id);
				rix_id_to_hex(b, &w.blobs[i].id);
				rix_id_to_hex(p, &s->packids[s->refs[w.first].pack]);
				rc = rix_error_set(RIX_ECORRUPT, "the index puts blobs %.8s and %.8s at overlapping places of pack %.8s",
						   a, b, p);
			}
		if (rc == 0)
			rc = rix_repo_load_pack_blobs(s->r, &s->packids[s->refs[w.first].pack], w.blobs, w.nuniq, on_blob, &w);
		if (rc == RIX_ENOMEM)
			atomic_store(&s->nomem, true);
		if (rc != 0) /* the refs not handled (all of them: the reads' errors go to on_blob) */
			for (size_t k = w.handled; k < w.end; k++) {
				fail_file(s, s->refs[k].file, "%s", rix_error_last());
				ref_done(&w, s->refs[k].file);
			}
		atomic_fetch_add(&s->packs, 1);
	}
	for (size_t k = 0; k < FD_CACHE; k++)
		if (w.fd[k] >= 0 && close(w.fd[k]) != 0)
			fail_file(s, w.fdfile[k], "close: %s", strerror(errno));
	rix_free(w.uniq);
	rix_free(w.blobs);
	return NULL;
}

/* Rereads file f: each blob's bytes must hash to its ID. */
static void verify_file(struct rs *s, struct rfile *f)
{
	int fd = rix__rs_open_planned(s, f, O_RDONLY);
	if (fd < 0) {
		atomic_store(&f->failed, 1);
		rix__rs_report(s, f->rel, "verify: %s", rix__rs_open_error(fd));
		return;
	}
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t off = 0;
	bool bad = false;
	for (size_t i = 0; i < f->ncontent && !bad; i++) {
		size_t n = f->sizes[i];
		if (cap < n) {
			rix_free(buf);
			cap = n;
			if ((buf = rix_malloc(cap ? cap : 1)) == NULL) {
				cap = 0;
				atomic_store(&s->nomem, true);
				rix__rs_report(s, f->rel, "verify: out of memory");
				bad = true;
				break;
			}
		}
		ssize_t got = n > 0 ? pread(fd, buf, n, (off_t)off) : 0;
		rix_id id;
		rix_sha256(&id, buf, got > 0 ? (size_t)got : 0);
		if (got != (ssize_t)n || memcmp(&id, &f->content[i], sizeof(id)) != 0) {
			rix__rs_report(s, f->rel, "verify: the content at offset %llu is not what the snapshot holds",
			       (unsigned long long)off);
			bad = true;
		}
		off += n;
	}
	struct stat st;
	if (!bad && fstat(fd, &st) == 0 && (uint64_t)st.st_size != off) {
		rix__rs_report(s, f->rel, "verify: the file has %lld bytes, the snapshot %llu", (long long)st.st_size,
		       (unsigned long long)off);
		bad = true;
	}
	if (!bad)
		atomic_fetch_add(&s->verified, 1);
	rix_free(buf);
	close(fd);
}

/*
 * File f's content is all written (or failed): verified (opt.verify), then its metadata set
 * through fd (write-only, the caller's to close) or, if fd < 0, a reopen. Called by the worker
 * that handled its last ref, or by the batch's end for a file with none (empty, kept).
 */
static void set_file_meta(struct rs *s, struct rfile *f, int fd)
{
	if (atomic_load(&f->failed))
		return;
	if (s->o.verify && !f->keep)
		verify_file(s, f);
	if (atomic_load(&f->failed))
		return; /* reported by verify */
	int own = fd < 0 ? rix__rs_open_planned(s, f, O_RDONLY) : -1;
	if (fd < 0 && own < 0) {
		atomic_store(&f->failed, 1);
		rix__rs_report(s, f->rel, "open: %s", rix__rs_open_error(own));
		return;
	}
	rix__rs_meta_fd(s, fd >= 0 ? fd : own, &f->m, f->rel);
	if (own >= 0 && close(own) != 0) {
		atomic_store(&f->failed, 1);
		rix__rs_report(s, f->rel, "close: %s", strerror(errno));
	}
}

/* The last ref of file fi handled by w: its metadata, then the worker's fd of it closed (the
 * other workers' fds of it, written through before, are closed when they need the slot). */
static void finish_file(struct worker *w, uint32_t fi)
{
	struct rs *s = w->s;
	size_t k = fi % FD_CACHE;
	int fd = -1;
	if (w->fd[k] >= 0 && w->fdfile[k] == fi) {
		fd = w->fd[k];
		w->fd[k] = -1;
	}
	set_file_meta(s, &s->files[fi], fd);
	if (fd >= 0 && close(fd) != 0)
		fail_file(s, fi, "close: %s", strerror(errno));
}

/* Carries out the plan of the files walked so far, then forgets it. */
int rix__rs_run_batch(struct rs *s)
{
	if (s->nfiles == 0)
		return 0;
	s->batches++;
	int rc = 0;
	if (s->nrefs > 0) {
		qsort(s->refs, s->nrefs, sizeof(*s->refs), ref_cmp);
		/* one job per pack */
		size_t nj = 0;
		for (size_t k = 0; k < s->nrefs; k++)
			nj += k == 0 || s->refs[k].pack != s->refs[k - 1].pack;
		s->jobs = rix_malloc((nj + 1) * sizeof(*s->jobs));
		if (s->jobs == NULL) { /* nothing written: the files are failed and freed below */
			rc = rix_error_set(RIX_ENOMEM, "restore: out of memory for %zu packs", nj);
			atomic_store(&s->nomem, true);
			for (size_t i = 0; i < s->nfiles; i++)
				atomic_store(&s->files[i].failed, 1);
		}
	}
	if (s->nrefs > 0 && s->jobs != NULL) {
		s->njobs = 0;
		for (size_t k = 0; k < s->nrefs; k++)
			if (k == 0 || s->refs[k].pack != s->refs[k - 1].pack)
				s->jobs[s->njobs++] = k;
		s->jobs[s->njobs] = s->nrefs;
		atomic_store(&s->next_job, 0);
		unsigned want = s->o.workers ? s->o.workers : rix_repo_workers(s->r);
		/* each worker holds a read of its pack (at most RIX_REPO_PACK_READ_MAX) and a blob's
		 * plaintext: no more workers than opt.memory holds such buffers (one at least) */
		uint64_t per = 1;
		for (size_t j = 0; j < s->njobs; j++) {
			const struct ref *a = &s->refs[s->jobs[j]], *z = &s->refs[s->jobs[j + 1] - 1];
			uint64_t span = (uint64_t)z->off + z->len - a->off, plain = 0;
			for (size_t k = s->jobs[j]; k < s->jobs[j + 1]; k++) {
				uint64_t p = rix_blob_plain_size(s->refs[k].len, s->refs[k].ulen);
				plain = p > plain ? p : plain;
			}
			span = span < RIX_REPO_PACK_READ_MAX ? span : RIX_REPO_PACK_READ_MAX;
			per = span + plain > per ? span + plain : per;
		}
		uint64_t budget = s->o.memory ? s->o.memory : RIX_RESTORE_MEMORY_DEFAULT;
		uint64_t fit = budget / per > 0 ? budget / per : 1;
		unsigned max = s->njobs < 64 ? (unsigned)s->njobs : 64;
		if (fit < max)
			max = (unsigned)fit;
		/* and no more than the open-file limit leaves room for, beside the walk's FD_DEPTH
		 * directories and a margin (the pack reads, the caller's): FD_CACHE + 1 each */
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
			uint64_t room = rl.rlim_cur > 2 * FD_DEPTH ? (uint64_t)rl.rlim_cur - 2 * FD_DEPTH : 0;
			uint64_t nw = room / (FD_CACHE + 1) > 0 ? room / (FD_CACHE + 1) : 1;
			if (nw < max)
				max = (unsigned)nw;
		}
		rix__pool_run(rix__pool_size(want, max), batch_worker, s);
		rix_free(s->jobs);
		s->jobs = NULL;
	}
	for (size_t i = 0; i < s->nfiles; i++) {
		struct rfile *f = &s->files[i];
		/* a file with content was finished by the worker of its last ref; the others here */
		if (f->nrefs == 0)
			set_file_meta(s, f, -1);
		else if (atomic_load(&f->left) != 0 && atomic_exchange(&f->failed, 1) == 0)
			rix__rs_report(s, f->rel, "not all of its content was written"); /* (a batch out of memory) */
		if (!atomic_load(&f->failed)) {
			if (!f->keep) {
				atomic_fetch_add(&s->files_restored, 1);
				rix__rs_item(s, f->existed ? "updated" : "restored", f->rel, true, f->size);
			} else {
				rix__rs_item(s, "unchanged", f->rel, true, f->size);
			}
		}
		struct link_ent *le = f->linked ? rix__rs_link_find(s, f->ino, f->dev) : NULL;
		if (le != NULL && atomic_load(&f->failed)) { /* its links share the damage */
			le->failed = true;
			for (size_t k = 0; k < le->nothers; k++) {
				rix__rs_report(s, le->others[k], "hard link to /%s, whose content could not be restored", f->rel);
				atomic_fetch_sub(&s->files_restored, 1);
			}
		}
		if (le != NULL) {
			le->done = true;
			for (size_t k = 0; k < le->nothers; k++)
				rix_free(le->others[k]);
			rix_free(le->others);
			le->others = NULL;
			le->nothers = le->capothers = 0;
		}
		rix_free(f->rel);
		rix_free(f->content);
		rix_free(f->sizes);
		rix__rs_meta_free(&f->m);
	}
	s->nfiles = 0;
	s->nrefs = 0;
	s->plan_bytes = 0;
	return rc;
}
