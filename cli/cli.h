/*
 * cli/cli.h — what the files of the rix command share: the global options, errors and exit
 * codes, passwords, opening the repository and its index, small output helpers.
 *
 *   main.c        global options, the command table, usage
 *   common.c      the helpers below
 *   select.c      the snapshots a command works on (--host, --tag, --path, IDs, latest)
 *   term.c        byte and time formats, JSON floats, status lines on a terminal
 *   cmd_*.c       one command each, over librix's stable public API only
 */
#ifndef RIX_CLI_H
#define RIX_CLI_H

/* The system headers every command file uses, in one place. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "rix/rix.h"

#define RIX_CLI_VERSION "0.1.0"

/* The global options (main.c parses them, before and after the command). */
struct cli_globals {
	const char *repo;
	const char *repository_file;
	const char *password_file;
	const char *password_command;
	const char *key_hint;
	int json;
	int quiet;
	int version; /* init */
	int no_lock;
	int verbose;
	const char *compression; /* --compression (else RIX_/RESTIC_COMPRESSION): auto, off, max */
	const char *cache_dir;   /* --cache-dir (else RIX_/RESTIC_CACHE_DIR, else the XDG cache folder) */
	int no_cache;            /* --no-cache */
};
extern struct cli_globals g;

/*
 * Exit statuses, restic's (0.17): 0 success, 1 a failure (a usage error too), 3 some data could
 * not be read (backup: the snapshot was made without it), 10 no repository, 11 the lock could not be taken,
 * 12 wrong password; 130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP.
 */
#define EXIT_FAIL 1
#define EXIT_INCOMPLETE 3
#define EXIT_NO_REPO 10
#define EXIT_LOCKED 11
#define EXIT_WRONG_PASSWORD 12

/* "rix: <message>" on stderr; returns 1 (the exit status of a failure). */
int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* die() with rix's last error message (or rc's name); returns 11 for RIX_ELOCKED, else 1. */
int fail(int rc);
/* The usage text on stderr; returns 1 (restic's status for a usage error). */
int usage(void);

/*
 * Signals: SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken by one thread of
 * their own (signals_start, first thing in main, before any other thread), which releases the
 * lock the command holds (cli_lock) and exits 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
 */
void signals_start(void);
/*
 * Takes the repository's lock (shared or exclusive) unless --no-lock; *out is NULL then. Returns
 * 0, or the exit status of a failure (reported). A lock taken so is released by cli_unlock.
 */
int cli_lock(rix_lock **out, rix_repo *r, bool exclusive);
void cli_unlock(rix_lock *l);
/* open_repo, then cli_lock; close_repo releases both (either may be NULL). */
int open_repo_locked(rix_repo **r, rix_lock **l, bool exclusive);
void close_repo(rix_repo *r, rix_lock *l);

/*
 * The repository's password into buf, as restic finds it: --password-file or --password-command
 * (else RIX_/RESTIC_PASSWORD_FILE or _COMMAND; both at once is an error), RIX_/RESTIC_PASSWORD,
 * a line of standard input when it is not a terminal, else the terminal (twice when is_new).
 * Files and command output lose surrounding white space (a CRLF too). 0, or 1 (reported; buf
 * wiped). The caller wipes buf (sodium_memzero) once used.
 */
int get_password(char *buf, size_t cap, int is_new);
/* A new key's password: file (--new-password-file), else RIX_/RESTIC_NEW_PASSWORD_FILE, else the terminal twice. */
int get_new_password(char *buf, size_t cap, const char *file);
/* g.repo from -r, --repository-file, RIX_/RESTIC_REPOSITORY, RIX_/RESTIC_REPOSITORY_FILE. 0 or 1. */
int resolve_repository(void);
/* The compression mode repositories are opened with: --compression, else RIX_/RESTIC_COMPRESSION,
 * else auto (restic's values: auto, off, max). 0, or 1 (reported: another value). */
int resolve_compression(void);
/* The mode resolve_compression found. */
rix_compression cli_compression(void);
void index_error(void *arg, const char *name, int code, const char *msg);
/* Loads the index; an index file that cannot be read fails it (each named on stderr). 0 or 1. */
int load_index(rix_repo *r, rix_repo_load_stats *st, double *secs);
void load_progress(void *arg, size_t done, size_t total);
double now_s(void);
int open_backend(const char *path, int create, rix_backend **b);
/* The REST backend's options (--cacert, --insecure-tls, --limit-*: bytes/s; RIX_REST_TRIES,
 * RIX_REST_FIRST_DELAY_MS). 0, or RIX_EINVAL (an unreadable CA file). */
int rest_settings(const char *cacert, bool insecure_tls, uint64_t limit_upload, uint64_t limit_download);
/* Opens the repository (-r, ...): 0, or the exit status of a failure (reported: 10, 12, 1). */
int open_repo(rix_repo **r);
int parse_id(const char *hex, rix_id *id);
int prompt(const char *what, char *buf, size_t cap);
/* s as a JSON string (quotes included) on stdout / f, escaped as restic's: rix_json_quote. */
void put_json_string(const char *s);
void fput_json_string(FILE *f, const char *s);
/* The same for the bytes s[0..n) (a node's name or link target: no NUL at the end). */
void fput_json_bytes(FILE *f, const char *s, size_t n);
int read_password_file(const char *path, char *buf, size_t cap);

/* The repository as given (-r, RIX_REPOSITORY, ...; "local:" dropped): what opens it. */
const char *repo_location(void);
/* The same as shown to the user, text and JSON: a URL's password as "user:***@". */
const char *repo_path(void);

/* rix_backend_list callback printing file names (text: one a line; JSON: an array, n counts). */
struct lister {
	int n;
	const char *type;
};
int print_name(void *arg, const char *name, uint64_t size);

/* ---- choosing snapshots (select.c) ---------------------------------------------------------- */

/* argv[*i] is `name VALUE` (advancing *i) or `name=VALUE`: 1 with *v set, else 0. */
int flag_value(const char **v, int argc, char **argv, int *i, const char *name);

/* --host / -H, --tag, --path, repeatable, as restic's snapshot filter (rix/snapshot.h). */
struct filter_flags {
	rix_snapshot_filter f; /* valid after filter_flags_done */
	const char **hosts, **tags, **paths;
};
/* 1 when argv[*i] was one of them (taken, *i advanced past its value), 0 if not, -1 on an error. */
int filter_flag(struct filter_flags *ff, int argc, char **argv, int *i);
void filter_flags_done(struct filter_flags *ff);
void filter_flags_free(struct filter_flags *ff);

/*
 * The snapshots args[0..nargs) name (IDs, prefixes, "latest" under f), or with no args every
 * snapshot that passes f, as restic picks them: *out (rix_snapshot_list_free) holds them oldest
 * first. An argument that names none, and an unreadable snapshot, are reported on stderr and
 * skipped, and set *bad. 0, or the exit status of a failure (reported).
 */
/* Appends s (borrowed) to the growing array *v of *n strings. 0, or 1 (out of memory, said). */
int push_string(const char ***v, size_t *n, const char *s);

int select_snapshots(rix_snapshot_list **out, int *bad, rix_repo *r, const rix_snapshot_filter *f, char **args,
		     int nargs);

/* ---- output of long commands (term.c) ------------------------------------------------------ */

/* restic's ui.FormatBytes ("1.234 GiB") and FormatSeconds (M:SS, H:MM:SS) into o[cap]. */
void human(char *o, size_t cap, uint64_t b);
void clock_str(char *o, size_t cap, uint64_t sec);
/* v on stdout as Go's JSON writes a float64: the shortest form that reads back the same. */
void put_float(double v);
/* Columns of the terminal on stdout (80 when it does not say). */
size_t term_width(void);
/*
 * Draws lines[0..k) as the status on stdout (k = 0: clears it) over the `shown` lines there,
 * each cut to the terminal's width, control bytes as '?'; the cursor ends at the first line.
 * @return k, the lines now shown. The caller serializes output.
 */
int term_draw(int shown, char *const *lines, int k);
/* Progress calls a second: RIX_ or RESTIC_PROGRESS_FPS (at most 60), else 10 on a terminal and
 * 4 for --json; as milliseconds between calls. */
unsigned progress_interval_ms(void);

/* ---- showing snapshots (cmd_snapshots.c) ---------------------------------------------------- */

/*
 * l as restic 0.14's table (PrintSnapshots), oldest first as l is; reasons (NULL: none): each
 * snapshot's Reasons cell (lines joined by '\n'), a column before Paths, not with compact.
 * 0, or 1 (reported).
 */
int print_snapshot_table(const rix_snapshot_list *l, bool compact, char *const *reasons);
/* l's snapshots as restic's --json shows them (with "id", "short_id"), comma-separated. 0, or 1. */
int print_json_snapshots(const rix_snapshot_list *l);
/* "snapshots for (host [h], tags [a, b], paths [/p]):" as restic's PrintSnapshotGroupHeader. */
void print_group_header(const rix_snapshot_group *gr);

/* ---- nodes and snapshots as restic 0.14 prints them (nodefmt.c) ------------------------------ */

/* "file", "dir", "symlink", "dev", "chardev", "fifo", "socket". */
const char *node_type_name(rix_node_type t);
/* Go's os.FileMode.String() ("drwxr-xr-x", "Lrwxrwxrwx", "-rw-r--r--"). */
#define GO_FILEMODE_MAX 24
void go_filemode(char out[GO_FILEMODE_MAX], uint32_t mode);
/* t in the local zone as "2006-01-02 15:04:05" (restic's TimeFormat). */
void local_time(char out[64], const rix_time *t);
/* Go's Time.String() of a time read from a snapshot ("2022-08-01 10:00:00.5 +0200 CEST"). */
void go_time_string(char *out, size_t cap, const rix_time *t);
/* t as a JSON string (RFC 3339 with nanoseconds, its zone). */
void put_time_json(const rix_time *t);
/* restic's formatNode line: the path, or with long_format "mode uid gid size mtime path[ -> target]". */
void print_node(const char *path, const rix_node *n, bool long_format);
/* restic 0.14's `ls --json` node line. */
void print_node_json(const char *path, const rix_node *n);
/* restic 0.14's snapshot JSON (its members, then "id" and "short_id"), extra (",\"k\":v" or
 * NULL) before the closing brace, and a newline. 0, or 1 (reported: out of memory). */
int print_snapshot_json(const rix_snapshot *sn, const char *extra);
/* Go's path.Clean of an absolute path, in place; restic's fs.HasPathPrefix of two clean ones. */
void path_clean(char *p);
bool has_path_prefix(const char *base, const char *p);
/* *buf (realloc'd, *cap bytes) holds at least need bytes. 0, or 1 (reported). */
int grow_buf(char **buf, size_t *cap, size_t need);

/* ---- sets of blobs (idset.c) --------------------------------------------------------------- */

/* (type, ID) pairs, as restic's BlobSet; zero-initialized is empty. m[t]: the IDs of type t, in
 * the order added (NULL until the first). */
struct idset {
	rix_indexmap *m[2];
};
/* 0, or 1 (reported: out of memory). */
int idset_add(struct idset *s, rix_blob_type t, const rix_id *id);
bool idset_has(const struct idset *s, rix_blob_type t, const rix_id *id);
void idset_free(struct idset *s);

int cmd_init(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_find_blob(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_unlock(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_snapshots(int argc, char **argv);
int cmd_tag(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_forget(int argc, char **argv);
int cmd_prune(int argc, char **argv);
/* prune's flags at argv[*i] (prune and forget --prune): 1 taken, 0 not one, -1 a bad value (reported). */
int prune_flag(rix_prune_options *o, int argc, char **argv, int *i);
/* Loads r's index and prunes it (r locked exclusively by the caller), printing as restic 0.14's
 * prune; dry_run: the plan only. 0, or the exit status of a failure (reported). */
int run_prune(rix_repo *r, const rix_prune_options *o, bool dry_run);
int cmd_ls(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_find(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_rebuild_index(int argc, char **argv);

#endif
