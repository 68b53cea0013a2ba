/*
 * repo/index_writer.c — index files written for a set of packs given one at a time (prune's and
 * repair index's new index): restic 0.14's MasterIndex.Save, one file per
 * RIX_REPO_INDEX_BLOBS_V2 / _V1 blobs, the superseded files named in the last one.
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/index.h"
#include "rix/repo.h"

struct rix_index_writer {
	rix_repo *r;
	rix_index *cur;   /* the file being filled (NULL: none yet) */
	size_t cur_blobs; /* its blobs */
	size_t limit;     /* blobs per file */
	rix_id *sup;      /* the files the last one supersedes */
	size_t nsup;
	rix_id *files; /* written */
	size_t nfiles, files_cap;
	bool failed, finished;
};

int rix_index_writer_new(rix_index_writer **out, rix_repo *r, const rix_id *supersedes, size_t n)
{
	*out = NULL;
	rix_index_writer *w = rix_calloc(1, sizeof(*w));
	if (w == NULL)
		return rix_error_set(RIX_ENOMEM, "index writer: out of memory");
	w->r = r;
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

void rix_index_writer_free(rix_index_writer *w)
{
	if (w == NULL)
		return;
	rix_index_free(w->cur);
	rix_free(w->sup);
	rix_free(w->files);
	rix_free(w);
}

/* Writes w->cur (with the supersedes list when last) and starts none. */
static int write_cur(rix_index_writer *w, bool last)
{
	int rc = 0;
	if (w->cur == NULL)
		rc = rix_index_new(&w->cur);
	for (size_t i = 0; rc == 0 && last && i < w->nsup; i++)
		rc = rix_index_add_supersedes(w->cur, &w->sup[i]);
	if (rc == 0 && w->nfiles == w->files_cap) {
		size_t cap = w->files_cap ? 2 * w->files_cap : 8;
		rix_id *f = rix_realloc(w->files, cap * sizeof(*f));
		if (f == NULL)
			rc = rix_error_set(RIX_ENOMEM, "index writer: out of memory");
		else {
			w->files = f;
			w->files_cap = cap;
		}
	}
	char *json = NULL;
	size_t len = 0;
	if (rc == 0) {
		rix_index_finalize(w->cur);
		rc = rix_index_encode(&json, &len, w->cur);
	}
	if (rc == 0)
		rc = rix_repo_write_file(&w->files[w->nfiles], w->r, RIX_FILE_INDEX, json, len);
	rix_free(json);
	if (rc != 0) {
		w->failed = true;
		return rc;
	}
	w->nfiles++;
	rix_index_free(w->cur);
	w->cur = NULL;
	w->cur_blobs = 0;
	return 0;
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
	if (w->cur != NULL || w->nsup > 0 || w->nfiles == 0) {
		int rc = write_cur(w, true);
		if (rc != 0)
			return rc;
	}
	w->finished = true;
	return 0;
}

const rix_id *rix_index_writer_files(size_t *n, const rix_index_writer *w)
{
	*n = w->nfiles;
	return w->files;
}
