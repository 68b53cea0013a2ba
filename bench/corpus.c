/*
 * bench/corpus.c — real files as benchmark input: every non-empty regular file under a
 * directory, in path order (names sorted at each level), up to a byte budget, their paths,
 * sizes and (loaded on first use) their bytes back to back. Cached per directory and budget.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

#define CORPORA_MAX 8

static bench_corpus corpora[CORPORA_MAX];
static size_t ncorpora;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_file(bench_corpus *c, const char *path, size_t size, size_t *cap)
{
	if (c->nfiles + 2 > *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		c->paths = realloc(c->paths, *cap * sizeof(char *));
		c->file_start = realloc(c->file_start, *cap * sizeof(size_t));
		if (c->paths == NULL || c->file_start == NULL)
			bench_die("out of memory");
	}
	if ((c->paths[c->nfiles] = strdup(path)) == NULL)
		bench_die("out of memory");
	c->file_start[c->nfiles] = c->n;
	c->nfiles++;
	c->n += size;
	c->file_start[c->nfiles] = c->n;
}

static void walk(bench_corpus *c, const char *dir, size_t *cap)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	char **names = NULL;
	size_t nn = 0, nc = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (nn == nc) {
			nc = nc ? nc * 2 : 64;
			if ((names = realloc(names, nc * sizeof(char *))) == NULL)
				bench_die("out of memory");
		}
		if ((names[nn++] = strdup(e->d_name)) == NULL)
			bench_die("out of memory");
	}
	closedir(d);
	qsort(names, nn, sizeof(char *), cmp_str);
	for (size_t i = 0; i < nn; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		struct stat st;
		if (c->n < c->budget && lstat(path, &st) == 0) {
			if (S_ISDIR(st.st_mode))
				walk(c, path, cap);
			else if (S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size <= c->budget - c->n)
				add_file(c, path, (size_t)st.st_size, cap);
		}
		free(names[i]);
	}
	free(names);
}

const bench_corpus *bench_corpus_get(const char *dir, size_t budget, bool load)
{
	bench_corpus *c = NULL;
	for (size_t i = 0; i < ncorpora && c == NULL; i++)
		if (strcmp(corpora[i].dir, dir) == 0 && corpora[i].budget == budget)
			c = &corpora[i];
	if (c == NULL) {
		if (ncorpora == CORPORA_MAX)
			bench_die("too many corpora");
		c = &corpora[ncorpora++];
		snprintf(c->dir, sizeof(c->dir), "%s", dir);
		c->budget = budget;
		size_t cap = 0;
		bench_log("listing %s", dir);
		walk(c, dir, &cap);
		bench_log("%zu files, %zu bytes", c->nfiles, c->n);
	}
	if (load && c->data == NULL && c->n > 0) {
		if ((c->data = malloc(c->n)) == NULL)
			bench_die("out of memory for %zu bytes of %s", c->n, dir);
		for (size_t f = 0; f < c->nfiles; f++) {
			size_t size = c->file_start[f + 1] - c->file_start[f];
			FILE *fp = fopen(c->paths[f], "rb");
			size_t got = fp != NULL ? fread(c->data + c->file_start[f], 1, size, fp) : 0;
			if (fp != NULL)
				fclose(fp);
			if (got < size) /* changed or unreadable since listed: zeros keep the offsets */
				memset(c->data + c->file_start[f] + got, 0, size - got);
		}
	}
	return c;
}

void bench_corpus_free_all(void)
{
	for (size_t i = 0; i < ncorpora; i++) {
		for (size_t f = 0; f < corpora[i].nfiles; f++)
			free(corpora[i].paths[f]);
		free(corpora[i].paths);
		free(corpora[i].file_start);
		free(corpora[i].data);
	}
	ncorpora = 0;
}
