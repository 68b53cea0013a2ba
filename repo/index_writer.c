/*
 * repo/index_writer.c — index files written for a set of packs given one at a time (prune's and
 * repair index's new index): restic 0.14's MasterIndex.Save, one file per
 * RIX_REPO_INDEX_BLOBS_V2 / _V1 blobs, the superseded files named in the last one.
 *
 * A full file is encoded, compressed, sealed and written by a thread of its own while the caller
 * fills the next (compressing a 150,000-blob file takes about five times as long as filling it):
 * up to one file in flight per CPU (at most WRITERS_MAX); the oldest is waited for when all are
 * busy, and every one by finish. A file's error reaches the caller at the call that waits for it,
 * which waits for the others too: after an error nothing is being written.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/index.h"
#include "rix/repo.h"

#define WRITERS_MAX 4

struct job {
	pthread_t thread;
	rix_repo *r;
	rix_index *idx;
	rix_id id;
	int rc;
	char msg[256];
};

struct rix_index_writer {
	rix_repo *r;
	rix_index *cur;   /* the file being filled (NULL: none yet) */
	size_t cur_blobs; /* its blobs */
	size_t limit;     /* blobs per file */
	rix_id *sup;      /* the files the last one supersedes */
	size_t nsup;
	rix_id *files; /* written */
	size_t nfiles, files_cap;
	struct job *jobs[WRITERS_MAX]; /* in flight, oldest first */
	size_t njobs, max_jobs;
	bool failed, finished;
};

int rix_index_writer_new(rix_index_writer **out, rix_repo *r, const rix_id *supersedes, size_t n)
{
	*out = NULL;
	rix_index_writer *w = rix_calloc(1, sizeof(*w));
	if (w == NULL)
		return rix_error_set(RIX_ENOMEM, "index writer: out of memory");
	w->r = r;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	w->max_jobs = cpus < 1 ? 1 : cpus > WRITERS_MAX ? WRITERS_MAX : (size_t)cpus;
	w->limit = rix_repo_config(r)->version >= 2 ? RIX_REPO_INDEX_BLOBS_V2 : RIX_REPO_INDEX_BLOBS_V1;
	if (n > 0) {
		w->sup = rix_malloc(n * sizeof(*w->sup));
		if (w->sup == NULL) {
			rix_free(w);
			return rix_error_set(RIX_ENOMEM, "index writer: out of memory");
		}
		memcpy(w->sup, supersedes, n * sizeof(*w->sup));
		w->nsup = n;
	}
	*out = w;
	return 0;
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	char *json = NULL;
	size_t len = 0;
	rix_index_finalize(j->idx);
	j->rc = rix_index_encode(&json, &len, j->idx);
	rix_index_free(j->idx); /* before the file is compressed: one of the two at a time */
	j->idx = NULL;
	if (j->rc == 0)
		j->rc = rix_repo_write_file(&j->id, j->r, RIX_FILE_INDEX, json, len);
	if (j->rc != 0)
		snprintf(j->msg, sizeof(j->msg), "%s", rix_error_last());
	rix_free(json);
	return NULL;
}

/* Waits for the oldest file in flight; records its ID, or its error (the writer fails). */
static int join_oldest(rix_index_writer *w)
{
	struct job *j = w->jobs[0];
	pthread_join(j->thread, NULL);
	memmove(&w->jobs[0], &w->jobs[1], (w->njobs - 1) * sizeof(w->jobs[0]));
	w->njobs--;
	int rc = j->rc;
	if (rc == 0)
		w->files[w->nfiles++] = j->id; /* room reserved when the job started */
	else
		w->failed = true;
	if (rc != 0)
		(void)rix_error_set(rc, "%s", j->msg);
	rix_free(j);
	return rc;
}

/* Waits for every file in flight; the first error is the one returned and said. */
static int join_all(rix_index_writer *w)
{
	int first = 0;
	char msg[256] = "";
	while (w->njobs > 0) {
		int rc = join_oldest(w);
		if (rc != 0 && first == 0) {
			first = rc;
			snprintf(msg, sizeof(msg), "%s", rix_error_last());
		}
	}
	if (first != 0)
		(void)rix_error_set(first, "%s", msg);
	return first;
}

void rix_index_writer_free(rix_index_writer *w)
{
	if (w == NULL)
		return;
	(void)join_all(w);
	rix_index_free(w->cur);
	rix_free(w->sup);
	rix_free(w->files);
	rix_free(w);
}

/* Hands w->cur (with the supersedes list when last) to a thread of its own; starts none. */
static int write_cur(rix_index_writer *w, bool last)
{
	int rc = 0;
	if (w->njobs == w->max_jobs && (rc = join_oldest(w)) != 0) {
		/* Nothing stays in flight after an error: the others are waited for, the first
		 * error said. */
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		(void)join_all(w);
		return rix_error_set(rc, "%s", msg);
	}
	if (rc == 0 && w->cur == NULL)
		rc = rix_index_new(&w->cur);
	for (size_t i = 0; rc == 0 && last && i < w->nsup; i++)
		rc = rix_index_add_supersedes(w->cur, &w->sup[i]);
	size_t need = w->nfiles + w->njobs + 1;
	if (rc == 0 && need > w->files_cap) {
		size_t cap = w->files_cap ? 2 * w->files_cap : 8;
		rix_id *f = rix_realloc(w->files, cap * sizeof(*f));
		if (f == NULL)
			rc = rix_error_set(RIX_ENOMEM, "index writer: out of memory");
		else {
			w->files = f;
			w->files_cap = cap;
		}
	}
	struct job *j = NULL;
	if (rc == 0 && (j = rix_calloc(1, sizeof(*j))) == NULL)
		rc = rix_error_set(RIX_ENOMEM, "index writer: out of memory");
	if (rc == 0) {
		j->r = w->r;
		j->idx = w->cur;
		if (pthread_create(&j->thread, NULL, job_run, j) != 0) {
			job_run(j); /* no thread: written here */
			rc = j->rc;
			if (rc == 0)
				w->files[w->nfiles++] = j->id;
			else
				(void)rix_error_set(rc, "%s", j->msg);
			rix_free(j);
		} else {
			w->jobs[w->njobs++] = j;
		}
		w->cur = NULL; /* the job's now */
		w->cur_blobs = 0;
	}
	if (rc != 0)
		w->failed = true;
	return rc;
}

int rix_index_writer_add(rix_index_writer *w, const rix_id *pack_id, const rix_blob *blobs, size_t n)
{
	if (w->failed || w->finished)
		return rix_error_set(RIX_EINVAL, "index writer: %s", w->failed ? "a write failed before" : "finished");
	int rc = 0;
	if (w->cur == NULL && (rc = rix_index_new(&w->cur)) != 0)
		return rc;
	rc = rix_index_store_pack(w->cur, pack_id, blobs, n);
	if (rc != 0) {
		w->failed = true; /* the file may hold part of the pack */
		return rc;
	}
	w->cur_blobs += n;
	if (w->cur_blobs >= w->limit)
		return write_cur(w, false);
	return 0;
}

int rix_index_writer_finish(rix_index_writer *w)
{
	if (w->failed || w->finished)
		return rix_error_set(RIX_EINVAL, "index writer: %s", w->failed ? "a write failed before" : "finished");
	/* The last file: the rest of the packs, or none when every file is full, and the supersedes
	 * list; no file at all when there is nothing to say. */
	int rc = 0;
	if (w->cur != NULL || w->nsup > 0 || w->nfiles + w->njobs == 0)
		rc = write_cur(w, true);
	int rc2 = join_all(w);
	if (rc == 0)
		rc = rc2;
	if (rc != 0)
		return rc;
	w->finished = true;
	return 0;
}

const rix_id *rix_index_writer_files(size_t *n, const rix_index_writer *w)
{
	*n = w->nfiles;
	return w->files;
}
