/*
 * cli/main.c — the rix command: restic-like subcommands over librix's public API.
 *
 *   rix [global options] <command> [arguments]
 *
 * Global options (before or after the command, as restic takes them): see global_help below.
 * The repository: -r/--repo, --repository-file, RIX_/RESTIC_REPOSITORY, RIX_/RESTIC_REPOSITORY_FILE.
 * The password: --password-file, --password-command, their RIX_/RESTIC_ variables,
 * RIX_/RESTIC_PASSWORD, standard input when it is not a terminal, else the terminal.
 *
 * Exit status (restic's): 0 success; 1 a failure or a usage error (one line on stderr,
 * "rix: <message>"); 3 backup read some files not (the snapshot was made without them);
 * 10 no repository; 11 the lock could not be taken; 12 wrong password;
 * 130 / 143 / 129 interrupted (SIGINT / SIGTERM / SIGHUP; the lock is released).
 */
#include "cli.h"

/* A command: its function, one line of synopsis, its flags (for help and checking). */
struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *synopsis;
	const char *what;
	const char *flags; /* "--flag[=] text\n" lines; '=' marks a flag with a value */
};

static const struct command commands[] = {
	{ "init", cmd_init, "init [--repository-version 1|2]", "make a repository",
	  "--repository-version= 1 or 2 (default 2: compression)\n" },
	{ "forget", cmd_forget, "forget [--keep-* ...] [--group-by G] [flags] [ID...|latest]",
	  "remove snapshots: those named, or those restic's --keep-* policy does not keep, per group",
	  "--keep-last= keep the last N snapshots (N or unlimited)\n"
	  "-l= keep the last N snapshots\n"
	  "--keep-hourly= keep the last N hourly snapshots (N or unlimited)\n"
	  "-H= keep the last N hourly snapshots (not --host here, as restic)\n"
	  "--keep-daily= keep the last N daily snapshots (N or unlimited)\n"
	  "-d= keep the last N daily snapshots\n"
	  "--keep-weekly= keep the last N weekly snapshots (ISO weeks; N or unlimited)\n"
	  "-w= keep the last N weekly snapshots\n"
	  "--keep-monthly= keep the last N monthly snapshots (N or unlimited)\n"
	  "-m= keep the last N monthly snapshots\n"
	  "--keep-yearly= keep the last N yearly snapshots (N or unlimited)\n"
	  "-y= keep the last N yearly snapshots\n"
	  "--keep-within= keep snapshots newer than DURATION (1y5m7d2h) before the latest snapshot\n"
	  "--keep-within-hourly= keep hourly snapshots within DURATION of the latest\n"
	  "--keep-within-daily= keep daily snapshots within DURATION of the latest\n"
	  "--keep-within-weekly= keep weekly snapshots within DURATION of the latest\n"
	  "--keep-within-monthly= keep monthly snapshots within DURATION of the latest\n"
	  "--keep-within-yearly= keep yearly snapshots within DURATION of the latest\n"
	  "--keep-tag= keep snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--host= only snapshots of this host (repeatable)\n"
	  "--tag= only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= only snapshots holding this path (repeatable: all of them)\n"
	  "--group-by= group by host, paths and/or tags (default host,paths; '': one group)\n"
	  "-g= group by host, paths and/or tags\n"
	  "--compact no paths, a tag a line\n"
	  "-c no paths, a tag a line\n"
	  "--dry-run remove nothing, say what would be removed\n"
	  "-n remove nothing, say what would be removed\n"
	  "--prune prune after removing snapshots (with prune's flags)\n"
	  "--max-unused= tolerate this much unused data: a size (k/m/g/t), N% (default 5%) or unlimited\n"
	  "--max-repack-size= repack at most this much (k/m/g/t)\n"
	  "--repack-cacheable-only repack only tree packs\n"
	  "--repack-small repack packs under 80% of the pack size\n"
	  "--repack-uncompressed repack every pack holding uncompressed blobs (version 2)\n" },
	{ "prune", cmd_prune, "prune [--max-unused L] [--max-repack-size S] [--repack-*] [--dry-run]",
	  "remove the data no snapshot uses: unused packs deleted, partly used ones repacked (restic 0.14's rules)",
	  "--max-unused= tolerate this much unused data: a size (k/m/g/t), N% (default 5%) or unlimited\n"
	  "--max-repack-size= repack at most this much (k/m/g/t)\n"
	  "--repack-cacheable-only repack only tree packs\n"
	  "--repack-small repack packs under 80% of the pack size\n"
	  "--repack-uncompressed repack every pack holding uncompressed blobs (version 2)\n"
	  "--dry-run change nothing, say what would be done (with -v: which packs)\n"
	  "-n change nothing, say what would be done\n" },
	{ "list", cmd_list, "list blobs|packs|index|keys|snapshots|locks", "list the repository's files or blobs", "" },
	{ "cat", cmd_cat, "cat config|index ID|snapshot ID|blob ID|pack-header ID|tree ID|tree SNAPSHOT[:PATH]", "print an object of the repository",
	  "" },
	{ "find-blob", cmd_find_blob, "find-blob ID...", "where blobs are stored (packs, offsets)", "" },
	{ "stats", cmd_stats, "stats", "blobs, sizes, snapshots, the index's memory and load time", "" },
	{ "key", cmd_key, "key list|add|remove ID|passwd [--new-password-file FILE]", "manage the keys (passwords)",
	  "--new-password-file= the new key's password (else RIX_NEW_PASSWORD_FILE, else the terminal)\n" },
	{ "check", cmd_check, "check [--read-data | --read-data-subset n/t|x%|SIZE]",
	  "check snapshots, trees, the index and the packs (and their data)",
	  "--read-data read and verify every blob of every pack\n"
	  "--read-data-subset= read and verify a subset of the packs: n/t (restic's rule), x% or a size (50M)\n" },
	{ "repair", cmd_repair, "repair index [--read-all-packs]",
	  "build a new index from the packs (restic's repair index; an exclusive lock)",
	  "--read-all-packs read all pack files to generate new index from scratch\n" },
	{ "rebuild-index", cmd_rebuild_index, "rebuild-index [--read-all-packs]",
	  "the same as repair index (restic 0.14's name)",
	  "--read-all-packs read all pack files to generate new index from scratch\n" },
	{ "backup", cmd_backup, "backup [flags] PATH... | --stdin [--stdin-filename NAME]",
	  "back up files and directories (or standard input)",
	  "--tag= tags for the snapshot, a,b (repeatable)\n"
	  "--host= the host name recorded (default: this machine's; also -H)\n"
	  "-H= the host name recorded\n"
	  "--parent= the parent snapshot (default: the latest of this host and these paths)\n"
	  "--force read every file, whatever the parent says (also -f)\n"
	  "-f read every file, whatever the parent says\n"
	  "--dry-run write nothing: say what would be stored (also -n; takes no lock)\n"
	  "-n write nothing: say what would be stored\n"
	  "--with-atime store access times (else the modification time, as restic)\n"
	  "--exclude= leave out what matches (repeatable; * ? [..] within a component, ** any depth; also -e)\n"
	  "-e= leave out what matches (repeatable)\n"
	  "--iexclude= the same, ignoring case\n"
	  "--exclude-file= patterns from a file, one a line\n"
	  "--iexclude-file= the same, ignoring case\n"
	  "--exclude-if-present= leave out directories holding this file (NAME[:TEXT]), but the file\n"
	  "--exclude-caches leave out cache directories (CACHEDIR.TAG), but the tag\n"
	  "--one-file-system stay on each path's file system (also -x)\n"
	  "-x stay on each path's file system\n"
	  "--skip-if-unchanged no snapshot when nothing changed since the parent\n"
	  "--read-concurrency= threads reading files (default: one per CPU)\n"
	  "--files-from= paths from a file, one a line\n"
	  "--stdin back up standard input\n"
	  "--stdin-filename= its name in the snapshot (default: stdin)\n" },
	{ "snapshots", cmd_snapshots, "snapshots [flags] [ID...|latest]", "list the snapshots, oldest first",
	  "--host= only snapshots of this host (repeatable)\n"
	  "-H= only snapshots of this host (repeatable)\n"
	  "--tag= only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= only snapshots holding this path (repeatable: all of them)\n"
	  "--latest= only the latest N snapshots of each host and paths (in each group)\n"
	  "--group-by= group by host, paths and/or tags (comma-separated): a table each, or --json groups\n"
	  "-g= group by host, paths and/or tags (comma-separated)\n"
	  "--compact no paths, a tag a line\n"
	  "-c no paths, a tag a line\n" },
	{ "tag", cmd_tag, "tag [--set T | --add T --remove T] [flags] [ID...|latest]",
	  "change the tags of snapshots (each one written anew, its first ID kept as original)",
	  "--set= the tags become these, a,b (repeatable)\n"
	  "--add= add these tags, a,b (repeatable)\n"
	  "--remove= remove these tags, a,b (repeatable)\n"
	  "--host= without IDs: only snapshots of this host (repeatable)\n"
	  "-H= without IDs: only snapshots of this host (repeatable)\n"
	  "--tag= without IDs: only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= without IDs: only snapshots holding this path (repeatable: all of them)\n" },
	{ "restore", cmd_restore, "restore SNAPSHOT[:PATH] --target DIR [flags]",
	  "restore a snapshot (or a directory of it) into a directory",
	  "--target= the directory to restore into (made if missing)\n"
	  "-t= the directory to restore into\n"
	  "--host= with latest: only snapshots of this host (repeatable)\n"
	  "-H= with latest: only snapshots of this host (repeatable)\n"
	  "--tag= with latest: only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= with latest: only snapshots holding this path (repeatable: all of them)\n"
	  "--include= restore only what matches (repeatable; restic's patterns)\n"
	  "-i= restore only what matches\n"
	  "--iinclude= the same, ignoring case\n"
	  "--exclude= leave out what matches (repeatable; not with --include)\n"
	  "-e= leave out what matches\n"
	  "--iexclude= the same, ignoring case\n"
	  "--overwrite= always (default), if-changed (size and mtime), if-newer, never\n"
	  "--delete remove what the target has and the snapshot has not\n"
	  "--dry-run write nothing: say what would be restored\n"
	  "--verify reread every restored file and check its content\n"
	  "--sparse leave runs of zeros as holes\n"
	  "--ownership-by-name as root: owners and groups by name first, then by number\n" },
	{ "ls", cmd_ls, "ls [flags] SNAPSHOT [DIR...]", "list the files and directories of a snapshot (restic's ls)",
	  "--long use the long format: mode, uid, gid, size, mtime (also -l)\n"
	  "-l use the long format\n"
	  "--recursive with DIRs: everything beneath them, not only their entries\n"
	  "--host= with latest: only snapshots of this host (repeatable)\n"
	  "-H= with latest: only snapshots of this host (repeatable)\n"
	  "--tag= with latest: only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= with latest: only snapshots holding this path (repeatable: all of them)\n" },
	{ "diff", cmd_diff, "diff [--metadata] SNAPSHOT1 SNAPSHOT2", "what changed from one snapshot to another (restic's diff)",
	  "--metadata also list entries whose metadata changed (U)\n" },
	{ "dump", cmd_dump, "dump [flags] SNAPSHOT PATH", "a file's content on stdout, a directory as a tar or zip archive (restic's dump)",
	  "--archive= the archive format for a directory: tar (default) or zip\n"
	  "-a= the archive format for a directory\n"
	  "--host= with latest: only snapshots of this host (repeatable)\n"
	  "-H= with latest: only snapshots of this host (repeatable)\n"
	  "--tag= with latest: only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= with latest: only snapshots holding this path (repeatable: all of them)\n" },
	{ "find", cmd_find, "find [flags] PATTERN... | --blob ID... | --tree ID... | --pack ID...",
	  "the entries of snapshots matching a pattern, or the files using a blob (restic's find)",
	  "--snapshot= search this snapshot (ID, prefix or latest; repeatable; default: all)\n"
	  "-s= search this snapshot (repeatable)\n"
	  "--blob the arguments are data blob IDs (whole, or their first 8 digits): the files using them\n"
	  "--tree the arguments are tree IDs: the directories that are these trees\n"
	  "--pack the arguments are pack IDs (whole or 8 digits): the files using the blobs they hold\n"
	  "--show-pack-id with --blob, --tree or --pack: then each ID's pack, offset and length\n"
	  "--ignore-case match the patterns ignoring case (also -i)\n"
	  "-i match the patterns ignoring case\n"
	  "--long use the long format: mode, uid, gid, size, mtime (also -l)\n"
	  "-l use the long format\n"
	  "--oldest= only entries modified at or after this time (2006-01-02[ 15:04[:05][ -0700]], 02.01.2006...; also -O)\n"
	  "-O= only entries modified at or after this time\n"
	  "--newest= only entries modified at or before this time (also -N)\n"
	  "-N= only entries modified at or before this time\n"
	  "--host= without -s: only snapshots of this host (repeatable)\n"
	  "-H= without -s: only snapshots of this host (repeatable)\n"
	  "--tag= without -s: only snapshots with these tags, a,b: both (repeatable: either list)\n"
	  "--path= without -s: only snapshots holding this path (repeatable: all of them)\n" },
	{ "unlock", cmd_unlock, "unlock [--remove-all]", "remove stale locks (or all)",
	  "--remove-all remove every lock, not only the stale ones\n" },
	{ "version", NULL, "version", "print the version", "" },
	{ "help", NULL, "help [COMMAND]", "this text, or a command's", "" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char global_help[] =
	"global options:\n"
	"  -r, --repo REPO             the repository: a folder, local:PATH or rest:http(s)://[user:pass@]host/path\n"
	"                              (else $RIX_REPOSITORY / $RESTIC_REPOSITORY)\n"
	"      --repository-file FILE  the repository from a file (else $RIX_/$RESTIC_REPOSITORY_FILE)\n"
	"  -p, --password-file FILE    the password from a file (else $RIX_/$RESTIC_PASSWORD_FILE)\n"
	"      --password-command CMD  the password from a command's output (else $RIX_/$RESTIC_PASSWORD_COMMAND)\n"
	"                              (else $RIX_PASSWORD / $RESTIC_PASSWORD, standard input, the terminal)\n"
	"      --key-hint ID           the key to try first (else $RIX_/$RESTIC_KEY_HINT)\n"
	"      --no-lock               take no lock (list, cat, find-blob, stats, check, snapshots, restore,\n"
	"                              diff, dump, find, a dry run of forget; keys always lock)\n"
	"      --json                  JSON output\n"
	"  -q, --quiet                 no progress, fewer messages\n"
	"  -v, --verbose               more messages (-v: backup's scan and blob counts, its --json per-item\n"
	"                              messages; -vv: backup's and restore's per-item lines, -vvv: restore's\n"
	"                              --json per-item messages); --verbose=N sets the level\n"
	"      --compression MODE      auto, off or max: how this run compresses data (repository version 2;\n"
	"                              else $RIX_/$RESTIC_COMPRESSION, else auto)\n"
	"      --cache-dir DIR         the local cache's folder (else $RIX_/$RESTIC_CACHE_DIR, else\n"
	"                              $XDG_CACHE_HOME/rix or ~/.cache/rix): the merged index, sealed\n"
	"      --no-cache              use no local cache (--cleanup-cache is accepted)\n"
	"      --cacert FILE           CA certificates for a https REST server, PEM (else $RIX_/$RESTIC_CACERT)\n"
	"      --insecure-tls          do not verify the REST server's certificate\n"
	"      --limit-upload KiB/s    limit the uploads (all of them together, any repository)\n"
	"      --limit-download KiB/s  limit the downloads (all of them together, any repository)\n"
	"  -o, --option                refused: rix has no backend options\n"
	"  -h, --help                  help (also `rix help COMMAND`, `rix COMMAND --help`)\n"
	"      --version               the version\n";

static const struct command *current;

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_help(FILE *f, const struct command *c)
{
	if (c == NULL) {
		fputs("usage: rix [global options] <command> [arguments]\n\ncommands:\n", f);
		for (size_t i = 0; i < NCOMMANDS; i++)
			fprintf(f, "  %-58s %s\n", commands[i].synopsis, commands[i].what);
		fprintf(f, "\n%s\nExit status: 0 success, 1 failure or usage error, 3 backup: some files could not be read\n"
			   "(the snapshot lacks them), 10 no repository, 11 lock failed, 12 wrong password,\n"
			   "130/143/129 interrupted (SIGINT/SIGTERM/SIGHUP).\n",
			global_help);
		return;
	}
	fprintf(f, "usage: rix [global options] %s\n\n%s\n", c->synopsis, c->what);
	if (c->flags[0] != '\0') {
		fputs("\nflags:\n", f);
		for (const char *p = c->flags; *p;) {
			size_t n = strcspn(p, "\n"), nm = strcspn(p, " =");
			int val = p[nm] == '=';
			char name[64];
			snprintf(name, sizeof(name), "%.*s%s", (int)nm, p, val ? " VALUE" : "");
			fprintf(f, "  %-26s  %.*s\n", name, (int)(n - nm - 1 - val), p + nm + 1 + val);
			p += n + (p[n] == '\n');
		}
	}
	fprintf(f, "\n%s", global_help);
}

int usage(void)
{
	if (current != NULL)
		fprintf(stderr, "usage: rix [global options] %s\n(`rix help %s` for more)\n", current->synopsis,
			current->name);
	else
		print_help(stderr, NULL);
	return EXIT_FAIL;
}

/* Whether flag (its name up to '=') is one of c's; *value set when it takes a value. */
static int command_flag(const struct command *c, const char *flag, int *value)
{
	size_t fl = strcspn(flag, "=");
	for (const char *p = c->flags; *p;) {
		size_t n = strcspn(p, "\n"), nm = strcspn(p, " =");
		if (nm == fl && strncmp(p, flag, fl) == 0) {
			*value = p[nm] == '=' && flag[fl] != '=';
			return 1;
		}
		p += n + (p[n] == '\n');
	}
	return 0;
}

static unsigned long limit_up, limit_down;
static const char *cacert;
static int insecure_tls;

static int parse_limit(const char *flag, const char *v, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long k = strtoul(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0')
		return die("%s: %s is not a number of KiB/s", flag, v);
	*out = k;
	return 0;
}

/*
 * A global option at argv[*i] (advancing *i past its value): 1 when it was one, 0 when not,
 * 2 when it was --version or --help (handled), -1 on an error (reported).
 */
static int global_option(int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	static const char *limit_up_s, *limit_down_s, *refused;
	static const struct {
		const char *name;
		const char **dst;
	} with_value[] = { { "-r", &g.repo },
			   { "--repo", &g.repo },
			   { "--password-file", &g.password_file },
			   { "-p", &g.password_file },
			   { "--password-command", &g.password_command },
			   { "--repository-file", &g.repository_file },
			   { "--key-hint", &g.key_hint },
			   { "--cacert", &cacert },
			   { "--compression", &g.compression },
			   { "--limit-upload", &limit_up_s },
			   { "--limit-download", &limit_down_s },
			   { "--cache-dir", &g.cache_dir },
			   { "-o", &refused },
			   { "--option", &refused } };
	for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
		const char *name = with_value[k].name, *v = NULL;
		size_t len = strlen(name);
		if (strcmp(a, name) == 0) {
			if (*i + 1 >= argc)
				return die("%s needs a value", name), -1;
			v = argv[++*i];
		} else if (strncmp(a, name, len) == 0 && a[len] == '=' && a[1] == '-') {
			v = a + len + 1;
		} else {
			continue;
		}
		*with_value[k].dst = v;
		if (with_value[k].dst == &refused)
			return die("%s: rix has no backend options (-o)", name), -1;
		if (with_value[k].dst == &limit_up_s)
			return parse_limit(name, v, &limit_up) ? -1 : 1;
		if (with_value[k].dst == &limit_down_s)
			return parse_limit(name, v, &limit_down) ? -1 : 1;
		return 1;
	}
	if (strcmp(a, "--json") == 0)
		g.json = 1;
	else if (strcmp(a, "--no-lock") == 0)
		g.no_lock = 1;
	else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)
		g.quiet = 1;
	else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
		g.verbose++;
	else if (strcmp(a, "-vv") == 0)
		g.verbose += 2;
	else if (strcmp(a, "-vvv") == 0)
		g.verbose += 3;
	else if (strncmp(a, "--verbose=", 10) == 0)
		g.verbose = atoi(a + 10);
	else if (strcmp(a, "--no-cache") == 0)
		g.no_cache = 1;
	else if (strcmp(a, "--cleanup-cache") == 0)
		; /* accepted: rix keeps one file per repository, replaced in place */
	else if (strcmp(a, "--insecure-tls") == 0)
		insecure_tls = 1;
	else if (strcmp(a, "--version") == 0) {
		printf("rix %s\n", RIX_CLI_VERSION);
		return 2;
	} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
		print_help(stdout, current);
		return 2;
	} else
		return 0;
	return 1;
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
	/* The command first (its --help needs it), then the options before and after it. */
	const char *cmd = NULL;
	for (int i = 1; i < argc && cmd == NULL; i++) {
		static const char *const valued[] = { "-r", "--repo", "--password-file", "-p", "--password-command",
						       "--repository-file", "--key-hint", "--cacert", "--compression", "--limit-upload",
						       "--limit-download", "--cache-dir", "-o", "--option" };
		int skip = 0;
		for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
			skip |= strcmp(argv[i], valued[k]) == 0;
		if (skip)
			i++;
		else if (argv[i][0] != '-')
			cmd = argv[i];
	}
	if (cmd != NULL && (current = find_command(cmd)) == NULL) {
		die("unknown command \"%s\" (`rix help` lists them)", cmd);
		return EXIT_FAIL;
	}
	int n = 0, seen_cmd = 0, after_dashes = 0;
	char **rest = argv + 1;
	for (int i = 1; i < argc; i++) {
		if (!after_dashes && seen_cmd && strcmp(argv[i], "--") == 0) {
			after_dashes = 1;
			continue;
		}
		if (!after_dashes && argv[i][0] == '-' && argv[i][1] != '\0') {
			int value = 0;
			if (current != NULL && seen_cmd && command_flag(current, argv[i], &value)) {
				rest[n++] = argv[i];
				if (value && i + 1 < argc)
					rest[n++] = argv[++i];
				continue;
			}
			int k = global_option(argc, argv, &i);
			if (k == 2)
				return 0;
			if (k < 0)
				return EXIT_FAIL;
			if (k == 0) {
				if (current != NULL)
					die("unknown flag %s for `rix %s` (`rix help %s` lists its flags)", argv[i], current->name,
					    current->name);
				else
					die("unknown flag %s (`rix help` lists the options)", argv[i]);
				return EXIT_FAIL;
			}
			continue;
		}
		if (!seen_cmd && argv[i] == cmd)
			seen_cmd = 1;
		else
			rest[n++] = argv[i];
	}
	if (current == NULL)
		return usage();
	if (strcmp(current->name, "help") == 0) {
		const struct command *c = NULL;
		if (n > 0 && (c = find_command(rest[0])) == NULL) {
			die("unknown command \"%s\" (`rix help` lists them)", rest[0]);
			return EXIT_FAIL;
		}
		print_help(stdout, c);
		return 0;
	}
	if (strcmp(current->name, "version") == 0) {
		printf("rix %s\n", RIX_CLI_VERSION);
		return 0;
	}
	if (resolve_repository() || resolve_compression())
		return EXIT_FAIL;
	if (cacert == NULL)
		cacert = getenv("RIX_CACERT") != NULL ? getenv("RIX_CACERT") : getenv("RESTIC_CACERT");
	int rc = rest_settings(cacert, insecure_tls != 0, limit_up * 1024, limit_down * 1024);
	if (rc != 0)
		return fail(rc);
	rc = current->fn(n, rest);
	if (fflush(stdout) != 0 || ferror(stdout)) { /* output lost: not a success */
		if (errno != EPIPE) /* a reader that went away knows */
			die("cannot write the output: %s", strerror(errno));
		rc = rc != 0 ? rc : EXIT_FAIL;
	}
	return rc;
}
