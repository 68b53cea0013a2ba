/*
 * tests/cli_beside.h — what the tests of rix's commands beside restic on one repository
 * (test_cli_snapshots.c, test_cli_forget.c) share: a work directory with the paths of the
 * repository and of a source tree below it, and rix run on that repository with its standard
 * error kept. The source file is built into each of those tests (RIX_CLI_PATH: the rix binary).
 */
#ifndef RIX_TEST_CLI_BESIDE_H
#define RIX_TEST_CLI_BESIDE_H

/* <work>, <work>/repo and <work>/src (neither made), set by beside_setup. */
extern char work[256], repo[400], src[400];

/* A fresh work directory <tmp>/<prefix>-XXXXXX and the two paths below it. */
void beside_setup(const char *prefix);
/* Removes the work directory (a cmocka teardown). */
int beside_teardown(void **state);

/*
 * `<env> rix -r repo <args>` (args printf-style): stdout into *out (malloc'd; out NULL: dropped),
 * stderr into *err likewise (through <work>/stderr; "" when there was none). Returns rix's exit
 * status.
 */
int beside_rix(const char *env, char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* beside_rix that must exit with code and, when want is not NULL, say want on stderr; else the
 * test fails. */
void beside_rix_says(const char *env, int code, const char *want, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
