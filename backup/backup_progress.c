/*
 * backup/backup_progress.c — a backup's progress (rix_backup_options.progress): the scanner
 * thread walks the targets ahead of the backup, as the walk will (excludes, markers, one file
 * system), counting files, directories and bytes, so that the reporter thread can tell every
 * interval how far the backup is and what it reads now; and the final tally into the summary.
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

#include "archiver_internal.h"

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static void scan_dir(struct arch *a, char *path, size_t len, size_t cap, dev_t dev, bool marker_ok);

/* Counts an entry at path[0..len) (its stat st) as the walk will back it up: a file, or a
 * directory and what is under it. */
static void scan_entry(struct arch *a, char *path, size_t len, size_t cap, const struct stat *st, dev_t dev)
{
	if (S_ISREG(st->st_mode)) {
		ADD(a, files_total, 1);
		ADD(a, bytes_total_scanned, st->st_size);
	} else if (S_ISDIR(st->st_mode)) {
		ADD(a, dirs_total, 1);
		if (!(a->opt.one_file_system && st->st_dev != dev)) /* a mount point: kept empty */
			scan_dir(a, path, len, cap, dev, true);
	}
}

static bool scan_stopped(struct arch *a)
{
	return atomic_load_explicit(&a->t.scan_stop, memory_order_relaxed) != 0;
}

/*
 * What is in directory path[0..len) (a clean absolute path in a buffer of cap bytes, restored
 * on return), by the walk's rules: excludes, marked directories (marker_ok), one file system.
 * Errors are the walk's to report: here an entry that cannot be read is not counted.
 */
static void scan_dir(struct arch *a, char *path, size_t len, size_t cap, dev_t dev, bool marker_ok)
{
	if (scan_stopped(a))
		return;
	DIR *d = opendir(path);
	if (d == NULL)
		return;
	char only[1024];
	const char *marker = marker_ok && rix__arch_dir_marked(a, path, only, sizeof(only)) ? only : NULL;
	bool ex = a->excl != NULL;
	size_t at = len > 0 && path[len - 1] == '/' ? len : len + 1; /* where a name goes */
	for (struct dirent *e; !scan_stopped(a) && (e = readdir(d)) != NULL;) {
		const char *nm = e->d_name;
		size_t nl = strlen(nm);
		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || (marker != NULL && strcmp(nm, marker) != 0) ||
		    at + nl + 1 > cap)
			continue;
		path[len] = '/';
		memcpy(path + at, nm, nl + 1);
		struct stat st;
		if (!(ex && rix__arch_is_excluded(a, path)) && fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) == 0)
			scan_entry(a, path, at + nl, cap, &st, dev);
		path[len] = '\0';
	}
	closedir(d);
}

/* Whether p is q or under it. */
static bool path_within(const char *p, const char *q)
{
	size_t ql = strlen(q);
	return strncmp(p, q, ql) == 0 && (p[ql] == '\0' || p[ql] == '/' || (ql > 0 && q[ql - 1] == '/'));
}

/* The scanner thread: counts files, directories and bytes of every target (one nested in
 * another once), totals marked final at the end unless stopped. */
void *rix__arch_scanner_main(void *p)
{
	struct scan_arg *sa = p;
	struct arch *a = sa->a;
	size_t cap = 8192;
	char *path = malloc(cap);
	for (size_t i = 0; path != NULL && i < sa->n && !scan_stopped(a); i++) {
		bool nested = false;
		for (size_t k = 0; k < sa->n && !nested; k++)
			nested = k != i && path_within(sa->targets[i], sa->targets[k]) &&
				 (strcmp(sa->targets[i], sa->targets[k]) != 0 || k < i);
		struct stat st;
		size_t len = strlen(sa->targets[i]);
		if (nested || len + 1 > cap || lstat(sa->targets[i], &st) != 0)
			continue;
		memcpy(path, sa->targets[i], len + 1);
		if (sa->dot && S_ISDIR(st.st_mode))
			scan_dir(a, path, len, cap, st.st_dev, false);
		else
			scan_entry(a, path, len, cap, &st, st.st_dev);
	}
	free(path);
	if (!scan_stopped(a))
		atomic_store(&a->t.scan_final, 1);
	return NULL;
}

/* One call of opt.progress with the counts as they are now. */
static void report(struct arch *a, bool done)
{
	rix_backup_progress p;
	memset(&p, 0, sizeof(p));
	p.seconds = rix__arch_since(&a->t0);
	p.files_done = FILES_DONE(a);
	p.dirs_done = DIRS_DONE(a);
	p.bytes_done = GET(a, bytes_done);
	p.errors = GET(a, errors);
	p.totals_final = atomic_load(&a->t.scan_final) != 0; /* before the totals: they are whole then */
	p.files_total = GET(a, files_total);
	p.dirs_total = GET(a, dirs_total);
	p.bytes_total = GET(a, bytes_total_scanned);
	p.done = done;
	if (done && !p.totals_final) { /* no scanner (stdin), or one stopped short: what was done is all */
		p.files_total = p.files_done;
		p.dirs_total = p.dirs_done;
		p.bytes_total = p.bytes_done;
		p.totals_final = true;
	}
	char *cur[65];
	size_t nc = 0;
	for (size_t i = 0; i < a->nreaders && nc < 65; i++) {
		struct worker *w = a->readers[i];
		pthread_mutex_lock(&w->cur_mu);
		if (w->cur != NULL && (cur[nc] = strdup(w->cur)) != NULL)
			nc++;
		pthread_mutex_unlock(&w->cur_mu);
	}
	qsort(cur, nc, sizeof(cur[0]), cmp_str);
	p.current = (const char *const *)cur;
	p.ncurrent = nc;
	a->opt.progress(a->opt.payload, &p);
	for (size_t i = 0; i < nc; i++)
		free(cur[i]);
}

/* The reporter thread: a report every interval until told to stop, then the last one. */
void *rix__arch_reporter_main(void *p)
{
	struct reporter *rp = p;
	struct arch *a = rp->a;
	unsigned ms = a->opt.progress_interval_ms ? a->opt.progress_interval_ms : 250;
	pthread_mutex_lock(&rp->mu);
	while (!rp->stop) {
		struct timespec dl = rix__arch_now_mono();
		dl.tv_sec += (time_t)(ms / 1000);
		dl.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		while (!rp->stop && pthread_cond_timedwait(&rp->cv, &rp->mu, &dl) != ETIMEDOUT)
			;
		if (rp->stop)
			break;
		pthread_mutex_unlock(&rp->mu);
		report(a, false);
		pthread_mutex_lock(&rp->mu);
	}
	pthread_mutex_unlock(&rp->mu);
	report(a, true);
	return NULL;
}

/* The tally into the summary (the fields rix_backup_summary has). */
void rix__arch_tally_out(struct arch *a)
{
	rix_backup_summary *m = a->sum;
	m->files = FILES_DONE(a);
	m->dirs = DIRS_DONE(a);
	m->others = GET(a, others);
	m->files_new = GET(a, files_new);
	m->files_changed = GET(a, files_changed);
	m->files_unmodified = GET(a, files_unmodified);
	m->dirs_new = GET(a, dirs_new);
	m->dirs_changed = GET(a, dirs_changed);
	m->dirs_unmodified = GET(a, dirs_unmodified);
	m->bytes = GET(a, bytes);
	m->bytes_total = GET(a, bytes_total);
	m->data_blobs = GET(a, data_blobs);
	m->data_added = GET(a, data_added);
	m->tree_blobs = GET(a, tree_blobs);
	m->tree_added = GET(a, tree_added);
	m->data_added_packed = GET(a, added_packed);
	m->errors = GET(a, errors);
	m->excluded = GET(a, excluded);
	m->seconds = rix__arch_since(&a->t0);
}
