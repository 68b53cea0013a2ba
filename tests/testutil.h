/*
 * tests/testutil.h — helpers shared by the cmocka tests.
 */
#ifndef RIX_TESTUTIL_H
#define RIX_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "rix/types.h"

/* SplitMix64: deterministic pseudo-random numbers. */
uint64_t rix_test_next(uint64_t *state);
void rix_test_fill_random(void *buf, size_t n, uint64_t *state);
void rix_test_random_id(rix_id *id, uint64_t *state);

/*
 * A failing, counting allocator installed with rix_allocator_set. fail_at = N makes the N-th
 * allocation (1-based, counted from install) return NULL, and only that one; 0 never fails.
 * live() = allocations not yet freed (through rix_free) since install.
 */
void rix_test_failalloc_install(long fail_at);
long rix_test_failalloc_count(void);
long rix_test_failalloc_live(void);
void rix_test_failalloc_remove(void);

/*
 * The allocation-failure loop. For at = 1, 2, ...: setup(arg) if given, with libc's allocator;
 * run(arg) with allocation number `at` failing (rix_test_failalloc_install(at); the thread's
 * error cleared first); then check(arg, &round) if given, with libc's allocator again. Every
 * round must (else the test fails, naming `what`, at, the code and rix's message):
 *   - return 0 or RIX_ENOMEM, and with RIX_ENOMEM leave a message (rix_error_last non-empty);
 *   - leave no allocation of its own alive when run returns (rix_test_failalloc_live() == 0),
 *     unless .live says otherwise;
 *   - with .must_fail, fail whenever an allocation failed (a run that returns 0 although one of
 *     its allocations failed fails the test); without, that is allowed (a failed shrink, a
 *     retry inside run) and the loop goes on.
 * The loop ends after the first round that returns 0 having made fewer than `at` allocations:
 * nothing failed in it, so every allocation of the run has been failed once. A round past max
 * fails the test. Returns the number of rounds (the last, fault-free one included); with
 * RIX_TEST_OOM_VERBOSE set in the environment, prints it.
 */
typedef struct rix_test_oom_round {
	long at;    /* the allocation that failed (1-based) */
	int rc;     /* run's return */
	long calls; /* allocations run made, the failed one included */
	long live;  /* allocations run made and did not free (minus frees of older ones) */
} rix_test_oom_round;

enum {
	RIX_TEST_OOM_LIVE_ZERO = 0,    /* live must be 0 after every round */
	RIX_TEST_OOM_LIVE_ON_FAILURE,  /* after a failed round only (a success keeps what it made) */
	RIX_TEST_OOM_LIVE_UNCHECKED,   /* run works on objects made outside it (ASan finds leaks) */
};

typedef struct rix_test_oom {
	const char *what;
	int (*run)(void *arg);
	void *arg;
	long max;
	void (*setup)(void *arg);                                   /* may be NULL */
	void (*check)(void *arg, const rix_test_oom_round *round); /* may be NULL */
	int live;                                                   /* RIX_TEST_OOM_LIVE_* */
	int must_fail;
} rix_test_oom;

long rix_test_oom_run(const rix_test_oom *o);
/* The common case: run(arg) alone, live always 0, a success with a failed allocation allowed. */
long rix_test_oom_loop(const char *what, int (*run)(void *arg), void *arg, long max);

/*
 * Files. rix_test_read_file: the whole file, NUL-terminated (*len excludes the NUL), malloc'd;
 * NULL if unreadable. rix_test_must_read: the same, failing the cmocka test if unreadable.
 * rix_test_data_dir: the fixture directory ($RIX_TEST_DATA, set by CTest, or tests/data).
 * rix_test_data_file: <data dir>/<rel>, read whole, failing the test if unreadable.
 */
void *rix_test_read_file(const char *path, size_t *len);
void *rix_test_must_read(const char *path, size_t *len);
const char *rix_test_data_dir(void);
void *rix_test_data_file(const char *rel, size_t *len);

/*
 * Directories and commands.
 * rix_test_list_ids: the names of 64 characters in dir (IDs), sorted, at most max; how many
 * (0 when dir is missing).
 * rix_test_put_file: writes data[0..n) to <dir>/<name>, failing the test if it cannot.
 * rix_test_run: runs a shell command (printf-style); its stdout goes to *out (malloc'd,
 * NUL-terminated, *len excludes the NUL) when out is not NULL, else it is printed to stderr if
 * the command fails; stderr passes through. Returns the exit status, or -1 if the command could
 * not run or was killed.
 * rix_test_need_restic: fails the test unless the restic binary is on PATH (scripts/deps.sh
 * installs it: a missing oracle is a failure, not a skip).
 * rix_test_mkdtemp: a fresh directory <$TMPDIR or /tmp>/<prefix>-XXXXXX into dir[size].
 * rix_test_rmtree: removes dir and everything under it (read-only files too).
 * Directories rix_test_mkdtemp made and no rix_test_rmtree removed (a test that failed an
 * assertion leaves before its cleanup) are removed at the process's exit (RIX_TEST_KEEP=1: kept).
 */
size_t rix_test_list_ids(const char *dir, char names[][65], size_t max);
void rix_test_put_file(const char *dir, const char *name, const void *data, size_t n);
int rix_test_run(char **out, size_t *len, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;
/* rix_test_run with a va_list. */
int rix_test_vrun(char **out, size_t *len, const char *fmt, va_list ap);
/* rix_test_run of a shell command (printf-style) that must exit 0, else the test fails. */
void rix_test_sh(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2)))
#endif
	;
/*
 * rix_test_tool: a tool's command line, `[cd '<dir>' && ]<cmd>[ -r '<repo>'] <args><redir>` with
 * args printf-style from fmt, through rix_test_run (out and the status as its; len may be NULL).
 * cmd is the environment, the program and its first options as the shell reads them
 * ("RIX_PASSWORD='pw' '/path/to/rix'", "RESTIC_PASSWORD='pw' restic --no-cache -q"); dir NULL
 * stays in the current directory, repo NULL adds no -r; redir follows the arguments (" 2>&1",
 * " >/dev/null", "" for none). The tests' rix(...) and restic(...) are one-line macros over it.
 */
int rix_test_tool(char **out, size_t *len, const char *dir, const char *cmd, const char *repo, const char *redir,
		  const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 7, 8)))
#endif
	;
void rix_test_need_restic(void);
void rix_test_mkdtemp(char *dir, size_t size, const char *prefix);
void rix_test_rmtree(const char *dir);
/* rix_test_rmtree of dir and of dir.out (rix_test_restic's output file). */
void rix_test_remove_tree(const char *dir);
/* A fresh temporary directory (malloc'd path), and its removal (rix_test_remove_tree) with free. */
char *rix_test_new_dir(const char *prefix);
void rix_test_free_dir(char *dir);

/*
 * The real restic binary as the oracle.
 * rix_test_restic: runs `RESTIC_PASSWORD=<password> restic --no-cache -r <dir> <args>`, stdout
 * and stderr into <dir>.out; returns the exit status and, if output is not NULL, the output
 * (malloc'd, NUL-terminated).
 * rix_test_restic_cat_config_equals: `restic cat config` must succeed and print JSON equal to
 * want_json.
 */
int rix_test_restic(const char *dir, const char *password, const char *args, char **output);
void rix_test_restic_cat_config_equals(const char *dir, const char *password, const char *want_json,
				       size_t want_len);

/*
 * Compares the trees under directories a and b (not a and b themselves), entry by entry with
 * lstat: type, permission bits (setuid, setgid, sticky too), uid, gid, mtime to the nanosecond,
 * size, content (files, byte by byte), symlink targets, link counts, device numbers, and the
 * extended attributes of the user namespace. With RIX_CMP_SPARSE, a file of b may not take more
 * blocks than its twin in a. Every difference is printed on stderr (with the path from a).
 * @return how many differences there were.
 */
#define RIX_CMP_SPARSE 1u
#define RIX_CMP_NO_DIR_MTIME 2u /* the directories' mtimes are not compared */
#define RIX_CMP_NO_LINKS 4u     /* link counts are not compared (a part of a tree restored) */
int rix_test_compare_trees(const char *a, const char *b, unsigned flags);

/*
 * In a cmocka test: evaluates expr (a rix call returning 0 or RIX_E*) and fails the test with
 * the call, the code and rix's message unless it returned 0.
 */
#define MUST(expr)                                                                               \
	do {                                                                                     \
		int must_rc_ = (expr);                                                           \
		if (must_rc_ != 0)                                                               \
			fail_msg("%s: %d (%s)", #expr, must_rc_, rix_error_last());              \
	} while (0)

#endif
