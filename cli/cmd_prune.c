/*
 * cli/cmd_prune.c — rix prune [flags]: removes data no snapshot needs, as restic 0.14's prune
 * (rix/pruner.h does the work). Under an exclusive lock: the index loaded, the plan made and
 * its figures printed as restic prints them, then carried out (not with --dry-run). The prune
 * flags are shared with forget --prune (prune_flag, run_prune).
 */
#include "cli.h"

/* The prune flags at argv[*i]: 1 taken, 0 not one, -1 a bad value (reported). */
int prune_flag(rix_prune_options *o, int argc, char **argv, int *i)
{
	const char *v;
	if (flag_value(&v, argc, argv, i, "--max-unused")) {
		if (rix_prune_parse_max_unused(o, v) != 0)
			return die("%s", rix_error_last()), -1;
		return 1;
	}
	if (flag_value(&v, argc, argv, i, "--max-repack-size")) {
		if (rix_parse_size(&o->max_repack_bytes, v) != 0)
			return die("--max-repack-size: %s", rix_error_last()), -1;
		return 1;
	}
	if (strcmp(argv[*i], "--repack-cacheable-only") == 0)
		o->repack_cacheable_only = true;
	else if (strcmp(argv[*i], "--repack-small") == 0)
		o->repack_small = true;
	else if (strcmp(argv[*i], "--repack-uncompressed") == 0)
		o->repack_uncompressed = true;
	else
		return 0;
	return 1;
}

struct prune_out {
	int tty;
	bool status; /* a progress line is on the terminal */
};

static void prune_msg(void *arg, int level, const char *line)
{
	struct prune_out *po = arg;
	if (po->status) {
		fputs("\r\033[K", stderr);
		po->status = false;
	}
	if (level == 0)
		fprintf(stderr, "%s\n", line);
	else if (!g.quiet && (level == 1 || g.verbose >= 1))
		printf("%s\n", line);
	fflush(stdout);
}

static void prune_progress(void *arg, const char *phase, uint64_t done, uint64_t total)
{
	struct prune_out *po = arg;
	if (!po->tty)
		return;
	if (total > 0)
		fprintf(stderr, "\r[%3.0f%%] %" PRIu64 " / %" PRIu64 " %s\033[K", 100.0 * (double)done / (double)total, done,
			total, phase);
	else
		fprintf(stderr, "\r%" PRIu64 " %s\033[K", done, phase);
	po->status = true;
}

/* restic's ui.FormatPercent. */
static void percent(char *o, size_t cap, uint64_t num, uint64_t den)
{
	if (den == 0) {
		o[0] = '\0';
		return;
	}
	double p = 100.0 * (double)num / (double)den;
	snprintf(o, cap, "%3.2f%%", p > 100 ? 100 : p);
}

/* restic 0.14's printPruneStats: the first block with -v, the rest unless -q. */
static void print_stats(const rix_prune_stats *s)
{
	char a[64], b[64];
	bool vv = g.verbose >= 1;
	uint64_t total_blobs = s->blobs.used + s->blobs.unused + s->blobs.duplicate;
	uint64_t total_size = s->size.used + s->size.duplicate + s->size.unused + s->size.unref;
	uint64_t unused_size = s->size.duplicate + s->size.unused;
	if (vv) {
		human(a, sizeof(a), s->size.used);
		printf("\nused:         %10" PRIu64 " blobs / %s\n", s->blobs.used, a);
		if (s->blobs.duplicate > 0) {
			human(a, sizeof(a), s->size.duplicate);
			printf("duplicates:   %10" PRIu64 " blobs / %s\n", s->blobs.duplicate, a);
		}
		human(a, sizeof(a), s->size.unused);
		printf("unused:       %10" PRIu64 " blobs / %s\n", s->blobs.unused, a);
		if (s->size.unref > 0) {
			human(a, sizeof(a), s->size.unref);
			printf("unreferenced:                    %s\n", a);
		}
		human(a, sizeof(a), total_size);
		printf("total:        %10" PRIu64 " blobs / %s\n", total_blobs, a);
		percent(a, sizeof(a), unused_size, total_size);
		printf("unused size: %s of total size\n", a);
	}
	human(a, sizeof(a), s->size.repack);
	printf("\nto repack:    %10" PRIu64 " blobs / %s\n", s->blobs.repack, a);
	human(a, sizeof(a), s->size.repackrm);
	printf("this removes: %10" PRIu64 " blobs / %s\n", s->blobs.repackrm, a);
	human(a, sizeof(a), s->size.remove + s->size.unref);
	printf("to delete:    %10" PRIu64 " blobs / %s\n", s->blobs.remove, a);
	uint64_t prune_size = s->size.remove + s->size.repackrm + s->size.unref;
	human(a, sizeof(a), prune_size);
	printf("total prune:  %10" PRIu64 " blobs / %s\n", s->blobs.remove + s->blobs.repackrm, a);
	human(a, sizeof(a), total_size - prune_size);
	printf("remaining:    %10" PRIu64 " blobs / %s\n", total_blobs - (s->blobs.remove + s->blobs.repackrm), a);
	uint64_t unused_after = unused_size - s->size.remove - s->size.repackrm;
	human(a, sizeof(a), unused_after);
	percent(b, sizeof(b), unused_after, total_size - prune_size);
	printf("unused size after prune: %s (%s of remaining size)\n\n", a, b);
	if (vv) {
		printf("totally used packs: %10" PRIu64 "\n", s->packs.used);
		printf("partly used packs:  %10" PRIu64 "\n", s->packs.partly_used);
		printf("unused packs:       %10" PRIu64 "\n\n", s->packs.unused);
		printf("to keep:      %10" PRIu64 " packs\n", s->packs.keep);
		printf("to repack:    %10" PRIu64 " packs\n", s->packs.repack);
		printf("to delete:    %10" PRIu64 " packs\n", s->packs.remove);
		if (s->packs.unref > 0)
			printf("to delete:    %10" PRIu64 " unreferenced packs\n\n", s->packs.unref);
	}
	fflush(stdout);
}

static void print_ids(const char *what, const rix_prune_plan *p, int which)
{
	size_t n;
	const rix_id *ids = rix_prune_plan_packs(&n, p, which);
	printf("%s\n{", what);
	for (size_t i = 0; i < n; i++) {
		char hex[65];
		rix_id_to_hex(hex, &ids[i]);
		printf("%s%.8s", i ? " " : "", hex);
	}
	printf("}\n\n");
}

int run_prune(rix_repo *r, const rix_prune_options *opt, bool dry_run)
{
	struct prune_out po = { .tty = !g.quiet && !g.json && isatty(2) };
	rix_prune_options o = *opt;
	o.msg = prune_msg;
	o.progress = prune_progress;
	o.payload = &po;
	if (!g.quiet)
		printf("loading indexes...\n");
	if (load_index(r, NULL, NULL) != 0)
		return EXIT_FAIL;
	rix_prune_plan *p;
	int rc = rix_prune_plan_new(&p, r, &o);
	if (po.status)
		fputs("\r\033[K", stderr);
	if (rc != 0)
		return fail(rc);
	if (!g.quiet)
		print_stats(rix_prune_plan_stats(p));
	if (dry_run) {
		if (g.verbose >= 1 && !g.quiet) {
			size_t n;
			if (rix_prune_plan_packs(&n, p, RIX_PRUNE_UNREFERENCED) != NULL && n > 0)
				print_ids("Would have removed the following unreferenced packs:", p, RIX_PRUNE_UNREFERENCED);
			print_ids("Would have repacked and removed the following packs:", p, RIX_PRUNE_REPACK);
			print_ids("Would have removed the following no longer used packs:", p, RIX_PRUNE_REMOVE);
		}
		rix_prune_plan_free(p);
		return 0;
	}
	rc = rix_prune_run(p);
	po.status = po.status && (fputs("\r\033[K", stderr), false);
	int code = rc != 0 ? fail(rc) : 0;
	if (rc == 0 && rix_prune_plan_stats(p)->remove_failures > 0)
		fprintf(stderr, "rix: %" PRIu64 " files could not be removed; the next prune removes them\n",
			rix_prune_plan_stats(p)->remove_failures);
	rix_prune_plan_free(p);
	return code;
}

int cmd_prune(int argc, char **argv)
{
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	bool dry_run = false;
	for (int i = 0; i < argc; i++) {
		int k = prune_flag(&o, argc, argv, &i);
		if (k < 0)
			return EXIT_FAIL;
		if (k > 0)
			continue;
		if (strcmp(argv[i], "--dry-run") == 0 || strcmp(argv[i], "-n") == 0)
			dry_run = true;
		else if (argv[i][0] == '-')
			return die("prune: unknown flag %s", argv[i]);
		else
			return die("prune: no arguments expected, got %s", argv[i]);
	}
	rix_repo *r;
	rix_lock *lock;
	int rc = open_repo_locked(&r, &lock, true);
	if (rc != 0)
		return rc;
	if (o.repack_uncompressed && rix_repo_config(r)->version < 2) {
		close_repo(r, lock);
		return die("compression requires at least repository format version 2");
	}
	rc = run_prune(r, &o, dry_run);
	close_repo(r, lock);
	return rc;
}
