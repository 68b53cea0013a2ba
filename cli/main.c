/*
 * cli/main.c — the rix command: restic-like subcommands over librix's public API.
 *
 *   rix [global options] <command> [arguments]
 *
 * Global options: -r/--repo PATH (or RIX_REPOSITORY, RESTIC_REPOSITORY), --password-file FILE
 * (or RIX_PASSWORD, RESTIC_PASSWORD, RIX_PASSWORD_FILE, RESTIC_PASSWORD_FILE; else a prompt on
 * the terminal), --json, -q/--quiet, -h/--help, --version.
 *
 * Exit status: 0 success, 1 a failure (one line on stderr: "rix: <message>"), 2 a usage error.
 */
#include "cli.h"

int usage(void)
{
	fputs("usage: rix [-r REPO] [--password-file FILE] [--key-hint ID] [--json] [-q] <command> [args]\n"
	      "\n"
	      "commands:\n"
	      "  init [--repository-version 1|2]      make a repository\n"
	      "  list blobs|packs|index|keys|snapshots|locks\n"
	      "  cat config|index ID|blob ID|pack-header ID\n"
	      "  find-blob ID...                      where a blob is stored\n"
	      "  stats                                load the index: blobs, sizes, memory, time\n"
	      "  key list|add|remove ID|passwd\n"
	      "  check [--read-data]                  index against packs (and every blob)\n"
	      "  unlock [--remove-all]                remove stale locks (or all)\n"
	      "\n"
	      "The repository comes from -r or $RIX_REPOSITORY / $RESTIC_REPOSITORY; the password from\n"
	      "--password-file, $RIX_PASSWORD / $RESTIC_PASSWORD, $RIX_PASSWORD_FILE /\n"
	      "$RESTIC_PASSWORD_FILE, or a prompt.\n",
	      stderr);
	return EXIT_FAIL;
}

/*
 * A global option at argv[*i] (advancing *i past its value): 1 when it was one, 0 when not,
 * 2 when it was --version or --help (printed), -1 when its value is missing.
 */
static int global_option(int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	static const struct {
		const char *name;
		const char **dst;
	} with_value[] = { { "-r", &g.repo }, { "--repo", &g.repo }, { "--password-file", &g.password_file },
			   { "--key-hint", &g.key_hint } };
	for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
		size_t len = strlen(with_value[k].name);
		if (strcmp(a, with_value[k].name) == 0) {
			if (*i + 1 >= argc)
				return -1;
			*with_value[k].dst = argv[++*i];
			return 1;
		}
		if (strncmp(a, with_value[k].name, len) == 0 && a[len] == '=' && a[1] == '-') {
			*with_value[k].dst = a + len + 1;
			return 1;
		}
	}
	if (strcmp(a, "--json") == 0)
		g.json = 1;
	else if (strcmp(a, "--no-lock") == 0)
		g.no_lock = 1;
	else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)
		g.quiet = 1;
	else if (strcmp(a, "--version") == 0)
		printf("rix %s\n", RIX_CLI_VERSION);
	else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
		usage();
	else
		return 0;
	return strcmp(a, "--version") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ? 2 : 1;
}

int main(int argc, char **argv)
{
	/*
	 * Buffers of a MiB and more (index files, their JSON) come from mmap and go back to the
	 * system when freed: a fixed threshold stops glibc from raising it after the first big
	 * free, which would leave later ones in the heap and the peak RSS higher.
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	signals_start(); /* before any thread starts: they inherit the blocked signals */
	/* Global options before the command, and after it as restic allows; the rest is the command's. */
	const char *cmd = NULL;
	int n = 0;
	char **rest = argv + 1;
	for (int i = 1; i < argc; i++) {
		int k = global_option(argc, argv, &i);
		if (k == 1)
			continue;
		if (k == 2) { /* --version, --help */
			return 0;
		}
		if (k < 0)
			return usage();
		if (cmd == NULL && argv[i][0] == '-')
			return usage(); /* an unknown option before the command */
		if (cmd == NULL)
			cmd = argv[i];
		else
			rest[n++] = argv[i];
	}
	if (cmd == NULL)
		return usage();
	if (strcmp(cmd, "init") == 0)
		return cmd_init(n, rest);
	if (strcmp(cmd, "list") == 0)
		return cmd_list(n, rest);
	if (strcmp(cmd, "cat") == 0)
		return cmd_cat(n, rest);
	if (strcmp(cmd, "find-blob") == 0)
		return cmd_find_blob(n, rest);
	if (strcmp(cmd, "stats") == 0)
		return cmd_stats(n, rest);
	if (strcmp(cmd, "key") == 0)
		return cmd_key(n, rest);
	if (strcmp(cmd, "check") == 0)
		return cmd_check(n, rest);
	if (strcmp(cmd, "unlock") == 0)
		return cmd_unlock(n, rest);
	die("unknown command %s", cmd);
	return usage();
}
