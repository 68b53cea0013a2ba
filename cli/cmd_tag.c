/*
 * cli/cmd_tag.c — rix tag: change the tags of snapshots, as restic's tag does: under an
 * exclusive lock, each changed snapshot is written anew (with "original" naming the first ID it
 * had) and the old file removed (rix_snapshot_rewrite).
 *
 *   --set T   the tags become T (every --set, flattened); --set "" changes nothing, as restic's
 *   --add T / --remove T   tags added / removed (restic's order: added first)
 * T is a tag list "a,b"; the snapshots: IDs, "latest", or those passing --host, --tag, --path.
 */
#include "cli.h"

int cmd_tag(int argc, char **argv)
{
	struct filter_flags ff = { 0 };
	const char **set = NULL, **add = NULL, **del = NULL, **lists[3] = { NULL, NULL, NULL };
	size_t nset = 0, nadd = 0, ndel = 0, nlists[3] = { 0, 0, 0 };
	char **ids = calloc((size_t)argc + 1, sizeof(*ids));
	int nids = 0, rc = ids == NULL ? die("out of memory") : 0;
	for (int i = 0; i < argc && rc == 0; i++) {
		static const char *const names[3] = { "--set", "--add", "--remove" };
		const char *v;
		int k = filter_flag(&ff, argc, argv, &i), which = -1;
		if (k != 0) {
			rc = k < 0;
			continue;
		}
		for (int w = 0; w < 3 && which < 0; w++)
			if (flag_value(&v, argc, argv, &i, names[w]))
				which = w;
		if (which >= 0) {
			const char **nl = realloc(lists[which], (nlists[which] + 1) * sizeof(*nl));
			if (nl == NULL) {
				rc = die("out of memory");
				break;
			}
			nl[nlists[which]++] = v;
			lists[which] = nl;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			rc = die("tag: unknown flag %s", argv[i]);
		} else {
			ids[nids++] = argv[i];
		}
	}
	filter_flags_done(&ff);
	if (rc == 0 && nlists[0] + nlists[1] + nlists[2] == 0)
		rc = die("tag: nothing to do! (--set, --add or --remove)");
	if (rc == 0 && nlists[0] > 0 && nlists[1] + nlists[2] > 0)
		rc = die("tag: --set and --add/--remove cannot be given at the same time");
	if (rc == 0 && (rix_snapshot_tags_flatten(&set, &nset, lists[0], nlists[0]) != 0 ||
			rix_snapshot_tags_flatten(&add, &nadd, lists[1], nlists[1]) != 0 ||
			rix_snapshot_tags_flatten(&del, &ndel, lists[2], nlists[2]) != 0))
		rc = fail(RIX_ENOMEM);
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	rix_snapshot_list *l = NULL;
	int bad = 0;
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, true); /* restic's tag locks exclusively */
	if (rc == 0)
		rc = select_snapshots(&l, &bad, r, &ff.f, ids, nids);
	size_t changed = 0;
	for (size_t i = 0; rc == 0 && i < l->count; i++) {
		rix_snapshot *sn = l->items[i];
		bool c = false, c2 = false;
		char old[65];
		rix_id_to_hex(old, &sn->id);
		int e = 0;
		if (nset > 0) { /* restic: --set rewrites even when the tags are the same */
			e = rix_snapshot_set_tags(sn, set, nset);
			c = true;
		} else {
			e = rix_snapshot_add_tags(&c, sn, add, nadd);
			rix_snapshot_remove_tags(&c2, sn, del, ndel);
		}
		rix_id was = sn->id;
		if (e == 0 && (c || c2))
			e = rix_snapshot_rewrite(r, sn);
		if (e != 0 && memcmp(was.b, sn->id.b, RIX_ID_SIZE) != 0) { /* written; the old one stays */
			char now[65];
			rix_id_to_hex(now, &sn->id);
			fprintf(stderr, "rix: snapshot %s written with the new tags as %s, but %s could not be removed: %s\n",
				old, now, old, rix_error_last());
			bad = 1;
			changed++;
			if (e == RIX_ELOCKED)
				break;
			continue;
		}
		if (e != 0) {
			fprintf(stderr, "rix: unable to modify the tags for snapshot ID \"%s\", ignoring: %s\n", old,
				rix_error_last());
			bad = 1;
			if (e == RIX_ELOCKED)
				break;
			continue;
		}
		changed += c || c2;
	}
	if (rc == 0 && !g.quiet) {
		if (changed == 0)
			printf("no snapshots were modified\n");
		else
			printf("modified tags on %zu snapshots\n", changed);
	}
	rix_snapshot_list_free(l);
	close_repo(r, lock);
	filter_flags_free(&ff);
	for (int w = 0; w < 3; w++)
		free(lists[w]);
	rix_free(set);
	rix_free(add);
	rix_free(del);
	free(ids);
	return rc != 0 ? rc : bad;
}
