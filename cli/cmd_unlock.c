/*
 * cli/cmd_unlock.c — rix unlock: stale locks (or all) removed.
 */
#include "cli.h"

int cmd_unlock(int argc, char **argv)
{
	int all = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--remove-all") == 0)
			all = 1;
		else
			return usage();
	}
	rix_repo *r;
	int orc = open_repo(&r);
	if (orc != 0)
		return orc;
	size_t removed;
	int rc = rix_lock_remove(&removed, r, all);
	rix_repo_free(r);
	if (rc != 0)
		return fail(rc);
	if (g.json)
		printf("{\"removed\":%zu}\n", removed);
	else if (!g.quiet)
		printf("removed %zu %slocks\n", removed, all ? "" : "stale ");
	return 0;
}
