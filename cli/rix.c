/*
 * cli/rix.c — the rix command: restic-like subcommands over librix's public API.
 *
 *   rix [global options] <command> [arguments]
 *
 * Global options: -r/--repo PATH (or RIX_REPOSITORY, RESTIC_REPOSITORY), --password-file FILE
 * (or RIX_PASSWORD, RESTIC_PASSWORD, RIX_PASSWORD_FILE, RESTIC_PASSWORD_FILE; else a prompt on
 * the terminal), --json, -q/--quiet, -h/--help, --version.
 *
 * Exit status: 0 success, 1 a failure (one line on stderr: "rix: <message>"), 2 a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "rix/rix.h"

#define RIX_CLI_VERSION "0.1.0"

static struct {
	const char *repo;
	const char *password_file;
	const char *key_hint;
	int json;
	int quiet;
	int version; /* init */
} g = { .version = 2 };

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("rix: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

static int fail(int rc)
{
	const char *m = rix_error_last();
	return die("%s", m[0] ? m : rix_strerror(rc));
}

static int usage(void)
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
	return 2;
}

/* ---- password ------------------------------------------------------------------------------ */

static int read_password_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return die("cannot read password file %s: %s", path, strerror(errno));
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *nl = strchr(buf, '\n'); /* the first line, as restic reads it */
	if (nl != NULL)
		*nl = '\0';
	return 0;
}

static int prompt(const char *what, char *buf, size_t cap)
{
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return die("no password: set RIX_PASSWORD or use --password-file (no terminal to ask on)");
	struct termios old, quiet;
	int tty = tcgetattr(fd, &old) == 0;
	if (tty) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(fd, TCSAFLUSH, &quiet);
	}
	if (write(fd, what, strlen(what)) < 0) {
		/* nothing to do: the read below still works */
	}
	size_t n = 0;
	char c;
	while (n + 1 < cap && read(fd, &c, 1) == 1 && c != '\n')
		buf[n++] = c;
	buf[n] = '\0';
	if (tty)
		tcsetattr(fd, TCSAFLUSH, &old);
	if (write(fd, "\n", 1) < 0) {
	}
	close(fd);
	return 0;
}

static int get_password(char *buf, size_t cap, int is_new)
{
	const char *file = g.password_file;
	const char *env = getenv("RIX_PASSWORD");
	if (env == NULL)
		env = getenv("RESTIC_PASSWORD");
	if (file == NULL && env != NULL) {
		snprintf(buf, cap, "%s", env);
		return 0;
	}
	if (file == NULL)
		file = getenv("RIX_PASSWORD_FILE");
	if (file == NULL)
		file = getenv("RESTIC_PASSWORD_FILE");
	if (file != NULL)
		return read_password_file(file, buf, cap);
	if (prompt(is_new ? "enter password for new repository: " : "enter password for repository: ", buf, cap))
		return 1;
	if (is_new) {
		char again[1024];
		if (prompt("enter password again: ", again, sizeof(again)))
			return 1;
		if (strcmp(buf, again) != 0)
			return die("passwords do not match");
	}
	return 0;
}

/* ---- opening ------------------------------------------------------------------------------- */

static const char *repo_path(void)
{
	const char *r = g.repo;
	if (r == NULL)
		r = getenv("RIX_REPOSITORY");
	if (r == NULL)
		r = getenv("RESTIC_REPOSITORY");
	if (r != NULL && strncmp(r, "local:", 6) == 0)
		r += 6;
	return r;
}

/* "rest:http://..." or a local path ("local:" optional). */
static int open_backend(const char *path, int create, rix_backend **b)
{
	if (strncmp(path, "rest:", 5) == 0)
		return rix_backend_rest_open(b, path, create);
	if (strchr(path, ':') != NULL && path[0] != '/' && path[0] != '.')
		return rix_error_set(RIX_EINVAL, "%s: unknown repository kind (local paths and rest: URLs)", path);
	return rix_backend_local_open(b, path, create);
}

/* The index-loading progress line on a terminal, rewritten in place. */
static void load_progress(void *arg, size_t done, size_t total)
{
	(void)arg;
	fprintf(stderr, "\rloading index: %zu of %zu files ", done, total);
}

static int open_repo(rix_repo **r)
{
	const char *path = repo_path();
	if (path == NULL || *path == '\0')
		return die("no repository: use -r or set RIX_REPOSITORY");
	rix_backend *b;
	int rc = open_backend(path, 0, &b);
	if (rc != 0)
		return fail(rc);
	char pw[1024];
	if (get_password(pw, sizeof(pw), 0)) {
		rix_backend_free(b);
		return 1;
	}
	rix_repo_options o = RIX_REPO_OPTIONS_INIT;
	o.key_hint = g.key_hint != NULL ? g.key_hint : getenv("RIX_KEY_HINT");
	if (!g.quiet && isatty(2))
		o.load_progress = load_progress;
	if (o.key_hint == NULL)
		o.key_hint = getenv("RESTIC_KEY_HINT");
	rc = rix_repo_open(r, b, pw, strlen(pw), &o);
	sodium_memzero(pw, sizeof(pw));
	if (rc != 0) {
		rix_backend_free(b);
		return fail(rc);
	}
	return 0;
}

static void index_error(void *arg, const char *name, int code, const char *msg)
{
	(void)arg;
	(void)code;
	fprintf(stderr, "rix: index %s skipped: %s\n", name, msg);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int load_index(rix_repo *r, rix_repo_load_stats *st, double *secs)
{
	int progress = !g.quiet && isatty(2);
	double t0 = now_s();
	int rc = rix_repo_load_index(st, r, index_error, NULL);
	if (secs != NULL)
		*secs = now_s() - t0;
	if (progress)
		fputs("\r\033[K", stderr);
	return rc != 0 ? fail(rc) : 0;
}

static int parse_id(const char *hex, rix_id *id)
{
	if (strlen(hex) != 64 || rix_id_from_hex(id, hex, 64) != 0)
		return die("%s is not an ID (64 hex digits)", hex);
	return 0;
}

/* ---- commands ------------------------------------------------------------------------------ */

/* s as a JSON string (quoted, escaped). */
static void put_json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static int cmd_init(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--repository-version") == 0 && i + 1 < argc)
			g.version = atoi(argv[++i]);
		else if (strncmp(argv[i], "--repository-version=", 21) == 0)
			g.version = atoi(argv[i] + 21);
		else
			return usage();
	}
	if (g.version != 1 && g.version != 2)
		return die("repository version %d: 1 or 2", g.version);
	const char *path = repo_path();
	if (path == NULL || *path == '\0')
		return die("no repository: use -r or set RIX_REPOSITORY");
	char pw[1024];
	if (get_password(pw, sizeof(pw), 1))
		return 1;
	if (pw[0] == '\0')
		return die("an empty password is not a password");
	rix_backend *b;
	int rc = open_backend(path, 1, &b);
	if (rc != 0)
		return fail(rc);
	rix_repo_options o = RIX_REPO_OPTIONS_INIT;
	o.repo_version = g.version;
	rix_repo *r;
	rc = rix_repo_init(&r, b, pw, strlen(pw), &o);
	sodium_memzero(pw, sizeof(pw));
	if (rc != 0) {
		rix_backend_free(b);
		return fail(rc);
	}
	char hex[65];
	rix_id_to_hex(hex, &rix_repo_config(r)->id);
	if (g.json) {
		printf("{\"message_type\":\"initialized\",\"id\":\"%s\",\"repository\":", hex);
		put_json_string(path);
		printf(",\"version\":%d}\n", g.version);
	}
	else if (!g.quiet)
		printf("created rix repository %.10s at %s (version %d)\n", hex, path, g.version);
	rix_repo_free(r);
	return 0;
}

struct lister {
	int n;
	const char *type;
};

static int print_name(void *arg, const char *name, uint64_t size)
{
	struct lister *l = arg;
	(void)size;
	if (g.json)
		printf("%s\"%s\"", l->n++ ? "," : "", name);
	else
		printf("%s\n", name);
	return 0;
}

static int print_blob(void *arg, const rix_packed_blob *pb)
{
	struct lister *l = arg;
	char hex[65];
	rix_id_to_hex(hex, &pb->id);
	const char *t = pb->type == RIX_BLOB_TREE ? "tree" : "data";
	if (g.json)
		printf("%s{\"type\":\"%s\",\"id\":\"%s\"}", l->n++ ? "," : "", t, hex);
	else
		printf("%s %s\n", t, hex);
	return 0;
}

static int cmd_list(int argc, char **argv)
{
	if (argc != 1)
		return usage();
	static const struct {
		const char *name;
		rix_file_type t;
	} files[] = { { "packs", RIX_FILE_PACK }, { "index", RIX_FILE_INDEX }, { "keys", RIX_FILE_KEY },
		      { "snapshots", RIX_FILE_SNAPSHOT }, { "locks", RIX_FILE_LOCK } };
	int which = -1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (strcmp(argv[0], files[i].name) == 0)
			which = (int)i;
	if (which < 0 && strcmp(argv[0], "blobs") != 0)
		return die("list: unknown type %s (blobs, packs, index, keys, snapshots, locks)", argv[0]);
	rix_repo *r;
	if (open_repo(&r))
		return 1;
	struct lister l = { 0 };
	int rc = 0;
	if (g.json)
		putchar('[');
	if (which >= 0) {
		rc = rix_backend_list(rix_repo_backend(r), files[which].t, print_name, &l);
	} else if ((rc = load_index(r, NULL, NULL)) == 0) {
		rc = rix_master_index_foreach(rix_repo_master_index(r), print_blob, &l);
	} else {
		rix_repo_free(r);
		return rc;
	}
	if (g.json)
		puts("]");
	if (rc != 0)
		rc = fail(rc);
	rix_repo_free(r);
	return rc;
}

/* Prints JSON text indented by two spaces per level, as restic's cat does. */
static void print_pretty_json(const char *s, size_t n)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			putchar(c);
			if (c == '\\' && i + 1 < n)
				putchar(s[++i]);
			else if (c == '"')
				in_str = 0;
			continue;
		}
		switch (c) {
		case '"':
			in_str = 1;
			putchar(c);
			break;
		case '{':
		case '[':
			putchar(c);
			if (i + 1 < n && (s[i + 1] == '}' || s[i + 1] == ']')) {
				putchar(s[++i]);
				break;
			}
			printf("\n%*s", 2 * ++depth, "");
			break;
		case '}':
		case ']':
			printf("\n%*s%c", 2 * --depth, "", c);
			break;
		case ',':
			printf(",\n%*s", 2 * depth, "");
			break;
		case ':':
			fputs(": ", stdout);
			break;
		case ' ':
		case '\n':
		case '\t':
		case '\r':
			break;
		default:
			putchar(c);
		}
	}
	putchar('\n');
}

static int cmd_cat(int argc, char **argv)
{
	if (argc < 1)
		return usage();
	const char *what = argv[0];
	int needs_id = strcmp(what, "config") != 0;
	if (argc != 1 + needs_id)
		return usage();
	if (strcmp(what, "config") && strcmp(what, "index") && strcmp(what, "blob") && strcmp(what, "pack-header"))
		return die("cat: unknown object %s (config, index, blob, pack-header)", what);
	rix_id id;
	if (needs_id && parse_id(argv[1], &id))
		return 1;
	rix_repo *r;
	if (open_repo(&r))
		return 1;
	int rc = 0;
	if (strcmp(what, "config") == 0) {
		char *json;
		size_t n;
		rc = rix_config_encode(&json, &n, rix_repo_config(r));
		if (rc == 0) {
			print_pretty_json(json, n);
			rix_free(json);
		}
	} else if (strcmp(what, "index") == 0) {
		uint8_t *json;
		size_t jn;
		rc = rix_repo_read_file(&json, &jn, r, RIX_FILE_INDEX, &id);
		if (rc == 0) {
			fwrite(json, 1, jn, stdout);
			rix_free(json);
		}
	} else if (strcmp(what, "blob") == 0) {
		rc = load_index(r, NULL, NULL);
		if (rc != 0) {
			rix_repo_free(r);
			return rc;
		}
		uint8_t *data;
		size_t n;
		rc = rix_repo_load_blob(&data, &n, r, RIX_BLOB_DATA, &id);
		if (rc == RIX_ENOTFOUND)
			rc = rix_repo_load_blob(&data, &n, r, RIX_BLOB_TREE, &id);
		if (rc == 0) {
			fwrite(data, 1, n, stdout);
			rix_free(data);
		}
	} else { /* pack-header */
		/* The trailer and the header only: two reads from the pack's end, not the whole pack. */
		rix_blob *blobs;
		size_t cnt;
		rc = rix_repo_read_pack_header(&blobs, &cnt, r, &id);
		if (rc == 0) {
			printf(g.json ? "[" : "");
			for (size_t i = 0; i < cnt; i++) {
				char hex[65];
				rix_id_to_hex(hex, &blobs[i].id);
				const char *t = blobs[i].type == RIX_BLOB_TREE ? "tree" : "data";
				if (g.json)
					printf("%s{\"type\":\"%s\",\"id\":\"%s\",\"offset\":%u,\"length\":%u,"
					       "\"uncompressed_length\":%u}",
					       i ? "," : "", t, hex, blobs[i].offset, blobs[i].length,
					       blobs[i].uncompressed_length);
				else
					printf("%s %s offset %u length %u uncompressed %u\n", t, hex, blobs[i].offset,
					       blobs[i].length, rix_blob_plain_size(blobs[i].length, blobs[i].uncompressed_length));
			}
			if (g.json)
				puts("]");
			rix_free(blobs);
		}
	}
	if (rc != 0)
		rc = fail(rc);
	rix_repo_free(r);
	return rc;
}

static int cmd_find_blob(int argc, char **argv)
{
	if (argc < 1)
		return usage();
	rix_repo *r;
	if (open_repo(&r))
		return 1;
	int rc = load_index(r, NULL, NULL), missing = 0;
	if (g.json && rc == 0)
		putchar('[');
	int first = 1;
	for (int i = 0; rc == 0 && i < argc; i++) {
		rix_id id;
		if (parse_id(argv[i], &id)) {
			rc = 1;
			break;
		}
		int found = 0;
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			rix_packed_blob pbs[64];
			size_t n = rix_master_index_lookup_all(pbs, 64, rix_repo_master_index(r), (rix_blob_type)t, &id);
			for (size_t k = 0; k < n && k < 64; k++) {
				char pack[65];
				rix_id_to_hex(pack, &pbs[k].pack_id);
				const char *tn = t == RIX_BLOB_TREE ? "tree" : "data";
				if (g.json)
					printf("%s{\"id\":\"%s\",\"type\":\"%s\",\"pack\":\"%s\",\"offset\":%u,\"length\":%u,"
					       "\"uncompressed_length\":%u}",
					       first ? "" : ",", argv[i], tn, pack, pbs[k].offset, pbs[k].length,
					       pbs[k].uncompressed_length);
				else
					printf("%s %s in pack %s, offset %u, length %u\n", tn, argv[i], pack, pbs[k].offset,
					       pbs[k].length);
				first = 0;
				found = 1;
			}
		}
		if (!found) {
			missing++;
			fprintf(stderr, "rix: blob %s not found\n", argv[i]);
		}
	}
	if (g.json && rc == 0)
		puts("]");
	rix_repo_free(r);
	return rc != 0 ? rc : missing != 0;
}

struct sums {
	uint64_t count[RIX_BLOB_TYPES], stored, plain;
};

static int sum_blob(void *arg, const rix_packed_blob *pb)
{
	struct sums *s = arg;
	s->count[pb->type]++;
	s->stored += pb->length;
	s->plain += rix_blob_plain_size(pb->length, pb->uncompressed_length);
	return 0;
}

static int cmd_stats(int argc, char **argv)
{
	(void)argv;
	if (argc != 0)
		return usage();
	rix_repo *r;
	if (open_repo(&r))
		return 1;
	rix_repo_load_stats st;
	double secs;
	int rc = load_index(r, &st, &secs);
	if (rc != 0) {
		rix_repo_free(r);
		return rc;
	}
	rix_master_index *mi = rix_repo_master_index(r);
	struct sums s = { 0 };
	rc = rix_master_index_foreach(mi, sum_blob, &s);
	size_t npacks = rix_master_index_pack_count(mi); /* no sort: restic names each pack once */
	if (rc != 0) {
		rix_repo_free(r);
		return fail(rc);
	}
	rix_repo_usage u;
	rc = rix_repo_usage_compute(&u, r);
	if (rc != 0) {
		rix_repo_free(r);
		return fail(rc);
	}
	double dedup = u.unique_bytes ? (double)u.logical_bytes / (double)u.unique_bytes : 0.0;
	size_t mem = rix_master_index_memory(mi);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t blobs = s.count[0] + s.count[1];
	if (g.json) {
		printf("{\"total_blob_count\":%llu,\"data_blobs\":%llu,\"tree_blobs\":%llu,\"total_size\":%llu,"
		       "\"total_uncompressed_size\":%llu,\"packs\":%zu,\"index_files\":%zu,\"index_bytes\":%llu,"
		       "\"index_memory\":%zu,\"load_seconds\":%.3f,\"max_rss_kib\":%ld,\"snapshots\":%zu,"
		       "\"files\":%llu,\"logical_size\":%llu,\"referenced_size\":%llu,\"dedup_ratio\":%.3f}\n",
		       (unsigned long long)blobs, (unsigned long long)s.count[0], (unsigned long long)s.count[1],
		       (unsigned long long)s.stored, (unsigned long long)s.plain, npacks, st.loaded,
		       (unsigned long long)st.bytes, mem, secs, ru.ru_maxrss, u.snapshots,
		       (unsigned long long)u.files, (unsigned long long)u.logical_bytes,
		       (unsigned long long)u.unique_bytes, dedup);
	} else {
		printf("Total Blob Count:         %llu (data %llu, tree %llu)\n", (unsigned long long)blobs,
		       (unsigned long long)s.count[0], (unsigned long long)s.count[1]);
		printf("Total Size:               %.3f MiB stored in %zu packs\n", (double)s.stored / 1048576.0, npacks);
		printf("Total Uncompressed Size:  %.3f MiB\n", (double)s.plain / 1048576.0);
		if (s.stored > 0)
			printf("Compression Ratio:        %.2fx\n", (double)s.plain / (double)s.stored);
		printf("Snapshots:                %zu (%llu files, %.3f MiB if restored)\n", u.snapshots,
		       (unsigned long long)u.files, (double)u.logical_bytes / 1048576.0);
		if (u.unique_bytes > 0)
			printf("Deduplication Ratio:      %.2fx (%.3f MiB of distinct data referenced)\n", dedup,
			       (double)u.unique_bytes / 1048576.0);
		if (u.missing_blobs > 0)
			printf("Missing data blobs:       %llu (referenced, not in the index)\n",
			       (unsigned long long)u.missing_blobs);
		printf("Index:                    %zu files, %.3f MiB read, %.3f s to load\n", st.loaded,
		       (double)st.bytes / 1048576.0, secs);
		printf("Index memory:             %.3f MiB (%.1f bytes per blob)\n", (double)mem / 1048576.0,
		       blobs ? (double)mem / (double)blobs : 0.0);
		printf("Peak memory (RSS):        %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
	}
	rix_repo_free(r);
	return 0;
}

static int cmd_key(int argc, char **argv)
{
	if (argc < 1)
		return usage();
	const char *sub = argv[0];
	if (strcmp(sub, "list") && strcmp(sub, "add") && strcmp(sub, "remove") && strcmp(sub, "passwd"))
		return die("key: unknown command %s (list, add, remove, passwd)", sub);
	if ((strcmp(sub, "remove") == 0) != (argc == 2) || argc > 2)
		return usage();
	rix_repo *r;
	if (open_repo(&r))
		return 1;
	int rc = 0;
	if (strcmp(sub, "list") == 0) {
		struct lister l = { 0 };
		if (g.json)
			putchar('[');
		rc = rix_repo_key_list(r, print_name, &l);
		if (g.json)
			puts("]");
		if (!g.json && !g.quiet)
			fprintf(stderr, "(in use: %s)\n", rix_repo_key_name(r));
	} else if (strcmp(sub, "remove") == 0) {
		rc = rix_repo_key_remove(r, argv[1]);
		if (rc == 0 && !g.quiet)
			printf("removed key %s\n", argv[1]);
	} else { /* add, passwd */
		char pw[1024], name[65];
		const char *pf = getenv("RIX_NEW_PASSWORD_FILE");
		int bad = pf != NULL ? read_password_file(pf, pw, sizeof(pw)) : prompt("enter new password: ", pw, sizeof(pw));
		if (bad) {
			rix_repo_free(r);
			return 1;
		}
		if (pw[0] == '\0') {
			rix_repo_free(r);
			return die("an empty password is not a password");
		}
		rc = rix_repo_key_add(name, r, pw, strlen(pw));
		sodium_memzero(pw, sizeof(pw));
		if (rc == 0 && strcmp(sub, "passwd") == 0) {
			char old[65];
			memcpy(old, rix_repo_key_name(r), 65);
			/* The old key goes once the new one is stored; the repository is open with the old. */
			rix_backend *b = rix_repo_backend(r);
			rc = rix_backend_remove(b, RIX_FILE_KEY, old);
		}
		if (rc == 0 && !g.quiet)
			printf("%s key %s\n", strcmp(sub, "add") == 0 ? "saved new" : "changed password: new", name);
	}
	if (rc != 0)
		rc = fail(rc);
	rix_repo_free(r);
	return rc;
}

static void check_msg(void *arg, bool is_error, const char *msg)
{
	(void)arg;
	if (g.json)
		return;
	fprintf(is_error ? stderr : stdout, "%s%s\n", is_error ? "error: " : "", msg);
}

/* The progress line on a terminal: rewritten in place, cleared at the end. */
static void check_progress(void *arg, size_t done, size_t total, uint64_t bytes)
{
	(void)arg;
	fprintf(stderr, "\rchecked %zu of %zu packs (%.0f%%), %.1f MiB read ", done, total,
		total ? 100.0 * (double)done / (double)total : 100.0, (double)bytes / 1048576.0);
}

static int cmd_check(int argc, char **argv)
{
	int read_data = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--read-data") == 0)
			read_data = 1;
		else
			return usage();
	}
	rix_repo *r;
	if (open_repo(&r))
		return 1;
	rix_lock *lock;
	int rc = rix_lock_acquire(&lock, r, 0);
	if (rc != 0) {
		rix_repo_free(r);
		return fail(rc);
	}
	if (!g.quiet && !g.json)
		printf("check %s%s\n", repo_path(), read_data ? " (reading all data)" : "");
	rix_check_report rep;
	int tty = !g.quiet && !g.json && isatty(2);
	rix_check_options co = RIX_CHECK_OPTIONS_INIT;
	co.read_data = read_data;
	co.msg = check_msg;
	co.progress = tty ? check_progress : NULL;
	rc = rix_repo_check(&rep, r, &co);
	if (tty)
		fputs("\r\033[K", stderr);
	rix_lock_free(lock);
	if (g.json)
		printf("{\"errors\":%zu,\"index_files\":%zu,\"damaged_index_files\":%zu,\"packs\":%zu,"
		       "\"missing_packs\":%zu,\"orphaned_packs\":%zu,\"header_mismatches\":%zu,\"damaged_packs\":%zu,"
		       "\"damaged_blobs\":%zu,\"blobs\":%zu,\"duplicate_blobs\":%zu,\"bytes_read\":%llu}\n",
		       rep.errors, rep.index_files, rep.damaged_index_files, rep.packs, rep.missing_packs,
		       rep.orphaned_packs, rep.header_mismatches, rep.damaged_packs, rep.damaged_blobs, rep.blobs,
		       rep.duplicate_blobs, (unsigned long long)rep.bytes_read);
	if (rc != 0 && rc != RIX_ECORRUPT) {
		rix_repo_free(r);
		return fail(rc);
	}
	if (!g.json && !g.quiet) {
		printf("%zu index files, %zu packs, %zu blobs", rep.index_files, rep.packs, rep.blobs);
		if (read_data)
			printf(", %.1f MiB read", (double)rep.bytes_read / 1048576.0);
		printf("\n");
		if (rep.orphaned_packs)
			printf("%zu additional packs were found that no index names\n", rep.orphaned_packs);
		if (rep.errors == 0)
			printf("no errors were found\n");
	}
	rix_repo_free(r);
	if (rep.errors != 0)
		return die("%zu errors found", rep.errors);
	return 0;
}

static int cmd_unlock(int argc, char **argv)
{
	int all = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--remove-all") == 0)
			all = 1;
		else
			return usage();
	}
	rix_repo *r;
	if (open_repo(&r))
		return 1;
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
