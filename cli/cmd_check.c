/*
 * cli/cmd_check.c — rix check [--read-data | --read-data-subset n/t|x%|size]: restic's check
 * (snapshots, trees, index against packs, optionally every byte). With --json, restic 0.18's
 * lines: {"message_type":"error","message":...} per error on stderr, then on stdout one
 * {"message_type":"summary","num_errors":...,"broken_packs":[...],"suggest_repair_index":...,
 * "suggest_prune":...} with rix's counts added.
 */
#include <ctype.h>
#include <errno.h>

#include "cli.h"

/* The packs errors were reported about (their messages start "pack <64 hex>:"). */
struct findings {
	char (*broken)[65];
	size_t nbroken, cap;
};

static void note_broken(struct findings *f, const char *msg)
{
	if (strncmp(msg, "pack ", 5) != 0 || strlen(msg) < 5 + 64 || msg[5 + 64] != ':')
		return;
	for (size_t i = 0; i < f->nbroken; i++)
		if (memcmp(f->broken[i], msg + 5, 64) == 0)
			return;
	if (f->nbroken == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		char(*v)[65] = realloc(f->broken, cap * sizeof(*v));
		if (v == NULL)
			return; /* the summary lists fewer packs */
		f->broken = v;
		f->cap = cap;
	}
	memcpy(f->broken[f->nbroken], msg + 5, 64);
	f->broken[f->nbroken++][64] = '\0';
}

static void check_msg(void *arg, bool is_error, const char *msg)
{
	if (is_error)
		note_broken(arg, msg);
	if (g.json) {
		if (is_error) { /* on stderr, as restic's */
			fputs("{\"message_type\":\"error\",\"message\":\"", stderr);
			for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
				if (*p == '"' || *p == '\\')
					fprintf(stderr, "\\%c", *p);
				else if (*p < 0x20)
					fprintf(stderr, "\\u%04x", *p);
				else
					fputc(*p, stderr);
			}
			fputs("\"}\n", stderr);
		}
		return;
	}
	fprintf(is_error ? stderr : stdout, "%s%s\n", is_error ? "error: " : "", msg);
}

/* The progress line on a terminal: rewritten in place, cleared at the end. */
static void check_progress(void *arg, size_t done, size_t total, uint64_t bytes)
{
	(void)arg;
	fprintf(stderr, "\rchecked %zu of %zu packs (%.0f%%), %.1f MiB read ", done, total,
		total ? 100.0 * (double)done / (double)total : 100.0, (double)bytes / 1048576.0);
}

/*
 * restic's --read-data-subset: "n/t" (1 <= n <= t <= 256), "x%" (0 < x <= 100) or a size with
 * an optional K, M, G or T suffix (powers of 1024). @return 0, or -1 (not one of them).
 */
static int parse_subset(const char *s, rix_check_options *co)
{
	char *end;
	if (strchr(s, '/') != NULL) {
		unsigned long n, t;
		errno = 0;
		n = strtoul(s, &end, 10);
		if (end == s || *end != '/' || !isdigit((unsigned char)end[1]))
			return -1;
		t = strtoul(end + 1, &end, 10);
		if (*end != '\0' || errno != 0 || n < 1 || t < 1 || n > t || t > 256)
			return -1;
		co->subset_n = (unsigned)n;
		co->subset_t = (unsigned)t;
		return 0;
	}
	size_t len = strlen(s);
	if (len > 1 && s[len - 1] == '%') {
		errno = 0;
		double p = strtod(s, &end);
		if (end != s + len - 1 || errno != 0 || !(p > 0 && p <= 100))
			return -1;
		co->subset_percent = p;
		return 0;
	}
	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		return -1;
	}
	if (*end != '\0' && end[1] != '\0' && !(toupper((unsigned char)end[1]) == 'B' && end[2] == '\0'))
		return -1;
	if (errno != 0 || v == 0 || v > (UINT64_MAX >> shift))
		return -1;
	co->subset_bytes = (uint64_t)v << shift;
	return 0;
}

int cmd_check(int argc, char **argv)
{
	rix_check_options co = RIX_CHECK_OPTIONS_INIT;
	const char *subset = NULL;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--read-data") == 0)
			co.read_data = true;
		else if (strcmp(argv[i], "--read-data-subset") == 0 && i + 1 < argc)
			subset = argv[++i];
		else if (strncmp(argv[i], "--read-data-subset=", 19) == 0)
			subset = argv[i] + 19;
		else
			return usage();
	}
	if (subset != NULL && parse_subset(subset, &co) != 0)
		return die("--read-data-subset %s: want n/t (1 <= n <= t <= 256), a percentage (over 0, at most 100%%) "
			   "or a size (50M)", subset);
	if (subset != NULL && co.read_data)
		return die("--read-data and --read-data-subset: one or the other");
	rix_repo *r;
	int orc = open_repo(&r);
	if (orc != 0)
		return orc;
	rix_lock *lock;
	int rc = cli_lock(&lock, r, false);
	if (rc != 0) {
		rix_repo_free(r);
		return rc;
	}
	if (!g.quiet && !g.json)
		printf("check %s%s\n", repo_path(),
		       co.read_data ? " (reading all data)" : subset != NULL ? " (reading a subset of the data)" : "");
	rix_check_report rep;
	struct findings f = { 0 };
	int tty = !g.quiet && !g.json && isatty(2);
	co.msg = check_msg;
	co.progress = tty ? check_progress : NULL;
	co.payload = &f;
	rc = rix_repo_check(&rep, r, &co);
	if (tty)
		fputs("\r\033[K", stderr);
	if (rc != 0 && rc != RIX_ECORRUPT) {
		/* The check's own error first (a backend that failed stops it: one line naming the
		 * operation), then the release's, which may fail the same way. */
		int code = fail(rc);
		cli_unlock(lock);
		free(f.broken);
		rix_repo_free(r);
		return code;
	}
	cli_unlock(lock);
	if (g.json) {
		printf("{\"message_type\":\"summary\",\"num_errors\":%zu,\"broken_packs\":[", rep.errors);
		for (size_t i = 0; i < f.nbroken; i++)
			printf("%s\"%s\"", i ? "," : "", f.broken[i]);
		/* repair index: the index disagrees with the packs, or blobs are missing while packs no
		 * index names may hold them; prune: only leftovers (no errors). */
		bool repair_index = rep.unindexed_blobs || rep.header_mismatches || rep.damaged_index_files ||
				    rep.missing_packs || (rep.orphaned_packs && rep.missing_blobs);
		bool prune = rep.errors == 0 && (rep.orphaned_packs || rep.duplicate_blobs);
		printf("],\"suggest_repair_index\":%s,\"suggest_prune\":%s,", repair_index ? "true" : "false",
		       prune ? "true" : "false");
		printf("\"errors\":%zu,\"snapshots\":%zu,\"damaged_snapshots\":%zu,\"trees\":%zu,\"damaged_trees\":%zu,"
		       "\"missing_blobs\":%zu,\"unindexed_blobs\":%zu,\"index_files\":%zu,\"damaged_index_files\":%zu,"
		       "\"packs\":%zu,\"missing_packs\":%zu,\"orphaned_packs\":%zu,\"header_mismatches\":%zu,"
		       "\"damaged_packs\":%zu,\"damaged_blobs\":%zu,\"blobs\":%zu,\"duplicate_blobs\":%zu,"
		       "\"packs_read\":%zu,\"bytes_read\":%llu}\n",
		       rep.errors, rep.snapshots, rep.damaged_snapshots, rep.trees, rep.damaged_trees, rep.missing_blobs,
		       rep.unindexed_blobs, rep.index_files, rep.damaged_index_files, rep.packs, rep.missing_packs,
		       rep.orphaned_packs, rep.header_mismatches, rep.damaged_packs, rep.damaged_blobs, rep.blobs,
		       rep.duplicate_blobs, rep.packs_read, (unsigned long long)rep.bytes_read);
	} else if (!g.quiet) {
		printf("%zu snapshots, %zu trees, %zu index files, %zu packs, %zu blobs", rep.snapshots, rep.trees,
		       rep.index_files, rep.packs, rep.blobs);
		if (rep.packs_read > 0 || co.read_data)
			printf(", %zu packs (%.1f MiB) read", rep.packs_read, (double)rep.bytes_read / 1048576.0);
		printf("\n");
		if (rep.orphaned_packs)
			printf("%zu additional packs were found that no index names\n", rep.orphaned_packs);
		if (rep.errors == 0)
			printf("no errors were found\n");
	}
	free(f.broken);
	rix_repo_free(r);
	if (rep.errors != 0)
		return die("%zu errors found", rep.errors);
	return 0;
}
